"""Secondary cell suppression: the cheapest further suppressions that protect every
sensitive cell, and the audit that proves it.

Model (seed 000 "Secondary tabular data protection methods"; seed 003 B.2.b; Fischetti and
Salazar 2000 as cited there). A table ``A x = 0`` with true values ``a``, a-priori bounds
``lb <= x <= ub``, sensitive cells ``P`` with upper and lower protection levels ``UPL_i``,
``LPL_i``, and a cost ``c_j`` per cell. A pattern ``y in {0,1}^n`` protects cell ``i`` when
an intruder who knows the published cells can neither rule out ``x_i >= a_i + UPL_i`` nor
``x_i <= a_i - LPL_i``: with deviations ``z = x - a``,

    max / min  z_i   s.t.  A z = 0,  -y_j D_j <= z_j <= y_j U_j                 (attacker)

must reach ``UPL_i`` and ``-LPL_i``, where ``U_j = ub_j - a_j`` and ``D_j = a_j - lb_j`` are
the room a suppressed cell has. By LP duality the attacker's maximum for a given ``y`` is at
most ``sum_j y_j (U_j max(0, r_j) + D_j max(0, -r_j))`` for *any* row prices ``g``, with
``r = e_i - A^T g``; so every ``g`` yields the valid inequality (a Benders / "capacity" cut)

    sum_j (U_j max(0, r_j) + D_j max(0, -r_j)) y_j >= UPL_i,

and the optimal ``g`` of the attacker LP at a pattern that fails makes it violated there.

Methods
-------
``fast``
    Cells are protected one at a time, largest first (seed 003 B.2.b: "protecting the
    sensitive cells one at a time by a cheapest complementary set found by linear
    programming"): for cell ``i`` and each direction one LP finds a deviation ``z`` with
    ``z_i`` at the protection level whose support is cheapest, each unit of ``|z_j|``
    priced ``c_j / level`` (0 for cells already suppressed). The support is suppressed; the
    deviation stays feasible for the final pattern, so the cell stays protected. Then
    suppressions that turned out superfluous are removed, most expensive first, as long as
    every sensitive cell stays protected (time permitting); a cell is also swapped for
    cheaper complements: without contributions (no aggregations to protect after it) in a
    second pass, with them on hierarchical tables the dearest quarter of the candidates
    (:func:`.fast.remove_superfluous`).
``exact``
    The mixed-integer model of Fischetti and Salazar: ``min c y`` with ``y = 1`` on
    sensitive and forced cells, ``y = 0`` on forbidden ones, and the capacity cuts above
    added as the attacker LPs find them violated (never enumerated up front), strengthened
    for 0/1 patterns, first in cutting rounds on the LP relaxation (:mod:`.exact`).
    Started from the ``fast`` pattern as incumbent (found with the same time as under
    ``fast``, so never worse); the master's points are repaired into safe patterns by the
    fast method's steps. With a time or work limit it returns the best safe pattern and
    the proven gap; a warm start cut short ends as ``fast`` would (``time_limit``, never
    ``no_safe_pattern``).
``partial``
    Partial suppression (:mod:`.partial`; seed 000, Salazar 2003): not a pattern of crosses
    but the narrowest published intervals ``[a_j - d_j^-, a_j + d_j^+]``, a linear
    program solved with the same capacity cuts, the rooms ``y_j U_j`` replaced by the
    published ``d_j^+`` (and ``d_j^-``). Audited with the intervals as a-priori bounds.

``fast`` and ``exact`` then check the implicitly published unions
(:mod:`service.sdc.unions`, seed 002 sections 3-5); a sensitive union in relation ``k`` is
removed by suppressing one more cell of ``k`` (the cheapest allowed one for ``fast``; for
``exact`` a no-good cut "this exact set of suppressed cells in ``k`` is not allowed").
Every returned pattern has passed :func:`service.sdc.audit.audit_pattern`; one that does
not is never reported as a success.

Readings
--------
* Zero cells are never complements (seed 003 B.2: a zero cell protects nothing under
  subadditive rules, and its interval would reveal the zero); neither are cells the caller
  forbids. Sensitive zero cells are still suppressed. The exception: count tables under
  seed 001's extended rules (dominance conditions), where a published zero is itself
  what discloses ("everybody else in this row has Y = A") and a hidden one, free to be
  more than 0, is what escapes the condition. There zeros may be complements (since
  2026-11-27: before, 36 of 80 small random tables of this kind ended
  ``no_safe_pattern`` though hiding every cell was safe; with zeros 5 of 80, 2 with
  :func:`.problem.condition_requirements` reaching across hierarchy levels, and none
  with the second search of :func:`_searches`).
* A sensitive cell whose protection levels are both 0 (frequency rules without a range)
  must at least not be disclosed exactly: it is given an upper level of
  ``1e-4 max(1, |a_i|)``, above the audit's exactness tolerance. Moving downwards is as
  good: the audit asks only that its interval not be a point, and ``exact`` checks and
  cuts the interval's width (:func:`.lps.misses`), so its optimum is over either way.
* Protection levels beyond the a-priori range (``LPL_i > a_i - lb_i``) are capped at it:
  no pattern can leave an intruder less certain than the bounds already do.
* Unbounded room (``ub = inf``) is capped at ``2 max |a| + max UPL``: an intruder's room can
  only be larger, so the cap can make a pattern more cautious, never less safe; the audit
  is run with the true bounds.
"""

