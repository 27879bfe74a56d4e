"""Audit speed: feasibility intervals, ours against the naive one-fresh-LP-per-bound baseline.

Run from the repository root::

    python benchmarks/audit.py [--full-naive] [--sample 200] [--seed 7]

Then the full audit (:mod:`benchmarks.aggregations`) on the 100x100 hierarchical and
20x20x10 tables of the suppression benchmark, unless ``--intervals-only``.

Cases: (a) 2-D, 100 x 100 leaves with margins; (b) 3-D, 20 x 20 x 10 leaves with margins;
(c) 2-level hierarchy of 200 leaves in 20 groups of 10, crossed with 50 flat leaves. In
each, about 10% of all cells are suppressed, chosen among the leaf cells with a fixed seed
and topped up so that no relation holds exactly one suppressed cell where another leaf of
it can be added. The naive baseline is timed on a random sample of ``--sample`` LPs and
extrapolated to all ``2 x suppressed`` LPs unless ``--full-naive`` is given; the sampled
intervals are checked against ours.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from service.sdc.audit import feasibility_intervals
from service.sdc.table import Hierarchy, Table
from tests.reference import feasibility_intervals_naive


def flat(name: str, n: int) -> Hierarchy:
    return Hierarchy.flat(name, [f"{name}{i}" for i in range(n)])


def grouped(name: str, n_groups: int, per_group: int) -> Hierarchy:
    children = {"Total": [f"{name}g{g}" for g in range(n_groups)]}
    for g in range(n_groups):
        children[f"{name}g{g}"] = [f"{name}g{g}_{i}" for i in range(per_group)]
    return Hierarchy.from_children(name, children)


def pattern(table: Table, rng: np.random.Generator, share: float = 0.10) -> np.ndarray:
    """About ``share`` of all cells suppressed, leaves only, no relation left with just one."""
    leaves = np.flatnonzero(table.is_leaf)
    suppressed = np.zeros(table.n_cells, dtype=bool)
    suppressed[rng.choice(leaves, size=int(share * table.n_cells), replace=False)] = True
    a = abs(table.relations).tocsr()
    while True:
        count = a @ suppressed
        lonely = np.flatnonzero(count == 1)
        added = False
        for r in lonely:
            members = a.indices[a.indptr[r] : a.indptr[r + 1]]
            free = members[table.is_leaf[members] & ~suppressed[members]]
            if free.size:
                suppressed[rng.choice(free)] = True
                added = True
        if not added:
            return suppressed


def run_case(name: str, table: Table, seed: int, sample: int, full_naive: bool) -> dict:
    # Data and sample draw from separate streams: --full-naive audits the same tables.
    rng, sampler = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    leaf_values = np.where(table.is_leaf, rng.integers(1, 1000, table.n_cells), 0)
    values = table.fill_margins(leaf_values)
    suppressed = pattern(table, rng)

    ours = feasibility_intervals(table, values, suppressed, time_limit=600)
    assert ours.status == "optimal", ours.message

    n_lp_naive = 2 * len(ours.cells)
    if full_naive or n_lp_naive <= sample:
        cells = ours.cells
    else:
        cells = np.sort(sampler.choice(ours.cells, size=sample // 2, replace=False))
    naive = feasibility_intervals_naive(table, values, suppressed, cells=cells, time_limit=3600)
    assert naive.status == "optimal", naive.message
    at = np.searchsorted(ours.cells, cells)
    diff = max(
        np.max(np.abs(ours.lower[at] - naive.lower)), np.max(np.abs(ours.upper[at] - naive.upper))
    )
    measured = len(cells) == len(ours.cells)
    naive_seconds = naive.seconds * (1 if measured else n_lp_naive / naive.n_lp_solves)
    return dict(
        case=name,
        cells=table.n_cells,
        suppressed=len(ours.cells),
        components=ours.n_components,
        lps=ours.n_lp_solves,
        ours=ours.seconds,
        naive_lps=n_lp_naive,
        naive=naive_seconds,
        naive_how="measured" if measured else f"extrapolated from {naive.n_lp_solves}",
        speedup=naive_seconds / ours.seconds,
        max_diff=diff,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--sample", type=int, default=200, help="naive LPs to time when extrapolating (default 200)"
    )
    parser.add_argument(
        "--full-naive",
        action="store_true",
        help="run the naive baseline on every LP instead of a sample",
    )
    parser.add_argument(
        "--intervals-only",
        action="store_true",
        help="skip the full audit of generated tables (several minutes)",
    )
    args = parser.parse_args(argv)
    cases = [
        ("(a) 2-D 100x100", Table([flat("r", 100), flat("c", 100)])),
        ("(b) 3-D 20x20x10", Table([flat("r", 20), flat("c", 20), flat("l", 10)])),
        ("(c) hier 200x50", Table([grouped("h", 20, 10), flat("c", 50)])),
    ]
    rows = [
        run_case(name, table, args.seed + i, args.sample, args.full_naive)
        for i, (name, table) in enumerate(cases)
    ]

    header = (
        f"{'case':<18} {'cells':>6} {'suppr':>6} {'groups':>6} {'LPs':>6} "
        f"{'ours s':>8} {'naive LPs':>9} {'naive s':>9} {'speed-up':>9}  naive timing"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['case']:<18} {r['cells']:>6} {r['suppressed']:>6} {r['components']:>6} "
            f"{r['lps']:>6} {r['ours']:>8.3f} {r['naive_lps']:>9} {r['naive']:>9.2f} "
            f"{r['speedup']:>8.1f}x  {r['naive_how']}"
        )
    worst = max(r["max_diff"] for r in rows)
    print(f"\nlargest |ours - naive| over the checked bounds: {worst:.2e}")
    print("LPs (ours): solves actually run; bounds attained by an earlier optimum need none.")
    if not args.intervals_only:
        # The complete audit (issue 13) on the suppression benchmark's tables: intervals,
        # the explicit unions (the audit before), and every aggregation.
        print("\nFull audit (intervals and every aggregation) of the fast method's patterns:")
        from benchmarks import aggregations

        aggregations.main(["--sizes", "100x100 hier", "20x20x10"])


if __name__ == "__main__":
    main()
