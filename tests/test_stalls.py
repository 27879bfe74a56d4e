"""Small hostile requests do not hold the event loop (``benchmarks/stalls.py`` measures the
same against a served app): work that grows with what a body holds runs off the loop, in
pieces short enough for the loop to answer in between."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import orjson
import pytest

from schemas.tables import AuditRequest
from service.api import audit as audit_api
from service.app import create_app
from service.config import Settings
from service.pipeline import tables


def lags_while(app, route: str, raw: bytes, windows: list) -> tuple[httpx.Response, list]:
    """Post ``raw`` to ``app`` in process while a probe wakes every 2 ms: the reply and
    the probe's waits as ``(start, end)``; ``windows`` (filled by the caller's wrappers
    meanwhile) says which work to look at."""
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
            await asyncio.sleep(0.01)
            reply = await client.post(
                route, content=raw, headers={"content-type": "application/json"}
            )
            stop.set()
            await probing
        return reply

    return asyncio.run(main()), lags


def longest_within(lags: list, start: float, end: float) -> float:
    """The longest wait of the probe that overlaps ``[start, end]``."""
    return max((b - a for a, b in lags if b > start and a < end), default=0.0)


@pytest.mark.usefixtures("served_collector")
def test_a_large_structure_is_checked_off_the_loop_in_short_pieces(monkeypatch):
    """An audit of one cell whose hierarchy has 300,000 parents of one leaf each (7 MB):
    413 by its table's size, as before. The structure's check took the event loop the
    whole of it (2 s for 800,000 parents in a served app, a campaign, h68): now it runs
    in the pool, and counts codes in Python code, not in set operations over all of them
    (each held the interpreter 0.1-0.4 s, the loop with it)."""
    n = 300_000
    children = {"Total": [f"p{i}" for i in range(n)]} | {f"p{i}": [f"l{i}"] for i in range(n)}
    body = {
        "structure": {
            "dimensions": [{"name": "x", "children": children}, {"name": "y", "leaves": ["A"]}]
        },
        "cells": [{"key": ["l0", "A"], "value": 1}],
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
    }
    windows: list[tuple[float, float, bool]] = []
    resolve = audit_api.resolve_table_request

    def timed(*args):
        start = time.perf_counter()
        try:
            return resolve(*args)
        finally:
            on_loop = threading.current_thread() is threading.main_thread()
            windows.append((start, time.perf_counter(), on_loop))

    monkeypatch.setattr(audit_api, "resolve_table_request", timed)
    reply, lags = lags_while(
        create_app(Settings(max_cells=500_000)), "/v1/audit", orjson.dumps(body), windows
    )
    assert reply.status_code == 413, reply.text
    assert reply.json()["detail"][0]["field"] == "structure.dimensions"
    assert "1200002 table cells" in reply.json()["detail"][0]["message"]
    ((start, end, on_loop),) = windows
    assert not on_loop
    assert longest_within(lags, start, end) < 0.25 * (end - start), (lags, end - start)


def test_request_size_counts_the_structure():
    """What decides inline or pooled counts a structure's codes, not only the cells."""
    body = AuditRequest.model_validate(
        {
            "structure": {
                "dimensions": [
                    {"name": "x", "children": {"Total": ["a", "b"], "a": ["a1", "a2", "a3"]}},
                    {"name": "y", "leaves": ["A", "B"]},
                ],
                "tables": [["x", "y"]],
            },
            "cells": [{"key": ["a1", "A"], "value": 1}],
        }
    )
    assert tables.request_size(body) == 1 + (2 + 5) + 2 + 2
