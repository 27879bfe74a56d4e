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
        found.search()
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
        integer = np.arange(self.n_cols) < n if integral else None
        self.h = highs.model(
            np.zeros(self.n_cols), self.col_lo, self.col_hi, rows, row_lo, row_hi, integer=integer
        )
        #: Later solves of an LP: only costs and bounds change (see the class notes).
        self.warm = not integral
        #: Whether the last solve left a basis the next may go on from.
        self.basis = False
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

    def _solve(self, cost, t_hi, *, first_order: bool = False) -> Outcome:
        """One solve with these costs and ``t``'s upper bounds; its point joins the tables
        found. ``first_order``: by PDLP where the model is an LP (class notes), the
        simplex only where that leaves no feasible point."""
        h, every = self.h, np.arange(self.n_cols, dtype=np.int32)
        h.changeColsCost(self.n_cols, every, cost)
        h.changeColsBounds(
            self.n_cols, every, self.col_lo, np.concatenate([self.col_hi[: self.t0], t_hi])
        )
        if first_order and not self.integral:
            _options(h, FIRST_ORDER)
            outcome = highs.run(h, self.deadline)
            self.solves += 1
            self.basis = False  # PDLP leaves none for the simplex to go on from
            if highs.has_point(h) or outcome is Outcome.TIME_LIMIT:
                return self._read(outcome)
        _options(h, highs.WARM_PRIMAL if self.basis else COLD)
        outcome = highs.run(h, self.deadline)
        self.solves += 1
        if outcome in (Outcome.INFEASIBLE, Outcome.UNBOUNDED, Outcome.ERROR):
            h.clearSolver()
            _options(h, COLD)
            outcome = highs.run(h, self.deadline)
            self.solves += 1
        self.basis = self.warm and outcome is Outcome.OPTIMAL
        return self._read(outcome)

    def _read(self, outcome: Outcome) -> Outcome:
        """The last solve's point, if feasible, joins the tables found; its outcome the
        status."""
        h = self.h
        if highs.has_point(h):
            z = np.asarray(h.getSolution().col_value)[: self.n]
            x = self.o + self.s * (np.round(z) if self.integral else z)
            np.minimum(self.seen_lo, x, out=self.seen_lo)
            np.maximum(self.seen_hi, x, out=self.seen_hi)
        if outcome is Outcome.TIME_LIMIT:
            self.status, self.message = "time_limit", "the time limit was reached"
        elif outcome is not Outcome.OPTIMAL:
            self.status = "error"
            self.message = f"a solve ended with HiGHS status {highs.describe(h)!r}"
        return outcome

    def search(self) -> None:
        """Rounds of the joint search (class notes) while each protects more cells."""
        k = self.cells.size
        no_t = np.full(2 * k, np.inf)
        for _ in range(GOAL_ROUNDS):
            before = self._short()
            for side in (0, 1):
                need = self._short()[side]
                if not need.any() or self.status != "optimal":
                    continue
                cost = np.zeros(self.n_cols)
                t = self.t0 + side * k
                cost[t : t + k] = np.where(need, -1.0 / self.target[side], 0.0)
                t_hi = no_t.copy()
                t_hi[side * k : (side + 1) * k] = np.where(need, self.target[side], np.inf)
                self._solve(cost, t_hi, first_order=True)
            if self.status != "optimal" or not (before & ~self._short()).any():
                break

    def prove(self, wanted: np.ndarray) -> None:
        """The model's own end of each side still short, for the ``wanted`` cells."""
        no_t = np.full(2 * self.cells.size, np.inf)
        for i in np.flatnonzero(wanted).tolist():
            for side in (0, 1):
                if self.status != "optimal" or not self._short()[side, i]:
                    continue
                cost = np.zeros(self.n_cols)
                cost[int(self.cells[i])] = 1.0 if side else -1.0
                if self._solve(cost, no_t) is Outcome.OPTIMAL:
                    self.solved[side, i] = True

    def widen(self, seconds: float) -> None:
        """A round per side towards the box's ends for every cell (``sum min(s (x_j -
        X_j), e_j) / e_j``, ``e_j`` the distance to the end), so that the intervals
        reported reach further than the levels asked, within ``seconds`` (the search's
        own time: on 100x100 hier one such LP took 4 minutes). Verdicts are settled
        already, and a limit ending it changes none."""
        k, s = self.cells.size, self.s
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
        status, message = self.status, self.message
        for side in (0, 1):
            go = room[side] > 1e-9
            if status != "optimal" or not go.any() or time.perf_counter() >= self.deadline:
                break
            cost = np.zeros(self.n_cols)
            t = self.t0 + side * k
            cost[t : t + k] = np.where(go, -1.0 / np.where(go, room[side], 1.0), 0.0)
            t_hi = np.full(2 * k, np.inf)
            t_hi[side * k : (side + 1) * k] = np.where(go, room[side], np.inf)
            self._solve(cost, t_hi)
        self.status, self.message, self.deadline = status, message, deadline

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cells' intervals over the tables found, and whether each verdict is proven:
        protected by them, or short on a side solved to the model's own end."""
        c, solved = self._check(), self.solved
        failed = (c.upper_too_close & solved[0]) | (c.lower_too_close & solved[1])
        failed |= (c.exact | c.too_narrow) & solved[0] & solved[1]
        return self.seen_lo[self.cells], self.seen_hi[self.cells], c.protected | failed
