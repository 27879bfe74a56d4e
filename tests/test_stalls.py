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
from pydantic import BaseModel

from schemas.noise import NoiseRequest
from schemas.sensitivity import SensitivityRequest
from schemas.tables import AuditRequest
from service import collector
from service.api import audit as audit_api
from service.api import body_parts
from service.api import sensitivity as sensitivity_api
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


@pytest.mark.usefixtures("served_collector")
def test_a_large_body_is_freed_in_pieces_after_the_reply(monkeypatch):
    """40,000 cells of 10 contributions: the body, freed at once when the request ended,
    held the loop as long as freeing it takes (0.8 s for 90,000 cells in a served app,
    a campaign, h68); now it is taken apart after the reply with the loop turning in
    between (:func:`service.collector.take_apart`). Measured from the end of the pooled
    work to the end of the request, against the time the same body takes to free at once."""
    # The full collection after the reply walks the test session's heap (not a served
    # app's): its own test is in test_body_parts.
    monkeypatch.setattr(collector, "look_again", lambda: None)
    body = {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "cells": [
            {"key": [f"c{i}"], "contributions": [{"value": v + 0.5} for v in range(10)]}
            for i in range(40_000)
        ],
    }
    raw = orjson.dumps(body)
    model = SensitivityRequest.model_validate_json(raw)
    start = time.perf_counter()
    del model
    at_once = time.perf_counter() - start

    windows: list[float] = []
    assess = sensitivity_api.assess

    def timed(*args):
        try:
            return assess(*args)
        finally:
            windows.append(time.perf_counter())

    monkeypatch.setattr(sensitivity_api, "assess", timed)
    reply, lags = lags_while(create_app(Settings()), "/v1/sensitivity", raw, windows)
    assert reply.status_code == 200
    assert len(reply.json()["cells"]) == 40_000
    (computed,) = windows
    assert longest_within(lags, computed, lags[-1][1]) < 0.5 * at_once, at_once


def _containers(obj, found: list) -> list:
    """Every list and dict reachable from ``obj`` through models, lists and dicts."""
    if isinstance(obj, BaseModel):
        for value in obj.__dict__.values():
            _containers(value, found)
    elif isinstance(obj, (list, dict)):
        found.append(obj)
        for value in obj.values() if isinstance(obj, dict) else obj:
            _containers(value, found)
    return found


def test_taking_apart_empties_every_large_container_of_a_body():
    """Models in lists in models (dimensions, cells, their contributions and columns):
    every list or dict of more than SMALL items is left empty, the rest go with them."""
    n = 3 * collector.SMALL
    audit = AuditRequest.model_validate(
        {
            "structure": {
                "dimensions": [
                    {"name": "x", "children": {"T": [f"p{i}" for i in range(n)]}, "total": "T"},
                    {"name": "y", "leaves": [f"y{i}" for i in range(n)]},
                ]
            },
            "cells": [
                {"key": ["p0", f"y{i}"], "contributions": [{"value": v} for v in range(n)]}
                for i in range(n)
            ],
        }
    )
    noise = NoiseRequest.model_validate(
        {
            "structure": {"dimensions": [{"name": "x", "leaves": ["a"]}]},
            "cells": [
                {"key": ["a"], "contributions": [{"value": 1}] * n, "respondents": ["r"] * n}
            ],
            "noise": {"d": 0.1},
        }
    )
    for body in (audit, noise):
        before = [c for c in _containers(body, []) if len(c) > collector.SMALL]
        assert len(before) >= 2
        asyncio.run(collector.take_apart(body))
        assert not any(before)


@pytest.mark.usefixtures("served_collector")
def test_the_parts_before_an_error_are_freed_in_pieces(monkeypatch):
    """40,000 cells of 10 contributions whose last value is a string: the cells validated
    in parts before it were dropped at once with the 422 (0.3-0.6 s of the loop for
    90,000 cells in a served app, a campaign, h68); now taken apart. Measured from the
    end of the last part's validation to the reply."""
    monkeypatch.setattr(collector, "look_again", lambda: None)
    body = {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "cells": [
            {"key": [f"c{i}"], "contributions": [{"value": v + 0.5} for v in range(10)]}
            for i in range(40_000)
        ],
    }
    model = SensitivityRequest.model_validate(body)
    start = time.perf_counter()
    del model
    at_once = time.perf_counter() - start
    body["cells"][-1]["contributions"][-1]["value"] = "9.5"

    windows: list[float] = []
    part = body_parts._Run._part

    def timed(*args):
        try:
            return part(*args)
        finally:
            windows.append(time.perf_counter())

    monkeypatch.setattr(body_parts._Run, "_part", timed)
    reply, lags = lags_while(create_app(Settings()), "/v1/sensitivity", orjson.dumps(body), [])
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["cell"] == 39_999
    assert longest_within(lags, windows[-1], lags[-1][1]) < 0.5 * at_once, at_once
