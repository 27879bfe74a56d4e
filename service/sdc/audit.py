"""Audit of a suppression pattern: feasibility intervals and the protection check.

For a table with relations ``A x = 0`` (see :mod:`service.sdc.table`), published cells
fixed at their values and a-priori bounds ``l <= x <= u``, the feasibility interval of a
suppressed cell ``j`` is ``[min x_j, max x_j]`` over all tables consistent with what was
published (seed 000, "Secondary tabular data protection methods", Example 3; seed 002
section 3, "suppression interval", equations 3.1-3.5; seed 003 B.2.a.ii). Each sensitive
cell's interval is then held against its protection levels (seed 000, "Upper protection
levels"; seed 002 section 3, Operational criterion 1; seed 003 B.2.a.iii).

The interval audit (seed 003 B.2.a.ii-iii) lives here. Implicitly published unions of
suppressed cells (seed 002 sections 3-4, seed 003 B.2.a.i) need the contributions and are
checked with the sensitivity rule itself in :mod:`service.sdc.unions`;
:func:`audit_pattern` puts the two together into one verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import highs
from .aggregations import AggregationCheck, check_aggregations
from .errors import InputError
from .highs import Outcome
from .problem import (
    WHOLE_ATOL,
    RuleConditions,
    TableProblem,
    bounds,
    relations_of,
    whole_above,
    whole_bounds,
)
from .table import LinkedTables
from .unions import UnionCheck

# Published values must satisfy relations and bounds to this relative tolerance (relative
# to the magnitude of the terms involved, at least 1); beyond it the table is inconsistent.
_FEASIBILITY_RTOL = 1e-9
# A feasible point within this relative distance of an outer bound of a cell (its a-priori
# bound, or one a single relation implies) proves that bound is the cell's min (max); no LP
# is needed for it.
_AT_BOUND_RTOL = 1e-9
# Default relative tolerance of check_protection: HiGHS's feasibility tolerance, relative
# to a cell's value and protection levels (never to its far bound), so solver round-off
# does not decide a verdict (see check_protection, Notes).
PROTECTION_RTOL = highs.FEASIBILITY_RTOL


@dataclass(frozen=True)
class FeasibilityIntervals:
    """Feasibility intervals of the suppressed cells and how the computation ended.

    Attributes
    ----------
    cells : numpy.ndarray of int
        The cells the intervals are for (the suppressed cells, in cell order, unless a
        subset was asked for); the other arrays are aligned with it.
    lower, upper : numpy.ndarray of float
        Interval bounds; ``upper = +inf`` when unbounded, ``nan`` where not certified.
    certified : numpy.ndarray of bool
        Both bounds were proven (LP optimal, LP unbounded, or an outer bound attained).
    status : {"optimal", "time_limit", "infeasible", "error"}
        ``optimal``: every interval is certified. ``time_limit``: the time ran out first;
        the cells not reached are uncertified. ``infeasible``: the published values
        contradict the relations or bounds; nothing is certified. ``error``: the solver
        failed on some LP (see ``message``); those cells are uncertified.
    message : str
        How the computation ended, in words.
    n_lp_solves : int
        Number of LPs solved.
    seconds : float
        Wall-clock time.
    n_components : int
        Independent groups of suppressed cells that needed an LP model.
    n_inner : int
        Cells whose interval is an inner one, each end attained by a whole-number table
        but not proven the extreme (integral audits, :func:`feasibility_intervals`).
    """

    cells: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    certified: np.ndarray
    status: str
    message: str
    n_lp_solves: int
    seconds: float
    n_components: int = 0
    n_inner: int = 0


@dataclass(frozen=True)
class _Problem:
    a: sp.csr_matrix
    values: np.ndarray
    suppressed: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    time_limit: float
    tolerance: float = 0.0


def _check_inputs(
    relations, values, suppressed, lower_bounds, upper_bounds, time_limit, tolerance=0.0
) -> _Problem:
    a = relations_of(relations)
    n = a.shape[1]
    x = np.asarray(values, dtype=float)
    if x.shape != (n,):
        raise InputError(
            f"values must have one entry per cell ({n}), got shape {x.shape}", field="values"
        )
    s = np.asarray(suppressed)
    if s.shape != (n,) or s.dtype != bool:
        raise InputError(
            f"suppressed must be a boolean mask with one entry per cell ({n})", field="suppressed"
        )
    bad = ~s & ~np.isfinite(x)
    if bad.any():
        cell = int(np.flatnonzero(bad)[0])
        raise InputError(f"published cell {cell} has no finite value", field="values", cell=cell)
    lb, ub = bounds(lower_bounds, upper_bounds, n)
    if not time_limit > 0:
        raise InputError("time_limit must be > 0 seconds", field="time_limit")
    if not (np.isfinite(tolerance) and tolerance >= 0):
        raise InputError("tolerance must be a finite number >= 0", field="tolerance")
    return _Problem(a, x, s, lb, ub, float(time_limit), float(tolerance))


def _published_contradiction(p: _Problem) -> str | None:
    """Why the published values alone are infeasible, or ``None`` when they are not.

    A published value outside its bounds, or a relation whose cells are all published and
    do not add up (seed 000, "Secondary tabular data protection methods": the relations
    hold for the true table, so a published table that breaks one has no feasible
    completion).
    """
    pub = ~p.suppressed
    x = np.where(pub, p.values, 0.0)
    scale = np.maximum(1.0, np.abs(x))
    out = pub & (
        (x < p.lower - _FEASIBILITY_RTOL * scale) | (x > p.upper + _FEASIBILITY_RTOL * scale)
    )
    if out.any():
        cell = int(np.flatnonzero(out)[0])
        return f"published cell {cell} lies outside its a-priori bounds"
    touches = (abs(p.a) @ p.suppressed.astype(float)) > 0
    residual = p.a @ x
    tol = p.tolerance + _FEASIBILITY_RTOL * np.maximum(1.0, abs(p.a) @ np.abs(x))
    broken = ~touches & (np.abs(residual) > tol)
    if broken.any():
        r = int(np.flatnonzero(broken)[0])
        return (
            f"relation {r} involves only published cells and does not add up "
            f"(residual {residual[r]:g})"
        )
    return None


@highs.on_wall_clock
def feasibility_intervals(
    relations,
    values,
    suppressed,
    lower_bounds=0.0,
    upper_bounds=np.inf,
    *,
    time_limit: float = 60.0,
    tolerance: float = 0.0,
    integral: bool = False,
    levels=None,
    wanted=None,
) -> FeasibilityIntervals:
    """Feasibility interval of every suppressed cell.

    Parameters
    ----------
    relations : scipy.sparse matrix, shape (n_relations, n_cells), or Table or LinkedTables
        ``A`` with ``A @ x = 0`` for every additive table (a table's ``relations``).
    values : array_like, shape (n_cells,)
        Cell values; those of published cells are fixed, those of suppressed cells are not
        read (they may be nan).
    suppressed : array_like of bool, shape (n_cells,)
        The suppression pattern.
    lower_bounds, upper_bounds : float or array_like, shape (n_cells,)
        A-priori bounds known to the intruder; default ``0`` and ``+inf``
        (non-negativity).
    time_limit : float
        Wall-clock seconds shared by all LP solves.
    tolerance : float
        Absolute additivity tolerance of the table (the one it was accepted with): each
        relation holds to within it, ``|A x| <= tolerance``, so the intruder's feasible set
        is that band rather than the exact hyperplanes. 0 for exactly additive tables.
    integral : bool
        The cells are counts, which the intruder knows to be whole numbers: the intervals
        are those of whole-number tables (see Notes).
    levels : tuple of (sensitive, upper_protection, lower_protection), optional
        With ``integral``: the sensitive cells and their protection levels (each a number
        or one per cell), which let the intervals of a flat table be inner ones where no
        verdict depends on more (see Notes). Without them every bound is exact.
    wanted : array_like of bool, shape (n_cells,), optional
        Bound only these suppressed cells by LPs (the others keep the bounds their group
        of one cell, or a feasible point, proves, else stay uncertified); default all. The
        cover table of cyclic linked tables (:func:`_on_cover`) wants its linked cells.

    Returns
    -------
    FeasibilityIntervals
        Intervals aligned with ``cells = flatnonzero(suppressed)``.

    Notes
    -----
    For suppressed cell ``j`` (seed 000, "Secondary tabular data protection methods",
    Example 3; seed 002 section 3, eqs. 3.1-3.5; seed 003 B.2.a.ii)::

        min / max x_j  s.t.  A_S x_S = -A_P v_P,  l_S <= x_S <= u_S

    where ``S`` are the suppressed cells and ``P`` the published ones, whose values ``v_P``
    move to the right-hand side. Only relations that touch a suppressed cell remain (seed
    002 section 3, eq. 3.6: the explicit aggregations).

    The suppressed cells split into independent groups (connected components of the
    cell-relation incidence); each group is one HiGHS model whose objective alone changes
    between solves, so every LP after the first starts from the previous optimal basis. A
    group of one cell needs no LP: its relations fix it, or none touches it and its
    interval is its bounds. A bound is also settled without an LP once an optimal
    solution of an earlier LP (a feasible point) attains an outer bound of the cell: its
    a-priori bound, or the bound one relation implies from the other cells' known
    intervals (:func:`_settle`; about two thirds of the LPs on 3-D and 4-D patterns).

    The published values are checked first: if they contradict the relations or bounds,
    the status is ``infeasible`` and nothing is certified. No exception is raised for an
    inconsistent table.

    With ``integral`` (count tables) the bounds are those of tables of whole numbers,
    which an intruder who knows the cells are counts can use: the LP's bound is kept when
    its optimum is a whole-number table (always on 2-D tables, whose relations are
    totally unimodular), else it is found by feasibility MIPs (:class:`_WholeTables`),
    the true table the first whole one. The LP alone is not
    sound there: on a 3x3x3 table (seed 1 of a random search) a hidden cell of 5 has the
    LP interval [2, 7] but no table of whole numbers puts it below 3, so a lower
    protection level of 3 looked met when only 2 is (Cox 2002 on the bounds of
    multi-way tables: LP bounds need not be sharp). Only whole-number optima serve
    :func:`_settle` as witnesses.

    Those MIPs cost 1.5-3 s each on a large group (a 20x20x10 table with 1,290 hidden
    cells in one group), so on a table whose dimensions are all flat, given ``levels``
    and hidden values that are a whole table ``v``, most intervals are inner ones
    instead: ``[lo, hi]`` with each end attained by a whole table, the true one or
    ``v + t z`` for a hypercube ``z`` (:func:`_hypercube_moves`; or an LP optimum that is
    whole). An end is exact where it meets the LP's bound rounded inwards; feasibility
    MIPs (:class:`_WholeTables`) settle the rest only for a sensitive cell whose inner
    interval does not meet its levels while the LP's does, where the verdict depends on
    them. Every other cell keeps its inner interval, never the LP's (an outer bound,
    which could call a cell protected wrongly): a sensitive cell protected by it is
    protected by the whole-number interval, which contains it, and one not protected by
    the LP's rounded interval, which contains the whole-number one, is not protected
    by either. A cell whose inner interval is a point where the LP's is not is taken as
    derived by the aggregation check (:func:`audit_pattern`): conservative, as an
    intruder who knows more cells only makes more aggregations of hidden cells
    sensitive, never fewer. ``n_inner`` counts the cells whose interval is only inner.

    References
    ----------
    Fischetti, M. and Salazar, J.J. (2000), cited in seed 000 for the LP statement.
    """
    start = time.perf_counter()
    p = _check_inputs(
        relations, values, suppressed, lower_bounds, upper_bounds, time_limit, tolerance
    )
    if isinstance(relations, LinkedTables) and _needs_cover(relations, p):
        return _on_cover(relations, p, integral, levels, start)
    want = np.ones(len(p.values), bool) if wanted is None else np.asarray(wanted, bool)
    deadline = start + p.time_limit
    cells = np.flatnonzero(p.suppressed)
    n_s = len(cells)
    lower = np.full(n_s, np.nan)
    upper = np.full(n_s, np.nan)
    inner = np.zeros(n_s, bool)

    def result(status, message, n_lp=0, n_comp=0):
        certified = ~np.isnan(lower) & ~np.isnan(upper)
        if status == "infeasible":
            lower[:] = upper[:] = np.nan
            certified[:] = False
        return FeasibilityIntervals(
            cells,
            lower,
            upper,
            certified,
            status,
            message,
            n_lp,
            time.perf_counter() - start,
            n_comp,
            int((inner & certified).sum()),
        )

    if (why := _published_contradiction(p)) is not None:
        return result("infeasible", why)
    if n_s == 0:
        return result("optimal", "no suppressed cells")

    a_s = p.a[:, cells].tocsr()
    rhs_all = -(p.a @ np.where(p.suppressed, 0.0, p.values))
    active = np.flatnonzero(np.diff(a_s.indptr) > 0)
    b = a_s[active]
    rhs = rhs_all[active]
    lb, ub = p.lower[cells], p.upper[cells]
    if integral:
        lb, ub = whole_bounds(lb, ub)
    # Inner bounds from whole tables (see Notes): the hidden values, if a table, moved
    # along hypercubes.
    witness = None
    flat = _flat_shape(relations) if integral and levels is not None else None
    if flat is not None:
        v = p.values[cells]
        # The published values and the hidden ones: a table?
        if _whole_table(v, lb, ub, p.a, p.values, 0.0, p.tolerance):
            room_up = np.zeros(len(p.values))
            room_down = np.zeros(len(p.values))
            room_up[cells], room_down[cells] = ub - v, v - lb
            up, down = _hypercube_moves(*flat, room_up, room_down, deadline)
            sens, upl, lpl = (np.broadcast_to(np.asarray(x), p.values.shape) for x in levels)
            witness = (
                v - down[cells],
                v + up[cells],
                np.asarray(sens, bool)[cells],
                np.asarray(upl, float)[cells],
                np.asarray(lpl, float)[cells],
            )

    # Components of the bipartite graph suppressed cells <-> relations touching them.
    pattern = sp.csr_matrix((np.ones(b.nnz), b.indices, b.indptr), shape=b.shape)
    graph = sp.bmat([[None, pattern.T], [pattern, None]], format="csr")
    _, labels = connected_components(graph, directed=False)
    cell_label, row_label = labels[:n_s], labels[n_s:]
    size = np.bincount(cell_label, minlength=labels.max() + 1 if labels.size else 0)

    # Groups of one cell: pinned by their relations (x_j = rhs_r / a_rj for every such r,
    # within the tolerance band), or bounded by their a-priori bounds alone.
    single = size[cell_label] == 1
    lower[single], upper[single] = lb[single], ub[single]
    single_rows = np.flatnonzero(size[row_label] == 1)
    if single_rows.size:
        sub = b[single_rows].tocoo()
        ends = (rhs[single_rows][sub.row][:, None] + [-p.tolerance, p.tolerance]) / sub.data[
            :, None
        ]
        lo = np.full(n_s, -np.inf)
        hi = np.full(n_s, np.inf)
        np.maximum.at(lo, sub.col, ends.min(axis=1))
        np.minimum.at(hi, sub.col, ends.max(axis=1))
        fixed = np.unique(sub.col)
        lo, hi = lo[fixed], hi[fixed]
        tol = _FEASIBILITY_RTOL * np.maximum(1.0, np.abs(hi))
        clash = (lo - hi > tol) | (hi < lb[fixed] - tol) | (lo > ub[fixed] + tol)
        if clash.any():
            j = int(cells[fixed[np.flatnonzero(clash)[0]]])
            return result(
                "infeasible",
                f"the published cells fix suppressed cell {j} to a "
                "value outside its bounds or to two different values",
            )
        # min/max: with no tolerance lo and hi agree up to rounding, in either order.
        lower[fixed] = np.clip(np.minimum(lo, hi), lb[fixed], ub[fixed])
        upper[fixed] = np.clip(np.maximum(lo, hi), lb[fixed], ub[fixed])

    # The remaining groups, made contiguous: block-diagonal B with cells and rows sorted by
    # group, so each group's model is a column slice.
    lp_labels = np.flatnonzero(size >= 2)
    col_order = np.argsort(cell_label, kind="stable")
    row_order = np.argsort(row_label, kind="stable")
    blocks = b[row_order][:, col_order].tocsc()
    col_start = np.concatenate(([0], np.cumsum(size)))
    row_start = np.concatenate(([0], np.cumsum(np.bincount(row_label, minlength=len(size)))))
    rhs_sorted = rhs[row_order]

    n_lp = 0
    status, message = "optimal", "all intervals certified"
    errors: list[str] = []
    for k in lp_labels:
        c0, c1, r0, r1 = col_start[k], col_start[k + 1], row_start[k], row_start[k + 1]
        js = col_order[c0:c1]
        start_nz, end_nz = blocks.indptr[c0], blocks.indptr[c1]
        block = (
            blocks.indptr[c0 : c1 + 1] - start_nz,
            blocks.indices[start_nz:end_nz] - r0,
            blocks.data[start_nz:end_nz],
        )
        group = (block, rhs_sorted[r0:r1], p.tolerance, lb[js], ub[js], deadline)
        if not want[cells[js]].any():
            continue
        if witness is None:
            lo, hi, n_solved, outcome = _bound_group(
                *group,
                integral,
                p.values[cells[js]] if integral else None,
                wanted=want[cells[js]],
            )
        else:
            w_lo, w_hi, w_sens, w_up, w_low = (w[js] for w in witness)
            lo, hi, n_solved, outcome, inner[js] = _inner_group(
                *group,
                p.values[cells[js]],
                w_lo.copy(),
                w_hi.copy(),
                (w_sens, w_up, w_low),
                want[cells[js]],
            )
        lower[js], upper[js] = lo, hi
        n_lp += n_solved
        if outcome == "infeasible":
            return result(
                "infeasible",
                "no table is consistent with the published cells and "
                f"bounds (group of suppressed cells including cell {int(cells[js[0]])})",
                n_lp,
                len(lp_labels),
            )
        if outcome == "time_limit":
            status, message = (
                "time_limit",
                (f"time limit of {p.time_limit:g} s reached; unreached cells are not certified"),
            )
            break
        if outcome != "optimal":
            errors.append(f"{outcome} (group including cell {int(cells[js[0]])})")
    if errors:
        status, message = "error", "; ".join(errors)
    return result(status, message, n_lp, len(lp_labels))


#: Most cells of a cover table the intervals of cyclic linked tables are computed on
#: (:func:`_on_cover`); beyond it they are not certified.
COVER_MAX_CELLS = 1_000_000


def _needs_cover(linked: LinkedTables, p: _Problem) -> bool:
    """Whether the intervals of ``linked`` must be computed on its cover table: the
    tables form a cycle (:attr:`LinkedTables.acyclic`), so the non-negativity of the
    cover table's parts restricts the linked cells beyond their own relations, and every
    cell is non-negative a priori (a negative lower bound says the data, and so the parts,
    may be negative: the intruder knows no bound on the parts, and the relations alone
    are all it has)."""
    return not linked.acyclic and bool((p.lower >= 0).all())


def _on_cover(
    linked: LinkedTables, p: _Problem, integral: bool, levels, start: float
) -> FeasibilityIntervals:
    """:func:`feasibility_intervals` of cyclic linked tables, on their cover table.

    The intruder knows the linked tables are margins of one cross-classification whose
    parts, cells like any other, are non-negative (the default a-priori bound); for a
    cycle of tables that restricts the hidden cells beyond the linked relations (seed
    002 section 3: the feasible set is everything the intruder knows). With parts
    ``(a, b, c)`` 20, 0; 40, 10; 5, 40; 0, 20 the four hidden cells of ``a x b`` range
    over [0, 65] by their own relations, but ``(a1, b1)`` is at least its value 20 once
    ``a x c`` and ``b x c`` are published: its lower protection was called met, and the
    pattern safe, until 2026-11-27. Every cell outside the linked tables is hidden, at
    least 0 and unbounded above; the linked cells keep their values, pattern and bounds.
    Only whole-number intervals (counts) read hidden values, so those get a whole cover
    table consistent with the linked ones (:func:`_cover_completion`)."""
    cover, at = linked.union_table, linked.union_index
    cells = np.flatnonzero(p.suppressed)

    def uncertified(status: str, message: str) -> FeasibilityIntervals:
        nan = np.full(len(cells), np.nan)
        return FeasibilityIntervals(
            cells, nan, nan.copy(), np.zeros(len(cells), bool), status, message, 0,
            time.perf_counter() - start,
        )  # fmt: skip

    if cover.n_cells > COVER_MAX_CELLS:
        return uncertified(
            "error",
            f"the linked tables form a cycle, so their intervals are those of their cover "
            f"table, whose {cover.n_cells} cells are more than {COVER_MAX_CELLS}: not "
            "certified",
        )
    n = cover.n_cells
    values = np.full(n, np.nan)
    values[at] = p.values
    outside = np.ones(n, bool)
    outside[at] = False
    hidden = outside.copy()
    hidden[at] = p.suppressed
    lower, upper = np.zeros(n), np.full(n, np.inf)
    lower[at], upper[at] = p.lower, p.upper
    left = p.time_limit - (time.perf_counter() - start)
    if integral:
        whole = _cover_completion(cover.relations, values, lower, upper, p.tolerance, left)
        if whole is None:
            return uncertified(
                "time_limit" if time.perf_counter() - start >= p.time_limit else "infeasible",
                "no cover table of non-negative whole numbers was found that has the linked "
                "tables as its margins (in time); not certified",
            )
        values = whole
    cover_levels = None
    if levels is not None:
        cover_levels = tuple(np.zeros(n, x.dtype) for x in map(np.asarray, levels))
        for mine, theirs in zip(cover_levels, levels):
            mine[at] = np.broadcast_to(np.asarray(theirs), p.values.shape)
    iv = feasibility_intervals(
        cover,
        values,
        hidden,
        lower,
        upper,
        time_limit=max(left, 1e-3),
        tolerance=p.tolerance,
        integral=integral,
        levels=cover_levels,
        wanted=~outside,  # the cover's own cells are never reported: no LPs for them
    )
    # The linked hidden cells' positions among the cover's hidden cells.
    pos = np.searchsorted(iv.cells, at[cells])
    return FeasibilityIntervals(
        cells,
        iv.lower[pos],
        iv.upper[pos],
        iv.certified[pos],
        iv.status,
        iv.message,
        iv.n_lp_solves,
        time.perf_counter() - start,
        iv.n_components,
        iv.n_inner,  # counted over the cover's hidden cells
    )


def _cover_completion(a, values, lower, upper, tolerance, seconds) -> np.ndarray | None:
    """A cover table of whole numbers within its bounds that agrees with the known
    (finite) ``values`` and whose relations hold to within ``tolerance``, or ``None``
    (none exists, or none found within ``seconds``): a feasibility MIP."""
    known = np.isfinite(values)
    lb = np.where(known, values, lower)
    ub = np.where(known, values, upper)
    n, m = len(values), a.shape[0]
    h = highs.model(
        np.zeros(n),
        lb,
        ub,
        a,
        np.full(m, -tolerance),
        np.full(m, tolerance),
        integer=np.ones(n, bool),
    )
    outcome = highs.run(h, time.perf_counter() + max(seconds, 1e-3))
    if outcome is not Outcome.OPTIMAL or not highs.has_point(h):
        return None
    return np.where(known, values, np.round(np.asarray(h.getSolution().col_value)))


def _is_whole_each(x: np.ndarray) -> np.ndarray:
    """Which values are whole numbers, up to the solver's precision."""
    return np.abs(x - np.round(x)) <= WHOLE_ATOL * np.maximum(1.0, np.abs(x))


