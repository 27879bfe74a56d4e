"""Reference implementations the tests (and ``benchmarks/audit.py``) check the service
against: plain, slow, obviously right."""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import linprog

from service.sdc.audit import (
    FeasibilityIntervals,
    _check_inputs,
    _published_contradiction,
)
from service.sdc.errors import InputError


def feasibility_intervals_naive(
    relations,
    values,
    suppressed,
    lower_bounds=0.0,
    upper_bounds=np.inf,
    *,
    time_limit: float = 60.0,
    cells=None,
) -> FeasibilityIntervals:
    """Baseline of :func:`feasibility_intervals`: a fresh full LP for every bound.

    Same problem (seed 000, "Secondary tabular data protection methods", Example 3; seed
    003 B.2.a.ii), solved the plain way: for every cell and sense,
    ``scipy.optimize.linprog(method="highs")`` over all cells, with ``A x = 0`` and the
    published cells fixed by their bounds. No elimination, decomposition or warm start;
    kept as an independent check and as the benchmark's reference.

    Parameters
    ----------
    relations, values, suppressed, lower_bounds, upper_bounds, time_limit
        As for :func:`feasibility_intervals`.
    cells : array_like of int, optional
        Bound only these suppressed cells (e.g. a sample, for timing); default all.

    Returns
    -------
    FeasibilityIntervals
        Aligned with ``cells``; ``n_components`` is 0.
    """
    start = time.perf_counter()
    p = _check_inputs(relations, values, suppressed, lower_bounds, upper_bounds, time_limit)
    deadline = start + p.time_limit
    if cells is None:
        cells = np.flatnonzero(p.suppressed)
    cells = np.asarray(cells, dtype=np.int64)
    if not p.suppressed[cells].all():
        raise InputError("cells must be suppressed cells", field="cells")
    lower = np.full(len(cells), np.nan)
    upper = np.full(len(cells), np.nan)

    def result(status, message, n_lp):
        certified = ~np.isnan(lower) & ~np.isnan(upper)
        return FeasibilityIntervals(
            cells, lower, upper, certified, status, message, n_lp, time.perf_counter() - start
        )

    if (why := _published_contradiction(p)) is not None:
        lower[:] = upper[:] = np.nan
        return result("infeasible", why, 0)
    n = p.a.shape[1]
    bounds = np.column_stack(
        [np.where(p.suppressed, p.lower, p.values), np.where(p.suppressed, p.upper, p.values)]
    )
    b_eq = np.zeros(p.a.shape[0])
    n_lp = 0
    for i, j in enumerate(cells):
        for sense, out in ((1.0, lower), (-1.0, upper)):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return result("time_limit", "time limit reached", n_lp)
            c = np.zeros(n)
            c[j] = sense
            res = linprog(
                c,
                A_eq=p.a,
                b_eq=b_eq,
                bounds=bounds,
                method="highs",
                options={"time_limit": remaining},
            )
            n_lp += 1
            if res.status == 0:
                out[i] = sense * res.fun
            elif res.status == 3:
                out[i] = -sense * np.inf
            elif res.status == 2:
                lower[:] = upper[:] = np.nan
                return result("infeasible", res.message, n_lp)
            elif res.status == 1:
                return result("time_limit", res.message, n_lp)
            else:
                return result("error", res.message, n_lp)
    return result("optimal", "all intervals certified", n_lp)


def brute_force(relations, values, suppressed, lower=0.0, upper=np.inf) -> np.ndarray:
    """``[min, max]`` per suppressed cell: one fresh dense LP over all cells per bound."""
    a = relations.toarray()
    n = a.shape[1]
    lo = np.where(suppressed, lower, values)
    hi = np.where(suppressed, upper, values)
    out = []
    for j in np.flatnonzero(suppressed):
        pair = []
        for sense in (1.0, -1.0):
            c = np.zeros(n)
            c[j] = sense
            res = linprog(
                c, A_eq=a, b_eq=np.zeros(len(a)), bounds=np.column_stack([lo, hi]), method="highs"
            )
            assert res.status in (0, 3), res.message
            pair.append(sense * res.fun if res.status == 0 else -sense * np.inf)
        out.append(pair)
    return np.array(out).reshape(-1, 2)
