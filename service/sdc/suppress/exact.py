"""The exact method: Fischetti and Salazar's model by iterated MIP solves with capacity
cuts, started from the fast method's audited pattern (see :mod:`service.sdc.suppress`).

The master is ``min c y`` over ``y in {0,1}^n`` (``y = 1`` on sensitive and forced cells,
``0`` on cells that may not be complements) with the cuts found so far; every cut holds for
every safe pattern, or for a cheapest one, so the master's LP and MIP bounds are lower
bounds on the optimum.

* Capacity cuts (module :mod:`service.sdc.suppress`) from the attacker LP's row prices, at
  fractional points of the master's LP relaxation (root cutting planes) and at the 0/1
  points its MIP returns, strengthened for 0/1 patterns (:func:`strengthen`).
* A sensitive cell may not be the only suppressed cell of a relation (it is disclosed
  exactly): ``sum_{j in relation, j != i} y_j >= 1``, Fischetti and Salazar's (2000)
  simplest "bridgeless" inequality; nor may a complement, in a cheapest pattern
  (:func:`_no_lonely_complements`: valid for the bound, not for every safe pattern).
* A relation whose sensitive and forced cells form a sensitive union must suppress one
  more cell (:func:`_exposed_relations`); so must two relations sharing one cell,
  combined to cancel it (seed 002 eq. 3.7), whose sensitive and forced cells form a
  sensitive aggregation (:func:`_exposed_relation_pairs`).
* Aggregation no-good cuts (seed 002 sections 3-6), from every MIP point: a pattern that
  publishes a sensitive aggregation is cut off together with every pattern that publishes
  the same one.

Upper bounds come from the fast method's pattern and from repairing the master's points
(the LP point rounded, each MIP point) into safe patterns with the fast method's steps
(:func:`_repair`): the incumbent's clean-up continued where the warm start's time box
stopped it, then for the rounded LP point and each MIP point cheapest complements for what
they miss, the clean-up, the protection of aggregations. Without contributions the
incumbent is first polished by the same search over its own cells (:func:`_polished`). A
MIP point becomes the incumbent only when it meets every protection level (attacker LPs)
and the full aggregation check finds nothing; a repaired pattern is safe by construction
up to the groups the screen cannot judge, which the final audit does (its fallback is the
audited warm start).

Limits. Every phase runs against ``p.deadline`` on the search's clock (seconds, or work in
deterministic mode). A MIP is not started with less left than the last one needed
(:meth:`_Master.affords_mip`: it cannot be stopped within its root), and the reply names
the limit that stopped the search (:func:`service.sdc.highs.stopped_by`). A MIP point
whose aggregations the check leaves undecided is not proven safe, whatever the reason: it
is set aside by a no-good on that pattern and repaired, and no lower bound is taken above
its cost; when only such points remain below the incumbent the status is ``feasible``,
not a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import highspy
import numpy as np
import scipy.sparse as sp

from .. import highs
from ..aggregations import Deviations, atom_map
from ..highs import Outcome
from ..unions import UnionSource, judge
from .fast import check_pattern, log, protect_aggregations, remove_superfluous, trim
from .lps import Attacker, Cheapest, misses, unprotected
from .problem import SearchProblem, requirements

#: Cut coefficients below this share of the right-hand side are folded into it (a
#: coefficient ``a_j`` dropped lowers the right-hand side by ``a_j``, its largest share).
FOLD_RTOL = 1e-6
#: Root cutting stops when ``ROOT_STALL`` rounds in a row raise the LP bound by less than
#: this share of it: the MIP closes the rest faster than more rounds would.
ROOT_STALL_RTOL = 1e-4
ROOT_STALL = 5
#: Relative gap at which an intermediate MIP stops: its point is cut off or repaired
#: anyway, so proving it optimal in a master that will change is wasted; the master whose
#: point is safe is then solved to ``FINAL_GAP``.
ROUND_GAP = 5e-3
FINAL_GAP = 1e-9
#: A MIP's dual bound this close to the incumbent's cost proves it optimal.
MIP_BOUND_RTOL = 1e-6
#: Entries of the rows against lonely complements (:func:`_no_lonely_complements`) at
#: most: 100x100 hierarchical needs 120,628, 20x20x10 63,081.
LONELY_MAX_NONZEROS = 1_000_000
#: Share of the time left that the incumbent's polish gets (:func:`_polished`), under
#: intervals alone: 20x20x10 (seed 1, 60 s) 1.022% -> 0.804% of the value; with
#: contributions it cost more than it found (60x60 hier 0.960% -> 0.975%).
POLISH_SHARE = 0.6


def strengthen(coef: np.ndarray, level: float, forced: np.ndarray, allowed: np.ndarray):
    """The capacity cut ``coef y >= level`` strengthened for 0/1 patterns (Fischetti and
    Salazar 2000, cited in seeds 000 and 002; the cover reading of a knapsack row).

    Cells fixed at 1 (``forced``: sensitive and forced cells) move to the right-hand side
    ``b = level - sum coef_forced``; cells not ``allowed`` (fixed at 0) drop out.
    For ``y in {0,1}`` a coefficient above ``b`` can be lowered to ``b``: one such cell
    alone already meets the cut. Coefficients below ``FOLD_RTOL b`` are dropped and ``b``
    lowered by their sum (their largest contribution), which keeps the cut valid and
    sparse. Returned divided by ``b`` (the cells, their coefficients in ``(0, 1]``,
    right-hand side 1), or ``None`` when the fixed cells meet it.

    The room ``U_j`` of an unbounded cell is capped at about twice the largest value
    (module Readings), so an uncapped coefficient can be thousands of times the level and
    the LP relaxation could meet the cut with ``y_j`` near 0: capping is what makes the
    relaxation's bound useful.
    """
    b = level - float(coef[forced].sum())
    if not b > FOLD_RTOL * max(level, 1e-300):
        return None
    a = np.where(allowed & ~forced, np.minimum(coef, b), 0.0)
    small = (a > 0) & (a < FOLD_RTOL * b)
    b -= float(a[small].sum())
    a[small] = 0.0
    idx = np.flatnonzero(a > 0)
    return idx, np.minimum(a[idx], b) / b, 1.0


@dataclass
class _Master:
    """The cuts as rows (``lo <= a y``), in a continuous HiGHS model for the cutting rounds
    (each round starts from the last basis) and rebuilt as a MIP for each MIP solve: HiGHS
    1.16 measures a MIP's ``time_limit`` from the start of each ``run()``, not over the
    object's runs as :func:`service.sdc.highs.run` allows for, so a reused MIP object
    would overrun its deadline by the time already spent in it."""

    p: SearchProblem
    lp: highspy.Highs = field(init=False)
    index: list = field(default_factory=list)
    coef: list = field(default_factory=list)
    lower: list = field(default_factory=list)
    #: Simplex iterations of the last MIP, and of the LP relaxation over its cutting
    #: rounds: what the next MIP is expected to need at least (:meth:`affords_mip`).
    last: float = 0.0
    relaxed: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.p.values)
        self.col_lower = np.where(self.p.forced, 1.0, 0.0)
        self.col_upper = np.where(self.p.allowed, 1.0, 0.0)
        self.lp = highs.model(
            self.p.cost, self.col_lower, self.col_upper, sp.csc_matrix((0, n)), [], []
        )

    def add(self, idx: np.ndarray, coef: np.ndarray, lo: float) -> None:
        idx = np.asarray(idx, np.int32)
        coef = np.asarray(coef, float)
        self.lp.addRow(lo, highspy.kHighsInf, len(idx), idx, coef)
        self.index.append(idx)
        self.coef.append(coef)
        self.lower.append(lo)

    def add_rows(self, rows: sp.csr_matrix, lo: float) -> None:
        """Add every row of ``rows`` as ``lo <= row y`` (one HiGHS call)."""
        rows = sp.csr_matrix(rows)
        rows.sort_indices()
        count = rows.shape[0]
        if count == 0:
            return
        self.lp.addRows(
            count,
            np.full(count, lo),
            np.full(count, highspy.kHighsInf),
            rows.nnz,
            rows.indptr[:-1].astype(np.int32),
            rows.indices.astype(np.int32),
            rows.data.astype(float),
        )
        self.index += np.split(rows.indices.astype(np.int32), rows.indptr[1:-1])
        self.coef += np.split(rows.data.astype(float), rows.indptr[1:-1])
        self.lower += [lo] * count

    def cut(self, att: Attacker, missing, y: np.ndarray) -> int:
        """Add the strengthened capacity cut of each missed requirement; how many.

        A 0/1 point whose every missed requirement :func:`strengthen` counts as met by the
        fixed cells (their shortfall within ``FOLD_RTOL`` of the level, while the point
        check's allowance is ``highs.FEASIBILITY_RTOL`` of the larger of the level and the
        value) gets a no-good instead: some cell it publishes must be suppressed. Valid
        for every pattern the check accepts: protection only grows with the pattern, so
        no part of a pattern that misses a requirement meets it. Without it the master
        could return the point again until the time limit."""
        added = 0
        for i, sense, level, prices in missing:
            found = strengthen(att.cut(i, sense, prices, y), level, self.p.forced, self.p.allowed)
            if found is not None:
                self.add(*found)
                added += 1
        if missing and not added and np.isin(y, (0.0, 1.0)).all():
            published = np.flatnonzero((y == 0.0) & self.p.allowed)
            if published.size:
                self.add(published, np.ones(published.size), 1.0)
                added += 1
        return added

    def relax(self, deadline: float):
        """Solve the LP relaxation: (outcome, point, objective)."""
        outcome = highs.run(self.lp, deadline)
        self.relaxed += max(int(self.lp.getInfo().simplex_iteration_count), 0)
        if outcome is not Outcome.OPTIMAL:
            return outcome, None, np.nan
        x = np.clip(np.asarray(self.lp.getSolution().col_value), self.col_lower, self.col_upper)
        return outcome, x, float(self.lp.getInfo().objective_function_value)

    def affords_mip(self, deadline: float) -> bool:
        """Whether a MIP can run before ``deadline``. In deterministic mode a MIP is stopped
        only at HiGHS's checks of its limits (:class:`service.sdc.highs.WorkClock`), never
        within its root LP or a primal heuristic, which here take most of its work: one
        started with less work left than the last MIP needed overran the budget (10x10x5,
        70,000 units: a MIP started with 1,256 left, the last having needed 2,075, took
        1,882 to stop, its last heuristic 1,066 between two checks) and could not give a
        better point or bound anyway."""
        return highs.affords(deadline, max(self.last, self.relaxed))

    def mip(self, cutoff: float, gap: float, deadline: float):
        """Solve the master MIP with nothing above ``cutoff``: (outcome, point or None,
        dual bound, nodes, the limit that stopped it or ``None``).

        No start solution is passed: HiGHS 1.16, given one (``setSolution``), can end
        ``optimal`` with the objective value of a better point while ``getSolution``
        still returns the start (a 4x4 table: objective 1,106, the start's 1,283 read
        back), which read as "nothing better than the incumbent" and a false proof of
        optimality; above the cutoff the start could not be used anyway. A point whose
        cost differs from the objective HiGHS reports is not returned."""
        n = len(self.p.values)
        lengths = np.fromiter((len(i) for i in self.index), np.int64, len(self.index))
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        empty = np.zeros(0)
        a = sp.csr_matrix(
            (
                np.concatenate(self.coef) if self.coef else empty,
                np.concatenate(self.index) if self.index else empty.astype(np.int32),
                indptr,
            ),
            shape=(len(self.index), n),
        )
        h = highs.model(
            self.p.cost,
            self.col_lower,
            self.col_upper,
            a,
            np.asarray(self.lower, float),
            np.full(len(self.lower), np.inf),
            integer=np.ones(n, bool),
            mip_rel_gap=gap,
            objective_bound=cutoff,
        )
        outcome = highs.run(h, deadline)
        info = h.getInfo()
        self.last = float(max(int(info.simplex_iteration_count), 0))
        y = None
        if outcome in (Outcome.OPTIMAL, Outcome.TIME_LIMIT) and highs.has_point(h):
            y = np.asarray(h.getSolution().col_value) > 0.5
            value, cost = float(info.objective_function_value), float(self.p.cost @ y)
            if abs(cost - value) > 1e-6 * max(1.0, abs(value)):
                log.warning(
                    "exact: MIP point costs %.6g, HiGHS reports %.6g: not used", cost, value
                )
                y = None
        return (
            outcome,
            y,
            float(info.mip_dual_bound),
            int(info.mip_node_count),
            highs.stopped_by(h),
        )


def exact(
    p: SearchProblem,
    att: Attacker,
    cheapest: Cheapest,
    incumbent: np.ndarray,
    polishing: bool = False,
    proven: set | None = None,
):
    """Fischetti-Salazar branch-and-cut by root cutting planes and iterated MIP solves.

    ``incumbent`` must be safe (intervals and unions): its cost bounds each MIP's
    objective (a cutoff just below it), and a MIP that proves nothing lies below the
    cutoff proves the incumbent optimal. ``proven``: the groups of suppressed cells the
    screen proved safe so far (:func:`service.sdc.aggregations.check_aggregations`),
    added to here and read by the final audit, which then does not decide again a
    group the search proved (the repairs' groups, as the warm start's). Without
    contributions it is first polished (:func:`_polished`); ``polishing``: this run is
    that polish. Returns (pattern, status, message, lower bound, master solves).
    """
    if not polishing and p.table.unions is None and highs.now() < p.deadline:
        now = highs.now()
        incumbent = _polished(p, incumbent, now + POLISH_SHARE * (p.deadline - now))
    proven = set() if proven is None else proven
    master = _Master(p)
    best = incumbent.copy()
    best_cost = float(p.cost @ best)
    lower = float(p.cost[p.forced].sum())
    # The cheapest MIP point set aside because its aggregations could not be decided: it
    # may be the optimum, so no bound found after it exceeds its cost.
    undecided = np.inf
    # The last MIP proved that nothing cheaper than the incumbent is left but such points.
    settled = False
    solves = 0

    def improve(y: np.ndarray | None) -> None:
        """Take a repaired pattern if cheaper. Its protection levels are met by
        construction (a witness per requirement, kept by the clean-up) and the screen
        proved its aggregations (:func:`protect_aggregations`), which the full check
        repeats at a cost of seconds on large tables; the final audit decides, falling
        back to the fast method's audited pattern."""
        nonlocal best, best_cost
        log.info("exact: repair %s", "-" if y is None else f"cost {float(p.cost @ y):.6g}")
        if y is None:
            return
        cost = float(p.cost @ y)
        if cost < best_cost - 1e-9 * max(1.0, best_cost):
            log.info("exact: better pattern, cost %.6g (was %.6g)", cost, best_cost)
            best, best_cost = y, cost

    def bound(value: float) -> None:
        """A lower bound from the master (its LP or MIP bound), valid for every pattern
        but those set aside."""
        nonlocal lower
        lower = max(lower, min(value, best_cost, undecided))

    def stop(status: str, message: str):
        log.info(
            "exact: end, %s, cost %.6g, bound %.6g, %d master solves",
            status,
            best_cost,
            lower,
            solves,
        )
        if status == "optimal":
            return best, status, message, best_cost, solves
        return best, status, message, min(lower, best_cost), solves

    # A cell alone among suppressed cells in one of its relations is disclosed exactly.
    a = p.a.tocsr()
    for i in np.flatnonzero(p.sensitive).tolist():
        for r in a[:, [i]].nonzero()[0].tolist():
            others = a.indices[a.indptr[r] : a.indptr[r + 1]]
            others = others[(others != i) & p.allowed[others]]
            master.add(others, np.ones(len(others)), 1.0)
    lonely = _no_lonely_complements(p)
    master.add_rows(lonely, 0.0)
    log.info("exact: %d rows against lonely complements", lonely.shape[0])
    for idx in _exposed_relations(p):
        master.add(idx, np.ones(len(idx)), 1.0)
    two = _exposed_relation_pairs(p)
    for idx in two:
        master.add(idx, np.ones(len(idx)), 1.0)
    log.info("exact: %d exposed relation pairs", len(two))
    log.info("exact: start, incumbent cost %.6g, %d rows", best_cost, len(master.lower))
    # The root rounds get half the time: on large tables one round is many attacker LPs
    # (100x100 hierarchical: 2,032 requirements, 20 s a round), and the repair of the
    # rounded LP point and the MIP need the rest.
    now = highs.now()
    x, relaxed, rounds = _cutting(master, att, p, until=now + 0.5 * (p.deadline - now))
    solves += rounds
    bound(relaxed)

    # The warm start's clean-up is time-boxed (on 100x100 hierarchical it tries about a
    # tenth of its candidates): it goes on here (half the time left), then the rounded LP
    # point is repaired (a quarter). A polish repairs the rounded point first, with most
    # of its time: over the incumbent's cells that point is where its gain comes from
    # (20x20x10: 4.40e6 -> 3.44e6, while the clean-up's 13 s went on 2 cells).
    def continued() -> np.ndarray:
        return best.copy()

    def rounded() -> np.ndarray | None:
        return None if x is None else p.forced | (x > 0.5)

    steps = [(rounded, 0.6), (continued, 0.5)] if polishing else [(continued, 0.5), (rounded, 0.25)]
    for start, share in steps:
        y0 = start()
        if y0 is not None and highs.now() < p.deadline:
            now = highs.now()
            improve(_repair(p, att, cheapest, y0, now + share * (p.deadline - now), proven))
    gap = ROUND_GAP
    while True:
        if lower >= best_cost * (1 - FINAL_GAP):
            return stop("optimal", "proven optimal")
        if settled:
            return stop(
                "feasible",
                "no cheaper pattern exists but ones whose aggregations could not be decided; "
                "best safe pattern returned, with the gap to the cheapest of those",
            )
        if highs.now() >= p.deadline:
            return stop("time_limit", "time limit reached; best safe pattern returned")
        if not master.affords_mip(p.deadline):
            return stop(
                "time_limit",
                "time limit reached: what is left would not cover another MIP; "
                "best safe pattern returned",
            )
        # Nothing at or above the incumbent's cost is of interest: a MIP that finds
        # nothing below it proves it optimal.
        cutoff = best_cost * (1 - FINAL_GAP)
        outcome, y, dual, nodes, limit = master.mip(cutoff, gap, p.deadline)
        solves += 1
        log.info(
            "exact: MIP %d, %s, bound %.6g, point %s, incumbent %.6g, %d nodes, %d cuts",
            solves,
            outcome,
            dual,
            "-" if y is None else f"{float(p.cost @ y):.6g}",
            best_cost,
            nodes,
            len(master.lower),
        )
        if outcome is Outcome.INFEASIBLE:
            # Nothing satisfies the cuts at a cost below the incumbent's: it is optimal
            # (but for the points set aside).
            bound(best_cost)
            settled = True
            continue
        if outcome not in (Outcome.OPTIMAL, Outcome.TIME_LIMIT):
            return stop("time_limit", f"MIP ended with {outcome.value}; best safe pattern returned")
        if np.isfinite(dual):
            bound(dual)
        if y is None and limit is not None:
            # Stopped (or not started) by a limit before it found anything.
            return stop("time_limit", f"{limit} reached; best safe pattern returned")
        if y is None or float(p.cost @ y) >= best_cost:
            # Out of time with nothing better than the incumbent, or the MIP's point is the
            # incumbent itself (within the gap): the loop's checks decide. The incumbent
            # is called optimal only on the MIP's own bound, never on its point alone.
            bound_proves = np.isfinite(dual) and dual >= best_cost * (1 - MIP_BOUND_RTOL)
            if outcome is Outcome.OPTIMAL and y is not None and gap > FINAL_GAP:
                gap = FINAL_GAP
            elif outcome is Outcome.OPTIMAL and bound_proves:
                bound(best_cost)
                settled = True
            elif outcome is Outcome.OPTIMAL:
                return stop(
                    "feasible",
                    "the MIP ended without a usable point below the incumbent and without "
                    "proving there is none; best safe pattern returned",
                )
            continue
        missing, reach = unprotected(att, p, y)
        log.info("exact: point checked, %s requirements missed", len(missing or ()))
        if reach == "time_limit":
            return stop("time_limit", "time limit reached checking a pattern")
        if reach != "optimal":
            return stop(
                "feasible",
                f"an attacker LP ended with {reach!r} checking a pattern; best safe "
                "pattern returned",
            )
        if missing:
            master.cut(att, missing, y.astype(float))
            # The point's sensitive aggregations are cut off too: every safe pattern
            # meets a no-good, whatever else it suppresses. The screen finds them; the
            # full check's MIPs, run to prove the atoms the screen leaves open on a point
            # that is cut off anyway, took 28 of 60 s on 60x60 hierarchical. Not started
            # past the deadline (building the check takes 0.25 s on 100x100 hier).
            check = (
                check_pattern(p, y, screen_only=True, proven=proven)
                if highs.now() < p.deadline
                else None
            )
            if check is not None and check.status == "sensitive":
                for idx, coef, rhs in _aggregation_no_goods(p, y, check):
                    master.add(idx, coef, rhs)
            log.info("exact: point's aggregations checked")
            improve(_repair(p, att, cheapest, y, _share(p.deadline), proven, master))
            x, relaxed, rounds = _cutting(master, att, p, max_rounds=5)
            solves += rounds
            bound(relaxed)
            continue
        if highs.now() >= p.deadline:
            return stop("time_limit", "time limit reached checking a pattern")
        # The screen first: a point below the incumbent usually publishes an aggregation
        # the screen finds in a fraction of a second, while the full check's MIPs on the
        # atoms the screen leaves open ran to the deadline (60x60 hier: 24 s). Only what
        # the screen neither proves nor refutes goes to the full check, time-boxed like a
        # repair; a point it leaves undecided is set aside below.
        check = check_pattern(p, y, screen_only=True, proven=proven)
        if check is not None and check.status not in ("safe", "sensitive"):
            check = check_pattern(p, y, until=_share(p.deadline), proven=proven)
        if check is not None and check.status == "undecided":
            # Not proven safe, whatever left it undecided (a limit of the check, a group
            # it cannot decide): set aside by a no-good on this very pattern, its cost
            # kept as a bound, and repaired like a point that publishes an aggregation.
            # What stopped the search is then said by the loop's checks.
            log.info("exact: point's aggregations undecided: %s", check.message)
            undecided = min(undecided, float(p.cost @ y))
            master.add(*_pattern_no_good(p, y))
            protected, _ = protect_aggregations(p, y, cheapest, proven=proven)
            improve(protected)
            continue
        if check is not None and check.status == "sensitive":
            for idx, coef, rhs in _aggregation_no_goods(p, y, check):
                master.add(idx, coef, rhs)
            protected, _ = protect_aggregations(p, y, cheapest, proven=proven)
            improve(protected)
            continue
        # Safe: the new incumbent; proven optimal when the MIP was solved to the end.
        best, best_cost = y, float(p.cost @ y)
        log.info("exact: better pattern from the MIP, cost %.6g", best_cost)
        if outcome is Outcome.OPTIMAL and gap <= FINAL_GAP:
            bound(best_cost)
        gap = FINAL_GAP


