"""The other protection methods (issue 17) on the suppression benchmark's tables: controlled
tabular adjustment, controlled and random rounding, with tau-ARGUS's controlled rounding and
our fast suppression on the same instances for reference.

Run with ``scripts/bench methods`` (or ``python -m benchmarks.methods``)::

    python -m benchmarks.methods [--sizes 30x30 "60x60 hier" ...] [--seed 0] [--base 1000]
        [--limit 60] [--mip-limit 30] [--audit-limit 60] [--suppress-limit 300]
        [--noise-d 0.2] [--noise-jitter 0.05] [--no-tauargus]
        [--methods cta round tau noise suppress partial]

Instances: exactly those of :mod:`benchmarks.suppress` (:func:`benchmarks.suppress.instance`,
:data:`tests.generate.SIZES` with ``--seed``; p%-rule p = 15 plus minimum frequency 3 give
the sensitive cells and their protection levels; a-priori bounds: non-negativity). The core
functions are called directly (no HTTP), one row per method and size:

* ``CTA <cost>``: :func:`service.sdc.cta.adjust`, LP-based CTA with the seed's alternating
  directions (seed 003 B.3) under the costs ``absolute``, ``reciprocal`` (the original CTA)
  and ``relative``; ``CTA simplified`` (margins absorb the changes, reciprocal cost);
  ``CTA MIP dirs`` (directions chosen by the MIP, absolute cost, ``--mip-limit``). Loss:
  total absolute deviation, total relative deviation, the largest relative change (over
  cells with a nonzero value), margins moved.
* ``round <b>``: :func:`service.sdc.rounding.controlled_rounding` (zero-restricted, least
  total absolute deviation); ``random <b>``: :func:`~service.sdc.rounding.random_rounding`
  (seed ``--seed``). Loss: total absolute deviation; protection: the sensitive cells whose
  feasibility interval, computed from the rounded table with every cell known within ``b``
  (:func:`~service.sdc.rounding.audit_rounding`, ``--audit-limit``), meets their levels.
* ``tau RND <b>``: tau-ARGUS's controlled rounding (below), read back and measured and
  audited exactly as ours.
* ``noise d=<d>``: a noisy table (seed 003 B.4) as ``/v1/noise`` builds it
  (:func:`service.sdc.noise.multipliers` on every contribution, a fixed benchmark key,
  margins the sums of their leaves); protected: sensitive cells whose noise reaches the
  larger of their levels (the others are flagged). ``d`` defaults to 0.2, not the seed's
  example 0.1: with the p%-rule at p = 15 a noise of about 10% of each contribution leaves
  most sensitive cells flagged (83 of 97 on 30x30 at 0.1).
* ``suppress fast``: :func:`service.sdc.suppress.suppress` (method ``fast``, cost = value)
  and the independent pattern audit (:func:`benchmarks.suppress.audit`): suppressed cells,
  value share. ``partial (intv.)``: the same pattern under partial suppression as
  ``/v1/suppress`` with ``publish: "intervals"`` does it (the certified intervals published,
  the pattern re-audited with them as a-priori bounds); note: median interval width.
  ``partial (narr.)``: method ``partial`` (the narrowest published intervals, Salazar
  2003), re-audited with its intervals as bounds; note: its total width against the fast
  pattern's intervals.

Every method's own result is checked here, from its output, apart from the method: CTA, the
table adds up (``max |A x'|`` within ``1e-6`` of ``|A| |x'|``) and every sensitive cell
moved at least its level in its direction (``1e-6`` relative); rounding, every value a
multiple of ``b`` within ``b`` of the original, multiples of ``b`` unchanged (zero-
restricted; reported, not required, for tau-ARGUS) and, for controlled rounding, every
relation adds up; suppression, the audit verdict. The ``check`` column says ``ok`` or what
failed, so a broken result cannot hide behind a fast time.

Base. ``--base`` defaults to 1000, not 10: the generated tables are turnover-like magnitude
tables (leaf cells in the thousands, protection levels of the p%-rule in the hundreds to
thousands), so rounding to 10 would move no cell by more than 0.1% of a typical value and
protect none (an intruder learns each cell within 10); 1000 is of the order of the levels,
which is what rounding as a protection needs (seed 003 A.1).

tau-ARGUS (optional extra ``tauargus``, pytauargus' native engine). The microdata, metadata
and hierarchies are written as for suppression (:func:`benchmarks.tauargus.write_inputs`'s
layout, the same rules ``P(15,1)|FREQ(3,0)``), with ``<SUPPRESS> RND(1,b,0,minutes,0,2)``
(base, no step, time limit in whole minutes, no partitions, stop rule 2 = optimal) and the
simple intermediate ``.tab`` (``codes;value;freq;cost;status;lower;upper``). After ``RND``
pytauargus writes the *rounded* response in the value column (``Engine.write_table``:
response type 1 after ``RND``; the ``cost`` column holds the original value), so the
rounded table is read back from it; the status column (``S``/``U``) is not the result. One
obstacle: pytauargus refuses a base below its ``_min_round_base`` (a port of tau-ARGUS's
``TableSet.computeMinRoundBase``), which is ``10^(d-1)`` for the largest cell value of ``d``
digits, i.e. the grand total: 10,000,000 for the 30x30 table, a base that rounds almost
every cell to 0. The child process running the engine therefore replaces that Python-side
check (and only it) by one that prints the minimum and allows any base, so the native
rounder (``RounderCtrl.do_round``) is run on the same base as ours; the minimum tau-ARGUS
would have imposed is printed in the note.

tau-ARGUS's rounder does not keep its own time limit on the 3-D table (``RND`` with one
minute ran past two and was killed), and its minimum base is printed from a file the child
writes before rounding, so it survives the kill.

Partial suppression's own search ("a valid pattern whose published intervals are
narrowest", issue 17) is the ``partial (narr.)`` row (``--methods partial``, with the
``--suppress-limit``). The run prints the /v1 routes.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from service.sdc import cta, noise
from service.sdc.audit import audit_pattern
from service.sdc.rounding import (
    audit_rounding,
    broken_relations,
    controlled_rounding,
    random_rounding,
    split,
)
from service.sdc.suppress import suppress
from tests import generate as gen

from . import suppress as supp

GROUPS = ("cta", "round", "tau", "noise", "suppress", "partial")
DEFAULT_SIZES = ["30x30", "60x60 hier", "100x100 hier", "20x20x10"]
#: Relative precision of the independent checks (the solvers' tolerances are ~1e-9).
CHECK_RTOL = 1e-6


@dataclass
class Row:
    size: str
    cells: int
    sensitive: int
    method: str
    seconds: float
    status: str
    check: str
    protected: str = "-"
    abs_dev: float | None = None
    rel_dev: float | None = None
    max_rel: float | None = None
    margins_moved: int | None = None
    suppressed: int | None = None
    value_share: float | None = None
    note: str = ""


# --------------------------------------------------------------------------- CTA


def cta_check(inst: supp.Instance, a: cta.Adjustment, xa: np.ndarray, own: np.ndarray) -> str:
    """Recomputed from the adjusted table ``xa``, apart from the method's own flags
    (``own``: its per-cell ``protected``)."""
    p = inst.problem
    x = p.values
    problems = []
    resid = np.abs(p.relations @ xa)
    allowed = CHECK_RTOL * np.maximum(1.0, abs(p.relations) @ np.abs(xa))
    if (resid > allowed).any():
        problems.append(f"{int((resid > allowed).sum())} relations broken (max {resid.max():g})")
    d = xa - x
    sens = np.flatnonzero(p.sensitive)
    up = a.direction[sens] > 0
    moved = np.where(up, d[sens], -d[sens])
    level = np.where(up, p.upper_protection[sens], p.lower_protection[sens])
    short = moved < level - CHECK_RTOL * np.maximum(1.0, np.abs(x[sens]))
    if (a.direction[sens] == 0).any():
        problems.append(f"{int((a.direction[sens] == 0).sum())} sensitive cells without direction")
    if short.any():
        problems.append(f"{int(short.sum())} sensitive cells short of their level")
    if (xa < p.lower_bounds - CHECK_RTOL).any():
        problems.append(f"{int((xa < p.lower_bounds - CHECK_RTOL).sum())} cells below bounds")
    if a.adds_up is not True or not own[sens].all():
        problems.append("method's own check fails")
    return "ok" if not problems else "FAIL: " + "; ".join(problems)


def run_cta(inst: supp.Instance, label: str, limit: float, **kw) -> Row:
    g, n_sens = inst.g, int(inst.sensitive.sum())
    start = time.perf_counter()
    try:
        a = cta.adjust(inst.problem, time_limit=limit, **kw)
    except Exception as e:  # a crash is a result of the benchmark: report, do not hide
        return Row(inst.name, g.n_cells, n_sens, label, time.perf_counter() - start,
                   "error", "FAIL: " + type(e).__name__, note=str(e))  # fmt: skip
    if a.adjusted is None or a.protected is None or a.loss is None:
        return Row(inst.name, g.n_cells, n_sens, label, a.seconds, a.status, "-", note=a.message)
    check = cta_check(inst, a, a.adjusted, a.protected)
    sens = inst.sensitive
    note = "" if np.isnan(a.gap) else f"MIP gap {100 * a.gap:.2f}%"
    return Row(
        inst.name,
        g.n_cells,
        n_sens,
        label,
        a.seconds,
        a.status,
        check,
        f"{int(a.protected[sens].sum())}/{n_sens}",
        a.loss.total_absolute,
        a.loss.total_relative,
        a.loss.largest_relative,
        a.loss.margins_moved,
        note=note,
    )


# --------------------------------------------------------------------------- rounding


def rounding_row(
    inst: supp.Instance,
    label: str,
    rounded: np.ndarray,
    base: float,
    seconds: float,
    status: str,
    *,
    additive_required: bool,
    zero_restricted_required: bool,
    audit_limit: float,
    note: str = "",
) -> Row:
    """Checks, loss and the intruder's intervals of a rounded table (ours or tau-ARGUS's)."""
    p, g, n_sens = inst.problem, inst.g, int(inst.sensitive.sum())
    x = p.values
    _, _, multiple = split(x, base)
    q = rounded / base
    problems, notes = [], [note] if note else []
    off_grid = np.abs(q - np.round(q)) > 1e-9 * np.maximum(1.0, np.abs(q))
    if off_grid.any():
        problems.append(f"{int(off_grid.sum())} values not multiples of {base:g}")
    far = np.abs(rounded - x) >= base
    if far.any():
        problems.append(f"{int(far.sum())} cells moved by b or more")
    moved_multiples = int((multiple & (rounded != x)).sum())
    if moved_multiples:
        (problems if zero_restricted_required else notes).append(
            f"{moved_multiples} multiples of b moved (not zero-restricted)"
        )
    broken = broken_relations(p.relations, rounded, p.tolerance)
    if additive_required and broken.size:
        problems.append(f"{broken.size} relations broken")
    elif broken.size:
        notes.append(f"not additive: {broken.size} relations broken")
    start = time.perf_counter()
    au = audit_rounding(p, rounded, base, time_limit=audit_limit)
    notes.append(
        f"audit {time.perf_counter() - start:.1f} s"
        + ("" if au.status == "optimal" else f" ({au.message})")
    )
    uncert = int((~au.certified).sum())
    protected = f"{int(au.protection.protected.sum())}/{n_sens}" + (
        f" ({uncert} uncert.)" if uncert else ""
    )
    dev = np.abs(rounded - x)
    nonzero = x != 0
    rel = np.where(nonzero, dev / np.where(nonzero, np.abs(x), 1.0), 0.0)
    return Row(
        inst.name,
        g.n_cells,
        n_sens,
        label,
        seconds,
        status,
        "ok" if not problems else "FAIL: " + "; ".join(problems),
        protected,
        float(dev.sum()),
        float(rel.sum()),
        float(rel.max(initial=0.0)),
        int((dev > 0)[cta.margins_of(p)].sum()),
        note="; ".join(notes),
    )


def run_controlled(inst: supp.Instance, base: float, limit: float, audit_limit: float) -> Row:
    p = inst.problem
    r = controlled_rounding(p.relations, p.values, base, time_limit=limit, tolerance=p.tolerance)
    label = f"round {base:g}"
    if not r.found:
        return Row(inst.name, inst.g.n_cells, int(inst.sensitive.sum()), label, r.seconds,
                   r.status, "-", note=r.message)  # fmt: skip
    return rounding_row(
        inst, label, r.rounded, base, r.seconds, f"{r.status} ({r.solved_by})",
        additive_required=True, zero_restricted_required=True, audit_limit=audit_limit,
    )  # fmt: skip


def run_random(inst: supp.Instance, base: float, seed: int, audit_limit: float) -> Row:
    r = random_rounding(inst.problem.values, base, seed)
    return rounding_row(
        inst, f"random {base:g}", r.rounded, base, r.seconds, r.status,
        additive_required=False, zero_restricted_required=True, audit_limit=audit_limit,
    )  # fmt: skip


# --------------------------------------------------------------------------- tau-ARGUS RND

#: Child process: the batch, with pytauargus' minimum-base check reporting instead of refusing.
_TAU_CHILD = """
import sys
from pytauargus.engine import Engine, run_batch
minimum = Engine._min_round_base
def report(self, tab):
    with open("minbase.txt", "w") as f:  # in the work directory; survives a kill
        f.write(str(minimum(self, tab)))
    return 0
