"""Load test: a mix of the service's routes for a fixed time, then a run that saturates
the compute pool. Run with ``scripts/bench load`` (not part of CI).

Bounded by construction: one server on 127.0.0.1 started here, with API keys (so the
key check is part of what is measured), a fixed number of keep-alive connections, a fixed
duration, and it stops by itself.

1. **Mixed** (``--seconds``, default 60): closed-loop connections, each sending one kind
   of request: the online filter on a 50-cell answer (``/v1/filter``, noise approach,
   filter role), primary sensitivity of 100 cells (filter role), audit of a 20 x 20 table
   with margins and a suppression pattern, secondary suppression of a 10 x 10 table,
   and one connection cycling through the OpenAPI example of every other ``/v1``
   operation (so routes added later are included). Expected: no status
   other than 200, and 503 only by design.
2. **Saturation** (``--saturate-seconds``, default 30): many connections send tables
   large enough for the pool (``INLINE_CELLS``) without honouring Retry-After, while a probe
   times ``/healthz`` every 50 ms. Expected: 503s, each with Retry-After; health answered
   throughout; the server alive, its RSS (``process_resident_memory_bytes``) not growing
   from one saturation pass to the next.

Between them, **one large request at a time** (``--sequential-seconds``): the same large
table on one connection, for the server's CPU per large request. Under saturation the
admitted large requests take nearly all of one CPU, so the rate of 503s is what is left
over: a few per cent more per admitted request shows as far fewer 503s per second. This
pass measures that cost directly.

``--before PATH`` (a checkout of an earlier version: ``git worktree add /tmp/before REV``)
runs the same passes against it with this interpreter, ``--rounds`` times in alternating
order, and prints the medians side by side with their ratios: the machines are shared and
their speed drifts by tens of per cent within minutes, so only figures taken back to back
compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service import api_keys
from service.api.compute_pool import INLINE_CELLS
from tests.servers import ROOT, server

FILTER_KEY = "load-filter.local-benchmark-key-0001"
ANALYST_KEY = "load-analyst.local-benchmark-key-0002"
RULES = {"rules": [{"type": "p_percent", "p": 10}, {"type": "frequency", "n": 3}]}


@dataclass
class Tally:
    """Replies of one kind of request."""

    latencies: list = field(default_factory=list)
    statuses: dict = field(default_factory=dict)
    missing_retry_after: int = 0

    def add(self, status: int, seconds: float, retry_after: bool) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status == 503 and not retry_after:
            self.missing_retry_after += 1
        if status == 200:
            self.latencies.append(seconds)

    @property
    def count(self) -> int:
        return sum(self.statuses.values())

    def line(self, label: str, seconds: float) -> str:
        ms = np.array(self.latencies) * 1000
        p50, p99 = (np.percentile(ms, 50), np.percentile(ms, 99)) if ms.size else (np.nan,) * 2
        share = self.statuses.get(503, 0) / max(self.count, 1)
        return (
            f"{label:<26} {self.count / seconds:8.1f} req/s  p50 {p50:8.2f} ms  "
            f"p99 {p99:8.2f} ms  503 {share:6.1%}  statuses {dict(sorted(self.statuses.items()))}"
        )


def _request(path: str, body: bytes, key: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"X-API-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _read_reply(reader) -> tuple[int, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    length, retry_after = 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"retry-after":
            retry_after = value.strip().isdigit()
    await reader.readexactly(length)
    return int(head[9:12]), retry_after


async def _client(
    port: int, requests: list[tuple[str, bytes]], stop_at: float, tallies: dict[str, Tally]
) -> None:
    """One keep-alive connection sending ``requests`` in turn until ``stop_at``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        i = 0
        while time.perf_counter() < stop_at:
            label, raw = requests[i % len(requests)]
            i += 1
            start = time.perf_counter()
            writer.write(raw)
            status, retry_after = await _read_reply(reader)
            tallies.setdefault(label, Tally()).add(status, time.perf_counter() - start, retry_after)
    finally:
        writer.close()


