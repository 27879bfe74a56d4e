"""Contributions to ordered magnitudes: what every sensitivity rule reads of a cell.

A rule never sees individual records. For each cell it sees the cell total ``X`` as the
intruder knows it, the number of contributors ``N``, and the few largest contributions at
the level of the entity to be protected (the holding), in the order the rule needs them.
This module turns raw contributions (or caller-made summaries) into those arrays, for all
cells at once.

Readings of the seeds chosen here (each is documented where it is implemented):

* Holdings (seed 000, "Holdings"): contributions of one holding are summed per cell before
  any rule; a contribution without a holding id is its own respondent.
* Sampling weights (seed 000, "Sampling weights"): three formulations, chosen by the caller:
  ``replicate`` (the tau-ARGUS approximation), ``sample`` (eq-p-percent-weighted and
  eq-dominance-weighted) and ``sample_public_weights`` (eq-p-percent-weighted-alt, for
  weights that are not confidential). Weights cannot be combined with holdings (the seed's
  Note) nor, for the same reason, with waivers or protection requests, which are facts about
  a respondent that the replicated pseudo-respondents do not carry.
* Requests (seed 000, "Foreign trade rules"): the request rule protects the enterprises
  that asked for protection, and a holding is one enterprise, so a holding's request,
  sent with any of its contributions, holds for all of them in every cell
  (:func:`asked_by_holding`). A waiver authorises the publication of one aggregate (seed
  000, "Waivers") and stays with its cell, not spreading to the holding's other cells;
  margins pooled from leaves carry their contributions' waivers (README, "Holdings and
  waivers": the margin hides the respondent at least as well as the leaf it authorised).
* Waivers (seed 000, "Waivers"): ``s`` is the largest respondent without a waiver, ``r``
  the largest respondent other than ``s``; the rules read ``x_s, x_r`` in place of
  ``x_1, x_2``, then the remaining respondents in decreasing order.
* Negative contributions: ``refuse`` (default; seed 000 says concentration rules are
  meaningless then), ``absolute`` (seed 002 section 5: rules read absolute contributions),
  ``relaxed`` (seed 000 "Negative contributions", seed 004 strategy 1: absolute
  contributions with the parameters relaxed to ``p/f`` and ``k_f``; the relaxation itself
  is in :mod:`service.sdc.conversions`), and ``shift`` (seed 004 strategy 2: ``y = x + M``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from .errors import InputError

WeightsMode = Literal["replicate", "sample", "sample_public_weights"]
NegativeMode = Literal["refuse", "absolute", "relaxed", "shift"]

# Largest-contribution sums may exceed the total by rounding of the caller's arithmetic.
_SUM_TOLERANCE = 1e-9


@dataclass(frozen=True)
class NegativePolicy:
    """How contributions below zero are treated (seed 000 "Negative contributions", seed 004).

    Attributes
    ----------
    mode : {"refuse", "absolute", "relaxed", "shift"}
    factor : float, optional
        ``f > 1`` of seed 004 strategy 1 (``q = 100 f``); required for ``relaxed``.
    shift : float, optional
        The a-priori bound ``M > 0`` with every contribution ``x >= -M``; required for
        ``shift``. Seed 004 writes ``x_j >= M`` for "a large negative constant M" and then
        ``y = x + M`` as a positive variable, which only holds for ``y = x - M``; we read
        ``M`` as the positive magnitude of the bound, so ``y = x + M >= 0``.
    """

    mode: NegativeMode = "refuse"
    factor: float | None = None
    shift: float | None = None

    @property
    def uses_absolute_values(self) -> bool:
        return self.mode in ("absolute", "relaxed")

    @property
    def relaxation(self) -> float:
        """``f`` of ``relaxed`` (the request schema requires it for that mode)."""
        if self.factor is None:
            raise ValueError("negative-value mode 'relaxed' needs factor (f > 1)")
        return self.factor

    @property
    def bound(self) -> float:
        """``M`` of ``shift`` (the request schema requires it for that mode)."""
        if self.shift is None:
            raise ValueError("negative-value mode 'shift' needs shift (M > 0)")
        return self.shift


@dataclass(frozen=True)
class Contributions:
    """Raw contributions of many cells, flattened: the inputs of :func:`from_contributions`
    kept together so that the audit can re-form unions of cells from them
    (:mod:`service.sdc.unions`)."""

    cell: np.ndarray
    value: np.ndarray
    holding: np.ndarray | None = None
    weight: np.ndarray | None = None
    waiver: np.ndarray | None = None
    request: np.ndarray | None = None
    weights_mode: WeightsMode = "replicate"

    def __post_init__(self) -> None:
        # A holding's request holds in every cell (:func:`asked_by_holding`): spread here,
        # so that the subsets taken for margins and aggregations read it as the whole does.
        if self.request is not None and self.holding is not None:
            object.__setattr__(self, "request", asked_by_holding(self.holding, self.request))

    def renumbered(self, cell_index: np.ndarray) -> Contributions:
        """The same contributions with cell ``i`` renamed ``cell_index[i]``."""
        return dataclasses.replace(self, cell=np.asarray(cell_index)[self.cell])

    @property
    def is_in_cell_order(self) -> bool:
        return _ascending(np.asarray(self.cell))

    def in_cell_order(self) -> Contributions:
        """The same contributions sorted by cell (stable), ``self`` if they already are:
        readers by cell then need no permutation of their own (``UnionSource.by_cell``)."""
        if self.is_in_cell_order:
            return self
        return self.taken(np.argsort(np.asarray(self.cell), kind="stable"))

    def taken(self, index: np.ndarray) -> Contributions:
        """The contributions at ``index`` (positions, repeats allowed), every column."""
        pick = lambda a: None if a is None else np.asarray(a)[index]
        return dataclasses.replace(
            self,
            cell=np.asarray(self.cell)[index],
            value=np.asarray(self.value)[index],
            holding=pick(self.holding),
            weight=pick(self.weight),
            waiver=pick(self.waiver),
            request=pick(self.request),
        )


@dataclass(frozen=True)
class Magnitudes:
    """Per-cell quantities read by the sensitivity rules, one entry per cell.

    Attributes
    ----------
    value : ndarray, shape (m,)
        The cell value as published (weighted, signed, untransformed).
    total : ndarray, shape (m,)
        The total the rules read: ``X`` of seed 000, ``X-hat`` under sampling weights,
        ``X_A`` under absolute contributions, ``Y = X + N M`` under the shift.
    count : ndarray, shape (m,)
        Contributors ``N`` (holdings; the sum of weights for weighted cells).
    largest : ndarray, shape (m, depth)
        The amounts an intruder coalition subtracts, largest first and zero-padded; with
        waivers ``x_s, x_r`` first (seed 000, Waivers); ``w_i x_i^s`` for public weights.
    target : ndarray, shape (m,)
        The contribution the concentration rules protect (``x_1``, ``x_s``, ``x_1^s``).
    requested : ndarray, shape (m,)
        Largest contribution of a respondent that asked for protection, 0 if none.
    protectable : ndarray of bool, shape (m,)
        False where every contributor waived protection: nothing left to protect.
    all_zero : ndarray of bool, shape (m,)
        Cells with contributors whose contributions are all zero (before any transform);
        seed 002 section 2 calls them unsafe under the (p,q) rule.
    """

    value: np.ndarray
    total: np.ndarray
    count: np.ndarray
    largest: np.ndarray
    target: np.ndarray
    requested: np.ndarray
    protectable: np.ndarray
    all_zero: np.ndarray

    @property
    def n_cells(self) -> int:
        return self.total.shape[0]

    @property
    def depth(self) -> int:
        return self.largest.shape[1]

    @property
    def empty(self) -> np.ndarray:
        """Cells without contributors."""
        return self.count <= 0

    def top_sum(self, n: int) -> np.ndarray:
        """Sum of the ``n`` largest amounts per cell (fewer where the cell has fewer)."""
        return self.largest[:, :n].sum(axis=1)


def _ascending(cell: np.ndarray) -> bool:
    """Whether ``cell`` is in ascending (cell) order."""
    return bool((cell[1:] >= cell[:-1]).all())


def _first(mask: ArrayLike) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_finite(name: str, values: np.ndarray, cell: np.ndarray) -> None:
    bad = ~np.isfinite(values)
    if bad.any():
        raise InputError(f"{name} must be a finite number", field=name, cell=int(cell[_first(bad)]))


def _all_zero(n_cells: int, cell: np.ndarray, value: np.ndarray) -> np.ndarray:
    present = np.bincount(cell, minlength=n_cells) > 0
    return present & (np.bincount(cell, weights=np.abs(value), minlength=n_cells) == 0)


def _check_totals(published: np.ndarray, field: str = "contributions.value") -> None:
    overflow = ~np.isfinite(published)
    if overflow.any():
        raise InputError(
            "the cell's total overflows the range of 64-bit floating point",
            field=field,
            cell=_first(overflow),
        )


def _run_starts(sorted_cell: np.ndarray) -> np.ndarray:
    """Index of the first element of each element's run in a sorted cell array."""
    return np.searchsorted(sorted_cell, sorted_cell, side="left")


