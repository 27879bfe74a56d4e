"""Structured logs: one JSON object a line, one access line per request, never a body.

Access lines (logger ``sdc.access``) carry the request id, method, route *template* (never
the raw path or query, which could hold data), status, duration and sizes, and the key id
and role of the caller; a 401 line carries the key id the request presented (only a
well-formed id of an ``<id>.<secret>`` API key, never a secret:
``service.api_keys.presented_id``) and no role, so that an operator can tell a revoked key
still in use from someone trying keys. Other records carry the request id of the request
they happened in. Exceptions are logged by type and stack frames only: an exception's
message can quote the input that caused it (a contribution, a respondent id).
"""

from __future__ import annotations

import contextvars
import logging
import time
import traceback

import orjson

#: The id of the request being served, for records logged while serving it.
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sdc_request_id", default=None
)
ACCESS = logging.getLogger("sdc.access")
#: Fields an access record carries (``extra`` of ``ACCESS.info``).
ACCESS_FIELDS = (
    "request_id",
    "method",
    "route",
    "status",
    "duration_ms",
    "request_bytes",
    "reply_bytes",
    "key_id",
    "role",
)


def _stack(exc_info) -> dict:
    kind, _exc, tb = exc_info
    frames = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(tb)]
    return {"exc_type": getattr(kind, "__name__", str(kind)), "stack": frames}


class JSONFormatter(logging.Formatter):
    """A record as one JSON line: ts, level, logger, msg and the record's known fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in ACCESS_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if "request_id" not in entry and (rid := request_id.get()) is not None:
            entry["request_id"] = rid
        if record.exc_info and record.exc_info[0] is not None:
            entry.update(_stack(record.exc_info))
        return orjson.dumps(entry).decode()


def config(level: str = "info") -> dict:
    """``logging.config.dictConfig`` for the service and uvicorn (passed to uvicorn as its
    ``log_config`` so that worker processes log the same way). uvicorn's own access log is
    off: ours carries the route template and the caller instead of the raw path."""
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "service.logs.JSONFormatter"}},
        "handlers": {
            "stdout": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stdout",
            }
        },
        "loggers": {
            "sdc": {"handlers": ["stdout"], "level": level, "propagate": False},
            "uvicorn": {"handlers": ["stdout"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
        "root": {"handlers": ["stdout"], "level": "WARNING"},
    }


def setup(level: str = "info") -> None:
    """Configure logging in this process (the parent of uvicorn's workers)."""
    import logging.config

    logging.config.dictConfig(config(level))
