"""Limits and back-pressure: a full pool refuses at once with 503 and Retry-After while
health stays responsive, limits give 413, solver time is capped, solver outcomes are
counted, and a stopping server finishes the requests it has."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import httpx
import pytest

from service.api import compute_pool, sensitivity
from service.app import create_app
from service.config import Settings
from service.metrics import Metrics
from service.pipeline.limits import solver_seconds
from tests.servers import ROOT, free_port, served, wait_up

CELLS = [
    {"key": [f"c{i}"], "summary": {"total": 100.0, "count": 3, "largest": [60.0, 30.0]}}
    for i in range(3)
]
BODY = {"cells": CELLS, "rules": {"rules": [{"type": "p_percent", "p": 10}]}}


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if (
            line.startswith(name + " ")
            or line.startswith(name + "{")
            and line.split(" ")[0] == name
        ):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in metrics")


def test_pool_admits_threads_plus_queue_then_refuses():
    async def scenario():
        metrics = Metrics.create()
        pool = compute_pool.ComputePool(1, 1, metrics)
        gate = threading.Event()
        tasks = [asyncio.ensure_future(pool.run(gate.wait, 5)) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert pool.admitted == 2
        with pytest.raises(compute_pool.PoolFull) as refused:
            await pool.run(lambda: None)
        assert refused.value.status_code == 503
        assert refused.value.headers == {"Retry-After": "1"}
        gate.set()
        assert await asyncio.gather(*tasks) == [True, True]
        await asyncio.sleep(0.01)
        assert pool.admitted == 0
        assert await pool.run(sum, [1, 2]) == 3
        text = metrics.registry.get_sample_value
        assert text("sdc_pool_capacity") == 2 and text("sdc_pool_threads") == 1
        assert text("sdc_pool_tasks") == 0
        pool.shutdown()

    asyncio.run(scenario())


def test_cancelled_request_keeps_its_slot_until_the_thread_is_done():
    async def scenario():
        pool = compute_pool.ComputePool(1, 0)
        gate = threading.Event()
        task = asyncio.ensure_future(pool.run(gate.wait, 5))
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.01)
        assert pool.admitted == 1  # the thread is still working on it
        with pytest.raises(compute_pool.PoolFull):
            await pool.run(lambda: None)
        gate.set()
        await asyncio.sleep(0.05)
        assert pool.admitted == 0
        pool.shutdown()

    asyncio.run(scenario())


def _gated_sensitivity(monkeypatch) -> threading.Event:
    """Make /v1/sensitivity wait for the returned event in the pool (even small tables)."""
    gate = threading.Event()
    real = sensitivity.assess

    def slow(*args):
        gate.wait(20)
        return real(*args)

    monkeypatch.setattr(sensitivity, "assess", slow)
    monkeypatch.setattr(compute_pool, "INLINE_CELLS", 0)
    return gate


def test_full_pool_503_with_retry_after_and_health_stays_up(monkeypatch):
    gate = _gated_sensitivity(monkeypatch)
    app = create_app(Settings(worker_threads=1, queue_depth=1))

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            busy = [asyncio.ensure_future(c.post("/v1/sensitivity", json=BODY)) for _ in range(2)]
            await asyncio.sleep(0.1)
            start = time.perf_counter()
            refused = await c.post("/v1/sensitivity", json=BODY)
            refused_after = time.perf_counter() - start
            start = time.perf_counter()
            health = await c.get("/healthz")
            health_after = time.perf_counter() - start
            during = (await c.get("/metrics")).text
            gate.set()
            done = await asyncio.gather(*busy)
            after = (await c.get("/metrics")).text
            return refused, refused_after, health, health_after, during, done, after

    refused, refused_after, health, health_after, during, done, after = asyncio.run(scenario())
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == "unavailable"
    assert "retry" in refused.json()["detail"][0]["message"]
    assert refused_after < 0.5  # at once, not queued
    assert health.status_code == 200 and health_after < 0.5
    assert metric(during, "sdc_pool_tasks") == 2 and metric(during, "sdc_pool_capacity") == 2
    assert metric(during, "sdc_http_requests_in_flight") == 3  # two busy + the scrape
    assert [r.status_code for r in done] == [200, 200]
    assert 'sdc_rejected_requests_total{reason="overloaded"} 1.0' in after
    assert metric(after, "sdc_pool_tasks") == 0


def test_cell_limit_413_names_the_field(make_client):
    r = make_client(max_cells=2).post("/v1/sensitivity", json=BODY)
    assert r.status_code == 413
    assert r.json()["detail"][0]["field"] == "cells"
    assert "3 cells exceed the limit of 2" in r.json()["detail"][0]["message"]


def test_body_limit_counts_as_rejected(make_client):
    client = make_client(max_body_bytes=100)
    assert client.post("/v1/sensitivity", json=BODY).status_code == 413
    assert 'sdc_rejected_requests_total{reason="too_large"} 1.0' in client.get("/metrics").text


def test_solver_seconds_capped_by_the_service():
    settings = Settings(max_solver_seconds=30)
    assert solver_seconds(None, settings) == 30
    assert solver_seconds(2.5, settings) == 2.5
    assert solver_seconds(600, settings) == 30


def test_solver_outcomes_and_time_are_counted():
    m = Metrics.create()
    m.observe_solve("audit", "optimal", 0.2)
    m.observe_solve("audit", "time_limit", 60)
    m.observe_solve("suppress_exact", "something odd", 1)
    get = m.registry.get_sample_value
    assert get("sdc_solver_outcomes_total", {"method": "audit", "status": "optimal"}) == 1
    assert get("sdc_solver_outcomes_total", {"method": "audit", "status": "time_limit"}) == 1
    assert get("sdc_solver_outcomes_total", {"method": "suppress_exact", "status": "error"}) == 1
    assert get("sdc_solver_seconds_count", {"method": "audit"}) == 2
    assert get("sdc_solver_seconds_sum", {"method": "audit"}) == 60.2


def metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def test_graceful_shutdown_finishes_in_flight_requests():
    """SIGTERM while a large request is computed: it is answered, then the process exits."""
    cells = [
        {
            "key": [f"c{i}"],
            "contributions": [
                {"value": 10.0 + i % 7},
                {"value": 5.0},
                {"value": 1.0},
                {"value": 3.0},
            ],
        }
        for i in range(40_000)
    ]
    body = json.dumps(
        {"cells": cells, "rules": {"rules": [{"type": "p_percent", "p": 10}]}}
    ).encode()
    port = free_port()
    env = {**os.environ, "SDC_PORT": str(port), "SDC_LOG_LEVEL": "warning"}
    env.pop("SDC_HOST", None)
    env.pop("SDC_API_KEYS_FILE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "service"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
        result, answered = {}, []

        def call():
            req = urllib.request.Request(
                url + "/v1/sensitivity", data=body, headers={"content-type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=60) as r:
                result["status"] = r.status
                result["cells"] = len(json.loads(r.read())["cells"])
            answered.append(time.monotonic())

        thread = threading.Thread(target=call)
        thread.start()
        # Its computation has started (the event loop answers while its body is validated;
        # a request whose body is still being read or validated would be refused with 503).
        deadline = time.monotonic() + 30
        while "sdc_pool_tasks 1.0" not in metrics(url):
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.005)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        thread.join(60)
        # uvicorn re-raises the signal once it has shut down cleanly.
        assert proc.wait(30) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert result == {"status": 200, "cells": 40_000}
    assert answered[0] > signalled  # it was in flight when the signal came


def test_solver_routes_never_run_inline(make_client):
    """With no pool capacity at all, a small sensitivity table is still answered (inline,
    the filter's fast path) but even a tiny audit is refused: solvers never block the loop."""
    client = make_client()
    client.app.state.pool.capacity = 0
    assert client.post("/v1/sensitivity", json=BODY).status_code == 200
    audit = {
        "structure": {"dimensions": [{"name": "r", "leaves": ["a", "b"]}]},
        "cells": [
            {"key": ["a"], "value": 5, "suppressed": True, "protection": {"upper": 1, "lower": 1}},
            {"key": ["b"], "value": 7, "suppressed": True},
        ],
    }
    r = client.post("/v1/audit", json=audit)
    assert r.status_code == 503 and r.headers["retry-after"] == "1"


def test_large_bodies_refused_before_they_are_read(make_client, monkeypatch):
    monkeypatch.setattr(compute_pool, "LARGE_BODY_BYTES", 200)
    client = make_client(worker_threads=1, queue_depth=0)
    pool = client.app.state.pool
    small = {**BODY, "cells": CELLS[:1]}
    assert pool.admit_request()  # the only slot for large requests is taken
    r = client.post("/v1/sensitivity", json=BODY)
    assert len(r.request.content) > 200
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["error"] == "unavailable"
    assert client.post("/v1/sensitivity", json=small).status_code == 200
    pool.release_request()
    assert client.post("/v1/sensitivity", json=BODY).status_code == 200
    assert pool.large_requests == 0
    metrics = client.get("/metrics").text
    assert 'sdc_rejected_requests_total{reason="overloaded"} 1.0' in metrics


def test_slow_large_body_gets_408_and_frees_its_slot(monkeypatch):
    """A sender trickling a large body cannot hold a pool slot past SDC_BODY_SECONDS."""
    monkeypatch.setattr(compute_pool, "LARGE_BODY_BYTES", 10)
    app = create_app(Settings(worker_threads=1, queue_depth=0, body_seconds=0.2))
    payload = json.dumps(BODY).encode()

    async def trickle():
        yield payload[:20]
        await asyncio.sleep(1)
        yield payload[20:]

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            slow = await c.post(
                "/v1/sensitivity",
                content=trickle(),
                headers={"content-type": "application/json", "content-length": str(len(payload))},
            )
            ok = await c.post("/v1/sensitivity", json=BODY)
            return slow, ok, (await c.get("/metrics")).text

    slow, ok, metrics = asyncio.run(scenario())
    assert slow.status_code == 408 and slow.json()["error"] == "request_timeout"
    assert "0.2 seconds" in slow.json()["detail"][0]["message"]
    assert ok.status_code == 200 and app.state.pool.large_requests == 0
    assert 'sdc_rejected_requests_total{reason="timeout"} 1.0' in metrics


def test_drain_refuses_queued_and_new_work_and_lets_the_running_task_finish():
    async def scenario():
        pool = compute_pool.ComputePool(1, 2)
        gate = threading.Event()
        running = asyncio.ensure_future(pool.run(gate.wait, 10))
        await asyncio.sleep(0.05)
        queued = [asyncio.ensure_future(pool.run(lambda: "ran")) for _ in range(2)]
        await asyncio.sleep(0.01)
        assert pool.admitted == 3
        pool.drain()
        for task in queued:
            with pytest.raises(compute_pool.ShuttingDown) as refused:
                await asyncio.wait_for(task, 1)
            assert refused.value.status_code == 503
            assert refused.value.headers == {"Retry-After": "1"}
            assert "shutting down" in refused.value.detail
        with pytest.raises(compute_pool.ShuttingDown):
            await pool.run(sum, [1, 2])
        assert not pool.admit_request()
        assert not running.done() and pool.admitted == 1
        gate.set()
        assert await asyncio.wait_for(running, 5) is True
        await asyncio.sleep(0.01)
        assert pool.admitted == 0
        pool.drain()  # idempotent
        pool.shutdown()

    asyncio.run(scenario())


def _wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_shutdown_refuses_queued_requests_with_503_and_finishes_the_running_one(monkeypatch):
    """SIGTERM with one solve running and two queued (1 thread + SDC_QUEUE_DEPTH=2): the
    queued ones are answered 503 with Retry-After at once, in the service's error shape,
    and the running one is answered 200 when it ends."""
    gate = _gated_sensitivity(monkeypatch)
    app = create_app(Settings(worker_threads=1, queue_depth=2, shutdown_seconds=20))
    pool = app.state.pool
    replies: dict = {}
    with served(app, app.state.settings) as (server, port):

        def call(i):
            r = httpx.post(f"http://127.0.0.1:{port}/v1/sensitivity", json=BODY, timeout=30)
            replies[i] = (r, time.monotonic())

        threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
        threads[0].start()
        _wait_for(lambda: pool.admitted == 1)  # the first one holds the thread
        for t in threads[1:]:
            t.start()
        _wait_for(lambda: pool.admitted == 3)
        stopped = time.monotonic()
        server.should_exit = True  # what uvicorn's SIGTERM handler does
        for t in threads[1:]:
            t.join(10)
        try:
            for i in (1, 2):
                r, at = replies[i]
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
                assert r.json()["error"] == "unavailable"
                assert "shutting down" in r.json()["detail"][0]["message"]
                assert at - stopped < 2
            assert 0 not in replies  # still running
        finally:
            gate.set()
        threads[0].join(20)
    r, _ = replies[0]
    assert r.status_code == 200 and len(r.json()["cells"]) == 3
    metrics = app.state.metrics.registry.get_sample_value
    assert metrics("sdc_rejected_requests_total", {"reason": "overloaded"}) == 2


def test_a_request_cut_by_the_shutdown_period_gets_a_json_503(monkeypatch):
    """When SDC_SHUTDOWN_SECONDS runs out before a request is answered, uvicorn cancels it;
    the caller gets 503 with Retry-After in the usual shape, not a plain-text 500."""
    gate = _gated_sensitivity(monkeypatch)
    app = create_app(Settings(worker_threads=1, queue_depth=0, shutdown_seconds=0.5))
    replies: list = []
    with served(app, app.state.settings) as (server, port):
        thread = threading.Thread(
            target=lambda: replies.append(
                httpx.post(f"http://127.0.0.1:{port}/v1/sensitivity", json=BODY, timeout=30)
            )
        )
        thread.start()
        _wait_for(lambda: app.state.pool.admitted == 1)
        server.should_exit = True
        thread.join(10)
        gate.set()
    (r,) = replies
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.headers["content-type"] == "application/json"
    assert "shutting down" in r.json()["detail"][0]["message"]


def _large_count_table(n: int = 48) -> dict:
    """An n x n count table (2,401 cells with its margins at n = 48, over the inline
    limit of the compute pool), every count 10 but a few of 1 or 2 (sensitive under the
    threshold 3): replies of 200-600 KB."""
    counts = {(f"r{i}", f"c{j}"): 10 for i in range(n) for j in range(n)}
    for i in range(0, n, 7):
        counts[f"r{i}", f"c{(3 * i) % n}"] = 1 + i % 2
    return {
        "structure": {
            "dimensions": [
                {"name": "r", "leaves": [f"r{i}" for i in range(n)]},
                {"name": "c", "leaves": [f"c{j}" for j in range(n)]},
            ]
        },
        "cells": [{"key": list(k), "value": v} for k, v in counts.items()],
        "counts": {"threshold": 3},
    }


def _reply_threads(monkeypatch) -> list[str]:
    """The names of the threads that serialise replies of over 50 KB, as they do."""
    from service.api import responses

    threads: list[str] = []
    dumps = responses.orjson.dumps

    def recorded(*args, **kwargs):
        out = dumps(*args, **kwargs)
        if len(out) > 50_000:
            threads.append(threading.current_thread().name)
        return out

    monkeypatch.setattr(responses.orjson, "dumps", recorded)
    return threads


def test_a_large_frequency_reply_is_serialised_in_the_pool(make_client, monkeypatch):
    """A count table of 100 x 100 codes sent as one cell: its reply of 10,000 cells is
    computed in the pool and serialised there too, not on the event loop (10^6 reply
    cells from a 16 KB request held the loop 0.4-1 s to serialise and as long to free:
    a campaign, h51)."""
    threads = _reply_threads(monkeypatch)
    body = {
        "dimensions": [
            {"name": "k", "codes": [f"k{i}" for i in range(100)]},
            {"name": "y", "codes": [f"y{i}" for i in range(100)]},
        ],
        "cells": [{"key": ["k0", "y0"], "count": 1}],
        "rules": {"threshold": {"t": 3}},
    }
    r = make_client().post("/v1/frequency/sensitivity", json=body)
    assert r.status_code == 200, r.text
    assert len(r.json()["cells"]) == 10_000
    assert threads and all(name.startswith("sdc-compute") for name in threads), threads


def _audit_body() -> dict:
    body = _large_count_table()
    for cell in body["cells"]:
        cell["suppressed"] = cell["value"] < 3 or int(cell["key"][1][1:]) < 12
    return body


def _adjust_body() -> dict:
    body = _large_count_table()
    body.pop("counts")
    body["cells"][0]["protection"] = {"upper": 3, "lower": 3}
    return body


@pytest.mark.parametrize(
    "route, make_body, listed",
    [
        ("/v1/suppress", _large_count_table, 48 * 48),
        ("/v1/audit", _audit_body, 48 * 12),  # the hidden cells
        ("/v1/round", lambda: {**_large_count_table(), "base": 5}, 48 * 48),
        ("/v1/adjust", _adjust_body, 48 * 48),
    ],
)
def test_every_large_reply_is_serialised_in_the_pool(
    make_client, monkeypatch, route, make_body, listed
):
    """The other routes' replies as the frequency route's: serialised where they were
    computed, not on the event loop (until 2026-11-27 only the frequency route's were: a
    suppression reply of 195,000 cells held the loop about 0.2 s)."""
    threads = _reply_threads(monkeypatch)
    r = make_client().post(route, json=make_body())
    assert r.status_code == 200, r.text
    assert len(r.json()["cells"]) >= listed
    assert threads and all(name.startswith("sdc-compute") for name in threads), threads
