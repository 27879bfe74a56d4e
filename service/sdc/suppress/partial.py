"""Partial suppression: the narrowest published intervals that protect every sensitive cell.

Model (seed 000 "Secondary tabular data protection methods", closing comparison: "The
partial suppression problem is to find a valid suppression pattern, where the size of the
feasibility intervals is minimal ... publish the feasibility intervals"; Salazar-González
2003, "Partial cell suppression: a new methodology for statistical disclosure control",
Statistics and Computing 13). The agency publishes for every cell ``j`` an interval

    [a_j - d_j^-, a_j + d_j^+],   0 <= d_j^+ <= U_j,  0 <= d_j^- <= D_j,

(``d = 0``: the exact value; ``U_j = ub_j - a_j``, ``D_j = a_j - lb_j`` the a-priori room,
so a published interval never reaches beyond the a-priori bounds) and chooses ``d`` to

    min  sum_j c_j (d_j^+ + d_j^-)

such that for every sensitive cell ``i`` an intruder who knows the published intervals and
the relations ``A x = 0`` can move ``x_i`` up by ``UPL_i`` and down by ``LPL_i``: with
deviations ``z = x - a``,

    max  sense * z_i   s.t.  A z = 0,  -d^- <= z <= d^+                         (attacker)

reaches the level for ``sense = +1`` (``UPL_i``) and ``-1`` (``LPL_i``). Unlike cell
suppression (a 0/1 choice per cell) the rooms are the variables themselves, so the problem
is a linear program (Salazar 2003's point). By LP duality the attacker's maximum is
``min_g sum_j (d_j^+ max(0, r_j) + d_j^- max(0, -r_j))`` with ``r = sense e_i - A^T g``
over row prices ``g``: the requirement holds iff every ``g`` gives

    sum_j (max(0, r_j) d_j^+ + max(0, -r_j) d_j^-) >= level                   (capacity cut)

(:mod:`service.sdc.suppress`'s cut with ``y_j U_j`` replaced by the two published rooms).
:func:`partial` solves the LP by cut generation (Benders, as Salazar 2003 does): a master
LP over ``d`` with the cuts found so far, and for each requirement the attacker LP at the
master's ``d``, whose optimal row prices give the most violated cut. The master's optimum
is a lower bound on the narrowest total width; once no requirement is violated it is the
optimum.

Readings
--------
* Which cells may get an interval: as for cell suppression (module
  :mod:`service.sdc.suppress`, Readings): not forbidden cells nor zero cells; sensitive
  cells always (their own cut, ``g = 0``, is ``d_i^+ >= UPL_i``). A forced cell is
  published as its whole a-priori range (a cross), the reading of "must be suppressed".
* Costs: ``c_j`` per unit of width, from the request's cost kind (``value``: a unit of
  width on a large cell costs more; ``unity``: the plain total width, Salazar's unweighted
  objective). A cell of cost 0 is counted at ``1e-9 max(1, max c)`` per unit, so that its
  interval is not widened for nothing.
* The master asks for each protection level itself, and the intervals found are then
  widened by the factor ``1 + 1e-6`` (each end within its a-priori room): the attacker's
  maximum is positively homogeneous in ``d``, so every level is then met with a margin
  of ``1e-6`` of it, and the audit, which recomputes the intervals from the published
  bounds with its own LPs, sees it reached and not missed by solver round-off. The
  lower bound is the master's, without the margin, so the narrowest result is within
  ``1e-6`` of it. (Asking the master for ``level + margin`` instead, as before, could
  route the margin's sliver through other, dearer cells where the cheapest cycle is at
  a cell's a-priori bound: a 3x3 table got three more cells with intervals of width
  ``1e-6`` and a weighted width ``1.05e-5`` over the narrowest.)
* What the published intervals give away beyond the intervals an intruder computes:
  nothing the model does not already take into account (the intruder's knowledge *is*
  the published intervals and the relations). But an interval's end can be the true
  value (``d_j^- = 0`` on a cell only ever moved upwards), which an intruder who knows
  that the intervals are the narrowest cannot tell from another end; the seed's
  criterion, like Salazar 2003's, is the feasibility interval, and that is what is met.
* Aggregations (seed 002 sections 3-6): an interval of positive width hides a cell as a
  cross does, so the cells with ``d > 0`` are the "suppressed" cells of the aggregation
  check, which depends on that support only. The fast method's screen
  (:func:`.fast.check_pattern`) is run on it; each atom it cannot prove gets the
  deviations the screen needs (:class:`service.sdc.aggregations.Requirements`: move the
  atom by a level while every other cell moves at most its room ``R_j``). Such a
  requirement is met when the attacker with rooms ``min(d_j, R_j)`` reaches the level; its
  cuts ``sum_j w_j min(d_j, R_j) >= level`` are concave in ``d`` and are replaced by the
  chord ``min(d_j, R_j) >= d_j min(1, R_j / U_j)`` on ``0 <= d_j <= U_j``: a linear
  under-estimate, so a ``d`` meeting the linear cut meets the requirement (sound), but the
  result is then the narrowest under that restriction, not necessarily overall (status
  ``feasible`` instead of ``optimal``), and the lower bound reported is the optimum of
  the protection levels alone, which every safe result must meet.
* The verdict is the audit's (:func:`service.sdc.audit.audit_pattern`) on the cells with
  ``d > 0`` as suppressed and their published intervals as a-priori bounds, aggregations
  included, as ``publish: "intervals"`` recomputes it: a result it does not prove safe is
  never returned as safe.
* Time limit: when the cut generation stops early, the master's ``d`` may miss some
  requirements. The attacker's maximum is positively homogeneous in ``d``, so ``t d`` with
  ``t = max_k level_k / reach_k`` meets every requirement when it stays within the rooms
  (with the margin above: ``(1 + 1e-6) t``);
  it is returned (status ``time_limit``, with the master's bound as ``lower_bound``) if the
  audit passes it, else nothing is.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from .. import highs
from ..aggregations import Requirements
from ..audit import audit_pattern
from ..errors import InputError
from ..highs import Outcome
from ..problem import TableProblem
from .fast import check_pattern
from .problem import SearchProblem, prepare, requirements
from .result import SuppressionResult, on_work_clock, unproven

log = logging.getLogger("sdc.suppress")

#: Relative margin by which every level is met: the intervals found for the levels
#: themselves are widened by ``1 + LEVEL_MARGIN`` (module docstring, Readings).
LEVEL_MARGIN = 1e-6
#: Rounds of aggregation requirements before giving up.
MAX_AGGREGATION_ROUNDS = 50
#: Rounds of cut generation before giving up (each adds at least one violated cut).
MAX_ROUNDS = 10_000


@dataclass(frozen=True)
class PartialResult(SuppressionResult):
    """A :class:`~service.sdc.suppress.result.SuppressionResult` of the ``partial``
    method: ``suppressed`` are the cells published as an interval, ``objective`` the
    weighted total width ``sum c_j (d_j^+ + d_j^-)``, ``lower_bound`` the master LP's
    bound on it, ``audit`` the audit with the published intervals as a-priori bounds.

    Attributes
    ----------
    published_lower, published_upper : numpy.ndarray of float
        The published interval of every cell (``a_j`` on both ends for a cell published
        exactly); ``nan`` everywhere when no safe result is returned.
    width : float
        Unweighted total width ``sum_j (d_j^+ + d_j^-)`` of the returned intervals.
    """

    published_lower: np.ndarray | None = None
    published_upper: np.ndarray | None = None
    width: float = float("nan")


def pattern_intervals(problem: TableProblem, suppressed: np.ndarray, audit, time_limit: float):
    """Partial suppression of a safe pattern (seed 000, "Cell suppression ... Partial
    suppression"; Salazar 2003): each suppressed cell's certified feasibility interval
    (from ``audit``, the pattern's) published instead of a cross, as ``(lower, upper,
    audit again)``: the a-priori bounds narrowed to those intervals, and the pattern
    audited once more with them as the intruder's bounds (within ``time_limit``
    seconds). A cell whose interval is not certified keeps its a-priori bounds (a cross).

    Why this keeps the pattern safe: the intruder's knowledge of the suppressed cells is
    the polytope ``P = {y : relations, a-priori bounds, published cells fixed}``, and the
    audit's interval ``[l_j, u_j]`` of a suppressed cell ``j`` is the projection of ``P``
    on ``y_j`` (min and max of ``y_j`` over ``P``, seed 000 "feasibility interval"). So
    every ``y`` in ``P`` already has ``l_j <= y_j <= u_j`` for all ``j`` at once:
    adding those bounds leaves ``P`` unchanged, and with it every interval, every
    protection check and every aggregation an intruder can derive. Only certified
    intervals are published: an interval from an LP stopped early may be narrower than
    the projection and would tell the intruder something new. The second audit checks
    this rather than relying on it (solver round-off could make a published bound cut
    ``P`` by a hair): the result is safe only if its verdict is safe again."""
    iv = audit.intervals
    lower, upper = problem.lower_bounds.copy(), problem.upper_bounds.copy()
    cells = iv.cells[iv.certified]
    lower[cells] = np.maximum(lower[cells], iv.lower[iv.certified])
    upper[cells] = np.minimum(upper[cells], iv.upper[iv.certified])
    bounded = dataclasses.replace(problem, lower_bounds=lower, upper_bounds=upper)
    again = audit_pattern(bounded, suppressed, time_limit=max(time_limit, 1e-3))
    return lower, upper, again


@dataclass
class _Requirement:
    """Move ``cell`` by ``target`` in direction ``sense``; ``room_up``/``room_down``: the
    aggregation screen's caps ``R`` on the other cells (``None``: the published rooms)."""

    cell: int
    sense: float
    target: float
    accept: float
    room_up: np.ndarray | None = None
    room_down: np.ndarray | None = None
    witness: tuple[np.ndarray, np.ndarray] | None = None  # last attack: (columns, z)
    witness_reach: float = np.nan
    reach: float = np.nan  # at the last master point whose check was completed


