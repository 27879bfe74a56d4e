"""``sdc-service`` / ``python -m service``: start the HTTP service on its settings.

uvicorn (httptools) on its own keeps a connection open for as long as the client sends
nothing, or a request head a byte at a time; reads heads of any size; keeps a reply that
the client does not read in memory until the client goes away; and accepts connections
until the process runs out of file descriptors. :class:`GuardedHttpProtocol` adds the
missing bounds (``SDC_HEADER_SECONDS``, ``SDC_MAX_HEADER_BYTES``,
``SDC_MIN_BYTES_PER_SECOND`` with ``SDC_RATE_GRACE_SECONDS``, ``SDC_MAX_CONNECTIONS``) and
tells the compute pool when the server begins to stop. The pace of request bodies is
checked where the app reads them (:class:`service.middleware.AdmissionMiddleware`), so that
a slow body gets a 408 the metrics count.
"""

from __future__ import annotations

import http
import logging
import resource
import sys

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from . import logs
from .api import compute_pool
from .app import SERVER_STATE
from .config import ConfigError, Settings
from .metrics import REJECTION_REASONS
from .middleware import error_body, send_error

#: uvicorn's idle time between requests on a kept-alive connection (its default, named
#: here because a proxy in front must give up on idle connections sooner: deploy/k8s).
KEEP_ALIVE_SECONDS = 5

log = logging.getLogger("sdc.connections")


def raw_reply(status: int, message: str, headers: dict | None = None) -> bytes:
    """A whole HTTP/1.1 error reply in the service's error shape that closes the
    connection, for the protocol to write outside any request cycle."""
    body = error_body(status, message)
    lines = [
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{k.lower()}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with limits on what a client can hold:

    - a request line and headers must arrive within ``header_seconds`` of the connection's
      opening or of the request's first byte (else 408, or a silent close when nothing was
      sent), and be at most ``max_header_bytes`` long (else 431);
    - a client must read its reply at ``min_bytes_per_second`` at least, checked every
      ``rate_grace_seconds`` while the transport's buffer is over its high-water mark:
      else the connection is aborted and the unread reply freed at once;
    - a request body the app did not read (an early 401, 404 or 413) may still arrive for
      ``body_seconds`` after the reply, then the connection is closed;
    - at most ``max_connections`` connections: one more is answered 503 and closed;
    - the server's shutdown drains the app's compute pool (queued work is refused with
      503), see :meth:`service.api.compute_pool.ComputePool.drain`.

    Settings, metrics and pool come from the app through the lifespan state
    (:data:`service.app.SERVER_STATE`); an app without it gets the default settings.
    """

    def __init__(self, config, server_state, app_state, _loop=None):
        super().__init__(config, server_state, app_state, _loop)
        shared = app_state.get(SERVER_STATE)
        self.limits: Settings = getattr(shared, "settings", None) or Settings()
        self.metrics = getattr(shared, "metrics", None)
        self.pool = getattr(shared, "pool", None)
        self._in_head = True  # waiting for (the rest of) a request head
        self._head_bytes = 0  # bytes received since the current head began
        self._head_timer = None
        self._write_timer = None
        self._write_mark = 0  # write buffer size at the last progress check
        self._discard_timer = None

    # -- connections ------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(
                503,
                "the service has too many open connections; retry after the Retry-After seconds",
                {"Retry-After": str(compute_pool.RETRY_AFTER_SECONDS)},
            )
            return
        self._head_timer = self.loop.call_later(self.limits.header_seconds, self._head_timeout)

    def connection_lost(self, exc) -> None:
        for timer in (self._head_timer, self._write_timer, self._discard_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._write_timer = self._discard_timer = None
        super().connection_lost(exc)

    def shutdown(self) -> None:
        # Called for every connection when the server begins to stop: the first call
        # refuses the queued work, before uvicorn waits for the running requests.
        if self.pool is not None:
            self.pool.drain()
        super().shutdown()

    def _refuse(self, status: int, message: str, headers: dict | None = None) -> None:
        self._in_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        reason = REJECTION_REASONS.get(status)
        if self.metrics is not None and reason is not None:
            self.metrics.rejected.labels(reason).inc()
        self.transport.write(raw_reply(status, message, headers))
        self.transport.close()

    # -- request heads ----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # Checked after parsing: if the head ended in this chunk, _in_head is now False
        # and the rest of the chunk was body.
        if (
            self._in_head
            and self._head_bytes > self.limits.max_header_bytes
            and not self.transport.is_closing()
        ):
            self._refuse(431, self._head_message)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_seconds, self._head_timeout)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        # A head that arrived whole in one read was not checked in data_received.
        size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
        if size <= self.limits.max_header_bytes:
            super().on_headers_complete()
            return
        # Answered through a request cycle, as uvicorn answers its concurrency limit, so
        # that the parser can go on through whatever body follows.
        app, self.app = self.app, self._head_too_large
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    async def _head_too_large(self, scope, receive, send) -> None:
        await send_error(send, 431, self._head_message, headers={"Connection": "close"})

    @property
    def _head_message(self) -> str:
        return f"the request line and headers exceed {self.limits.max_header_bytes} bytes"

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # whatever comes next is the next request's head
        if self._discard_timer is not None:
            self._discard_timer.cancel()
            self._discard_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head behind a request still being answered: closing now would
            # lose that reply. Check again later.
            self._head_timer = self.loop.call_later(self.limits.header_seconds, self._head_timeout)
            return
        if self._head_bytes:
            self._refuse(
                408,
                f"the request line and headers did not arrive within "
                f"{self.limits.header_seconds:g} seconds",
            )
        else:
            self.transport.close()

    # -- request bodies nobody reads ----------------------------------------------------

    def on_response_complete(self) -> None:
        # The app answered without reading the whole body (401 before the body, 404, 413
        # by Content-Length). uvicorn would go on parsing it for as long as it trickles
        # in, as each byte cancels the keep-alive timer; a prompt sender finishes long
        # before this timer, so its connection stays usable.
        cycle = self.cycle
        unread = cycle is not None and cycle.response_complete and cycle.more_body
        super().on_response_complete()
        if unread and not self.transport.is_closing():
            self._discard_timer = self.loop.call_later(
                self.limits.body_seconds, self._discard_timeout
            )

    def _discard_timeout(self) -> None:
        self._discard_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    # -- replies nobody reads -------------------------------------------------------------

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark: the client is not reading
        as fast as we write. From now on it must keep up the minimum pace."""
        super().pause_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
        self._write_mark = self.transport.get_write_buffer_size()
        self._write_timer = self.loop.call_later(self.limits.rate_grace_seconds, self._write_check)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_check(self) -> None:
        self._write_timer = None
        left = self.transport.get_write_buffer_size()
        window = self.limits.rate_grace_seconds
        if self._write_mark - left >= self.limits.min_bytes_per_second * window:
            self._write_mark = left
            self._write_timer = self.loop.call_later(window, self._write_check)
            return
        # abort(), not close(): close() would keep the unread bytes until they are sent.
        log.info(
            "closed a connection whose client read %d bytes of its reply in %g s (%d bytes unread)",
            self._write_mark - left,
            window,
            left,
        )
        self.transport.abort()


