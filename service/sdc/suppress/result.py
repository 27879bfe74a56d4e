"""The result of a suppression call, and the final audit every returned pattern passes."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .. import highs
from ..audit import PatternAudit, audit_pattern
from .fast import UNSETTLED
from .lps import misses


@dataclass(frozen=True)
class SuppressionResult:
    """A suppression pattern and how it was found.

    Attributes
    ----------
    suppressed : numpy.ndarray of bool
        Primary and secondary suppressions (``None``-free: all False when no safe pattern).
    secondary : numpy.ndarray of bool
        Suppressed cells that are not sensitive.
    method : {"fast", "exact"}
    status : {"optimal", "feasible", "time_limit", "no_safe_pattern"}
        ``optimal``: exact and proven; ``feasible``: a safe pattern found with no limit
        reached (the fast method's; exact's when the only cheaper patterns left are ones
        whose aggregations could not be decided, ``message`` says so, with ``gap``);
        ``time_limit``: the time (or work) ran out, ``message`` names the limit. With a
        pattern (``safe``), exact stopped early and returns its best audited pattern with
        ``gap``; without one (``suppressed`` all False), no safe pattern was reached or
        certified in time and ``unprotected`` lists the sensitive cells left unprotected
        (``message`` says why): the table may well have a safe pattern.
        ``no_safe_pattern``: none exists within the caller's constraints, or the pattern
        found failed the audit, or cannot be certified however long the audit runs (hidden
        cells with common parts, :data:`service.sdc.aggregations.SHARED_PARTS`; an
        aggregation at a tie of a strict rule); ``message`` says why. From ``fast`` and
        ``exact`` only where hiding every cell allowed fails the audit too (or could not
        be certified in time): otherwise that pattern, thinned, is returned
        (``service.sdc.suppress._last_resort``).
    objective : float
        Cost of the pattern's suppressions (all suppressed cells).
    lower_bound : float
        Proven lower bound on the optimal cost (exact method), else nan.
    audit : PatternAudit
        The audit of the returned pattern.
    message : str
    seconds : float
    iterations : int
        Master solves (exact) or protection LPs (fast).
    unprotected : numpy.ndarray of int
        With no pattern returned: the sensitive cells not protected (or not proven
        protected in time) by the pattern the search had reached, sorted; empty otherwise.
    work : float or None
        Deterministic mode: the solver work the search used (units of
        :class:`service.sdc.highs.WorkClock`); ``None`` on the wall clock.
    proven_none : bool
        ``no_safe_pattern`` proven by the search itself: a sensitive cell whose level no
        deviation over every cell allowed meets (:func:`.fast.protect`), so the last
        resort (hiding every cell allowed) is not tried.
    """

    suppressed: np.ndarray
    secondary: np.ndarray
    method: str
    status: str
    objective: float
    lower_bound: float
    audit: PatternAudit | None
    message: str
    seconds: float
    iterations: int
    unprotected: np.ndarray | None = None
    work: float | None = None
    proven_none: bool = False

    def __post_init__(self):
        cells = () if self.unprotected is None else self.unprotected
        object.__setattr__(self, "unprotected", np.unique(np.asarray(cells, np.int64)))

    @property
    def gap(self) -> float:
        """Relative gap between the pattern's cost and the proven lower bound."""
        if not np.isfinite(self.lower_bound):
            return float("nan")
        return max(0.0, self.objective - self.lower_bound) / max(self.objective, 1e-12)

    @property
    def safe(self) -> bool:
        return self.audit is not None and self.audit.safe


