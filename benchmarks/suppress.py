"""Secondary suppression benchmark: our fast and exact methods, tau-ARGUS OPT and MOD, and our
audit of every pattern.

Run with ``scripts/bench suppress`` (or ``python -m benchmarks.suppress``)::

    python -m benchmarks.suppress [--sizes 10x10 30x30 ...] [--seed 0]
        [--fast-limit 600] [--exact-limit 120] [--tau-limit 120] [--no-tauargus]
        [--criterion aggregations|intervals] [--work-limit UNITS]

Instances: :data:`tests.generate.SIZES` (10x10, 30x30, 100x100 with a 2-level
hierarchy on both dimensions, 20x20x10, 250x200 = 50,451 cells), generated with ``--seed``:
skewed (lognormal) contributions, 10% empty leaf cells, 5% singletons, 5% pairs, one
respondent per contribution. Primary cells and protection levels: p%-rule p = 15 (one
intruder) plus minimum frequency 3 (seed 000, "Sensitivity rules" and "Upper protection
levels"; frequency protection range 0) by :func:`service.sdc.primary.assess`. Cost: the cell
value (tau-ARGUS' default for OPT). A-priori bounds: non-negativity.

Per size and method: primary cells, secondary cells, share of the table's value suppressed
(``sum |a_j|`` over suppressed cells over all cells, margins included, as ``/v1/suppress``
reports it), seconds, the proven gap (exact), the method's own status, and the verdict of
an independent run of :func:`service.sdc.audit.audit_pattern` (intervals against the
protection levels, plus implicitly published unions of suppressed cells judged by the same
rules on their pooled contributions) on the pattern returned. tau-ARGUS (optional extra
``tauargus``, :mod:`benchmarks.tauargus`) is run on the same microdata and rules when it can
run; its patterns are audited with the same audit, our protection levels and unions. A
tau-ARGUS pattern that fails the audit gets a second row, "MOD made safe" ("OPT made
safe"): that pattern with every cell forced, completed by our fast method (seconds:
tau-ARGUS's plus ours), so that its value can be compared among safe patterns.

``--criterion intervals`` judges every pattern by its intervals alone (no contributions
sent, so neither our methods nor the audit look at aggregations of suppressed cells): the
criterion of tau-ARGUS and of GaussSuppression's interval mode, for a like-for-like
comparison of value; the default ``aggregations`` is the service's own criterion.

``--work-limit UNITS`` runs our methods in deterministic mode (``suppress(...,
work_limit=UNITS)``: their time boxes in solver work instead of seconds), so that the
same code gives the same patterns however busy the machine is, and reports the solver
work each used: the way to compare two versions' value, and their effort, on a shared
machine. ``1.2e7`` is about what the 600 s of ``--fast-limit`` would buy.

The exact method runs on every size up to 20,000 cells; the 50,451-cell table gets the fast
method only (and tau-ARGUS MOD). Heavy: the large sizes take minutes each on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from service.sdc import primary
from service.sdc.audit import audit_pattern
from service.sdc.problem import TableProblem
from service.sdc.rules import MinimumFrequency, PPercent
from service.sdc.suppress import cell_costs, suppress
from service.sdc.unions import UnionSource
from tests import generate as gen

RULES = primary.RuleSet(rules=(PPercent(15), MinimumFrequency(3)))
EXACT_MAX_CELLS = 20_000
TAU_OPT_MAX_CELLS = 20_000


@dataclass
class Row:
    size: str
    cells: int
    method: str
    primary: int
    secondary: int | None
    value_share: float | None
    seconds: float
    gap: float | None
    status: str
    audit: str
    audit_seconds: float | None
    note: str = ""
    #: Solver work the search used (deterministic mode, ``--work-limit``), else None.
    work: float | None = None


@dataclass
class Instance:
    name: str
    g: gen.GeneratedTable
    sensitive: np.ndarray
    upl: np.ndarray
    lpl: np.ndarray
    unions: UnionSource | None  # None: intervals only (``--criterion intervals``)
    cost: np.ndarray

    @property
    def problem(self) -> TableProblem:
        return TableProblem.of(
            self.g.table, self.g.values, self.sensitive, self.upl, self.lpl, unions=self.unions
        )


def instance(name: str, seed: int, aggregations: bool = True) -> Instance:
    g = gen.preset(name, seed=seed)
    m = g.magnitudes(RULES.depth)
    v = primary.assess(m, RULES)
    return Instance(
        name,
        g,
        v.sensitive,
        v.upper_protection,
        v.lower_protection,
        UnionSource(m, RULES, contributions=g.contributions) if aggregations else None,
        cell_costs("value", g.values, g.counts),
    )


def audit(inst: Instance, suppressed: np.ndarray, time_limit: float):
    start = time.perf_counter()
    a = audit_pattern(inst.problem, suppressed, time_limit=time_limit)
    return a, time.perf_counter() - start


def value_share(inst: Instance, suppressed: np.ndarray) -> float:
    a = np.abs(inst.g.values)
    return float(a[suppressed].sum() / a.sum())


def ours(
    inst: Instance, method: str, time_limit: float, forced=None, work_limit: float | None = None
) -> Row:
    g = inst.g
    r = suppress(
        inst.problem,
        cost=inst.cost,
        method=method,
        time_limit=time_limit,
        forced=forced,
        work_limit=work_limit,
    )
    found = r.status != "no_safe_pattern"
    verdict, audit_s, note = "-", None, ""
    if found:
        a, audit_s = audit(inst, r.suppressed, max(time_limit, 120.0))
        verdict = a.verdict
        if not a.safe:
            note = "; ".join(a.reasons)
    else:
        note = r.message
    gap = r.gap if method == "exact" and np.isfinite(r.gap) else None
    return Row(
        inst.name,
        g.n_cells,
        method,
        int(inst.sensitive.sum()),
        int(r.secondary.sum()) if found else None,
        value_share(inst, r.suppressed) if found else None,
        r.seconds,
        gap,
        r.status,
        verdict,
        audit_s,
        note,
        r.work,
    )


def tau(
    inst: Instance, method: str, time_limit: float, work_limit: float | None = None
) -> list[Row]:
    """tau-ARGUS's row, and when its pattern fails our audit a second row: that pattern
    made safe by our fast method with every one of its cells forced (the cheapest repair
    this service knows; its seconds are tau-ARGUS's plus ours), so that its value can be
    set against safe patterns; ``work_limit`` as in :func:`ours`, for that repair."""
    from . import tauargus

    g = inst.g
    r = tauargus.run(g, method, time_limit)
    name = f"tau-ARGUS {method}"
    if r.status != "ok":
        return [
            Row(
                inst.name,
                g.n_cells,
                name,
                int(inst.sensitive.sum()),
                None,
                None,
                r.seconds,
                None,
                r.status,
                "-",
                None,
                r.message,
            )
        ]
    a, audit_s = audit(inst, r.suppressed, max(time_limit, 120.0))
    notes = []
    differ = int((r.primary != inst.sensitive).sum())
    if differ:
        notes.append(f"{differ} primary cell(s) differ from ours")
    if not a.safe:
        notes.append("; ".join(a.reasons))
    rows = [
        Row(
            inst.name,
            g.n_cells,
            name,
            int(r.primary.sum()),
            int((r.suppressed & ~r.primary).sum()),
            value_share(inst, r.suppressed),
            r.seconds,
            None,
            r.status,
            a.verdict,
            audit_s,
            "; ".join(notes),
        )
    ]
    if not a.safe:
        safe = ours(
            inst, "fast", max(time_limit, 120.0), forced=r.suppressed, work_limit=work_limit
        )
        safe.method = f"{method} made safe"
        safe.seconds += r.seconds
        rows.append(safe)
    return rows


def fmt(row: Row) -> str:
    def opt(x, f):
        return "-" if x is None else format(x, f)

    return (
        f"{row.size:<13} {row.cells:>6} {row.method:<14} {row.primary:>7} "
        f"{opt(row.secondary, 'd'):>9} "
        f"{opt(None if row.value_share is None else 100 * row.value_share, '.2f'):>7} "
        f"{row.seconds:>8.2f} {opt(None if row.gap is None else 100 * row.gap, '.2f'):>6} "
        f"{row.status:<15} {row.audit:<10} {opt(row.audit_seconds, '.2f'):>7}"
        + (f"  work {row.work:,.0f}" if row.work is not None else "")
        + (f"  {row.note}" if row.note else "")
    )


HEADER = (
    f"{'size':<13} {'cells':>6} {'method':<14} {'primary':>7} {'secondary':>9} "
    f"{'value%':>7} {'seconds':>8} {'gap%':>6} {'status':<15} {'audit':<10} "
    f"{'audit s':>7}"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(gen.SIZES), choices=list(gen.SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fast-limit",
        type=float,
        default=600.0,
        help="time limit of the fast method, seconds (default 600)",
    )
    parser.add_argument(
        "--exact-limit",
        type=float,
        default=120.0,
        help="time limit of the exact method, seconds (default 120)",
    )
    parser.add_argument(
        "--tau-limit",
        type=float,
        default=120.0,
        help="time limit of tau-ARGUS OPT and MOD, seconds (default 120; "
        "the engine takes whole minutes)",
    )
    parser.add_argument("--no-tauargus", action="store_true")
    parser.add_argument(
        "--criterion",
        choices=("aggregations", "intervals"),
        default="aggregations",
        help="what makes a pattern safe: intervals and every aggregation of suppressed "
        "cells (the service's criterion, default), or intervals alone (tau-ARGUS's and "
        "GaussSuppression's, for a like-for-like comparison)",
    )
    parser.add_argument(
        "--work-limit",
        type=float,
        default=None,
        help="deterministic mode for our methods: their budget in solver work units "
        "(the same patterns on a busy machine; the work used is reported)",
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)

    tau_ok, tau_why = False, "skipped (--no-tauargus)"
    if not args.no_tauargus:
        from . import tauargus

        tau_ok, tau_why = tauargus.availability()
    print(
        f"Secondary suppression, p% (p=15) + minimum frequency 3, cost = value, seed "
        f"{args.seed}, criterion {args.criterion}; limits: fast {args.fast_limit:g} s, "
        f"exact {args.exact_limit:g} s, tau-ARGUS {args.tau_limit:g} s"
        + ("" if args.work_limit is None else f"; ours in work units, {args.work_limit:g}")
    )
    print(f"tau-ARGUS: {tau_why}")
    print(HEADER)
    print("-" * len(HEADER))
    rows = []
    work = args.work_limit
    for name in args.sizes:
        inst = instance(name, args.seed, aggregations=args.criterion == "aggregations")
        runs = [lambda inst=inst: [ours(inst, "fast", args.fast_limit, work_limit=work)]]
        if inst.g.n_cells <= EXACT_MAX_CELLS:
            runs.append(lambda inst=inst: [ours(inst, "exact", args.exact_limit, work_limit=work)])
        if tau_ok:
            if inst.g.n_cells <= TAU_OPT_MAX_CELLS:
                runs.append(lambda inst=inst: tau(inst, "OPT", args.tau_limit, work_limit=work))
            runs.append(lambda inst=inst: tau(inst, "MOD", args.tau_limit, work_limit=work))
        for run in runs:
            for row in run():
                rows.append(row)
                print(fmt(row), flush=True)
    print(
        "\nvalue%: suppressed share of the sum of all cells (margins included); gap%: "
        "(cost - proven bound) / cost; audit: service.sdc.audit.audit_pattern on the "
        + (
            "pattern (intervals and published unions)"
            if args.criterion == "aggregations"
            else "pattern (intervals alone: --criterion intervals)"
        )
        + ", run apart from the method."
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
