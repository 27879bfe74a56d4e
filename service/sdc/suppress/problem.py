"""The suppression problem as the search sees it: costs, capped rooms, protection
requirements (seed 000 "Secondary tabular data protection methods"; seed 003 B.2.b).

See :mod:`service.sdc.suppress` for the model and the readings applied by :func:`prepare`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from .. import highs
from ..errors import InputError
from ..highs import Outcome
from ..problem import TableProblem, reachable_levels, whole_above

COST_KINDS = ("value", "unity", "contributors", "log", "weights")
#: A sensitive cell with no protection level must still not be disclosed exactly: it gets
#: this share of its value (at least 1) as upper level, above the audit's exactness
#: tolerance; so does one whose levels add up to less, which the search's LPs cannot tell
#: from 0 (a level of 1e-9 on a cell of 10 was "met" by the cell alone, a helper's probe).
MIN_LEVEL_RTOL = 1e-4


def cell_costs(kind: str, values, counts=None, weights=None) -> np.ndarray:
    """Information loss of suppressing each cell (seed 002 section 3: "minimise the total
    suppressed value, minimise the number of suppressed cell values, or minimise the number
    of contributions"; ``log`` damps the dominance of the largest cells, as tau-ARGUS'
    ``distance``-free log cost does).

    ``value``: ``|a_j|``; ``unity``: 1; ``contributors``: ``N_j``; ``log``:
    ``log(1 + |a_j|)``; ``weights``: as given. Costs must be finite and >= 0.
    """
    a = np.abs(np.asarray(values, dtype=float))
    if kind == "value":
        c = a
    elif kind == "unity":
        c = np.ones_like(a)
    elif kind == "contributors":
        if counts is None:
            raise InputError("cost 'contributors' needs the cells' contributors", field="cost")
        c = np.asarray(counts, dtype=float)
    elif kind == "log":
        c = np.log1p(a)
    elif kind == "weights":
        if weights is None:
            raise InputError("cost 'weights' needs a weight per cell", field="cost")
        c = np.asarray(weights, dtype=float)
    else:
        raise InputError(f"unknown cost {kind!r}; one of {', '.join(COST_KINDS)}", field="cost")
    if c.shape != a.shape or not np.isfinite(c).all() or (c < 0).any():
        raise InputError("costs must be finite numbers >= 0, one per cell", field="cost")
    return c


@dataclass
class SearchProblem:
    """The table problem as the search sees it: levels floored and capped (module
    :mod:`service.sdc.suppress`, Readings), rooms capped, which cells may be complements;
    ``table`` is the problem with those levels, the one every pattern is audited on."""

    table: TableProblem
    a: sp.csr_matrix
    values: np.ndarray
    sensitive: np.ndarray
    upl: np.ndarray
    lpl: np.ndarray
    room_up: np.ndarray  # U_j, capped
    room_down: np.ndarray  # D_j
    cost: np.ndarray
    allowed: np.ndarray  # may be a complement
    forced: np.ndarray
    lower_bounds: np.ndarray
    upper_bounds: np.ndarray
    deadline: float
    # The width of interval asked of a sensitive cell whose own levels are 0 (0 for the
    # others): it must only not be disclosed exactly, which a move either way does.
    width: np.ndarray


def requirements(p: SearchProblem) -> list[tuple[int, float, float]]:
    """(cell, direction, level) of every protection requirement, largest cells first:
    the sensitive cells', and those of the cells hidden for a dominance condition
    (:func:`condition_requirements`: forced, with an upper level)."""
    order = np.flatnonzero(p.sensitive | (p.upl > 0))
    order = order[np.argsort(-np.abs(p.values[order]), kind="stable")]
    out = []
    for i in order.tolist():
        out.append((i, 1.0, p.upl[i]))
        if p.lpl[i] > 0:
            out.append((i, -1.0, p.lpl[i]))
    return out


def condition_requirements(
    table: TableProblem, forbidden: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cells the search protects upwards, and by how much, so that a pattern can escape
    seed 001's dominance conditions (:class:`service.sdc.problem.RuleConditions`):
    ``(cells, levels)``, one per condition it can read.

    A condition on flagged cell ``c`` and its marginal ``m`` (1a: ``m - c <= t``; 2a:
    ``t m - 100 c <= 0``; 1b, 2b the same along the other axis) fires as long as the rest
    of the relation ``m = c + sum others`` stays small. Hiding ``c`` and ``m`` is not
    enough when the others are published (seed 001, Example: key 1's zeros beside its
    200), so one other cell ``o`` of that relation (where ``m`` lies levels above ``c`` in
    a hierarchy, of ``c``'s own relation toward ``m``: :func:`_relation_towards`), the
    smallest not ``forbidden`` (a zero first), is hidden and protected upwards: a
    deviation raising ``o`` by ``L``, balanced by ``m`` or by ``c``, raises ``w x`` by
    ``L`` times the smaller of ``|w_m|`` and ``|w_c|`` per unit, so ``L`` is what takes
    ``w x`` past the condition's bound, rounded up to a whole number on count tables.
    The other cells of the rest can cancel that rise only by falling, which published
    cells and zeros (at their bound 0) cannot; the audit
    (:func:`service.sdc.audit.check_conditions`) decides in every case. Until 2026-11-27
    the search did not know these conditions, and seed 001's example ended
    ``no_safe_pattern`` under the default ``zero_cells="dominant"``."""
    cond = table.conditions
    if cond is None or len(cond) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    by_row = table.relations
    a = by_row.tocsc()
    x = table.values
    w = cond.weights.tocsr()
    cells, levels = [], []
    for i in range(len(cond)):  # a loop over the few flagged cells
        c = int(cond.cell[i])
        row = w.indices[w.indptr[i] : w.indptr[i + 1]]
        coef = w.data[w.indptr[i] : w.indptr[i + 1]]
        if len(row) != 2 or c not in row:
            continue
        m = int(row[row != c][0])
        wm, wc = float(coef[row == m][0]), float(coef[row == c][0])
        found = _relation_towards(by_row, a, c, m)
        if found is None:
            continue
        r, t = found
        members = by_row.indices[by_row.indptr[r] : by_row.indptr[r + 1]]
        a_r = dict(zip(members.tolist(), by_row.data[by_row.indptr[r] : by_row.indptr[r + 1]]))
        others = members[(members != c) & (members != t) & ~forbidden[members]]
        if others.size == 0:
            continue
        o = int(others[np.argmin(np.abs(x[others]))])
        per_unit = min(abs(wm * a_r[o] / a_r[t]), abs(wc * a_r[o] / a_r[c]))
        need = float(cond.bound[i]) - float(coef @ x[row])
        target = whole_above(need) if table.integral else need
        level = max(target, 0.0) / per_unit if per_unit > 0 else 0.0
        if table.integral:
            level = float(np.ceil(level - 1e-9))
        # No further than its a-priori bound (else the search would name o, a cell the
        # caller never flagged, as unprotectable); the audit decides what that leaves.
        level = min(level, float(table.upper_bounds[o] - x[o]))
        if level > 0:
            cells.append(o)
            levels.append(level)
    return np.asarray(cells, np.int64), np.asarray(levels, float)


