"""The service's error replies as exceptions.

Every 4xx of the service has one shape (``schemas/errors.py``, README "Errors"):
``{"error": "invalid_request", "detail": [{"field", "cell", "key", "message"}]}``; a
:class:`ServiceError` carries it, so that a caller can point at the field and the cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ErrorDetail:
    """One thing wrong with a request: the dotted ``field``, the ``cell``'s number in the
    request's ``cells`` and its ``key`` (where there is a cell), and the message."""

    message: str
    field: str | None = None
    cell: int | None = None
    key: list[str] | None = None

    def __str__(self) -> str:
        where = []
        if self.cell is not None:
            where.append(f"cell {self.cell}" + (f" {self.key}" if self.key else ""))
        if self.field:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


@dataclass
class ServiceError(Exception):
    """The service refused a request (or could not be reached in ``retries``):
    ``status`` the HTTP status, ``error`` its short reason (``invalid_request``,
    ``payload_too_large``, ``unavailable``, ...), ``detail`` what was wrong, and
    ``retry_after`` the seconds the service asked to wait (503, 429), if it said."""

    status: int
    error: str
    detail: list[ErrorDetail] = field(default_factory=list)
    retry_after: float | None = None

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        lines = [f"{self.status} {self.error}"] + [f"  {d}" for d in self.detail]
        return "\n".join(lines)

    @property
    def field(self) -> str | None:
        """The first detail's field (most errors have one detail)."""
        return self.detail[0].field if self.detail else None

    @property
    def cell(self) -> int | None:
        """The first detail's cell number in the request."""
        return self.detail[0].cell if self.detail else None

    @classmethod
    def from_reply(
        cls, status: int, body: Any, *, reason: str = "error", retry_after: float | None = None
    ) -> ServiceError:
        """From an error reply's decoded ``body``; a body of another shape (a proxy's
        page) becomes one detail holding its text."""
        if isinstance(body, Mapping) and isinstance(body.get("error"), str):
            raw = body.get("detail")
            details = [
                ErrorDetail(
                    message=str(d.get("message", "")),
                    field=d.get("field"),
                    cell=d.get("cell"),
                    key=d.get("key"),
                )
                for d in (raw if isinstance(raw, list) else [])
                if isinstance(d, Mapping)
            ]
            return cls(status, body["error"], details, retry_after)
        text = body if isinstance(body, str) else repr(body)
        return cls(status, reason, [ErrorDetail(message=text[:500])], retry_after)