def finish(
    p,
    att,
    y,
    status,
    message,
    lower_bound,
    iters,
    method,
    start,
    end,
    search_end=None,
    *,
    partial=None,
    unfinished=None,
    known=None,
    proven=None,
    proven_none=False,
) -> SuppressionResult:
    """The result: ``y`` returned only if it passed the full audit, run with the time left
    until ``end`` on the wall clock (or taken from ``known``, an audited ``(pattern,
    audit)``, for that same pattern; a safe ``known`` pattern is the fallback when ``y``
    fails).

    ``partial``: the fast method ran out protecting (``(pattern, requirements left)``, see
    :func:`protect`); the requirements left are checked against the partial pattern until
    ``search_end`` (on the search's clock; ``end`` when not given) to say which cells it
    leaves unprotected; in deterministic mode, whose search has spent its work by then, on
    the wall clock until ``end``, as the audit (the same LPs, so the same cells, unless
    the call's time runs out first). ``unfinished``: why the protection
    of ``y`` stopped short of the end; a ``y`` the audit then rejects is a time limit, not
    a failure of the table, unless the aggregation rounds ended by themselves
    (:data:`~service.sdc.suppress.fast.UNSETTLED`: they could add nothing more), which no
    time limit changes."""
    n = len(p.values)
    none = np.zeros(n, bool)

    def result(y, status, message, audit=None, unprotected=None):
        return SuppressionResult(
            y,
            y & ~p.sensitive,
            method,
            status,
            float(p.cost @ y),
            lower_bound,
            audit,
            message,
            time.perf_counter() - start,
            iters,
            unprotected,
        )

    if y is None and partial is None:
        return dataclasses.replace(result(none, status, message), proven_none=proven_none)
    if y is None:
        pattern, todo = partial
        deterministic = isinstance(highs.clock(), highs.WorkClock)
        p.deadline = end if search_end is None or deterministic else search_end
        short, unchecked = set(), set()
        with highs.wall_clock() if deterministic else contextlib.nullcontext():
            att.set_pattern(pattern)
            for i, sense, level in todo:
                if i in short or i in unchecked:
                    continue
                if highs.now() >= p.deadline:
                    # Out of time: not one LP more (each attack, though HiGHS refuses it at
                    # once, costs ~20 us of set-up: 10^6 sensitive cells took 20 s past
                    # the limit, a campaign's chain hierarchies, h51).
                    unchecked.add(i)
                    continue
                missed, outcome = misses(att, p, i, sense, level)
                if outcome != "optimal":
                    unchecked.add(i)
                elif missed is not None:
                    short.add(i)
        unchecked -= short
        cells = short | unchecked
        # Requirements are the sensitive cells' and those of cells hidden for a count
        # table's dominance conditions (problem.requirements), which are not sensitive:
        # counted apart (they were counted as sensitive cells, and a 3-D count table's
        # message read "protects -14 of 647 sensitive cells").
        sensitive = {i for i in cells if p.sensitive[i]}
        total = int(p.sensitive.sum())
        if cells:
            short_s, unchecked_s = len(short & sensitive), len(unchecked & sensitive)
            others = len(cells) - len(sensitive)
            return result(
                none,
                "time_limit",
                searched(
                    f"time limit reached before every sensitive cell was protected: the pattern "
                    f"reached protects {total - len(sensitive)} of {total} sensitive cells; "
                    f"{short_s} need further suppressions"
                    + (f" and {unchecked_s} could not be checked in time" if unchecked_s else "")
                    + " (see 'unprotected')"
                    + (
                        f"; {others} cell(s) hidden for seed 001's dominance conditions are not "
                        "yet protected either"
                        if others
                        else ""
                    )
                    + "; no pattern is returned; a longer time limit may find one"
                ),
                unprotected=sorted(sensitive),
            )
        # The search stopped at its deadline, but the pattern it had reached meets every
        # protection level: the audit (aggregations included) decides it.
        y, status = pattern, "feasible"
        unfinished = searched("time limit reached before the aggregations were protected")
    if known is not None and np.array_equal(known[0], y):
        audit = known[1]
    else:
        audit = audit_pattern(
            p.table, y, time_limit=max(end - time.perf_counter(), 1e-3), proven=proven
        )
    if audit.safe:
        if unfinished is not None:
            message = f"{unfinished}, but the audit proved the pattern safe"
        return result(y, status, message, audit)
    reasons = "; ".join(audit.reasons)
    # Uncertified for want of time only if the audit ran out of it: a group it left
    # undecided otherwise (hidden cells with common parts, aggregations.SHARED_PARTS; a
    # MIP point at a tie of a strict rule) no time limit decides, so that is no pattern.
    late = audit.verdict == "uncertified" and (
        audit.intervals.status == "time_limit"
        or (audit.aggregations is not None and audit.aggregations.out_of_time)
    )
    if known is not None and known[1].safe:
        # Never a pattern that did not pass; the audited incumbent did.
        return result(
            known[0],
            "time_limit" if late else "feasible",
            "the MIP's better pattern "
            + ("could not be certified in time" if late else f"did not pass the audit ({reasons})")
            + "; the audited pattern of the fast method is returned",
            known[1],
        )
    unprotected = unproven(p.sensitive, audit)
    if late:
        return result(
            none,
            "time_limit",
            "the audit reached its time limit certifying the pattern found: "
            f"its verdict is uncertified ({reasons}); no pattern is returned",
            audit,
            unprotected,
        )
    if unfinished is not None and audit.verdict == "unsafe":
        return result(
            none,
            "no_safe_pattern" if unfinished == UNSETTLED else "time_limit",
            f"{unfinished}: the pattern reached does not pass "
            f"the audit ({reasons}); no pattern is returned",
            audit,
            unprotected,
        )
    # Never a pattern that did not pass: the audit of the rejected one says why.
    return result(
        none,
        "no_safe_pattern",
        (
            "the pattern found cannot be certified: "
            if audit.verdict == "uncertified"
            else "the pattern found did not pass the audit: "
        )
        + reasons,
        audit,
        unprotected,
    )


