"""The service's pipeline in this process, behind the same methods as the HTTP client.

For the command line without ``--url`` and the pandas helpers without a client: the
request is encoded to JSON and validated from those bytes by the wire schemas
(``schemas.*.model_validate_json``, as the routes' ``validated`` does), then runs the same
pipeline functions the routes call (``service/api/suppress.py``, ``audit.py``,
``sensitivity.py``, ``conversions.py``), and the reply is encoded and decoded the way the
server's ``JSONBytes`` does, so a reply here and one from a server are the same JSON.
Errors become the :class:`~sdc_client.errors.ServiceError` the server would answer (422
with field and cell, 413 for limits), using the server's own mapping of validation errors.

The caller is an analyst (every diagnostic shown), as every caller of a server without an
API key file is. Settings (profiles, limits) come from the ``SDC_*`` environment, as for
``sdc-service``. The server's package is imported on first use: the client installs
without it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from .client import ROUTES, Routes, encode
from .errors import ErrorDetail, ServiceError

NOT_INSTALLED = (
    "running without --url needs the service itself (its package 'sdc-service' with "
    "numpy, scipy, highspy, pydantic and fastapi) installed in this environment; install "
    "it (pip install -e . in the service's checkout) or give the URL of a running service "
    "with --url"
)


class ServiceNotInstalled(RuntimeError):
    """The in-process path was asked for but the server's package cannot be imported."""


class LocalService(Routes):
    """:class:`~sdc_client.client.Routes` computed in this process."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        try:
            import orjson
            from pydantic import ValidationError

            from service.api.errors import _validation_detail
            from service.config import Settings
            from service.pipeline.errors import LimitError
            from service.sdc.errors import InputError
        except ImportError as exc:
            raise ServiceNotInstalled(f"{NOT_INSTALLED} ({exc})") from exc
        self._orjson = orjson
        self._validation_error = ValidationError
        self._validation_detail = _validation_detail
        self._input_error, self._limit_error = InputError, LimitError
        self.settings = Settings.from_env(dict(env) if env is not None else None)
        self._runs: dict[str, Callable[[bytes], Any]] = {
            ROUTES["sensitivity"]: self._sensitivity,
            ROUTES["audit"]: self._audit,
            ROUTES["suppress"]: self._suppress,
            ROUTES["conversions"]: self._conversions,
        }

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        run = self._runs.get(path)
        if run is None:
            raise NotImplementedError(f"/v1{path} runs on a server only (give its URL)")
        raw = encode(body)
        try:
            reply = run(raw)
        except self._validation_error as exc:
            parsed = json.loads(raw)
            details = [self._validation_detail(dict(e), parsed) for e in exc.errors()]
            raise ServiceError(
                422, "invalid_request", [ErrorDetail(**d) for d in details]
            ) from None
        except self._input_error as exc:
            cells = json.loads(raw).get("cells") or []
            cell = exc.cell if exc.cell is not None and 0 <= exc.cell < len(cells) else None
            key = cells[cell].get("key") if cell is not None else None
            raise ServiceError(
                422, "invalid_request", [ErrorDetail(exc.message, exc.field, cell, key)]
            ) from None
        except self._limit_error as exc:
            raise ServiceError(
                413, "payload_too_large", [ErrorDetail(exc.message, exc.field)]
            ) from None
        # As the server's JSONBytes writes it and an HTTP client reads it.
        return json.loads(self._orjson.dumps(reply, option=self._orjson.OPT_SERIALIZE_NUMPY))

    # Each as its route in service/api/, without the HTTP around it.

    def _sensitivity(self, raw: bytes) -> Any:
        from schemas.sensitivity import SensitivityRequest
        from service.pipeline.limits import check_cell_count
        from service.pipeline.rules import resolve_rules
        from service.pipeline.sensitivity import assess

        body = SensitivityRequest.model_validate_json(raw)
        check_cell_count(len(body.cells), self.settings.max_cells)
        spec, disclose = resolve_rules(body.rules, body.profile, self.settings)
        return assess(body, spec, disclose, True)[0]

    def _audit(self, raw: bytes) -> Any:
        from schemas.tables import AuditRequest
        from service.pipeline.audit import audit
        from service.pipeline.limits import check_cell_count
        from service.pipeline.tables import resolve_table_request

        body = AuditRequest.model_validate_json(raw)
        check_cell_count(len(body.cells), self.settings.max_cells)
        resolved = resolve_table_request(body, self.settings)
        return audit(body, resolved, True)[0]

    def _suppress(self, raw: bytes) -> Any:
        from schemas.tables import SuppressRequest
        from service.pipeline.limits import check_cell_count
        from service.pipeline.suppress import protect
        from service.pipeline.tables import resolve_table_request

        started = time.perf_counter()  # the time limit is the whole call's, as on a server
        body = SuppressRequest.model_validate_json(raw)
        check_cell_count(len(body.cells), self.settings.max_cells)
        resolved = resolve_table_request(body, self.settings)
        return protect(body, resolved, started, True)

    def _conversions(self, raw: bytes) -> Any:
        from schemas.conversions import ConversionRequest
        from service.pipeline.rules import rule_equivalents

        reply = rule_equivalents(ConversionRequest.model_validate_json(raw))
        # The route answers with its response model, leaving out null fields.
        return reply.model_dump(mode="json", exclude_none=True)