def _whole_table(v, lb, ub, a, x, rhs, tolerance: float) -> bool:
    """Whether values ``v`` of the hidden cells are a whole-number table the intruder
    could face: finite, whole, within ``lb``/``ub``, and the table ``x`` they belong to
    (``v`` itself, or the published values with them) within the relations,
    ``|a x - rhs| <= tolerance`` up to the solver's precision."""
    v = np.asarray(v, np.float64)
    if not (np.isfinite(v).all() and (_is_whole_each(v) & (v >= lb) & (v <= ub)).all()):
        return False
    allowed = tolerance + WHOLE_ATOL * np.maximum(1.0, abs(a) @ np.abs(x))
    return bool((np.abs(a @ x - rhs) <= allowed).all())


def _is_whole(x: np.ndarray) -> bool:
    """Whether a solution is a table of whole numbers, up to the solver's precision."""
    return bool(_is_whole_each(x).all())


def _bound_group(
    block, rhs, tolerance, lb, ub, deadline, integral=False, known=None, witnesses=None, wanted=None
):
    """Min and max of every variable of one group by warm-started HiGHS solves.

    ``block`` is the group's constraint matrix in CSC form ``(indptr, indices, data)``,
    with ``|block @ x - rhs| <= tolerance`` and ``lb <= x <= ub``. Returns ``(lower, upper,
    n_solves, outcome)``; bounds not proven are nan. ``integral``: the bounds of tables of
    whole numbers (:func:`feasibility_intervals`, Notes), by :class:`_WholeTables` where an
    LP's optimum is not whole; ``known``: the group's true values, a whole table to start
    from (ignored unless whole, within the bounds and within the relations).
    ``witnesses``: ``(lo, hi)``, the least and greatest value of each cell over some whole
    tables, for the LP bounds (``integral`` false): they join the feasible points seen,
    and each LP optimum that is whole joins them (updated in place). ``wanted``: the
    variables to bound (default all); the others get only what :func:`_settle` proves.

    A bound needs no LP once it is proven from both sides (:func:`_settle`): a bound
    implied by one relation caps it, and an optimum of an earlier LP, a feasible point,
    reaches it. On the 3-D and 4-D benchmark patterns this leaves a third of the LPs.
    """
    indptr, indices, data = block
    n, m = len(lb), len(rhs)
    a = sp.csc_matrix((data, indices, indptr), shape=(m, n))
    h = highs.model(np.zeros(n), lb, ub, a, rhs - tolerance, rhs + tolerance, **highs.WARM_PRIMAL)

    lower, upper = np.full(n, np.nan), np.full(n, np.nan)
    seen_lo, seen_hi = np.full(n, np.inf), np.full(n, -np.inf)
    costed = -1
    n_solves = 0
    whole = None  # the group's whole-number search, made at the first LP optimum not whole
    # The true table is a whole-number table of the group: the first witness, once
    # checked (a caller's values need not be one: a randomly rounded table does not add up).
    if integral and known is not None and _whole_table(known, lb, ub, a, known, rhs, tolerance):
        seen_lo, seen_hi = known.astype(float), known.astype(float)
    if witnesses is not None:
        seen_lo, seen_hi = witnesses[0].copy(), witnesses[1].copy()
    for j in range(n) if wanted is None else np.flatnonzero(wanted).tolist():
        for sense in (1.0, -1.0):
            if not np.isnan(lower[j] if sense > 0 else upper[j]):
                continue  # proven without an LP by an earlier _settle
            if time.perf_counter() >= deadline:
                return lower, upper, n_solves, "time_limit"
            if costed not in (-1, j):
                h.changeColsCost(2, np.array([costed, j], dtype=np.int32), np.array([0.0, sense]))
            else:
                h.changeColsCost(1, np.array([j], dtype=np.int32), np.array([sense]))
            costed = j
            outcome = highs.run(h, deadline)
            n_solves += 1
            if outcome in (Outcome.INFEASIBLE, Outcome.ERROR):
                # A warm start can go astray on large values (primal simplex from the last
                # basis declared a feasible group infeasible on a rounded 60x60 table with
                # cells near 5e7): only a solve from scratch may say so.
                h.clearSolver()
                outcome = highs.run(h, deadline)
                n_solves += 1
            if outcome is Outcome.OPTIMAL:
                value = sense * h.getInfo().objective_function_value
                x = np.asarray(h.getSolution().col_value)
                if integral and not _is_whole(x):
                    if whole is None:
                        whole = _WholeTables(a, rhs, tolerance, lb, ub)
                    # The whole tables it finds join seen_lo / seen_hi there.
                    value, why = whole.bound(j, sense, value, seen_lo, seen_hi, deadline)
                    if value is None:
                        # The bound is not proven: a limit, or the solver's trouble.
                        return lower, upper, n_solves + whole.solves, why
                else:
                    np.minimum(seen_lo, x, out=seen_lo)
                    np.maximum(seen_hi, x, out=seen_hi)
                    if witnesses is not None and _is_whole(x):
                        np.minimum(witnesses[0], np.round(x), out=witnesses[0])
                        np.maximum(witnesses[1], np.round(x), out=witnesses[1])
                if sense > 0:
                    lower[j] = min(max(value, lb[j]), ub[j])
                else:
                    upper[j] = max(min(value, ub[j]), lb[j])
                _settle(a, rhs, tolerance, lb, ub, lower, upper, seen_lo, seen_hi)
            elif outcome is Outcome.UNBOUNDED:
                if sense > 0:
                    lower[j] = -np.inf
                else:
                    upper[j] = np.inf
            elif outcome is Outcome.ERROR:
                return lower, upper, n_solves, f"HiGHS ended with status {highs.describe(h)!r}"
            else:
                return lower, upper, n_solves, outcome.value
    return lower, upper, n_solves + (0 if whole is None else whole.solves), "optimal"


