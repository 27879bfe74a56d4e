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
import os
import re
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypedDict, TypeVar

import highspy
import numpy as np
import scipy.sparse as sp

#: HiGHS's default primal/dual feasibility tolerance: the relative precision of any value
#: read off a solution.
FEASIBILITY_RTOL = 1e-7
#: HiGHS's infinity (its ``infinite_bound`` and ``infinite_cost`` options): a bound or cost
#: of this size or more is read as infinite, so a number of a model meant to be finite must
#: stay below it.
INFINITE_BOUND = 1e20


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
#: HiGHS's ``simplex_strategy`` for the dual simplex (``4`` is the primal).
DUAL_SIMPLEX = 1


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
    # The work clock's limits (an LP's simplex iterations, a MIP's meter, which interrupts
    # it), a caller's node or improving-solution limit of a MIP: the run stopped short of
    # its end, with a point or not (:func:`stopped_by` says which limit).
    _MS.kIterationLimit: Outcome.TIME_LIMIT,
    _MS.kSolutionLimit: Outcome.TIME_LIMIT,
    _MS.kInterrupt: Outcome.TIME_LIMIT,
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
        meter = getattr(h, "sdc_meter", None)
        if meter is not None:  # left from a run on a work clock
            meter.start(_NO_LIMIT)

    def spend(self, h: highspy.Highs) -> None:
        """Account for ``h``'s last run (nothing: the wall clock runs by itself)."""

    def affords(self, deadline: float, iterations: float) -> bool:
        """Whether a run that cannot stop before ``iterations`` simplex iterations (a MIP's
        root LP) fits before ``deadline``: always on the wall clock, where HiGHS checks
        its time limit within an LP too."""
        return self.now() < deadline

    def refuses(self, h: highspy.Highs, remaining: float) -> str | None:
        """The limit, in words, that leaves no room for a run of ``h`` with ``remaining``
        units left, or ``None``."""
        return "time limit" if remaining <= 0 else None


class WorkClock(Clock):
    """Deterministic mode (issue 16 part 5): time measured in solver work, so that the same
    request stops at the same point, and gives the same pattern, on a fast machine and a
    slow one.

    A run costs one unit plus its simplex iterations (a MIP's: those of all its LPs), and
    may use at most what is left: an LP by HiGHS's simplex iteration limit, a MIP (to
    which HiGHS applies no iteration limit) by a :class:`_MipMeter`, which interrupts it at
    the first check of its limits where its work would pass what is left. Between runs
    the searches do bounded Python work per LP, so the budget bounds the whole search.
    ``wall_deadline`` still holds (a ``time.perf_counter()`` instant): past it every
    deadline is reached at once and :attr:`wall_hit` tells the result that it depends on
    the machine after all.
    """

    second = 20_000.0  # about a second of simplex iterations on the LPs of this service
    #: A MIP node's iterations before the meter has seen the MIP's own rate.
    NODE_UNITS = 200

    def __init__(self, wall_deadline: float):
        self.used = 0.0
        self.wall_deadline = wall_deadline
        self.wall_hit = False
        #: The most simplex iterations a MIP of this search ran without a check of its
        #: limits (:class:`_MipMeter`).
        self.stride = 0.0

    def now(self) -> float:
        if time.perf_counter() >= self.wall_deadline:
            self.wall_hit = True
            return math.inf
        return self.used

    def limit(self, h: highspy.Highs, remaining: float) -> None:
        time_limit(h, self.wall_deadline - time.perf_counter())
        units = int(min(max(remaining - 1.0, 0.0), _NO_LIMIT))
        h.setOptionValue("simplex_iteration_limit", units)
        h.setOptionValue("mip_max_nodes", _NO_LIMIT)
        if getattr(h, "sdc_mip", False):
            _MipMeter.of(h).start(units)

    def spend(self, h: highspy.Highs) -> None:
        iterations = max(int(h.getInfo().simplex_iteration_count), 0)
        self.used += 1.0 + iterations
        # A run HiGHS stopped at the wall deadline (its only time limit here, :meth:`limit`)
        # is the wall clock's doing, even if no reading of :meth:`now` comes after it:
        # the result then said "work limit" (tests/test_deterministic.py, one run in three).
        if h.getModelStatus() == _MS.kTimeLimit or time.perf_counter() >= self.wall_deadline:
            self.wall_hit = True
        meter = getattr(h, "sdc_meter", None)
        if meter is not None:
            self.stride = max(self.stride, meter.stride, iterations - meter.iterations)

    def affords(self, deadline: float, iterations: float) -> bool:
        # Nor a MIP's longest unchecked stretch so far (refuses).
        return self.now() + 1.0 + max(iterations, self.stride) <= deadline

    def refuses(self, h: highspy.Highs, remaining: float) -> str | None:
        # A MIP is not started with less left than the longest stretch a MIP of this
        # search ran between two checks of its limits: it could not be stopped within
        # one (30x30, 70,000 units: an aggregation MIP started with 1,213 left took 5,988
        # before its first check).
        if remaining <= 0 or (getattr(h, "sdc_mip", False) and remaining < 1.0 + self.stride):
            return "time limit" if self.wall_hit else "work limit"
        return None