class _Attacker:
    """The attacker LP over the cells that may get an interval (the others are published
    exactly and need no column); one HiGHS model, rooms and the attacked cell changing."""

    def __init__(self, p: SearchProblem, cols: np.ndarray):
        self.p = p
        self.cols = cols
        sub = p.a.tocsc()[:, cols]
        self.rows = np.flatnonzero(np.diff(sub.tocsr().indptr) > 0)
        self.sub = sub[self.rows].tocsc()
        self.position = np.full(len(p.values), -1, np.int64)
        self.position[cols] = np.arange(len(cols))
        k = len(cols)
        self.h = highs.model(
            np.zeros(k),
            np.zeros(k),
            np.zeros(k),
            self.sub,
            np.zeros(len(self.rows)),
            np.zeros(len(self.rows)),
            maximize=True,
            **highs.WARM_PRIMAL,
        )
        self.all = np.arange(k, dtype=np.int32)
        self.costed = -1

    def set_rooms(self, up: np.ndarray, down: np.ndarray) -> None:
        """Rooms over the model's columns."""
        self.h.changeColsBounds(len(self.all), self.all, -down, up)

    def reach(self, i: int, sense: float):
        """(``max sense z_i``, row prices over the model's rows, ``z``, outcome)."""
        col = int(self.position[i])
        if self.costed != col:
            idx = [col] if self.costed < 0 else [self.costed, col]
            self.h.changeColsCost(len(idx), np.array(idx, np.int32), np.zeros(len(idx)))
            self.costed = col
        self.h.changeColCost(col, sense)
        outcome = highs.run(self.h, self.p.deadline)
        if outcome is not Outcome.OPTIMAL:
            return np.nan, None, None, outcome
        solution = self.h.getSolution()
        value = float(self.h.getInfo().objective_function_value)
        return value, np.asarray(solution.row_dual), np.asarray(solution.col_value), outcome

    def cut(self, req: _Requirement, g: np.ndarray, d_up: np.ndarray, d_down: np.ndarray):
        """Coefficients (over the columns, for ``d^+`` and ``d^-``) of the capacity cut of
        ``req`` from prices ``g``: of ``g`` and ``-g`` the one tighter at ``d``."""
        at = int(self.position[req.cell])
        best = None
        for sign in (1.0, -1.0):
            r = -(self.sub.T @ (sign * g))
            r[at] += req.sense
            up, down = np.maximum(0.0, r), np.maximum(0.0, -r)
            if req.room_up is not None and req.room_down is not None:
                up = up * _chord(req.room_up, self.p.room_up[self.cols])
                down = down * _chord(req.room_down, self.p.room_down[self.cols])
            lhs = float(up @ d_up + down @ d_down)
            if best is None or lhs < best[0]:
                best = (lhs, up, down)
        assert best is not None
        return best[1], best[2]


