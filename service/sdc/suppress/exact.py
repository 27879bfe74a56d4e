"""The exact method: Fischetti and Salazar's model by iterated MIP solves with capacity
cuts, started from the fast method's audited pattern (see :mod:`service.sdc.suppress`)."""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from .. import highs
from ..highs import Outcome
from .fast import check_pattern
from .lps import Attacker, unprotected
from .problem import SearchProblem


def exact(p: SearchProblem, att: Attacker, incumbent: np.ndarray):
    """Fischetti-Salazar branch-and-cut by iterated MIP solves with capacity cuts.

    ``incumbent`` must be safe (intervals and unions): it satisfies every cut, so it starts
    each MIP and bounds its objective, and a MIP with nothing at or below that bound
    proves the incumbent optimal.
    """
    n = len(p.values)
    h = highs.model(
        p.cost,
        np.where(p.forced, 1.0, 0.0),
        np.where(p.allowed, 1.0, 0.0),
        sp.csc_matrix((0, n)),
        [],
        [],
        integer=np.ones(n, bool),
    )
    best = incumbent.copy()
    best_cost = float(p.cost @ best)
    lower = 0.0
    iters = 0
    # A cell alone among suppressed cells in one of its relations is disclosed exactly.
    a = p.a.tocsr()
    for i in np.flatnonzero(p.sensitive).tolist():
        for r in a[:, [i]].nonzero()[0].tolist():
            others = a.indices[a.indptr[r] : a.indptr[r + 1]]
            others = others[others != i]
            h.addRow(
                1.0, highspy.kHighsInf, len(others), others.astype(np.int32), np.ones(len(others))
            )
    iters += _root_cuts(h, p, att, n)
    while True:
        if highs.now() >= p.deadline:
            return (
                best,
                "time_limit",
                "time limit reached; best safe pattern returned",
                lower,
                iters,
            )
        h.setOptionValue("mip_rel_gap", 1e-9)
        # The best safe pattern satisfies every cut: a start for HiGHS, and a bound no
        # better pattern may exceed.
        h.setOptionValue("objective_bound", best_cost + 1e-9 * max(1.0, best_cost))
        start = highspy.HighsSolution()
        start.col_value = best.astype(float)
        h.setSolution(start)
        outcome = highs.run(h, p.deadline)
        iters += 1
        info = h.getInfo()
        if outcome is Outcome.INFEASIBLE:
            # Nothing satisfies the cuts at a cost within the incumbent's: it is optimal.
            return best, "optimal", "proven optimal", best_cost, iters
        if outcome not in (Outcome.OPTIMAL, Outcome.TIME_LIMIT):
            return best, "time_limit", f"MIP ended with {highs.describe(h)}", lower, iters
        lower = max(lower, float(info.mip_dual_bound))
        if outcome is Outcome.TIME_LIMIT or not highs.has_point(h):
            return (
                best,
                "time_limit",
                "time limit reached in the MIP; best safe pattern returned",
                lower,
                iters,
            )
        y = np.asarray(h.getSolution().col_value) > 0.5
        missing, reach = unprotected(att, p, y)
        if reach != "optimal":
            return best, "time_limit", "time limit reached checking a pattern", lower, iters
        if missing:
            _add_cuts(h, att, missing, y.astype(float))
            continue
        check = check_pattern(p, y)
        if check is not None and check.status == "undecided":
            return (
                best,
                "time_limit",
                "time limit reached checking the aggregations of a pattern",
                lower,
                iters,
            )
        if check is None or check.status != "sensitive":
            cost = float(p.cost @ y)
            if cost <= best_cost + 1e-9:
                best, best_cost = y, cost
            return best, "optimal", "proven optimal", min(lower, best_cost), iters
        for idx, coef, rhs in _aggregation_no_goods(p, y, check):
            h.addRow(rhs, highspy.kHighsInf, len(idx), idx.astype(np.int32), coef)


def _add_cuts(h: highspy.Highs, att: Attacker, missing, y: np.ndarray) -> None:
    for i, sense, level, prices in missing:
        coef = att.cut(i, sense, prices, y)
        nz = np.flatnonzero(coef > 1e-12)
        h.addRow(level, highspy.kHighsInf, len(nz), nz.astype(np.int32), coef[nz])


def _root_cuts(
    h: highspy.Highs, p: SearchProblem, att: Attacker, n: int, max_rounds: int = 200
) -> int:
    """Cutting planes on the LP relaxation of the master before any branching: the
    attacker LP with fractional room ``y_j U_j`` separates capacity cuts just as for a
    0/1 pattern, and a strong root bound is what lets the MIP close the gap."""
    cont = np.arange(n, dtype=np.int32)
    h.changeColsIntegrality(n, cont, np.array([highspy.HighsVarType.kContinuous] * n))
    rounds = 0
    try:
        while rounds < max_rounds:
            rounds += 1
            if highs.run(h, p.deadline) is not Outcome.OPTIMAL:
                break
            y = np.clip(np.asarray(h.getSolution().col_value), 0.0, 1.0)
            missing, outcome = unprotected(att, p, y)
            if outcome != "optimal" or not missing:
                break
            _add_cuts(h, att, missing, y)
    finally:
        h.changeColsIntegrality(n, cont, np.array([highspy.HighsVarType.kInteger] * n))
    return rounds


def _aggregation_no_goods(p: SearchProblem, y: np.ndarray, check):
    """For each sensitive aggregation: suppress another cell of the relations it is read
    from, or drop a non-forced member. Valid: a pattern that keeps those published cells
    published and the members suppressed publishes the same aggregation."""
    cuts = []
    for found in check.found:
        v = p.a[found.relations].T @ found.multipliers
        touched = np.flatnonzero(np.abs(v) > 1e-9 * np.abs(v).max(initial=1.0))
        outside = touched[~y[touched]]
        members = found.cells[~p.forced[found.cells]]
        # sum_{outside} y + sum_{free members} (1 - y) >= 1
        idx = np.concatenate([outside, members])
        coef = np.concatenate([np.ones(len(outside)), -np.ones(len(members))])
        cuts.append((idx, coef, 1.0 - len(members)))
    return cuts
