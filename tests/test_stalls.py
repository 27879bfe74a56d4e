"""Small hostile requests do not hold the event loop (``benchmarks/stalls.py`` measures the
same against a served app): work that grows with what a body holds runs off the loop, in
pieces short enough for the loop to answer in between."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import numpy as np
import orjson
import pytest
from pydantic import BaseModel

from schemas.noise import NoiseRequest
from schemas.sensitivity import SensitivityRequest
from schemas.tables import AuditRequest
from service import collector
from service.api import audit as audit_api
from service.api import body_parts, responses
from service.api import frequency as frequency_api
from service.api import sensitivity as sensitivity_api
from service.app import create_app
from service.config import Settings
from service.pipeline import tables

from .loop_probe import lags_while, longest_within


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
    reply, lags, _ = lags_while(
        create_app(Settings(max_cells=500_000)), "/v1/audit", orjson.dumps(body)
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


def _forty_thousand_cells() -> dict:
    """A /v1/sensitivity body of 40,000 cells of 10 contributions each (about 6 MB)."""
    return {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "cells": [
            {"key": [f"c{i}"], "contributions": [{"value": v + 0.5} for v in range(10)]}
            for i in range(40_000)
        ],
    }


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
    body = _forty_thousand_cells()
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
    reply, lags, _ = lags_while(create_app(Settings()), "/v1/sensitivity", raw)
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
    body = _forty_thousand_cells()
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
    reply, lags, _ = lags_while(create_app(Settings()), "/v1/sensitivity", orjson.dumps(body))
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["cell"] == 39_999
    assert longest_within(lags, windows[-1], lags[-1][1]) < 0.5 * at_once, at_once


def test_a_reply_in_slices_is_the_reply_of_one_call(monkeypatch):
    """Lists over DUMP_ITEMS, at the top and in dicts, are serialised a slice at a time
    (:func:`service.api.responses.dumps`): the same bytes as one call, -0.0 cleaned."""
    monkeypatch.setattr(responses, "DUMP_ITEMS", 3)
    reply = {
        "cells": [{"key": [f"a{i}", 'é\\"'], "value": i / 3, "z": -0.0} for i in range(10)],
        "audit": {"cells": list(range(7)), "intervals": np.arange(8.0), "verdict": "safe"},
        "solver": {"status": "optimal", "unprotected": []},
        "n": 0,
    }
    once = orjson.dumps(reply, option=orjson.OPT_SERIALIZE_NUMPY).replace(b"-0.0", b"0.0")
    assert responses.dumps(reply) == once
    assert responses.dumps(list(range(10))) == orjson.dumps(list(range(10)))


def test_a_rendered_reply_is_freed_in_pieces_and_keeps_what_the_route_reads():
    """:func:`service.api.responses.rendered` empties the reply's large lists after
    serialising it (in the pool thread) and hands back the items the route reads."""
    cells = [{"key": [str(i)], "value": i} for i in range(3 * collector.SMALL)]
    solver = {"status": "optimal", "unprotected": [str(i) for i in range(3 * collector.SMALL)]}

    def work():
        return {"cells": cells, "solver": solver}, 7

    raw, kept, rest = responses.rendered(work, "solver")()
    assert orjson.loads(raw.raw)["cells"][-1] == {
        "key": [str(3 * collector.SMALL - 1)],
        "value": 191,
    }
    assert kept is solver and len(solver["unprotected"]) == 3 * collector.SMALL
    assert rest == 7
    assert cells == []


@pytest.mark.usefixtures("served_collector")
def test_a_large_reply_to_a_small_request_does_not_hold_the_loop(monkeypatch):
    """A count table of 6 dimensions of 9 codes from one cell: a reply of 10^6 cells and
    marginals. Its
    serialisation in one call, and its freeing at once, each held the interpreter (and
    the loop) 0.2-0.25 s in a served app (a campaign, h68); now a slice and a piece at a
    time. Measured over the pooled work, against the time one call takes to serialise."""
    monkeypatch.setattr(collector, "look_again", lambda: None)
    body = {
        "dimensions": [{"name": f"d{d}", "codes": [f"c{i}" for i in range(9)]} for d in range(6)],
        "cells": [{"key": ["c0"] * 6, "count": 1}],
        "rules": {"threshold": {"t": 3}},
    }
    ends: list[float] = []
    one_call: list[float] = []
    assess = frequency_api.assess

    def timed(*args):
        reply = assess(*args)
        begun = time.perf_counter()
        orjson.dumps(reply[0])
        one_call.append(time.perf_counter() - begun)
        ends.append(time.perf_counter())
        return reply

    compute = frequency_api.compute

    async def computed(*args, **kwargs):
        try:
            return await compute(*args, **kwargs)
        finally:
            ends.append(time.perf_counter())

    monkeypatch.setattr(frequency_api, "assess", timed)
    monkeypatch.setattr(frequency_api, "compute", computed)
    reply, lags, _ = lags_while(
        create_app(Settings()), "/v1/frequency/sensitivity", orjson.dumps(body)
    )
    assert reply.status_code == 200
    assert len(reply.json()["cells"]) == 9**6
    # From the end of the reply's computation (and of the one call) to the pool's return
    # (the reply's bytes then pass through this process's client).
    assert longest_within(lags, *ends) < 0.5 * one_call[0], one_call


def test_the_collector_looks_again_once_no_large_request_is_left(monkeypatch):
    """A large request answered while another is still being read or validated leaves
    the collector's view alone: the other's parts, hidden as they are validated, would
    be looked at in one pass (0.25 s of the loop in a served app, a campaign, h68). The
    last one out looks again."""
    calls: list[int] = []
    app = create_app(Settings())
    pool = app.state.pool
    monkeypatch.setattr(collector, "look_again", lambda: calls.append(pool.large_requests))
    body = {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "cells": [{"key": [f"c{i}"], "contributions": [{"value": 1.5}]} for i in range(10_000)],
    }
    raw = orjson.dumps(body)
    assert len(raw) > 256 * 1024  # a large request

    async def post():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            reply = await client.post(
                "/v1/sensitivity", content=raw, headers={"content-type": "application/json"}
            )
        assert reply.status_code == 200

    assert pool.admit_request()  # another large request, still being read
    asyncio.run(post())
    assert calls == []
    pool.release_request()
    asyncio.run(post())
    assert calls == [0]