def _inner_group(block, rhs, tolerance, lb, ub, deadline, values, w_lo, w_hi, levels, wanted):
    """Whole-number intervals of one group of a flat count table, inner where no verdict
    depends on more (:func:`feasibility_intervals`, Notes).

    ``w_lo``/``w_hi``: the least and greatest value of each cell over the whole tables
    known (the true one ``values`` and its hypercube moves); ``levels``: the group's
    ``(sensitive, upper_protection, lower_protection)``. The LP bounds come first
    (:func:`_bound_group`; its whole optima join the witnesses), rounded inwards: an
    outer bound of the whole-number interval. An end is exact where a witness reaches it;
    a sensitive cell that its inner interval does not protect while the outer one does
    gets its open ends from feasibility MIPs (:meth:`_WholeTables.bound`), whose tables
    join the witnesses too. Returns ``(lower, upper, n_solves, outcome, inner)``, with
    ``inner`` the cells whose interval is only inner; bounds not proven are nan.
    ``wanted``: the cells to bound (:func:`_bound_group`); the others stay nan.
    """
    lp_lo, lp_hi, n_solves, outcome = _bound_group(
        block, rhs, tolerance, lb, ub, deadline, witnesses=(w_lo, w_hi), wanted=wanted
    )
    n = len(lb)
    nan = np.full(n, np.nan)
    if outcome != "optimal":
        return nan, nan.copy(), n_solves, outcome, np.zeros(n, bool)
    # The LP's bounds rounded inwards (an unbounded LP has unbounded whole tables: its
    # rational ray, scaled, is a whole move).
    out_lo = np.where(
        np.isfinite(lp_lo), np.ceil(lp_lo - WHOLE_ATOL * np.maximum(1.0, np.abs(lp_lo))), lp_lo
    )
    out_hi = np.where(
        np.isfinite(lp_hi), np.floor(lp_hi + WHOLE_ATOL * np.maximum(1.0, np.abs(lp_hi))), lp_hi
    )
    sens, upl, lowl = levels

    def reached_lo():
        # A whole table reaches the outer bound; an unbounded LP is exact as it is.
        return (w_lo <= out_lo) | np.isinf(out_lo)

    def reached_hi():
        return (w_hi >= out_hi) | np.isinf(out_hi)

    def protected(k, lo, hi):
        return check_protection(values[k], lo, hi, upl[k], lowl[k], True, True).protected.item()

    indptr, indices, data = block
    whole = None
    for k in np.flatnonzero(sens):
        for sense in (1.0, -1.0):
            if reached_lo()[k] if sense > 0 else reached_hi()[k]:
                continue  # exact already
            if protected(k, w_lo[k], w_hi[k]) or not protected(k, out_lo[k], out_hi[k]):
                break  # the verdict is settled whatever the whole-number interval
            if whole is None:
                a = sp.csc_matrix((data, indices, indptr), shape=(len(rhs), n))
                whole = _WholeTables(a, rhs, tolerance, lb, ub)
            lp_value = lp_lo[k] if sense > 0 else lp_hi[k]
            value, why = whole.bound(int(k), sense, lp_value, w_lo, w_hi, deadline)
            if value is None:
                return nan, nan.copy(), n_solves + whole.solves, why, np.zeros(n, bool)
            if sense > 0:
                out_lo[k] = value
            else:
                out_hi[k] = value
    at_lo, at_hi = reached_lo(), reached_hi()
    lower = np.where(at_lo, out_lo, np.where(wanted, w_lo, np.nan))
    upper = np.where(at_hi, out_hi, np.where(wanted, w_hi, np.nan))
    exact = at_lo & at_hi
    return lower, upper, n_solves + (0 if whole is None else whole.solves), "optimal", ~exact