async def _probe(port: int, stop_at: float, latencies: list, failures: list) -> None:
    """``GET /healthz`` every 50 ms on a connection of its own."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            status, _ = await asyncio.wait_for(_read_reply(reader), 10)
            latencies.append(time.perf_counter() - start)
            if status != 200:
                failures.append(status)
            await asyncio.sleep(0.05)
    finally:
        writer.close()


def run(port: int, mix: list[list[tuple[str, bytes]]], seconds: float, *, probe: bool = False):
    tallies: dict[str, Tally] = {}
    health: list[float] = []
    failures: list[int] = []

    async def main():
        stop_at = time.perf_counter() + seconds
        jobs = [_client(port, requests, stop_at, tallies) for requests in mix]
        if probe:
            jobs.append(_probe(port, stop_at, health, failures))
        await asyncio.gather(*jobs)

    start = time.perf_counter()
    asyncio.run(main())
    return tallies, time.perf_counter() - start, np.array(health) * 1000, failures


def report(title: str, tallies: dict[str, Tally], seconds: float) -> Tally:
    print(title)
    total = Tally()
    for label, t in sorted(tallies.items()):
        print("  " + t.line(label, seconds))
        total.latencies += t.latencies
        total.missing_retry_after += t.missing_retry_after
        for s, n in t.statuses.items():
            total.statuses[s] = total.statuses.get(s, 0) + n
    print("  " + total.line("all", seconds))
    return total


def table(n_rows: int, n_cols: int, seed: int) -> tuple[list, list]:
    """A 2-D table of contributions (1 to 5 per cell); margins left to the service, which
    pools the leaves' contributions into them (summaries cannot be pooled)."""
    rng = np.random.default_rng(seed)
    dims = [
        {"name": "r", "leaves": [f"r{i}" for i in range(n_rows)]},
        {"name": "c", "leaves": [f"c{j}" for j in range(n_cols)]},
    ]
    cells = []
    for i in range(n_rows):
        for j in range(n_cols):
            k = int(rng.integers(1, 6))
            values = sorted(rng.integers(1, 1000, k).tolist(), reverse=True)
            cells.append(
                {"key": [f"r{i}", f"c{j}"], "contributions": [{"value": float(v)} for v in values]}
            )
    return dims, cells


def post(url: str, path: str, body: dict, key: str) -> dict:
    req = urllib.request.Request(
        url + path,
        data=orjson.dumps(body),
        headers={"content-type": "application/json", "x-api-key": key},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def audit_body(url: str, n: int) -> dict:
    """An n x n table with the pattern the service's own suppression chose for it."""
    dims, cells = table(n, n, seed=n)
    found = post(
        url,
        "/v1/suppress",
        {"structure": {"dimensions": dims}, "cells": cells, "rules": RULES, "method": "fast"},
        ANALYST_KEY,
    )
    hidden = {tuple(c["key"]) for c in found["cells"] if c["status"] != "published"}
    return {
        "structure": {"dimensions": dims},
        "rules": RULES,
        "cells": [{**c, "suppressed": tuple(c["key"]) in hidden} for c in cells],
    }


def sensitivity_body(n_cells: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    cells = []
    for i in range(n_cells):
        values = rng.lognormal(8, 1.5, int(rng.integers(1, 8)))
        cells.append(
            {
                "key": [f"a{i // 100}", f"b{i % 100}"],
                "contributions": [{"value": round(float(v), 2)} for v in values],
            }
        )
    return {"cells": cells, "rules": RULES}


def example_requests(url: str, covered: set[str]) -> list[tuple[str, bytes]]:
    """The OpenAPI example of every /v1 POST operation not covered by a dedicated mix."""
    spec = json.loads(urllib.request.urlopen(url + "/openapi.json", timeout=10).read())
    out = []
    for path, item in sorted(spec["paths"].items()):
        op = item.get("post")
        if not path.startswith("/v1/") or path in covered or op is None:
            continue
        content = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        schema = content.get("schema", {})
        if "$ref" in schema:
            schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        examples = schema.get("examples") or [
            e["value"] for e in content.get("examples", {}).values()
        ]
        if examples:
            out.append((path, _request(path, orjson.dumps(examples[0]), ANALYST_KEY)))
    return out


def filter_body() -> dict:
    """A 50-cell query answer for the noise profile of ``benchmarks.filter``."""
    from tests.generate import FILTER_QUERY, filter_answer

    return {"profile": "online-noise", "query": FILTER_QUERY, "cells": filter_answer(50, 1)}


def rss_mib(url: str) -> float:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith("process_resident_memory_bytes "):
            return float(line.split()[1]) / 2**20
    return float("nan")


def _key_file(path: Path, method: str) -> None:
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {
                        "id": "load-filter",
                        "role": "filter",
                        "hash": api_keys.hash_key(FILTER_KEY, method=method),
                    },
                    {
                        "id": "load-analyst",
                        "role": "analyst",
                        "hash": api_keys.hash_key(ANALYST_KEY, method=method),
                    },
                ]
            }
        )
    )