import dataclasses
import logging
import time

import numpy as np

from .. import highs
from ..aggregations import Deviations
from ..audit import audit_pattern
from ..errors import InputError
from ..problem import TableProblem
from ..table import LinkedTables
from .exact import exact
from .fast import (
    UNSETTLED,
    audited,
    log,
    protect,
    protect_aggregations,
    remove_superfluous,
    trim,
)
from .lps import Attacker, Cheapest
from .partial import PartialResult, partial, pattern_intervals
from .problem import COST_KINDS, cell_costs, prepare
from .result import SuppressionResult, finish, on_work_clock, searched

METHODS = ("fast", "exact", "partial")
#: Seconds of clean-up allowed per candidate cell, on top of half a second and a quarter
#: of the protection phase's time (see :func:`_search`).
CLEAN_UP_PER_CANDIDATE = 5e-4
#: Share of the time spent before it that the trim after the aggregation rounds gets, on
#: top of TRIM_PER_CANDIDATE seconds per candidate (see :func:`_search`).
TRIM_SHARE = 0.4
#: Seconds the trim gets per candidate cell, on top of TRIM_SHARE (see :func:`_search`).
TRIM_PER_CANDIDATE = 1e-3
#: Share of the time limit that exact's MIP leaves for the final audit at least (see
#: :func:`_search`).
EXACT_AUDIT_SHARE = 0.05
__all__ = [
    "COST_KINDS",
    "METHODS",
    "PartialResult",
    "SuppressionResult",
    "cell_costs",
    "suppress",
]


def suppress(
    problem: TableProblem,
    *,
    cost,
    forbidden=None,
    forced=None,
    method: str = "fast",
    time_limit: float = 60.0,
    work_limit: float | None = None,
) -> SuppressionResult:
    """Choose secondary suppressions that protect every sensitive cell.

    Parameters
    ----------
    problem : TableProblem
        The table: relations, true (additive) values, a-priori bounds of the intruder,
        sensitive cells with their protection levels (seed 000, table "Upper protection
        levels") and, for the aggregation check, the contributions (``unions``).
    cost : array_like
        Per-cell cost (:func:`cell_costs`).
    forbidden, forced : array_like of bool, optional
        Cells that may not be suppressed (key figures) / must be.
    method : {"fast", "exact", "partial"}
        ``partial`` returns a :class:`~.partial.PartialResult` (the published intervals).
    time_limit : float
        Seconds for the whole call, audit included.
    work_limit : float, optional
        Deterministic mode (issue 16 part 5): the search's budget in solver work (units of
        :class:`service.sdc.highs.WorkClock`: one per LP or MIP run plus its simplex
        iterations) instead of a share of ``time_limit``, so that the same call gives the
        same pattern on any machine. ``time_limit`` still bounds the whole call; when it
        is what stopped the search, the message says the result depends on the machine.
        The final audit always runs on the wall clock (its verdict does not depend on
        the speed of the machine unless it runs out of time, which makes it
        ``uncertified``).

    Returns
    -------
    SuppressionResult
    """
    start = time.perf_counter()
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; one of {', '.join(METHODS)}", field="method")
    if not time_limit > 0:
        raise InputError("time_limit must be > 0 seconds", field="time_limit")
    if work_limit is not None and not work_limit >= 1:
        raise InputError("work_limit must be at least 1", field="work_limit")
    end = start + time_limit
    if method == "partial":
        first = partial(
            problem,
            cost=cost,
            forbidden=forbidden,
            forced=forced,
            time_limit=time_limit,
            work_limit=work_limit,
        )
        which = _conditions_left(problem, first)
        left = end - time.perf_counter()
        result: SuppressionResult = first
        if which is not None and left > 0:
            again = partial(
                problem,
                cost=cost,
                forbidden=forbidden,
                forced=forced,
                time_limit=left,
                work_limit=None if work_limit is None else max(work_limit - (first.work or 0), 1),
                escaped=which,
            )
            result = _second_search(
                dataclasses.replace(again, seconds=time.perf_counter() - start),
                first,
                CONDITIONS_RETRY,
            )
        return _intervals_of_a_pattern(
            problem, cost, forbidden, forced, start, end, work_limit, result
        )
    if work_limit is None:
        return _searches(problem, cost, forbidden, forced, method, start, end, time_limit, 0.25)
    # The search's deadlines in work units; the audit, on the wall clock, gets whatever is
    # left of the time limit (no share of the work budget is kept for it).
    return on_work_clock(
        lambda: _searches(problem, cost, forbidden, forced, method, start, end, work_limit, 0.0),
        work_limit,
        end,
        reword=False,
    )


