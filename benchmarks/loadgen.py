"""A small closed-loop HTTP/1.1 load generator (the server under load: ``tests.servers``).

Bounded by construction: it sends to 127.0.0.1 only, for a fixed duration, over a fixed
number of keep-alive connections, and stops by itself. It is deliberately lean (raw
asyncio streams, no HTTP library) so that on a 2-core machine the client takes as little
CPU as possible from the server it measures.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np


@dataclass
class LoadResult:
    requests: int
    errors: int
    seconds: float
    latencies: np.ndarray  # seconds, successful requests only
    statuses: dict

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def percentile(self, q: float) -> float:
        return (
            float(np.percentile(self.latencies, q)) * 1000 if self.latencies.size else float("nan")
        )

    def line(self, label: str) -> str:
        return (
            f"{label:<34} {self.rps:>8.0f} req/s  p50 {self.percentile(50):6.2f} ms  "
            f"p99 {self.percentile(99):6.2f} ms  errors {self.errors}  statuses {self.statuses}"
        )


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
    raw = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    statuses: dict = {}
    counters = {"errors": 0}

    async def main():
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(
            *(
                _connection(host, int(port), raw, stop_at, latencies, statuses, counters)
                for _ in range(connections)
            )
        )

    start = time.perf_counter()
    asyncio.run(main())
    elapsed = time.perf_counter() - start
    return LoadResult(len(latencies), counters["errors"], elapsed, np.array(latencies), statuses)
