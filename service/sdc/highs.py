"""The one boundary to HiGHS: models from arrays, runs against a deadline, one status enum.

Every LP and MIP of the service (feasibility intervals, the attacker and cheapest-complement
LPs of suppression, the master MIP of the exact method, the aggregation check's screens and
MIP) is built by :func:`model` from numpy arrays and a sparse constraint matrix, run by
:func:`run` against a wall-clock deadline, and its outcome read as an :class:`Outcome`
(scipy's ``linprog``/``milp`` keep the same shape: one wrapper, one status map).

Clocks. Deadlines are read on the current :class:`Clock` (:func:`now`): wall-clock seconds,
or, in deterministic mode (:class:`WorkClock`, a request's ``work_limit``), units of solver
work, so that a search that runs out of budget stops at the same point on any machine
(issue 16). The audit always runs on the wall clock (:func:`wall_clock`).

Tolerances. HiGHS solves to a primal and dual feasibility tolerance of ``1e-7``; a
solution's reach is therefore only known to that relative precision. :func:`reaches` is the
one place that reads "the attacker reaches the protection level" with that allowance.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypedDict, TypeVar

import highspy
import numpy as np
import scipy.sparse as sp

#: HiGHS's default primal/dual feasibility tolerance: the relative precision of any value
#: read off a solution.
FEASIBILITY_RTOL = 1e-7


class _WarmPrimal(TypedDict):
    """The HiGHS options of :data:`WARM_PRIMAL`, typed so that ``**WARM_PRIMAL`` can only
    fill :func:`model`'s ``**options``."""

    presolve: str
    solver: str
    simplex_strategy: int


#: Options for a model solved many times with only costs (or column bounds) changing
#: between runs. Simplex without presolve reports infeasible and unbounded apart (presolve
#: may answer "unbounded or infeasible"); when only costs change, the last optimal basis
#: stays primal feasible, so primal simplex goes on from it where dual simplex would first
#: have to repair dual feasibility (about 15x slower on the interval LPs).
WARM_PRIMAL: _WarmPrimal = {"presolve": "off", "solver": "simplex", "simplex_strategy": 4}


class Outcome(enum.StrEnum):
    """How one solve ended, as the service reads it."""

    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    ERROR = "error"


_MS = highspy.HighsModelStatus
_OUTCOMES = {
    _MS.kOptimal: Outcome.OPTIMAL,
    _MS.kInfeasible: Outcome.INFEASIBLE,
    _MS.kUnbounded: Outcome.UNBOUNDED,
    _MS.kTimeLimit: Outcome.TIME_LIMIT,
    # The work clock's limits (simplex iterations of an LP, nodes of a MIP): its deadline.
    _MS.kIterationLimit: Outcome.TIME_LIMIT,
    _MS.kSolutionLimit: Outcome.TIME_LIMIT,
}

#: HiGHS's "no limit" for its iteration and node counts.
_NO_LIMIT = 2**31 - 1


def time_limit(h: highspy.Highs, seconds: float) -> None:
    """Let ``h``'s next run take at most ``seconds``. HiGHS 1.16 reads ``time_limit``
    differently for the two kinds of model (measured here: each object first run for 1 s,
    then under a 0.5 s limit): an LP compares it with the run time accumulated over every
    ``run()`` of the object (ERGO-Code/HiGHS#1331, #1477: the LP stopped at once), so the
    limit goes on top of the time spent; a MIP with the time of the current run (it ran
    0.5 s more), so it gets the seconds themselves. :func:`model` marks its MIPs."""
    if getattr(h, "sdc_mip", False):
        h.setOptionValue("time_limit", float(max(seconds, 0.0)))
    else:
        h.setOptionValue("time_limit", float(h.getRunTime() + max(seconds, 0.0)))


class Clock:
    """Wall-clock seconds (``time.perf_counter()``): what deadlines are measured in unless
    a search runs on a :class:`WorkClock`."""

    #: This clock's units in one second, to turn a search's fixed allowances (a few
    #: seconds of clean-up) into its own units.
    second = 1.0

    def now(self) -> float:
        return time.perf_counter()

    def limit(self, h: highspy.Highs, remaining: float) -> None:
        """Limit ``h``'s next run to ``remaining`` units (:func:`time_limit`)."""
        time_limit(h, remaining)
        h.setOptionValue("simplex_iteration_limit", _NO_LIMIT)
        h.setOptionValue("mip_max_nodes", _NO_LIMIT)

    def spend(self, h: highspy.Highs) -> None:
        """Account for ``h``'s last run (nothing: the wall clock runs by itself)."""


