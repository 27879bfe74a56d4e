"""Hostile and slow clients against the real server (uvicorn with the service's
GuardedHttpProtocol, in a thread of this process, over loopback sockets): idle connections
and slow or oversized request heads, too many connections, bodies dripped below the
minimum pace, request bodies nobody reads, and replies nobody reads."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from service.api import compute_pool
from service.app import SERVER_STATE, create_app
from service.config import Settings
from tests.servers import served

CELLS = [
    {"key": [f"c{i}"], "summary": {"total": 100.0, "count": 3, "largest": [60.0, 30.0]}}
    for i in range(40)
]
BODY = json.dumps({"cells": CELLS, "rules": {"rules": [{"type": "p_percent", "p": 10}]}}).encode()
#: Short limits, so that each case takes about a second.
FAST = dict(
    header_seconds=0.5,
    body_seconds=30,
    min_bytes_per_second=1000,
    rate_grace_seconds=0.5,
    max_header_bytes=4096,
    worker_threads=1,
    queue_depth=2,
)


def connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:  # before connect, so that the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def read_reply(sock: socket.socket) -> tuple[int, dict, bytes]:
    """Status, headers and body of one reply (with Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a reply: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a reply"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def post_head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def rejected(app, reason: str) -> float:
    return (
        app.state.metrics.registry.get_sample_value(
            "sdc_rejected_requests_total", {"reason": reason}
        )
        or 0.0
    )


def test_idle_and_slow_heads_are_closed_after_the_header_time():
    app = create_app(Settings(**FAST))
    with served(app, app.state.settings) as (_, port):
        idle = connect(port)
        start = time.monotonic()
        assert closed_by_server(idle)  # nothing sent: closed without a reply
        assert 0.4 < time.monotonic() - start < 3

        partial = connect(port)
        partial.sendall(b"POST /v1/sensitivity HTTP/1.1\r\nHost: t\r\n")
        start = time.monotonic()
        status, headers, body = read_reply(partial)
        assert 0.4 < time.monotonic() - start < 3
        assert status == 408 and headers["connection"] == "close"
        assert json.loads(body)["error"] == "request_timeout"
        assert "0.5 seconds" in json.loads(body)["detail"][0]["message"]
        assert closed_by_server(partial)

        # A byte every 0.1 s does not keep the head alive: its time counts from the start.
        drip = connect(port)
        start = time.monotonic()
        head = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"x" * 40
        for byte in head:
            if select.select([drip], [], [], 0.1)[0]:
                break  # answered (reading on would risk a reset that hides the reply)
            drip.sendall(bytes([byte]))
        assert read_reply(drip)[0] == 408 and time.monotonic() - start < 3

        # The next request's head on a kept-alive connection has the same limit.
        kept = connect(port)
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_reply(kept)[0] == 200
        kept.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert read_reply(kept)[0] == 408

        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        assert rejected(app, "timeout") == 3  # the idle connection sent no request


def test_oversized_head_gets_431_and_a_large_one_within_the_limit_is_served():
    app = create_app(Settings(**FAST))
    with served(app, app.state.settings) as (_, port):
        big = connect(port)
        big.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"y" * 5000 + b"\r\n\r\n")
        status, headers, body = read_reply(big)
        assert status == 431 and headers["connection"] == "close"
        assert json.loads(body)["error"] == "request_header_fields_too_large"
        assert "exceed 4096 bytes" in json.loads(body)["detail"][0]["message"]
        ok = connect(port)
        ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"y" * 3000 + b"\r\n\r\n")
        assert read_reply(ok)[0] == 200


def test_connections_beyond_the_limit_are_answered_503_and_closed():
    app = create_app(Settings(**{**FAST, "header_seconds": 10, "max_connections": 6}))
    with served(app, app.state.settings) as (server, port):
        held = [connect(port) for _ in range(6)]
        time.sleep(0.1)
        extra = connect(port)
        status, headers, body = read_reply(extra)
        assert status == 503 and headers["retry-after"] == "1"
        assert json.loads(body)["error"] == "unavailable"
        assert closed_by_server(extra)
        assert rejected(app, "overloaded") == 1
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 5
        while server.server_state.connections and time.monotonic() < deadline:
            time.sleep(0.02)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200


def drip_body(port: int, path: str, length: int, results: list, every: float = 0.1) -> None:
    """Send a head announcing ``length`` bytes, then 10 bytes every ``every`` seconds
    (100 bytes per second at the default) until the server answers."""
    sock = connect(port)
    try:
        sock.sendall(post_head(path, length))
        sock.settimeout(every)
        start, sent = time.monotonic(), 0
        while sent < length:
            try:
                reply = sock.recv(65536, socket.MSG_PEEK)
                if reply:
                    break
            except TimeoutError:
                pass
            sock.sendall(b" " * 10)
            sent += 10
        sock.settimeout(10)
        status, _, body = read_reply(sock)
        results.append((status, json.loads(body), time.monotonic() - start))
    finally:
        sock.close()