class _WholeTables:
    """The bounds of one group over tables of whole numbers (:func:`feasibility_intervals`,
    Notes), by feasibility MIPs: is there a whole-number table with ``x_j <= c`` (or
    ``>= c``)? The LP's bound rounded inwards is tried first (usually met), then the
    interval up to the best whole table seen is bisected. A feasibility MIP stops at its
    first point, where an optimising one had to close its gap: on a 20x20x10 count table
    (1,292 hidden cells) the optimising MIPs did not finish one group in 60 s."""

    def __init__(self, a, rhs, tolerance, lb, ub):
        n = a.shape[1]
        self.lb, self.ub = lb, ub
        self.h = highs.model(
            np.zeros(n), lb, ub, a, rhs - tolerance, rhs + tolerance, integer=np.ones(n, bool)
        )
        self.solves = 0

    def _point(self, j: int, lo: float, hi: float, deadline: float):
        """A whole-number table with ``lo <= x_j <= hi``: (outcome, table or None)."""
        self.h.changeColBounds(j, max(lo, self.lb[j]), min(hi, self.ub[j]))
        outcome = highs.run(self.h, deadline)
        self.solves += 1
        x = None
        if outcome is Outcome.OPTIMAL and highs.has_point(self.h):
            x = np.round(np.asarray(self.h.getSolution().col_value))
        # Read before: a change to the model clears its solution.
        self.h.changeColBounds(j, self.lb[j], self.ub[j])
        return outcome, x

    def bound(self, j: int, sense: float, lp_value: float, seen_lo, seen_hi, deadline: float):
        """The least (``sense > 0``) or greatest whole value of ``x_j``, from the LP's
        bound ``lp_value``; ``seen_lo``/``seen_hi``: the extremes of the whole tables seen
        (updated in place with every table found). Returns (bound, None) or (None, why
        it is not proven)."""
        slack = WHOLE_ATOL * max(1.0, abs(lp_value))
        # For sense > 0 the least value lies in [near, far], far met by a table seen
        # (mirrored for sense < 0); the first probe is the LP's bound rounded inwards,
        # which a table usually meets, then the bisection.
        near = np.ceil(lp_value - slack) if sense > 0 else np.floor(lp_value + slack)
        far = seen_lo[j] if sense > 0 else seen_hi[j]
        probe = near
        while (near < far) if sense > 0 else (near > far):
            if not np.isfinite(far):
                probe = near
            lo, hi = (-np.inf, probe) if sense > 0 else (probe, np.inf)
            outcome, x = self._point(j, lo, hi, deadline)
            if x is None and outcome is Outcome.INFEASIBLE and not np.isfinite(far):
                # No whole table seen yet to bisect towards: any table of the group.
                near = probe + sense
                outcome, x = self._point(j, -np.inf, np.inf, deadline)
                if x is None:
                    # The group holds no whole table at all (the true one is one).
                    return None, outcome.value if outcome is Outcome.TIME_LIMIT else "error"
            elif x is None and outcome is Outcome.INFEASIBLE:
                near = probe + sense
            if x is None and outcome is not Outcome.INFEASIBLE:
                return None, outcome.value if outcome is Outcome.TIME_LIMIT else "error"
            if x is not None:
                np.minimum(seen_lo, x, out=seen_lo)
                np.maximum(seen_hi, x, out=seen_hi)
                far = x[j]
            half = (near + far) / 2
            probe = np.floor(half) if sense > 0 else np.ceil(half)
        return float(far), None