def condition_supports(p: SearchProblem, which: np.ndarray) -> np.ndarray:
    """The cells to hide so that each dominance condition in ``which`` (indices into
    ``p.table.conditions``) can be escaped: for each, the support of a cheapest deviation
    ``z`` (``A z = 0``, within the rooms, allowed cells only) that takes ``w x`` past the
    condition's bound, ``w z >= bound - w x`` (rounded up to the next whole number on
    count tables), each unit of ``|z_j|`` priced ``c_j`` (zero costs floored at a
    millionth of the largest, so that no cell moves for nothing). Hiding that support
    leaves ``x + z`` consistent with the publication, a table on which the rule does not
    fire (seed 001's conditions; the audit still decides, on whole-number tables).

    The fallback of :func:`condition_requirements`, whose one raised cell another hidden
    cell of the rest can cancel by falling, or which finds no cell to raise: used when a
    pattern built on those requirements fails the audit for a condition
    (:func:`service.sdc.suppress.suppress`). Not the first choice: over 78 small random
    count tables that both protect, forcing these supports up front hid 7-15% more value
    (the clean-up cannot drop forced cells, and each condition's support is chosen
    alone)."""
    cond = p.table.conditions
    n = len(p.values)
    hide = np.zeros(n, bool)
    if cond is None or not len(which):
        return hide
    weights = cond.weights.tocsr()
    up = np.where(p.allowed, p.room_up, 0.0)
    down = np.where(p.allowed, p.room_down, 0.0)
    unit = np.maximum(p.cost, 1e-6 * max(float(p.cost.max(initial=0.0)), 1.0))
    # One model of the deviations (columns up, down; rows A z = 0), each condition's row
    # added for its solve and deleted after.
    m = p.a.shape[0]
    h = highs.model(
        np.concatenate([unit, unit]),
        np.zeros(2 * n),
        np.concatenate([up, down]),
        sp.hstack([p.a, -p.a]),
        np.zeros(m),
        np.zeros(m),
    )
    for i in np.asarray(which, np.int64).tolist():
        lo, hi = weights.indptr[i], weights.indptr[i + 1]
        cells, w = weights.indices[lo:hi], weights.data[lo:hi]
        need = float(cond.bound[i]) - float(w @ p.values[cells])
        target = whole_above(need) if p.table.integral else need + 1e-6 * max(1.0, abs(need))
        if target <= 0:
            continue
        columns = np.concatenate([cells, n + cells]).astype(np.int32)
        h.addRow(target, np.inf, len(columns), columns, np.concatenate([w, -w]))
        h.clearSolver()  # each condition from scratch, as a model of its own
        outcome = highs.run(h, p.deadline)
        if outcome is Outcome.OPTIMAL:
            z = np.asarray(h.getSolution().col_value)
            hide |= (z[:n] + z[n:]) > 1e-9 * max(1.0, target)
        # else no such deviation, or no time: the audit names the cell
        h.deleteRows(1, np.array([m], dtype=np.int32))
    return hide