#: A line of HiGHS's MIP progress table as the time-free log prints it: an optional
#: source letter, nodes processed, nodes queued, leaves, explored share, ..., and last the
#: LP iterations (followed by the time unless ``timeless_log`` took it out).
_PROGRESS = re.compile(r"^\s*[A-Za-z]?\s+(\d+)\s+\d+\s+\d+\s+[\d.]+%.*?\s(\d+)(?:\s+[\d.]+s)?\s*$")


class _MipMeter:
    """A MIP's work while it runs, so that the work clock can stop it (deterministic mode).

    HiGHS 1.16 applies no iteration limit to a MIP's LPs, and highspy's callback data carry
    no iteration count in a MIP; HiGHS's progress lines do (nodes processed, LP iterations
    so far). The meter reads them through the logging callback (the log time-free and
    unthrottled, not printed). At each check of the MIP's limits (the interrupt callback,
    where HiGHS checks its own node and time limits) it estimates the work as the last
    line's iterations, plus for each node processed since the tree's iterations per node
    (:attr:`WorkClock.NODE_UNITS` until the tree has :attr:`RATE_NODES`), plus for each
    check since that line the iterations per check between the last two lines
    (:attr:`CHECK_UNITS` until known), plus the growth between the last two lines (what
    HiGHS may do before its next check); it interrupts the run when that reaches the
    budget, and within the tree, where HiGHS checks its node limit but calls no callback,
    turns what is left into that node limit. Every input is a count, so the run stops at
    the same point on any machine; the clock charges the iterations HiGHS reports. What
    HiGHS does between two checks (its root LP, a primal heuristic) cannot be stopped: a
    caller that knows how much such a step takes asks :func:`affords` first."""

    #: Nodes on a progress line before the tree's own iterations per node are used.
    RATE_NODES = 10
    #: Iterations per check of the limits before the run's own rate is known (an
    #: aggregation MIP of 30x30 ran 6,873 iterations over about 70 checks of its root
    #: without printing a line).
    CHECK_UNITS = 100

    def __init__(self, h: highspy.Highs):
        h.setOptionValue("output_flag", True)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("mip_min_logging_interval", 0.0)
        h.setOptionValue("timeless_log", True)
        h.cbLogging.subscribe(self._line)
        h.cbMipInterrupt.subscribe(self._check)
        self.h = weakref.proxy(h)  # h holds the meter
        self.start(_NO_LIMIT)

    @classmethod
    def of(cls, h: highspy.Highs) -> _MipMeter:
        meter = getattr(h, "sdc_meter", None)
        if meter is None:
            meter = cls(h)
            h.sdc_meter = meter  # type: ignore[attr-defined]
        return meter

    def start(self, budget: int) -> None:
        """A new run of at most ``budget`` iterations."""
        self.budget = budget
        self.iterations = self.line_nodes = self.root = self.step = self.stride = 0
        self.checks = 0  # since the last line
        self.per_check = float(self.CHECK_UNITS)
        #: The meter has set HiGHS's node limit: reaching it is reaching the budget.
        self.capped = False

    def _line(self, e) -> None:
        found = _PROGRESS.match(e.message)
        if found is None:
            return
        nodes, iterations = int(found[1]), int(found[2])
        if iterations > self.iterations:
            self.step = iterations - self.iterations
            self.stride = max(self.stride, self.step)
            if self.checks:
                self.per_check = self.step / self.checks
        self.checks = 0
        self.line_nodes, self.iterations = nodes, iterations
        if self.line_nodes == 0:
            self.root = self.iterations

    def _check(self, e) -> None:
        nodes = max(int(e.data_out.mip_node_count) - self.line_nodes, 0)
        # The tree's first nodes cost more (strong branching starts): its own rate only
        # once it has a few.
        rate = (
            (self.iterations - self.root) / self.line_nodes
            if self.line_nodes >= self.RATE_NODES
            else WorkClock.NODE_UNITS
        )
        # Checks without a line in between (root cutting rounds print none) cost too.
        estimate = self.iterations + nodes * rate + self.checks * self.per_check + self.step
        self.checks += 1
        if estimate >= self.budget:
            e.interrupt()
            return
        # Within a plunge of the tree HiGHS checks its node limit but calls no callback
        # (a check at 1 node, the next at 201): the nodes the budget still pays for become
        # that limit, halved since HiGHS counts a plunge's nodes so (limits of 5, 30 and
        # 100 nodes set here stopped runs at 9, 59 and 199).
        more = int((self.budget - estimate) / max(rate, 1.0) / 2)
        self.h.setOptionValue("mip_max_nodes", int(e.data_out.mip_node_count) + max(more, 1))
        self.capped = True