def _chord(cap: np.ndarray, room: np.ndarray) -> np.ndarray:
    """``min(1, R_j / U_j)``: the slope of the chord under ``min(d_j, R_j)`` on
    ``[0, U_j]`` (module docstring, Readings)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(room > 0, np.minimum(1.0, cap / room), 0.0)


def _target(level: float, room: float) -> tuple[float, float]:
    """The level asked for (not beyond the room) and the reach accepted as meeting it:
    within half the margin, which the widening by ``1 + LEVEL_MARGIN`` (:func:`_rescaled`)
    more than makes up for, and which keeps the cut loop from chasing round-off."""
    if level <= room:
        return level, level - 0.5 * LEVEL_MARGIN * max(1.0, abs(level))
    # Beyond the a-priori room: the room must be reached to the solver's precision.
    return room, room - 1e-9 * max(1.0, abs(room))


def partial(
    problem: TableProblem,
    *,
    cost,
    forbidden=None,
    forced=None,
    time_limit: float = 60.0,
    work_limit: float | None = None,
    escaped=None,
) -> PartialResult:
    """The narrowest published intervals that protect every sensitive cell (module
    docstring). Parameters as :func:`service.sdc.suppress.suppress`; ``time_limit``
    covers the whole call, audit included (a quarter of it is kept for the audit unless
    ``work_limit`` bounds the search); ``escaped`` as in
    :func:`service.sdc.suppress.problem.prepare` (forced cells are published as their
    whole a-priori range)."""
    start = time.perf_counter()
    if not time_limit > 0:
        raise InputError("time_limit must be > 0 seconds", field="time_limit")
    if work_limit is not None and not work_limit >= 1:
        raise InputError("work_limit must be at least 1", field="work_limit")
    end = start + time_limit
    if work_limit is None:
        return _solve(problem, cost, forbidden, forced, start, end, 0.75 * time_limit, escaped)
    return on_work_clock(
        lambda: _solve(problem, cost, forbidden, forced, start, end, float(work_limit), escaped),
        work_limit,
        end,
    )


class _Master:
    """The master LP: ``min c (d^+ + d^-)`` over the allowed cells' columns with the cuts
    found so far (columns ``[d^+ | d^-]``)."""

    def __init__(self, c: np.ndarray, lower: np.ndarray, upper: np.ndarray):
        k = len(c)
        self.k = k
        self.h = highs.model(
            np.concatenate([c, c]),
            lower,
            upper,
            sp.csc_matrix((0, 2 * k)),
            [],
            [],
            solver="simplex",
            presolve="off",
        )
        self.lower, self.upper = lower, upper
        self.cuts = 0

    def add(self, up: np.ndarray, down: np.ndarray, target: float) -> None:
        coef = np.concatenate([up, down])
        # Coefficients below round-off only make the cut (slightly) stronger when left out.
        idx = np.flatnonzero(coef > 1e-12 * max(1.0, float(coef.max(initial=0.0))))
        self.h.addRow(target, highspy.kHighsInf, len(idx), idx.astype(np.int32), coef[idx])
        self.cuts += 1

    def solve(self, deadline: float):
        """(outcome, d^+, d^-, objective)."""
        outcome = highs.run(self.h, deadline)
        if outcome is not Outcome.OPTIMAL:
            return outcome, None, None, np.nan
        x = np.clip(np.asarray(self.h.getSolution().col_value), self.lower, self.upper)
        # Vertices carry exact zeros; what round-off leaves above them is no interval.
        x[x <= 1e-12 * max(1.0, float(x.max(initial=0.0)))] = 0.0
        x = np.maximum(x, self.lower)
        objective = float(self.h.getInfo().objective_function_value)
        return outcome, x[: self.k], x[self.k :], objective


def _solve(problem, cost, forbidden, forced, start, end, budget, escaped=None) -> PartialResult:
    clock = highs.clock()
    deadline = clock.now() + budget
    p = prepare(problem, cost, forbidden, forced, deadline, escaped)
    n = len(p.values)
    cols = np.flatnonzero(p.allowed)
    room_up, room_down = p.room_up[cols], p.room_down[cols]
    c = p.cost[cols]
    c = np.where(c > 0, c, 1e-9 * max(1.0, float(p.cost.max(initial=0.0))))
    lower = np.zeros(2 * len(cols))
    upper = np.concatenate([room_up, room_down])
    k = len(cols)
    reqs: list[_Requirement] = []
    for i, sense, level in requirements(p):
        at = int(np.flatnonzero(cols == i)[0])
        room = float(room_up[at] if sense > 0 else room_down[at])
        target, accept = _target(level, room)
        reqs.append(_Requirement(i, sense, target, accept))
        # The cut of g = 0 as a bound: the cell's own interval covers its level.
        lower[at if sense > 0 else k + at] = target
    is_forced = p.forced[cols] & ~p.sensitive[cols]
    lower[:k][is_forced] = room_up[is_forced]
    lower[k:][is_forced] = room_down[is_forced]
    log.info(
        "partial: start, %d cells, %d may get an interval, %d requirements",
        n,
        k,
        len(reqs),
    )

    def result(status, message, d=None, lb=np.nan, audit=None, unprotected=None, rounds=0):
        none = np.zeros(n, bool)
        nan = np.full(n, np.nan)
        if d is None:
            return PartialResult(
                none,
                none,
                "partial",
                status,
                0.0,
                lb,
                audit,
                message,
                time.perf_counter() - start,
                rounds,
                unprotected,
                published_lower=nan,
                published_upper=nan,
            )
        d_up, d_down = d
        full_up, full_down = np.zeros(n), np.zeros(n)
        full_up[cols], full_down[cols] = d_up, d_down
        shown = (full_up + full_down) > 0
        return PartialResult(
            shown,
            shown & ~p.sensitive,
            "partial",
            status,
            float(c @ (d_up + d_down)),
            lb,
            audit,
            message,
            time.perf_counter() - start,
            rounds,
            unprotected,
            published_lower=p.values - full_down,
            published_upper=p.values + full_up,
            width=float((full_up + full_down).sum()),
        )

    master = _Master(c, lower, upper)
    if (lower > upper).any():
        j = int(cols[np.flatnonzero(lower > upper)[0] % k])
        return result("no_safe_pattern", f"cell {j} cannot get an interval covering its levels")
    att = _Attacker(p, cols)
    needs = Requirements(p.table.structure, p.table.unions) if p.table.unions else None
    proven: set = set()
    rounds = 0
    bound = np.nan
    d: tuple[np.ndarray, np.ndarray] | None = None
    reached: list[float] = []
    plain_bound = np.nan
    exact = True
    status, message = "optimal", "the narrowest intervals were found"
    # Nothing to protect: only the forced cells get their (whole) interval.
    rounds_left = MAX_AGGREGATION_ROUNDS if reqs else 0
    if not reqs:
        d, reached = (lower[:k], lower[k:]), []
        bound = float(c @ (lower[:k] + lower[k:]))
    for _ in range(rounds_left):
        converged = False
        while rounds < MAX_ROUNDS:
            rounds += 1
            outcome, d_up, d_down, objective = master.solve(p.deadline)
            if outcome is Outcome.INFEASIBLE:
                return result(
                    "no_safe_pattern",
                    "no intervals within the a-priori bounds and the cells allowed "
                    "(forbidden, zero cells) protect every sensitive cell",
                    rounds=rounds,
                )
            if outcome is not Outcome.OPTIMAL:
                status = "time_limit"
                message = (
                    "time limit reached solving the master LP"
                    if outcome is Outcome.TIME_LIMIT
                    else f"master LP ended with status {highs.describe(master.h)!r}"
                )
                break
            assert d_up is not None and d_down is not None
            bound = objective
            added, late = _separate(att, master, reqs, d_up, d_down)
            if late is not None:
                status, message = "time_limit", late
                break
            # A completed check: every requirement's reach is known at this point.
            d, reached = (d_up, d_down), [r.reach for r in reqs]
            if not added:
                converged = True
                break
        if not converged:
            if status != "time_limit":
                status, message = "time_limit", "cut generation did not converge"
            break
        # The support's aggregations (module docstring, Readings).
        if needs is None or d is None:
            break
        support = np.zeros(n, bool)
        support[cols] = (d[0] + d[1]) > 0
        check = check_pattern(p, support, screen_only=True, proven=proven)
        if check is None:
            break
        if check.status == "undecided" and highs.now() >= p.deadline:
            status, message = "time_limit", "time limit reached checking aggregations"
            break
        new = [r for found in check.found for r in needs.of(found)]
        new += [r for failed in dict.fromkeys(check.failing) for r in needs.at(*failed)]
        if not new:
            break
        if exact:
            # A lower bound on every safe result: the protection levels alone.
            plain_bound, exact = bound, False
        more = 0
        for anchor, level, caps in new:
            at = int(np.flatnonzero(cols == anchor)[0]) if p.allowed[anchor] else -1
            if at < 0:
                continue  # a cell that may not get an interval: left to the audit
            cap = caps[cols]
            cap_up, cap_down = np.minimum(cap, room_up), np.minimum(cap, room_down)
            cap_up[at], cap_down[at] = room_up[at], room_down[at]
            target, accept = _target(level, float(room_up[at]))
            reqs.append(_Requirement(anchor, 1.0, target, accept, cap_up, cap_down))
            more += 1
        if not more:
            break
        log.info("partial: %d aggregation requirements added", len(new))
    if not exact:
        bound = plain_bound  # the master's bound holds for the linear restriction only
    if status == "optimal" and not exact:
        status = "feasible"
        message = (
            "the narrowest intervals under the aggregation requirements were found "
            "(their linear restriction may leave wider intervals than needed)"
        )
    widened = _rescaled(d, reached, reqs, room_up, room_down)
    if status != "time_limit":
        d = d if widened is None else widened
    else:
        d = widened
        if d is None:
            return result(
                "time_limit",
                f"{message}: no intervals meeting every requirement were reached; "
                "a longer time limit may find them",
                lb=bound,
                unprotected=_short(reached, reqs),
                rounds=rounds,
            )
        message = f"{message}; the last intervals were widened to meet every requirement"
    assert d is not None
    if p.table.integral:
        # Counts: intervals of whole numbers, each end widened outwards (wider intervals
        # only protect more). The LP's narrowest ends are fractions, and an intruder who
        # knows counts are whole reads an end of 2.4 as 2; a helper's campaign found 94 of
        # 102 count tables with no intervals returned, though fast protected them.
        d = tuple(
            np.minimum(np.ceil(side - 1e-9 * np.maximum(1.0, side)), np.floor(room))
            for side, room in zip(d, (room_up, room_down), strict=True)
        )
    shown = np.zeros(n, bool)
    shown[cols] = (d[0] + d[1]) > 0
    lo, hi = p.lower_bounds.copy(), p.upper_bounds.copy()
    lo[cols] = np.maximum(lo[cols], p.values[cols] - d[1])
    hi[cols] = np.minimum(hi[cols], p.values[cols] + d[0])
    bounded = dataclasses.replace(p.table, lower_bounds=lo, upper_bounds=hi)
    audit = audit_pattern(bounded, shown, time_limit=max(end - time.perf_counter(), 1e-3))
    log.info(
        "partial: end, status %s, audit %s, %d cells with an interval, %d cuts, %d rounds",
        status,
        audit.verdict,
        int(shown.sum()),
        master.cuts,
        rounds,
    )
    if audit.safe:
        return result(status, message, d, bound, audit, rounds=rounds)
    reasons = "; ".join(audit.reasons)
    if status == "time_limit" and audit.verdict != "infeasible":
        # Stopped early: the table may well have safe intervals, found with more time.
        return result(
            "time_limit",
            f"{message}, but the audit did not pass them ({reasons}); no intervals are "
            "returned; a longer time limit may find them",
            lb=bound,
            audit=audit,
            unprotected=unproven(p.sensitive, audit),
            rounds=rounds,
        )
    if audit.verdict == "uncertified":
        return result(
            "time_limit",
            f"time limit reached certifying the intervals found: the audit's verdict is "
            f"uncertified ({reasons}); no intervals are returned",
            lb=bound,
            audit=audit,
            unprotected=unproven(p.sensitive, audit),
            rounds=rounds,
        )
    return result(
        "no_safe_pattern",
        f"the intervals found did not pass the audit: {reasons}",
        lb=bound,
        audit=audit,
        unprotected=unproven(p.sensitive, audit),
        rounds=rounds,
    )


def _separate(att: _Attacker, master: _Master, reqs: list[_Requirement], d_up, d_down):
    """Check every requirement at ``d``; add the cut of each violated one. Returns (cuts
    added, ``None`` or why the time ran out)."""
    added = 0
    plain = True  # whether the attacker's rooms are the published ones
    att.set_rooms(d_up, d_down)
    for req in reqs:
        if req.room_up is not None and req.room_down is not None:
            up, down = np.minimum(d_up, req.room_up), np.minimum(d_down, req.room_down)
            at = int(att.position[req.cell])
            up[at], down[at] = d_up[at], d_down[at]
        else:
            up, down = d_up, d_down
        # The last attack, if still within the rooms and far enough, proves it again.
        if req.witness is not None:
            where, z = req.witness
            if (z <= up[where]).all() and (-z <= down[where]).all():
                req.reach = req.witness_reach
                continue
        if req.room_up is not None:
            att.set_rooms(up, down)
            plain = False
        elif not plain:
            att.set_rooms(d_up, d_down)
            plain = True
        value, g, z, outcome = att.reach(req.cell, req.sense)
        if outcome is not Outcome.OPTIMAL:
            late = outcome is Outcome.TIME_LIMIT
            return added, (
                "time limit reached checking the intervals against the protection levels"
                if late
                else f"attacker LP ended with status {highs.describe(att.h)!r}"
            )
        assert g is not None and z is not None
        req.reach = value
        if value >= req.accept:
            where = np.flatnonzero(z != 0.0)
            req.witness = (where, z[where])
            req.witness_reach = value
            continue
        req.witness = None
        cut_up, cut_down = att.cut(req, g, d_up, d_down)
        master.add(cut_up, cut_down, req.target)
        added += 1
    return added, None


def _rescaled(d, reached: list[float], reqs: list[_Requirement], room_up, room_down):
    """``(1 + LEVEL_MARGIN) t d`` meeting every requirement checked at ``d`` with the
    margin, by homogeneity (module docstring, Readings; ``t = 1`` at a converged point):
    ``d`` is the last point whose requirements were all checked, ``reached`` their reach
    there (the first ``len(reached)`` of ``reqs``: aggregation requirements added since
    are left to the audit). ``None`` when one was not reached at all."""
    if d is None:
        return None
    reach = np.asarray(reached, float)
    target = np.array([r.target for r in reqs[: len(reach)]])
    if not (reach > 0).all():
        return None
    t = (1.0 + LEVEL_MARGIN) * max(1.0, float((target / reach).max(initial=1.0)))
    return np.minimum(t * d[0], room_up), np.minimum(t * d[1], room_down)


def _short(reached: list[float], reqs: list[_Requirement]) -> list[int]:
    """Cells of the requirements not met at the last checked point (all of them when no
    point was checked)."""
    if len(reached) != len(reqs):
        return sorted({r.cell for r in reqs})
    return sorted({r.cell for r, v in zip(reqs, reached) if not v >= r.accept})