def _relation_towards(by_row: sp.csr_matrix, by_col: sp.csc_matrix, c: int, m: int):
    """``(r, t)``: the relation ``r`` in which cell ``c`` is a part of the total ``t`` that
    is ``m`` or lies below it (``m`` a total of ``t``, of a total of ``t``, ...), or
    ``None``. In a hierarchy a dominance condition may set a leaf against a marginal two
    or more levels up (seed 001, "Hierarchical variables": key d under area S against the
    grand total), with no relation holding both; the rest is then raised within ``c``'s
    own relation, whose total carries the rise up to ``m``. A relation's total is its
    member whose coefficient has the sign no other member has (a table's relations are
    ``total - sum of parts = 0``, with either sign)."""

    def total_of(r: int) -> int | None:
        lo, hi = by_row.indptr[r], by_row.indptr[r + 1]
        cells, signs = by_row.indices[lo:hi], np.sign(by_row.data[lo:hi])
        alone = [k for k in range(len(cells)) if (signs == signs[k]).sum() == 1]
        return int(cells[alone[0]]) if len(alone) == 1 and len(cells) > 2 else None

    def parts_of(cell: int) -> list[tuple[int, int]]:
        # The relations in which ``cell`` is a part, with their totals.
        rows = by_col.indices[by_col.indptr[cell] : by_col.indptr[cell + 1]]
        out = []
        for r in rows.tolist():
            t = total_of(r)
            if t is not None and t != cell:
                out.append((r, t))
        return out

    for r, t in parts_of(c):
        # Up from t, part to total, until m (a hierarchy is a few levels deep).
        seen, frontier = {t}, [t]
        while frontier:
            if m in seen:
                return r, t
            frontier = [u for cell in frontier for _, u in parts_of(cell) if u not in seen]
            seen.update(frontier)
        if m in seen:
            return r, t
    return None