def test_bodies_below_the_minimum_pace_get_408_at_once_and_free_their_slots(monkeypatch):
    """Three large bodies dripped at 100 bytes/s hold every admission slot of the pool (1
    thread + 2 queued) only until the minimum pace is missed after the grace, not for
    SDC_BODY_SECONDS (30 s here); then a legitimate large request is served."""
    monkeypatch.setattr(compute_pool, "LARGE_BODY_BYTES", 1000)
    app = create_app(Settings(**FAST))
    assert len(BODY) > 1000
    with served(app, app.state.settings) as (_, port):
        results: list = []
        slow = [
            threading.Thread(target=drip_body, args=(port, "/v1/sensitivity", 50_000, results))
            for _ in range(3)
        ]
        for t in slow:
            t.start()
        time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/v1/sensitivity"
        headers = {"content-type": "application/json"}
        refused = httpx.post(url, content=BODY, headers=headers, timeout=10)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        for t in slow:
            t.join(10)
        assert [r[0] for r in results] == [408, 408, 408]
        for _, body, seconds in results:
            assert "slower than 1000 bytes per second" in body["detail"][0]["message"]
            assert seconds < 3
        assert app.state.pool.large_requests == 0
        served_ = httpx.post(url, content=BODY, headers=headers, timeout=10)
        assert served_.status_code == 200 and len(served_.json()["cells"]) == 40

        # A small body (no pool slot) dripped the same way is cut too.
        small: list = []
        drip_body(port, "/v1/sensitivity", 500, small)
        assert small[0][0] == 408 and small[0][2] < 3
        assert rejected(app, "timeout") == 4


def test_a_body_sent_at_the_minimum_pace_is_accepted():
    app = create_app(Settings(**FAST))
    with served(app, app.state.settings) as (_, port):
        sock = connect(port)
        sock.sendall(post_head("/v1/sensitivity", len(BODY)))
        step = len(BODY) // 10 + 1
        start = time.monotonic()
        for i in range(0, len(BODY), step):  # about 10x the minimum pace, for over a second
            sock.sendall(BODY[i : i + step])
            time.sleep(0.12)
        status, _, body = read_reply(sock)
        assert time.monotonic() - start > FAST["rate_grace_seconds"] * 2
        assert status == 200 and len(json.loads(body)["cells"]) == 40


def test_an_unread_request_body_cannot_hold_the_connection():
    """The app answers 404 before reading; a prompt sender's connection stays usable, a
    body still trickling after ``body_seconds`` gets the connection closed."""
    app = create_app(Settings(**{**FAST, "body_seconds": 1}))
    with served(app, app.state.settings) as (_, port):
        prompt = connect(port)
        prompt.sendall(post_head("/nowhere", 20_000) + b" " * 20_000)
        assert read_reply(prompt)[0] == 404
        time.sleep(1.3)  # past body_seconds: the body was complete, nothing to close
        prompt.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_reply(prompt)[0] == 200

        slow = connect(port)
        slow.sendall(post_head("/nowhere", 20_000) + b" " * 100)
        assert read_reply(slow)[0] == 404
        start = time.monotonic()
        with contextlib.suppress(OSError):
            while time.monotonic() - start < 5:
                slow.sendall(b" ")  # each byte would reset uvicorn's keep-alive timer
                time.sleep(0.05)
        assert 0.8 < time.monotonic() - start < 3
        assert closed_by_server(slow)


def big_reply_app(size: int, settings: Settings):
    """An ASGI app whose every reply is ``size`` bytes in one message (as the service's
    JSON replies are), with the lifespan state that gives the protocol its settings."""
    sent: list[float] = []

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/octet-stream"),
                    (b"content-length", str(size).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"r" * size})
        sent.append(time.monotonic())

    async def lifespan_app(scope, receive, send):
        if scope["type"] == "lifespan":
            scope["state"][SERVER_STATE] = SimpleNamespace(
                settings=settings, metrics=None, pool=None
            )
        await app(scope, receive, send)

    return lifespan_app, sent


def test_an_unread_reply_is_dropped_after_the_grace():
    """A client that never reads a 64 MB reply: the server aborts the connection after
    one check of its pace, and the buffered reply goes with it."""
    settings = Settings(**{**FAST, "rate_grace_seconds": 0.5})
    app, sent = big_reply_app(64 * 2**20, settings)
    with served(app, settings) as (server, port):
        sock = connect(port, rcvbuf=4096)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        deadline = time.monotonic() + 10
        while not sent and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sent, "the app did not send its reply"
        while server.server_state.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        gone = time.monotonic()
        assert not server.server_state.connections
        assert 0.4 < gone - sent[0] < 3
        received = 0
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        assert received < 32 * 2**20  # most of the reply was dropped, not delivered


def test_a_reader_keeping_the_pace_gets_the_whole_reply():
    settings = Settings(**{**FAST, "rate_grace_seconds": 0.3, "min_bytes_per_second": 256 * 1024})
    size = 8 * 2**20
    app, _ = big_reply_app(size, settings)
    with served(app, settings) as (_, port):
        sock = connect(port, rcvbuf=65536)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        body = received.partition(b"\r\n\r\n")[2]
        start, got = time.monotonic(), len(body)
        while got < size:
            chunk = sock.recv(65536)
            assert chunk, f"closed after {got} of {size} bytes"
            got += len(chunk)
            time.sleep(0.005)  # a few MB/s: slow, but over the minimum pace
        assert got == size and time.monotonic() - start > 0.3


@pytest.mark.parametrize("value", ["0", "-1", "inf", "x"])
def test_new_settings_refuse_nonsense(value):
    from service.config import ConfigError

    for name in (
        "SDC_HEADER_SECONDS",
        "SDC_MIN_BYTES_PER_SECOND",
        "SDC_RATE_GRACE_SECONDS",
        "SDC_MAX_CONNECTIONS",
        "SDC_MAX_HEADER_BYTES",
    ):
        with pytest.raises(ConfigError):
            Settings.from_env({name: value})
