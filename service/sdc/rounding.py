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
import scipy.sparse as sp

from . import highs
from .audit import ProtectionCheck, check_protection, feasibility_intervals
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

    ``lower``, ``upper`` and ``certified`` are the sensitive cells' (``cells``, aligned)
    intervals as judged, ``protection`` their check against their protection levels,
    ``status`` and ``message`` how the audit ended (as :class:`FeasibilityIntervals`').
    Without ``least`` the intervals are those of the tables within ``b`` of the rounded
    one that add up (:func:`service.sdc.audit.feasibility_intervals`, every cell
    unknown). With ``least`` (a controlled rounding proven least) a cell is judged on the
    tables whose least rounding the published one is (:class:`LeastTables`): its interval
    is an inner one where those tables protect it, else the box's (outer) where that
    already does not, else the least tables' own ends; ``solves`` counts their solves."""

    cells: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    certified: np.ndarray
    protection: ProtectionCheck
    status: str
    message: str
    least: bool = False
    solves: int = 0


def audit_rounding(
    problem: TableProblem, rounded, base: float, *, time_limit: float, least: bool = False
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

    ``least``: the rounded table is a controlled rounding proven least (seed 003 A.1: it
    "can be chosen to minimize" a measure of deviation, here the total absolute one), and
    an intruder who knows the method keeps only the tables whose least rounding it is.
    Their intervals can be much narrower: a cell of 2 beside a 0, total 2, base 5, is
    published as 0, 0, 0 and the box gives the cell [0, 5], but from 2.5 up rounding the
    cell and the total up deviates less, so no table the intruder keeps has the cell above
    2.5 (a helper's campaign, 2026-11-28: an upper level of 2 was called met). The
    sensitive cells are then judged on :class:`LeastTables`: tables it finds that protect
    a cell prove it protected (inner intervals); the others get the box audit, which
    proves a cell not protected, and then the least tables' own ends, which decide.
    """
    r = np.asarray(rounded, dtype=float)
    start = time.perf_counter()
    deadline = start + time_limit
    lower, upper = rounding_box(problem, r, base)
    cells = np.flatnonzero(problem.sensitive)
    x = problem.values[cells]
    upl, lpl = problem.upper_protection[cells], problem.lower_protection[cells]
    judged = np.ones(cells.size, bool)
    found = None
    if least and cells.size:
        found = LeastTables(problem, r, base, lower, upper, cells, deadline)
        found.search(start + SEARCH_SHARE * time_limit)
        searched = time.perf_counter() - start
        judged = ~found.protected()
    lo, hi = np.full(cells.size, np.nan), np.full(cells.size, np.nan)
    ok = np.zeros(cells.size, bool)
    status, message = "optimal", "all intervals certified"
    if judged.any() and time.perf_counter() >= deadline:
        status, message = "time_limit", "the time limit was reached before the box intervals"
    elif judged.any():
        wanted = np.zeros(problem.n_cells, bool)
        wanted[cells[judged]] = True
        # Every cell is unknown, so the values passed only seed the whole-number search:
        # the true table, a whole one within these bounds (the rounded one need not add up).
        iv = feasibility_intervals(
            problem.structure,
            problem.values if problem.integral else r,
            np.ones(problem.n_cells, bool),
            lower,
            upper,
            time_limit=max(deadline - time.perf_counter(), 1e-6) * (BOX_SHARE if least else 1.0),
            tolerance=problem.tolerance,
            integral=problem.integral,
            levels=(problem.sensitive, problem.upper_protection, problem.lower_protection),
            # Only the cells judged here (every cell's intervals cost 12 times the LPs
            # on 60x60 hier).
            wanted=wanted,
        )
        lo, hi, ok = iv.lower[cells], iv.upper[cells], iv.certified[cells] & judged
        status, message = iv.status, iv.message
    if found is not None:
        box = check_protection(x, lo, hi, upl, lpl, True, ok).protected
        # A cell the box does not protect is not protected (its tables include the
        # intruder's): its box interval stands, an outer one, with that verdict.
        found.prove(judged & box)
        found.widen(max(searched, WIDEN_SECONDS))
        w_lo, w_hi, proven = found.intervals()
        lo, hi = np.where(judged & ~box, lo, w_lo), np.where(judged & ~box, hi, w_hi)
        ok = np.where(judged & ~box, ok, proven)
        if found.status != "optimal":
            status = found.status
        message = (
            f"judged on the tables whose least rounding the published one is: "
            f"{int((~judged).sum())} protected by tables found, "
            f"{int((judged & ~box & ok).sum())} not protected by the box (every table "
            f"within b), the others by the least tables' own ends ({found.solves} solves: "
            f"{found.message})" + ("" if status == "optimal" else f"; box: {message}")
        )
    check = check_protection(x, lo, hi, upl, lpl, np.ones(cells.size, bool), ok)
    solves = 0 if found is None else found.solves
    return RoundingAudit(cells, lo, hi, ok, check, status, message, least, solves)


#: With ``least``, the share of the time limit the search for least tables may take (it
#: ran the whole limit on a 48x48 count table, and every cell was left undecided).
SEARCH_SHARE = 0.4
#: With ``least``, the share of the time left that the box intervals may take (the rest
#: is for proving the verdicts :class:`LeastTables` did not find).
BOX_SHARE = 0.5


def rounding_box(problem: TableProblem, r: np.ndarray, base: float):
    """The bounds an intruder knows each cell within from its rounded value ``r``: ``(r -
    b, r + b)`` and the a-priori bounds, closed; for counts the whole numbers strictly
    inside (:func:`audit_rounding`)."""
    if problem.integral:
        # A round-off below a whole r - b must not let that whole number in.
        eps = 1e-9 * np.maximum(1.0, np.abs(r) + base)
        near, far = np.floor(r - base + eps) + 1.0, np.ceil(r + base - eps) - 1.0
    else:
        near, far = r - base, r + base
    return np.maximum(problem.lower_bounds, near), np.minimum(problem.upper_bounds, far)


#: The least time :meth:`LeastTables.widen` gets (else as long as the search took), so
#: that a small table's intervals do not depend on the machine's speed.
WIDEN_SECONDS = 1.0

#: The most a count cell's MIP in :meth:`LeastTables.prove` gets once the LP relaxation
#: proved its side short (only its interval's end is then at stake).
END_SECONDS = 1.0

#: The relative gap at which :meth:`LeastTables._box`'s MIP stops (a point, not an
#: optimum, is what it is for).
BOX_GAP = 0.02

#: Rounds of the joint search (:meth:`LeastTables.search`) while each protects more.
GOAL_ROUNDS = 4

#: HiGHS options of :class:`LeastTables`' solves: from scratch (presolve, dual simplex),
#: and by PDLP (its search and widening, class notes).
COLD = {"presolve": "on", "solver": "choose", "simplex_strategy": highs.DUAL_SIMPLEX}
FIRST_ORDER = {"presolve": "on", "solver": "pdlp", "simplex_strategy": highs.DUAL_SIMPLEX}


def _options(h, options) -> None:
    for name, value in options.items():
        h.setOptionValue(name, value)


class LeastTables:
    """Tables for which ``rounded`` (``R``) is a least zero-restricted controlled rounding
    to ``base`` (``b``), found to bound the sensitive ``cells`` from inside
    (:func:`audit_rounding`, ``least``).

    The rounding of a table ``x`` is the LP of :func:`controlled_rounding` in ``y`` (one
    per cell that is not a multiple): ``min sum c_k y_k`` over ``0 <= y <= 1`` and the
    relations, ``c_k = b - 2 rest_k``. ``R`` is its point ``y_k = 1`` where ``x_k < R_k``
    (``rest_k = x_k - R_k + b``), ``0`` where ``x_k > R_k`` (``rest_k = x_k - R_k``). By LP
    duality that point is optimal, hence a least rounding (it is whole), when some row
    multipliers ``u`` give every cell a reduced cost of the right sign, ``g = A' u``:
    ``b - 2 (x_k - R_k) - g_k >= 0`` where ``x_k > R_k`` and ``2 (R_k - x_k) - b - g_k <= 0``
    where ``x_k < R_k``. Asking both of every cell, ``|2 (x - R) + g| <= b``, asks more
    (a cell equal to its rounded value needs neither), so the tables ``x`` with some ``u``
    meeting it, within the box (``lower``, ``upper``) and adding up, are a subset of those
    the intruder keeps, and a polyhedron in ``(x, u)`` (with whole ``x`` for counts, a MIP).
    On 2-D tables least roundings are exactly the LP's optima (Cox and Ernst 1982, seed
    003 A.1), so it misses only tables that need the looser one-sided conditions; from 3-D
    on also those whose least rounding the LP does not prove. Relations held only within a
    tolerance of ``b`` or more take ``u = 0`` (a band's multiplier must be 0 off its ends;
    0 always qualifies), and ``|u|`` is capped (a subset again: the cap keeps the model
    well posed, as the relations of a table with all its margins are dependent).

    Every point of the model is such a table, so each cell's interval runs from the least
    to the greatest value over the points found and the true table (which the intruder
    keeps too). :meth:`search` looks for all cells at once: a round per side maximising
    ``sum min(s (x_j - X_j), level_j) / level_j`` over the cells that side still falls
    short for (a level of 0, which asks only that the cell not be pinned, as a small one),
    while rounds protect more cells. :meth:`prove` then solves, cell by cell, the model's
    own least or greatest value on the sides still short: short there, the cell is
    reported not protected, which errs, if at all, on the safe side (the model's tables
    are all the intruder keeps but for a few cells on the 2-D and 3-D tables of the
    campaign, and never gave another verdict than a brute force over every whole table).
    :meth:`widen` then pushes every cell towards its box's ends, as time allows, for
    intervals that say more than the levels asked.

    Counts (whole ``x``: a MIP in ``x`` and ``u``). The joint MIP is slow: on a 48x48 table
    of 2,401 cells its LP relaxation is fractional in 2,377 of them (``2 x + A'u`` at an
    end of ``[-b, b]`` puts ``x`` at halves) and HiGHS found no whole point in 30 s, even
    from the true table's. But any fixed multipliers ``u`` leave a box in ``x``, and whole
    tables in it that add up are points of the model (:meth:`_box`: on 2-D tables one
    LP, whole by total unimodularity). :meth:`search` takes them for ``u = 0`` (tables
    within ``b / 2`` of ``R``, cell by cell), the true table's ``u`` and the LP
    relaxation's (:meth:`_boxes`), and no MIP; :meth:`prove`, for a cell the box
    protects and these do not, bounds the model's end by the relaxation's (rounded
    inwards), tries the box of the relaxation's multipliers for it, and solves the MIP
    only where neither settles the side. The brute-force tests over whole 1-D and 2x2
    tables (``tests/test_rounding.py``) check the verdicts.

    The model is on the scale of the box: ``z = (x - o) / s`` with ``o = R``, ``s = b``
    (numbers of order 1 whatever the table's), for counts ``o = floor(R)`` and ``s = 1``,
    so that ``z`` is whole where ``x`` is. Where it is an LP, :meth:`search` solves it by
    PDLP (HiGHS's first-order method: the search's first LP took 0.4 s against the dual
    simplex's 5.7 s on 60x60 hier, 1.0 s against over 60 s on 100x100 hier), whose point
    joins the tables found only where HiGHS finds it feasible to its primal tolerance, as
    a simplex point (:func:`service.sdc.highs.has_point`): any point of the model is such
    a table, optimal or not, so verdicts rest on no optimum. Where PDLP leaves no such
    point, and for :meth:`prove` (whose verdict "short" needs the model's own end) and
    :meth:`widen` (slow to converge by PDLP), the simplex: from scratch with presolve and
    dual simplex (primal simplex without presolve declared the model of a 60x60 table
    infeasible), then primal simplex from the last basis, only costs and bounds changing;
    a solve that ends without an optimum is tried again from scratch.
    """

    def __init__(self, problem, rounded, base, lower, upper, cells, deadline):
        a = relations_of(problem.relations).tocsr()
        m, n = a.shape
        r = np.asarray(rounded, float)
        self.integral = integral = problem.integral
        o: np.ndarray = np.floor(r) if integral else r
        s = 1.0 if integral else float(base)
        self.o, self.s = o, s
        tol = problem.tolerance
        # In the rounding LP a relation is an equality when its band is under one
        # multiple of b: its multiplier is free (capped, see above); else 0.
        cap = 4.0 * (m + 1) * base / s if tol < base * (1.0 - 1e-9) else 0.0
        self.cells, self.n, self.deadline = cells, n, deadline
        k = cells.size
        self.x = problem.values.astype(float)
        self.upl = problem.upper_protection[cells]
        self.lpl = problem.lower_protection[cells]
        # The least move that unpins a cell of level 0: one count, or a thousandth of b.
        least_move = 1.0 if integral else 1e-3 * base
        self.target = (
            np.stack([np.maximum(self.upl, least_move), np.maximum(self.lpl, least_move)]) / s
        )
        z_true = (self.x[cells] - o[cells]) / s
        # Columns: z (n), u (m), t (k, the upper side's), t (k, the lower side's).
        pick = sp.csr_matrix((np.ones(k), (np.arange(k), cells)), shape=(k, n))
        ident = sp.identity(k, format="csr")
        rows = sp.vstack(
            [
                sp.hstack([a, sp.csr_matrix((m, m + 2 * k))]),
                sp.hstack(
                    [sp.identity(n, format="csr") * 2.0, a.T.tocsr(), sp.csr_matrix((n, 2 * k))]
                ),
                sp.hstack([-pick, sp.csr_matrix((k, m)), ident, sp.csr_matrix((k, k))]),
                sp.hstack([pick, sp.csr_matrix((k, m + k)), ident]),
            ]
        ).tocsr()
        shift = a @ o
        row_lo = np.concatenate(
            [(-tol - shift) / s, (-base - 2.0 * (o - r)) / s, np.full(2 * k, -np.inf)]
        )
        # t_up <= z_j - Z_j, t_down <= Z_j - z_j
        row_hi = np.concatenate([(tol - shift) / s, (base - 2.0 * (o - r)) / s, -z_true, z_true])
        self.n_cols = n + m + 2 * k
        self.t0 = n + m
        self.col_lo = np.concatenate([(lower - o) / s, np.full(m, -cap), np.full(2 * k, -np.inf)])
        self.col_hi = np.concatenate([(upper - o) / s, np.full(m, cap), np.full(2 * k, np.inf)])
        #: The model as an LP: the model itself for magnitudes, for counts its relaxation
        #: (whole ``z`` dropped), whose ends bound the MIP's and whose multipliers seed
        #: :meth:`_box`.
        self.h = highs.model(np.zeros(self.n_cols), self.col_lo, self.col_hi, rows, row_lo, row_hi)
        self.mip = None
        if integral:
            self.mip = highs.model(
                np.zeros(self.n_cols),
                self.col_lo,
                self.col_hi,
                rows,
                row_lo,
                row_hi,
                integer=np.arange(self.n_cols) < n,
            )
            # What :meth:`_box` needs: 2 z + A'u within the dual ends; the relations' ends,
            # whole as A z is (A integral), so the LP in z alone keeps whole vertices.
            self.a, self.cap = a, cap
            self.dual_lo, self.dual_hi = row_lo[m : m + n], row_hi[m : m + n]
            rel_lo, rel_hi = np.ceil(row_lo[:m] - 1e-9), np.floor(row_hi[:m] + 1e-9)
            self.rel_lo, self.rel_hi = rel_lo, rel_hi
            # The model with the multipliers fixed (they bound z): columns z and t.
            self.fixed = highs.model(
                np.zeros(n + 2 * k),
                np.zeros(n + 2 * k),
                np.zeros(n + 2 * k),
                sp.vstack(
                    [
                        sp.hstack([a, sp.csr_matrix((m, 2 * k))]),
                        sp.hstack([-pick, ident, sp.csr_matrix((k, k))]),
                        sp.hstack([pick, sp.csr_matrix((k, k)), ident]),
                    ]
                ).tocsr(),
                np.concatenate([rel_lo, np.full(2 * k, -np.inf)]),
                np.concatenate([rel_hi, -z_true, z_true]),
                integer=np.arange(n + 2 * k) < n,
                # Any whole point serves: closing a root gap of 0.66% took HiGHS's cuts
                # 17 s on 100x100 hier (counts), the root's LP 0.6 s.
                mip_rel_gap=BOX_GAP,
            )
        #: Later solves of the LP: only costs and bounds change (see the class notes).
        self.basis = False  # whether the last LP solve left a basis the next may go on from
        # :meth:`_true_multipliers`' answer, once known.
        self._true_u: np.ndarray | None = None
        self._true_known = False
        self.seen_lo, self.seen_hi = self.x.copy(), self.x.copy()
        self.solved = np.zeros((2, k), bool)  # the model's own end, per side (0 up, 1 down)
        self.solves = 0
        self.status, self.message = "optimal", "every verdict proven"

    def _check(self):
        c = self.cells
        return check_protection(
            self.x[c], self.seen_lo[c], self.seen_hi[c], self.upl, self.lpl, True, True
        )

    def protected(self) -> np.ndarray:
        """Cells the tables found protect."""
        return self._check().protected

    def _short(self) -> np.ndarray:
        """Per side (0 upper, 1 lower), the cells the tables found fall short for."""
        c = self._check()
        pinned = c.exact | c.too_narrow
        return np.stack([c.upper_too_close | pinned, c.lower_too_close | pinned])

    def _set(self, h, cost, t_hi) -> None:
        every = np.arange(self.n_cols, dtype=np.int32)
        h.changeColsCost(self.n_cols, every, cost)
        h.changeColsBounds(
            self.n_cols, every, self.col_lo, np.concatenate([self.col_hi[: self.t0], t_hi])
        )

    def _lp(self, cost, t_hi, *, first_order: bool = False) -> Outcome:
        """One solve of the LP (:attr:`h`) with these costs and ``t``'s upper bounds.
        ``first_order``: by PDLP (class notes), the simplex only where that leaves no
        feasible point."""
        h = self.h
        self._set(h, cost, t_hi)
        if first_order:
            _options(h, FIRST_ORDER)
            outcome = highs.run(h, self.deadline)
            self.solves += 1
            self.basis = False  # PDLP leaves none for the simplex to go on from
            if highs.has_point(h) or outcome is Outcome.TIME_LIMIT:
                return outcome
        _options(h, highs.WARM_PRIMAL if self.basis else COLD)
        outcome = highs.run(h, self.deadline)
        self.solves += 1
        if outcome in (Outcome.INFEASIBLE, Outcome.UNBOUNDED, Outcome.ERROR):
            h.clearSolver()
            _options(h, COLD)
            outcome = highs.run(h, self.deadline)
            self.solves += 1
        self.basis = outcome is Outcome.OPTIMAL
        return outcome

    def _solve(self, cost, t_hi, *, first_order: bool = False) -> Outcome:
        """One solve of the model (the LP, or for counts the MIP) whose point joins the
        tables found."""
        if self.mip is None:
            return self._read(self.h, self._lp(cost, t_hi, first_order=first_order))
        self._set(self.mip, cost, t_hi)
        outcome = highs.run(self.mip, self.deadline)
        self.solves += 1
        return self._read(self.mip, outcome)

    def _join(self, z: np.ndarray) -> None:
        x = self.o + self.s * z
        np.minimum(self.seen_lo, x, out=self.seen_lo)
        np.maximum(self.seen_hi, x, out=self.seen_hi)

    def _read(self, h, outcome: Outcome) -> Outcome:
        """The last solve's point, if feasible, joins the tables found; its outcome the
        status."""
        if highs.has_point(h):
            z = np.asarray(h.getSolution().col_value)[: self.n]
            self._join(np.round(z) if self.integral else z)
        self._note(h, outcome)
        return outcome

    def _note(self, h, outcome: Outcome) -> None:
        if outcome is Outcome.TIME_LIMIT:
            self.status, self.message = "time_limit", "the time limit was reached"
        elif outcome is not Outcome.OPTIMAL:
            self.status = "error"
            self.message = f"a solve ended with HiGHS status {highs.describe(h)!r}"

    def _goal(self, side: int, need: np.ndarray):
        """Costs and ``t``'s upper bounds of a side's round: ``sum min(s (x_j - X_j),
        level_j) / level_j`` over the cells in ``need`` (class notes); for counts the
        levels rounded up (a whole move meets a level where it meets its ceiling), so that
        the LP of :meth:`_box` keeps whole vertices."""
        goal = np.ceil(self.target[side] - 1e-9) if self.integral else self.target[side]
        return self._towards(side, need, goal)

    def _towards(self, side: int, cells: np.ndarray, ends: np.ndarray):
        """Costs and ``t``'s upper bounds that move the ``cells`` (a mask) on ``side``:
        ``sum min(s (x_j - X_j), e_j) / e_j`` with ``e_j`` = ``ends`` (class notes)."""
        k = self.cells.size
        cost = np.zeros(self.n_cols)
        t = self.t0 + side * k
        cost[t : t + k] = np.where(cells, -1.0 / np.where(cells, ends, 1.0), 0.0)
        t_hi = np.full(2 * k, np.inf)
        t_hi[side * k : (side + 1) * k] = np.where(cells, ends, np.inf)
        return cost, t_hi

    def _box(self, u: np.ndarray, cost, t_hi) -> bool:
        """Counts: the model's whole tables with the multipliers fixed at ``u``, best by
        these costs (:meth:`_goal`'s). Fixed multipliers make ``|2 (x - R) + A'u| <= b`` a
        box, whole after rounding its ends inwards, so that what is left is a MIP in ``z``
        alone whose LP, for 1-D and 2-D tables (hierarchical along one dimension), has a
        totally unimodular matrix (Cox and Ernst 1982, Cox and George 1989, seed 003 A.1;
        each ``t`` adds a row and a column of one non-zero) and whole ends, so whole
        vertices: HiGHS ends at its root (on 3-D tables, a branch and bound in ``z``
        only). A point taken is checked to be whole, within the box and adding up, so it
        is a point of the model (class notes) with these multipliers. Returns whether one
        was."""
        n, h = self.n, self.fixed
        u = np.clip(u, -self.cap, self.cap)
        g = self.a.T @ u
        slack = 1e-9 * np.maximum(1.0, np.abs(g))
        z_lo = np.maximum(self.col_lo[:n], np.ceil((self.dual_lo - g) / 2.0 - slack))
        z_hi = np.minimum(self.col_hi[:n], np.floor((self.dual_hi - g) / 2.0 + slack))
        if (z_lo > z_hi).any():
            return False
        cols = n + cost.size - self.t0
        every = np.arange(cols, dtype=np.int32)
        h.changeColsCost(cols, every, np.concatenate([cost[:n], cost[self.t0 :]]))
        h.changeColsBounds(cols, every, np.r_[z_lo, np.full(t_hi.size, -np.inf)], np.r_[z_hi, t_hi])
        highs.run(h, self.deadline)
        self.solves += 1
        if not highs.has_point(h):
            return False
        z = np.asarray(h.getSolution().col_value)[:n]
        whole = np.round(z)
        az = self.a @ whole
        if (
            np.abs(z - whole).max(initial=0.0) > INTEGRALITY_TOL
            or (whole < z_lo).any()
            or (whole > z_hi).any()
            or (az < self.rel_lo).any()
            or (az > self.rel_hi).any()
        ):
            return False
        self._join(whole)
        return True

    def _true_multipliers(self) -> np.ndarray | None:
        """Counts: multipliers that make the true table a point of the model, if any (an
        LP in ``u``; its answer, unless the time ran out, kept for the search and the
        widening alike)."""
        if self._true_known:
            return self._true_u
        z = (self.x - self.o) / self.s
        m = self.a.shape[0]
        h = highs.model(
            np.zeros(m),
            np.full(m, -self.cap),
            np.full(m, self.cap),
            self.a.T.tocsr(),
            self.dual_lo - 2.0 * z,
            self.dual_hi - 2.0 * z,
        )
        outcome = highs.run(h, self.deadline)
        self.solves += 1
        self._true_known = outcome is not Outcome.TIME_LIMIT
        self._true_u = np.asarray(h.getSolution().col_value) if outcome is Outcome.OPTIMAL else None
        return self._true_u

    def _boxes(self, goal, *, relaxed: bool) -> None:
        """Counts: per side, :meth:`_box` with the costs ``goal(side)`` gives (``None``: no
        cell left on that side) and the multipliers 0 (every table within ``b / 2`` of
        ``R``, whose nearest rounding ``R`` is), the true table's, and with ``relaxed`` the
        LP relaxation's for those costs, by PDLP (the joint search's MIP found no point in
        30 s on a 48x48 table; these take under a second there)."""
        zero = np.zeros(self.a.shape[0])
        u: np.ndarray | None
        for side in (0, 1):
            for tried in range(3 if relaxed else 2):
                costs = goal(side)
                if costs is None or time.perf_counter() >= self.deadline:
                    break
                if tried == 0:
                    u = zero
                elif tried == 1:
                    u = self._true_multipliers()
                else:
                    self._lp(*costs, first_order=True)
                    u = self._multipliers()
                if u is not None:
                    self._box(u, *costs)

    def _search_goal(self, side: int):
        need = self._short()[side]
        return self._goal(side, need) if need.any() else None

    def _multipliers(self) -> np.ndarray | None:
        """The last LP solve's multipliers, if it left a point (approximate ones serve:
        :meth:`_box` checks its own points)."""
        if not highs.has_point(self.h):
            return None
        return np.asarray(self.h.getSolution().col_value)[self.n : self.t0]

    def search(self, deadline: float) -> None:
        """Rounds of the joint search (class notes) while each protects more cells, until
        ``deadline`` (a share of the audit's time, so that the box gets the rest). For
        counts :meth:`_boxes` instead: the joint MIP is left to :meth:`prove`, cell by
        cell, for the cells the box protects (on a 48x48 table it found no point in 60 s,
        and a cell the box does not protect needs none)."""
        saved, self.deadline = self.deadline, min(self.deadline, deadline)
        if self.integral:
            self._boxes(self._search_goal, relaxed=True)
        for _ in range(0 if self.integral else GOAL_ROUNDS):
            before = self._short()
            for side in (0, 1):
                need = self._short()[side]
                if not need.any() or self.status != "optimal":
                    continue
                self._solve(*self._goal(side, need), first_order=True)
            if self.status != "optimal" or not (before & ~self._short()).any():
                break
        if self.status == "time_limit" and time.perf_counter() < saved:
            # Only the search's share ran out: the verdicts left are for the box and prove.
            self.status, self.message = "optimal", "every verdict proven"
        self.deadline = saved

    def _short_with(self, i: int, side: int, end: float) -> bool:
        """Whether cell ``i`` stays short on ``side`` with that side's end at ``end``."""
        c = self.cells
        lo, hi = self.seen_lo[c].copy(), self.seen_hi[c].copy()
        if side:
            lo[i] = min(lo[i], end)
        else:
            hi[i] = max(hi[i], end)
        chk = check_protection(self.x[c], lo, hi, self.upl, self.lpl, True, True)
        pinned = chk.exact[i] | chk.too_narrow[i]
        return bool((chk.lower_too_close[i] if side else chk.upper_too_close[i]) | pinned)

    def prove(self, wanted: np.ndarray) -> None:
        """The model's own end of each side still short, for the ``wanted`` cells. For
        counts :meth:`_box` with the multipliers of the relaxation by PDLP first, then the
        relaxation's end by the simplex, rounded inwards, which bounds the MIP's, and
        :meth:`_box` with its multipliers: a table found there is the model's end, and a
        side short at that bound is short on the model (the MIP then only for the end, at
        most :data:`END_SECONDS`); else the MIP, each with an equal share of the time
        left."""
        no_t = np.full(2 * self.cells.size, np.inf)
        deadline, turns = self.deadline, 2 * int(wanted.sum())
        for i in np.flatnonzero(wanted).tolist():
            for side in (0, 1):
                turns -= 1
                if self.status == "error" or not self._short()[side, i]:
                    continue
                now = time.perf_counter()
                if now >= deadline:
                    self._note(self.h, Outcome.TIME_LIMIT)
                    break
                if self.integral:
                    # Each side an equal share of the time left, so that one MIP that
                    # does not end leaves the others theirs.
                    self.deadline = now + (deadline - now) / (turns + 1)
                j = int(self.cells[i])
                cost = np.zeros(self.n_cols)
                cost[j] = 1.0 if side else -1.0
                short = False
                if self.integral:
                    # A whole table towards the relaxation's end, by PDLP's multipliers
                    # (fast where the simplex is not: 100x100 hier).
                    self._lp(cost, no_t, first_order=True)
                    u = self._multipliers()
                    if u is not None and self._box(u, cost, no_t) and not self._short()[side, i]:
                        continue
                if self.integral and self._lp(cost, no_t) is Outcome.OPTIMAL:
                    z = float(self.h.getSolution().col_value[j])
                    end = self.o[j] + self.s * (np.ceil(z - 1e-6) if side else np.floor(z + 1e-6))
                    u = self._multipliers()
                    if u is not None:
                        self._box(u, cost, no_t)  # a whole table towards that end
                    if self.seen_lo[j] <= end if side else self.seen_hi[j] >= end:
                        self.solved[side, i] = True
                        continue
                    short = self._short_with(i, side, end)
                if short:
                    # Proven short: the MIP only for the interval's end, briefly.
                    status = self.status, self.message
                    self.deadline = min(self.deadline, time.perf_counter() + END_SECONDS)
                    self._solve(cost, no_t)
                    self.status, self.message = status
                    self.solved[side, i] = True
                elif self._solve(cost, no_t) is Outcome.OPTIMAL:
                    self.solved[side, i] = True
        self.deadline = deadline

    def widen(self, seconds: float) -> None:
        """A round per side towards the box's ends for every cell (``sum min(s (x_j -
        X_j), e_j) / e_j``, ``e_j`` the distance to the end), so that the intervals
        reported reach further than the levels asked, within ``seconds`` (the search's
        own time: on 100x100 hier one such LP took 4 minutes). Verdicts are settled
        already, and a limit ending it changes none. For counts by :meth:`_boxes` (the
        MIP's rounds found nothing in their time on a 48x48 table)."""
        s = self.s
        deadline, self.deadline = self.deadline, min(self.deadline, time.perf_counter() + seconds)
        x = self.x[self.cells]
        room = (
            np.stack(
                [
                    self.col_hi[self.cells] * s + self.o[self.cells] - x,
                    x - self.col_lo[self.cells] * s - self.o[self.cells],
                ]
            )
            / s
        )

        def goal(side: int):
            go = room[side] > 1e-9
            return self._towards(side, go, room[side]) if go.any() else None

        status, message = self.status, self.message
        if status == "optimal" and self.integral:
            self._boxes(goal, relaxed=False)
        for side in (0, 1) if status == "optimal" and not self.integral else ():
            costs = goal(side)
            if costs is not None and time.perf_counter() < self.deadline:
                self._solve(*costs)
        self.status, self.message, self.deadline = status, message, deadline

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cells' intervals over the tables found, and whether each verdict is proven:
        protected by them, or short on a side solved to the model's own end."""
        c, solved = self._check(), self.solved
        failed = (c.upper_too_close & solved[0]) | (c.lower_too_close & solved[1])
        failed |= (c.exact | c.too_narrow) & solved[0] & solved[1]
        return self.seen_lo[self.cells], self.seen_hi[self.cells], c.protected | failed