def _searches(problem, cost, forbidden, forced, method, start, end, budget, audit_share):
    """:func:`_search`, and once more where its pattern failed the audit for seed 001's
    dominance conditions (count tables): with the supports of
    :func:`.problem.condition_supports` forced for the conditions of the cells left
    unprotected, in the budget left. The first search raises one cell of each
    condition's rest (:func:`.problem.condition_requirements`), which another hidden
    cell of the rest can cancel; the second forces a deviation of the whole rest. On 40
    small random count tables (2-D with a key hierarchy and 3-D, either ``zero_cells``)
    fast and exact then protect all 40 (before: 35 and 35), the others' patterns
    unchanged.

    Otherwise, on linked tables forming a cycle, whose audit knows more than the search's
    relations (the non-negative parts of their cover table), where the audit refused
    the pattern found (unsafe): up to three more searches asking the cells it left
    unprotected :data:`ESCALATIONS` times their levels, the audit's levels unchanged (8
    of 40 random cyclic sets of 2-3 codes per dimension ended no_safe_pattern under
    fast, 6 under exact; 3 and 3 with these searches).

    Last, where no search found a safe pattern, :func:`_last_resort`."""
    clock = highs.clock()
    origin = clock.now()
    result = _search(problem, cost, forbidden, forced, method, start, end, budget, audit_share)
    which = _conditions_left(problem, result)
    refused = result.audit is not None and result.audit.verdict == "unsafe"
    cyclic = isinstance(problem.structure, LinkedTables) and not problem.structure.acyclic
    if which is not None:
        left = origin + budget - clock.now()
        if left > 0:
            again = _search(
                problem, cost, forbidden, forced, method, start, end, left, audit_share, which
            )
            result = _second_search(again, result, CONDITIONS_RETRY)
    elif result.status == "no_safe_pattern" and refused and cyclic:
        for factor in ESCALATIONS:
            left = origin + budget - clock.now()
            if not left > 0:
                break
            escalate = (result.unprotected, factor)
            again = _search(
                problem, cost, forbidden, forced, method, start, end, left, audit_share,
                escalate=escalate,
            )  # fmt: skip
            if again.safe:
                return _second_search(again, result, ESCALATED.format(factor=factor))
    return _last_resort(problem, cost, forbidden, forced, method, start, end, result)


