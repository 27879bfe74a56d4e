"""Benchmark of primary sensitivity: engine throughput and HTTP latency.

Run with ``scripts/bench primary`` (or ``python -m benchmarks.primary``). Prints:

* engine throughput in cells per second for p% + (n,k) on one million cells, from
  summaries and from raw contributions with holdings;
* against a real uvicorn server on loopback: requests per second and p50/p99 latency of
  POST /v1/sensitivity for tables of 100 and 10,000 cells.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import orjson

from service.sdc import magnitudes, primary
from service.sdc.rules import Dominance, PPercent
from tests.servers import server

from .loadgen import run_load

RULESET = primary.RuleSet(rules=(PPercent(10), Dominance(1, 85), Dominance(2, 90)))
WIRE_RULES = {
    "rules": [
        {"type": "p_percent", "p": 10},
        {"type": "dominance", "n": 1, "k": 85},
        {"type": "dominance", "n": 2, "k": 90},
    ]
}


def skewed_contributions(rng, n_cells: int, mean_contributors: float = 5.0):
    """Lognormal (skewed) contributions, 1 + Poisson contributors per cell, holdings shared
    by about one contribution in five."""
    sizes = 1 + rng.poisson(mean_contributors - 1, n_cells)
    cell = np.repeat(np.arange(n_cells), sizes)
    value = np.round(rng.lognormal(8, 2, cell.size), 2)
    holding = np.where(
        rng.random(cell.size) < 0.2, rng.integers(0, n_cells // 4 + 1, cell.size), -1
    )
    return cell, value, holding


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def engine(n_cells: int) -> None:
    rng = np.random.default_rng(1)
    cell, value, holding = skewed_contributions(rng, n_cells)
    m = magnitudes.from_contributions(n_cells, cell, value, depth=RULESET.depth)
    total, count, largest = m.total, m.count, m.largest.copy()
    largest[np.arange(m.depth) >= count[:, None]] = np.nan  # summaries list only real ones

    t_sum = best_of(
        lambda: primary.assess(
            magnitudes.from_summaries(total, count, largest, depth=RULESET.depth), RULESET
        )
    )
    t_raw = best_of(
        lambda: primary.assess(
            magnitudes.from_contributions(
                n_cells, cell, value, holding=holding, depth=RULESET.depth
            ),
            RULESET,
        )
    )
    print(f"engine, {n_cells:,} cells, p% + (1,85) + (2,90):")
    print(
        f"  from summaries                       {n_cells / t_sum / 1e6:8.2f} M cells/s  "
        f"({t_sum:.3f} s)"
    )
    print(
        f"  from contributions with holdings     {n_cells / t_raw / 1e6:8.2f} M cells/s  "
        f"({t_raw:.3f} s, {cell.size:,} contributions)"
    )


def request_body(n_cells: int, rng) -> bytes:
    cell, value, _ = skewed_contributions(rng, n_cells)
    cells = [{"key": [f"r{i // 100}", f"c{i % 100}"], "contributions": []} for i in range(n_cells)]
    for c, v in zip(cell.tolist(), value.tolist()):
        cells[c]["contributions"].append({"value": v})
    return orjson.dumps({"cells": cells, "rules": WIRE_RULES})


def http(seconds: float, workers: int) -> None:
    rng = np.random.default_rng(2)
    small, large = request_body(100, rng), request_body(10_000, rng)
    print(
        f"HTTP POST /v1/sensitivity, uvicorn on loopback, {workers} worker(s), "
        f"{seconds:.0f} s per line (closed loop):"
    )
    with server(workers=workers) as srv:
        url = srv.url
        run_load(url, "/v1/sensitivity", small, connections=4, seconds=1)  # warm-up
        for connections in (1, 4, 16):
            r = run_load(url, "/v1/sensitivity", small, connections=connections, seconds=seconds)
            print("  " + r.line(f"100 cells, {connections} connections"))
        for connections in (1, 2):
            r = run_load(url, "/v1/sensitivity", large, connections=connections, seconds=seconds)
            print("  " + r.line(f"10,000 cells, {connections} connections"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    engine(args.cells)
    for workers in args.workers:
        http(args.seconds, workers)


if __name__ == "__main__":
    main()