class WorkClock(Clock):
    """Deterministic mode (issue 16 part 5): time measured in solver work, so that the same
    request stops at the same point, and gives the same pattern, on a fast machine and a
    slow one.

    A run costs one unit plus its simplex iterations; a MIP's runs are limited by nodes
    (HiGHS does not limit a MIP's total iterations), at :data:`NODE_UNITS` units per node
    for the limit, and charged their iterations. Between runs the searches do bounded
    Python work per LP, so the budget bounds the whole search. ``wall_deadline`` still
    holds (a ``time.perf_counter()`` instant): past it every deadline is reached at once
    and :attr:`wall_hit` tells the result that it depends on the machine after all.
    """

    second = 20_000.0  # about a second of simplex iterations on the LPs of this service
    NODE_UNITS = 200

    def __init__(self, wall_deadline: float):
        self.used = 0.0
        self.wall_deadline = wall_deadline
        self.wall_hit = False

    def now(self) -> float:
        if time.perf_counter() >= self.wall_deadline:
            self.wall_hit = True
            return math.inf
        return self.used

    def limit(self, h: highspy.Highs, remaining: float) -> None:
        time_limit(h, self.wall_deadline - time.perf_counter())
        units = int(min(max(remaining - 1.0, 0.0), _NO_LIMIT))
        h.setOptionValue("simplex_iteration_limit", units)
        h.setOptionValue("mip_max_nodes", max(1, min(units // self.NODE_UNITS, _NO_LIMIT)))

    def spend(self, h: highspy.Highs) -> None:
        self.used += 1.0 + max(int(h.getInfo().simplex_iteration_count), 0)


_WALL = Clock()
_current: contextvars.ContextVar[Clock] = contextvars.ContextVar("sdc_clock", default=_WALL)


def now() -> float:
    """The current clock's reading (:class:`Clock`, :class:`WorkClock`)."""
    return _current.get().now()


def clock() -> Clock:
    return _current.get()


@contextlib.contextmanager
def using(c: Clock) -> Iterator[Clock]:
    """Deadlines inside the block are read on ``c``."""
    token = _current.set(c)
    try:
        yield c
    finally:
        _current.reset(token)


def wall_clock() -> contextlib.AbstractContextManager[Clock]:
    """The block runs on the wall clock (the audit: its time limit is always seconds)."""
    return using(_WALL)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def on_wall_clock(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` runs on the wall clock whatever clock its caller runs on: a function whose
    time limit is in seconds (the audit, the feasibility intervals)."""

    @functools.wraps(fn)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with wall_clock():
            return fn(*args, **kwargs)

    return wrapped


def model(
    cost,
    col_lower,
    col_upper,
    a,
    row_lower,
    row_upper,
    *,
    maximize: bool = False,
    integer=None,
    **options: Any,
) -> highspy.Highs:
    """A silent ``highspy.Highs`` holding ``min/max cost x`` s.t. ``row_lower <= a x <=
    row_upper``, ``col_lower <= x <= col_upper``, ``x_j`` integer where ``integer``.

    ``a`` may have no rows (shape ``(0, n)``); ``inf`` bounds are HiGHS's infinity.
    ``options`` are HiGHS options set before the model is passed (e.g. ``**WARM_PRIMAL``).
    """
    a = sp.csc_matrix(a, dtype=float)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = a.shape[1], a.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = np.asarray(col_lower, dtype=float)
    lp.col_upper_ = np.asarray(col_upper, dtype=float)
    lp.row_lower_ = np.asarray(row_lower, dtype=float)
    lp.row_upper_ = np.asarray(row_upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(float)
    if maximize:
        lp.sense_ = highspy.ObjSense.kMaximize
    if integer is not None:
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if v else highspy.HighsVarType.kContinuous
            for v in np.asarray(integer, bool)
        ]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for name, value in options.items():
        h.setOptionValue(name, value)
    h.passModel(lp)
    # A MIP's time limit is per run, an LP's over the object's runs (time_limit).
    h.sdc_mip = integer is not None and bool(np.asarray(integer, bool).any())  # type: ignore[attr-defined]
    return h


def run(h: highspy.Highs, deadline: float) -> Outcome:
    """Solve ``h`` until at most ``deadline`` on the current clock (:func:`now`).

    Past the deadline nothing is run and the outcome is ``TIME_LIMIT``, as for a run that
    reaches it (on a :class:`WorkClock`: its iteration or node limit)."""
    c = _current.get()
    remaining = deadline - c.now()
    if remaining <= 0:
        return Outcome.TIME_LIMIT
    c.limit(h, remaining)
    h.run()
    c.spend(h)
    return outcome(h)


def outcome(h: highspy.Highs) -> Outcome:
    """The last run's HiGHS model status as an :class:`Outcome` (anything unexpected, such
    as a numerical failure, is ``ERROR``; :func:`describe` words it)."""
    return _OUTCOMES.get(h.getModelStatus(), Outcome.ERROR)


def describe(h: highspy.Highs) -> str:
    """HiGHS's own words for the last run's status, for messages."""
    return h.modelStatusToString(h.getModelStatus())


def has_point(h: highspy.Highs) -> bool:
    """Whether the last run left a feasible primal point (a MIP stopped early may)."""
    return bool(h.getInfo().primal_solution_status)


def reaches(reached, level, value=0.0, rtol: float = FEASIBILITY_RTOL):
    """Whether an attacker's ``reached`` deviation meets a protection ``level`` of a cell
    of ``value``, allowing the solver's relative precision (of the largest of 1, the level
    and the value). Array-friendly."""
    scale = np.maximum(np.maximum(1.0, np.abs(level)), np.abs(value))
    return reached >= level - rtol * scale
