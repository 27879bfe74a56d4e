"""Online filter latency: ``POST /v1/filter`` with a 50-cell answer at a fixed request rate
against a real server on loopback. Run with ``scripts/bench filter`` (not part of CI).

Open loop, so that a slow reply cannot hide the requests that would have queued behind it
(coordinated omission): request ``i`` is due at ``t0 + i / rate``; it goes out on the first
free keep-alive connection, and its latency is counted from when it was due, not from when
it was sent. The server runs with API keys (the filter role's key is checked on every
request, as in production), a noise secret, and a profile file holding the two policies.

Scenarios (``--seconds`` each, default 30, after a 3 s warm-up):

* ``noise``: the ARMS approach, 50 magnitude cells with 4-8 contributions each and their
  respondent and enterprise ids (multipliers, noisy tabulation, the three criteria), sent
  as ``microdata`` columns and as contribution objects;
* ``refuse``: the AQS approach on the same answers (p%-rule and minimum frequency);
* ``refuse, counts``: the AQS approach on 50 count cells.

Below each scenario's line: the machine's speed for the same work just before the pass
(:func:`work_probe`) and its stalls during it (:mod:`benchmarks.machine`), to tell a slow
server from a slow machine. ``--busy-neighbours N`` keeps N processes spinning on the CPU
during the run, to see the headroom.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import machine
from benchmarks.load import FILTER_KEY, _read_reply, _request
from schemas.filter import FilterRequest
from schemas.profiles import Profile
from service import api_keys
from service.pipeline.query_filter import screen
from tests.generate import FILTER_QUERY, filter_answer
from tests.servers import ROOT, Server, server

RULES = {"rules": [{"type": "p_percent", "p": 10}, {"type": "frequency", "n": 3}]}
QUERY_RULES = {
    "max_dimensions": 3,
    "min_area_population": {"county": 20000},
    "forbidden_combinations": [["age", "occupation"]],
}
PROFILES = {
    "profiles": {
        "online-noise": {
            "rules": RULES,
            "filter": {
                "query": QUERY_RULES,
                "statistical": {
                    "approach": "noise",
                    "d": 0.1,
                    "jitter": 0.03,
                    "ratio_range": [0.85, 1.15],
                    "min_weighted_count": 3,
                    "p": 10,
                },
            },
        },
        "online-refuse": {
            "rules": RULES,
            "filter": {"query": QUERY_RULES, "statistical": {"approach": "refuse"}},
        },
    }
}
#: name: (profile, form of the answer, seed of its figures)
SCENARIOS = {
    "noise, microdata": ("online-noise", "microdata", 1),
    "noise, objects": ("online-noise", "objects", 1),
    "refuse, microdata": ("online-refuse", "microdata", 1),
    "refuse, objects": ("online-refuse", "objects", 1),
    "refuse, counts": ("online-refuse", "counts", 2),
}
NOISE_SECRET = "benchmark-noise-secret-0123456789"


async def _open_loop(
    port: int, raw: bytes, rate: float, seconds: float, connections: int
) -> tuple[np.ndarray, dict, float]:
    """Send ``raw`` at ``rate`` per second for ``seconds``; latencies from due times."""
    n = int(rate * seconds)
    due = asyncio.Queue()
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async def connection():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                t_due = await due.get()
                if t_due is None:
                    return
                writer.write(raw)
                status, _ = await _read_reply(reader)
                latencies.append(time.perf_counter() - t_due)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    workers = [asyncio.create_task(connection()) for _ in range(connections)]
    start = time.perf_counter()
    for i in range(n):
        t_due = start + i / rate
        delay = t_due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due.put_nowait(t_due)
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
    return np.array(latencies), statuses, time.perf_counter() - start


def measure(srv: Server, body: dict, rate: float, seconds: float, connections: int) -> str:
    """One scenario's line: throughput, latency percentiles from due times, the CPU the
    server and this client spent per request (on a shared 2-core machine the client's share
    is CPU the server does not get), and the state of the machine: its speed before the
    pass (:func:`work_probe`) and its stalls during it (:func:`machine.watch`)."""
    raw = _request("/v1/filter", orjson.dumps(body), FILTER_KEY)
    asyncio.run(_open_loop(srv.port, raw, rate, 3, connections))  # warm-up
    speed = work_probe(body)
    with machine.watch() as stalls:
        server_cpu, client_cpu = srv.cpu_seconds(), time.process_time()
        lat, statuses, elapsed = asyncio.run(_open_loop(srv.port, raw, rate, seconds, connections))
        server_ms = (srv.cpu_seconds() - server_cpu) / len(lat) * 1000
        client_ms = (time.process_time() - client_cpu) / len(lat) * 1000
    ms = lat * 1000
    return (
        f"{len(lat) / elapsed:5.0f} req/s  p50 {np.percentile(ms, 50):6.2f} ms  "
        f"p90 {np.percentile(ms, 90):6.2f} ms  p99 {np.percentile(ms, 99):6.2f} ms  "
        f"max {ms.max():7.2f} ms  CPU/req server {server_ms:4.2f} ms client "
        f"{client_ms:4.2f} ms  statuses {dict(sorted(statuses.items()))}\n"
        f"  {'':<18} same work in this process {speed:.2f} ms (server CPU outside it "
        f"{server_ms / speed - 1:.2f}x of it), {stalls.line()}"
    )


def work_probe(body: dict, repeat: int = 200) -> float:
    """Milliseconds (best of ``repeat``) this process takes to validate ``body`` and run the
    filter on it, as the server does, without HTTP: the machine's speed for this very work
    just before the pass. On this virtual machine the same code's CPU per request moved by
    up to 40 % between passes without any steal time; a pure-Python loop did not show it."""
    raw = orjson.dumps(body)
    profile = Profile.model_validate(PROFILES["profiles"][body["profile"]])
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        request = FilterRequest.model_validate_json(raw)
        screen(request, profile.rules, profile.filter, NOISE_SECRET.encode(), False)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rate",
        type=float,
        nargs="+",
        default=[500, 750, 1000],
        help="requests per second (one pass of every scenario per rate)",
    )
    parser.add_argument("--seconds", type=float, default=30, help="per scenario")
    parser.add_argument("--cells", type=int, default=50)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1, help="SDC_WORKERS (processes)")
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument(
        "--busy-neighbours",
        type=int,
        default=0,
        metavar="N",
        help="processes spinning on the CPU during the run (a noisy neighbour)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="checkout of an earlier version (git worktree add /tmp/before REV): its server "
        "runs the same passes, alternating with this one, --rounds times",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --before")
    args = parser.parse_args()

    bodies = {
        name: {
            "profile": profile,
            "query": FILTER_QUERY,
            "cells": filter_answer(args.cells, seed, form),
        }
        for name, (profile, form, seed) in SCENARIOS.items()
        if name in args.scenario
    }
    with tempfile.TemporaryDirectory() as tmp:
        key_file, profiles = Path(tmp) / "keys.json", Path(tmp) / "profiles.json"
        key_file.write_text(
            json.dumps(
                {
                    "keys": [
                        {
                            "id": "load-filter",
                            "role": "filter",
                            # sha256: a hash every earlier version (--before) reads too
                            "hash": api_keys.hash_key(FILTER_KEY, method="sha256"),
                        }
                    ]
                }
            )
        )
        profiles.write_text(json.dumps(PROFILES))
        env = {
            "SDC_API_KEYS_FILE": str(key_file),
            "SDC_PROFILES": str(profiles),
            "SDC_NOISE_SECRET": NOISE_SECRET,
        }
        versions = [("", ROOT)]
        if args.before is not None:
            versions = [("current", ROOT), ("before", args.before.resolve())]
        for round_ in range(args.rounds if args.before is not None else 1):
            for label, root in versions if round_ % 2 == 0 else versions[::-1]:
                with (
                    server(env, workers=args.workers, root=root) as srv,
                    machine.busy_neighbours(args.busy_neighbours),
                ):
                    for rate in args.rate:
                        print(
                            f"{label + ': ' if label else ''}POST /v1/filter, {args.cells} "
                            f"cells, open loop at {rate:.0f} req/s for {args.seconds:.0f} s per "
                            f"scenario, {args.connections} connections, {args.workers} server "
                            f"process(es), {args.busy_neighbours} busy neighbour(s), latency "
                            f"from each request's due time; load average before: "
                            f"{os.getloadavg()[0]:.2f}"
                        )
                        for name, body in bodies.items():
                            line = measure(srv, body, rate, args.seconds, args.connections)
                            print(f"  {name:<18} {line}", flush=True)


if __name__ == "__main__":
    main()