def measure(root: Path, args: argparse.Namespace, key_method: str) -> dict[str, float]:
    """Every pass against the service checked out at ``root``; the figures to compare."""
    from benchmarks.filter import PROFILES

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        key_file = Path(tmp) / "keys.json"
        _key_file(key_file, key_method)
        profiles = Path(tmp) / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        env = {
            "SDC_API_KEYS_FILE": str(key_file),
            "SDC_WORKER_THREADS": str(args.threads),
            "SDC_QUEUE_DEPTH": str(args.queue),
            "SDC_PROFILES": str(profiles),
            "SDC_NOISE_SECRET": "load-test-noise-secret-0123456789",
        }
        with server(env, root=root) as srv:
            url, port = srv.url, srv.port
            print(f"# {root}")
            mix = _mix(url, args.filter_connections)
            run(port, mix, 3)  # warm-up
            rss_start = rss_mib(url)
            cpu = srv.cpu_seconds()
            tallies, seconds, _, _ = run(port, mix, args.seconds)
            total = report(
                f"Mixed load, {args.seconds:.0f} s, {len(mix)} connections "
                f"(pool {args.threads} threads + {args.queue} queued):",
                tallies,
                seconds,
            )
            figures["mixed: requests/s"] = total.count / seconds
            figures["mixed: server CPU ms per request"] = (
                1000 * (srv.cpu_seconds() - cpu) / max(total.count, 1)
            )
            filter_ms = np.array(tallies["filter 50 cells"].latencies) * 1000
            figures["mixed: filter p99 ms"] = float(np.percentile(filter_ms, 99))
            unexpected = {s: n for s, n in total.statuses.items() if s not in (200, 503)}
            print(
                f"  unexpected statuses: {unexpected or 'none'}; RSS {rss_start:.0f} -> "
                f"{rss_mib(url):.0f} MiB"
            )

            big = _request(
                "/v1/sensitivity", orjson.dumps(sensitivity_body(INLINE_CELLS * 2, 2)), ANALYST_KEY
            )
            label = "sensitivity 4,000 cells"
            cpu = srv.cpu_seconds()
            tallies, seconds, _, _ = run(port, [[(label, big)]], args.sequential_seconds)
            total = report(
                f"One large request at a time, {args.sequential_seconds:.0f} s:", tallies, seconds
            )
            per_request = 1000 * (srv.cpu_seconds() - cpu) / max(total.count, 1)
            figures["sequential: server CPU ms per large request"] = per_request
            print(f"  server CPU per request {per_request:.1f} ms")

            heavy = [[(label, big)]] * args.saturate_connections
            rss = [rss_mib(url)]
            for n in (1, 2):
                tallies, seconds, health, failures = run(
                    port, heavy, args.saturate_seconds, probe=True
                )
                total = report(
                    f"Saturation pass {n}, {args.saturate_seconds:.0f} s, "
                    f"{args.saturate_connections} connections not honouring "
                    "Retry-After:",
                    tallies,
                    seconds,
                )
                rss.append(rss_mib(url))
                print(
                    f"  503 without Retry-After: {total.missing_retry_after}; /healthz "
                    f"{health.size} probes, p50 {np.percentile(health, 50):.2f} ms, p99 "
                    f"{np.percentile(health, 99):.2f} ms, max {health.max():.2f} ms, "
                    f"failed {len(failures)}"
                )
                figures[f"saturation {n}: requests/s"] = total.count / seconds
                figures[f"saturation {n}: admitted (200) per s"] = (
                    total.statuses.get(200, 0) / seconds
                )
                figures[f"saturation {n}: /healthz p50 ms"] = float(np.percentile(health, 50))
            print(
                f"RSS: before saturation {rss[0]:.0f} MiB, after pass 1 {rss[1]:.0f} MiB, "
                f"after pass 2 {rss[2]:.0f} MiB; server alive: "
                f"{urllib.request.urlopen(url + '/healthz', timeout=5).status == 200}"
            )
    return figures


