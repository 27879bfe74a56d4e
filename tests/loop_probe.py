"""How long the event loop stays away while a request is served in process: a probe
task wakes every 2 ms and records each wait (tests/test_stalls.py, tests/test_body_parts.py)."""

from __future__ import annotations

import asyncio
import time

import httpx


def lags_while(app, route: str, raw: bytes) -> tuple[httpx.Response, list, float]:
    """Post ``raw`` to ``app`` in process while the probe runs: the reply, the probe's
    waits as ``(start, end)``, and the seconds the post took."""
    lags: list[tuple[float, float]] = []

    async def probe(stop: asyncio.Event):
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            lags.append((last, now))
            last = now

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            stop = asyncio.Event()
            probing = asyncio.create_task(probe(stop))
            await asyncio.sleep(0.01)  # probing
            start = time.perf_counter()
            reply = await client.post(
                route, content=raw, headers={"content-type": "application/json"}
            )
            seconds = time.perf_counter() - start
            stop.set()
            await probing
        return reply, seconds

    reply, seconds = asyncio.run(main())
    return reply, lags, seconds


def longest_within(lags: list, start: float, end: float) -> float:
    """The longest wait of the probe that overlaps ``[start, end]``."""
    return max((b - a for a, b in lags if b > start and a < end), default=0.0)
