"""Rounding of tables to a base ``b``: controlled rounding and unbiased random rounding.

Seed 003 section A ("Perturbation methods include random rounding and controlled rounding")
and A.1 ("Controlled Rounding"): every cell is replaced by one of the two multiples of
``b`` adjacent to it; controlled rounding also keeps the table additive (rows, columns,
layers and every hierarchy level add up to their published margins) and minimises the
deviation from the original table.

Controlled rounding (:func:`controlled_rounding`). With ``f = b floor(x / b)`` and
``rest = x - f``, a cell that is a multiple of ``b`` (``rest = 0``) stays as it is
(zero-restricted rounding, the reading of seed 003 A.1 "adjacent to the corresponding
original values": a multiple has one adjacent multiple, itself); every other cell gets a
binary ``y`` and the rounded value ``r = f + b y``. Additivity ``A r = 0`` over the table's
relations becomes ``A_free y = -A f / b`` (integer right-hand sides; with an additivity
tolerance ``t`` the band ``|A r| <= t``). The deviation minimised is the total absolute
deviation over all cells, margins included, ``sum |r - x| = sum rest + sum y (b - 2
rest)``, linear in ``y`` (seed 003 A.1 allows "any of a class of standard measures of
deviation"; this is the L1 one).

Exactness. For a 2-D table with margins the relations matrix is a network matrix (every
cell sits in exactly one row relation and one column relation; negating the two grand-
total relations makes it totally unimodular), so the LP relaxation has integral vertices
and the LP optimum is an optimal controlled rounding: Cox and Ernst (1982), cited in seed
003 A.1; the same holds for sets of 2-D tables hierarchical along one dimension (Cox and
George 1989, ibid.). The LP is therefore solved first (dual simplex, a vertex) and its
solution accepted when integral; otherwise, as for 3-D tables, where "an exact network
solution does not exist" (seed 003 A.1), the MIP is solved under the time limit. Seed 003
A.1 mentions an iterative approximation by 2-D networks for 3-D; the MIP is chosen instead
as it is exact and says when no additive rounding exists (seed 003 A: "can generally be
solved for three-dimensional tables" — not always).

Random rounding (:func:`random_rounding`): each cell independently up with probability
``rest / b`` and down otherwise, so ``E[r] = x`` (unbiased); reproducible from a seed. The
rounded table is in general not additive (seed 003 A.1: controlled rounding "was developed
to overcome the shortcomings of ... random rounding").

Everything is vectorised over cells; every LP/MIP goes through :mod:`service.sdc.highs`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import highs
from .audit import FeasibilityIntervals, ProtectionCheck, check_protection, feasibility_intervals
from .errors import InputError
from .highs import Outcome
from .problem import TableProblem, relations_of

#: A value within this relative distance of a multiple of ``b`` is that multiple (float
#: input such as 0.1 * 30 must not be rounded as if it were 2.9999...).
MULTIPLE_RTOL = 1e-9
#: An LP solution within this of an integer is that integer.
INTEGRALITY_TOL = 1e-6


@dataclass(frozen=True)
class Rounding:
    """A rounded table and how it was reached.

    Attributes
    ----------
    rounded : numpy.ndarray of float
        The rounded values, every one a multiple of ``base`` (nan where no rounding was
        found: status ``infeasible``, ``time_limit`` without a point, ``error``).
    status : {"optimal", "feasible", "infeasible", "time_limit", "error"}
        ``optimal``: proven least deviation (or random rounding, which has no optimum);
        ``feasible``: an additive rounding found when the time ran out, not proven least;
        ``infeasible``: no additive rounding to ``base`` exists; ``time_limit``: none found
        in time; ``error``: the solver failed (see ``message``).
    solved_by : {"none", "lp", "mip", "random"}
        ``none``: every cell was a multiple already (or nothing to solve); ``lp``: the LP
        relaxation was integral (exact, see module notes); ``mip``: branch and bound.
    message : str
    seconds : float
    gap : float
        Relative MIP gap (0 when proven optimal, nan when not applicable).
    """

    rounded: np.ndarray
    status: str
    solved_by: str
    message: str
    seconds: float
    gap: float = float("nan")

    @property
    def found(self) -> bool:
        return self.status in ("optimal", "feasible")


def split(values, base: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(floor, rest, multiple)``: the multiple of ``base`` at or below each value, the
    rest ``x - floor`` in ``[0, base)``, and which values are multiples already (within
    :data:`MULTIPLE_RTOL`, snapped)."""
    x = np.asarray(values, dtype=float)
    if not (np.isfinite(base) and base > 0):
        raise InputError("base must be a finite number > 0", field="base")
    if not np.isfinite(x).all():
        cell = int(np.flatnonzero(~np.isfinite(x))[0])
        raise InputError("values must be finite", field="values", cell=cell)
    q = np.round(x / base)
    multiple = np.abs(x - q * base) <= MULTIPLE_RTOL * np.maximum(1.0, np.abs(x))
    floor = np.where(multiple, q * base, np.floor(x / base) * base)
    rest = np.where(multiple, 0.0, x - floor)
    return floor, rest, multiple


