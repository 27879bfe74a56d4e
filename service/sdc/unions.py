"""Implicitly published unions of suppressed cells, checked with the sensitivity rule itself.

A relation of the table (a row, a column, a subtotal) in which several cells are suppressed
still publishes one linear combination of them: ``sum_i a_ki x_i = b_k`` over the suppressed
cells ``i`` of relation ``k``, with ``b_k`` read off the published cells. Seed 002 section 3
calls these the *explicit aggregations* (eq. 3.6); its Example 3 shows two singletons in one
row whose sum is published, so that each respondent learns the other's figure although
both cells' intervals are wide (Operational criterion 1 holds). Operational criterion 2
(seed 002 section 4) judges such an aggregation as if it were a cell, "on the basis of the
same sensitivity rule that is applied to separate cells"; seed 003 B.2.a.i asks the same of
an audit ("cells whose union is published").

What is checked
---------------
Every explicit aggregation with at least two suppressed cells of which at least one is
sensitive. Aggregations of non-sensitive cells only are safe by subadditivity (seed 002
Theorem 2; seed 003 B.1.d), and an aggregation of one suppressed cell fixes that cell,
which the interval audit already reports as exact disclosure.

Linear combinations of *several* relations (seed 002 eq. 3.7, found in general by the MIP of
section 6) are not enumerated here; the interval audit (:mod:`service.sdc.audit`) covers
what they reveal about cell values.

How an aggregation's contributions are formed (seed 002 section 5)
-------------------------------------------------------------------
Respondent ``r``'s absolute contribution to aggregation ``j`` is
``X_jA^r = sum_i |lambda_i^j x_i^r|`` and the rule is applied to the absolute aggregation
(``S^a(X_j) = S(X_jA)``). With raw contributions this is exact: one holding contributing to
several of the cells is one respondent of the aggregation (its amounts add), which is the
shared-contributor case. When some member cell came as a summary (total, count, largest
contributions) the respondents of different cells cannot be matched, so they are taken as
distinct: the aggregation's largest contributions are the largest of the members' (scaled
by ``|lambda|``), its count the sum of counts. That reading is exact for distinct
respondents and may understate concentration when a holding spans cells, which a caller
who knows the holdings avoids by sending contributions.

Under negative values by the shift (seed 004 strategy 2, ``y = x + M``) the table of ``y``
is protected (seed 004 section 2.2), so an aggregation's absolute contributions are
``|lambda_i| (x_i^r + M)``, the bound ``x >= -M`` scaled with its contribution, not
``|lambda_i| x_i^r + M``: the measures stay homogeneous in ``lambda`` (seed 002 section
3: an aggregation is defined up to a factor), and summaries, whose slots are ``y``
already, read the same (:data:`service.sdc.aggregations.SHIFT_READING`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from . import magnitudes, primary
from .magnitudes import Contributions, Magnitudes


@dataclass(frozen=True)
class UnionCheck:
    """The explicit aggregations examined and the rule's verdict on each.

    Attributes
    ----------
    relation : numpy.ndarray of int, shape (K,)
        The relation (row of the table's relation matrix) each aggregation is read from.
    members : scipy.sparse.csr_matrix, shape (K, n_cells)
        ``lambda``: the coefficients of the suppressed cells in each aggregation.
    value : numpy.ndarray, shape (K,)
        The aggregation's published value ``sum_i lambda_i x_i``.
    checked : numpy.ndarray of bool, shape (K,)
        The rule could be evaluated: every member cell has contributions or a summary.
    sensitive : numpy.ndarray of bool, shape (K,)
        Checked and some rule fires on the aggregation.
    fired : numpy.ndarray of bool, shape (rules, K)
    sensitivity : numpy.ndarray, shape (rules, K)
        The rules' measures ``S`` on the aggregation (nan where not checked).
    """

    relation: np.ndarray
    members: sp.csr_matrix
    value: np.ndarray
    checked: np.ndarray
    sensitive: np.ndarray
    fired: np.ndarray
    sensitivity: np.ndarray

    @property
    def safe(self) -> bool:
        """No checked aggregation is sensitive and none was left unchecked."""
        return bool(self.checked.all() and not self.sensitive.any())


def explicit_aggregations(relations, suppressed, sensitive) -> tuple[np.ndarray, sp.csr_matrix]:
    """The relations that publish a union worth checking, and their coefficients.

    Returns the relation indices and a ``(K, n_cells)`` matrix holding each relation's
    coefficients on its suppressed cells (seed 002 eq. 3.6), for relations with at least
    two suppressed cells, one of them sensitive.
    """
    a = sp.csr_matrix(getattr(relations, "relations", relations), dtype=float)
    suppressed = np.asarray(suppressed, dtype=bool)
    keep_cols = sp.diags(suppressed.astype(float))
    a_s = (a @ keep_cols).tocsr()
    a_s.eliminate_zeros()
    n_suppressed = np.diff(a_s.indptr)
    hits_sensitive = (abs(a_s) @ (suppressed & np.asarray(sensitive, dtype=bool))) > 0
    rows = np.flatnonzero((n_suppressed >= 2) & hits_sensitive)
    return rows, a_s[rows]


def check_unions(
    relations,
    values,
    suppressed,
    sensitive,
    cells: Magnitudes,
    ruleset: primary.RuleSet,
    *,
    known=None,
    contributions: Contributions | None = None,
) -> UnionCheck:
    """Apply ``ruleset`` to every implicitly published union of suppressed cells.

    Parameters
    ----------
    relations : scipy.sparse matrix or Table or LinkedTables
        The table's relations ``A x = 0``.
    values : array_like, shape (n_cells,)
        The true cell values (for the aggregations' values).
    suppressed, sensitive : array_like of bool, shape (n_cells,)
        The pattern and the cells that need protection.
    cells : Magnitudes
        Every cell's magnitudes (used for members that have no raw contributions).
    ruleset : primary.RuleSet
        The rules the cells were assessed with; the zero- and empty-cell policies, which
        are about single cells, do not apply to unions.
    known : array_like of bool, shape (n_cells,), optional
        Cells whose magnitudes are known (default: all); aggregations with an unknown
        member are reported unchecked.
    contributions : Contributions, optional
        Raw contributions; aggregations whose members all appear here are formed from them
        exactly, holdings shared between cells included.

    Returns
    -------
    UnionCheck

    Notes
    -----
    Seed 002 sections 3-5 (Operational criterion 2, absolute aggregation ``X_jA``); the
    module docstring gives the readings.
    """
    relation, lam = explicit_aggregations(relations, suppressed, sensitive)
    # An aggregation is defined up to a factor (seed 002 section 3): orient each so that its
    # published value is non-negative (children summing to a published parent read +).
    value = lam @ np.where(suppressed, np.asarray(values, dtype=float), 0.0)
    flip = np.where(value != 0, np.sign(value), np.sign(np.asarray(lam.sum(axis=1)).ravel()))
    flip[flip == 0] = 1.0
    lam = (sp.diags(flip) @ lam).tocsr()
    verdict = judge(lam, values, UnionSource(cells, ruleset, known, contributions))
    return UnionCheck(
        relation,
        lam,
        verdict.value,
        verdict.checked,
        verdict.fired.any(axis=0) & verdict.checked,
        verdict.fired,
        verdict.sensitivity,
    )


@dataclass(frozen=True)
class Verdict:
    """The rule set applied to aggregations: ``value`` (K,), ``checked`` (K,), ``fired``
    and ``sensitivity`` (rules, K)."""

    value: np.ndarray
    checked: np.ndarray
    fired: np.ndarray
    sensitivity: np.ndarray


def judge(lam: sp.csr_matrix, values, source: UnionSource) -> Verdict:
    """Apply the rule set to aggregations ``sum_i lam_ki x_i`` (rows of ``lam``).

    Each aggregation is judged as one pseudo-cell whose respondents hold the absolute
    contributions ``|lambda_i| x_i^r`` (seed 002 section 5, ``S^a(X) = S(X_A)``), pooled by
    holding; members known only by a summary contribute respondents of their own (module
    docstring). Aggregations with a member whose magnitudes are unknown are not checked.
    The zero- and empty-cell policies, which are about single cells, do not apply.
    """
    lam = sp.csr_matrix(lam, dtype=float)
    n_agg, n_cells = lam.shape
    # Only the member cells are read: on the columns they use, so that a call costs what
    # its aggregations hold, not the table's size (the screen judges small batches).
    used, local = np.unique(lam.indices, return_inverse=True)
    compact = sp.csr_matrix((lam.data, local.ravel(), lam.indptr), shape=(n_agg, len(used)))
    value = compact @ np.nan_to_num(np.asarray(values, dtype=float)[used])
    known = (
        np.ones(len(used), bool) if source.known is None else np.asarray(source.known, bool)[used]
    )
    weight = abs(lam).tocsr()
    weight.eliminate_zeros()
    member_count = np.diff(weight.indptr)
    pattern = abs(compact).tocsr()
    pattern.eliminate_zeros()
    pattern.data[:] = 1.0
    checked = (pattern @ known.astype(float)) == member_count
    raw = source.raw_cells[used]
    # An aggregation without members (its coefficients cancel on the atoms: a margin less
    # its parts) has no respondent and is not sensitive. It was read as made of raw
    # contributions (0 of 0 members), and a count table, which has none, failed on it:
    # a 500 on /v1/suppress with method exact (two helpers' campaigns, h50 and h51: a
    # single-child code, and a threshold above most counts).
    members = member_count > 0
    from_raw = (
        checked
        & members
        & (source.contributions is not None)
        & ((pattern @ raw.astype(float)) == member_count)
    )
    from_summary = checked & members & ~from_raw
    ruleset = source.ruleset
    rules = dataclasses.replace(
        ruleset, empty_cells="safe", zero_cells="safe" if ruleset.zero_cells == "safe" else "rules"
    )
    n_rules = len(ruleset.rules)
    fired = np.zeros((n_rules, n_agg), bool)
    sensitivity = np.full((n_rules, n_agg), np.nan)
    for mask, build in (
        (from_raw, lambda w: _union_of_contributions(w, source)),
        (from_summary, lambda w: _union_of_magnitudes(w, source.cells)),
    ):
        if mask.any():
            result = primary.assess(build(weight[mask]), rules)
            fired[:, mask] = result.fired
            sensitivity[:, mask] = result.sensitivity
    return Verdict(value, checked, fired, sensitivity)


#: Results of :func:`ranges` up to this many items are built the quick way (8 MB).
RANGES_LEAN = 1 << 20


def ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The indices ``starts[k] .. starts[k] + sizes[k] - 1`` of every ``k``, in order.

    Beyond :data:`RANGES_LEAN` items built in one array, as the running sum of the steps
    between items: a repeat of the starts plus an ``arange`` held three arrays of the
    result's size (pooling 3.3 million contributions into margins, 80 MB). Below it the
    repeat, about 20 us a call faster (the screen's bounds call it thousands of times on
    a few items)."""
    if int(np.sum(sizes)) <= RANGES_LEAN:
        return np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(np.sum(sizes)))
    nonempty = sizes > 0
    starts = np.asarray(starts, np.int64)[nonempty]
    sizes = np.asarray(sizes, np.int64)[nonempty]
    out = np.ones(int(sizes.sum()), np.int64)
    if out.size:
        # A run's first item steps from the previous run's last (the first from 0).
        step = np.zeros_like(starts)
        np.add(starts[:-1], sizes[:-1] - 1, out=step[1:])
        np.subtract(starts, step, out=step)
        first = np.cumsum(sizes)
        first -= sizes
        out[first] = step
        del step, first
        np.cumsum(out, out=out)
    return out


def expand(weight: sp.csr_matrix, starts: np.ndarray, sizes: np.ndarray, weights: bool = True):
    """For every nonzero ``(k, i)`` of ``weight``, the items ``starts[i] .. +sizes[i]``:
    returns (aggregation of each item, weight of each item or None without ``weights``,
    item index)."""
    coo = weight.tocoo()
    per = sizes[coo.col]
    w = np.repeat(coo.data, per) if weights else None
    return np.repeat(coo.row, per), w, ranges(starts[coo.col], per)


def spread(weight: sp.csr_matrix, source: UnionSource, weights: bool = True):
    """The contributions of each aggregation's member cells: for every nonzero ``(k, i)``
    of ``weight`` and every contribution of cell ``i``, ``(k, weight[k, i], its index in
    source.contributions)``; the weights None without ``weights`` (one array fewer of
    that size)."""
    order, sizes, starts = source.by_cell
    agg, w, item = expand(weight, starts, sizes, weights)
    return agg, w, item if order is None else order[item]


def _union_of_contributions(weight: sp.csr_matrix, source: UnionSource) -> Magnitudes:
    """Magnitudes of each aggregation from the member cells' raw contributions, as
    contributions ``|lambda_i| x_i^r`` to one pseudo-cell (seed 002 section 5); under the
    shift ``|lambda_i| (x_i^r + M)`` (module docstring)."""
    c, ruleset = source.contributions, source.ruleset
    assert c is not None  # called only for cells with raw contributions
    agg, w, src = spread(weight, source)
    pick = lambda a: None if a is None else np.asarray(a)[src]
    value = np.asarray(c.value)[src]
    holding, waiver, request = pick(c.holding), pick(c.waiver), pick(c.request)
    if ruleset.negative.uses_absolute_values and holding is not None:
        agg, value, w, holding, waiver, request = _absolute_per_cell(
            agg, np.asarray(c.cell)[src], value, w, holding, waiver, request
        )
    return magnitudes.from_contributions(
        weight.shape[0],
        agg,
        value,
        holding=holding,
        weight=pick(c.weight),
        waiver=waiver,
        request=request,
        weights_mode=c.weights_mode,
        depth=ruleset.depth,
        negative=ruleset.negative,
        refuse_negative=ruleset.has_concentration_rule,
        scale=w,
    )


def _absolute_per_cell(agg, cell, value, scale, holding, waiver, request):
    """A holding's contributions to each member cell netted and made absolute before they
    add up across the cells: ``X_A^r = sum_i |lambda_i x_i^r|`` (seed 002 section 5),
    ``x_i^r`` the holding's contribution to cell ``i`` (seed 000, Holdings). Summed across
    the cells first, +100 in one cell and -80 in another read as 20 where the seed reads
    180, and the union was called safe that the aggregation check's MIP, which reads the
    seed's sum, found sensitive (a helper's campaign, 2026-11-27). The holding waived in
    a cell if all its contributions there did, and asked if any did (as within a cell).
    Only the negative-value modes that read absolute values need this: otherwise every
    contribution is at least 0 (or shifted to be). ``scale`` (the member's ``|lambda_i|``)
    is one number per aggregation and cell, so it is netted out and kept."""
    grouped = holding >= 0
    if not grouped.any():
        return agg, value, scale, holding, waiver, request
    keys = np.stack([agg[grouped], cell[grouped], holding[grouped]])
    first, inverse = np.unique(keys, axis=1, return_index=True, return_inverse=True)[1:]
    inverse = inverse.ravel()
    k = len(first)
    pooled = np.abs(np.bincount(inverse, weights=value[grouped], minlength=k))
    at = np.flatnonzero(grouped)[first]
    alone = ~grouped

    def flags(column, rule):
        if column is None:
            return None
        counted = np.bincount(inverse, weights=column[grouped], minlength=k)
        sizes = np.bincount(inverse, minlength=k)
        return np.concatenate([column[alone], rule(counted, sizes)])

    return (
        np.concatenate([agg[alone], agg[at]]),
        np.concatenate([value[alone], pooled]),
        np.concatenate([scale[alone], scale[at]]),
        np.concatenate([holding[alone], holding[at]]),
        flags(waiver, lambda n, size: n == size),
        flags(request, lambda n, size: n > 0),
    )


def _union_of_magnitudes(weight: sp.csr_matrix, m: Magnitudes) -> Magnitudes:
    """Magnitudes of each aggregation from its members' magnitudes, respondents of
    different cells taken as distinct (module docstring)."""
    n_agg, depth = weight.shape[0], m.depth
    agg, w, cell = expand(weight, np.arange(weight.shape[1]), np.ones(weight.shape[1], int))
    amounts = (m.largest[cell] * w[:, None]).ravel()
    owner = np.repeat(agg, depth)
    order = np.lexsort((-amounts, owner))
    owner, amounts = owner[order], amounts[order]
    run_start = np.searchsorted(owner, owner, side="left")
    rank = np.arange(len(owner)) - run_start
    largest = np.zeros((n_agg, depth))
    top = rank < depth
    largest[owner[top], rank[top]] = amounts[top]
    target = np.zeros(n_agg)
    np.maximum.at(target, agg, w * m.target[cell])
    requested = np.zeros(n_agg)
    np.maximum.at(requested, agg, w * m.requested[cell])
    total = weight @ m.total
    return Magnitudes(
        value=weight @ m.value,
        total=total,
        count=weight.astype(bool).astype(float) @ m.count,
        largest=largest,
        target=target,
        requested=requested,
        protectable=(weight.astype(bool).astype(float) @ m.protectable.astype(float)) > 0,
        all_zero=(weight.astype(bool).astype(float) @ (~m.all_zero).astype(float)) == 0,
    )


@dataclass(frozen=True)
class UnionSource:
    """What :func:`check_unions` needs besides the pattern: the cells' magnitudes, the
    rule set, which cells are known, and the raw contributions where there are any."""

    cells: Magnitudes
    ruleset: primary.RuleSet
    known: np.ndarray | None = None
    contributions: Contributions | None = None

    @cached_property
    def raw_cells(self) -> np.ndarray:
        """Which cells have raw contributions; with any, an empty cell too (no respondent:
        its raw contributions are known to be none). Otherwise an aggregation with an
        empty member was judged from the members' summaries, whose respondents cannot be
        pooled: a holding in two of its cells counted as two respondents, which can only
        make it look safer (a helper's property test, 2026-11-27: (1,70)-dominance, a
        holding of 1,000 + 100 in a 3x3 table with an empty leaf; the audit's MIP found
        the aggregation, whose summary reading did not confirm it: `uncertified`)."""
        raw = np.zeros(self.cells.n_cells, bool)
        if self.contributions is not None:
            raw[self.contributions.cell] = True
            raw |= np.asarray(self.cells.count) == 0
        return raw

    @cached_property
    def by_cell(self) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """The contributions sorted by cell: (order, count per cell, first per cell);
        ``order`` is None when they already are (no permutation kept: at 10^6 cells with
        margins it would be 60 million indices, 0.5 GiB)."""
        c = self.contributions
        cell = np.zeros(0, np.int64) if c is None else np.asarray(c.cell)
        order = None if c is None or c.is_in_cell_order else np.argsort(cell, kind="stable")
        sizes = np.bincount(cell, minlength=self.cells.n_cells)
        return order, sizes, np.concatenate(([0], np.cumsum(sizes)[:-1]))

    @cached_property
    def memo(self) -> dict:
        """What other modules derive from this source and keep with it, by their own keys
        (the aggregation check's per-table arrays: :class:`service.sdc.aggregations._Table`)."""
        return {}

    def check(self, relations, values, suppressed, sensitive) -> UnionCheck:
        return check_unions(
            relations,
            values,
            suppressed,
            sensitive,
            self.cells,
            self.ruleset,
            known=self.known,
            contributions=self.contributions,
        )
