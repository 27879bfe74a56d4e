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
  - ``relative``: lexicographic. First the least largest relative change ``t``: ``p_j +
    m_j <= s_j t`` on the non-sensitive cells that carry a cost and are not fixed, and
    ``p_i + m_i - l_i <= s_i t`` on every sensitive cell ``i``, ``l_i`` the level of its
    direction (``upl_i`` up, ``lpl_i`` down); then the total relative deviation (the
    reciprocal cost) among the tables that reach that ``t`` (a second solve with ``t <=
    t* (1 + 1e-6)``, the solver's precision). Chosen because the sum of relative
    deviations alone is the reciprocal cost; the minimax reading spreads a change over
    many cells rather than putting it on the cheapest path.

    Sensitive cells in the minimax (reading chosen). Seed 003 B.3 changes each sensitive
    value "to either lower or upper protection bounds" and restores additivity with the
    non-sensitive cells; Castro's minimum-distance CTA (Castro 2006, "Minimum-distance
    controlled perturbation methods for large-scale tabular data protection"; Castro and
    Giessing 2006; restated in Castro 2012, "On assessing the disclosure risk of
    controlled adjustment methods", report DR 2012-07, and Lesaja, Castro and Oganian
    2016, PMC6863437: "the closest safe table", an l1 or l2 distance over every cell)
    lets a sensitive cell go beyond its bound (``p_i >= upl_i``) but charges its whole
    deviation in the distance like any other cell's. A minimax over the
    non-sensitive cells alone charges nothing for it, and the first stage then routes
    changes through the sensitive cells: measured on the methods benchmark's 60x60
    hierarchical table (seed 0), a cell of 255 with level 38.25 moved 2,090 (54.6 times
    its level, 8.2 times its value) to keep every other change within 1.3%. So a
    sensitive cell's move beyond its level (the part the protection does not need) is
    information loss measured as a non-sensitive change is: relative to the cell's value,
    within the same ``t``; its move is at most ``l_i + s_i t``. On that table: every
    sensitive cell now moves at most 1.31 times its level (that cell 1.17), other cells up
    to ``t* = 2.6%``, and the total relative deviation fell from 63.7 to 50.0.

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
  HiGHS's relative MIP gap.

  With the ``relative`` cost the MIP has the two stages above, each a MIP over the same
  directions: stage 1 ``min t`` (the excess row of a sensitive cell reads ``p_i + m_i -
  (upl_i - lpl_i) y_i - s_i t <= lpl_i``), stage 2 the reciprocal cost with ``t <= t1 (1
  + 1e-6)``, ``t1`` stage 1's best ``t`` (proven least within HiGHS's MIP gap, or the
  best found when its time ran out), started from stage 1's table. Two stages rather
  than one weighted objective ``t + eps * cost``: no ``eps`` is small enough for every
  table without knowing the costs' range, and a too large one trades the largest change
  for the sum. ``t`` is bounded by the alternating table's own ``t_a`` (no better table
  exceeds it), so ``M_i = min(room, l_i + s_i t_a)``: exact, not heuristic. Stage 1 gets
  at most half of the time left so that stage 2 runs. The result is the MIP's table only
  if it is lexicographically better than the alternating one (smaller ``t``, or the same
  ``t`` within ``1e-6`` and a smaller cost); ``minimax_gap`` is stage 1's gap,
  ``lower_bound`` and ``gap`` stage 2's (given ``t1``).

* Count tables (``problem.integral``): the adjusted table is one of whole numbers. Seed
  003 A: a frequency table shows "the number in the population which have certain
  characteristics", and CTA is "a useful methodology for protecting tables of magnitude
  data as well as count data" (B.3): what it publishes in place of a count is a count.
  A fractional one would also give the original away: a cell moved by exactly its level
  ``r x / 100`` reads ``x' = x (1 - r/100)``, so ``x = x' / (1 - r/100)`` to whoever
  knows the range (seed 003 B.1.e's reason for keeping parameters confidential makes no
  difference once the published number is 4.5 persons). The deviations ``p, m`` are
  integer columns (every model above becomes a MIP; on 2-D tables and 2-D tables
  hierarchical along one dimension the relations are a network and the LP optimum is
  already whole, Cox and Ernst 1982 as cited in seed 003 A.1), levels are rounded up and
  rooms (bounds, change limits) down to whole numbers, and the point's integer columns
  are rounded to the nearest whole number (HiGHS holds integrality to 1e-6), which keeps
  every relation exact since they have whole coefficients. ``lower_bound`` and ``gap``
  are then the MIP's.

