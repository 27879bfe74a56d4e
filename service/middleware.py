"""ASGI middleware: request id, access log, metrics, admission and pace of request bodies,
the body-size limit, and a proper 503 for requests the server cancels.

Written as plain ASGI (not BaseHTTPMiddleware) because they sit on the path of every
request of the online filter, where a few hundred microseconds matter.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping

import orjson
from starlette.exceptions import HTTPException

from . import collector, logs
from .api import compute_pool
from .api.errors import REASONS
from .metrics import REJECTION_REASONS, Metrics

_SANE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
#: Methods counted by name; any other (a client may send any token) counts as "other".
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _request_id(headers) -> str:
    """The caller's X-Request-ID when it is a plain token (it goes into logs and a
    header), else a new random one."""
    for name, value in headers:
        if name == b"x-request-id":
            if _SANE_REQUEST_ID.fullmatch(value):
                return value.decode()
            break
    return os.urandom(12).hex()


class RequestLogMiddleware:
    """Per request: an id (echoed as ``X-Request-ID``), metrics by route template (bounded
    label cardinality), one access log line, and the app's compute pool for
    :func:`service.api.compute_pool.compute`."""

    def __init__(self, app, metrics: Metrics, pool: compute_pool.ComputePool | None = None):
        self.app = app
        self.metrics = metrics
        self.pool = pool
        # (route, method, status): its request counter and latency histogram. A metric's
        # labels() costs microseconds on every request; the keys are bounded like the labels.
        self._series: dict[tuple[str, str, int], tuple] = {}

    def _observe(self, route: str, method: str, status: int, seconds: float) -> None:
        series = self._series.get((route, method, status))
        if series is None:
            series = self._series[route, method, status] = (
                self.metrics.requests.labels(route, method, str(status)),
                self.metrics.latency.labels(route),
            )
        series[0].inc()
        series[1].observe(seconds)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        rid = _request_id(scope["headers"])
        # Not reset afterwards: each request runs in a task of its own, and the app's
        # handler of unexpected errors runs outside this middleware but must still log the id.
        logs.request_id.set(rid)
        compute_pool.current_pool.set(self.pool)
        compute_pool.inline_allowed.set(scope["path"] in compute_pool.INLINE_ROUTES)
        status = 500
        sizes = [0, 0]  # request bytes, reply bytes
        header = (b"x-request-id", rid.encode())

        async def counting_receive():
            message = await receive()
            if message["type"] == "http.request":
                sizes[0] += len(message.get("body", b""))
            return message

        async def send_with_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            elif message["type"] == "http.response.body":
                sizes[1] += len(message.get("body", b""))
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, counting_receive, send_with_status)
        finally:
            self.metrics.in_flight.dec()
            elapsed = time.perf_counter() - start
            route = scope.get("route")
            label = getattr(route, "path", "unmatched")
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self._observe(label, method, status, elapsed)
            reason = REJECTION_REASONS.get(status)
            if reason is not None:
                self.metrics.rejected.labels(reason).inc()
            caller = scope.get("state", {}).get("caller")
            logs.ACCESS.log(
                40 if status >= 500 else 20,
                "request",
                extra={
                    "request_id": rid,
                    "method": method,
                    "route": label,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 3),
                    "request_bytes": sizes[0],
                    "reply_bytes": sizes[1],
                    "key_id": getattr(caller, "key_id", None),
                    "role": getattr(caller, "role", None),
                },
            )


class AdmissionMiddleware:
    """Request bodies must keep coming: at least ``min_rate`` bytes per second once
    ``grace`` seconds have passed, and the whole body within ``body_seconds``, else 408
    (a slow sender would otherwise hold its task, and for a large body a pool slot, for as
    long as it likes). A large ``/v1`` body also needs a slot of the pool's capacity of
    large requests before it is read (see :mod:`service.api.compute_pool`): 503 with
    Retry-After when they are taken."""

    def __init__(
        self,
        app,
        pool: compute_pool.ComputePool,
        body_seconds: float = 30.0,
        min_rate: float = 32768,
        grace: float = 5.0,
    ):
        self.app = app
        self.pool = pool
        self.body_seconds = body_seconds
        self.min_rate = min_rate
        self.grace = grace

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        large = scope["path"].startswith("/v1/") and _large(scope)
        if large and not self.pool.admit_request():
            refusal = compute_pool.ShuttingDown() if self.pool.draining else compute_pool.PoolFull()
            await send_error(send, 503, refusal.detail, headers=refusal.headers)
            return
        try:
            await self.app(scope, self._paced(receive), send)
        finally:
            if large:
                try:
                    await _free(scope.get("state", {}))
                finally:
                    self.pool.release_request()
                    # The collector looks again once no large request is left: another
                    # one's parts, hidden from it as they are validated, would be looked
                    # at in one pass (0.25 s of the loop for a 1.9 MB body of errors that
                    # came while a 22 MB body was being freed).
                    if not self.pool.large_requests:
                        collector.look_again()

    def _paced(self, receive):
        """``receive`` with a deadline on each wait for the body: the earlier of
        ``body_seconds`` after the first read and the time by which the bytes received so
        far would be ``min_rate`` per second after ``grace``. Untimed once the body is
        complete (a later receive waits for the client's disconnect)."""
        loop = asyncio.get_running_loop()
        start: float | None = None
        received = 0
        done = False

        async def paced_receive():
            nonlocal start, received, done
            if done:
                return await receive()
            now = loop.time()
            start = now if start is None else start
            by_rate = start + self.grace + received / self.min_rate
            deadline = min(start + self.body_seconds, by_rate)
            try:
                # Bytes already buffered are returned without waiting, even past the
                # deadline: only a wait for the client can time out.
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                # Passes FastAPI's body reader to the error handler, like BodyTooLarge.
                raise HTTPException(
                    408,
                    (
                        f"the request body arrived slower than {self.min_rate:g} bytes per second"
                        if by_rate < start + self.body_seconds
                        else f"the request body did not arrive within {self.body_seconds:g} seconds"
                    ),
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                done = not message.get("more_body", False)
            else:
                done = True
            return message

        return paced_receive


def _has_body(scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value != b"0"
        if name == b"transfer-encoding":
            return True
    return False


def _large(scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return not value.isdigit() or int(value) > compute_pool.LARGE_BODY_BYTES
    return scope["method"] not in ("GET", "HEAD")  # streamed: size unknown


async def _free(state: dict) -> None:
    """A large request's body once it is answered: its cells (``state["cells"]``, for
    error replies) would live on with the connection's last request, and the body is
    freed in pieces (:func:`service.collector.take_apart`)."""
    state.pop("cells", None)
    body = state.pop("body", None)
    if body is not None:
        await collector.take_apart(body)


class BodyLimitMiddleware:
    """Answers 413 for bodies over ``max_bytes``, by Content-Length or while streaming."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                await send_error(send, 413, self._message)
                return
        received = 0
        responded = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # An HTTPException passes FastAPI's body reader untouched and reaches
                    # the app's error handler, which answers 413 in the usual error shape.
                    raise BodyTooLarge(self._message)
            return message

        async def guarded_send(message):
            nonlocal responded
            responded = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            if not responded:
                await send_error(send, 413, self._message)

    @property
    def _message(self) -> str:
        return f"request body exceeds the limit of {self.max_bytes} bytes"


class BodyTooLarge(HTTPException):
    def __init__(self, message: str):
        super().__init__(413, message)


class CancelledMiddleware:
    """A request the server cancels before it is answered (its graceful-shutdown period ran
    out) gets 503 with Retry-After in the service's error shape instead of uvicorn's
    plain-text 500: the caller can retry elsewhere. The work a pool thread was doing for it
    goes on (a thread cannot be stopped) but nobody waits for it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except asyncio.CancelledError:
            if started:
                raise
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Answered instead: the task ends normally, so uvicorn neither logs an
                # "Exception in ASGI application" nor writes its own 500.
                task.uncancel()
            refusal = compute_pool.ShuttingDown()
            await send_error(send, 503, refusal.detail, headers=refusal.headers)


def error_body(status: int, message: str) -> bytes:
    """The JSON body of an error reply in the service's usual shape, for replies written
    outside the app's error handlers (ASGI middleware, the connection protocol)."""
    return orjson.dumps(
        {
            "error": REASONS.get(status, "error"),
            "detail": [{"field": None, "cell": None, "key": None, "message": message}],
        }
    )


async def send_error(
    send, status: int, message: str, headers: Mapping[str, str] | None = None
) -> None:
    """An error reply in the service's usual shape, sent from ASGI middleware (before the
    app's error handlers)."""
    body = error_body(status, message)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
