"""Client-side tools for the disclosure-control service, installable on their own
(``pip install ./client``): the HTTP client (:class:`Client`, one method per ``/v1``
route; :mod:`sdc_client.client`), pandas helpers (:mod:`sdc_client.frames`, extra
``pandas``), the ``sdc`` command line (:mod:`sdc_client.cli`) and tau-ARGUS files
(:mod:`sdc_client.tauargus`)."""

from .client import Client, Routes
from .errors import ErrorDetail, ServiceError
from .local import LocalService, ServiceNotInstalled
from .tauargus import (
    STATUS_CODES,
    TauArgusFormatError,
    format_hrc,
    format_pattern,
    parse_hrc,
    read_codelist,
    read_hrc,
    tau_status,
)

__all__ = [
    "Client",
    "ErrorDetail",
    "LocalService",
    "Routes",
    "ServiceError",
    "ServiceNotInstalled",
    "STATUS_CODES",
    "TauArgusFormatError",
    "format_hrc",
    "format_pattern",
    "parse_hrc",
    "read_codelist",
    "read_hrc",
    "tau_status",
]