Engine._min_round_base = report
run_batch(sys.argv[1])
"""


def tau_rounding(
    g: gen.GeneratedTable, base: int, time_limit: float
) -> tuple[str, str, float, np.ndarray | None, str]:
    """tau-ARGUS ``RND`` on ``g``: (status, message, seconds, rounded values of our cells,
    tau-ARGUS's own minimum base)."""
    from pytauargus import protect

    from . import tauargus as tau

    wd = Path(tempfile.mkdtemp(prefix="tauargus_RND_"))
    t = g.table
    names = list(t.names)
    pos = t.key_positions[g.leaf_cell]
    codes = [tau.tau_codes(g, d) for d in range(len(names))]
    micro = {
        name: np.asarray(codes[d], dtype=object)[pos[:, d]].tolist() for d, name in enumerate(names)
    }
    micro[tau.RESPONSE] = g.leaf_value.astype(np.int64).tolist()
    hrc = {
        name: tau._hrc(wd / f"{name}.hrc", g, d, codes[d])
        for d, (name, h) in enumerate(zip(names, t.dimensions))
        if not h.is_leaf[1:].all()
    }
    minutes = max(1, int(time_limit // 60))
    files = protect(
        micro,
        names,
        response=tau.RESPONSE,
        safety_rules=tau.SAFETY_RULES,
        suppress=f"RND(1,{base},0,{minutes},0,2)",
        hrc=hrc or None,
        totcode="Total",
        decimals=0,
        workdir=str(wd),
        run=False,
    ).files
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TAU_CHILD, files["arb"]],
            capture_output=True,
            text=True,
            timeout=time_limit + 60,
            cwd=wd,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        killed = f"killed after {time_limit + 60:.0f} s"
        minbase = (wd / "minbase.txt").read_text() if (wd / "minbase.txt").exists() else "?"
        return "time_limit", killed, time.perf_counter() - start, None, minbase
    seconds = time.perf_counter() - start
    minbase = (wd / "minbase.txt").read_text() if (wd / "minbase.txt").exists() else "?"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return "error", last, seconds, None, minbase
    # Simple intermediate .tab: codes;value;freq;cost;status;lower;upper, value = rounded.
    n_dims = len(names)
    ours = [dict(zip(tau.tau_codes(g, d), t.dimensions[d].codes)) for d in range(n_dims)]
    rows = [ln.split(";") for ln in Path(files["tab1"]).read_text("utf-8").splitlines() if ln]
    keys = np.array(
        [[ours[d][c.strip().strip('"').strip()] for d, c in enumerate(r[:n_dims])] for r in rows],
        dtype=object,
    )
    cells = np.asarray(t.cell_indices(keys.T))
    rounded = np.full(g.n_cells, np.nan)
    rounded[cells] = [float(r[n_dims]) for r in rows]
    original = np.full(g.n_cells, np.nan)
    original[cells] = [float(r[n_dims + 2]) for r in rows]  # the cost column: the value
    if np.isnan(rounded).any():
        missing = f"{int(np.isnan(rounded).sum())} cells missing from the .tab"
        return "error", missing, seconds, None, minbase
    if not np.allclose(original, g.values):
        mismatch = "the .tab's cost column is not our table (read-back mismatch)"
        return "error", mismatch, seconds, None, minbase
    return "ok", "", seconds, rounded, minbase


def run_tau(inst: supp.Instance, base: float, limit: float, audit_limit: float) -> Row:
    label = f"tau RND {base:g}"
    status, message, seconds, rounded, minbase = tau_rounding(inst.g, int(base), limit)
    note = f"tau-ARGUS minimum base {minbase}"
    if rounded is None:
        return Row(inst.name, inst.g.n_cells, int(inst.sensitive.sum()), label, seconds, status,
                   "-", note=f"{message}; {note}")  # fmt: skip
    return rounding_row(
        inst, label, rounded, base, seconds, status,
        additive_required=True, zero_restricted_required=False, audit_limit=audit_limit,
        note=note,
    )  # fmt: skip


# --------------------------------------------------------------------------- suppression


def run_suppress(inst: supp.Instance, limit: float, partial: bool) -> list[Row]:
    """Fast suppression with crosses, and (``partial``) the same pattern published as
    partial suppression: each suppressed cell's certified interval instead of a cross,
    re-audited with those intervals as a-priori bounds, as ``/v1/suppress`` with
    ``publish: "intervals"`` does (:func:`service.pipeline.suppress._partial`)."""
    g, n_sens = inst.g, int(inst.sensitive.sum())
    r = suppress(inst.problem, cost=inst.cost, method="fast", time_limit=limit)
    found = r.status != "no_safe_pattern" and bool(r.suppressed.any())
    if not found:
        return [Row(inst.name, g.n_cells, n_sens, "suppress fast", r.seconds, r.status,
                    "-", note=r.message)]  # fmt: skip
    a, audit_s = supp.audit(inst, r.suppressed, max(limit, 120.0))
    n_supp = int(r.suppressed.sum())
    share = supp.value_share(inst, r.suppressed)
    rows = [
        Row(
            inst.name, g.n_cells, n_sens, "suppress fast", r.seconds, r.status,
            "ok" if a.safe else f"FAIL: audit {a.verdict}",
            f"{n_sens}/{n_sens}" if a.safe else "-",
            suppressed=n_supp, value_share=share,
            note=f"audit {audit_s:.1f} s" + ("" if a.safe else ": " + "; ".join(a.reasons)),
        )
    ]  # fmt: skip
    if partial and a.safe:
        p = inst.problem
        iv = a.intervals
        ok = iv.certified
        lower, upper = p.lower_bounds.copy(), p.upper_bounds.copy()
        lower[iv.cells[ok]] = np.maximum(lower[iv.cells[ok]], iv.lower[ok])
        upper[iv.cells[ok]] = np.minimum(upper[iv.cells[ok]], iv.upper[ok])
        start = time.perf_counter()
        again = audit_pattern(
            replace(p, lower_bounds=lower, upper_bounds=upper),
            r.suppressed,
            time_limit=max(limit, 120.0),
        )
        width = iv.upper[ok] - iv.lower[ok]
        x = p.values[iv.cells[ok]]
        rel = np.divide(width, np.abs(x), out=np.full(width.shape, np.inf), where=x != 0)
        rows.append(
            Row(
                inst.name, g.n_cells, n_sens, "partial (intv.)",
                r.seconds + audit_s + (time.perf_counter() - start), again.verdict,
                "ok" if again.safe else f"FAIL: re-audit {again.verdict}",
                f"{n_sens}/{n_sens}" if again.safe else "-",
                suppressed=n_supp, value_share=share,
                note=f"{int(ok.sum())} intervals published, {int((~ok).sum())} crosses; "
                f"median interval width {np.median(rel):.2f} x value "
                f"(finite {int(np.isfinite(width).sum())})",
            )
        )  # fmt: skip
        rows.append(run_narrowest(inst, limit, width, inst.cost[iv.cells[ok]]))
    return rows


def run_narrowest(inst: supp.Instance, limit: float, fast_width, fast_cost) -> Row:
    """``partial (narr.)``: method ``partial`` (the narrowest published intervals,
    :mod:`service.sdc.suppress.partial`), re-audited here with its published intervals as
    a-priori bounds; note: its weighted and unweighted total width against the fast
    pattern's certified intervals (``fast_width``, weighted by ``fast_cost``)."""
    g, n_sens = inst.g, int(inst.sensitive.sum())
    p = inst.problem
    r = suppress(p, cost=inst.cost, method="partial", time_limit=limit)
    if not r.safe or r.published_lower is None or r.published_upper is None:
        return Row(inst.name, g.n_cells, n_sens, "partial (narr.)", r.seconds, r.status,
                   "-", note=r.message)  # fmt: skip
    lower = np.where(r.suppressed, r.published_lower, p.lower_bounds)
    upper = np.where(r.suppressed, r.published_upper, p.upper_bounds)
    bounded = replace(p, lower_bounds=lower, upper_bounds=upper)
    a = audit_pattern(bounded, r.suppressed, time_limit=max(limit, 120.0))
    weighted = float(fast_cost @ fast_width)
    return Row(
        inst.name, g.n_cells, n_sens, "partial (narr.)", r.seconds, r.status,
        "ok" if a.safe else f"FAIL: re-audit {a.verdict}",
        f"{n_sens}/{n_sens}" if a.safe else "-",
        suppressed=int(r.suppressed.sum()), value_share=supp.value_share(inst, r.suppressed),
        note=f"weighted width {r.objective:.4g} = {r.objective / weighted:.3f} x the fast "
        f"intervals' {weighted:.4g}; width {r.width:.4g} = "
        f"{r.width / float(fast_width.sum()):.3f} x; gap {r.gap:.2g}",
    )  # fmt: skip


# --------------------------------------------------------------------------- noisy table

#: Fixed key of the benchmark's noise (the service's comes from its settings).
NOISE_SECRET = b"benchmarks.methods"


def run_noise(inst: supp.Instance, d: float, jitter: float) -> Row:
    """Seed 003 B.4 as ``/v1/noise`` computes it (:mod:`service.pipeline.noisy_table`):
    every contribution times its keyed multiplier, a leaf's noise the sum of its
    contributions', a margin's the sum of its leaves' (so the table adds up); a sensitive
    cell is flagged when ``|D| <`` the larger of its levels. Respondent = enterprise =
    establishment (one respondent per contribution in the generated tables)."""
    g, p = inst.g, inst.problem
    n_sens = int(inst.sensitive.sum())
    start = time.perf_counter()
    ids = np.arange(g.leaf_value.size)
    m = noise.multipliers(g.leaf_holding, ids, NOISE_SECRET, d, jitter)
    moved = noise.apply_noise(g.leaf_value, m) - g.leaf_value
    leaf_noise = np.bincount(g.leaf_cell, moved, minlength=g.n_cells)
    dn = g.table.fill_margins(np.where(g.table.is_leaf, leaf_noise, np.nan))
    noisy = p.values + dn
    flagged = inst.sensitive & (np.abs(dn) < np.maximum(p.upper_protection, p.lower_protection))
    seconds = time.perf_counter() - start
    resid = np.abs(p.relations @ noisy)
    allowed = CHECK_RTOL * np.maximum(1.0, abs(p.relations) @ np.abs(noisy))
    problems = []
    if (resid > allowed).any():
        problems.append(f"{int((resid > allowed).sum())} relations broken")
    if not np.allclose(np.bincount(g.leaf_cell, g.leaf_value * m, minlength=g.n_cells)[
        g.table.is_leaf], noisy[g.table.is_leaf]):  # fmt: skip
        problems.append("leaf values are not the sums of noisy contributions")
    nonzero = p.values != 0
    rel = np.abs(np.divide(dn, p.values, out=np.zeros_like(dn), where=nonzero))
    return Row(
        inst.name,
        g.n_cells,
        n_sens,
        f"noise d={d:g}",
        seconds,
        "flagged",
        "ok" if not problems else "FAIL: " + "; ".join(problems),
        f"{n_sens - int(flagged.sum())}/{n_sens}",
        float(np.abs(dn).sum()),
        float(rel.sum()),
        float(rel.max(initial=0.0)),
        int((np.abs(dn) > 0)[cta.margins_of(p)].sum()),
        note=f"{int(flagged.sum())} sensitive cells flagged (noise below their level); "
        f"mean relative change {rel[nonzero].mean():.4f}",
    )


# --------------------------------------------------------------------------- output


def registered_extras() -> str:
    """Which of issue 17's routes are on the /v1 API now (rows are only for those here)."""
    from service.api import v1
    from service.api.routing import DECLARED

    paths = sorted(DECLARED[e][0] for e in v1.ENDPOINTS)
    return ", ".join(paths)


def fmt(row: Row) -> str:
    def opt(x, f):
        return "-" if x is None else format(x, f)

    return (
        f"{row.size:<12} {row.cells:>6} {row.sensitive:>5} {row.method:<15} "
        f"{row.seconds:>7.2f} {row.status:<16} {row.check:<5} {row.protected:>9} "
        f"{opt(row.abs_dev, '.4g'):>10} {opt(row.rel_dev, '.4g'):>8} "
        f"{opt(row.max_rel, '.3g'):>7} {opt(row.margins_moved, 'd'):>5} "
        f"{opt(row.suppressed, 'd'):>6} "
        f"{opt(None if row.value_share is None else 100 * row.value_share, '.2f'):>6}"
        + (f"  {row.note}" if row.note else "")
    )


HEADER = (
    f"{'size':<12} {'cells':>6} {'sens':>5} {'method':<15} {'seconds':>7} {'status':<16} "
    f"{'check':<5} {'protected':>9} {'abs dev':>10} {'rel dev':>8} {'max rel':>7} "
    f"{'marg':>5} {'supp':>6} {'value%':>6}"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, choices=list(gen.SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", type=float, default=1000.0, help="rounding base (default 1000)")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per method")
    parser.add_argument(
        "--suppress-limit",
        type=float,
        default=300.0,
        help="seconds, fast suppression (default 300; it takes about 2 minutes on 20x20x10)",
    )
    parser.add_argument("--mip-limit", type=float, default=30.0, help="seconds, CTA MIP")
    parser.add_argument("--audit-limit", type=float, default=60.0, help="seconds per audit")
    parser.add_argument(
        "--noise-d",
        type=float,
        default=0.2,
        help="noise level (seed 003 B.4's example is 0.1; 0.2 default: above p = 15%%, so "
        "that the noise can reach the p%%-rule's levels)",
    )
    parser.add_argument("--noise-jitter", type=float, default=0.05)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(GROUPS),
        choices=list(GROUPS),
        help="which groups of rows (default all)",
    )
    parser.add_argument("--no-tauargus", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)

    tau_ok, tau_why = False, "skipped (--no-tauargus)"
    if not args.no_tauargus:
        from . import tauargus

        tau_ok, tau_why = tauargus.availability()
    print(
        f"Other methods on the suppression benchmark's tables: p% (p=15) + minimum frequency 3, "
        f"seed {args.seed}, base {args.base:g}; limits: {args.limit:g} s per method, CTA MIP "
        f"{args.mip_limit:g} s, audits {args.audit_limit:g} s, suppression "
        f"{args.suppress_limit:g} s"
    )
    print(f"tau-ARGUS: {tau_why}")
    print(f"Routes: {registered_extras()}")
    print(HEADER)
    print("-" * len(HEADER))
    rows = []
    with_partial = "partial" in args.methods
    for name in args.sizes:
        inst = supp.instance(name, args.seed)
        runs: list[Callable[[], Row | list[Row]]] = []
        if "cta" in args.methods:
            runs += [
                functools.partial(run_cta, inst, "CTA absolute", args.limit, cost="absolute"),
                functools.partial(run_cta, inst, "CTA reciprocal", args.limit, cost="reciprocal"),
                functools.partial(run_cta, inst, "CTA relative", args.limit, cost="relative"),
                functools.partial(run_cta, inst, "CTA simplified", args.limit, method="simplified"),
                functools.partial(
                    run_cta,
                    inst,
                    "CTA MIP dirs",
                    args.mip_limit,
                    cost="absolute",
                    directions="optimal",
                ),
            ]
        if "round" in args.methods:
            runs += [
                functools.partial(run_controlled, inst, args.base, args.limit, args.audit_limit),
                functools.partial(run_random, inst, args.base, args.seed, args.audit_limit),
            ]
        if "tau" in args.methods and tau_ok:
            runs.append(functools.partial(run_tau, inst, args.base, args.limit, args.audit_limit))
        if "noise" in args.methods:
            runs.append(functools.partial(run_noise, inst, args.noise_d, args.noise_jitter))
        if "suppress" in args.methods or with_partial:
            runs.append(functools.partial(run_suppress, inst, args.suppress_limit, with_partial))
        for run in runs:
            got = run()
            for row in got if isinstance(got, list) else [got]:
                rows.append(row)
                print(fmt(row), flush=True)
    print(
        "\nsens: sensitive cells; check: the result verified apart from the method (module "
        "docstring); protected: sensitive cells at their distance (CTA), whose intervals from "
        "the rounded table meet their levels (rounding), or audited safe (suppression); abs/rel "
        "dev: total absolute / relative deviation; max rel: largest relative change; marg: "
        "margins moved; supp: suppressed cells; value%: their share of the table's value."
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