def _intervals_of_a_pattern(problem, cost, forbidden, forced, start, end, work_limit, result):
    """Method ``partial``'s ``result`` unless it is ``no_safe_pattern``; then, with the
    time left, the fast method's pattern (its last resort included) with each suppressed
    cell's certified feasibility interval published (:func:`.partial.pattern_intervals`:
    what the intruder computes anyway, so the pattern stays safe; audited again with them
    as bounds), as ``feasible``: safe intervals, not the narrowest. The partial method's
    LP finds the narrowest intervals over the relations, while the audit knows more (the
    whole-number intervals of count tables, seed 001's dominance conditions): on 40 small
    random count tables under the extended rules 5 ended ``no_safe_pattern``, though
    hiding every cell was safe (2026-11-27). In deterministic mode the fast method gets
    the work left of ``work_limit``."""
    left = end - time.perf_counter()
    if result.status != "no_safe_pattern" or not left > 0:
        return result
    work = None if work_limit is None else max(work_limit - (result.work or 0.0), 1.0)
    found = suppress(
        problem, cost=cost, forbidden=forbidden, forced=forced, method="fast", time_limit=left,
        work_limit=work,
    )  # fmt: skip
    if not found.safe or found.audit is None:
        return result
    lower, upper, again = pattern_intervals(
        problem, found.suppressed, found.audit, end - time.perf_counter()
    )
    if not again.safe:
        return result
    shown = found.suppressed
    x = problem.values
    lower, upper = np.where(shown, lower, x), np.where(shown, upper, x)
    # Widths as the partial method counts them: an unbounded side as the search's room.
    p = prepare(problem, cost, forbidden, forced, highs.now())
    widths = np.minimum(upper - x, p.room_up) + np.minimum(x - lower, p.room_down)
    return PartialResult(
        shown,
        shown & ~problem.sensitive,
        "partial",
        "feasible",
        float(p.cost @ widths),
        np.nan,
        again,
        f"{result.message}; instead the fast method's pattern was found and each suppressed "
        "cell's feasibility interval published (safe intervals, not the narrowest)",
        time.perf_counter() - start,
        result.iterations + found.iterations,
        work=None if result.work is None else result.work + (found.work or 0.0),
        published_lower=lower,
        published_upper=upper,
        width=float(widths.sum()),
    )


def _last_resort(problem, cost, forbidden, forced, method, start, end, result):
    """``result`` unless it is ``no_safe_pattern``; then the pattern that hides every cell
    the search may hide (:func:`.problem.prepare`'s ``allowed``: all but forbidden cells
    and, outside seed 001's dominance conditions, zeros), audited, and if safe thinned:
    its cells not sensitive nor forced, dearest first, published again one at a time
    while the audit stays safe, until the call's ``end`` (wall clock). Returned as
    ``feasible``, its message saying how it was found; where hiding every cell allowed is
    not safe either, ``result`` with that said, so that ``no_safe_pattern`` always means
    what the reply claims: no pattern within the caller's constraints passes the audit.

    Why: the searches are heuristics over the search's relations, and the audit knows
    more (the cover table of cyclic linked tables, seed 001's dominance conditions): where
    a search's pattern failed and its retries too, a safe pattern could still exist (3
    of 40 random cyclic linked sets under fast and under exact, 2026-11-27), and the
    reply said there was none. The audit is the judge of every pattern returned, so
    what it accepts here is safe by the same proof as any other; it is only not lean."""
    if result.status != "no_safe_pattern" or result.proven_none:
        return result
    p = prepare(problem, cost, forbidden, forced, highs.now())
    y = p.allowed.copy()
    audit = audit_pattern(p.table, y, time_limit=max(end - time.perf_counter(), 1e-3))
    if not audit.safe:
        verdict = "cannot be certified" if audit.verdict == "uncertified" else "is not safe"
        why = f"{verdict} either (" + "; ".join(audit.reasons) + ")"
        return dataclasses.replace(
            result, message=f"{result.message}; hiding every cell allowed {why}"
        )
    kept = p.sensitive.copy()
    if forced is not None:
        kept |= np.asarray(forced, bool)
    candidates = np.flatnonzero(y & ~kept)
    published = tried = 0
    for j in candidates[np.argsort(-p.cost[candidates], kind="stable")].tolist():
        left = end - time.perf_counter()
        if not left > 0:
            break
        trial = y.copy()
        trial[j] = False
        judged = audit_pattern(p.table, trial, time_limit=left)
        tried += 1
        if judged.safe:
            y, audit, published = trial, judged, published + 1
    message = (
        f"{result.message}; instead every cell allowed was hidden and {published} of "
        f"{len(candidates)} cells neither sensitive nor forced were published again, one at a "
        "time while the audit stayed safe: a safe pattern, not a lean one"
    )
    if time.perf_counter() >= end:
        message += f" (the time limit ended that after {tried} of them)"
        clock = highs.clock()
        if isinstance(clock, highs.WorkClock):
            clock.wall_hit = True  # how far it got depends on the machine's speed
    return finish(
        p, None, y, "feasible", message, np.nan, result.iterations, method, start, end,
        known=(y, audit),
    )  # fmt: skip