def _scatter_ranked(
    n_cells: int, depth: int, cell: np.ndarray, rank: np.ndarray, amount: np.ndarray
) -> np.ndarray:
    largest = np.zeros((n_cells, depth))
    keep = rank < depth
    largest[cell[keep], rank[keep]] = amount[keep]
    return largest


def _leading(n_cells: int, depth: int, sorted_cell: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """The first ``depth`` amounts of each cell's run in ``sorted_cell`` (zeros past its
    end), as :func:`_scatter_ranked` with ranks, without an array of ranks as long as the
    contributions (margins pool millions of them)."""
    counts = np.bincount(sorted_cell, minlength=n_cells)
    first = np.cumsum(counts) - counts
    largest = np.zeros((n_cells, depth))
    for r in range(depth):
        has = counts > r
        largest[has, r] = amount[first[has] + r]
    return largest


def _scaled(value: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """``value`` times an aggregation's multipliers (``from_contributions``' ``scale``)."""
    return value if scale is None else scale * value


def asked_by_holding(holding: np.ndarray | None, request: np.ndarray | None):
    """Each contribution's request flag with its holding's: seed 000's request rule
    protects "enterprises that have actively asked for protection" ("Foreign trade
    rules"), and a holding is the enterprise (seed 000, "Holdings"), so when any of its
    contributions asked, every one did, in every cell of the call. Within one cell this
    was already the reading (a holding requests if any of its contributions did), and in
    an aggregation of cells (:func:`service.sdc.unions.judge`); until 2026-11-27 not across
    cells, so a cell held by a holding that asked in another cell was judged as if it had
    not (a singleton of it published; a helper's campaign). ``None`` stays ``None``."""
    if holding is None or request is None:
        return request
    holding = np.asarray(holding, dtype=np.int64)
    request = np.asarray(request, dtype=bool)
    grouped = holding >= 0
    asking = holding[grouped & request]
    if not asking.size:
        return request
    asked = np.zeros(int(holding.max()) + 1, bool)
    asked[asking] = True
    return request | (grouped & asked[np.where(grouped, holding, 0)])


def _apply_sign_policy(
    value: np.ndarray, cell: np.ndarray, policy: NegativePolicy, refuse_negative: bool
) -> np.ndarray:
    """Observation-level part of the negative-value policy (refusal and the shift)."""
    if policy.mode == "shift":
        below = value < -policy.bound
        if below.any():
            raise InputError(
                "contribution is below the a-priori bound -M of the shift transformation "
                "(seed 004 strategy 2 needs every x >= -M)",
                field="contributions.value",
                cell=int(cell[_first(below)]),
            )
        return value + policy.bound
    if policy.mode == "refuse" and refuse_negative:
        negative = value < 0
        if negative.any():
            raise InputError(
                "negative contribution: concentration rules are meaningless for negative "
                "values (seed 000); choose negative_values mode 'absolute', 'relaxed' or "
                "'shift'",
                field="contributions.value",
                cell=int(cell[_first(negative)]),
            )
    return value


def from_contributions(
    n_cells: int,
    cell: np.ndarray,
    value: np.ndarray,
    *,
    holding: np.ndarray | None = None,
    weight: np.ndarray | None = None,
    waiver: np.ndarray | None = None,
    request: np.ndarray | None = None,
    weights_mode: WeightsMode = "replicate",
    depth: int = 2,
    negative: NegativePolicy = NegativePolicy(),
    refuse_negative: bool = True,
    scale: np.ndarray | None = None,
) -> Magnitudes:
    """Ordered magnitudes of every cell from its raw contributions.

    Parameters
    ----------
    n_cells : int
        Number of cells; cells without contributions are empty.
    cell : ndarray of int, shape (u,)
        Cell index of each contribution.
    value : ndarray of float, shape (u,)
        Contribution values.
    holding : ndarray of int, shape (u,), optional
        Holding (enterprise group) id; negative means "its own respondent".
    weight : ndarray of float, shape (u,), optional
        Sampling weights (> 0).
    waiver, request : ndarray of bool, shape (u,), optional
        Respondent waived protection / asked for protection (request rule).
    weights_mode : {"replicate", "sample", "sample_public_weights"}
    depth : int
        How many largest amounts to keep (the deepest rule's need).
    negative : NegativePolicy
    refuse_negative : bool
        Whether the rule set contains a rule for which negative values are meaningless.
    scale : ndarray of float, shape (u,), optional
        Each contribution's multiplier ``|lambda_i| > 0`` when the "cells" are
        aggregations (:func:`service.sdc.unions.judge`): its amount is ``|lambda_i|``
        times the contribution as the sign policy reads it, ``|lambda_i| (x + M)`` under
        the shift (seed 002 section 5 on the table of ``y = x + M`` that seed 004 section
        2.2 protects), the bound ``x >= -M`` checked on ``x`` itself.

    Returns
    -------
    Magnitudes

    Notes
    -----
    Holdings, seed 000 "Holdings": one holding's contributions to a cell are summed to one
    contribution. A holding counts as having waived only if all its contributions did, and
    as requesting protection if any of them did (the cautious readings).

    Waivers, seed 000 "Waivers": for every pair ``i != j`` with no waiver from ``j``,
    ``x_i + x_j <= x_r + x_s``; ordering ``s`` first and ``r`` second makes every rule of
    :mod:`service.sdc.rules` read the waiver formulation.
    """
    cell = np.asarray(cell, dtype=np.int64)
    value = np.asarray(value, dtype=np.float64)
    _check_finite("contributions.value", value, cell)
    scale = None if scale is None else np.asarray(scale, dtype=np.float64)
    if weight is not None:
        if holding is not None and (np.asarray(holding) >= 0).any():
            raise InputError(
                "holdings cannot be combined with sampling weights: the replicated "
                "contributions belong to no known holding (seed 000, Sampling weights, Note)",
                field="contributions.holding",
                cell=int(cell[_first(np.asarray(holding) >= 0)]),
            )
        for name, flags in (("waiver", waiver), ("request", request)):
            if flags is not None and np.asarray(flags).any():
                raise InputError(
                    f"{name} flags cannot be combined with sampling weights: the weighted "
                    "pseudo-respondents are not the respondent who gave them",
                    field=f"contributions.{name}",
                    cell=int(cell[_first(np.asarray(flags))]),
                )
        weight = np.asarray(weight, dtype=np.float64)
        _check_finite("contributions.weight", weight, cell)
        bad = weight <= 0
        if bad.any():
            raise InputError(
                "sampling weight must be > 0",
                field="contributions.weight",
                cell=int(cell[_first(bad)]),
            )
        return _weighted(
            n_cells, cell, value, weight, weights_mode, depth, negative, refuse_negative, scale
        )
    request = asked_by_holding(holding, request)
    return _in_blocks(
        n_cells, cell, value, holding, waiver, request, scale, depth, negative, refuse_negative
    )


#: Contributions that :func:`_in_blocks` orders at a time, at least (pooling holdings and
#: sorting all 60 million contributions of 10^6 cells with margins at once took about 4
#: GiB of temporaries).
BLOCK = 1 << 22


def _in_blocks(n_cells, cell, value, holding, waiver, request, scale, *rest) -> Magnitudes:
    """:func:`_unweighted` block of cells by block of cells where the contributions are
    in cell order and many: every quantity is per cell, and a cell's contributions are
    read in the same order, so the result is the same to the bit."""
    if cell.size <= BLOCK or not _ascending(cell):
        return _unweighted(n_cells, cell, value, holding, waiver, request, scale, *rest)
    # Block k: cells [first[k], first[k + 1]), contributions [start[k], start[k + 1]).
    first = np.unique(np.concatenate([[0], cell[BLOCK::BLOCK], [n_cells]]))
    start = np.searchsorted(cell, first)
    pick = lambda a, lo, hi: None if a is None else np.asarray(a)[lo:hi]
    parts = []
    for c0, c1, lo, hi in zip(first[:-1], first[1:], start[:-1], start[1:]):
        try:
            parts.append(
                _unweighted(
                    int(c1 - c0),
                    cell[lo:hi] - c0,
                    value[lo:hi],
                    pick(holding, lo, hi),
                    pick(waiver, lo, hi),
                    pick(request, lo, hi),
                    pick(scale, lo, hi),
                    *rest,
                )
            )
        except InputError as error:
            if error.cell is not None:
                error.cell += int(c0)
            raise
    return Magnitudes(
        **{
            f.name: np.concatenate([getattr(m, f.name) for m in parts])
            for f in dataclasses.fields(Magnitudes)
        }
    )


def _unweighted(
    n_cells, cell, value, holding, waiver, request, scale, depth, negative, refuse_negative
) -> Magnitudes:
    published = np.bincount(cell, weights=_scaled(value, scale), minlength=n_cells)
    _check_totals(published)
    all_zero = _all_zero(n_cells, cell, value)
    value = _scaled(_apply_sign_policy(value, cell, negative, refuse_negative), scale)
    # Flags nobody sent stay None (no arrays of False to carry through every step).
    waiver = None if waiver is None or not np.any(waiver) else np.asarray(waiver, bool)
    request = None if request is None or not np.any(request) else np.asarray(request, bool)

    if holding is not None:
        # Seed 000, Holdings: sum each holding's contributions within a cell.
        holding = np.asarray(holding, dtype=np.int64)
        own = holding < 0
        span = int(holding.max(initial=-1)) + 1
        ident = np.where(own, span + np.arange(holding.size), holding)
        radix = int(ident.max(initial=0)) + 1
        groups, inverse = np.unique(cell * radix + ident, return_inverse=True)
        cell = groups // radix
        value = np.bincount(inverse, weights=value, minlength=groups.size)
        if waiver is not None:
            waiver = np.bincount(inverse, weights=~waiver, minlength=groups.size) == 0
        if request is not None:
            request = np.bincount(inverse, weights=request, minlength=groups.size) > 0

    if negative.uses_absolute_values:
        # Seed 002 section 5: the rules read absolute (holding-level) contributions.
        value = np.abs(value)

    order = np.lexsort((-value, cell))
    cell, value = cell[order], value[order]
    waiver = None if waiver is None else waiver[order]
    request = None if request is None else request[order]
    del order  # of the contributions' size (margins pool millions): not held beside rank

    protectable = np.zeros(n_cells, bool)
    if waiver is not None and waiver.any():
        # Seed 000, Waivers: s = largest without waiver goes first, r = the largest other.
        unwaived = np.flatnonzero(~waiver)
        new_cell = np.ones(unwaived.size, bool)
        new_cell[1:] = cell[unwaived[1:]] != cell[unwaived[:-1]]
        first = unwaived[new_cell]
        is_s = np.zeros(cell.size, bool)
        is_s[first] = True
        protectable[cell[first]] = True
        order = np.lexsort((-value, ~is_s, cell))
        cell, value = cell[order], value[order]
        request = None if request is None else request[order]
    else:
        protectable[cell] = True
    protectable |= np.bincount(cell, minlength=n_cells) == 0  # empty cells: policy decides

    largest = _leading(n_cells, depth, cell, value)
    requested = np.zeros(n_cells)
    if request is not None and request.any():
        np.maximum.at(requested, cell[request], value[request])
    total = np.bincount(cell, weights=value, minlength=n_cells)
    _check_totals(total)
    return Magnitudes(
        value=published,
        total=total,
        count=np.bincount(cell, minlength=n_cells).astype(np.float64),
        largest=largest,
        target=largest[:, 0].copy(),
        requested=requested,
        protectable=protectable,
        all_zero=all_zero,
    )


def _weighted(
    n_cells, cell, value, weight, mode, depth, negative, refuse_negative, scale
) -> Magnitudes:
    """Sampling weights, seed 000 "Sampling weights".

    ``replicate``: each observation ``x`` with weight ``w`` stands for ``w`` contributions
    of ``x``; the ``j``-th largest contribution is the mass of the sorted, replicated
    sequence that falls in ``[j-1, j)``. For integer weights this is the seed's example
    (100 x 4, 10 x 7 gives 100, 100, ...); for fractional weights it is the "simple
    extension" the seed mentions without stating: a slot shared by two observations takes
    the weight-proportional share of each, so the slots still add up to ``X-hat``.

    ``sample``: ``X-hat - x_2^s - x_1^s < p/100 x_1^s`` (eq-p-percent-weighted) and
    ``x_1^s + ... + x_n^s > k/100 X-hat`` (eq-dominance-weighted): the rules read the
    largest sampled values unweighted against the weighted total.

    ``sample_public_weights``: ``X-hat - w_2 x_2^s - w_1 x_1^s < p/100 x_1^s``
    (eq-p-percent-weighted-alt): the intruders subtract ``w_i x_i^s``; the protected value
    is still ``x_1^s``. Dominance reads the same subtracted amounts, by the derivation of
    eq-dominance-weighted from eq-dominance-relative-error.

    ``N`` is the estimated number of population contributors, the sum of the weights.
    """
    published = np.bincount(cell, weights=weight * _scaled(value, scale), minlength=n_cells)
    _check_totals(published)
    all_zero = _all_zero(n_cells, cell, value)
    value = _scaled(_apply_sign_policy(value, cell, negative, refuse_negative), scale)
    if negative.uses_absolute_values:
        value = np.abs(value)
    order = np.lexsort((-value, cell))
    cell, value, weight = cell[order], value[order], weight[order]
    starts = _run_starts(cell)
    count = np.bincount(cell, weights=weight, minlength=n_cells)
    total = np.bincount(cell, weights=weight * value, minlength=n_cells)
    _check_totals(total)

    if mode == "replicate":
        upto = np.cumsum(weight)
        upto -= (upto - weight)[starts]  # cumulative weight within the cell
        start = upto - weight
        largest = np.empty((n_cells, depth))
        for j in range(depth):  # a loop over slots (depth is 2 or 3), not over cells
            share = np.clip(np.minimum(upto, j + 1) - np.maximum(start, j), 0.0, None)
            largest[:, j] = np.bincount(cell, weights=share * value, minlength=n_cells)
        target = largest[:, 0].copy()
    else:
        rank = np.arange(cell.size) - starts
        amount = value if mode == "sample" else weight * value
        largest = _scatter_ranked(n_cells, depth, cell, rank, amount)
        target = _scatter_ranked(n_cells, 1, cell, rank, value)[:, 0]
    return Magnitudes(
        value=published,
        total=total,
        count=count,
        largest=largest,
        target=target,
        requested=np.zeros(n_cells),
        protectable=np.ones(n_cells, bool),
        all_zero=all_zero,
    )


class TooFewLargest(InputError):
    """A summary gives fewer of the largest contributions than the rule set reads. The
    message states how many its deepest rule reads, a parameter of the rule set; ``code``
    names the error for a layer that must not show it (a profile's parameters are
    confidential, seed 003 B.1.e)."""

    code = "too_few_largest"


def from_summaries(
    total: np.ndarray,
    count: np.ndarray,
    largest: np.ndarray,
    *,
    requested: np.ndarray | None = None,
    depth: int = 2,
    negative: NegativePolicy = NegativePolicy(),
) -> Magnitudes:
    """Ordered magnitudes from caller-made summaries (total, count, largest contributions).

    Parameters
    ----------
    total : ndarray, shape (m,)
        Cell totals ``X``.
    count : ndarray, shape (m,)
        Number of contributors ``N`` (may be fractional for weighted cells).
    largest : ndarray, shape (m, L)
        Largest holding-level contributions in decreasing order, NaN-padded where a cell
        gives fewer than ``L``.
    requested : ndarray, shape (m,), optional
        Largest contribution of a respondent that asked for protection (request rule).
    depth : int
        Largest contributions the rule set needs; a cell must give ``min(depth, N)``.
    negative : NegativePolicy
        Summaries are taken as the magnitudes the rules read (absolute contributions under
        ``absolute`` and ``relaxed``), so they must be non-negative, except under ``shift``
        where seed 004 eq. (1) gives ``Y = X + N M`` and ``y_i = x_i + M``.

    Raises
    ------
    InputError
        Non-finite numbers, negative count, largest contributions out of order, more of
        them than contributors, fewer than the rules need, or adding up to more than the
        total.
    """
    total = np.asarray(total, dtype=np.float64)
    count = np.asarray(count, dtype=np.float64)
    largest = np.asarray(largest, dtype=np.float64).reshape(total.size, -1)
    m = total.size
    index = np.arange(m)
    known = ~np.isnan(largest)
    n_known = known.sum(axis=1)
    given = np.where(known, largest, 0.0)
    _check_finite("summary.total", total, index)
    _check_finite("summary.count", count, index)
    if np.isinf(given).any():
        raise InputError(
            "summary.largest must be finite",
            field="summary.largest",
            cell=_first(np.isinf(given).any(axis=1)),
        )
    # Unknown trailing entries as -inf keep the order check to the known ones (-inf minus
    # -inf is nan, which compares False: no warning wanted for it).
    with np.errstate(invalid="ignore"):
        rising = np.asarray(
            (np.diff(np.where(known, largest, -np.inf), axis=1) > 0).any(axis=1)
            if largest.shape[1] > 1
            else np.zeros(m, bool)
        )
    # (cells failing, field, message[, error class: InputError when not given])
    checks: list[tuple[np.ndarray, str, str] | tuple[np.ndarray, str, str, type[InputError]]] = [
        (count < 0, "summary.count", "count must be >= 0"),
        (
            n_known > np.ceil(count),
            "summary.largest",
            "more largest contributions than contributors",
        ),
        (rising, "summary.largest", "largest contributions must be given in decreasing order"),
        (
            n_known < np.minimum(depth, np.ceil(count)),
            "summary.largest",
            f"the rule set needs the {depth} largest contributions of this cell",
            TooFewLargest,
        ),
    ]
    if negative.mode == "shift":
        with np.errstate(over="ignore"):  # an overflow is reported just below
            total = total + count * negative.bound
        _check_totals(total, "summary.total")
        given = np.where(known, given + negative.bound, 0.0)
        checks.append(
            (
                (total < 0) | (given < 0).any(axis=1),
                "summary",
                "a value is below the a-priori bound -M of the shift transformation",
            )
        )
    else:
        checks.append(
            (
                (total < 0) | (given < 0).any(axis=1),
                "summary",
                "summaries must be non-negative (send absolute contributions, or "
                "use negative_values mode 'shift')",
            )
        )
    scale = np.maximum(np.abs(total), 1.0)
    checks.append(
        (
            given.sum(axis=1) > total + _SUM_TOLERANCE * scale,
            "summary.largest",
            "largest contributions add up to more than the total",
        )
    )
    for bad, field, message, *kind in checks:
        if bad.any():
            raise (kind[0] if kind else InputError)(message, field=field, cell=_first(bad))

    out = np.zeros((m, depth))
    width = min(depth, given.shape[1])
    out[:, :width] = given[:, :width]
    # NaN (or no array) means no respondent of the cell asked for protection.
    req = np.full(m, np.nan) if requested is None else np.asarray(requested, np.float64)
    if negative.mode == "shift":
        req = req + negative.bound
    req = np.nan_to_num(req, nan=0.0)
    shift = negative.bound if negative.mode == "shift" else 0.0
    value = total - count * shift
    return Magnitudes(
        value=value,
        total=total,
        count=count,
        largest=out,
        target=out[:, 0].copy(),
        requested=req,
        protectable=np.ones(m, bool),
        # Summaries are shifted only in mode "shift"; a shift sent with another mode is
        # not applied, so it must not be read here either.
        all_zero=(count > 0) & (value == 0) & (out[:, 0] == shift),
    )


def merge(n_cells: int, parts: list[tuple[list[int] | np.ndarray, Magnitudes]]) -> Magnitudes:
    """Magnitudes of ``n_cells`` cells assembled from parts covering disjoint cell indices.

    Used when a table mixes cells given by contributions and cells given by summaries.
    """
    # One part covering every cell in order needs no copy; in any other order it does (a
    # request listing every cell with contributions, margins first, is not table order).
    if len(parts) == 1 and np.array_equal(parts[0][0], np.arange(n_cells)):
        return parts[0][1]
    depth = max(m.depth for _, m in parts)
    columns = ("value", "total", "count", "target", "requested", "protectable", "all_zero")
    out = {name: np.zeros(n_cells, dtype=getattr(parts[0][1], name).dtype) for name in columns}
    largest = np.zeros((n_cells, depth))
    for index, m in parts:
        index = np.asarray(index, dtype=np.int64)
        for name, column in out.items():
            column[index] = getattr(m, name)
        largest[index, : m.depth] = m.largest
    return Magnitudes(largest=largest, **out)
