"""Client-side tools for the disclosure-control service, installable on their own
(``pip install ./client``): tau-ARGUS files (:mod:`sdc_client.tauargus`)."""

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
    "STATUS_CODES",
    "TauArgusFormatError",
    "format_hrc",
    "format_pattern",
    "parse_hrc",
    "read_codelist",
    "read_hrc",
    "tau_status",
]
