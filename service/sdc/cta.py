"""Controlled tabular adjustment (CTA): the closest additive table in which every sensitive
cell has moved at least its protection level.

Seed 000 ("Controlled Tabular Adjustment": "the closest table consistent with the
constraints imposed by the set of table equations and by the protection levels for the
sensitive cells, [...] taking into account also bounds on cell values [...] like
non-negativity") and seed 003 section B.3 (LP-based and simplified CTA).

Formulation (Castro 2003; Castro and Giessing 2006, cited in seed 000). Every cell ``j``
gets two deviations ``p_j, m_j >= 0`` and the adjusted value ``x'_j = x_j + p_j - m_j``.

* Additivity: ``A (p - m) = -A x``, so ``A x' = 0`` exactly (a table accepted within an
  additivity tolerance comes out additive).
* A-priori bounds: ``p_j <= ub_j - x_j``, ``m_j <= x_j - lb_j``; a cell the caller fixes
  has ``p_j = m_j = 0``; a cell allowed to move only ``r_j`` percent has
  ``p_j, m_j <= r_j |x_j| / 100``.
* Sensitive cells (seed 003 B.3, "During the first phase [...] the sensitive cells are
  ordered from largest to the smallest. By using an alternating sequence, the ordered
  sensitive cell values are then changed to either lower or upper protection bounds"):
  ordered by value, largest first (ties by cell number), the first goes down, the second
  up, and so on; "up" is ``p_j >= upl_j, m_j = 0``, "down" ``m_j >= lpl_j, p_j = 0``. A
  cell that cannot move its level in its turn's direction within its bounds takes the
  other one (reading: the alternation is a heuristic, the bounds are the data); one that
  cannot move in either is an :class:`~service.sdc.errors.InputError` naming it. Down
  first: the largest cell is the one furthest above the usual lower bound 0.
* Objective ``min sum_j w_j (p_j + m_j)``, the weighted absolute deviation, by cost:

  - ``absolute``: ``w_j = 1`` (seed 003 B.3, "minimize the sum of the absolute values of
    the data adjustments");
  - ``reciprocal``: ``w_j = 1 / s_j`` with ``s_j = max(|x_j|, z)`` (seed 003 B.3, the
    original CTA, "the reciprocal of the cell values"), so ``sum w |d|`` is the total
    relative deviation. Zero cells: ``z`` is the smallest nonzero ``|x|`` of the table
    (1 if every cell is 0), so a zero costs per unit what the smallest cell costs: the
    reciprocal itself is infinite and would forbid moving zeros at all (an infeasible
    LP whenever a zero must absorb a change);
  - ``relative``: the largest relative change ``max |d_j| / s_j`` over the non-sensitive
    cells that carry a cost is minimised first (an LP with one more column ``t`` and
    rows ``p_j + m_j <= s_j t``), then the total relative deviation (the reciprocal
    cost) among the tables that reach that maximum (a second LP, ``t <= t*``). Chosen
    because the sum of relative deviations alone is the reciprocal cost; the minimax
    reading spreads a change over many cells rather than putting it on the cheapest
    path. Sensitive cells are left out of the maximum (their change is imposed).

* Simplified CTA (``method="simplified"``, seed 003 B.3: "minimizes the percentage
  deviation from the true cell value for non-sensitive cells [...] accepts all necessary
  adjustments in marginal table cell values"): the cost applies to leaf cells only, and
  margins (cells that are a relation's total) cost nothing, so margins absorb the changes
  of their leaves; leaves move only where a margin cannot (fixed cells, sensitive
  margins, bounds). With the default ``reciprocal`` cost this is the minimum percentage
  deviation of the seed.

* Optimal directions (``directions="optimal"``, Castro 2006's MIP): a binary ``y_i`` per
  sensitive cell, ``upl_i y_i <= p_i <= M_i y_i`` and ``lpl_i (1 - y_i) <= m_i <=
  M'_i (1 - y_i)``. The big-M values come from the bounds, capped by ``C / w_i`` where
  ``C`` is the cost of the alternating LP's table (no table cheaper than it moves cell
  ``i`` further), so they cut off no better table. Without an alternating table (its LP
  infeasible) and with an unbounded cell, ``M`` is the table's total ``sum |x|`` plus
  every level: a heuristic bound, said in the result's message. The alternating table is
  the MIP's start and the answer if the MIP finds nothing better in time; the gap is
  HiGHS's relative MIP gap. Not offered with the ``relative`` cost (two stages).

Every solve runs through :mod:`service.sdc.highs` against one deadline. An infeasible
model is an :class:`InputError` naming the first sensitive cell, in the order above, whose
constraint makes it infeasible (found by bisection on how many of them are imposed). The
result's checks are recomputed from the adjusted values: each sensitive cell's distance
against its level (:func:`service.sdc.highs.reaches`), and ``A x'`` against the solver's
precision.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from . import highs
from .errors import InputError
from .highs import Outcome
from .problem import TableProblem

Cost = Literal["absolute", "reciprocal", "relative"]
Method = Literal["lp", "simplified"]
Directions = Literal["alternate", "optimal"]
Status = Literal["optimal", "time_limit"]

COSTS: tuple[str, ...] = ("absolute", "reciprocal", "relative")
#: Deviations below this relative size (of ``max(1, |x|)``) are solver noise: shown as 0.
NOISE_RTOL = 1e-9


@dataclass(frozen=True)
class InformationLoss:
    """How far the adjusted table is from the original (Castro and Giessing 2006 report the
    same kinds of measure), over every cell, margins included.

    ``total_relative`` and ``largest_relative`` are over cells with a nonzero value (a
    zero's relative change is undefined); ``zeros_moved`` counts the zeros that moved.
    ``largest_cell`` is the cell of the largest relative change (-1 when nothing moved).
    """

    total_absolute: float
    total_relative: float
    largest_relative: float
    largest_cell: int
    cells_moved: int
    margins_moved: int
    zeros_moved: int


@dataclass(frozen=True)
class Adjustment:
    """The result of :func:`adjust`.

    ``adjusted`` is ``None`` only when the time ran out before any table was found
    (``status == "time_limit"``). ``direction`` is +1 (up) or -1 (down) for sensitive
    cells, 0 elsewhere; ``required`` the signed distance each must move (``upl`` or
    ``-lpl``); ``protected`` whether it did (recomputed). ``residual`` is the largest
    ``|A x'|`` and ``adds_up`` whether every relation holds within the solver's precision.
    ``objective`` is the cost of the table returned; ``lower_bound`` and ``gap`` the MIP's
    proof (``nan`` for LPs, whose optimum is exact).
    """

    adjusted: np.ndarray | None
    deviation: np.ndarray | None
    direction: np.ndarray
    required: np.ndarray
    protected: np.ndarray | None
    residual: float
    adds_up: bool
    loss: InformationLoss | None
    status: Status
    message: str
    objective: float
    lower_bound: float
    gap: float
    solves: int
    seconds: float


def cost_scale(values: np.ndarray) -> np.ndarray:
    """``s_j = max(|x_j|, z)``, ``z`` the smallest nonzero ``|x|`` (1 if none): the value
    the reciprocal and relative costs divide by (module docstring, zero cells)."""
    a = np.abs(values)
    nonzero = a[a > 0]
    z = float(nonzero.min()) if nonzero.size else 1.0
    return np.maximum(a, z)


def margins_of(problem: TableProblem) -> np.ndarray:
    """Cells that are the total of some relation (a table's margins). A bare relations
    matrix says nothing about which cell is a total: no margins then."""
    is_leaf = getattr(problem.structure, "is_leaf", None)
    if is_leaf is None:
        return np.zeros(problem.n_cells, bool)
    return ~np.asarray(is_leaf, bool)


def alternating_directions(
    values: np.ndarray, sensitive: np.ndarray, can_up: np.ndarray, can_down: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Seed 003 B.3's first phase: sensitive cells by value, largest first (ties by cell
    number), alternately down and up; a cell whose turn's direction does not fit takes
    the other. Returns the order (cell numbers) and each cell's direction (+1, -1, 0)."""
    cells = np.flatnonzero(sensitive)
    order = cells[np.lexsort((cells, -values[cells]))]
    turn = np.where(np.arange(order.size) % 2 == 0, -1, 1)
    turn = np.where(turn > 0, np.where(can_up[order], 1, -1), np.where(can_down[order], -1, 1))
    direction = np.zeros(len(values), np.int8)
    direction[order] = turn
    return order, direction


def adjust(
    problem: TableProblem,
    *,
    cost: Cost = "reciprocal",
    method: Method = "lp",
    directions: Directions = "alternate",
    fixed=None,
    max_change=None,
    time_limit: float = 10.0,
) -> Adjustment:
    """Controlled tabular adjustment of ``problem``'s table (module docstring).

    Parameters
    ----------
    problem : TableProblem
        Relations, values, a-priori bounds, sensitive cells and their protection levels.
    cost : {"absolute", "reciprocal", "relative"}
    method : {"lp", "simplified"}
        Seed 003 B.3's LP-based CTA, or the simplified CTA (margins absorb the changes).
    directions : {"alternate", "optimal"}
        The seed's alternating heuristic, or a MIP choosing every sensitive cell's
        direction (the alternating table is its start and fallback).
    fixed : array of bool, optional
        Cells that must not move (a key total, the grand total).
    max_change : array of float, optional
        Per cell, the most it may move as a percentage of its value (``nan``: no limit).
    time_limit : float
        Seconds for every solve together.

    Raises
    ------
    InputError
        ``field="protection"``: a sensitive cell cannot move its level in either
        direction within its bounds, or is fixed; ``field="cells"``: no additive table
        exists (names the first sensitive cell that makes it so); ``field="directions"``:
        optimal directions with the relative cost.
    """
    started = time.perf_counter()
    deadline = started + time_limit
    n = problem.n_cells
    x = problem.values
    fix, cap = _checked_limits(fixed, max_change, n, x)
    if cost not in COSTS:
        raise InputError(f"unknown cost {cost!r}", field="cost")
    if directions == "optimal" and cost == "relative":
        raise InputError(
            "optimal directions are not offered with the relative cost (a two-stage "
            "objective); use 'absolute' or 'reciprocal'",
            field="directions",
        )
    sens = problem.sensitive
    upl, lpl = problem.upper_protection, problem.lower_protection
    up_room = np.where(fix, 0.0, np.minimum(problem.upper_bounds - x, cap))
    down_room = np.where(fix, 0.0, np.minimum(x - problem.lower_bounds, cap))
    up_room, down_room = np.maximum(up_room, 0.0), np.maximum(down_room, 0.0)
    can_up, can_down = upl <= up_room, lpl <= down_room
    stuck = np.flatnonzero(sens & ~can_up & ~can_down)
    if stuck.size:
        j = int(stuck[0])
        why = "it is fixed" if fix[j] else "within its a-priori bounds and change limit"
        raise InputError(
            f"the sensitive cell cannot move by its protection level up or down: {why}",
            field="protection",
            cell=j,
        )
    order, direction = alternating_directions(x, sens, can_up, can_down)
    scale = cost_scale(x)
    margins = margins_of(problem)
    charged = ~margins | sens if method == "simplified" else np.ones(n, bool)
    w = np.where(charged, 1.0 if cost == "absolute" else 1.0 / scale, 0.0)
    lp = _Model(problem.relations, x, up_room, down_room, w, upl, lpl)
    solves = 0

    # The alternating table (seed 003 B.3), or under "relative" its two stages.
    if cost == "relative":
        capped = charged & ~sens & ~fix
        out, point, n_solves = lp.relative(direction, capped, scale, deadline)
    else:
        out, point, n_solves = lp.solve(direction, deadline)
    solves += n_solves
    message = "least-deviation table with the sensitive cells' directions alternating"
    objective, lower, gap = np.nan, np.nan, np.nan
    status: Status = "optimal"
    if out is Outcome.INFEASIBLE and directions == "alternate":
        cell, k = lp.blocking(order, direction, deadline)
        solves += k
        _raise_infeasible(cell, "in the alternating directions")
    if out is Outcome.TIME_LIMIT:
        status = "time_limit"
        message = (
            "the time limit was reached: the table is additive and protected but not "
            "proven of least deviation"
            if point is not None
            else "the time limit was reached before an adjusted table was found"
        )
    elif out is Outcome.ERROR or out is Outcome.UNBOUNDED:
        raise RuntimeError(f"the CTA LP ended with an unexpected status: {out}")
    if point is not None:
        objective = float(w @ (point[:n] + point[n : 2 * n]))

    if directions == "optimal":
        mip = lp.optimal(sens, upl, lpl, can_up, can_down, point, objective, deadline)
        solves += 1
        if mip.outcome is Outcome.INFEASIBLE:
            cell, k = lp.blocking(order, None, deadline, sens, upl, lpl, can_up, can_down)
            solves += k
            _raise_infeasible(cell, "in any choice of directions")
        if mip.point is not None and (point is None or mip.objective < objective - 1e-12):
            point, objective = mip.point, mip.objective
            direction = np.where(sens, np.where(mip.up, 1, -1), 0).astype(np.int8)
        lower, gap = mip.lower_bound, mip.gap
        if mip.outcome is Outcome.OPTIMAL:
            status = "optimal"
            message = "least-deviation table over every choice of directions (MIP)"
        else:
            status = "time_limit"
            message = (
                "the time limit was reached: the best table found is returned with the gap "
                "to the MIP's bound"
                if point is not None
                else "the time limit was reached before an adjusted table was found"
            )
        if mip.heuristic_m:
            message += "; big-M from the table's total (no alternating table to bound it)"

    required = np.where(direction > 0, upl, np.where(direction < 0, -lpl, 0.0))
    seconds = time.perf_counter() - started
    if point is None:
        return Adjustment(
            None, None, direction, required, None, np.nan, False, None,
            status, message, np.nan, lower, gap, solves, seconds,
        )  # fmt: skip
    adjusted, deviation = _clean(x, point[:n] - point[n : 2 * n], fix)
    protected, residual, adds_up = check(problem.relations, x, adjusted, direction, upl, lpl)
    return Adjustment(
        adjusted,
        deviation,
        direction,
        required,
        protected,
        residual,
        adds_up,
        information_loss(x, adjusted, margins),
        status,
        message,
        objective,
        lower,
        gap,
        solves,
        seconds,
    )


def check(
    relations: sp.csr_matrix,
    values: np.ndarray,
    adjusted: np.ndarray,
    direction: np.ndarray,
    upper_protection: np.ndarray,
    lower_protection: np.ndarray,
) -> tuple[np.ndarray, float, bool]:
    """Recomputed from the adjusted values: whether each sensitive cell moved its level in
    its direction (``False`` elsewhere), the largest ``|A x'|``, and whether every
    relation holds within the solver's relative precision (of ``|A| |x'|``)."""
    d = adjusted - values
    moved = np.where(direction > 0, d, -d)
    level = np.where(direction > 0, upper_protection, lower_protection)
    protected = (direction != 0) & highs.reaches(moved, level, values)
    residual = np.abs(relations @ adjusted)
    allowed = 10 * highs.FEASIBILITY_RTOL * np.maximum(1.0, abs(relations) @ np.abs(adjusted))
    worst = float(residual.max()) if residual.size else 0.0
    return protected, worst, bool((residual <= allowed).all())


def information_loss(
    values: np.ndarray, adjusted: np.ndarray, margins: np.ndarray
) -> InformationLoss:
    """:class:`InformationLoss` of an adjusted table."""
    d = np.abs(adjusted - values)
    moved = d > 0
    nonzero = values != 0
    rel = np.where(nonzero, d / np.where(nonzero, np.abs(values), 1.0), 0.0)
    largest = int(np.argmax(rel)) if moved.any() and nonzero.any() else -1
    return InformationLoss(
        total_absolute=float(d.sum()),
        total_relative=float(rel.sum()),
        largest_relative=float(rel[largest]) if largest >= 0 else 0.0,
        largest_cell=largest if largest >= 0 and rel[largest] > 0 else -1,
        cells_moved=int(moved.sum()),
        margins_moved=int((moved & margins).sum()),
        zeros_moved=int((moved & ~nonzero).sum()),
    )


def _checked_limits(fixed, max_change, n: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fix = np.zeros(n, bool) if fixed is None else np.asarray(fixed, bool)
    if fix.shape != (n,):
        raise InputError(f"fixed must have one entry per cell ({n})", field="fixed")
    pct = np.full(n, np.nan) if max_change is None else np.asarray(max_change, float)
    if pct.shape != (n,):
        raise InputError(f"max_change must have one entry per cell ({n})", field="max_change")
    bad = np.flatnonzero(pct < 0)
    if bad.size:
        raise InputError("max_change must be >= 0", field="max_change", cell=int(bad[0]))
    cap = np.where(np.isnan(pct), np.inf, np.nan_to_num(pct) / 100.0 * np.abs(x))
    return fix, cap


def _clean(x: np.ndarray, d: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deviations of solver noise size set to 0 (a cell that did not move shows exactly its
    value); fixed cells are exactly their value."""
    d = np.where((np.abs(d) <= NOISE_RTOL * np.maximum(1.0, np.abs(x))) | fixed, 0.0, d)
    return x + d, d


def _raise_infeasible(cell: int | None, how: str):
    raise InputError(
        "no additive table within the a-priori bounds, fixed cells and change limits "
        f"moves every sensitive cell by its protection level {how}"
        + (
            "; this sensitive cell is the first, largest first, that cannot be accommodated"
            if cell is not None
            else " (the time ran out before the cell responsible was found)"
        ),
        field="cells",
        cell=cell,
    )


@dataclass(frozen=True)
class _MipResult:
    outcome: Outcome
    point: np.ndarray | None
    objective: float
    lower_bound: float
    gap: float
    up: np.ndarray
    heuristic_m: bool


class _Model:
    """The LPs and the MIP of one table: columns ``p`` (n), ``m`` (n), then ``t`` (the
    relative cost's maximum) or ``y`` (the MIP's directions)."""

    def __init__(self, relations, x, up_room, down_room, w, upl, lpl):
        self.a = sp.csr_matrix(relations)
        self.n = len(x)
        self.rhs = -(self.a @ x)
        self.x, self.up_room, self.down_room, self.w = x, up_room, down_room, w
        self._upl, self._lpl = upl, lpl

    def _columns(self, direction):
        """Column bounds of ``p`` and ``m`` with the sensitive cells' directions imposed
        (``direction`` 0: free within the room)."""
        p_lo = np.where(direction > 0, self._upl, 0.0)
        m_lo = np.where(direction < 0, self._lpl, 0.0)
        p_hi = np.where(direction < 0, 0.0, self.up_room)
        m_hi = np.where(direction > 0, 0.0, self.down_room)
        return np.concatenate([p_lo, m_lo]), np.concatenate([p_hi, m_hi])

    def _rows(self):
        return sp.hstack([self.a, -self.a]).tocsr()

    def solve(self, direction, deadline, *, feasibility: bool = False):
        lo, hi = self._columns(direction)
        cost = np.zeros(2 * self.n) if feasibility else np.concatenate([self.w, self.w])
        h = highs.model(cost, lo, hi, self._rows(), self.rhs, self.rhs)
        out = highs.run(h, deadline)
        point = None
        if out is Outcome.OPTIMAL or (out is Outcome.TIME_LIMIT and highs.has_point(h)):
            point = np.asarray(h.getSolution().col_value)[: 2 * self.n]
        return out, point, 1

    def relative(self, direction, capped, scale, deadline):
        """Stage 1: ``min t``, ``p_j + m_j <= s_j t`` on ``capped`` cells; stage 2: the
        reciprocal cost with ``t <= t*``."""
        n = self.n
        lo, hi = self._columns(direction)
        rows_c = np.flatnonzero(capped)
        k = rows_c.size
        band = sp.csr_matrix(
            (
                np.concatenate([np.ones(2 * k), -scale[rows_c]]),
                (
                    np.concatenate([np.arange(k)] * 3),
                    np.concatenate([rows_c, rows_c + n, [2 * n] * k]),
                ),
            ),
            shape=(k, 2 * n + 1),
        )
        a = sp.vstack([sp.hstack([self.a, -self.a, sp.csr_matrix((self.a.shape[0], 1))]), band])
        row_lo = np.concatenate([self.rhs, np.full(k, -np.inf)])
        row_hi = np.concatenate([self.rhs, np.zeros(k)])
        stage1 = np.zeros(2 * n + 1)
        stage1[-1] = 1.0
        h = highs.model(stage1, np.append(lo, 0.0), np.append(hi, np.inf), a, row_lo, row_hi)
        out = highs.run(h, deadline)
        if out is not Outcome.OPTIMAL:
            point = None
            if out is Outcome.TIME_LIMIT and highs.has_point(h):
                point = np.asarray(h.getSolution().col_value)[: 2 * n]
            return out, point, 1
        t = float(h.getSolution().col_value[-1])
        stage2 = np.concatenate([self.w, self.w, [0.0]])
        t_hi = t * (1 + 1e-6) + 1e-12  # stage 1's optimum, within the solver's precision
        h2 = highs.model(stage2, np.append(lo, 0.0), np.append(hi, t_hi), a, row_lo, row_hi)
        out2 = highs.run(h2, deadline)
        if out2 is Outcome.OPTIMAL or (out2 is Outcome.TIME_LIMIT and highs.has_point(h2)):
            return out2, np.asarray(h2.getSolution().col_value)[: 2 * n], 2
        # Stage 2 out of time without a point: stage 1's table is additive and protected.
        return Outcome.TIME_LIMIT, np.asarray(h.getSolution().col_value)[: 2 * n], 2

    def blocking(self, order, direction, deadline, *mip_args) -> tuple[int | None, int]:
        """The first sensitive cell of ``order`` whose constraint makes the model
        infeasible, by bisection on how many of them are imposed (feasibility solves,
        alternating directions, or the MIP's free directions when ``direction`` is
        ``None``); ``None`` if the deadline passes first."""
        lo_k, hi_k, solves = 0, len(order), 0  # feasible with lo_k imposed, not with hi_k
        while hi_k - lo_k > 1:
            mid = (lo_k + hi_k) // 2
            keep = np.zeros(self.n, bool)
            keep[order[:mid]] = True
            if direction is not None:
                out, _, _ = self.solve(np.where(keep, direction, 0), deadline, feasibility=True)
            else:
                sens, upl, lpl, can_up, can_down = mip_args
                out = self.optimal(
                    keep, upl, lpl, can_up, can_down, None, np.nan, deadline, feasibility=True
                ).outcome
            solves += 1
            if out is Outcome.TIME_LIMIT:
                return None, solves
            if out is Outcome.INFEASIBLE:
                hi_k = mid
            else:
                lo_k = mid
        return (int(order[hi_k - 1]) if len(order) else None), solves

    def optimal(
        self, sens, upl, lpl, can_up, can_down, start, start_cost, deadline, *, feasibility=False
    ) -> _MipResult:
        """The MIP with a binary direction per sensitive cell (module docstring)."""
        n = self.n
        cells = np.flatnonzero(sens)
        s = cells.size
        lo, hi = self._columns(np.zeros(n, np.int8))
        heuristic = False
        bound = np.full(s, np.inf)
        if np.isfinite(start_cost) and not feasibility:
            with np.errstate(divide="ignore"):
                bound = np.where(self.w[cells] > 0, start_cost / self.w[cells], np.inf)
        big_u = np.minimum(self.up_room[cells], bound)
        big_d = np.minimum(self.down_room[cells], bound)
        if not (np.isfinite(big_u).all() and np.isfinite(big_d).all()):
            heuristic = True
            fallback = float(np.abs(self.x).sum() + upl.sum() + lpl.sum())
            big_u = np.where(np.isfinite(big_u), big_u, max(fallback, 1.0))
            big_d = np.where(np.isfinite(big_d), big_d, max(fallback, 1.0))
        ar = np.arange(s)
        # Rows: p_i - upl_i y_i >= 0; p_i - U_i y_i <= 0; m_i + lpl_i y_i >= lpl_i;
        # m_i + D_i y_i <= D_i.
        r = np.concatenate([ar, ar + s, ar + 2 * s, ar + 3 * s] * 2)
        c = np.concatenate([cells, cells, cells + n, cells + n] + [2 * n + ar] * 4)
        v = np.concatenate([np.ones(2 * s), np.ones(2 * s), -upl[cells], -big_u, lpl[cells], big_d])
        link = sp.csr_matrix((v, (r, c)), shape=(4 * s, 2 * n + s))
        a = sp.vstack([sp.hstack([self.a, -self.a, sp.csr_matrix((self.a.shape[0], s))]), link])
        inf = np.full(s, np.inf)
        row_lo = np.concatenate([self.rhs, np.zeros(s), -inf, lpl[cells], -inf])
        row_hi = np.concatenate([self.rhs, inf, np.zeros(s), inf, big_d])
        y_lo = np.where(can_down[cells], 0.0, 1.0)
        y_hi = np.where(can_up[cells], 1.0, 0.0)
        cost = np.zeros(2 * n + s) if feasibility else np.concatenate([self.w, self.w, np.zeros(s)])
        h = highs.model(
            cost,
            np.concatenate([lo, y_lo]),
            np.concatenate([hi, y_hi]),
            a,
            row_lo,
            row_hi,
            integer=np.concatenate([np.zeros(2 * n, bool), np.ones(s, bool)]),
        )
        if start is not None:
            sol = h.getSolution()
            d = start[:n] - start[n:]
            y0 = (d[cells] > 0).astype(float)
            sol.col_value = list(np.concatenate([start, y0]))
            h.setSolution(sol)
        out = highs.run(h, deadline)
        point, objective, up = None, np.nan, np.zeros(s, bool)
        info = h.getInfo()
        if out is Outcome.OPTIMAL or (out is Outcome.TIME_LIMIT and highs.has_point(h)):
            col = np.asarray(h.getSolution().col_value)
            point, up = col[: 2 * n], col[2 * n :] > 0.5
            objective = float(info.objective_function_value)
        up_full = np.zeros(n, bool)
        up_full[cells] = up
        lower = float(info.mip_dual_bound) if point is not None else np.nan
        gap = max(float(info.mip_gap), 0.0) if point is not None else np.nan
        return _MipResult(out, point, objective, lower, gap, up_full, heuristic)