def _settle(a, rhs, tolerance, lb, ub, lower, upper, seen_lo, seen_hi):
    """Prove, in place, every open bound (nan in ``lower``/``upper``) that a feasible point
    already reaches: where the tightest bound implied by a-priori bounds and single
    relations (:func:`_implied_bounds`) is within ``_AT_BOUND_RTOL`` of the least (greatest)
    value the cell took at an earlier LP optimum ``seen_lo`` (``seen_hi``), no table does
    better, and that bound is the cell's min (max).

    The relations and bounds are those of the interval LP (seed 002 section 3, eqs.
    3.1-3.5); the known intervals of the other cells, proven or a-priori, enter the implied
    bounds. Of the maxima of the 20x20x10 benchmark pattern, 858 of 868 are such a bound.
    """
    known_lo = np.where(np.isnan(lower), lb, lower)
    known_hi = np.where(np.isnan(upper), ub, upper)
    implied_lo, implied_hi = _implied_bounds(a, rhs, tolerance, known_lo, known_hi)
    implied_lo, implied_hi = np.maximum(implied_lo, lb), np.minimum(implied_hi, ub)
    with np.errstate(invalid="ignore"):
        # A point on an a-priori bound proves that bound itself, not a relation's bound a
        # round-off inside it (7e-12 for 0 on 8x6x5x4).
        implied_lo = np.where(
            seen_lo <= lb + _AT_BOUND_RTOL * np.maximum(1.0, np.abs(lb)), lb, implied_lo
        )
        implied_hi = np.where(
            seen_hi >= ub - _AT_BOUND_RTOL * np.maximum(1.0, np.abs(ub)), ub, implied_hi
        )
        lo_tol = _AT_BOUND_RTOL * np.maximum(1.0, np.abs(implied_lo))
        hi_tol = _AT_BOUND_RTOL * np.maximum(1.0, np.abs(implied_hi))
        reached_lo = np.isnan(lower) & np.isfinite(implied_lo) & (seen_lo <= implied_lo + lo_tol)
        reached_hi = np.isnan(upper) & np.isfinite(implied_hi) & (seen_hi >= implied_hi - hi_tol)
    lower[reached_lo] = implied_lo[reached_lo]
    upper[reached_hi] = implied_hi[reached_hi]


def _implied_bounds(a, rhs, tolerance, lo, hi):
    """Per column ``j`` of ``a`` (CSC, no explicit zeros, every column with an entry: a
    group of two or more cells), the tightest bounds on ``x_j`` that one relation
    ``|a_r x - rhs_r| <= tolerance`` gives with the other cells within ``lo <= x <= hi``
    (seed 002 section 3, eqs. 3.1-3.5)::

        a_rj x_j <= rhs_r + tolerance - sum_{k != j} min(a_rk lo_k, a_rk hi_k)
        a_rj x_j >= rhs_r - tolerance - sum_{k != j} max(a_rk lo_k, a_rk hi_k)

    divided by ``a_rj`` (sides swapped when it is negative); ``-inf``/``inf`` where an
    other cell's term is unbounded.
    """
    coef, rows = a.data, a.indices
    cols = np.repeat(np.arange(a.shape[1]), np.diff(a.indptr))
    least = np.where(coef > 0, coef * lo[cols], coef * hi[cols])
    most = np.where(coef > 0, coef * hi[cols], coef * lo[cols])
    n_rows = len(rhs)

    def others(term, unbounded):
        # Sum of the other entries' terms of each entry's row; ``unbounded`` where one is
        # infinite.
        infinite = ~np.isfinite(term)
        finite = np.where(infinite, 0.0, term)
        total = np.bincount(rows, finite, minlength=n_rows)[rows] - finite
        n_inf = np.bincount(rows, infinite, minlength=n_rows)[rows] - infinite
        return np.where(n_inf > 0, unbounded, total)

    top = rhs[rows] + tolerance - others(least, -np.inf)
    bottom = rhs[rows] - tolerance - others(most, np.inf)
    upper = np.where(coef > 0, top, bottom) / coef
    lower = np.where(coef > 0, bottom, top) / coef
    starts = a.indptr[:-1]
    return np.maximum.reduceat(lower, starts), np.minimum.reduceat(upper, starts)


@dataclass(frozen=True)
class ProtectionCheck:
    """Verdict of the interval audit per cell (seed 003 B.2.a.iii).

    Attributes
    ----------
    exact : numpy.ndarray of bool
        Lower and upper bound coincide: the cell is disclosed exactly.
    upper_too_close, lower_too_close : numpy.ndarray of bool
        The upper (lower) bound is nearer the value than the upper (lower) protection level.
    too_narrow : numpy.ndarray of bool
        The interval is narrower than the two protection levels together.
    missing_upper, missing_lower : numpy.ndarray of float
        How far the bound falls short of its protection level (0 when it does not, nan
        when the interval is not certified).
    protected : numpy.ndarray of bool
        Certified and no flag raised.
    sensitive : numpy.ndarray of bool
        The cells that were checked against their protection levels.
    """

    exact: np.ndarray
    upper_too_close: np.ndarray
    lower_too_close: np.ndarray
    too_narrow: np.ndarray
    missing_upper: np.ndarray
    missing_lower: np.ndarray
    protected: np.ndarray
    sensitive: np.ndarray

    @property
    def all_protected(self) -> bool:
        """Whether every sensitive cell is protected."""
        return bool(self.protected[self.sensitive].all())