_WALL = Clock()
_current: contextvars.ContextVar[Clock] = contextvars.ContextVar("sdc_clock", default=_WALL)


def affords(deadline: float, iterations: float) -> bool:
    """Whether the current clock affords a run that cannot stop before ``iterations``
    simplex iterations before ``deadline`` (:meth:`Clock.affords`)."""
    return _current.get().affords(deadline, iterations)


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
    ``options`` are HiGHS options set before the model is passed (e.g. ``**WARM_PRIMAL``);
    ``threads`` defaults to :func:`scheduler_threads`.
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
    h.setOptionValue("threads", options.pop("threads", None) or scheduler_threads())
    for name, value in options.items():
        h.setOptionValue(name, value)
    # HiGHS refuses a model holding a number outside its range (a matrix entry of its
    # large_matrix_value, 1e15, or more): nothing is loaded, and a run ends with the
    # status of an empty model (:func:`describe` says why).
    refused = h.passModel(lp) == highspy.HighsStatus.kError
    h.sdc_refused_model = refused  # type: ignore[attr-defined]
    # A MIP's time limit is per run, an LP's over the object's runs (time_limit).
    h.sdc_mip = integer is not None and bool(np.asarray(integer, bool).any())  # type: ignore[attr-defined]
    return h


@functools.cache
def scheduler_threads() -> int:
    """HiGHS's ``threads`` option for every model: the count of its process-wide task
    scheduler, given explicitly.

    With the default (0) HiGHS works the count out again on every run, about 35 us: half
    the time of a run of a one-column LP, and 3-8% of the fast method's time on the
    benchmark's tables, whose LPs are mostly small (seed 1, back to back, the same
    patterns: 60x60 hier 0.97x, 100x100 hier 0.94x, 10x10x5 0.93x, 20x20x10 0.92x).
    The scheduler is made by the first run in the process, with as many threads as the
    machine has cores when the count is 0; a run asking for another count fails (status
    "Not Set"). So the cores' count is tried once on a one-column LP, and if the scheduler
    was made with another count (by a caller's own HiGHS run), 0 is kept: slower, never
    wrong."""
    cores = os.cpu_count() or 1
    h = model([1.0], [0.0], [1.0], sp.csc_matrix((0, 1)), [], [], threads=cores)
    h.run()
    return cores if h.getModelStatus() == _MS.kOptimal else 0