def controlled_rounding(
    relations, values, base: float, *, time_limit: float, tolerance: float = 0.0
) -> Rounding:
    """Zero-restricted controlled rounding of a table to ``base`` with least total
    absolute deviation (module notes; seed 003 A.1).

    Parameters
    ----------
    relations : Table, LinkedTables or scipy.sparse matrix
        ``A`` with ``A x = 0`` for an additive table (coefficients integer, as a table's
        are; a non-integral coefficient would let a rounded table break additivity by a
        non-multiple of ``base``, so it is refused).
    values : array_like, shape (n_cells,)
        The table, additive (within ``tolerance``).
    base : float
        ``b > 0``.
    time_limit : float
        Seconds for the LP and, when needed, the MIP.
    tolerance : float
        Additivity tolerance: the rounded table satisfies ``|A r| <= tolerance``.
    """
    start = time.perf_counter()
    deadline = start + time_limit
    a = relations_of(relations)
    n = a.shape[1]
    x = np.asarray(values, dtype=float)
    if x.shape != (n,):
        raise InputError(f"values must have one entry per cell ({n})", field="values")
    if not (time_limit > 0):
        raise InputError("time_limit must be > 0 seconds", field="time_limit")
    if a.nnz and not np.array_equal(a.data, np.round(a.data)):
        raise InputError(
            "controlled rounding needs integer relation coefficients", field="relations"
        )
    floor, rest, multiple = split(x, base)

    def done(status, by, message, rounded=None, gap=float("nan")):
        r = np.full(n, np.nan) if rounded is None else rounded
        return Rounding(r, status, by, message, time.perf_counter() - start, gap)

    free = np.flatnonzero(~multiple)
    # Right-hand side in units of b: A_free y = -A floor / b (within the tolerance band).
    target = -(a @ floor) / base
    band = tolerance / base
    row_lo = np.ceil(target - band - 1e-9)
    row_hi = np.floor(target + band + 1e-9)
    a_free = a[:, free].tocsr()
    touched = np.diff(a_free.indptr) > 0
    untouched_bad = ~touched & ((row_lo > 0) | (row_hi < 0))
    if untouched_bad.any():
        # A relation among multiples only that does not add up: the input is not additive.
        r = int(np.flatnonzero(untouched_bad)[0])
        return done(
            "infeasible",
            "none",
            f"relation {r} of cells that are multiples of the base does not add up",
        )
    if free.size == 0:
        return done(
            "optimal", "none", "every cell is a multiple of the base already", floor.copy(), 0.0
        )
    rows = np.flatnonzero(touched)
    a_y = a_free[rows]
    lo, hi = row_lo[rows], row_hi[rows]
    if (lo > hi).any():
        r = int(rows[np.flatnonzero(lo > hi)[0]])
        return done(
            "infeasible",
            "none",
            f"relation {r} cannot add up to a multiple of the base within the tolerance",
        )
    cost = base - 2.0 * rest[free]  # deviation of y = 1 less that of y = 0
    rounded_of = lambda y: floor + _scatter(n, free, base * y)

    # LP relaxation first: integral for 2-D tables (and 2-D hierarchical along one
    # dimension): Cox and Ernst 1982, Cox and George 1989 (seed 003 A.1).
    h = highs.model(cost, np.zeros(free.size), np.ones(free.size), a_y, lo, hi, solver="simplex")
    outcome = highs.run(h, deadline)
    if outcome is Outcome.INFEASIBLE:
        return done("infeasible", "lp", _NO_ROUNDING)
    if outcome is Outcome.TIME_LIMIT:
        return done("time_limit", "lp", f"time limit of {time_limit:g} s reached in the LP")
    if outcome is not Outcome.OPTIMAL:
        return done("error", "lp", f"the LP ended with HiGHS status {highs.describe(h)!r}")
    y = np.asarray(h.getSolution().col_value)
    if np.all(np.abs(y - np.round(y)) <= INTEGRALITY_TOL):
        return done(
            "optimal",
            "lp",
            "the LP relaxation was integral: least total deviation (network structure)",
            rounded_of(np.round(y)),
            0.0,
        )

    h = highs.model(
        cost,
        np.zeros(free.size),
        np.ones(free.size),
        a_y,
        lo,
        hi,
        integer=np.ones(free.size, bool),
    )
    outcome = highs.run(h, deadline)
    gap = float(h.getInfo().mip_gap) if highs.has_point(h) else float("nan")
    if outcome is Outcome.OPTIMAL:
        y = np.round(np.asarray(h.getSolution().col_value))
        return done("optimal", "mip", "least total deviation (MIP, proven)", rounded_of(y), 0.0)
    if outcome is Outcome.INFEASIBLE:
        return done("infeasible", "mip", _NO_ROUNDING)
    if outcome is Outcome.TIME_LIMIT:
        if highs.has_point(h):
            y = np.round(np.asarray(h.getSolution().col_value))
            return done(
                "feasible",
                "mip",
                f"time limit of {time_limit:g} s reached: an additive rounding, "
                f"not proven least (relative gap {gap:.3g})",
                rounded_of(y),
                gap,
            )
        return done(
            "time_limit",
            "mip",
            f"time limit of {time_limit:g} s reached before any additive rounding was found",
        )
    return done("error", "mip", f"the MIP ended with HiGHS status {highs.describe(h)!r}")


