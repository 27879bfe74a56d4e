"""The complete aggregation check (issue 13): its cost in the audit, and what it changes.

Run with ``scripts/bench aggregations`` (or ``python -m benchmarks.aggregations``)::

    python -m benchmarks.aggregations [--sizes 30x30 "100x100 hier" 20x20x10] [--seed 0]
        [--before PATH] [--fast-limit 600]

Per generated instance (:mod:`benchmarks.suppress`: p%-rule p = 15 plus minimum frequency
3, cost = value) the fast method's pattern is audited three ways, back to back in one
process: the feasibility intervals alone; the intervals with the explicit unions (one
relation each: the audit before issue 13); and the full audit (intervals, derived cells
and every aggregation: :func:`service.sdc.aggregations.check_aggregations`). With
``--before PATH`` (a checkout of an earlier version, e.g. ``git worktree add /tmp/old
4244cd6``) the earlier fast method runs on the same instance in a subprocess and its
pattern gets the same full audit, which shows whether it was safe.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.suppress import instance
from service.sdc.audit import audit_pattern, feasibility_intervals
from service.sdc.suppress import suppress

_BEFORE = """
import json, sys, time, numpy as np
sys.path.insert(0, {root!r})
from benchmarks.suppress import instance
from service.sdc.suppress import suppress
inst = instance({name!r}, {seed})
g = inst.g
t = time.perf_counter()
r = suppress(g.table, g.values, inst.sensitive, inst.upl, inst.lpl, cost=inst.cost,
             unions=inst.unions, method="fast", time_limit={limit})
print(json.dumps({{"seconds": time.perf_counter() - t, "status": r.status,
                  "suppressed": np.flatnonzero(r.suppressed).tolist()}}))
"""


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def audit_three_ways(inst, y):
    g = inst.g
    iv, t_iv = timed(lambda: feasibility_intervals(g.table, g.values, y, time_limit=600))
    _, t_unions = timed(lambda: inst.unions.check(g.table, g.values, y, inst.sensitive))
    full, t_full = timed(lambda: audit_pattern(inst.problem, y, time_limit=600))
    agg = full.aggregations
    return dict(
        intervals_s=t_iv,
        before_s=t_iv + t_unions,
        full_s=t_full,
        verdict=full.verdict,
        aggregations=agg.status if agg else "-",
        groups=agg.groups if agg else 0,
        screened=agg.screened if agg else 0,
        mips=agg.mip_solves if agg else 0,
        derived=len(full.derived),
        reasons="; ".join(full.reasons),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["30x30", "100x100 hier", "20x20x10"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", type=Path, help="checkout of an earlier version")
    parser.add_argument("--fast-limit", type=float, default=600.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for name in args.sizes:
        inst = instance(name, args.seed)
        g = inst.g
        r, t_fast = timed(
            lambda inst=inst: suppress(
                inst.problem, cost=inst.cost, method="fast", time_limit=args.fast_limit
            )
        )
        row = dict(
            size=name,
            cells=g.n_cells,
            primary=int(inst.sensitive.sum()),
            fast_s=t_fast,
            fast_status=r.status,
            secondary=int(r.secondary.sum()),
            value_pct=100 * float(np.abs(g.values)[r.suppressed].sum() / np.abs(g.values).sum()),
        )
        if r.status != "no_safe_pattern":
            row.update(audit_three_ways(inst, r.suppressed))
        if args.before:
            code = _BEFORE.format(
                root=str(args.before), name=name, seed=args.seed, limit=args.fast_limit
            )
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, cwd=args.before
            )
            before = json.loads(out.stdout.strip().splitlines()[-1])
            y = np.zeros(g.n_cells, bool)
            y[before["suppressed"]] = True
            row.update(
                before_fast_s=before["seconds"],
                before_status=before["status"],
                before_secondary=int((y & ~inst.sensitive).sum()),
            )
            if y.any():
                b = audit_three_ways(inst, y)
                row.update(before_verdict=b["verdict"], before_aggregations=b["aggregations"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(
        f"{'size':<13} {'cells':>6} {'prim':>5} {'fast s':>7} {'sec':>5} {'value%':>6} "
        f"{'interv s':>8} {'before s':>8} {'full s':>7} {'ratio':>6} {'groups':>6} "
        f"{'screen':>6} {'MIPs':>4} verdict"
    )
    for r in rows:
        if "full_s" not in r:
            print(
                f"{r['size']:<13} {r['cells']:>6} {r['primary']:>5} {r['fast_s']:>7.1f} "
                f"{r['fast_status']}"
            )
            continue
        print(
            f"{r['size']:<13} {r['cells']:>6} {r['primary']:>5} {r['fast_s']:>7.1f} "
            f"{r['secondary']:>5} {r['value_pct']:>6.2f} {r['intervals_s']:>8.2f} "
            f"{r['before_s']:>8.2f} {r['full_s']:>7.2f} {r['full_s'] / r['before_s']:>5.1f}x "
            f"{r['groups']:>6} {r['screened']:>6} {r['mips']:>4} {r['verdict']}"
        )
        if "before_fast_s" in r:
            print(
                f"{'  earlier fast':<13} {'':>6} {'':>5} {r['before_fast_s']:>7.1f} "
                f"{r['before_secondary']:>5}  full audit of its pattern: "
                f"{r.get('before_verdict', '-')} (aggregations "
                f"{r.get('before_aggregations', '-')})"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