def _raise_open_files(wanted: int) -> None:
    """Let the process hold ``wanted`` file descriptors (``SDC_MAX_CONNECTIONS`` sockets and
    its files) when the hard limit allows; else warn: past the limit, accept() fails and
    uvicorn stops accepting for a while."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        target = soft
    if target < wanted:
        logging.getLogger("sdc.start").warning(
            "the open-file limit (%d) is below SDC_MAX_CONNECTIONS plus files; connections "
            "past it are refused by the kernel, not answered 503",
            target,
        )


def server_options(settings: Settings) -> dict:
    """uvicorn's options for these settings (also used by the tests, which run the same
    server in-process)."""
    # By import string, not the class: worker processes (SDC_WORKERS > 1) are spawned and
    # get the options pickled, and under `python -m service` this module is `__main__`.
    return dict(
        http="service.__main__:GuardedHttpProtocol",
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=settings.shutdown_seconds,
    )


def main() -> None:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        sys.exit(f"sdc-service: {exc}")
    logs.setup(settings.log_level)
    log = logging.getLogger("sdc.start")
    if settings.api_keys_file is None:
        log.warning(
            "no API keys configured (SDC_API_KEYS_FILE): every caller is treated as an "
            "analyst and sees diagnostics; this is for a developer's machine, so the "
            "service listens on loopback only"
        )
    log.info(
        "listening on http://%s:%d (%d rule profiles, %s, %d compute threads + %d queued), %s",
        settings.host,
        settings.port,
        len(settings.profiles),
        "API keys required" if settings.api_keys_file else "no API keys",
        settings.worker_threads,
        settings.queue_depth,
        "/metrics on the same port"
        if settings.metrics_port is None
        else f"/metrics on port {settings.metrics_port} only (SDC_METRICS_PORT)",
    )
    _raise_open_files(settings.max_connections + 64)
    uvicorn.run(
        "service.app:create_app",
        factory=True,
        log_config=logs.config(settings.log_level),
        **server_options(settings),
    )


if __name__ == "__main__":
    main()