def prepare(
    table: TableProblem,
    cost,
    forbidden,
    forced,
    deadline: float,
    conditions_escaped=None,
    escalate: tuple[np.ndarray, float] | None = None,
) -> SearchProblem:
    """The search's view of ``table`` (module :mod:`service.sdc.suppress`, Readings);
    ``conditions_escaped``: dominance conditions whose :func:`condition_supports` are
    forced; ``escalate``: ``(cells, factor)``, those cells' protection levels asked of the
    search ``factor`` times (within their a-priori range), the audit's unchanged (both the
    fallbacks of :func:`service.sdc.suppress.suppress`)."""
    a, x, sens = table.relations, table.values, table.sensitive
    n = len(x)
    upl, lpl = table.upper_protection, table.lower_protection
    lb, ub = table.lower_bounds, table.upper_bounds
    if not np.isfinite(x).all():
        j = int(np.flatnonzero(~np.isfinite(x))[0])
        raise InputError("cell values must be finite numbers", field="values", cell=j)
    floor = MIN_LEVEL_RTOL * np.maximum(1.0, np.abs(x))
    # The audit's levels: a cell with none need only not be disclosed exactly, up or down.
    own_up, own_down = reachable_levels(x, upl, lpl, lb, ub, table.integral)
    either = sens & (own_up <= 0) & (own_down <= 0)
    upl = np.where(sens & (upl + lpl < floor), np.maximum(upl, floor), upl)
    cap = 2.0 * np.abs(x).max(initial=0.0) + upl.max(initial=0.0) + 1.0
    room_up = np.minimum(ub - x, cap)
    room_down = np.minimum(x - lb, cap)
    if (room_up < 0).any() or (room_down < 0).any():
        j = int(np.flatnonzero((room_up < 0) | (room_down < 0))[0])
        raise InputError(f"cell {j} lies outside its a-priori bounds", field="lower_bounds", cell=j)
    upl, lpl = reachable_levels(x, upl, lpl, lb, ub, table.integral)
    forbidden = np.zeros(n, bool) if forbidden is None else np.asarray(forbidden, bool)
    forced = np.zeros(n, bool) if forced is None else np.asarray(forced, bool)
    both = forbidden & (forced | sens)
    if both.any():
        j = int(np.flatnonzero(both)[0])
        raise InputError(
            "a cell cannot be both forbidden and sensitive or forced", field="forbidden", cell=j
        )
    # Zeros are complements only where seed 001's dominance conditions make them
    # information (module :mod:`service.sdc.suppress`, Readings).
    zeros_inform = table.conditions is not None and len(table.conditions) > 0
    allowed = ~forbidden & ((x != 0) | zeros_inform)
    # The search asks such a cell upwards (one direction per requirement); the audit and
    # exact's optimality take either (:func:`.lps.misses`).
    audited = replace(
        table,
        upper_protection=np.where(either, own_up, upl),
        lower_protection=np.where(either, own_down, lpl),
    )
    # The search's own requirements for seed 001's dominance conditions (count tables):
    # a cell of the rest of the flagged cell's row to hide and raise (the audit decides).
    rest, rise = condition_requirements(table, forbidden)
    forced = forced.copy()
    forced[rest] = True
    upl, lpl = upl.copy(), lpl.copy()
    if escalate is not None:
        cells, factor = escalate
        upl[cells] *= factor
        lpl[cells] *= factor
        upl, lpl = reachable_levels(x, upl, lpl, lb, ub, table.integral)
    np.maximum.at(upl, rest, rise)
    p = SearchProblem(
        audited,
        a,
        x,
        sens,
        upl,
        lpl,
        room_up,
        room_down,
        np.asarray(cost, float),
        allowed | sens | forced,
        forced | sens,
        lb,
        ub,
        deadline,
        np.where(either, np.minimum(floor, ub - lb), 0.0),
    )
    if conditions_escaped is not None:
        p.forced = p.forced | condition_supports(p, conditions_escaped)
    return p