_Result = TypeVar("_Result", bound=Any)


def searched(message: str) -> str:
    """A message of the search in the units of the clock it runs on: on a work clock that
    the wall clock did not stop, the search's deadline is the work limit. Audit reasons
    keep their words (the audit always runs on the wall clock)."""
    c = highs.clock()
    if isinstance(c, highs.WorkClock) and not c.wall_hit:
        return message.replace("time limit", "work limit")
    return message


def on_work_clock(
    search: Callable[[], _Result], work_limit: float, end: float, reword: bool = True
) -> _Result:
    """``search()`` in deterministic mode (issue 16 part 5): its deadlines read on a
    :class:`~service.sdc.highs.WorkClock` of ``work_limit`` units, ``end`` (a
    ``time.perf_counter()`` instant) still bounding the call. The result's messages,
    which speak of the search's deadline as a time limit, speak of work; a result the
    wall clock stopped says that it depends on the machine's speed. ``search`` returns a
    dataclass with ``message`` and ``work``. ``reword=False``: the search worded its
    messages itself (:func:`searched`), around audit reasons that speak of seconds."""
    clock = highs.WorkClock(wall_deadline=end)
    with highs.using(clock):
        result = search()
    if clock.wall_hit:
        message = (
            f"{result.message} (the time limit was reached before the work limit: this "
            "result depends on the machine's speed)"
        )
    elif reword:
        message = result.message.replace("time limit", "work limit")
    else:
        message = result.message
    if clock.used > work_limit:
        # HiGHS stops a MIP only at checks of its limits (WorkClock): said, not hidden.
        message = (
            f"{message} (the last solver run passed the work limit by "
            f"{clock.used - work_limit:g} units: a MIP can only be stopped between its steps)"
        )
    return dataclasses.replace(result, message=message, work=clock.used)


def unproven(sensitive: np.ndarray, audit: PatternAudit) -> list[int]:
    """The sensitive cells the audit does not prove protected: published, an interval too
    narrow or not certified, or in a sensitive or undecided aggregation (its sensitive
    members, or all its cells when it has none)."""
    iv, check = audit.intervals, audit.protection
    missed = set(audit.published_sensitive.tolist())
    if check is not None and audit.verdict != "infeasible":
        missed.update(iv.cells[check.sensitive & ~(iv.certified & check.protected)].tolist())
    if audit.aggregations is not None:
        for found in audit.aggregations.found:
            members = found.cells[sensitive[found.cells]]
            missed.update((members if members.size else found.cells).tolist())
        undecided = np.asarray(audit.aggregations.undecided, np.int64)
        missed.update(undecided[sensitive[undecided]].tolist())
    return sorted(missed)
