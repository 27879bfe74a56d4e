"""ASGI middleware: request metrics and the body-size limit.

Written as plain ASGI (not BaseHTTPMiddleware) because they sit on the path of every
request of the online filter, where a few hundred microseconds matter.
"""

from __future__ import annotations

import time

import orjson
from starlette.exceptions import HTTPException

from .metrics import Metrics


class MetricsMiddleware:
    """Counts requests by route template (not raw path: bounded label cardinality)."""

    def __init__(self, app, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_with_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(label, scope["method"], str(status)).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - start)


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
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.max_bytes:
                    await _too_large(send, self.max_bytes)
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
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def guarded_send(message):
            nonlocal responded
            responded = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            if not responded:
                await _too_large(send, self.max_bytes)


class BodyTooLarge(HTTPException):
    def __init__(self, max_bytes: int):
        super().__init__(413, f"request body exceeds the limit of {max_bytes} bytes")


async def _too_large(send, max_bytes: int) -> None:
    body = orjson.dumps({"error": "payload_too_large", "detail": [
        {"field": None, "cell": None, "key": None,
         "message": f"request body exceeds the limit of {max_bytes} bytes"}]})
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