def check_protection(
    values,
    lower,
    upper,
    upper_protection,
    lower_protection,
    sensitive_mask,
    certified,
    *,
    rtol: float = PROTECTION_RTOL,
) -> ProtectionCheck:
    """Hold each sensitive cell's feasibility interval against its protection levels.

    Parameters
    ----------
    values : array_like
        True cell values.
    lower, upper : array_like
        Feasibility interval bounds (:class:`FeasibilityIntervals`), nan if uncertified.
    upper_protection, lower_protection : array_like or float
        Protection levels ``U``, ``L`` (seed 000, table "Upper protection levels").
    sensitive_mask : array_like of bool
        Cells that need protection; the others get no flag.
    certified : array_like of bool
        Whether each interval was proven.
    rtol : float
        Relative tolerance, see Notes.

    All array arguments are aligned (one entry per cell checked, e.g. per suppressed cell
    in the order of :attr:`FeasibilityIntervals.cells`).

    Returns
    -------
    ProtectionCheck

    Notes
    -----
    With value ``X``, interval ``[X_min, X_max]`` and levels ``U``, ``L`` (seed 003
    B.2.a.iii, the three problems an audit uncovers; seed 000 "Secondary tabular data
    protection methods", the distance to each bound must reach the protection level; seed
    002 section 3, Operational criterion 1, "at least equal")::

        exact            X_max - X_min <= tol
        upper_too_close  X_max - X     < U - min(tol, U / 100)
        lower_too_close  X - X_min     < L - min(tol, L / 100)
        too_narrow       X_max - X_min < U + L - min(tol, (U + L) / 100)
        missing_upper    max(0, U - (X_max - X)), 0 unless upper_too_close
        missing_lower    max(0, L - (X - X_min)), 0 unless lower_too_close

    with ``tol = rtol * max(1, |X|, U, L)`` (infinite levels left out of the maximum),
    and a distance or width in ``[-tol, 0)`` read as 0: ``X`` itself is a feasible value,
    so a bound on the wrong side of it by round-off is ``X``. The default ``rtol = 1e-7``
    is HiGHS's feasibility tolerance.

    The tolerance is relative to what the flags compare, the cell's value and its
    protection levels, never to the interval's bounds. Scaled by a far bound it lets that
    bound excuse the near one: with ``X = X_min = 100``, ``X_max = 1e9 + 100`` and
    ``L = 30``, 1e-7 of ``X_max`` is 100 > L, and a lower bound at the value itself was
    called protected. Round-off on a far bound (HiGHS's tolerance is about 1e-7 of the
    numbers in the model, ~1e2 on 1e9) cannot flip a verdict: a bound enters only the flag
    of its own side (``upper_too_close`` compares ``X_max - X`` with ``U``), where it
    shifts a distance of ~1e9, and the width (``too_narrow``, ``exact``), again ~1e9. A
    bound near enough for its flag to be in question lies within ``|X| + max(U, L)`` of
    zero, so ``tol`` covers its own round-off.

    Sound reading: a shortfall is forgiven as round-off only up to ``tol`` and never by
    more than 1% of the level it falls short of. The value alone can make ``tol`` exceed
    the level (a p%-rule level is the amount by which the cell fails the rule, e.g. 30 on
    a cell of 1e9, where ``tol`` is 100), and forgiving all of ``tol`` would again call a
    bound at the value protected. So a cell called protected has each bound at least 99%
    of its level, and at most ``tol`` short of it, away from its value; an interval of
    width within ``tol`` is a point (exact disclosure) whatever the levels. A level of 0
    is reached by any bound not beyond round-off on the wrong side of the value. Cells
    not sensitive are never flagged; uncertified cells are never flagged and never
    protected, and their missing amounts are nan.
    """
    x, lo, hi = (np.asarray(v, dtype=float) for v in (values, lower, upper))
    up, lp = np.broadcast_arrays(
        np.asarray(upper_protection, dtype=float), np.asarray(lower_protection, dtype=float), x
    )[:2]
    sensitive = np.broadcast_to(np.asarray(sensitive_mask, dtype=bool), x.shape)
    ok = np.broadcast_to(np.asarray(certified, dtype=bool), x.shape) & ~np.isnan(lo) & ~np.isnan(hi)
    finite = lambda v: np.where(np.isfinite(v), np.abs(v), 0.0)
    # Relative to the value and the levels, never to the bounds (see Notes).
    tol = rtol * np.maximum.reduce([np.ones_like(x), np.abs(x), finite(up), finite(lp)])
    forgiven = lambda level: np.minimum(tol, finite(level) / 100.0)
    # X is feasible: a bound at most tol on the wrong side of it is X (nan stays nan).
    clean = lambda d: np.where(d >= -tol, np.maximum(d, 0.0), d)
    check = sensitive & ok
    with np.errstate(invalid="ignore"):
        up_gap, low_gap, width = clean(hi - x), clean(x - lo), clean(hi - lo)
        exact = check & (hi - lo <= tol)
        upper_too_close = check & (up_gap < up - forgiven(up))
        lower_too_close = check & (low_gap < lp - forgiven(lp))
        too_narrow = check & (width < up + lp - forgiven(up + lp))
        missing_upper = np.where(upper_too_close, np.maximum(0.0, up - up_gap), 0.0)
        missing_lower = np.where(lower_too_close, np.maximum(0.0, lp - low_gap), 0.0)
    missing_upper[sensitive & ~ok] = np.nan
    missing_lower[sensitive & ~ok] = np.nan
    protected = ok & ~(exact | upper_too_close | lower_too_close | too_narrow)
    return ProtectionCheck(
        exact,
        upper_too_close,
        lower_too_close,
        too_narrow,
        missing_upper,
        missing_lower,
        protected,
        sensitive.copy(),
    )


VERDICTS = ("safe", "unsafe", "uncertified", "infeasible")


def point_intervals(
    values, lower, upper, certified, *, rtol: float = PROTECTION_RTOL
) -> np.ndarray:
    """Which certified intervals are a point: the cell is computed exactly (derived).

    The width is judged relative to the cell's own value, ``rtol * max(1, |X|)``, never to
    a far bound (issue "interval flags on the right scale")."""
    x, lo, hi = (np.asarray(v, dtype=float) for v in (values, lower, upper))
    with np.errstate(invalid="ignore"):
        return np.asarray(certified, bool) & (hi - lo <= rtol * np.maximum(1.0, np.abs(x)))


@dataclass(frozen=True)
class PatternAudit:
    """Everything the audit of one suppression pattern found.

    Attributes
    ----------
    intervals : FeasibilityIntervals
        Of every suppressed cell.
    protection : ProtectionCheck
        Aligned with ``intervals.cells``.
    unions : UnionCheck or None
        The explicit aggregations (one relation each), shown to analysts; ``None`` when
        no contributions, summaries or union rule were given.
    aggregations : AggregationCheck or None
        Every aggregation an intruder can derive (seed 002 sections 3-6), with the cells
        derived exactly; ``None`` as for ``unions``: only the interval criterion (seed 002
        Operational criterion 1) was then applied, which ``reasons`` says.
    published_sensitive : numpy.ndarray of int
        Sensitive cells the pattern leaves published.
    verdict : {"safe", "unsafe", "uncertified", "infeasible"}
    reasons : tuple of str
        Why the verdict is not ``safe``; for a ``safe`` verdict, what was not checked.
    """

    intervals: FeasibilityIntervals
    protection: ProtectionCheck
    unions: UnionCheck | None
    aggregations: AggregationCheck | None
    published_sensitive: np.ndarray
    verdict: str
    reasons: tuple[str, ...]

    @property
    def safe(self) -> bool:
        return self.verdict == "safe"

    @property
    def derived(self) -> np.ndarray:
        """Suppressed cells an intruder computes exactly (empty when not checked)."""
        if self.aggregations is None:
            return np.zeros(0, np.int64)
        return self.aggregations.derived


