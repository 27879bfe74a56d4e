"""A table protection problem: what the audit and the suppression methods take.

One object carries what seed 000 ("Secondary tabular data protection methods") and seed 002
section 3 call the input of the cell suppression problem: the table's linear relations
``A x = 0`` (from a :class:`~service.sdc.table.Table`, linked tables, or a bare matrix),
the cell values, the intruder's a-priori bounds, the sensitive cells with their upper and
lower protection levels, the contributions behind the cells (for the aggregation check of
seed 002 sections 3-6) and the additivity tolerance the table was accepted with.

:meth:`TableProblem.of` checks shapes and numbers once, naming the offending input and
cell in core terms (:class:`~service.sdc.errors.InputError` fields ``values``,
``sensitive``, ``upper_protection``, ``lower_protection``, ``lower_bounds``,
``upper_bounds``, ``tolerance``); the layer that built the problem from a request maps
those to its own field names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .errors import InputError

if TYPE_CHECKING:
    from .unions import UnionSource


@dataclass(frozen=True, eq=False)
class RuleConditions:
    """What seed 001's dominance rules (1a, 1b, 2a, 2b) found on a count table, as linear
    conditions a published table must not prove (group disclosure).

    Condition ``i`` is the rule ``rule[i]`` firing for cell ``cell[i]``: it fires when
    ``weights[i] @ x <= bound[i]`` (rule 1a: ``f_k - f_yk <= t_k,abs``; rule 2a:
    ``t_k,rel f_k - 100 f_yk <= 0``; 1b and 2b with ``f_y``). It fires on the true table;
    the pattern protects the cell from it only if some table of whole numbers consistent
    with what is published does not fire it (seed 001, Example: "everybody else in this
    row has to have Y = A" must not follow from the publication).

    Attributes
    ----------
    cell : numpy.ndarray of int
        The flagged cell of each condition.
    rule : tuple of str
        Its rule ("1a", "1b", "2a", "2b").
    weights : scipy.sparse.csr_matrix, shape (n_conditions, n_cells)
    bound : numpy.ndarray of float
    """

    cell: np.ndarray
    rule: tuple[str, ...]
    weights: sp.csr_matrix
    bound: np.ndarray

    def __len__(self) -> int:
        return len(self.cell)


def whole_above(value: float) -> float:
    """The least whole number strictly above ``value`` (a value within round-off of a
    whole number counts as it): what ``w x`` must reach on a count table, whose ``x`` are
    whole, to escape a dominance condition ``w x <= value`` (:class:`RuleConditions`)."""
    return float(np.floor(value + 1e-9 * max(1.0, abs(value))) + 1.0)


@dataclass(frozen=True, eq=False)
class TableProblem:
    """Relations, values, bounds, sensitivity, protection levels, contributions.

    Attributes
    ----------
    structure : Table, LinkedTables or scipy.sparse matrix
        Where the relations come from (a table also tells the aggregation check which
        cells are leaves).
    values : numpy.ndarray of float, shape (n_cells,)
        True cell values.
    sensitive : numpy.ndarray of bool
        Cells that need protection.
    upper_protection, lower_protection : numpy.ndarray of float
        Their protection levels (seed 000, table "Upper protection levels"); 0 elsewhere.
    lower_bounds, upper_bounds : numpy.ndarray of float
        The intruder's a-priori bounds (default ``0`` and ``+inf``).
    unions : UnionSource or None
        Contributions and rules for the aggregation check; ``None`` when not known.
    tolerance : float
        Absolute additivity tolerance (:func:`service.sdc.audit.feasibility_intervals`).
    integral : bool
        The values are counts, known to the intruder to be whole numbers: the audit's
        intervals are those of whole-number tables
        (:func:`service.sdc.audit.feasibility_intervals`).
    conditions : RuleConditions or None
        A count table's dominance conditions (seed 001 rules 1-2) the audit checks
        beside the intervals (:func:`service.sdc.audit.audit_pattern`); ``None``: none.
    """

    structure: object
    values: np.ndarray
    sensitive: np.ndarray
    upper_protection: np.ndarray
    lower_protection: np.ndarray
    lower_bounds: np.ndarray
    upper_bounds: np.ndarray
    unions: UnionSource | None = None
    tolerance: float = 0.0
    integral: bool = False
    conditions: RuleConditions | None = None

    @classmethod
    def of(
        cls,
        structure,
        values,
        sensitive=None,
        upper_protection=0.0,
        lower_protection=0.0,
        lower_bounds=0.0,
        upper_bounds=np.inf,
        *,
        unions: UnionSource | None = None,
        tolerance: float = 0.0,
        integral: bool = False,
        conditions: RuleConditions | None = None,
    ) -> TableProblem:
        """A problem from arrays or scalars (broadcast to every cell), checked."""
        n = relations_of(structure).shape[1]
        x = np.asarray(values, dtype=float)
        if x.shape != (n,):
            raise InputError(
                f"values must have one entry per cell ({n}), got shape {x.shape}", field="values"
            )
        sens = np.zeros(n, bool) if sensitive is None else np.asarray(sensitive, bool)
        if sens.shape != (n,):
            raise InputError(
                f"sensitive must be a boolean mask with one entry per cell ({n})", field="sensitive"
            )
        upl = np.where(sens, vector(upper_protection, n, "upper_protection"), 0.0)
        lpl = np.where(sens, vector(lower_protection, n, "lower_protection"), 0.0)
        for name, level in (("upper_protection", upl), ("lower_protection", lpl)):
            bad = ~(level >= 0)
            if bad.any():
                raise InputError(
                    "protection levels must be numbers >= 0",
                    field=name,
                    cell=int(np.flatnonzero(bad)[0]),
                )
        lb, ub = bounds(lower_bounds, upper_bounds, n)
        if not (np.isfinite(tolerance) and tolerance >= 0):
            raise InputError("tolerance must be a finite number >= 0", field="tolerance")
        return cls(
            structure, x, sens, upl, lpl, lb, ub, unions, float(tolerance), integral, conditions
        )

    @cached_property
    def relations(self) -> sp.csr_matrix:
        """``A``, one row per relation, without stored zeros."""
        return relations_of(self.structure)

    @property
    def n_cells(self) -> int:
        return len(self.values)


def relations_of(structure) -> sp.csr_matrix:
    """The relations matrix ``A`` of a table, linked tables or a matrix, without stored
    zeros (they would count as a cell taking part in a relation)."""
    a = getattr(structure, "relations", structure)
    if not sp.issparse(a):
        a = np.asarray(a, dtype=float)
        if a.ndim != 2:
            raise InputError("relations must be a 2-D matrix or a table", field="relations")
    a = sp.csr_matrix(a, dtype=float)
    if (a.data == 0).any():
        a = a.copy()
        a.eliminate_zeros()
    return a


#: Relative distance from a whole number within which a solver's value counts as whole.
WHOLE_ATOL = 1e-6


def whole_bounds(lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A-priori bounds of whole numbers: ``ceil(lb)``, ``floor(ub)`` (up to round-off):
    what an intruder who knows the cells are counts (Cox 2002) knows of them."""
    slack = WHOLE_ATOL * np.maximum(1.0, np.abs(lb))
    lo = np.where(np.isfinite(lb), np.ceil(lb - slack), lb)
    slack = WHOLE_ATOL * np.maximum(1.0, np.abs(ub))
    hi = np.where(np.isfinite(ub), np.floor(ub + slack), ub)
    return lo, hi


def reachable_levels(values, upper, lower, lower_bounds, upper_bounds, integral=False):
    """Protection levels capped at the a-priori range: ``min(U, ub - x)`` and
    ``min(L, x - lb)``, never below 0; for the methods judged by feasibility intervals.
    With ``integral`` (count tables) the range is that of whole numbers,
    :func:`whole_bounds`: a count with the bound 1.5 is known to be at least 2, so a count
    of 2 there needs no lower protection; until 2026-11-28 its level stayed 0.5, met by no
    table of whole numbers, and every pattern was called unsafe.

    An intruder is never less certain than the bounds it knew before anything was
    published (seed 002 section 3: the feasibility interval lies within the a-priori
    bounds), so a level beyond the distance from the value to its bound is met by no
    pattern; an interval reaching the bound is all the protection there is. Seed 000's
    levels can exceed it on tables of non-negative values: under the (1, 40) dominance
    rule a singleton of 100 has ``L = 150`` against the bound 0. Fischetti and Salazar
    assume the same (``L <= x - lb``, ``U <= ub - x``) and tau-ARGUS caps the levels so.
    The bounds must be the a-priori ones: capped by bounds narrowed to published
    intervals (partial suppression's audit) every level would be met. Not for controlled
    adjustment, where a cell must move by its level and a direction that cannot is not
    taken (:func:`service.sdc.cta.adjust`). The suppression search capped the levels and
    the service's audit did not, so ``/v1/audit`` called unsafe the pattern
    ``/v1/suppress`` returned as safe (a helper's campaign, 2026-11-27)."""
    if integral:
        lower_bounds, upper_bounds = whole_bounds(
            np.asarray(lower_bounds, dtype=float), np.asarray(upper_bounds, dtype=float)
        )
    upper = np.minimum(upper, np.maximum(upper_bounds - values, 0.0))
    lower = np.minimum(lower, np.maximum(values - lower_bounds, 0.0))
    return upper, lower


def vector(v, n: int, name: str) -> np.ndarray:
    """``v`` (a number or one per cell) as a float array of ``n`` entries."""
    try:
        return np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy()
    except ValueError:
        raise InputError(
            f"{name} must be a number or have one entry per cell ({n})", field=name
        ) from None


def bounds(lower_bounds, upper_bounds, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A-priori bounds as arrays, checked: numbers, and a non-empty range per cell."""
    out = []
    for name, b in (("lower_bounds", lower_bounds), ("upper_bounds", upper_bounds)):
        b = vector(b, n, name)
        if np.isnan(b).any():
            cell = int(np.flatnonzero(np.isnan(b))[0])
            raise InputError(f"{name} of cell {cell} is nan", field=name, cell=cell)
        out.append(b)
    lb, ub = out
    empty = (lb > ub) | np.isposinf(lb) | np.isneginf(ub)
    if empty.any():
        cell = int(np.flatnonzero(empty)[0])
        # No numbers in messages: bounds can be confidential.
        raise InputError(
            f"bounds of cell {cell} are empty (lower above upper, or infinite)",
            field="lower_bounds",
            cell=cell,
        )
    return lb, ub