#: Why a result came from a second search for dominance conditions (:func:`_searches`).
CONDITIONS_RETRY = (
    "a second search: the first one's pattern left seed 001's dominance rules firing, and "
    "the cells whose hiding lets each such condition be escaped were forced"
)
#: The factors by which :func:`_searches` asks more protection of the cells a refused
#: pattern left unprotected, one search each while time is left.
ESCALATIONS = (2.0, 4.0, 8.0)
ESCALATED = (
    "a further search: the first one's pattern failed the audit, which knows more than the "
    "search's relations (the non-negative parts of the linked tables' cover table), and "
    "the levels of the cells it left unprotected were asked {factor:g} times of the search"
)


def _conditions_left(problem: TableProblem, result: SuppressionResult) -> np.ndarray | None:
    """The dominance conditions of the cells ``result`` left unprotected, where it has no
    safe pattern (:func:`_searches`), or ``None``."""
    cond = problem.conditions
    if cond is None or result.status != "no_safe_pattern":
        return None
    which = np.flatnonzero(np.isin(cond.cell, np.asarray(result.unprotected, np.int64)))
    return which if which.size else None


def _second_search(
    again: SuppressionResult, first: SuppressionResult, why: str
) -> SuppressionResult:
    """``again`` (a search of a changed problem, ``why`` says how) if safe, else
    ``first``. Its optimum and bound are those of the changed problem, not proven for the
    table itself: said as found, not proven."""
    if not again.safe:
        return first
    if again.status == "optimal":
        message = f"the cheapest safe result with those cells hidden ({why}); not proven optimal"
    else:
        message = f"{again.message} ({why})"
    return dataclasses.replace(
        again,
        status="feasible" if again.status == "optimal" else again.status,
        lower_bound=np.nan,
        message=message,
    )