@highs.on_wall_clock
def audit_pattern(
    problem: TableProblem, suppressed, *, time_limit: float = 60.0, proven: set | None = None
) -> PatternAudit:
    """Audit a suppression pattern: intervals, protection levels and every aggregation.

    Parameters
    ----------
    problem : TableProblem
        Relations, values, a-priori bounds, sensitive cells and their protection levels
        (seed 000, table "Upper protection levels"), and the contributions (``unions``) for
        the aggregations of suppressed cells (seed 002 sections 3-6, seed 003 B.2.a.i);
        without them that part is not checked and the reasons say so.
    suppressed : array_like of bool, shape (n_cells,)
        The pattern.
    time_limit : float
        Seconds for the whole audit.
    proven : set, optional
        Groups of suppressed cells already proven safe on this same table (the fast
        method's last aggregation round), by their hidden cells
        (:func:`service.sdc.aggregations.check_aggregations`): not proven again.

    Returns
    -------
    PatternAudit

    Notes
    -----
    The verdict is ``safe`` only when every sensitive cell is suppressed, its interval is
    certified and wide enough (:func:`check_protection`, seed 003 B.2.a.ii-iii; seed 002
    Operational criterion 1) and every aggregation of suppressed cells an intruder can
    derive was proven safe by the rule itself (seed 002 Operational criterion 2,
    :func:`service.sdc.aggregations.check_aggregations`), with the cells whose interval
    is a point treated as published. Both criteria are applied because neither implies
    the other (seed 002 Examples 4 and 5). Anything not proven in time makes the verdict
    ``uncertified``, never ``safe``; published values that contradict the relations make
    it ``infeasible``.
    """
    start = time.perf_counter()
    values, sensitive, unions = problem.values, problem.sensitive, problem.unions
    relations = problem.structure
    suppressed = np.asarray(suppressed, dtype=bool)
    iv = feasibility_intervals(
        problem.structure,
        values,
        suppressed,
        problem.lower_bounds,
        problem.upper_bounds,
        time_limit=time_limit,
        tolerance=problem.tolerance,
        integral=problem.integral,
        levels=(sensitive, problem.upper_protection, problem.lower_protection),
    )
    c = iv.cells
    check = check_protection(
        values[c],
        iv.lower,
        iv.upper,
        problem.upper_protection[c],
        problem.lower_protection[c],
        sensitive[c],
        iv.certified,
    )
    published_sensitive = np.flatnonzero(sensitive & ~suppressed)
    union_check = aggregations = None
    if unions is not None and iv.status != "infeasible":
        union_check = unions.check(relations, values, suppressed, sensitive)
        derived = np.zeros(len(values), bool)
        derived[c[point_intervals(values[c], iv.lower, iv.upper, iv.certified)]] = True
        aggregations = check_aggregations(
            relations,
            values,
            suppressed,
            unions,
            derived=derived,
            deadline=start + time_limit,
            proven=proven,
        )

    reasons = []
    if iv.status == "infeasible":
        return PatternAudit(iv, check, None, None, published_sensitive, "infeasible", (iv.message,))
    conditions = check_conditions(problem, suppressed, start + time_limit)
    if published_sensitive.size:
        reasons.append(f"{published_sensitive.size} sensitive cell(s) published")
    if conditions.cells.size:
        reasons.append(
            f"{conditions.cells.size} cell(s) flagged by seed 001's dominance rules (1a, 1b, "
            "2a, 2b) whose rule every whole-number table consistent with the publication "
            "still fires: the cells around them that are published tell the intruder what "
            "the rule protects (e.g. a row's other cells published as zeros)"
        )
    flagged = check.sensitive & iv.certified & ~check.protected
    if flagged.any():
        reasons.append(
            f"{int(flagged.sum())} sensitive cell(s) not protected by their feasibility intervals"
        )
    # The cells whose rule the publication still proves are not protected either.
    check.protected[np.isin(c, conditions.cells)] = False
    if aggregations is not None and aggregations.status == "sensitive":
        reasons.append(aggregations.message)
    if reasons:
        return PatternAudit(
            iv, check, union_check, aggregations, published_sensitive, "unsafe", tuple(reasons)
        )
    uncertified = check.sensitive & ~iv.certified
    if uncertified.any():
        reasons.append(f"{int(uncertified.sum())} sensitive cell(s) not certified: {iv.message}")
    if conditions.undecided.any():
        reasons.append(
            f"{int(conditions.undecided.sum())} dominance condition(s) of seed 001's rules "
            "1-2 not decided in time"
        )
    if aggregations is not None and aggregations.status == "undecided":
        reasons.append(aggregations.message)
    if reasons:
        return PatternAudit(
            iv, check, union_check, aggregations, published_sensitive, "uncertified", tuple(reasons)
        )
    if aggregations is None:
        reasons.append(
            "aggregations of suppressed cells not checked: no contributions, "
            "summaries or union rule were given, so only the feasibility "
            "intervals were checked"
        )
    elif aggregations.status == "not_applicable":
        reasons.append(
            f"aggregations including {aggregations.undecided.size} suppressed "
            "cell(s) without contributions or summary were not checked"
        )
    return PatternAudit(
        iv, check, union_check, aggregations, published_sensitive, "safe", tuple(reasons)
    )


# --- dominance conditions of count tables (seed 001 rules 1-2) ----------------------------


@dataclass(frozen=True)
class ConditionCheck:
    """Which dominance conditions (:class:`service.sdc.problem.RuleConditions`) the
    pattern leaves proven: every table of whole numbers consistent with what is published
    (and the a-priori bounds) fires the rule, though tables consistent with the bounds
    alone need not.

    Attributes
    ----------
    proven, undecided : numpy.ndarray of bool
        One entry per condition; ``undecided``: a solve stopped at the deadline.
    cells : numpy.ndarray of int
        The flagged cells of the proven conditions (sorted, unique).
    """

    proven: np.ndarray
    undecided: np.ndarray
    cells: np.ndarray


def _fires_everywhere(problem: TableProblem, hidden_mask, which, deadline, mip=True) -> tuple:
    """For the conditions ``which``: (fires on every consistent table, undecided), the
    cells ``hidden_mask`` hidden and the others published; ``mip`` false: by the LP
    relaxation, which proves a condition only where no whole table escapes it either."""
    cond = problem.conditions
    assert cond is not None
    a = problem.relations
    hidden = np.flatnonzero(hidden_mask)
    x_pub = np.where(hidden_mask, 0.0, problem.values)
    const = cond.weights @ x_pub
    rhs_all = -(a @ x_pub)
    a_h = a[:, hidden].tocsr()
    active = np.flatnonzero(np.diff(a_h.indptr) > 0)
    inc, rhs = a_h[active], rhs_all[active]
    lb, ub = problem.lower_bounds[hidden], problem.upper_bounds[hidden]
    if problem.integral:
        lb, ub = whole_bounds(lb, ub)
    label = np.zeros(len(hidden), np.int64)
    if len(hidden):
        # Components of the bipartite graph hidden cells <-> relations, linear in the
        # pattern (pattern.T @ pattern has k^2 entries for a relation of k hidden cells).
        pattern = sp.csr_matrix(abs(inc).astype(bool).astype(float))
        graph = sp.bmat([[None, pattern.T], [pattern, None]], format="csr")
        _, labels = connected_components(graph, directed=False)
        label = labels[: len(hidden)]
    inc_c = inc.tocsc()
    w_h = cond.weights[:, hidden].tocsr()
    fires = np.zeros(len(which), bool)
    undecided = np.zeros(len(which), bool)
    tol = problem.tolerance
    integer = problem.integral and mip
    # One model per set of components, its condition row added for each condition and
    # deleted after: the conditions of one block share its rows, and a model built anew
    # per condition (HiGHS's presolve included) took 0.2 s each on a 4,805-cell table
    # with every cell hidden (the a-priori check: 70 conditions, 10 s, beyond a request's
    # time limit); kept, the LP starts from the last basis (0.02 s).
    models: dict[bytes, tuple[highspy.Highs, np.ndarray, int]] = {}
    for n, i in enumerate(which):  # a loop over the few flagged cells
        row = w_h.getrow(int(i))
        need = float(cond.bound[i] - const[i])
        if row.nnz == 0:
            fires[n] = need + 1e-9 * max(1.0, abs(need)) >= 0.0
            continue
        full = cond.weights.getrow(int(i)).data
        if problem.integral and np.all(full == np.round(full)):
            target = whole_above(need)
        else:
            # Strictly above, by more than the solver's feasibility tolerance.
            target = need + 1e-6 * max(1.0, abs(need), float(np.abs(full).max()))
        components = np.unique(label[row.indices])
        key = components.tobytes()
        if key not in models:
            cols = np.flatnonzero(np.isin(label, components))
            block = inc_c[:, cols].tocsr()
            keep = np.flatnonzero(np.diff(block.indptr) > 0)
            h = highs.model(
                np.zeros(len(cols)),
                lb[cols],
                ub[cols],
                block[keep],
                rhs[keep] - tol,
                rhs[keep] + tol,
                integer=np.ones(len(cols), bool) if integer else None,
            )
            models[key] = (h, cols, len(keep))
        h, cols, n_rows = models[key]
        at = np.searchsorted(cols, row.indices)  # the row's cells are in the block
        h.addRow(
            float(target),
            highspy.kHighsInf,
            len(at),
            at.astype(np.int32),
            row.data.astype(float),
        )
        outcome = highs.run(h, deadline)
        if outcome is Outcome.INFEASIBLE:
            fires[n] = True
        elif outcome is not Outcome.OPTIMAL or not highs.has_point(h):
            undecided[n] = True
        h.deleteRows(1, np.array([n_rows], dtype=np.int32))
    return fires, undecided


