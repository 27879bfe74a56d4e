"""A client of the service's ``/v1`` routes, on httpx (synchronous).

Every route is a method taking the request as a dict, as keyword arguments, or both (the
keywords win; a keyword given as ``None`` is left out, so ``profile=None`` sends no
profile), and returning the decoded reply typed as in :mod:`sdc_client.types`. An error
reply raises :class:`~sdc_client.errors.ServiceError` with the service's field and cell.

Retries: the service answers 503 with ``Retry-After`` when its compute pool is full or it
is shutting down, and 429 with ``Retry-After`` when a filter-role key has spent its cell
budget (README, "Errors"). Both are retried, waiting the larger of ``Retry-After`` and an
exponential backoff (``backoff * 2**attempt``), each wait capped at ``max_backoff``, for at
most ``retries`` more attempts. Every route is a computation without side effects on the
service (it is stateless), so a connection that fails before a reply (refused, reset, or
closed by a server that is restarting) is retried the same way; a read timeout is not, as
the request may still be running there.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

import httpx

from .errors import ServiceError
from .types import (
    AuditReply,
    ConversionReply,
    FilterReply,
    FrequencyReply,
    SensitivityReply,
    SuppressReply,
)

#: The routes, by method name, under ``/v1``.
ROUTES = {
    "sensitivity": "/sensitivity",
    "frequency_sensitivity": "/frequency/sensitivity",
    "conversions": "/conversions",
    "audit": "/audit",
    "suppress": "/suppress",
    "filter": "/filter",
}
#: Statuses that mean "later", with the service's ``Retry-After``.
RETRY_STATUSES = frozenset({429, 503})
#: Failures before any reply: the request did not run (or ran without effect), so repeat it.
RETRY_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
)


def request_body(request: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with ``fields`` on top, ``None`` keywords left out."""
    body = dict(request or {})
    body.update({k: v for k, v in fields.items() if v is not None})
    return body


def encode(body: Mapping[str, Any]) -> bytes:
    """JSON bytes of a request; NaN and infinities are refused here (``ValueError``), as the
    service would refuse them (they are not JSON)."""
    return json.dumps(body, allow_nan=False, separators=(",", ":")).encode()


class Routes:
    """One method per ``/v1`` route over :meth:`post`, which subclasses provide: over
    HTTP (:class:`Client`) or in this process (:class:`sdc_client.local.LocalService`)."""

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def sensitivity(
        self, request: Mapping[str, Any] | None = None, /, **fields: Any
    ) -> SensitivityReply:
        """``POST /v1/sensitivity``: ``cells`` (key, contributions or summary), ``rules``
        or ``profile``."""
        return cast(
            SensitivityReply, self.post(ROUTES["sensitivity"], request_body(request, fields))
        )

    def frequency_sensitivity(
        self, request: Mapping[str, Any] | None = None, /, **fields: Any
    ) -> FrequencyReply:
        """``POST /v1/frequency/sensitivity``: ``dimensions``, ``keys``, ``targets``,
        ``cells`` (key, count), ``rules``."""
        return cast(
            FrequencyReply,
            self.post(ROUTES["frequency_sensitivity"], request_body(request, fields)),
        )

    def conversions(
        self, request: Mapping[str, Any] | None = None, /, **fields: Any
    ) -> ConversionReply:
        """``POST /v1/conversions``: ``rule``, optionally ``negative_factor``."""
        return cast(
            ConversionReply, self.post(ROUTES["conversions"], request_body(request, fields))
        )

    def audit(self, request: Mapping[str, Any] | None = None, /, **fields: Any) -> AuditReply:
        """``POST /v1/audit``: ``structure``, ``cells`` (with ``suppressed``), and ``rules``,
        ``profile`` or ``counts``; optionally ``time_limit``."""
        return cast(AuditReply, self.post(ROUTES["audit"], request_body(request, fields)))

    def suppress(self, request: Mapping[str, Any] | None = None, /, **fields: Any) -> SuppressReply:
        """``POST /v1/suppress``: ``structure``, ``cells``, and ``rules``, ``profile`` or
        ``counts``; optionally ``method``, ``cost``, ``time_limit``."""
        return cast(SuppressReply, self.post(ROUTES["suppress"], request_body(request, fields)))

    def filter(self, request: Mapping[str, Any] | None = None, /, **fields: Any) -> FilterReply:
        """``POST /v1/filter``: ``query``, ``cells``, and ``profile`` or ``policy``."""
        return cast(FilterReply, self.post(ROUTES["filter"], request_body(request, fields)))


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds or an HTTP date; ``None`` if absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


class Client(Routes):
    """The service at ``url`` (``http://host:8787``; ``/v1`` is added), with an API key
    (sent as ``X-API-Key``) when the service has keys.

    ``timeout``: seconds per attempt (a suppression may take the service's whole
    ``SDC_MAX_SOLVER_SECONDS``). ``retries``: attempts after the first on 503/429 and on
    connection failures; waits as in the module's docstring. ``transport``, ``sleep``:
    for tests (``httpx.MockTransport``, a sleep that records). Use it as a context
    manager, or :meth:`close` it.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        self.url = url.rstrip("/")
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.url + "/v1", headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _wait(self, attempt: int, retry_after: float | None) -> None:
        delay = self.backoff * 2**attempt
        if retry_after is not None:
            delay = max(delay, retry_after)  # never sooner than the service asked
        self._sleep(min(delay, self.max_backoff))

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        """``POST /v1{path}`` with ``body``; the decoded reply, retried as documented."""
        data = encode(body)
        attempt = 0
        while True:
            try:
                reply = self._http.post(path, content=data)
            except RETRY_ERRORS as exc:
                if attempt >= self.retries:
                    raise ServiceError.from_reply(
                        503,
                        f"{type(exc).__name__}: {exc} (after {attempt + 1} attempts)",
                        reason="unreachable",
                    ) from exc
                self._wait(attempt, None)
                attempt += 1
                continue
            if reply.is_success:
                return reply.json()
            retry_after = retry_after_seconds(reply.headers.get("retry-after"))
            if reply.status_code in RETRY_STATUSES and attempt < self.retries:
                self._wait(attempt, retry_after)
                attempt += 1
                continue
            try:
                payload: Any = reply.json()
            except ValueError:
                payload = reply.text
            raise ServiceError.from_reply(
                reply.status_code,
                payload,
                reason=reply.reason_phrase or "error",
                retry_after=retry_after,
            )
