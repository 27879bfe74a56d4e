"""A small closed-loop HTTP/1.1 load generator and a loopback server fixture.

Bounded by construction: it sends to 127.0.0.1 only, for a fixed duration, over a fixed
number of keep-alive connections, and stops by itself. It is deliberately lean (raw
asyncio streams, no HTTP library) so that on a 2-core machine the client takes as little
CPU as possible from the server it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class LoadResult:
    requests: int
    errors: int
    seconds: float
    latencies: np.ndarray   # seconds, successful requests only
    statuses: dict

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) * 1000 if self.latencies.size else float("nan")

    def line(self, label: str) -> str:
        return (f"{label:<34} {self.rps:>8.0f} req/s  p50 {self.percentile(50):6.2f} ms  "
                f"p99 {self.percentile(99):6.2f} ms  errors {self.errors}  statuses {self.statuses}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, seconds: float = 30) -> None:
    """Return once ``url/healthz`` answers; raise if the process dies or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("service did not start") from None
            time.sleep(0.1)


@dataclass(frozen=True)
class Server:
    """A running ``sdc-service``: its base URL and main process id."""

    url: str
    pid: int

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far by the server and its worker processes
        (Linux ``/proc``), to report the server's CPU cost per request."""
        ticks = os.sysconf("SC_CLK_TCK")
        total, pending = 0.0, [self.pid]
        while pending:
            pid = pending.pop()
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / ticks   # utime, stime
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pending += [int(c) for c in (task / "children").read_text().split()]
        return total


@contextlib.contextmanager
def server(env: dict | None = None, workers: int = 1):
    """Start ``sdc-service`` on a free loopback port; yield it as a :class:`Server`; stop
    it."""
    port = free_port()
    full_env = {**os.environ, "SDC_HOST": "127.0.0.1", "SDC_PORT": str(port),
                "SDC_WORKERS": str(workers), "SDC_LOG_LEVEL": "warning", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "service"], cwd=ROOT, env=full_env,
                            stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
        yield Server(url, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _connection(host, port, raw, stop_at, latencies, statuses, counters):
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            statuses[status] = statuses.get(status, 0) + 1
            if status >= 500:
                counters["errors"] += 1
    finally:
        writer.close()


def run_load(url: str, path: str, body: bytes, *, connections: int, seconds: float) -> LoadResult:
    """POST ``body`` to ``url + path`` over ``connections`` connections for ``seconds``."""
    host, port = url.removeprefix("http://").split(":")
    raw = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    latencies: list[float] = []
    statuses: dict = {}
    counters = {"errors": 0}

    async def main():
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(*(_connection(host, int(port), raw, stop_at, latencies, statuses,
                                           counters) for _ in range(connections)))

    start = time.perf_counter()
    asyncio.run(main())
    elapsed = time.perf_counter() - start
    return LoadResult(len(latencies), counters["errors"], elapsed, np.array(latencies), statuses)