def _cutting(
    master: _Master,
    att: Attacker,
    p: SearchProblem,
    max_rounds: int = 200,
    until: float | None = None,
):
    """Cutting planes on the LP relaxation of the master: the attacker LP with fractional
    room ``y_j U_j`` separates capacity cuts just as for a 0/1 pattern (module
    :mod:`service.sdc.suppress`), one for every requirement the point misses, until none
    is missed, the bound stalls (``ROOT_STALL_RTOL``) or the time runs out (no round
    starts after ``until``, no LP runs past the deadline). Returns (last
    point, best LP bound, LP solves); each LP's optimum is a lower bound."""
    bound, x, rounds, stalled = -np.inf, None, 0, 0
    while rounds < max_rounds and (until is None or highs.now() < until):
        outcome, point, value = master.relax(p.deadline)
        rounds += 1
        if outcome is not Outcome.OPTIMAL:
            break
        x = point
        stalled = stalled + 1 if value <= bound + ROOT_STALL_RTOL * abs(value) else 0
        bound = max(bound, value)
        if stalled >= ROOT_STALL:
            break
        missing, reach = unprotected(att, p, x)
        if reach != "optimal" or not missing:
            break
        master.cut(att, missing, x)
        log.info("exact: cutting round %d, LP bound %.6g, %d cuts", rounds, value, len(missing))
    return x, bound, rounds