def _search(
    problem,
    cost,
    forbidden,
    forced,
    method,
    start,
    end,
    budget,
    audit_share,
    escaped=None,
    escalate=None,
):
    """:func:`suppress` on the current clock: ``budget`` is in its units (seconds, or work
    on a :class:`~service.sdc.highs.WorkClock`); ``end`` is the wall-clock end of the call.
    ``audit_share``: the part of ``budget`` the search leaves for the final audit;
    ``escaped``, ``escalate``: as in :func:`.problem.prepare` (:func:`_searches`)."""
    clock = highs.clock()
    origin = clock.now()
    # The final audit (every interval and every aggregation; it can take longer than
    # finding the pattern) keeps a quarter of the time: the search stops at
    # ``p.deadline``, and the audit gets all that is left.
    search_end = origin + budget
    deadline = origin + (1.0 - audit_share) * budget
    p = prepare(problem, cost, forbidden, forced, deadline, escaped, escalate)
    log.info(
        "suppress (%s): start, %d cells, %d sensitive cells, %d relations",
        method,
        len(p.values),
        int(p.sensitive.sum()),
        p.a.shape[0],
    )
    att = Attacker(p)
    cheapest = Cheapest(p)
    # Groups of suppressed cells proven safe, by their hidden cells: the final audit of
    # the same table need not prove them again.
    proven: set = set()
    y, status, message, iters, witness, unprotectable = protect(p, att, cheapest)
    lower_bound = np.nan

    def done(y, status, message, **how) -> SuppressionResult:
        if y is not None:
            log.info("audit: start, %d cells suppressed", int(y.sum()))
        if how.get("unfinished") is not None:
            how["unfinished"] = searched(how["unfinished"])
        result = finish(
            p,
            att,
            y,
            status,
            searched(message),
            lower_bound,
            iters,
            method,
            start,
            end,
            search_end,
            proven=proven,
            **how,
        )
        if log.isEnabledFor(logging.INFO):
            log.info(
                "suppress (%s): end, status %s, audit %s, %d cells suppressed, %.1f s",
                method,
                result.status,
                "-" if result.audit is None else result.audit.verdict,
                int(result.suppressed.sum()),
                result.seconds,
            )
        return result

    if y is None:
        partial = witness if status == "time_limit" else None
        return done(None, status, message, partial=partial, proven_none=unprotectable)
    # The clean-up re-solves attacks per candidate and can cost far more than finding
    # the pattern: it gets a quarter of the protection phase's time, half a second and
    # CLEAN_UP_PER_CANDIDATE per candidate, most expensive cells first, so the largest
    # savings come early, and at most half the search time left, which the protection of
    # the aggregations needs after it. On hierarchical 2-D tables a candidate costs
    # about 0.3-0.9 ms (boxes) and what it removes stays removed: the allowance per
    # candidate lets the clean-up finish up to about 130,000 cells (N = 330 of the scale
    # benchmark: 1.8% fewer secondary cells than with 2 s fixed, 8,876 of 8,876
    # candidates against 5,956). On 3-D and 4-D tables each candidate re-solves dozens
    # of attacks and the aggregation rounds add back about what a longer clean-up
    # removes: 8x6x5x4 ended at 2.41% of the value after 0.5 s of clean-up, 2.44% after
    # 2 s and 2.48% after all 333 candidates (5 s); on 20x20x10, 2 s more removed 1 cell.
    # Under "exact" it seeds the MIP, with the same time as under "fast": exact is never
    # worse than fast (issue 16 part 4).
    now = clock.now()
    spent = now - origin
    candidates = int((y & ~p.forced).sum())
    until = min(
        now + 0.5 * (p.deadline - now),
        origin + 0.8 * budget,
        origin + 1.25 * spent + (0.5 + CLEAN_UP_PER_CANDIDATE * candidates) * clock.second,
    )
    y = remove_superfluous(p, att, cheapest, y, witness, until)
    # The exact method's incumbent must be safe in every respect (see exact).
    # Kept deviations for the rounds' screen, and for the trim after them.
    pool = Deviations(p.table.structure, p.table.unions)
    protected, why = protect_aggregations(p, y, cheapest, proven=proven, deviations=pool)
    if protected is None:
        if not why.startswith("time limit") and why != UNSETTLED:
            return done(None, "no_safe_pattern", why)
        # Out of time, or the rounds could add nothing more (UNSETTLED): the audit may
        # still prove the pattern safe, else it names the cells left unprotected.
        return done(y, status, message, unfinished=why)
    # The trim (fast.trim) re-screens a group per candidate: TRIM_SHARE of the time spent
    # so far and TRIM_PER_CANDIDATE per candidate, at most half the time left. Its
    # savings come about evenly over its candidates (100x100 hier, seed 1: 0.907% of the
    # value after 238 of 940, 0.899% after 466, 0.893% after 724, 0.888% after all); a
    # full pass there takes about 1.7 s, and the box (1e-3 s a candidate; 2.5e-4 tried
    # a quarter of them) now holds nearly all of it: value before speed, as for the
    # clean-up. The trim leaves 3-D tables alone (one group of most hidden cells,
    # fast.TRIM_GROUP_CELLS).
    now = clock.now()
    candidates = int((protected & ~p.forced).sum())
    until = min(
        now + 0.5 * (p.deadline - now),
        now + TRIM_SHARE * (now - origin) + TRIM_PER_CANDIDATE * candidates * clock.second,
    )
    y = trim(p, att, cheapest, protected, witness, proven, pool, until)
    if method == "fast":
        y, audit = audited(p, cheapest, y, proven, pool, end)
        return done(y, status, message, known=(y, audit))
    # Exact: the incumbent is audited before the MIP, so a better pattern the MIP finds
    # but the audit cannot certify in time falls back to it; on the wall clock the MIP
    # stops early enough for an audit like this one (twice its time) or
    # EXACT_AUDIT_SHARE of the time limit, if longer. Not the quarter the fast method
    # keeps: every pattern exact accepts has had its aggregations proven on the way
    # (``proven``), so its final audit re-proves little (0.1 s on 60x60 hier, where the
    # quarter left 15 s of a 60 s limit unused).
    begun = time.perf_counter()
    # Audited and repaired as under "fast" (fast.audited): exact is never worse than fast,
    # and its warm start audited without the repairs failed where fast's passed (a
    # helper's campaign, 2026-11-27: holdings across cells, no_safe_pattern from exact).
    y, first = audited(p, cheapest, y, proven, pool, end)
    known = (y, first)
    if first.verdict == "uncertified":
        return done(y, status, message, known=known)
    if audit_share:
        p.deadline = search_end - max(
            EXACT_AUDIT_SHARE * budget, 2.0 * (time.perf_counter() - begun)
        )
    if clock.now() >= p.deadline:
        return done(
            y,
            "time_limit",
            "time limit reached before the MIP could start; the fast method's pattern is returned",
            known=known,
        )
    y, status, message, lower_bound, iters = exact(p, att, cheapest, y, proven=proven)
    return done(y, status, message, known=known)