def _mix(url: str, filter_connections: int) -> list[list[tuple[str, bytes]]]:
    dims, cells = table(10, 10, seed=1)
    suppress = {"structure": {"dimensions": dims}, "cells": cells, "rules": RULES, "method": "fast"}
    sens = _request("/v1/sensitivity", orjson.dumps(sensitivity_body(100, 1)), FILTER_KEY)
    online = _request("/v1/filter", orjson.dumps(filter_body()), FILTER_KEY)
    mix = [[("filter 50 cells", online)]] * (filter_connections - 1) + [
        [("sensitivity 100 cells", sens)],
        [("audit 20x20", _request("/v1/audit", orjson.dumps(audit_body(url, 20)), ANALYST_KEY))],
        [("suppress 10x10 fast", _request("/v1/suppress", orjson.dumps(suppress), ANALYST_KEY))],
    ]
    others = example_requests(url, {"/v1/sensitivity", "/v1/audit", "/v1/suppress", "/v1/filter"})
    if others:
        mix.append(others)
    return mix


def compare(results: dict[str, list[dict[str, float]]]) -> None:
    """Medians over the rounds, side by side, with the ratio current / before."""
    (now, now_runs), (then, then_runs) = results.items()
    print(f"\nMedians over {len(now_runs)} alternating rounds ({now} / {then}):")
    print(f"  {'figure':<48} {now:>10} {then:>10} {'ratio':>7}")
    for name in now_runs[0]:
        a = median(r[name] for r in now_runs)
        b = median(r[name] for r in then_runs)
        print(f"  {name:<48} {a:10.2f} {b:10.2f} {a / b if b else float('nan'):7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--sequential-seconds", type=float, default=10)
    parser.add_argument("--saturate-seconds", type=float, default=30)
    parser.add_argument("--filter-connections", type=int, default=4)
    parser.add_argument("--saturate-connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="SDC_WORKER_THREADS")
    parser.add_argument("--queue", type=int, default=2, help="SDC_QUEUE_DEPTH")
    parser.add_argument("--before", type=Path, help="checkout of an earlier version")
    parser.add_argument("--rounds", type=int, default=3, help="with --before: alternations")
    args = parser.parse_args()

    if args.before is None:
        measure(ROOT, args, api_keys.METHODS[0])
        return
    # Hashes both versions read: the earlier ones predate HMAC keys.
    versions = {"current": ROOT, "before": args.before.resolve()}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    for i in range(args.rounds):
        order = list(versions) if i % 2 == 0 else list(reversed(versions))
        for name in order:
            results[name].append(measure(versions[name], args, "sha256"))
    compare(results)


if __name__ == "__main__":
    main()