def _polished(p: SearchProblem, incumbent: np.ndarray, until: float) -> np.ndarray:
    """The incumbent improved within its own cells: :func:`exact` with every other cell
    published, until ``until``, and its best pattern (no dearer; the cheapest found).

    A primal heuristic in the spirit of RINS and local branching (Danna, Rothberg and Le
    Pape 2005; Fischetti and Lodi 2003): the master restricted to the cells the fast
    method chose is small, its rounded LP point repaired within them is a far better
    pattern where the warm start's clean-up was cut short (20x20x10, intervals alone: it
    tries 9 of 347 candidates). The pattern is safe as any of exact's (protection levels
    by construction; the final audit decides); the restricted run's bound says nothing of
    the whole table and is dropped, as are its cuts (the whole table's master is built
    afresh)."""
    restricted = replace(p, allowed=p.allowed & incumbent, deadline=until)
    log.info("exact: polish within the incumbent's %d cells", int(incumbent.sum()))
    best, *_ = exact(restricted, Attacker(restricted), Cheapest(restricted), incumbent, True)
    return best


def _share(deadline: float) -> float:
    """A repair's deadline: a quarter of the time left, so that the MIP keeps most."""
    now = highs.now()
    return now + 0.25 * max(deadline - now, 0.0)


def _repair(
    p: SearchProblem,
    att: Attacker,
    cheapest: Cheapest,
    y: np.ndarray,
    until: float,
    proven: set | None = None,
    master: _Master | None = None,
) -> np.ndarray | None:
    """A pattern with every requirement met, made from ``y`` by the fast method's steps
    (seed 003 B.2.b; :mod:`service.sdc.suppress.fast`): a requirement ``y`` misses gets
    the cheapest complementary set (cells of ``y`` nearly free), then the clean-up and the
    protection of aggregations. ``None`` when the time runs out first. ``proven`` as in
    :func:`exact`.

    With ``master``, each requirement missed on the way gets its capacity cut at the
    pattern as it stands (valid at every pattern, module :mod:`service.sdc.suppress`):
    the prices come with the attack the repair runs anyway, and these patterns lie
    between the MIP point and a safe one, where the next MIP point would otherwise look
    (10x10x5 under intervals alone, 60 s: gap 12.5% -> 10.9% seed 1, 11.6% -> 10.5%
    seed 0; 60x60 hier 18.6% -> 18.5%)."""
    y = y | p.forced
    witness = []
    attacked = False
    for i, sense, level in requirements(p):
        if highs.now() >= until:
            return None
        found, outcome = cheapest.attack(i, sense, level, y, p.room_up, p.room_down)
        if outcome != "optimal":
            found = None
        if found is None:
            if not attacked:
                att.set_pattern(y)
                attacked = True
            value, prices, outcome = att.reach(i, sense)
            if outcome != "optimal":
                return None
            if highs.reaches(value, level, p.values[i]):
                found = att.support() if np.isfinite(value) else np.arange(len(y))
            else:
                if master is not None:
                    # A cell that may move either way is short only if its width is.
                    missed = (
                        (i, sense, level, prices)
                        if p.width[i] <= 0
                        else misses(att, p, i, sense, level)[0]
                    )
                    if missed is not None:
                        master.cut(att, [missed], y.astype(float))
                found, outcome = cheapest.support(i, sense, level, y, p.room_up, p.room_down)
                if outcome != "optimal":
                    return None
                y[found] = True
                attacked = False
        witness.append(found)
    y = remove_superfluous(p, att, cheapest, y, witness, until)
    pool = Deviations(p.table.structure, p.table.unions)
    proven = set() if proven is None else proven
    protected, _ = protect_aggregations(p, y, cheapest, proven=proven, deviations=pool)
    if protected is None:
        return None
    # Half of what is left to the trim: the next master needs the rest.
    now = highs.now()
    until = now + 0.5 * (until - now)
    return trim(p, att, cheapest, protected, witness, proven, pool, until)


