"""The suppression problem as the search sees it: costs, capped rooms, protection
requirements (seed 000 "Secondary tabular data protection methods"; seed 003 B.2.b).

See :mod:`service.sdc.suppress` for the model and the readings applied by :func:`prepare`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..problem import TableProblem, reachable_levels

COST_KINDS = ("value", "unity", "contributors", "log", "weights")
#: A sensitive cell with no protection level must still not be disclosed exactly: it gets
#: this share of its value (at least 1) as upper level, above the audit's exactness
#: tolerance; so does one whose levels add up to less, which the search's LPs cannot tell
#: from 0 (a level of 1e-9 on a cell of 10 was "met" by the cell alone, a helper's probe).
MIN_LEVEL_RTOL = 1e-4


def cell_costs(kind: str, values, counts=None, weights=None) -> np.ndarray:
    """Information loss of suppressing each cell (seed 002 section 3: "minimise the total
    suppressed value, minimise the number of suppressed cell values, or minimise the number
    of contributions"; ``log`` damps the dominance of the largest cells, as tau-ARGUS'
    ``distance``-free log cost does).

    ``value``: ``|a_j|``; ``unity``: 1; ``contributors``: ``N_j``; ``log``:
    ``log(1 + |a_j|)``; ``weights``: as given. Costs must be finite and >= 0.
    """
    a = np.abs(np.asarray(values, dtype=float))
    if kind == "value":
        c = a
    elif kind == "unity":
        c = np.ones_like(a)
    elif kind == "contributors":
        if counts is None:
            raise InputError("cost 'contributors' needs the cells' contributors", field="cost")
        c = np.asarray(counts, dtype=float)
    elif kind == "log":
        c = np.log1p(a)
    elif kind == "weights":
        if weights is None:
            raise InputError("cost 'weights' needs a weight per cell", field="cost")
        c = np.asarray(weights, dtype=float)
    else:
        raise InputError(f"unknown cost {kind!r}; one of {', '.join(COST_KINDS)}", field="cost")
    if c.shape != a.shape or not np.isfinite(c).all() or (c < 0).any():
        raise InputError("costs must be finite numbers >= 0, one per cell", field="cost")
    return c


@dataclass
class SearchProblem:
    """The table problem as the search sees it: levels floored and capped (module
    :mod:`service.sdc.suppress`, Readings), rooms capped, which cells may be complements;
    ``table`` is the problem with those levels, the one every pattern is audited on."""

    table: TableProblem
    a: sp.csr_matrix
    values: np.ndarray
    sensitive: np.ndarray
    upl: np.ndarray
    lpl: np.ndarray
    room_up: np.ndarray  # U_j, capped
    room_down: np.ndarray  # D_j
    cost: np.ndarray
    allowed: np.ndarray  # may be a complement
    forced: np.ndarray
    lower_bounds: np.ndarray
    upper_bounds: np.ndarray
    deadline: float


def requirements(p: SearchProblem) -> list[tuple[int, float, float]]:
    """(cell, direction, level) of every protection requirement, largest cells first."""
    order = np.flatnonzero(p.sensitive)
    order = order[np.argsort(-np.abs(p.values[order]), kind="stable")]
    out = []
    for i in order.tolist():
        out.append((i, 1.0, p.upl[i]))
        if p.lpl[i] > 0:
            out.append((i, -1.0, p.lpl[i]))
    return out


def prepare(table: TableProblem, cost, forbidden, forced, deadline: float) -> SearchProblem:
    """The search's view of ``table`` (module :mod:`service.sdc.suppress`, Readings)."""
    a, x, sens = table.relations, table.values, table.sensitive
    n = len(x)
    upl, lpl = table.upper_protection, table.lower_protection
    lb, ub = table.lower_bounds, table.upper_bounds
    if not np.isfinite(x).all():
        j = int(np.flatnonzero(~np.isfinite(x))[0])
        raise InputError("cell values must be finite numbers", field="values", cell=j)
    floor = MIN_LEVEL_RTOL * np.maximum(1.0, np.abs(x))
    upl = np.where(sens & (upl + lpl < floor), np.maximum(upl, floor), upl)
    cap = 2.0 * np.abs(x).max(initial=0.0) + upl.max(initial=0.0) + 1.0
    room_up = np.minimum(ub - x, cap)
    room_down = np.minimum(x - lb, cap)
    if (room_up < 0).any() or (room_down < 0).any():
        j = int(np.flatnonzero((room_up < 0) | (room_down < 0))[0])
        raise InputError(f"cell {j} lies outside its a-priori bounds", field="lower_bounds", cell=j)
    upl, lpl = reachable_levels(x, upl, lpl, lb, ub)
    forbidden = np.zeros(n, bool) if forbidden is None else np.asarray(forbidden, bool)
    forced = np.zeros(n, bool) if forced is None else np.asarray(forced, bool)
    both = forbidden & (forced | sens)
    if both.any():
        j = int(np.flatnonzero(both)[0])
        raise InputError(
            "a cell cannot be both forbidden and sensitive or forced", field="forbidden", cell=j
        )
    allowed = ~forbidden & (x != 0)
    audited = replace(table, upper_protection=upl, lower_protection=lpl)
    return SearchProblem(
        audited,
        a,
        x,
        sens,
        upl,
        lpl,
        room_up,
        room_down,
        np.asarray(cost, float),
        allowed | sens | forced,
        forced | sens,
        lb,
        ub,
        deadline,
    )