def check_conditions(problem: TableProblem, suppressed, deadline: float) -> ConditionCheck:
    """The dominance conditions the pattern ``suppressed`` proves (:class:`ConditionCheck`):
    for each, a feasibility problem "is there a table of whole numbers consistent with
    the publication on which the rule does not fire?" (a MIP on count tables), over the
    hidden cells connected to the condition's. Conditions the relations and a-priori
    bounds prove on their own are dropped before (:func:`without_a_priori_conditions`)."""
    cond = problem.conditions
    m = 0 if cond is None else len(cond)
    if cond is None or m == 0:
        return ConditionCheck(np.zeros(m, bool), np.zeros(m, bool), np.zeros(0, np.int64))
    proven, undecided = _fires_everywhere(
        problem, np.asarray(suppressed, bool), np.arange(m), deadline
    )
    return ConditionCheck(proven, undecided, np.unique(cond.cell[proven]))


def without_a_priori_conditions(problem: TableProblem, deadline: float) -> TableProblem:
    """``problem`` without the dominance conditions that hold on every table the
    relations and a-priori bounds allow (a target with a single category, say): those
    the intruder knows before anything is published, so no pattern discloses them. Decided
    on the problem's own bounds, before a method narrows them (partial suppression's
    published intervals are a-priori bounds to its audit) and by LPs: a condition an LP
    does not prove is kept, which can only hold more against a pattern."""
    cond = problem.conditions
    if cond is None or len(cond) == 0:
        return problem
    a_priori, _ = _fires_everywhere(
        problem, np.ones(problem.n_cells, bool), np.arange(len(cond)), deadline, mip=False
    )
    keep = np.flatnonzero(~a_priori)
    kept = RuleConditions(
        cond.cell[keep], tuple(cond.rule[i] for i in keep), cond.weights[keep], cond.bound[keep]
    )
    return replace(problem, conditions=kept)


# --- inner bounds of count tables: whole tables from hypercube moves ----------------------

#: Most entries of the arrays of one batch of hypercubes (about 8 bytes each, a few arrays).
_HYPERCUBE_BATCH = 4_000_000


def _flat_shape(structure) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The shape and the position of each dimension's total of a table whose dimensions
    are all flat (a total and its leaves), else ``None``."""
    from .table import Table

    if not isinstance(structure, Table):
        return None
    roots = []
    for h in structure.dimensions:
        parent = np.asarray(h.parent)
        if h.n_codes < 2 or (parent < 0).sum() != 1:
            return None
        root = int(np.flatnonzero(parent < 0)[0])
        if not (np.delete(parent, root) == root).all():
            return None
        roots.append(root)
    return tuple(structure.shape), tuple(roots)


def _dimension_pairs(m: int, root: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of codes ``a < b`` of a flat dimension of ``m`` codes whose total is at
    ``root``, and the sign of ``b``: the deviation ``e_a + sign e_b`` keeps the
    dimension's one relation ``x_root - sum_leaves x = 0`` (two leaves: ``e_a - e_b``;
    the total and a leaf: ``e_root + e_leaf``)."""
    a, b = np.triu_indices(m, k=1)
    sign = np.where((a == root) | (b == root), 1.0, -1.0)
    return a, b, sign


def _hypercube(shape, roots, pairs) -> np.ndarray:
    """The deviation of one hypercube, a vector over the cells: the outer product over the
    dimensions of ``e_a + sign e_b`` for the pair ``(a, b)`` of codes chosen on each
    (:func:`_dimension_pairs`). Every relation of a flat table runs along one dimension
    with the other codes fixed, where it meets that dimension's factor, which keeps it:
    ``A z = 0``."""
    z = np.ones(())
    for m, root, (a, b) in zip(shape, roots, pairs, strict=True):
        w = np.zeros(m)
        w[a] = 1.0
        w[b] = 1.0 if root in (a, b) else -1.0
        z = np.multiply.outer(z, w)
    return z.ravel()


def _hypercube_moves(shape, roots, room_up, room_down, deadline):
    """The largest whole moves up and down of every cell that one hypercube proves.

    ``room_up``/``room_down`` (one per cell, 0 for a published cell) are how far each cell
    can go up (down) from a whole table ``v`` within its bounds. A hypercube ``z``
    (:func:`_hypercube`) moves ``2^d`` cells by +-1 and keeps every relation, so ``v + t z``
    is a whole table for every whole ``t`` with each moved cell within its room: up to
    ``floor(min(room_up where z = 1, room_down where z = -1))``, and ``-z`` likewise. A
    cell's move up is the largest step of a hypercube moving it up, in either orientation.

    Vectorised one dimension at a time: replacing a dimension's codes by its pairs takes
    the least room of the two codes (in the orientation the pair's sign gives), and the
    way back the greatest step of the pairs that hold a code; batches over the first
    dimension's pairs bound the memory. Returns ``(up, down)``; where the deadline cut the
    batches short, the moves are those of the hypercubes seen (still proven).
    """
    d = len(shape)
    dims = [_dimension_pairs(m, r) for m, r in zip(shape, roots, strict=True)]
    up0 = np.asarray(room_up, float).reshape(shape)
    down0 = np.asarray(room_down, float).reshape(shape)
    best_up = np.zeros(shape)
    best_down = np.zeros(shape)

    def along(k, v, n):
        s = [1] * n
        s[k] = -1
        return v.reshape(s)

    def squeeze(p, q, k, a, b, sign):
        # Codes -> pairs on axis k: (room in +z, room in -z) of each pair.
        pos = along(k, sign, p.ndim) > 0
        pa, qa = np.take(p, a, axis=k), np.take(q, a, axis=k)
        pb, qb = np.take(p, b, axis=k), np.take(q, b, axis=k)
        return np.minimum(pa, np.where(pos, pb, qb)), np.minimum(qa, np.where(pos, qb, pb))

    def spread(p, q, k, m, a, b, sign):
        # Pairs -> codes on axis k: the greatest step moving each code up (down).
        shape_out = list(p.shape)
        shape_out[k] = m
        out_p, out_q = np.zeros(shape_out), np.zeros(shape_out)
        for c in range(m):
            ia = np.flatnonzero(a == c)
            ib = np.flatnonzero(b == c)
            parts_p = [np.take(p, ia, axis=k)]
            parts_q = [np.take(q, ia, axis=k)]
            if ib.size:
                pos = along(k, sign[ib], p.ndim) > 0
                pb, qb = np.take(p, ib, axis=k), np.take(q, ib, axis=k)
                parts_p.append(np.where(pos, pb, qb))
                parts_q.append(np.where(pos, qb, pb))
            idx: list[slice | int] = [slice(None)] * p.ndim
            idx[k] = c
            cat_p = np.concatenate(parts_p, axis=k)
            cat_q = np.concatenate(parts_q, axis=k)
            if cat_p.shape[k]:
                out_p[tuple(idx)] = cat_p.max(axis=k)
                out_q[tuple(idx)] = cat_q.max(axis=k)
        return out_p, out_q

    rest = int(np.prod([len(a) for a, _, _ in dims[1:]])) * int(np.prod(shape[1:]) or 1)
    batch = max(1, _HYPERCUBE_BATCH // max(rest, 1))
    a0, b0, s0 = dims[0]
    for first in range(0, len(a0), batch):
        if time.perf_counter() >= deadline:
            break
        sel = slice(first, first + batch)
        p, q = squeeze(up0, down0, 0, a0[sel], b0[sel], s0[sel])
        for k in range(1, d):
            p, q = squeeze(p, q, k, *dims[k])
        # Whole steps: the rooms are whole or infinite.
        p, q = np.floor(p), np.floor(q)
        for k in range(d - 1, 0, -1):
            p, q = spread(p, q, k, shape[k], *dims[k])
        p, q = spread(p, q, 0, shape[0], a0[sel], b0[sel], s0[sel])
        np.maximum(best_up, p, out=best_up)
        np.maximum(best_down, q, out=best_down)
    return best_up.ravel(), best_down.ravel()