_NO_ROUNDING = (
    "no additive rounding to this base exists: no choice of adjacent multiples makes "
    "every relation add up (possible for 3-D tables and beyond, seed 003 A)"
)


def _scatter(n: int, at: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros(n)
    out[at] = v
    return out


def random_rounding(values, base: float, seed: int) -> Rounding:
    """Unbiased random rounding (seed 003 A): cell by cell, up to the next multiple of
    ``base`` with probability ``rest / base``, else down; multiples stay. ``E[r] = x``
    for every cell; the table is in general no longer additive. Reproducible: the same
    ``seed`` gives the same draws (numpy's PCG64)."""
    start = time.perf_counter()
    floor, rest, multiple = split(values, base)
    u = np.random.default_rng(seed).random(len(floor))
    up = ~multiple & (u < rest / base)
    rounded = floor + np.where(up, base, 0.0)
    return Rounding(
        rounded,
        "optimal",
        "random",
        "random rounding: each cell independently, unbiased; the table is in general not additive",
        time.perf_counter() - start,
    )


def broken_relations(relations, values, tolerance: float = 0.0) -> np.ndarray:
    """Relations ``|A r| > tolerance`` (relative round-off allowed): which do not add up."""
    a = relations_of(relations)
    r = np.asarray(values, dtype=float)
    scale = np.maximum(1.0, abs(a) @ np.abs(r))
    return np.flatnonzero(np.abs(a @ r) > tolerance + 1e-9 * scale)


@dataclass(frozen=True)
class RoundingAudit:
    """What an intruder learns about the sensitive cells from a rounded table.

    ``intervals`` are those of every cell (:func:`service.sdc.audit.feasibility_intervals`
    with no cell known exactly), ``protection`` the check of the sensitive ones
    (``cells``, aligned) against their protection levels."""

    cells: np.ndarray
    intervals: FeasibilityIntervals
    lower: np.ndarray
    upper: np.ndarray
    certified: np.ndarray
    protection: ProtectionCheck


def audit_rounding(
    problem: TableProblem, rounded, base: float, *, time_limit: float
) -> RoundingAudit:
    """Feasibility intervals of the sensitive cells given the rounded table.

    The intruder knows the true table is additive, lies within its a-priori bounds, and
    that each true value is within ``b`` of its rounded one: ``r - b < x < r + b`` (seed
    003 A: rounded values are adjacent multiples). That is the interval audit of seed 003
    B.2.a.ii with every cell unknown and bounds ``max(l, r - b) <= x <= min(u, r + b)``;
    the existing audit (:func:`feasibility_intervals`, :func:`check_protection`) is run on
    it. The bounds are closed: the intervals reported are the closures of the open sets
    (their inf and sup), the reading an interval audit uses for suppression as well.

    Counts (``problem.integral``) are whole numbers strictly inside ``(r - b, r + b)``:
    ``floor(r - b) + 1 <= x <= ceil(r + b) - 1``, and the intervals are those of
    whole-number tables. Closed real bounds called a count of 1 rounded to base 1
    protected by the interval [0, 2], though 1 is the only whole number in (0, 2) (a
    helper's campaign, 2026-11-27).
    """
    r = np.asarray(rounded, dtype=float)
    if problem.integral:
        # A round-off below a whole r - b must not let that whole number in.
        eps = 1e-9 * np.maximum(1.0, np.abs(r) + base)
        near, far = np.floor(r - base + eps) + 1.0, np.ceil(r + base - eps) - 1.0
    else:
        near, far = r - base, r + base
    lower = np.maximum(problem.lower_bounds, near)
    upper = np.minimum(problem.upper_bounds, far)
    every = np.ones(problem.n_cells, bool)
    # Every cell is unknown, so the values passed only seed the whole-number search: the
    # true table, a whole one within these bounds (the rounded one need not add up).
    iv = feasibility_intervals(
        problem.structure,
        problem.values if problem.integral else r,
        every,
        lower,
        upper,
        time_limit=time_limit,
        tolerance=problem.tolerance,
        integral=problem.integral,
        levels=(problem.sensitive, problem.upper_protection, problem.lower_protection),
    )
    cells = np.flatnonzero(problem.sensitive)
    lo, hi, ok = iv.lower[cells], iv.upper[cells], iv.certified[cells]
    check = check_protection(
        problem.values[cells],
        lo,
        hi,
        problem.upper_protection[cells],
        problem.lower_protection[cells],
        np.ones(cells.size, bool),
        ok,
    )
    return RoundingAudit(cells, iv, lo, hi, ok, check)