def run(h: highspy.Highs, deadline: float) -> Outcome:
    """Solve ``h`` until at most ``deadline`` on the current clock (:func:`now`).

    Past the deadline nothing is run and the outcome is ``TIME_LIMIT``, as for a run that
    reaches it (on a :class:`WorkClock`: its iteration limit or its MIP meter; nor is a
    MIP started there with less left than it could run unchecked, :meth:`WorkClock.refuses`);
    :func:`stopped_by` names the limit."""
    c = _current.get()
    remaining = deadline - c.now()
    refused = c.refuses(h, remaining)
    h.sdc_refused = refused  # type: ignore[attr-defined]
    if refused is not None:
        return Outcome.TIME_LIMIT
    c.limit(h, remaining)
    h.run()
    c.spend(h)
    return outcome(h)


def outcome(h: highspy.Highs) -> Outcome:
    """The last run's HiGHS model status as an :class:`Outcome` (anything unexpected, such
    as a numerical failure, is ``ERROR``; :func:`describe` words it)."""
    return _OUTCOMES.get(h.getModelStatus(), Outcome.ERROR)


def stopped_by(h: highspy.Highs) -> str | None:
    """Which limit stopped ``h``'s last run, in words for messages: ``"time limit"``,
    ``"work limit"`` (the work clock's: an LP's iteration limit, a MIP's meter),
    ``"node limit"``, ``"solution limit"`` (a MIP's ``mip_max_improving_sols``: it stopped
    at the point it was asked for), or ``None`` when no limit stopped it. A run that
    :func:`run` did not start names the limit that left no room for it."""
    refused = getattr(h, "sdc_refused", None)
    if refused is not None:
        return refused
    status = h.getModelStatus()
    if status == _MS.kTimeLimit:
        return "time limit"
    if status in (_MS.kIterationLimit, _MS.kInterrupt):
        return "work limit"
    if status == _MS.kSolutionLimit:
        if h.getInfo().mip_node_count < _option(h, "mip_max_nodes"):
            return "solution limit"
        meter = getattr(h, "sdc_meter", None)
        return "work limit" if meter is not None and meter.capped else "node limit"
    return None


def _option(h: highspy.Highs, name: str):
    """An option's value (highspy 1.16 returns ``(status, value)``, later ones the value)."""
    value = h.getOptionValue(name)
    return value[1] if isinstance(value, tuple) else value


def describe(h: highspy.Highs) -> str:
    """HiGHS's own words for the last run's status, for messages (a model HiGHS refused to
    load, :func:`model`, is said to be that rather than empty)."""
    if getattr(h, "sdc_refused_model", False):
        return "model refused (a number out of range)"
    return h.modelStatusToString(h.getModelStatus())


def has_point(h: highspy.Highs) -> bool:
    """Whether the last run left a feasible primal point (a MIP stopped early may). An
    LP's simplex stopped by a limit in its first phase, or a first-order run stopped
    early, leaves a point HiGHS marks infeasible (status 1): not a point of the model."""
    return h.getInfo().primal_solution_status == int(highspy.SolutionStatus.kSolutionStatusFeasible)


def reaches(reached, level, value=0.0, rtol: float = FEASIBILITY_RTOL):
    """Whether an attacker's ``reached`` deviation meets a protection ``level`` of a cell
    of ``value``, allowing the solver's relative precision (of the largest of 1, the level
    and the value), but never more than 1% of a positive level, as the audit's
    :func:`service.sdc.audit.check_protection` reads it: scaled by the value alone, the
    allowance exceeded a level of 1e-6 on a cell of 10, so the search met it with no
    complement at all and the audit, rightly, called the cell disclosed (a helper's
    probe, 2026-11-27). Array-friendly."""
    scale = np.maximum(np.maximum(1.0, np.abs(level)), np.abs(value))
    allowance = rtol * scale
    allowance = np.where(level > 0, np.minimum(allowance, np.abs(level) / 100.0), allowance)
    return reached >= level - allowance