Every solve runs through :mod:`service.sdc.highs` against one deadline. An infeasible
model is an :class:`InputError` naming the first sensitive cell, in the order above, whose
constraint makes it infeasible (found by bisection on how many of them are imposed). A
solve HiGHS ends without an answer (a numerical failure, a model it refuses) is the
result's ``status == "error"`` with HiGHS's words in ``message``, and the table of an
earlier stage if there is one (never an exception: no input makes it a 500). The
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
Status = Literal["optimal", "time_limit", "error"]

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

    ``adjusted`` is ``None`` only when the time ran out (``status == "time_limit"``) or
    the solver failed (``"error"``, HiGHS's status in ``message``) before any table was
    found. With ``"error"`` and a table, the table is additive and protected (``check``)
    but not of least deviation: an earlier stage's (the alternating directions', or the
    relative cost's first stage). ``direction`` is +1 (up) or -1 (down) for sensitive
    cells, 0 elsewhere; ``required`` the signed distance each must move (``upl`` or
    ``-lpl``); ``protected`` whether it did (recomputed). ``residual`` is the largest
    ``|A x'|`` and ``adds_up`` whether every relation holds within the solver's precision.
    ``objective`` is the cost of the table returned; ``lower_bound`` and ``gap`` the MIP's
    proof (``nan`` for LPs, whose optimum is exact). Under the ``relative`` cost
    ``objective`` is the second stage's (the reciprocal cost), ``minimax`` the first
    stage's ``t`` recomputed from the table (:func:`minimax`), and ``minimax_gap`` the
    first-stage MIP's gap (``nan`` otherwise).
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
    minimax: float = np.nan
    minimax_gap: float = np.nan


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


def minimax(
    deviation: np.ndarray,
    capped: np.ndarray,
    direction: np.ndarray,
    upper_protection: np.ndarray,
    lower_protection: np.ndarray,
    scale: np.ndarray,
) -> float:
    """The relative cost's first-stage objective of a table (module docstring): the largest
    of ``|d_j| / s_j`` over the ``capped`` cells and of ``(|d_i| - l_i) / s_i`` over the
    sensitive cells (``direction != 0``), ``l_i`` the level of their direction; 0 when
    nothing counts."""
    d = np.abs(deviation)
    parts = [d[capped] / scale[capped]]
    sens = direction != 0
    level = np.where(direction > 0, upper_protection, lower_protection)
    parts.append((d[sens] - level[sens]) / scale[sens])
    values = np.concatenate(parts)
    return float(max(values.max(), 0.0)) if values.size else 0.0


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
        exists (names the first sensitive cell that makes it so).
    """
    started = time.perf_counter()
    deadline = started + time_limit
    n = problem.n_cells
    x = problem.values
    fix, cap = _checked_limits(fixed, max_change, n, x)
    if cost not in COSTS:
        raise InputError(f"unknown cost {cost!r}", field="cost")
    sens = problem.sensitive
    upl, lpl = problem.upper_protection, problem.lower_protection
    integral = problem.integral
    if integral:
        # A count must not be published as it is: the least change of a whole number, and
        # every change whole (module docstring, count tables).
        upl, lpl = (
            np.where(sens, np.maximum(_whole_up(level), 1.0), level) for level in (upl, lpl)
        )
    up_room = np.where(fix, 0.0, np.minimum(problem.upper_bounds - x, cap))
    down_room = np.where(fix, 0.0, np.minimum(x - problem.lower_bounds, cap))
    up_room, down_room = np.maximum(up_room, 0.0), np.maximum(down_room, 0.0)
    if integral:
        up_room, down_room = _whole_down(up_room), _whole_down(down_room)
    # A direction of level 0 moves nothing and so protects nothing (the cell stays as it
    # is, disclosed): taken only where the other level is 0 as well.
    can_up = (upl <= up_room) & ((upl > 0) | (lpl <= 0))
    can_down = (lpl <= down_room) & ((lpl > 0) | (upl <= 0))
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
    lp = _Model(problem.relations, x, up_room, down_room, w, upl, lpl, integral)
    solves = 0
    capped = charged & ~sens & ~fix
    minimax_gap = np.nan

    # The alternating table (seed 003 B.3), or under "relative" its two stages.
    if cost == "relative":
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
    elif out is Outcome.ERROR:
        status = "error"
        message = _failed(lp.failure, point, "the first stage's table (least largest change)")
    if point is not None:
        objective = float(w @ (point[:n] + point[n : 2 * n]))
        if integral:
            lower, gap, minimax_gap = lp.bounds(objective)

    if directions == "optimal" and cost == "relative":
        rm = lp.relative_optimal(sens, can_up, can_down, capped, scale, point, direction, deadline)
        solves += rm.solves
        if rm.outcome is Outcome.INFEASIBLE:
            # Feasibility does not depend on the cost: the plain MIP's bisection names it.
            cell, k = lp.blocking(order, None, deadline, sens, upl, lpl, can_up, can_down)
            solves += k
            _raise_infeasible(cell, "in any choice of directions")
        if rm.point is not None:
            mip_direction = np.where(sens, np.where(rm.up, 1, -1), 0).astype(np.int8)
            better = point is None
            if point is not None:
                t_a = minimax(point[:n] - point[n:], capped, direction, upl, lpl, scale)
                t_m = minimax(rm.point[:n] - rm.point[n:], capped, mip_direction, upl, lpl, scale)
                slack = 1e-6 * t_a + 1e-12
                better = t_m < t_a - slack or (
                    t_m <= t_a + slack and rm.objective < objective * (1 - 1e-9) - 1e-12
                )
            if better:
                point, objective, direction = rm.point, rm.objective, mip_direction
        lower, gap, minimax_gap = rm.lower_bound, rm.gap, rm.minimax_gap
        if rm.outcome is Outcome.OPTIMAL:
            status = "optimal"
            message = (
                "least largest relative change, then least relative deviation, over every "
                "choice of directions (two MIP stages)"
            )
        elif rm.outcome is Outcome.ERROR:
            status = "error"
            message = _failed(lp.failure, point, "the best table found")
        else:
            status = "time_limit"
            message = (
                "the time limit was reached: the best table found is returned with the gaps "
                "of the MIP stages to their bounds"
                if point is not None
                else "the time limit was reached before an adjusted table was found"
            )
        if rm.heuristic_m:
            message += "; big-M from the table's total (no alternating table to bound it)"
    elif directions == "optimal":
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
        elif mip.outcome is Outcome.ERROR:
            status = "error"
            message = _failed(lp.failure, point, "the best table found")
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

    if (
        directions == "optimal"
        and not integral  # whole levels and whole moves: the rounded point is exact
        and point is not None
        and time.perf_counter() < deadline
    ):
        # The MIP's point holds its levels only to its integrality tolerance (a direction
        # y of 1 - 1e-6 let a count move by 0.999999 under the relative cost, a helper's
        # campaign): the same directions solved as the LP (stages) give the table exactly.
        if cost == "relative":
            out, exact_point, n_solves = lp.relative(direction, capped, scale, deadline)
        else:
            out, exact_point, n_solves = lp.solve(direction, deadline)
        solves += n_solves
        if out is Outcome.OPTIMAL and exact_point is not None:
            point = exact_point
            objective = float(w @ (point[:n] + point[n : 2 * n]))

    required = np.where(direction > 0, upl, np.where(direction < 0, -lpl, 0.0))
    seconds = time.perf_counter() - started
    if point is None:
        return Adjustment(
            None, None, direction, required, None, np.nan, False, None,
            status, message, np.nan, lower, gap, solves, seconds, np.nan, minimax_gap,
        )  # fmt: skip
    d = point[:n] - point[n : 2 * n]
    adjusted, deviation = _clean(x, np.round(d) if integral else d, fix)
    protected, residual, adds_up = check(problem.relations, x, adjusted, direction, upl, lpl)
    unmoved = sens & ~protected & (required == 0)
    if unmoved.any():
        message += (
            f"; {int(unmoved.sum())} sensitive cell(s) with protection level 0 (flagged by a "
            "frequency rule alone, frequency_range 0) stay as they are, disclosed: not "
            "protected; give them a level (frequency_range or protection)"
        )
    t = minimax(deviation, capped, direction, upl, lpl, scale) if cost == "relative" else np.nan
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
        t,
        minimax_gap,
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
    relation holds within the solver's relative precision (of ``|A| |x'|``).

    A level of 0 (a cell only a frequency rule flags, under ``frequency_range`` 0) asks
    that the cell not be disclosed exactly, and a cell published as it is, is: it counts
    as protected only if it moved (a campaign found such cells, and counts, called
    protected unmoved, 2026-11-27)."""
    d = adjusted - values
    moved = np.where(direction > 0, d, -d)
    level = np.where(direction > 0, upper_protection, lower_protection)
    stayed = np.abs(d) <= NOISE_RTOL * np.maximum(1.0, np.abs(values))
    protected = (direction != 0) & highs.reaches(moved, level, values) & ~stayed
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


def _failed(failure: str | None, point, which: str) -> str:
    """The message of a solve HiGHS ended without an answer (``failure``: its status in
    its words), with or without a table to return (``which``: the table returned)."""
    said = f"HiGHS ended a solve with status {failure!r}" + (
        " (numbers of very different magnitudes in one table can do this)"
        if failure == "Unknown"
        else ""
    )
    if point is None:
        return f"{said}: no adjusted table was found"
    return f"{said}: {which} is returned, additive and protected, not of least deviation"


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

    def __init__(self, relations, x, up_room, down_room, w, upl, lpl, integral=False):
        self.a = sp.csr_matrix(relations)
        #: Count tables: ``p`` and ``m`` are integer columns (module docstring).
        self.integral = integral
        #: The last alternating solve's MIP dual bounds (count tables): of the cost, and
        #: under the relative cost of stage 1's ``t`` (:meth:`bounds`).
        self._bound, self._t = (np.nan, np.nan), (np.nan, np.nan)
        self.n = len(x)
        self.rhs = -(self.a @ x)
        self.x, self.up_room, self.down_room, self.w = x, up_room, down_room, w
        self._upl, self._lpl = upl, lpl
        #: HiGHS's words for the status of the last run that ended in ``Outcome.ERROR``.
        self.failure: str | None = None

    def _run(self, h, deadline, *, feasible: bool = False) -> Outcome:
        """Run ``h`` (:func:`highs.run`). An unbounded model (costs are never negative) and,
        when the model is known ``feasible``, an infeasible one are numerical failures:
        ``ERROR``, as HiGHS's own are; ``failure`` keeps HiGHS's words for the status."""
        out = highs.run(h, deadline)
        if out is Outcome.UNBOUNDED or (feasible and out is Outcome.INFEASIBLE):
            out = Outcome.ERROR
        if out is Outcome.ERROR:
            self.failure = highs.describe(h)
        return out

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

    def _integer(self, others: int = 0, other_integer: bool = False):
        """HiGHS's ``integer`` mask of a model whose columns are ``p``, ``m`` and
        ``others`` more: ``p`` and ``m`` integer on count tables; ``None`` for an LP."""
        if not (self.integral or other_integer):
            return None
        return np.concatenate([np.full(2 * self.n, self.integral), np.full(others, other_integer)])

    def bounds(self, objective: float) -> tuple[float, float, float]:
        """``(lower bound, gap, minimax gap)`` of the last alternating solve, a MIP on
        count tables, for a table of cost ``objective`` (``nan`` where there is none)."""
        bound, t = self._bound, self._t
        gap = max((objective - bound[0]) / abs(objective), 0.0) if abs(objective) > 1e-12 else 0.0
        t_gap = (
            (max((t[1] - t[0]) / abs(t[1]), 0.0) if abs(t[1]) > 1e-12 else 0.0)
            if np.isfinite(t[1])
            else np.nan
        )
        return bound[0], gap if np.isfinite(bound[0]) else np.nan, t_gap

    def solve(self, direction, deadline, *, feasibility: bool = False):
        lo, hi = self._columns(direction)
        # Scaled to a largest weight of 1 (the same optimum): reciprocal weights of 1e-8 on
        # a table of 1e8 fell below HiGHS's dual tolerance, and any table passed for
        # optimal (a cell with a level of 1 moved by its whole value, 1e8).
        norm = float(self.w.max(initial=0.0)) or 1.0
        cost = np.zeros(2 * self.n) if feasibility else np.concatenate([self.w, self.w]) / norm
        h = highs.model(cost, lo, hi, self._rows(), self.rhs, self.rhs, integer=self._integer())
        out = self._run(h, deadline)
        point = None
        if out is Outcome.OPTIMAL or (out is Outcome.TIME_LIMIT and highs.has_point(h)):
            point = np.asarray(h.getSolution().col_value)[: 2 * self.n]
            if self.integral:
                self._bound = (float(h.getInfo().mip_dual_bound) * norm, np.nan)
        return out, point, 1

    def _relative_rows(self, capped, scale, cells, excess_rhs, y_coef):
        """Rows over columns ``p``, ``m``, ``t`` and, when ``y_coef`` is given, one ``y`` per
        sensitive cell of ``cells``: the relations; ``p_j + m_j - s_j t <= 0`` on the
        ``capped`` cells; ``p_i + m_i - s_i t - y_coef_i y_i <= excess_rhs_i`` on ``cells``
        (module docstring: a sensitive cell's move beyond its level is within ``t``)."""
        n = self.n
        n_y = 0 if y_coef is None else cells.size
        rows_c = np.flatnonzero(capped)
        k, q = rows_c.size, cells.size
        both = np.concatenate([rows_c, cells])
        r = np.arange(k + q)
        data = [np.ones(k + q), np.ones(k + q), -scale[both]]
        rows, cols = [r, r, r], [both, both + n, np.full(k + q, 2 * n)]
        if n_y:
            data.append(-np.asarray(y_coef, float))
            rows.append(k + np.arange(q))
            cols.append(2 * n + 1 + np.arange(q))
        band = sp.csr_matrix(
            (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
            shape=(k + q, 2 * n + 1 + n_y),
        )
        rel = sp.hstack([self.a, -self.a, sp.csr_matrix((self.a.shape[0], 1 + n_y))])
        a = sp.vstack([rel, band]).tocsr()
        row_lo = np.concatenate([self.rhs, np.full(k + q, -np.inf)])
        row_hi = np.concatenate([self.rhs, np.zeros(k), excess_rhs])
        return a, row_lo, row_hi

    def relative(self, direction, capped, scale, deadline):
        """Stage 1: ``min t`` with the band rows of :meth:`_relative_rows` (each sensitive
        cell's excess over the level of its direction); stage 2: the reciprocal cost with
        ``t <= t*``."""
        n = self.n
        lo, hi = self._columns(direction)
        cells = np.flatnonzero(direction != 0)
        level = np.where(direction[cells] > 0, self._upl[cells], self._lpl[cells])
        a, row_lo, row_hi = self._relative_rows(capped, scale, cells, level, None)
        stage1 = np.zeros(2 * n + 1)
        stage1[-1] = 1.0
        integer = self._integer(1)
        h = highs.model(
            stage1, np.append(lo, 0.0), np.append(hi, np.inf), a, row_lo, row_hi, integer=integer
        )
        out = self._run(h, deadline)
        if out is not Outcome.OPTIMAL:
            point = None
            if out is Outcome.TIME_LIMIT and highs.has_point(h):
                point = np.asarray(h.getSolution().col_value)[: 2 * n]
            return out, point, 1
        t = float(h.getSolution().col_value[-1])
        if self.integral:
            self._t = (float(h.getInfo().mip_dual_bound), t)
        stage2 = np.concatenate([self.w, self.w, [0.0]])
        h2 = highs.model(
            stage2,
            np.append(lo, 0.0),
            np.append(hi, _within(t)),
            a,
            row_lo,
            row_hi,
            integer=integer,
        )
        if self.integral:  # stage 1's table is a point of it
            sol = h2.getSolution()
            sol.col_value = list(h.getSolution().col_value)
            h2.setSolution(sol)
        out2 = self._run(h2, deadline, feasible=True)  # stage 1's table is a point of it
        if out2 is Outcome.OPTIMAL or (out2 is Outcome.TIME_LIMIT and highs.has_point(h2)):
            if self.integral:
                self._bound = (float(h2.getInfo().mip_dual_bound), np.nan)
            return out2, np.asarray(h2.getSolution().col_value)[: 2 * n], 2
        # Stage 2 out of time (or failed) without a point: stage 1's table is additive and
        # protected.
        return out2, np.asarray(h.getSolution().col_value)[: 2 * n], 2

    def relative_optimal(
        self, sens, can_up, can_down, capped, scale, start, start_direction, deadline
    ):
        """The relative cost's two MIP stages over every choice of directions (module
        docstring), from the alternating table ``start`` (``p``, ``m``; or ``None``) and its
        directions."""
        n = self.n
        cells = np.flatnonzero(sens)
        s = cells.size
        upl, lpl = self._upl[cells], self._lpl[cells]
        lo, hi = self._columns(np.zeros(n, np.int8))
        y_lo = np.where(can_down[cells], 0.0, 1.0)
        y_hi = np.where(can_up[cells], 1.0, 0.0)
        a_rel, rel_lo, rel_hi = self._relative_rows(capped, scale, cells, lpl, upl - lpl)
        integer = np.concatenate([np.full(2 * n, self.integral), [False], np.ones(s, bool)])
        t_start, col_start = np.inf, None
        if start is not None:
            up0 = start_direction[cells] > 0
            d = start[:n] - start[n:]
            t_start = minimax(d, capped, start_direction, self._upl, self._lpl, scale)
            col_start = np.concatenate([start, [t_start], up0.astype(float)])

        def stage(cost, t_hi, col0, stage_deadline, feasible):
            big_u = np.minimum(self.up_room[cells], upl + scale[cells] * t_hi)
            big_d = np.minimum(self.down_room[cells], lpl + scale[cells] * t_hi)
            heuristic = not (np.isfinite(big_u).all() and np.isfinite(big_d).all())
            if heuristic:
                fallback = max(float(np.abs(self.x).sum() + upl.sum() + lpl.sum()), 1.0)
                big_u = np.where(np.isfinite(big_u), big_u, fallback)
                big_d = np.where(np.isfinite(big_d), big_d, fallback)
            link, link_lo, link_hi = _links(cells, upl, lpl, big_u, big_d, 2 * n + 1, n)
            h = highs.model(
                cost,
                np.concatenate([lo, [0.0], y_lo]),
                np.concatenate([hi, [t_hi], y_hi]),
                sp.vstack([a_rel, link]),
                np.concatenate([rel_lo, link_lo]),
                np.concatenate([rel_hi, link_hi]),
                integer=integer,
            )
            if col0 is not None:
                sol = h.getSolution()
                sol.col_value = list(col0)
                h.setSolution(sol)
            out = self._run(h, stage_deadline, feasible=feasible)
            col = None
            if out is Outcome.OPTIMAL or (out is Outcome.TIME_LIMIT and highs.has_point(h)):
                col = np.asarray(h.getSolution().col_value)
            return out, col, h.getInfo(), heuristic

        # Stage 1: the least largest relative change, with at most half the time left.
        stage1 = np.zeros(2 * n + 1 + s)
        stage1[2 * n] = 1.0
        now = time.perf_counter()
        out1, col1, info1, heuristic = stage(
            stage1, _within(t_start), col_start, now + (deadline - now) / 2, False
        )
        if col1 is None:
            return _RelativeMip(out1, None, np.nan, np.nan, np.nan, np.nan, np.zeros(n, bool),
                                heuristic, 1)  # fmt: skip
        t1 = minimax(col1[:n] - col1[n : 2 * n], capped, _directions(col1, cells, n), self._upl,
                     self._lpl, scale)  # fmt: skip
        t_gap = _gap(info1, t1)
        # Stage 2: the reciprocal cost among the tables within t1, from stage 1's table.
        stage2 = np.concatenate([self.w, self.w, np.zeros(1 + s)])
        col1[2 * n] = min(col1[2 * n], _within(t1))
        out2, col2, info2, heuristic2 = stage(stage2, _within(t1), col1, deadline, True)
        col, lower, gap = col1, np.nan, np.nan
        if col2 is not None:
            col = col2
            lower = float(info2.mip_dual_bound)
            gap = _gap(info2, float(self.w @ (col2[:n] + col2[n : 2 * n])))
        if out1 is Outcome.OPTIMAL and out2 is Outcome.OPTIMAL:
            outcome = Outcome.OPTIMAL
        elif Outcome.ERROR in (out1, out2):
            outcome = Outcome.ERROR
        else:
            outcome = Outcome.TIME_LIMIT
        up = np.zeros(n, bool)
        up[cells] = col[2 * n + 1 :] > 0.5
        return _RelativeMip(
            outcome,
            col[: 2 * n],
            float(self.w @ (col[:n] + col[n : 2 * n])),
            lower,
            gap,
            t_gap,
            up,
            heuristic or heuristic2,
            2,
        )

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
        link, link_lo, link_hi = _links(cells, upl[cells], lpl[cells], big_u, big_d, 2 * n, n)
        a = sp.vstack([sp.hstack([self.a, -self.a, sp.csr_matrix((self.a.shape[0], s))]), link])
        row_lo = np.concatenate([self.rhs, link_lo])
        row_hi = np.concatenate([self.rhs, link_hi])
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
            integer=self._integer(s, True),
        )
        if start is not None:
            sol = h.getSolution()
            d = start[:n] - start[n:]
            y0 = (d[cells] > 0).astype(float)
            sol.col_value = list(np.concatenate([start, y0]))
            h.setSolution(sol)
        out = self._run(h, deadline)
        point, objective, up = None, np.nan, np.zeros(s, bool)
        info = h.getInfo()
        if out is Outcome.OPTIMAL or (out is Outcome.TIME_LIMIT and highs.has_point(h)):
            col = np.asarray(h.getSolution().col_value)
            point, up = col[: 2 * n], col[2 * n :] > 0.5
            objective = float(cost @ col)  # the point's own (see _gap)
        up_full = np.zeros(n, bool)
        up_full[cells] = up
        lower = float(info.mip_dual_bound) if point is not None else np.nan
        gap = _gap(info, objective) if point is not None else np.nan
        return _MipResult(out, point, objective, lower, gap, up_full, heuristic)


@dataclass(frozen=True)
class _RelativeMip:
    outcome: Outcome
    point: np.ndarray | None
    objective: float
    lower_bound: float
    gap: float
    minimax_gap: float
    up: np.ndarray
    heuristic_m: bool
    solves: int


def _whole_up(v: np.ndarray) -> np.ndarray:
    """``v`` rounded up to whole numbers, a ``v`` within 1e-9 (relative) above a whole
    number read as that number (30% of 10 is 3.0000000000000004 in floating point)."""
    return np.ceil(v - 1e-9 * np.maximum(1.0, np.abs(v)))


def _whole_down(v: np.ndarray) -> np.ndarray:
    """``v`` rounded down to whole numbers, as :func:`_whole_up` (infinite stays)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(v), np.floor(v + 1e-9 * np.maximum(1.0, np.abs(v))), v)


def _within(t: float) -> float:
    """An upper bound on ``t`` that a table reaching ``t`` meets within the solver's
    precision."""
    return t * (1 + 1e-6) + 1e-12


def _gap(info, objective: float) -> float:
    """The relative gap of ``objective``, the returned point's own (computed from the
    point), to HiGHS's dual bound; 0 when the objective is 0 (a table with objective 0 is
    optimal). Not HiGHS's ``mip_gap``: given a start solution, HiGHS 1.16 can report the
    objective of a better point than the one ``getSolution`` returns (found in the exact
    suppression method, :meth:`service.sdc.suppress.exact._Master.mip`), and the gap
    reported must be the returned point's."""
    if abs(objective) <= 1e-12:
        return 0.0
    bound = float(info.mip_dual_bound)
    if not np.isfinite(bound):
        return np.nan
    return max((objective - bound) / abs(objective), 0.0)