def _no_lonely_complements(p: SearchProblem) -> sp.csr_matrix:
    """Rows ``sum_{l in r, l != j} y_l - y_j >= 0``: a complement ``j`` (allowed, not
    forced) is suppressed only with another cell of each relation ``r`` through it.

    Not valid for every safe pattern but for a cheapest one, which is what the master's
    bound needs: a suppressed cell alone in a relation is published by that relation
    (seed 002 eq. 3.6, a relation with one hidden cell), so publishing it leaves the
    intruder's feasible tables unchanged; the intervals of every sensitive cell are the
    same, and the aggregations published are those of the first pattern that do not
    involve it (seed 002 sections 3-6 judge a subset). Removing such cells one at a time
    from a cheapest safe pattern gives a safe pattern, no dearer, that meets every row;
    it meets every cut too, since the cuts hold for every safe pattern. Relations with a
    forced cell need no row (its fixed 1 meets it).

    A relation of ``m`` cells gives ``m`` rows of ``m`` entries: the shortest relations
    first, up to ``LONELY_MAX_NONZEROS`` entries in all (the rows are cuts: leaving some
    out keeps the bound valid), so that a large table with few sensitive cells (a
    1000 x 1000 table: 2,002 open relations, 2e9 entries) cannot exhaust memory."""
    a = p.a.tocsr()
    member = sp.csr_matrix((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
    free = (p.allowed & ~p.forced).astype(float)
    open_relations = np.flatnonzero((member @ p.forced.astype(float)) == 0)
    # Each open relation's allowed cells (the others are fixed at 0).
    member = sp.csr_matrix(member[open_relations] @ sp.diags(p.allowed.astype(float)))
    member.eliminate_zeros()
    entries = np.diff(member.indptr) * (member @ free)
    order = np.argsort(entries, kind="stable")
    member = member[np.sort(order[np.cumsum(entries[order]) <= LONELY_MAX_NONZEROS])]
    coo = (member @ sp.diags(free)).tocoo()
    coo.eliminate_zeros()
    # One row per (relation, complement): the relation's allowed cells, -1 on the cell.
    rows = member[coo.row] - 2.0 * sp.csr_matrix(
        (np.ones(len(coo.row)), (np.arange(len(coo.row)), coo.col)),
        shape=(len(coo.row), a.shape[1]),
    )
    rows = sp.csr_matrix(rows)
    rows.eliminate_zeros()
    return rows


def _exposed_relations(p: SearchProblem) -> list[np.ndarray]:
    """Relations that must hold a suppressed cell besides their sensitive and forced ones:
    for each relation whose fixed suppressions ``F`` (two or more) form an aggregation
    ``sum_F a_rj x_j`` the rule calls sensitive (:func:`service.sdc.unions.judge`, seed
    002 sections 3-5), the cells it may add, ``sum_{j in r, j not in F} y_j >= 1``. Valid
    for every safe pattern: with no other cell of ``r`` suppressed, ``r`` publishes that
    aggregation (seed 002 eq. 3.6). Returns the cells it may add, per such relation."""
    if p.table.unions is None:
        return []
    a = p.a.tocsr()
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    free: list[np.ndarray] = []
    for r in range(a.shape[0]):
        idx = a.indices[a.indptr[r] : a.indptr[r + 1]]
        fixed = p.forced[idx]
        if fixed.sum() < 2:
            continue
        rows.append(np.full(int(fixed.sum()), len(free)))
        cols.append(idx[fixed])
        vals.append(a.data[a.indptr[r] : a.indptr[r + 1]][fixed])
        free.append(idx[~fixed & p.allowed[idx]])
    if not free:
        return []
    lam = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(len(free), len(p.values)),
    )
    return [free[k] for k in np.flatnonzero(_sensitive_rows(p, lam, p.table.unions))]


def _sensitive_rows(p: SearchProblem, lam: sp.csr_matrix, unions: UnionSource) -> np.ndarray:
    """Which rows of ``lam`` (aggregations of fixed cells, one per row) the rule calls
    sensitive (:func:`service.sdc.unions.judge`), each oriented as the union check orients
    them: published value non-negative, and judged on the atoms as the audit judges
    them (``phi = G^T lambda``, :func:`service.sdc.aggregations.atom_map`). Judged on the
    cells, a margin and a leaf within it counted their common respondents twice: a column
    whose total and one leaf (150 each, the other leaf empty) are sensitive read as a
    sensitive aggregation of two respondents of 150, though it publishes the empty leaf,
    and the cut it made forced a cell no cheapest pattern needs (``exact`` said optimal at
    9 cells where 8 are safe; a helper's campaign, 2026-11-27)."""
    lam = (sp.diags(np.where(lam @ p.values < 0, -1.0, 1.0)) @ lam).tocsr()
    phi = sp.csr_matrix(lam @ atom_map(p.table.structure, unions))
    phi.eliminate_zeros()
    verdict = judge(phi, p.values, unions)
    return verdict.fired.any(axis=0) & verdict.checked


def _exposed_relation_pairs(p: SearchProblem) -> list[np.ndarray]:
    """Pairs of relations that must hold a suppressed cell besides their fixed ones: two
    relations ``r1``, ``r2`` sharing one cell ``c`` combine to ``v = a_{r2,c} a_r1 -
    a_{r1,c} a_r2``, which cancels ``c`` (seed 002 eq. 3.7). When its fixed suppressions
    ``F`` (sensitive and forced cells of both relations besides ``c``) form an aggregation
    ``sum_F v_j x_j`` the rule calls sensitive (:func:`service.sdc.unions.judge`, seed 002
    sections 3-5), ``sum_{j in supp v, j not in F} y_j >= 1``. Valid for every safe
    pattern: with no other cell of ``supp v`` suppressed, ``v``'s combination publishes
    that aggregation, whether ``c`` is suppressed or not. The lazy aggregation no-goods
    find the same rows one MIP point at a time; here they are all in the first LP.
    Returns the cells it may add, per such pair."""
    if p.table.unions is None:
        return []
    a = sp.csr_matrix(p.a, dtype=float)
    pattern = a.copy()
    pattern.data[:] = 1.0
    shared = sp.triu(pattern @ pattern.T, k=1).tocoo()
    one = shared.data == 1
    r1, r2 = shared.row[one], shared.col[one]
    if len(r1) == 0:
        return []
    # The shared cell and each relation's coefficient on it.
    both = (pattern[r1].multiply(pattern[r2])).tocsr()
    c = both.indices  # one per row
    a1 = np.asarray(a[r1, c]).ravel()
    a2 = np.asarray(a[r2, c]).ravel()
    v = (sp.diags(a2) @ a[r1] - sp.diags(a1) @ a[r2]).tocsr()
    v.eliminate_zeros()
    forced = p.forced.astype(float)
    lam = (v @ sp.diags(forced)).tocsr()
    lam.eliminate_zeros()
    # F must meet both relations beyond c, else one relation alone is the aggregation.
    f1 = (pattern[r1] @ forced) - forced[c] >= 1
    f2 = (pattern[r2] @ forced) - forced[c] >= 1
    keep = f1 & f2
    keep_idx = np.flatnonzero(keep)
    if len(keep_idx) == 0:
        return []
    sensitive = _sensitive_rows(p, lam[keep_idx], p.table.unions)
    free = (~p.forced & p.allowed).astype(float)
    support = (abs(v[keep_idx[sensitive]]) @ sp.diags(free)).tocsr()
    support.eliminate_zeros()
    rows = np.split(support.indices, support.indptr[1:-1])
    # An empty row would make the master infeasible: left to the audit, as no cut.
    return [idx.copy() for idx in rows if len(idx)]


def _pattern_no_good(p: SearchProblem, y: np.ndarray):
    """The row that cuts off exactly the pattern ``y`` (``y = 1`` on sensitive and forced
    cells): another allowed cell suppressed or a free cell of ``y`` published,
    ``sum_{j not in y} y_j + sum_{j in y, free} (1 - y_j) >= 1``."""
    outside = np.flatnonzero(~y & p.allowed)
    members = np.flatnonzero(y & ~p.forced)
    idx = np.concatenate([outside, members])
    coef = np.concatenate([np.ones(len(outside)), -np.ones(len(members))])
    return idx, coef, 1.0 - len(members)


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