def _directions(col: np.ndarray, cells: np.ndarray, n: int) -> np.ndarray:
    """+1/-1 per sensitive cell from a MIP point's ``y`` (the columns after ``p, m, t``)."""
    direction = np.zeros(n, np.int8)
    direction[cells] = np.where(col[2 * n + 1 :] > 0.5, 1, -1)
    return direction


def _links(cells, upl, lpl, big_u, big_d, y0: int, n: int):
    """The direction rows of the MIP (module docstring) for sensitive ``cells`` whose
    binaries are the columns from ``y0`` on: ``p_i - upl_i y_i >= 0``, ``p_i - U_i y_i <=
    0``, ``m_i + lpl_i y_i >= lpl_i``, ``m_i + D_i y_i <= D_i``; ``upl`` ... ``big_d`` per
    sensitive cell. Returns the matrix (``y0 + len(cells)`` columns) and its row bounds."""
    s = cells.size
    ar = np.arange(s)
    r = np.concatenate([ar, ar + s, ar + 2 * s, ar + 3 * s] * 2)
    c = np.concatenate([cells, cells, cells + n, cells + n] + [y0 + ar] * 4)
    v = np.concatenate([np.ones(2 * s), np.ones(2 * s), -upl, -big_u, lpl, big_d])
    link = sp.csr_matrix((v, (r, c)), shape=(4 * s, y0 + s))
    inf = np.full(s, np.inf)
    row_lo = np.concatenate([np.zeros(s), -inf, lpl, -inf])
    row_hi = np.concatenate([inf, np.zeros(s), inf, big_d])
    return link, row_lo, row_hi
