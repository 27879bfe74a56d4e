"""Every aggregation of suppressed cells an intruder can derive, judged by the rule itself.

Seed 002 (Daalmans and de Waal) sections 3-6. Once a pattern is published, every linear
combination of the table's relations, with coefficients of either sign, publishes the
value of an *aggregation* ``X = sum_i lambda_i x_i`` of suppressed cells (section 3,
eq. 3.6-3.7: ``lambda = mu^T A`` restricted to the suppressed cells, ``mu`` free).
Operational criterion 2 (section 4): "a table is safe if and only if all aggregations of
suppressed cells are safe, on the basis of the same sensitivity rule that is applied to
separate cells". Section 5 extends a rule to an aggregation through the *absolute
contributions* ``X_A^r = sum_i |lambda_i x_i^r|`` (one holding across several cells is one
respondent); the rule is applied to them as to a cell (``S^a(X) = S(X_A)``).

What this module decides, per connected group of suppressed cells and per rule:

* **Derived cells.** A suppressed cell whose interval is a point (the caller passes them,
  from :func:`service.sdc.audit.feasibility_intervals`) is known to the intruder; it is
  treated as published, so the relations are re-read with it. The intervals already
  use every relation and bound, so one pass reaches the fixed point: a cell derived only
  after another one was published is also a point of the same LP.
* **Whether any aggregation is sensitive**, exactly. The rules are linear sensitivity
  measures in *slot form* (seed 003 B.1): ``S = tau T + sum_s b_s X^[s]`` with
  ``X^[s]`` the s-th largest absolute contribution, ``T`` their total, ``tau < 0`` and
  ``b_1 >= b_2 >= ... > 0`` (p%: ``tau = -100/p``, ``b = (1 + 100/p, 100/p x c)``; (p,q):
  the same with ``q/p``; (n,k): ``tau = -k/(100-k)``, ``b = (100/(100-k),) x n``; the
  request rule is read as (1,k) over every respondent, an over-approximation settled by
  the exact evaluation). For a fixed assignment of respondents to slots, ``S`` is linear
  in ``w = |lambda|``: ``S = sum_i d_i w_i`` with ``d_i`` at most the cell's own measure
  ``S_i`` (seed 002 Theorem 2's argument), which is negative on cells the rule calls safe.
  Hence (Theorem 2) only groups with a sensitive cell matter, and an attacked respondent
  sits in a sensitive cell.

  Aggregations are judged on their *atoms* (:func:`atom_map`): the leaves a margin adds up
  to, so ``phi = G^T lambda``; "cell" below means atom.

  1. *Screen* (exact when it certifies), for each sensitive atom ``i`` as the attacked
     one and ``phi_i = 1``. If attackers may sit anywhere, every other atom ``j`` has
     ``d_j <= -omega_j`` with ``omega_j = -tau X_j - sum_{s >= 2} b_s x_j^[s-1]`` (for the
     p%-rule ``100/p (X_j - x_j^[1] - .. - x_j^[c])``: what its contributors other than a
     coalition hide), so ``S <= S_i - rho_i`` with ``rho_i = min sum_{j != i} omega_j
     |phi_j|`` over the aggregations: an LP, whose dual is "how far can ``i`` move while
     the published cells stay and every other atom moves at most ``omega_j``", the
     interval audit's LP with other rooms. ``S_i < rho_i`` proves ``i``. Otherwise the two
     cases are split exactly: some attacker sits elsewhere (then ``d_i <= S_i - b_m
     x_i^[m]``, and ``rho_i`` as before), or all sit in ``i``'s atom (then every other atom
     has ``d_j = tau X_j``: the LP with costs ``-tau X_j``). Both proven proves ``i``; all
     sensitive atoms proven proves the group. Under a one-intruder rule (two slots) the
     first case is decided exactly where ``omega`` everywhere does not prove it: the
     intruder's respondent sits in one *partner* atom ``j``, which costs ``omega_j`` while
     every other atom costs ``-tau X_j``; one LP per partner, most settled by deviations
     already found (:meth:`_Group.partner_bounds`), in groups of at most
     :data:`PARTNER_MAX_ATOMS` atoms. Respondents spanning two atoms of the group (a
     holding in several cells) lower the costs by what their pieces may add
     (:data:`SPANNING_ALLOWANCE`). The LP's multipliers ``mu`` are kept as a witness. The dual
     simplex stops as soon as its dual bound proves the anchor (``rho_i > S_i``), its row
     prices checked to be a deviation: only an anchor not proven needs the optimum.
  2. *Witnesses*: the aggregation ``mu^T A`` of the screen's LP and the explicit
     aggregations (single relations) are judged exactly by
     :func:`service.sdc.unions.judge` (pooled holdings, waivers, requests, the rule as
     implemented); a sensitive one settles the group.
  3. *Mixed-integer program* (seed 002 section 6, (6.6)-(6.18), generalised from the
     (p,q) rule to slot form): ``max tau T + sum_s b_s A_s`` over aggregations, with
     binary signs of ``lambda`` on the sensitive cells and binary slot assignments of the
     candidate respondents (per cell its ``m`` largest single-cell respondents, plus every
     respondent spanning cells; the first slot only those of sensitive cells). A feasible
     point with ``S`` at or above 0 (above for strict rules) is a sensitive aggregation;
     infeasibility proves the group safe. A time limit leaves the group *uncertified*.

  Reading chosen against the seed: the seed normalises ``-1 <= mu_k <= 1`` (6.18), which
  admits ``mu = 0``, the empty aggregation with objective 0, so (6.6) is never negative and
  Theorem 3 cannot hold as written. We normalise the absolute coefficients on the
  sensitive cells to sum to 1, which every sensitive aggregation can be scaled to
  (Theorem 2), and bound the coefficient of a safe cell ``j`` by ``D / |S_j|`` with ``D``
  the largest sensitive-cell measure: beyond that bound the aggregation's measure is
  negative, so the bound removes no sensitive aggregation.
* **Fractional replicate weights** (seed 000, Sampling weights): an aggregation's slots
  can pool fractional parts of several atoms' observations, which the screen's and the
  MIP's whole respondents do not bound; a group with such an atom and another is proven
  by :data:`POOLED_PROOF` alone (``S <= sum_j |phi_j| S_j`` however the slots pool, and
  an LP per possibly sensitive atom), else left undecided (:data:`FRACTIONAL_WEIGHTS`).
  Counts do not pool into slots: the frequency rules' search below holds as it is
  (:data:`POOLED_PROOF`, step 5).
* **Negative values under** ``shift`` (seed 004 strategy 2): an aggregation is one of the
  table of ``y = x + M``, its contributions ``|phi_j| (x + M)`` (:data:`SHIFT_READING`),
  so the screen, the MIP and the pooled proof hold on the atoms' shifted respondents
  as they are.
* **Frequency rules** (minimum frequency, the threshold rule of count tables) depend on
  the support of ``lambda`` only: an aggregation has at least as many respondents as each
  of its cells, so a sensitive one lies within the cells below the threshold ``Z``.
  Whether an aggregation supported in ``U`` with ``phi_i = 1`` exists is an LP (dually:
  "can atom ``i`` move while the other atoms of ``U`` stay fixed"); the supports with
  fewer respondents than the threshold are enumerated, each grown from a smaller one
  still below it (respondents only grow with the support; a holding in two atoms counts
  once), within a budget beyond which the group is undecided. A
  frequency rule that the set's p%-, (p,q)- or (n,k)-rule implies on aggregations needs
  no search (:func:`_implied_frequency`).

Relations that hold within a tolerance are read as exact here: the intruder then knows
more, never less, so the check stays on the safe side.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Generator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import highs
from . import rules as rules_mod
from .highs import Outcome
from .unions import UnionSource, Verdict, judge, ranges, spread

# A cell whose measure is within this share of its scale below 0 is handled as possibly
# sensitive (sign binaries), which keeps the MIP's coefficient bounds moderate.
_NEAR_SENSITIVE = 1e-3
# Relative tolerance of a measure's sign (issue 20: ties follow the rule's comparison).
_TIE_RTOL = 1e-9
# A MIP point of a strict rule must have S above this share of its magnitude (ties within
# it are read as ties, as the rules read them, with room for the solver's tolerance).
_MIP_FLOOR_RTOL = 1e-6
# The screen weighs one-intruder partners in groups of at most this many atoms (a bound
# on the pattern, so that a group's verdict does not depend on the LPs that led to it; a
# bound on the partners tried per anchor made the final audit of 30x30 run the MIP on a
# group the rounds had proven). 8x6x5x4's group of 441 atoms: 3.6 s in all; 20x20x10's
# of about 700: 41 s of partner LPs in a 60 s search, for 10% less suppressed value.
PARTNER_MAX_ATOMS = 500
#: Up to this many partners left after the second half's deviation has settled what it
#: can, each gets an LP of its own, in order, each proof settling others
#: (:meth:`_Group.partner_bounds`); more, and they are tried as one set first, halved
#: where it fails. The set of a few partners fails more often than not (the trim's trials
#: on 100x100 hier, seed 1: 841 of 1,218 set LPs failed), and a failed set is an LP spent
#: before its halves: one by one up to 16, the search's screen LPs 4,539 -> 3,495 there
#: (60x60 hier 1,771 -> 1,323; the same patterns); on 8x6x5x4, whose groups leave dozens
#: of partners, one by one always took 891 against 363 (2x the time), up to 16 the same.
PARTNER_ONE_BY_ONE = 16
# Enumeration budget of the frequency rules' supports per group.
_MAX_SUPPORTS = 2000
# Subsets of small atoms looked at (most passed over for having too many respondents) per
# group, and how often the enumeration reads the clock. Uncounted, the subsets of one
# anchor's 59 partners were 2^59: a 9 KB /v1/audit with time_limit 5 (summaries, every
# leaf of 20 x 3 hidden, frequency n = 60) never answered and kept its thread (a
# campaign, h51).
_MAX_SUBSETS = 1_000_000
_CLOCK_EVERY = 4096
# A group's decision as a generator: it yields batches of aggregations to judge and is
# sent the verdicts (:meth:`_Group.steps`, :func:`_drive`).
_Steps = Generator[sp.csr_matrix, Verdict, Any]
# Groups decided side by side, their judgements in shared calls (:func:`_drive`): a call
# of unions.judge costs about a millisecond whatever it holds, and each group waiting
# holds its LP models (220 x 220 cells, 2-level hierarchies: the check's CPU 6.0 s one
# group at a time, 4.4 s by 64 and by 256; peak RSS +62 MiB by 64, +114 MiB by 256).
_BATCH_GROUPS = 64
# At most this many nonzeros kept by a Deviations (with its column-major copy about 32 MiB;
# 20x20x10's rounds keep 307,000 with the search's deviations), so that memory stays
# bounded at census scale.
_KEEP_NONZEROS = 1_000_000


@dataclass(frozen=True)
class Aggregation:
    """One aggregation of suppressed cells with a published value.

    Attributes
    ----------
    cells : numpy.ndarray of int
        Table cells with a nonzero coefficient.
    coefficients : numpy.ndarray of float
        ``lambda_i``, scaled so that the largest magnitude is 1.
    value : float
        Its published value ``sum lambda_i x_i``.
    rule : int
        Index of the rule (in the rule set) that judged it sensitive.
    measure : float
        That rule's measure ``S`` on the absolute aggregation (``> 0``, or ``>= 0`` for
        the (p,q) rule).
    found_by : {"relation", "screen", "mip", "support"}
    relations, multipliers : numpy.ndarray
        The table relations combined and their multipliers ``mu`` (``lambda = mu^T A`` on
        the suppressed cells): the published cells of that combination are what the
        intruder reads the value from.
    atoms : numpy.ndarray
        The atoms of the aggregation as judged, ``phi = G^T lambda`` (:func:`atom_map`).
    """

    cells: np.ndarray
    coefficients: np.ndarray
    value: float
    rule: int
    measure: float
    found_by: str
    relations: np.ndarray
    multipliers: np.ndarray
    atoms: np.ndarray


@dataclass(frozen=True)
class AggregationCheck:
    """The verdict on every aggregation of a pattern.

    Attributes
    ----------
    status : {"safe", "sensitive", "undecided", "not_applicable"}
        ``sensitive``: some aggregation is sensitive (``found``); ``undecided``: a group
        was not decided (the time limit, or a point of the MIP the exact rule did not
        confirm); ``not_applicable``: every other group is safe, but a group with a
        sensitive cell has a cell whose contributions are unknown, so the rule cannot be
        applied to aggregations that include it.
    derived : numpy.ndarray of int
        Suppressed cells the intruder computes exactly (treated as published).
    found : tuple of Aggregation
        Sensitive aggregations, at most one per group, most sensitive first.
    undecided : numpy.ndarray of int
        Cells of the groups that were not decided (time limit or unknown contributions).
    groups, screened, mip_solves : int
        Groups with a sensitive atom; groups proven safe without a MIP (the screen, or the
        support LPs of a frequency rule); MIPs solved.
    seconds : float
    message : str
    failing : tuple of (int, int, tuple of int, float)
        ``(rule, atom cell, partners, lift)`` the screen could not prove (with
        ``screen_only``): under a one-intruder rule, with the intruder's respondent in one
        of the atoms ``partners``; ``()`` when not proven wherever it sits; ``lift``,
        what the screen added to the anchor's bounds (:data:`SPANNING_ALLOWANCE` 5;
        :meth:`Requirements.at`).
    out_of_time : bool
        The check reached its deadline, so groups may be undecided for want of time; a
        group undecided otherwise (hidden cells with common parts, :data:`SHARED_PARTS`;
        a MIP point the exact rule does not confirm, such as a tie under a strict rule)
        would stay so however long the check ran.
    """

    status: str
    derived: np.ndarray
    found: tuple[Aggregation, ...]
    undecided: np.ndarray
    groups: int
    screened: int
    mip_solves: int
    seconds: float
    message: str
    failing: tuple = ()
    out_of_time: bool = False

    @property
    def safe(self) -> bool:
        return self.status == "safe"

    @property
    def worst(self) -> Aggregation | None:
        return self.found[0] if self.found else None


@dataclass(frozen=True)
class _SlotForm:
    tau: float
    b: tuple[float, ...]
    inclusive: bool


def slot_form(rule) -> _SlotForm | None:
    """The rule as ``S = tau T + sum_s b_s X^[s]`` (module docstring); ``None`` for the
    minimum-frequency rule, which is not a measure of magnitudes."""
    if isinstance(rule, rules_mod.PPercent):
        r = 100.0 / rule.p
        return _SlotForm(-r, (1.0 + r,) + (r,) * rule.c, False)
    if isinstance(rule, rules_mod.PriorPosterior):
        r = rule.q / rule.p
        return _SlotForm(-r, (1.0 + r,) + (r,) * rule.c, True)
    if isinstance(rule, rules_mod.Dominance):
        kappa = rule.k / (100.0 - rule.k)
        return _SlotForm(-kappa, (1.0 + kappa,) * rule.n, False)
    if isinstance(rule, rules_mod.RequestRule):
        kappa = rule.k / (100.0 - rule.k)
        return _SlotForm(-kappa, (1.0 + kappa,), False)
    return None


@dataclass
class _Respondents:
    """Pooled absolute amounts per (cell, respondent) of the suppressed cells, in the
    local numbering of the cells checked; ``rid`` is unique across cells except for a
    holding that spans them."""

    cell: np.ndarray
    rid: np.ndarray
    amount: np.ndarray
    total: np.ndarray  # X_i as the rules read it
    count: np.ndarray  # respondents per cell (counts for count tables)
    distinct: bool  # respondents of different cells are known to differ

    def top(self, depth: int) -> np.ndarray:
        """``(n, depth)`` largest amounts per cell."""
        n = len(self.total)
        order = np.lexsort((-self.amount, self.cell))
        cell = self.cell[order]
        starts = np.searchsorted(cell, cell, side="left")
        rank = np.arange(len(cell)) - starts
        out = np.zeros((n, depth))
        keep = rank < depth
        out[cell[keep], rank[keep]] = self.amount[order][keep]
        return out


def _respondents(source: UnionSource, cells: np.ndarray) -> _Respondents:
    """Amounts an intruder's arithmetic runs on: raw contributions pooled by holding (seed
    000, Holdings) under the rule set's sign policy; cells known by summary contribute
    their largest amounts as respondents of their own."""
    m = source.cells
    n = len(cells)
    parts_cell, parts_id, parts_amt = [], [], []
    raw = np.zeros(n, bool)
    c = source.contributions
    next_id = 0
    # Under sampling weights the rules read weighted magnitudes (seed 000, Sampling
    # weights), which only the summaries carry consistently with the cell totals.
    if c is not None and c.weight is None:
        # Only these cells' contributions are read (not a mask over all of them: 60
        # million at 10^6 cells with margins).
        select = sp.csr_matrix((np.ones(n), cells, np.arange(n + 1)), shape=(n, m.n_cells))
        pos, _, keep = spread(select, source, weights=False)
        cc = pos.astype(np.int64)  # scipy's int32 indices would overflow ``cc * radix``
        value = np.asarray(c.value, dtype=float)[keep]
        if source.ruleset.negative.mode == "shift":
            value = value + source.ruleset.negative.shift
        if c.holding is not None:
            holding = np.asarray(c.holding, dtype=np.int64)[keep]
        else:
            holding = np.full(len(cc), -1, dtype=np.int64)
        span = int(holding.max(initial=-1)) + 1
        ident = np.where(holding < 0, span + np.arange(len(cc)), holding)
        radix = int(ident.max(initial=0)) + 1
        groups, inverse = np.unique(cc * radix + ident, return_inverse=True)
        pooled = np.abs(np.bincount(inverse, weights=value, minlength=len(groups)))
        parts_cell.append(groups // radix)
        parts_id.append(groups % radix)
        parts_amt.append(pooled)
        raw[cc] = True
        next_id = radix
    summary = np.flatnonzero(~raw)
    if summary.size:
        largest = np.abs(m.largest[cells[summary]])
        depth = largest.shape[1]
        sc = np.repeat(summary, depth)
        parts_cell.append(sc)
        parts_id.append(next_id + np.arange(sc.size))
        parts_amt.append(largest.ravel())
    cell = np.concatenate(parts_cell) if parts_cell else np.zeros(0, np.int64)
    rid = np.concatenate(parts_id) if parts_id else np.zeros(0, np.int64)
    amount = np.concatenate(parts_amt) if parts_amt else np.zeros(0)
    # Distinct when no respondent (a holding, pooled per cell, zero amounts included as
    # the counts include them) lies in two of the cells: then an aggregation's
    # respondents number the sum of its cells' counts. Raw contributions without holdings
    # spanning cells are such (until 2026-11-27 any raw contribution made the cells not
    # distinct, and the frequency search enumerated every subset of small cells: a 3x3
    # table under a minimum frequency of 10 spent 37 s of its 60 on checks it then left
    # undecided at 2,000 supports); summaries' respondents are their own.
    distinct = np.unique(rid).size == rid.size
    nz = amount > 0
    return _Respondents(
        cell[nz],
        rid[nz],
        amount[nz],
        np.abs(m.total[cells]),
        np.asarray(m.count, dtype=float)[cells],
        distinct,
    )


def atom_map(relations, source: UnionSource) -> sp.csr_matrix:
    """``G`` of shape ``(n_cells, n_cells)``: each cell as a sum of the *atoms* whose
    contributions an aggregation is judged on (columns of ``G`` are the atom cells).

    The leaf cells of a single table when every leaf's magnitudes are known: a margin's
    respondents are its leaves' respondents, so an aggregation ``lambda`` over cells is
    judged on ``phi = G^T lambda`` over the leaves, and a respondent's share in a margin and
    in its leaf is one contribution, not two (seed 002 section 5 writes
    ``X_A^r = sum_i |lambda_i x_i^r|`` for cells without common parts; with nested cells
    that formula would count a contribution once per cell it lies in, and would judge the
    relation "total = sum of its parts", all suppressed, as a published aggregation of
    value 0). Otherwise every cell is an atom of its own: the seed's formula, right for
    cells without common parts; for cells with common parts (a margin and a cell within
    it, linked tables) it can understate what an aggregation discloses, so groups with
    such cells are not certified (:func:`_sharing`).
    """
    n = source.cells.n_cells
    leaf = getattr(relations, "is_leaf", None)
    aggregation = getattr(relations, "aggregation", None)
    known = np.ones(n, bool) if source.known is None else np.asarray(source.known, bool)
    if leaf is None or aggregation is None or not known[np.asarray(leaf)].all():
        return sp.identity(n, format="csr")
    leaf_cells = np.flatnonzero(leaf)
    g = sp.csr_matrix(aggregation)
    return sp.csr_matrix((g.data, leaf_cells[g.indices], g.indptr), shape=(n, n))


def check_aggregations(
    relations,
    values,
    suppressed,
    source: UnionSource,
    *,
    derived=None,
    deadline: float | None = None,
    time_limit: float = 60.0,
    screen_only: bool = False,
    proof_only: bool = False,
    proven: set | None = None,
    deviations: Deviations | None = None,
) -> AggregationCheck:
    """Decide whether any aggregation of the suppressed cells is sensitive.

    Parameters
    ----------
    relations : scipy.sparse matrix or Table or LinkedTables
        ``A`` with ``A x = 0``.
    values : array_like, shape (n_cells,)
        True cell values (for the aggregations' published values).
    suppressed : array_like of bool, shape (n_cells,)
    source : service.sdc.unions.UnionSource
        The cells' magnitudes, the rule set, which cells are known, raw contributions.
    derived : array_like of bool, shape (n_cells,), optional
        Suppressed cells the intruder computes exactly (point intervals).
    deadline : float, optional
        Reading of the current clock (:func:`service.sdc.highs.now`: seconds, or the
        suppression's work units in deterministic mode) by which to stop; else
        ``time_limit`` seconds from now.
    screen_only : bool
        Leave a group the screen does not prove ``undecided`` instead of running the MIP,
        listing the atoms it failed on in ``failing`` (for the fast method, which then
        protects them).
    proof_only : bool
        Screen only, and only whether the screen's LPs prove every group: a group is left
        ``undecided`` at its first sensitive atom they do not prove, with no witness
        sought and nothing listed (the fast method's trim, which keeps a removal only
        when its group is proven).
    proven : set, optional
        Groups already proven safe, by their hidden cells; updated. Only for repeated
        checks of one table with the same ``values`` and ``source`` (the fast method's
        rounds and its final audit): a group's aggregations depend on its hidden cells
        alone, since every other cell of its relations is published. A group within a
        proven one whose other cells are determined by its relations is safe too
        (:class:`_Cover`: the final audit publishes the derived cells the rounds hid).
    deviations : Deviations, optional
        Deviations kept from earlier checks of the same table (same ``values`` and
        ``source``) and from the suppression search, updated with this check's: one that
        still holds in a group bounds its screen LPs there without solving them (the fast
        method's rounds).

    Returns
    -------
    AggregationCheck

    Notes
    -----
    Seed 002 sections 3-6; the method and the readings are in the module docstring and
    :func:`atom_map`.
    """
    start = time.perf_counter()
    deadline = highs.now() + time_limit if deadline is None else deadline
    values = np.asarray(values, dtype=float)
    suppressed = np.asarray(suppressed, dtype=bool)
    # Without derived cells no full-length mask is made (the trim checks one group per
    # trial; at 10^6 cells each pass over the masks costs about a millisecond).
    if derived is None:
        hidden, derived_cells = suppressed, np.zeros(0, np.int64)
    else:
        derived = np.asarray(derived, bool) & suppressed
        hidden, derived_cells = suppressed & ~derived, np.flatnonzero(derived)
    work = _Work(
        _Table.of(relations, source),
        values,
        hidden,
        source,
        deadline,
        screen_only,
        deviations,
        proof_only,
    )
    found, more, failing, undecided, statuses = [], [], [], [], []
    groups = screened = 0

    def decide(batch: list[tuple[bytes | None, _Group]]) -> None:
        nonlocal groups, screened
        outcomes = _drive([g.steps() for _, g in batch], values, source)
        for (tag, group), outcome in zip(batch, outcomes):
            failing.extend(group.failing)
            more.extend(group.more_found)
            if outcome is None:
                continue
            groups += 1
            status, aggregation, how = outcome
            if status == "safe" and (why := group.unproven()) is not None:
                status = "undecided"
                work.why.add(why)
            statuses.append(status)
            screened += status == "safe" and group.mip_solves == 0
            if proven is not None and tag is not None and status == "safe":
                proven.add(tag)
            if aggregation is not None:
                found.append(aggregation)
            elif status != "safe":
                undecided.append(work.cells[group.members])
        batch.clear()

    if deviations is not None:
        deviations.flush()
    if _linked_per_cell(relations):
        # Not even the published cells can be certified (LINKED_PARTS).
        return AggregationCheck(
            "undecided",
            derived_cells,
            (),
            np.flatnonzero(hidden),
            0,
            0,
            0,
            time.perf_counter() - start,
            "not every group of suppressed cells was decided: " + LINKED_PARTS,
            (),
            False,
        )
    # Hidden cells that share a part with another hidden cell, in any group: aggregations
    # of two groups add up too, and their sum is judged nowhere.
    sharing = _sharing(relations, work.table.cell_atoms, work.cells)
    batch: list[tuple[bytes | None, _Group]] = []
    # Only a check that publishes derived cells (the final audit) can have a group strictly
    # within a proven one: the rounds' patterns only grow.
    cover = _Cover(work, proven, hidden) if proven and derived_cells.size else None
    examined = np.zeros(len(work.cells), bool)
    for members, build in work.groups():
        examined[members] = True
        tag = work.cells[members].tobytes() if proven is not None else None
        if proven is not None and (
            tag in proven or (cover is not None and cover.covers(work.cells[members]))
        ):
            groups += 1
            screened += 1
            statuses.append("safe")
            proven.add(tag)
            continue
        if sharing is not None and sharing[members].any():
            # Judged cell by cell, aggregations of cells with common parts can understate
            # disclosure (see _sharing): not certified.
            groups += 1
            statuses.append("undecided")
            undecided.append(work.cells[members])
            work.why.add(SHARED_PARTS)
            continue
        batch.append((tag, build()))
        if len(batch) == _BATCH_GROUPS:
            decide(batch)
    decide(batch)
    if sharing is not None and (sharing & ~examined).any():
        # The groups skipped as holding no cell a rule could call sensitive (seed 002
        # Theorem 2, which holds for disjoint atoms): with common parts, an aggregation of
        # such cells can isolate a sensitive part (a difference of two linked cells, see
        # _sharing), so theirs are not certified either.
        groups += 1
        statuses.append("undecided")
        undecided.append(work.cells[sharing & ~examined])
        work.why.add(SHARED_PARTS)
    found.extend(more)
    found.sort(key=lambda g: -g.measure)
    if found:
        status = "sensitive"
    elif "undecided" in statuses:
        status = "undecided"
    elif "not_applicable" in statuses:
        status = "not_applicable"
    else:
        status = "safe"
    messages = {
        "safe": "every aggregation of suppressed cells is safe",
        "sensitive": f"{len(found)} sensitive aggregation(s) of suppressed cells found",
        "undecided": "not every group of suppressed cells was decided: "
        + "; ".join(sorted(work.why)),
        "not_applicable": "some suppressed cells have no contributions or summary, so the "
        "rule cannot be applied to aggregations that include them",
    }
    return AggregationCheck(
        status,
        derived_cells,
        tuple(found),
        np.concatenate(undecided) if undecided else np.zeros(0, np.int64),
        groups,
        screened,
        work.mip_solves,
        time.perf_counter() - start,
        messages[status],
        tuple(failing),
        highs.now() >= work.deadline,
    )


#: Why nothing is certified on linked tables judged cell by cell (:func:`_linked_per_cell`).
LINKED_PARTS = (
    "the linked tables' cells overlap in parts that no table has as a cell, so published "
    "cells of different tables publish differences of those parts, which contributions "
    "sent per cell cannot judge; not certified: send the contributions on the cover "
    "table's leaves (README, linked tables)"
)


def _linked_per_cell(relations) -> bool:
    """Whether ``relations`` are linked tables judged cell by cell (their cells are the
    atoms: contributions were sent per cell of each table), two tables or more.

    Any two such tables overlap in parts that neither has as a cell (region x size and
    region x nace meet in the parts (region, size, nace); even their grand totals are
    the same population), and two published cells that share parts publish their
    difference, a combination of parts: (N1, s) - (N1, F) = x(N1, s, C) - x(N1, m, F).
    A campaign (2026-11-27) found it with both cells derived, and with nothing
    suppressed at all: x(N1, s, C) a singleton of 300 and x(N1, m, F) one of 1, so the
    respondent of (N1, m, F) learns the other exactly, while every linked cell passed
    the rule and the check, which judges aggregations of suppressed cells only, said
    ``safe``. Seed 002's criterion judges aggregations on the respondents' own
    contributions (section 5), which cells of different tables cannot give apart; so
    nothing on such tables is certified, whatever is suppressed (the cover table,
    whose leaves are the parts, is judged exactly)."""
    return getattr(relations, "union_index", None) is not None and (
        len(getattr(relations, "tables", ())) >= 2
    )


#: Why a group with fractional replicate weights is left undecided (:func:`_fractional`).
FRACTIONAL_WEIGHTS = (
    "fractional sampling weights (replicate formulation), or public weights below 1: the "
    "rules fill a slot of an aggregation with fractional parts of several cells' "
    "contributions (or protect an observation larger than its weighted slot), which the "
    "check, working on whole respondents per cell, can understate; not certified (round "
    "the weights, or use weights 'sample')"
)


#: How aggregations are read under the ``shift`` sign policy, and why the screen, the MIP
#: and the pooled proof hold for that reading unchanged.
SHIFT_READING = """
Seed 004 strategy 2 (section 2.1) defines disclosure of ``x`` as disclosure of
``y = x + M``, for users who know that every contribution is ``x >= -M`` and each cell's
number of contributions ``N``, and section 2.2 protects "the tabulation of the transformed
variable y" in place of ``x``'s. An aggregation of hidden cells (seed 002 section 3) is
therefore one of the table of ``y``: ``sum lambda_i Y_i`` with ``Y_i = X_i + N_i M``,
published exactly when ``sum lambda_i X_i`` is (``M sum lambda_i N_i`` is known), and seed
002 section 5 judges it on the absolute contributions ``|lambda_i y_i^r| = |lambda_i|
(x_i^r + M)``, pooled by holding (a holding's ``y`` in a cell is the sum of its
contributions' ``x + M``, seed 000 Holdings). :func:`service.sdc.unions.judge` reads them
so (``from_contributions``' ``scale``; summaries' slots are ``y`` already).

Not ``|lambda_i| x_i^r + M`` (the judge's reading until 2026-11-28, whose disagreement with
the screen left every group of two or more atoms uncertified under ``shift``):

1. Seed 002 (5.1) hides respondent ``t``'s share of an aggregation behind the others'
   absolute contributions, each the room an intruder's prior leaves on that respondent's
   term. On the table of ``y`` (``y >= 0``, known within 100% under the p%-rule's reading
   ``q = 100``, section 5) the term ``lambda y^r`` is known within ``|lambda| y^r =
   |lambda| (x^r + M)``, and ``lambda x^r`` differs from it by the known ``lambda M``.
   ``|lambda| x^r + M`` is no such room: it credits a respondent at the bound (``x = -M``,
   ``y = 0``, known exactly) with ``(1 - |lambda|) M`` it does not have (h61, below), and
   denies one ``(|lambda| - 1) M`` it has once ``|lambda| > 1``.
2. Seed 002 section 3: an aggregation is defined up to a constant factor. Under
   ``|lambda| (x + M)`` every rule's measure is positively homogeneous in ``lambda`` (the
   same verdict for ``c lambda``); under ``|lambda| x + M`` it is not, and its contributions
   fall below 0 once ``|lambda| > 1``: the verdict depended on a normalisation.
3. Seed 002 Theorem 2 (an aggregation of cells the rule calls safe is safe), on which the
   whole check rests, holds for an aggregation of a table of non-negative contributions,
   and fails for ``|lambda| x + M``: h61's aggregation below was sensitive by it while
   none of its cells is.
4. For one cell (``lambda = 1``) the two agree: the cells' own rules are unchanged.

Proof that the check certifies soundly for this reading: with ``y_j^r >= 0`` the atom
``j``'s respondents on the shifted scale (:func:`_respondents`: ``x + M`` per contribution,
pooled by holding; a summary's slots, ``X_j + N_j M`` its total), an aggregation with atom
multipliers ``phi`` has the absolute contributions ``X^r = sum_j |phi_j| y_j^r`` and the
total ``T = sum_j |phi_j| Y_j``: an aggregation of a table of non-negative contributions,
with no term in ``M`` besides those in ``y``. The module's method (seed 002 Theorem 2's
``d_i <= S_i``, the screen's ``omega`` and ``alone`` bounds, the MIP's slots of
``|phi_j| y_j^r``) and :data:`POOLED_PROOF` (observations ``|phi_j| y`` of weight ``w``)
assume nothing else of the contributions, so each bound holds as for positive tables.

A helper's probe (h61) had found ``/v1/audit`` calling ``safe`` a 2x2x2 pattern under the
(2,60) dominance rule, ``M = 100``, whose aggregation ``a0b0c0 - (a0b1c0 + a1b0c0 -
a1b1c1) / 2`` the old reading judged on ``2 x 4`` (``x = -98``) and ``-50 + 100 = 50 x 3``,
measure 13 > 0. The three halves hold respondents at the bound, ``x = -100``: ``y = 0``,
so the aggregation reads ``2, 2, 2, 2, 0, 0, 0``, top two 4 of 8, measure
``4 - 1.5 x 4 = -2``: safe, as is a0b0c0 alone (no cell of that table is sensitive);
``safe`` was right.
"""


#: Relative margin of the pooled proof (:data:`POOLED_PROOF`): each atom's measure is
#: raised by this share of its scale ``(1 - tau) X_j``, so that a proof leaves every
#: aggregation's ``S`` below ``-1e-8 (1 - tau) T``, out of the rules' tie tolerance
#: (at most ``2e-9 (1 - tau) T``: :mod:`service.sdc.rules`).
POOLED_MARGIN = 1e-8

#: The proof of a group whose aggregations pool fractional replicate weights
#: (:meth:`_Group.pooled_safe`).
POOLED_PROOF = """
Seed 000 (Sampling weights), ``replicate``: an observation ``x`` of weight ``w`` stands
for ``w`` contributions of ``x``, and slot ``s`` of a cell is the mass of its sorted
replicated sequence in ``[s-1, s)`` (:func:`service.sdc.magnitudes._weighted`). Seed 002
sections 4-5: an aggregation with atom multipliers ``phi`` is judged as a cell whose
observations are ``|phi_j| x`` (weight ``w``) over its atoms ``j`` (no observation spans
two atoms: holdings cannot be combined with weights). Write ``top_s(.)`` for the largest
mass-``s`` part of a replicated sequence (``sum_{t <= s}`` of its slots), and the rule in
slot form ``S = tau T + sum_{s <= m} b_s X^[s]``, ``b_1 >= ... >= b_m > 0``.

1. ``T = sum_j |phi_j| X_j`` (``X_j`` the atom's weighted total).
2. ``top_s(pool) <= sum_j |phi_j| top_s(j)`` for every ``s``: a part of mass ``s`` of the
   pool takes at most mass ``s`` from each atom, worth at most ``|phi_j| top_s(j)``.
3. By parts (``b_{m+1} = 0``): ``sum_s b_s X^[s] = sum_s (b_s - b_{s+1}) top_s(pool)``
   with every ``b_s - b_{s+1} >= 0``, so by 2 it is at most
   ``sum_j |phi_j| sum_s b_s x_j^[s]``, and ``S <= sum_j |phi_j| S_j``, ``S_j`` the
   atom's own measure on its own slots (the screen's ``measure``). Seed 002 Theorem 2
   therefore holds however the slots pool (a group without a possibly sensitive atom is
   safe, as the check assumes), but its finer bounds (``omega``, the MIP's slots) rest on
   whole respondents and do not.
4. Let ``e_j = S_j + POOLED_MARGIN (1 - tau) X_j`` (0 for an empty atom, which adds
   nothing to ``T`` or the slots), ``A = {i : e_i > 0}`` and
   ``C = sum_{j not in A} -e_j |phi_j| >= 0``. For ``i`` in ``A`` let ``LP_i`` be the
   least ``C`` over the aggregations with ``phi_i = 1`` (the screen's LP,
   :meth:`_Group._cheapest`, with these costs, 0 on ``A``). Aggregations form a linear
   space, so any one with ``phi_i != 0``, divided by ``phi_i``, gives
   ``C >= |phi_i| LP_i``. Then ``S + POOLED_MARGIN (1 - tau) T <= sum_A e_i |phi_i| - C
   <= C (sum_A e_i / LP_i - 1) <= 0`` when ``sum_A e_i / LP_i < 1`` (all ``LP_i > 0``;
   an infeasible one, ``phi_i = 0`` throughout, adds 0): ``S <= -POOLED_MARGIN (1 - tau)
   T``, below the rules' ties when ``T > 0``, whether ``C > 0`` or not; ``T = 0`` leaves
   ``phi`` nonzero on empty atoms only (a cell with contributions all 0 has ``e > 0``, is
   in ``A``, and ``C = 0`` then makes its ``phi`` 0): an aggregation without contributors,
   empty, safe. Strict or inclusive, no rule fires.

5. Frequency rules need no bound of this kind. Seed 000 ("Minimum frequency rule") calls
   a cell sensitive when its frequency ``N < n``; under ``replicate`` an observation of
   weight ``w`` stands for ``w`` contributors, so ``N`` is the sum of the weights (seed
   000, Sampling weights; :func:`service.sdc.magnitudes._weighted`, as for every cell).
   Judged as a cell (seed 002 section 4, Operational criterion 2), an aggregation's
   observations are those of its atoms with ``phi_j != 0``, each ``|phi_j| x`` with its
   weight ``w`` unchanged (section 5: the multiplier scales what a respondent
   contributes, not how many contributors it stands for; :func:`service.sdc.unions.judge`
   reads it so), hence ``N(phi) = sum_{j : phi_j != 0} N_j``: it depends on the support
   of ``phi`` only, never on how the slots pool. Weights are positive and no observation
   lies in two atoms (no holdings with weights), so ``N`` only grows with the support and
   ``N(phi) >= N_j`` on it: a sensitive aggregation (``n - N > 1e-9 (n + N)``, the rule's
   tie) lies within the atoms with ``N_j < n - 1e-9``. These are the two facts the
   support search (module docstring, "Frequency rules"; :meth:`_Group.frequency`) rests
   on, with each atom's count ``N_j`` (weighted cells are read from their summaries, whose
   respondents are distinct: the sum of counts). Its enumeration of supports below ``n``
   meets every sensitive aggregation's support ``U``, anchored at an atom of ``U`` with
   ``N_j > 0``, and the aggregation its LP finds within ``U`` (and the empty atoms) with
   that anchor's multiplier 1 has ``0 < N <= N(U)``, so the rule fires on it too and the
   judge (the rule itself) reports it: the search's ``safe`` is exact whatever the
   weights. (The same holds under ``sample`` and ``sample_public_weights``, whose ``N`` is
   the sum of the weights too, and for callers' summaries, whose counts an aggregation
   adds up: :func:`service.sdc.unions.judge`; there steps 1-4 do not apply, so only
   groups under frequency rules alone are proven.) A frequency rule that another rule
   of the set implies (:func:`_implied_frequency`, only when every count is whole) is
   not searched: an aggregation of whole ``N <= c + 1`` (p%, (p,q)) or ``N <= n``
   ((n,k)) has all its replicated mass in the slots the measure adds, ``S = X^[1]`` or
   ``S = T``, positive unless every observation is 0 (the search runs then); steps 1-4
   prove ``S < 0`` for every aggregation with ``T > 0``, so none has so few
   contributors.

The bound of steps 1-4 holds whatever the slots are filled with, the margin keeps it
clear of the rules' ties, and each ``LP_i`` is bounded below by the optimum's row prices
(a deviation: ``bt^T z = 0``, ``|z_j| <= -e_j`` off ``A``, checked), taken ``(1 - 1e-6)``
lower, as the screen takes its prices.
"""

SPANNING_ALLOWANCE = """
Seed 002 section 5: respondent ``r``'s absolute contribution to an aggregation with atom
multipliers ``phi`` is ``X^r = sum_j |phi_j| a_rj`` (``a_rj`` its amount in atom ``j``,
pooled by holding; one holding across atoms is one respondent). In slot form, for the
respondents ``r_1, .., r_m`` of the best assignment of the slots,
``S = sum_j |phi_j| d_j`` with ``d_j = tau X_j + sum_s b_s a_{r_s j}``
(``b_1 >= ... >= b_m > 0``; module docstring). Without respondents in two atoms the
screen bounds ``d_j`` by where the slots' respondents sit (module docstring, 1); with
them, a slot's respondent may also hold a piece of another atom ``j`` of the
aggregation, which is then a piece of a respondent spanning two or more of the group's
live atoms (a *spanning piece*). Per atom ``j``:

1. ``d_j <= S_j`` always: the ``r_s`` are distinct, so ``sum_s b_s a_{r_s j}`` is at most
   the atom's own top pieces so weighted (rearrangement).
2. The attacked respondent ``r_1`` sits in the anchor ``i`` (some atom holding ``r_1``
   with ``phi_i != 0``; there is one, ``X^{r_1} > 0``). At ``j != i`` it adds at most
   ``b_1 eps_j``, ``eps_j`` the largest spanning piece of ``j``, and the other slots take
   distinct pieces of ``j``: ``d_j <= -omega_j + b_1 eps_j``, so the screen's cost
   ``omega_j`` becomes ``max(omega_j - b_1 eps_j, -S_j)`` (at least ``-S_j`` by 1, as
   ``omega_j`` is).
3. Where every slot's respondent sits in ``i`` (the second half of the split) the pieces
   they hold at ``j != i`` are spanning pieces: ``d_j <= tau X_j + gamma_j``,
   ``gamma_j = sum_s b_s y_j^[s]`` over ``j``'s spanning pieces ``y_j`` sorted, and the
   cost ``-tau X_j`` becomes ``-tau X_j - gamma_j``. The one-intruder partners split the
   same way: the intruder ``r_2`` at one partner ``j`` holding it with ``phi_j != 0``
   (cost as in 2), every other atom as in 3.
4. The anchor's bounds (``S_i``, and ``S_i - b_m x_i^[m]`` when some slot's respondent
   holds no piece of ``i``) and the anchors (with every cost at least 0, ``S <= |phi_i|
   S_i``: the atoms sensitive on their own) are unchanged; seed 002 Theorem 2 holds too
   (``F`` is sublinear, :data:`POOLED_PROOF` 3).
5. At the *heavy* atoms, where 2 or 3 would leave a cost below 0 (a sensitive atom with a
   large spanning piece), the attacked respondent's pieces are charged to the anchor
   instead: take as anchor the atom ``i`` where ``|phi_i| a_{r_1 i}`` is largest among
   those holding ``r_1``; its pieces at the heavy atoms ``j != i`` then add at most
   ``b_1 h |phi_i| a_{r_1 i}``, ``h`` their number. The anchor's bounds rise by
   ``b_1 kappa_i``, ``kappa_i = max_r h_r a_ri`` over the spanning respondents of ``i``
   (:func:`spanning_lift`); at a heavy atom ``omega_j`` stays and ``-tau X_j`` is lowered
   by the pieces of the other slots only, ``sum_{s >= 2} b_s y_j^[s-1]``; every other
   atom is as in 2-3. The anchors are then the atoms with ``S_i + b_1 kappa_i`` near 0 or
   above (with every cost at least 0, ``S <= |phi_i| (S_i + b_1 kappa_i)``). A cost still
   below 0 leaves the group to the MIP, which models the holdings exactly.

A group counts only the respondents in two or more of its live atoms (a published atom
adds nothing to its aggregations); :class:`Requirements` take the rooms of 2 and 3 with
the spanning pieces of the whole table (at most any group's rooms under 2-3 or 5) and
the anchor's level with the lift of 5 where the screen used it, so that a requirement
met proves the anchor in the screen. Until 2026-11-28 such groups went to the MIP
alone, which on a 3-D table could not decide a group of hundreds of atoms: 10x10x5 with
5% of the contributions in holdings across cells of a row ended the fast method's 120 s
with no pattern.
"""


def _fractional(source: UnionSource, atoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which ``atoms`` hold a respondent of fractional mass: a contribution with a
    non-integer sampling weight under the replicate formulation, or a summary with a
    non-integer count (a weighted cell's slots); and, under ``sample_public_weights``, a
    contribution of weight below 1 (its slot ``w x`` is less than the ``x`` it protects).


    Seed 000 (Sampling weights) replicates an observation ``x`` of weight ``w`` ``w``
    times; for a fractional ``w`` the service's "simple extension" fills slot ``j`` with
    the mass of the sorted replicated sequence in ``[j-1, j)``. Applied to an aggregation
    (seed 002 Operational criterion 2: the same rule as for a cell), the observations of
    its cells are pooled, so a slot can take the fractional parts of several cells:
    0.5 x 20 in one cell and 0.5 x 12 + 1 x 12 in another make slots 16 and 12 of a total
    of 28 (an estimated 2 contributors, p%-sensitive), while each cell's slots taken as
    respondents of their own (10; 12, 6) leave 6 unexplained and look safe. No split into
    whole respondents that keeps the cells' totals bounds the pooled slots (the parts of
    one slot come from several cells), so the screen's and the MIP's proofs, built on
    whole respondents, do not hold; found by a helper's campaign (h58): ``/v1/suppress``
    called such a pattern ``safe``. Groups with such an atom and another are left
    ``undecided`` (safe reading: what cannot be proven is not certified) unless the bound
    that holds for pooled slots proves them (:data:`POOLED_PROOF`, replicate weights on
    raw contributions only); a sensitive aggregation the check finds is still reported,
    judged exactly by :func:`service.sdc.unions.judge`, which pools the weighted
    observations.

    Returns ``(fractional, pooled)``: ``pooled`` marks the atoms flagged only for
    fractional replicate weights (raw contributions, under any sign policy: the shift's
    too, :data:`SHIFT_READING`), whose groups :meth:`_Group.pooled_safe` can still
    prove."""
    n = source.cells.n_cells
    out = np.zeros(len(atoms), bool)
    pooled = np.zeros(len(atoms), bool)
    raw = np.zeros(n, bool)
    c = source.contributions
    if c is not None:
        raw[np.asarray(c.cell)] = True
        if c.weight is not None and c.weights_mode == "replicate":
            weight = np.asarray(c.weight, dtype=float)
            frac = np.abs(weight - np.round(weight)) > 1e-9 * np.maximum(1.0, weight)
            out |= np.bincount(np.asarray(c.cell)[frac], minlength=n)[atoms] > 0
            pooled = out.copy()
        elif c.weight is not None and c.weights_mode == "sample_public_weights":
            # The screen's slots are ``w x`` (what the intruders subtract) and its first
            # slot stands for the protected ``x_1^s``: an upper bound only where
            # ``w >= 1``. Below 1 it understates (h58: 100 x 0.5 beside 30, 5, 4 pooled
            # has measure 10 > 0 by the rule, while the slots 50, 30 gave -4).
            light = np.asarray(c.weight, dtype=float) < 1.0
            out |= np.bincount(np.asarray(c.cell)[light], minlength=n)[atoms] > 0
    # A caller's summary (a cell without contributions) with a fractional count; the
    # counts of weighted contributions (sums of weights) are read from the weights above:
    # under ``sample`` their respondents are the observations, whole.
    count = np.asarray(source.cells.count, dtype=float)[atoms]
    summary = ~raw[atoms] & (np.abs(count - np.round(count)) > 1e-9 * np.maximum(1.0, count))
    out |= summary
    return out, pooled & ~summary


#: Why a group of hidden cells that share parts is left undecided (:func:`_sharing`).
SHARED_PARTS = (
    "hidden cells share contributions (a margin and a cell within it, or cells of linked "
    "tables over common parts) while the aggregation check can only judge cells as disjoint "
    "atoms, which can understate what an aggregation discloses; not certified"
)


def _sharing(relations, cell_atoms: bool, cells: np.ndarray) -> np.ndarray | None:
    """Which of the hidden ``cells`` share a part (a leaf cell of a table, of the union of
    linked tables) with another of them, when the check judges each cell as an atom of its
    own (``cell_atoms``: the check's :func:`atom_map` is the identity); None where it
    judges the leaves (no shared parts among atoms) or the structure cannot tell.

    Seed 002 section 5 writes ``X_A^r = sum_i |lambda_i x_i^r|`` for cells without common
    parts; with common parts a respondent's share is counted once per cell it lies in,
    with opposite signs added up as if they did not cancel. That is not conservative
    (found 2026-11-27): linked tables region x size and nace x region, cells (N1, s) and
    (C, N1) both hidden; their difference is published and equals x(N1, s, F) - x(N1, m, C)
    = 100 - 1, so the one respondent of (N1, m, C) learns the singleton of (N1, s, F) to
    within 1%, while the cell-by-cell judgement counts the ten respondents of (N1, s, C),
    in both cells, twice and calls it safe. Until aggregations are judged on the finest
    parts there, a group holding a hidden cell that shares a part with another hidden
    cell, in any group (two groups' aggregations add up to one judged in neither), is not
    certified (:data:`SHARED_PARTS`).

    Two cells share a leaf when, in every dimension, their codes' leaves meet: with each
    code's leaves numbered depth first (an interval, ``Hierarchy.leaf_interval``), when the
    intervals overlap. Read from the codes, never from the cross-classification of linked
    tables (which may be far larger than they are), pair by pair in blocks of
    :data:`_PAIRS_PER_BLOCK`."""
    if getattr(relations, "union_index", None) is not None:
        index = np.asarray(relations.union_index)[cells]
        positions = np.stack(np.unravel_index(index, relations.shape), axis=1)
    elif getattr(relations, "key_positions", None) is not None and cell_atoms:
        positions = np.asarray(relations.key_positions)[cells]
    else:
        return None
    lo = np.empty(positions.shape, np.int64)
    hi = np.empty(positions.shape, np.int64)
    for d, h in enumerate(relations.dimensions):
        first, end = h.leaf_interval
        lo[:, d], hi[:, d] = first[positions[:, d]], end[positions[:, d]]
    out = np.zeros(len(cells), bool)
    step = max(1, _PAIRS_PER_BLOCK // max(len(cells), 1))
    for i in range(0, len(cells), step):
        meet = np.ones((min(step, len(cells) - i), len(cells)), bool)
        for d in range(positions.shape[1]):
            meet &= (lo[i : i + step, d, None] < hi[None, :, d]) & (
                lo[None, :, d] < hi[i : i + step, d, None]
            )
        meet[np.arange(meet.shape[0]), i + np.arange(meet.shape[0])] = False
        out[i : i + step] = meet.any(axis=1)
    return out


#: Pairs of hidden cells compared at once by :func:`_sharing` (its memory: a byte each).
_PAIRS_PER_BLOCK = 4_000_000


@dataclass(frozen=True)
class _RuleArrays:
    """Per rule and atom (module docstring, the screen):

    ``measure`` ``S_i``; ``alone`` ``S_i - b_m x_i^[m]``, the most the atom's own
    coefficient can be when some attacker sits elsewhere; ``scale`` of a tie; ``plain``
    ``-tau X_j``, what an atom without attackers costs; ``omega``, what an atom that may
    hold attackers costs. NaN / inf for the frequency rule."""

    measure: np.ndarray
    alone: np.ndarray
    scale: np.ndarray
    plain: np.ndarray
    omega: np.ndarray


def _implied_frequency(rules, source: UnionSource) -> set[int]:
    """The minimum-frequency rules another rule of the set implies on aggregations: one
    with fewer than ``c + 2`` respondents has nothing left to hide its largest under the
    p%- or (p,q)-rule with coalition ``c`` (``S = X^[1] > 0``), and one with at most ``n``
    is wholly its top ``n`` under an (n,k) rule; so a frequency rule with a threshold
    that small needs no search of its own (unless some respondents contribute 0: then
    ``X^[1]`` may be 0).

    That counts whole respondents, whose number the slots cover: not so when a count is
    a sum of weights that is not whole (an aggregation of 1.2 + 1.2 has 2.4 < 3
    contributors, yet the p%-rule's slots 10, 10 leave 4 under replicate weights), nor
    under ``sample`` and ``sample_public_weights``, whose slots are observations, not
    the count (one observation of weight 2: N = 2, the p%-rule's remainder ``x``). There
    nothing is implied (h60: ``sample``, a0 + a1 published with 2.4 contributors under a
    frequency rule of 3 was audited ``safe``)."""
    count = np.asarray(source.cells.count, dtype=float)
    c = source.contributions
    if (np.abs(count - np.round(count)) > 1e-9 * np.maximum(1.0, count)).any() or (
        c is not None and c.weight is not None and c.weights_mode != "replicate"
    ):
        return set()
    reach = 0
    for r in rules:
        if isinstance(r, (rules_mod.PPercent, rules_mod.PriorPosterior)):
            reach = max(reach, r.c + 2)
        elif isinstance(r, rules_mod.Dominance):
            reach = max(reach, r.n + 1)
    return {
        k for k, r in enumerate(rules) if isinstance(r, rules_mod.MinimumFrequency) and r.n <= reach
    }


def _rule_arrays(rules, forms, resp: _Respondents, requests: bool) -> _RuleArrays:
    """The screen's arrays of each rule's slot form over the atoms; ``requests``: some
    respondent of the table asked for protection.

    The request rule protects respondents that asked for it (seed 000, "Foreign trade
    rules"): with none in the table it fires on no aggregation (its measure and
    ``alone`` are ``-inf``), while its slot form, (1,k) over every respondent, held every
    dominated atom possibly sensitive, and the exact rule then confirmed no point of the
    MIP: a table without requests under a rule set with the request rule was audited
    'uncertified' wherever a dominated cell was hidden (until 2026-11-27)."""
    depth = max([1] + [len(f.b) for f in forms if f is not None])
    top = resp.top(depth)
    shape = (len(rules), len(resp.total))
    measure, alone = np.full(shape, np.nan), np.full(shape, np.nan)
    scale, plain, omega = np.ones(shape), np.full(shape, np.inf), np.full(shape, np.inf)
    for k, f in enumerate(forms):
        if f is None:
            continue
        b = np.asarray(f.b)
        m = len(b)
        if not requests and isinstance(rules[k], rules_mod.RequestRule):
            measure[k] = alone[k] = -np.inf
        else:
            measure[k] = f.tau * resp.total + top[:, :m] @ b
            alone[k] = measure[k] - b[-1] * top[:, m - 1]
        scale[k] = np.maximum((1.0 - f.tau) * resp.total, 1e-300)
        plain[k] = -f.tau * resp.total
        om = -f.tau * resp.total - top[:, : m - 1] @ b[1:]
        omega[k] = np.where(np.abs(om) <= _TIE_RTOL * scale[k], 0.0, om)
    return _RuleArrays(measure, alone, scale, plain, omega)


class _Table:
    """What every check of one table needs whatever the pattern: the relations, the atom
    map, the atoms' respondents and the rules' arrays of the screen. Built once per
    relations and source and kept with the source (:meth:`of`): the fast method's rounds
    and its final audit check the same table (at 220 x 220 cells with 2-level hierarchies,
    deriving them took half a second per check)."""

    def __init__(self, relations, source: UnionSource):
        # Column-major: a check takes the columns of its hidden cells (one slice).
        self.a_cols = sp.csc_matrix(getattr(relations, "relations", relations), dtype=float)
        self.g = atom_map(relations, source)
        self.atoms = np.flatnonzero(np.diff(self.g_cols.indptr) > 0)
        # Untyped: a rule's form is None exactly for the frequency rule (its ``n``).
        self.rules: tuple[Any, ...] = source.ruleset.effective_rules()
        self.forms: list[Any] = [slot_form(r) for r in self.rules]
        self.resp = _respondents(source, self.atoms)
        requests = bool((np.asarray(source.cells.requested) > 0).any())
        self.arrays = _rule_arrays(self.rules, self.forms, self.resp, requests)
        self.implied = _implied_frequency(self.rules, source)
        n = source.cells.n_cells
        self.atom_pos = np.full(n, -1)
        self.atom_pos[self.atoms] = np.arange(len(self.atoms))
        known = np.ones(n, bool) if source.known is None else np.asarray(source.known, bool)
        self.known = known[self.atoms]
        self.measure, self.scale = self.arrays.measure, self.arrays.scale
        # Atoms with respondents of fractional mass (FRACTIONAL_WEIGHTS), by position.
        # Those of them only for fractional replicate weights (_Group.pooled_safe).
        self.fractional, self.pooled = _fractional(source, self.atoms)

    @classmethod
    def of(cls, relations, source: UnionSource) -> _Table:
        """The table of ``relations`` and ``source``: the one kept with ``source`` if it
        was built for these very relations (the same object), else a new one, kept."""
        kept = source.memo.get("aggregations")
        if kept is not None and kept[0] is relations:
            return kept[1]
        table = cls(relations, source)
        source.memo["aggregations"] = (relations, table)
        return table

    @cached_property
    def cell_atoms(self) -> bool:
        """Whether the atom map makes every cell an atom of its own (:func:`atom_map`)."""
        g = self.g
        return g.nnz == g.shape[0] and bool((g.indices == np.arange(g.shape[0])).all())

    @cached_property
    def g_cols(self) -> sp.csc_matrix:
        """The atom map column-major: the cells each atom lies in."""
        return self.g.tocsc()

    @cached_property
    def spanning(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(atom position, respondent, amount)`` of the respondents in more than one atom
        (a respondent is in an atom at most once: pooled by holding)."""
        r = self.resp
        if r.distinct:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        _, inverse, counts = np.unique(r.rid, return_inverse=True, return_counts=True)
        several = counts[inverse.ravel()] > 1
        return r.cell[several], r.rid[several], r.amount[several]

    @cached_property
    def spanning_top(self) -> np.ndarray:
        """``(atoms, depth)``: each atom's largest pieces of respondents spanning atoms,
        table-wide (:class:`Requirements`; :data:`SPANNING_ALLOWANCE`)."""
        depth = max([1] + [len(f.b) for f in self.forms if f is not None])
        return spanning_top(*self.spanning, len(self.atoms), depth)

    @cached_property
    def relevant(self) -> np.ndarray:
        """Atoms some rule could call sensitive (the groups worth deciding)."""
        mask = np.zeros(len(self.atoms), bool)
        for _, rule_mask in self.rule_masks(np.arange(len(self.atoms))):
            mask |= rule_mask
        return mask

    def rule_masks(self, pos: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``(rule, mask)`` over the atoms ``pos`` that rule could call sensitive (known
        ones only), for each rule with any: near-sensitive under a slot rule, below the
        threshold under a frequency rule the others do not imply (module docstring)."""
        count, known = self.resp.count[pos], self.known[pos]
        silent = ((count > 0) & (self.resp.total[pos] <= 0)).any()
        out = []
        for k, f in enumerate(self.forms):
            if f is None:
                if k in self.implied and not silent:
                    continue
                mask = count < self.rules[k].n - 1e-9
            else:
                mask = self.measure[k, pos] >= -_NEAR_SENSITIVE * self.scale[k, pos]
            if (mask & known).any():
                out.append((k, mask & known))
        return out


class _Cover:
    """Groups of a check that lie within a group proven safe before (``proven``, by hidden
    cells), when every cell of that group not hidden now is determined by its relations.

    The fast method's rounds hide the cells the final audit finds derived (point
    intervals) and publishes. Let ``G'`` be a group of this check within a proven group
    ``G`` (cells ``H`` hidden now), and every cell ``c`` of ``G`` outside ``H`` determined
    by ``G``'s relations: ``e_c = nu_c^T A`` on ``G``'s cells. An aggregation of ``G'`` is
    ``lambda' = mu^T A`` on ``G'`` over relations touching ``G'``; they touch no hidden
    cell outside ``G'`` (it would be in the group), so on ``G`` ``mu^T A`` is ``lambda'``
    plus some ``v_c`` on the cells ``c`` of ``G`` outside ``H``, and ``mu - sum_c v_c nu_c``
    gives ``lambda'`` alone: an aggregation of ``G``, judged on the same atoms (seed 002
    section 5), hence safe. The proof of ``G`` covers ``G'``. A cell fixed by the
    a-priori bounds alone is not determined so: its group is proven afresh.

    Whether ``e_c`` is a combination of the relations is an LP (``A_G^T nu = e_c``, ``nu``
    free); its solution is checked (residual at most 1e-9, ``|nu|`` at most 1e6) before it
    is believed."""

    def __init__(self, work: _Work, proven: set, hidden: np.ndarray):
        self.work, self.hidden = work, hidden
        self.tags = list(proven)
        sizes = [len(t) // 8 for t in self.tags]
        cells = np.frombuffer(b"".join(self.tags), dtype=np.int64)
        owner = np.repeat(np.arange(len(self.tags)), sizes)
        order = np.argsort(cells, kind="stable")
        self.cells, self.owner = cells[order], owner[order]
        self.determined: dict[tuple[int, int], bool] = {}

    def covers(self, members: np.ndarray) -> bool:
        """Whether the group of hidden cells ``members`` is proven by a proven group."""
        lo, hi = (
            np.searchsorted(self.cells, members[0], side="left"),
            np.searchsorted(self.cells, members[0], side="right"),
        )
        for t in self.owner[lo:hi].tolist():
            group = np.frombuffer(self.tags[t], dtype=np.int64)
            if np.isin(members, group).all() and all(
                self._determined(t, group, int(c)) for c in group[~self.hidden[group]]
            ):
                return True
        return False

    def _determined(self, t: int, group: np.ndarray, cell: int) -> bool:
        """Whether ``e_cell`` is a combination of the relations on ``group``'s cells."""
        if (t, cell) not in self.determined:
            a = self.work.table.a_cols[:, group].tocsr()
            a_g = a[np.flatnonzero(np.diff(a.indptr) > 0)].T.tocsc()  # cells x relations
            rhs = (group == cell).astype(float)
            n_rel = a_g.shape[1]
            h = highs.model(
                np.zeros(n_rel), np.full(n_rel, -np.inf), np.full(n_rel, np.inf), a_g, rhs, rhs
            )
            ok = highs.run(h, self.work.deadline) is Outcome.OPTIMAL
            if ok:
                nu = np.asarray(h.getSolution().col_value)
                ok = bool(
                    np.abs(nu).max(initial=0.0) <= 1e6
                    and np.abs(a_g @ nu - rhs).max(initial=0.0) <= 1e-9
                )
            self.determined[(t, cell)] = ok
        return self.determined[(t, cell)]


class _Work:
    """The state of one check, shared by its groups; atom arrays are indexed by cell."""

    def __init__(
        self,
        table: _Table,
        values,
        hidden,
        source: UnionSource,
        deadline,
        screen_only: bool = False,
        deviations: Deviations | None = None,
        proof_only: bool = False,
    ):
        self.values, self.source, self.deadline = values, source, deadline
        self.proof_only = proof_only
        self.deviations = deviations
        # Screen-only checks go on past a group's first sensitive aggregation: the others
        # the screen meets are kept too (_Group.more_found), so the fast method protects
        # them in one round instead of one round each. A proof-only check screens only.
        self.screen_only = screen_only or proof_only
        self.cells = np.flatnonzero(hidden)
        self.table = t = table
        self.atoms, self.rules, self.forms, self.resp, self.arrays = (
            t.atoms,
            t.rules,
            t.forms,
            t.resp,
            t.arrays,
        )
        self.atom_pos, self.known, self.measure, self.scale = (
            t.atom_pos,
            t.known,
            t.measure,
            t.scale,
        )
        self.spanning, self.rule_masks = t.spanning, t.rule_masks
        self.mip_solves = 0
        self.why: set[str] = set()

    def groups(self):
        """Connected groups of hidden cells, joined through the relations that touch them
        and through the atoms they share (an aggregation of one group is judged
        independently of another's only when no atom is shared): ``(members, build)``,
        ``build()`` making the :class:`_Group` (not made for a group already proven)."""
        # Not kept: a_s has a row pointer over every relation of the table, and the trim
        # keeps hundreds of checks' states (:class:`Trials`).
        a_s = self.table.a_cols[:, self.cells].tocsr()
        g_s = self.table.g[self.cells].tocsr()
        active, b, shared_atoms, ga, n_lab, labels = _linked(a_s, g_s)
        n_s, n_r = len(self.cells), len(active)
        cell_label, row_label = labels[:n_s], labels[n_s : n_s + n_r]
        # Groups without an atom any rule could call sensitive are safe (seed 002
        # Theorem 2): skip them before building anything.
        atom_label = labels[n_s + n_r :]
        wanted = np.zeros(n_lab, bool)
        wanted[atom_label[self.table.relevant[self.atom_pos[shared_atoms]]]] = True
        if n_lab == 1:
            # One group (most of the trim's trials): already in order, nothing to permute.
            if wanted[0] and n_r and n_s:
                members = np.arange(n_s)
                yield (
                    members,
                    lambda: _Group(
                        self, members, active, b, ga, shared_atoms, (ga.T @ b.T).tocsr()
                    ),
                )
            return
        # One permutation makes every group's relations, cells and atoms (an atom is in one
        # group: groups are joined through shared atoms) contiguous, in ascending order
        # within the group; each group's blocks are then slices of matrices made once.
        cell_order = np.argsort(cell_label, kind="stable")
        row_order = np.argsort(row_label, kind="stable")
        atom_order = np.argsort(atom_label, kind="stable")
        cb = np.searchsorted(cell_label[cell_order], np.arange(n_lab + 1))
        rb = np.searchsorted(row_label[row_order], np.arange(n_lab + 1))
        ab = np.searchsorted(atom_label[atom_order], np.arange(n_lab + 1))
        blocks = b[row_order][:, cell_order].tocsr()
        atoms_sorted = shared_atoms[atom_order]
        g_sorted = ga[cell_order][:, atom_order].tocsr()
        bt_sorted = (g_sorted.T @ blocks.T).tocsr()  # phi = bt @ mu, block diagonal
        rows_sorted = active[row_order]

        def make(r0: int, r1: int, c0: int, c1: int, a0: int, a1: int) -> _Group:
            # The blocks are sliced only for a group that is built: a check of a pattern
            # whose groups are mostly proven already (the trim's trials) skips them.
            return _Group(
                self,
                cell_order[c0:c1],
                rows_sorted[r0:r1],
                blocks[r0:r1, c0:c1],
                g_sorted[c0:c1, a0:a1],
                atoms_sorted[a0:a1],
                bt_sorted[a0:a1, r0:r1],
            )

        for lab in np.flatnonzero(wanted).tolist():
            r0, r1, c0, c1, a0, a1 = (
                rb[lab],
                rb[lab + 1],
                cb[lab],
                cb[lab + 1],
                ab[lab],
                ab[lab + 1],
            )
            if r1 > r0 and c1 > c0:  # a hidden cell in no relation publishes nothing
                yield cell_order[c0:c1], functools.partial(make, r0, r1, c0, c1, a0, a1)


def _linked(a_s: sp.csr_matrix, g_s: sp.csr_matrix):
    """The groups of hidden cells: components of the graph of the cells, the relations
    that touch them (rows of ``a_s``, relations by hidden cells) and the atoms they share
    (columns of ``g_s``, hidden cells by atoms). Returns (active relations, their rows,
    shared atoms, ``g_s`` on them, number of labels, labels of cells then relations then
    atoms). Made from the index arrays directly: a check of a few cells (the trim's
    trials) spent 1.8 ms here in scipy's checks of the blocks it stacked."""
    n_s = a_s.shape[1]
    active = np.flatnonzero(np.diff(a_s.indptr) > 0)
    # The rows left out hold nothing, so the active rows' entries are all of them, in order.
    b = sp.csr_matrix(
        (a_s.data, a_s.indices, np.append(a_s.indptr[active], a_s.indptr[-1])),
        shape=(len(active), n_s),
    )
    shared_atoms, atom_of = np.unique(g_s.indices, return_inverse=True)
    ga = sp.csr_matrix((g_s.data, atom_of.ravel(), g_s.indptr), shape=(n_s, len(shared_atoms)))
    n_r, n_a = len(active), len(shared_atoms)
    # Edges cell - relation and cell - atom; undirected components need them one way only.
    source = np.concatenate(
        [
            n_s + np.repeat(np.arange(n_r), np.diff(b.indptr)),
            np.repeat(np.arange(n_s), np.diff(ga.indptr)),
        ]
    )
    target = np.concatenate([b.indices, n_s + n_r + ga.indices])
    n = n_s + n_r + n_a
    graph = sp.csr_matrix((np.ones(len(source)), (source, target)), shape=(n, n))
    n_lab, labels = connected_components(graph, directed=False)
    return active, b, shared_atoms, ga, n_lab, labels


def hidden_groups(relations, source: UnionSource, hidden: np.ndarray) -> np.ndarray:
    """The group of each hidden cell, as :func:`check_aggregations` forms them (joined
    through the relations that touch them and the atoms they share), by label; -1 for
    published cells. The aggregations of a group depend on its hidden cells alone, so a
    pattern that differs from another only within a group is judged on that group."""
    t = _Table.of(relations, source)
    cells = np.flatnonzero(hidden)
    _, _, _, _, _, labels = _linked(t.a_cols[:, cells].tocsr(), t.g[cells].tocsr())
    out = np.full(len(hidden), -1, dtype=np.int64)
    out[cells] = labels[: len(cells)]
    return out


#: Parts of the pattern whose groups (and their models) :class:`Trials` keeps: 100x100
#: hier has 114 groups of hidden cells in the trim; at 10^6 cells, tens of thousands, and
#: with 512 kept the scale benchmark's N = 330 held 82 MiB more within suppress().
TRIAL_PARTS = 128


#: A part of :class:`Trials`: the check's state, its groups ``(members, build)``, each
#: hidden cell's group (-1: none) and the groups built, by index.
_Part = tuple["_Work", list, np.ndarray, dict]


class Trials:
    """The fast method's trim (:func:`service.sdc.suppress.fast.trim`): whether the screen
    still proves the group of hidden cells that holds a cell ``j`` once ``j`` is published,
    judged on that group's own models (:meth:`_Group.publish`: the same LPs, ``j``'s atoms
    free at no cost) instead of a check of the smaller pattern built afresh. The parts of
    the pattern (the hidden cells of each of its groups as the trim began) used last are
    kept (:data:`TRIAL_PARTS`), with their groups built as trials reach them: the trials
    of a part meet the same groups until one of them stands, and a model kept warm from
    the last trial's basis costs less than a new one (100x100 hier: a failing trial 4.3
    -> 3.2 ms, one that stands 7.3 -> 5.7 ms). Removing ``j`` can only split its group,
    so the other groups of the part keep their verdicts. ``proven`` and ``deviations`` as
    in :func:`check_aggregations`; proof-only: the first anchor not proven ends a trial."""

    def __init__(self, relations, values, source: UnionSource, deadline, proven: set, deviations):
        self.table = _Table.of(relations, source)
        self.values, self.source, self.deadline = values, source, deadline
        self.proven, self.deviations = proven, deviations
        # By hidden cells: the check's state, its groups (members, build) and those built.
        self._parts: collections.OrderedDict[bytes, _Part] = collections.OrderedDict()

    def _part(self, cells: np.ndarray) -> _Part:
        """The check's state for the hidden ``cells`` (sorted), its groups, each cell's
        group and the groups built so far; the :data:`TRIAL_PARTS` used last are kept (the
        trim goes from part to part in the order of its candidates' costs)."""
        key = cells.tobytes()
        part = self._parts.get(key)
        if part is None:
            hidden = np.zeros(len(self.values), bool)
            hidden[cells] = True
            self.deviations.flush()
            work = _Work(
                self.table,
                self.values,
                hidden,
                self.source,
                self.deadline,
                deviations=self.deviations,
                proof_only=True,
            )
            groups = list(work.groups())
            # Each hidden cell's group (index into ``groups``; -1: in none of them).
            owner = np.full(len(work.cells), -1)
            for index, (members, _) in enumerate(groups):
                owner[members] = index
            part = self._parts[key] = (work, groups, owner, {})
            if len(self._parts) > TRIAL_PARTS:
                self._parts.popitem(last=False)
        self._parts.move_to_end(key)
        return part

    def without(self, cells: np.ndarray, j: int) -> bool | None:
        """Whether the screen proves the group holding ``j`` among the hidden ``cells``
        (sorted; ``j`` among them) with ``j`` published; ``None`` when that cannot be
        judged on the group's models: an atom of ``j`` lies in another hidden cell too (a
        margin hidden with its leaves under a leaf atom map, a holding across cells), so
        publishing ``j`` does not free it."""
        w, groups, owner, built = self._part(cells)
        at = int(np.searchsorted(w.cells, j))
        index = int(owner[at])
        if index < 0:
            # j's group has no atom a rule could call sensitive (or no relation): nor
            # have its parts.
            return True
        if index not in built:
            built[index] = groups[index][1]()
        group = built[index]
        row = int(np.flatnonzero(group.members == at)[0])
        atoms = group.gm.indices[group.gm.indptr[row] : group.gm.indptr[row + 1]]
        if (np.bincount(group.gm.indices, minlength=len(group.atoms))[atoms] > 1).any():
            return None
        published = np.zeros(len(group.atoms), bool)
        published[atoms] = True
        group.publish(published)
        try:
            outcome = group.run(group.steps())
            # As check_aggregations decides (_Group.unproven).
            return outcome is None or (outcome[0] == "safe" and group.unproven() is None)
        finally:
            group.publish(None)

    def accepted(self, cells: np.ndarray) -> None:
        """The part's hidden cells are now ``cells`` (sorted), a trial having stood: each
        of its groups is proven (the trial's parts just now, the others before), and joins
        ``proven`` as a check's groups do."""
        w, groups, _, _ = self._part(cells)
        for members, _ in groups:
            self.proven.add(w.cells[members].tobytes())


class _Group:
    """One group: its relations ``mu``, cells ``lambda = sub^T mu`` and atoms
    ``phi = Gm^T lambda``, and the LP over them."""

    def __init__(
        self,
        work: _Work,
        members: np.ndarray,
        rows: np.ndarray,
        sub: sp.csr_matrix,
        gm: sp.csr_matrix,
        atoms: np.ndarray,
        bt: sp.csr_matrix,
    ):
        self.w = work
        self.members = members
        self.rows = rows
        self.sub = sub
        self.atoms = atoms  # cell ids
        self.gm = gm
        self.bt = bt  # phi = bt @ mu
        pos = work.atom_pos[self.atoms]
        self.pos = pos
        self._unknown = ~work.known[pos]
        self.publish(None)
        self._lp: dict = {}
        # The kept deviations that hold here (Deviations._held), with the pool they are of.
        self.held: tuple[Any, tuple | None] | None = None
        # What a screen-only check lists besides the verdict, kept per group so that
        # groups decided side by side (:func:`_drive`) list them in the groups' order.
        self.failing: list[tuple[int, int, tuple[int, ...], float, tuple[int, ...]]] = []
        self.more_found: list[Aggregation] = []
        self.mip_solves = 0

    def unproven(self) -> str | None:
        """Why a ``safe`` from the screen or the MIP proves nothing for this group, or
        ``None``: their proofs rest on whole respondents, which fractional replicate
        weights are not (:data:`FRACTIONAL_WEIGHTS`, unless the bound that holds for them,
        :data:`POOLED_PROOF`, proves the group). Under the ``shift`` sign policy they hold
        as they are (:data:`SHIFT_READING`)."""
        if self.pools_fractions and not self.pooled_safe():
            return FRACTIONAL_WEIGHTS
        return None

    @property
    def pools_fractions(self) -> bool:
        """Whether an aggregation of the group can pool a respondent of fractional mass
        with another atom's (:func:`_fractional`): its safety is then not proven."""
        return len(self.pos) > 1 and bool(self.w.table.fractional[self.pos].any())

    def pooled_safe(self) -> bool:
        """Whether the group is proven safe by the bound that holds however an
        aggregation's slots pool fractional replicate weights (:data:`POOLED_PROOF`):
        ``False`` unless every slot-form rule proves it, which needs its fractional atoms
        all so only for replicate weights (``_Table.pooled``). Frequency rules are not its
        business: their support search (:meth:`frequency`, run by :meth:`steps` before
        this is asked) is exact whatever the weights (POOLED_PROOF, step 5), so a group
        under frequency rules alone is proven by it.

        Per slot-form rule ``k``, with ``e_j = S_j + POOLED_MARGIN scale_j`` (``S_j`` the
        atom's measure on its own weighted slots; 0 for an empty atom) and ``A`` the atoms
        with ``e_i > 0``:
        ``LP_i = min sum_{j not in A} -e_j |phi_j|`` over the aggregations with
        ``phi_i = 1`` (:meth:`_cheapest`, the atoms of ``A`` and the published ones free
        at no cost, unknown ones fixed at 0); the rule is proven when
        ``sum_{i in A} e_i / LP_i < 1`` (an infeasible ``LP_i`` adds 0), each ``LP_i``
        bounded below by the optimum's row prices checked to be a deviation
        (:meth:`_deviation_at_bound`, weak duality), taken ``(1 - 1e-6)`` lower."""
        w = self.w
        table = w.table
        if any(f is not None for f in w.forms) and not (
            table.pooled[self.pos][table.fractional[self.pos]].all()
        ):
            return False
        live = ~self.published & ~self.unknown
        everywhere = np.ones(len(self.atoms), bool)
        count = w.resp.count[self.pos]
        for k, form in enumerate(w.forms):
            if highs.now() > w.deadline:
                w.why.add("time limit reached")
                return False
            if form is None:
                # Counts do not pool into slots: the support search's verdict (and that
                # of a rule implying it) holds here (POOLED_PROOF, step 5).
                continue
            measure = w.measure[k, self.pos]
            if not np.isfinite(measure[live]).any():
                continue  # the request rule without requests fires nowhere
            # An empty atom (no observation) adds nothing to any aggregation: e = 0, no
            # anchor (an aggregation of empty atoms alone has no contributor).
            e = np.where(count > 0, measure + POOLED_MARGIN * w.scale[k, self.pos], 0.0)
            sensitive = live & (e > 0)
            if not sensitive.any():
                continue
            cost = self._free(np.where(sensitive | ~live, 0.0, -e))
            share = 0.0
            for i in np.flatnonzero(sensitive).tolist():
                value, _, status = self._cheapest("pooled", cost, i, everywhere)
                if status != "optimal" or not value > 0:  # NaN or 0: not proven
                    return False
                if np.isfinite(value):
                    # The bound is the optimum's row prices, checked to be a deviation
                    # (weak duality), not the primal objective.
                    h, c = self._lp["pooled"][:2]
                    z = self._deviation_at_bound(h, c, i, self.unknown)
                    if z is None or not abs(z[i]) > 0:
                        return False
                    share += e[i] / (abs(z[i]) * (1.0 - 1e-6))
                if share >= 1.0:
                    return False
        return True

    def publish(self, atoms: np.ndarray | None) -> None:
        """Judge the group as if the cell holding the ``atoms`` (a mask; the atoms of one
        hidden cell that lie in no other) were published, or as it is (``None``): the
        trim's trial on the group's own models (:class:`Trials`).

        Why that is the same screen: publishing a cell drops its coefficient from every
        relation, so an aggregation of the rest is one of this group's with any multiple
        of the cell's own relation added, that is, with the cell's atoms free at no cost
        (``phi`` unconstrained there, cost 0: their moves cost nothing to make up). In the
        dual, a deviation must then leave those atoms still (``|z_j| <= 0``), as a
        published cell stays. Their atoms are no anchors, no partners, and count as known
        (the LP of an unknown atom fixes its ``phi``, which a published cell frees)."""
        self.published = np.zeros(len(self.atoms), bool) if atoms is None else atoms
        self.unknown = self._unknown & ~self.published

    def _free(self, cost: np.ndarray) -> np.ndarray:
        """``cost`` with the published atoms' at 0 (:meth:`publish`)."""
        return np.where(self.published, 0.0, cost) if self.published.any() else cost

    @cached_property
    def imbalance(self) -> sp.csr_matrix:
        """``bt`` transposed (relations x atoms): ``imbalance @ z`` is how far a
        deviation ``z`` leaves each relation unbalanced (kept: scipy builds a new matrix
        per ``.T``, a thousand times per trim on 100x100 hier)."""
        return self.bt.T.tocsr()

    # -- which rules can fire ------------------------------------------------------------

    def decide(self):
        """``(status, aggregation or None, how)``, or ``None`` for a group without a
        sensitive atom under any rule (safe by seed 002 Theorem 2): :meth:`steps` run
        alone."""
        return self.run(self.steps())

    def run(self, steps: _Steps):
        """The return value of ``steps``, a generator of this group's (:meth:`steps`,
        :meth:`_judge_rows`, ...) run alone, each of its requests judged by itself."""
        return _drive([steps], self.w.values, self.w.source)[0]

    def steps(self) -> _Steps:
        """:meth:`decide` as a generator: each batch of aggregations it needs judged is
        yielded (rows over the table's cells) and the :class:`~service.sdc.unions.Verdict`
        on them sent back, so that :func:`_drive` judges many groups' batches in one call;
        returns what :meth:`decide` returns."""
        w = self.w
        relevant = [
            (k, mask & ~self.published)
            for k, mask in w.rule_masks(self.pos)
            if (mask & ~self.published).any()
        ]
        if not relevant:
            return None
        statuses, how = [], "screen"
        for k, mask in relevant:
            if highs.now() > w.deadline:
                w.why.add("time limit reached")
                return "undecided", None, "time"
            if w.forms[k] is None:
                status, witness = yield from self.frequency(k, mask)
                how = "support"
            else:
                status, witness, how = yield from self.magnitude(k, mask)
            if witness is not None:
                return "sensitive", witness, how
            if status == "undecided" and w.proof_only:
                return status, None, how
            statuses.append(status)
        if "undecided" in statuses:
            return "undecided", None, how
        if self.unknown.any():
            # Only aggregations that leave out the atoms of unknown magnitudes were judged.
            return "not_applicable", None, how
        return "safe", None, how

    # -- exact evaluation -------------------------------------------------------------

    @cached_property
    def _transposed(self):
        """``sub^T`` and ``Gm^T``, made once per group (every judged batch uses them)."""
        return self.sub.T, self.gm.T

    def _judge(self, mu: np.ndarray, how: str) -> _Steps:
        """Exact verdict on the aggregations of multipliers ``mu`` (rows), the most
        sensitive one or ``None`` (the first row and rule of the largest measure); a
        generator (:meth:`steps`)."""
        best = None
        for found in (yield from self._judge_rows(mu, how)):
            if found is not None and (best is None or found.measure > best.measure):
                best = found
        return best

    def _judge_rows(self, mu: np.ndarray, how: str) -> _Steps:
        """Exact verdict on the aggregation of each row of multipliers ``mu``: its most
        sensitive reading (the first rule of the largest measure) or ``None``; a
        generator (:meth:`steps`) returning the list. Building them from ``mu`` makes
        every candidate a genuine aggregation, whatever produced ``mu`` (LP prices or
        values, a MIP point, a single relation). Rows are judged independently, in one
        call of :func:`service.sdc.unions.judge` (its cost is mostly per call) shared
        with other groups' rows by :func:`_drive`; identical rows are judged once."""
        w = self.w
        mu = np.atleast_2d(np.asarray(mu, dtype=float))
        out: list[Aggregation | None] = [None] * len(mu)
        if not len(mu):
            return out
        mu, back = np.unique(mu, axis=0, return_inverse=True)
        back = back.ravel()
        lam = np.asarray(self._transposed[0] @ mu.T).T
        phi = np.asarray(self._transposed[1] @ lam.T).T
        scale = np.abs(phi).max(axis=1, keepdims=True)
        keep = np.flatnonzero(scale.ravel() > 1e-12)  # phi = 0: e.g. "total = its parts"
        if not keep.size:
            return out
        mu, lam, phi = (v[keep] / scale[keep] for v in (mu, lam, phi))
        lam[np.abs(lam) < 1e-9] = 0.0
        phi[np.abs(phi) < 1e-9] = 0.0
        # Defined up to a factor (seed 002 section 3): orient the published value >= 0.
        # Row by row: the same arithmetic whichever rows are judged together.
        vals = w.values[w.cells[self.members]]
        value = np.array([float((lam[r : r + 1] @ vals)[0]) for r in range(len(lam))])
        first = phi[np.arange(len(phi)), np.argmax(phi != 0, axis=1)]
        flip = np.where((value < 0) | ((value == 0) & (first < 0)), -1.0, 1.0)[:, None]
        mu, lam, phi, value = mu * flip, lam * flip, phi * flip, value * flip.ravel()
        row, col = np.nonzero(phi)
        indptr = np.concatenate(([0], np.cumsum(np.count_nonzero(phi, axis=1))))
        full = sp.csr_matrix(
            (phi[row, col], self.atoms[col], indptr), shape=(len(phi), len(w.values))
        )
        verdict = yield full
        sens = verdict.fired & verdict.checked[None, :]
        found: dict[int, Aggregation] = {}
        for r in np.flatnonzero(sens.any(axis=0)).tolist():
            rules = np.flatnonzero(sens[:, r])
            s_r = verdict.sensitivity[rules, r]
            k = int(rules[np.argmax(s_r)])  # the first of the largest
            nz = np.flatnonzero(lam[r])
            used = np.flatnonzero(np.abs(mu[r]) > 1e-12)
            on = np.flatnonzero(phi[r])
            found[int(keep[r])] = Aggregation(
                w.cells[self.members[nz]],
                lam[r, nz],
                float(value[r]),
                k,
                float(verdict.sensitivity[k, r]),
                how,
                self.rows[used],
                mu[r, used],
                self.atoms[on],
            )
        return [found.get(int(u)) for u in back]

    def explicit(self) -> _Steps:
        """The explicit aggregations (one relation each, seed 002 eq. 3.6), judged exactly:
        the most sensitive or ``None`` (a generator, :meth:`steps`)."""
        several = np.flatnonzero(np.diff(self.sub.indptr) >= 2)
        if not several.size:
            return None
        mu = np.zeros((len(several), len(self.rows)))
        mu[np.arange(len(several)), several] = 1.0
        return (yield from self._judge(mu, "relation"))

    # -- the LP over aggregations: min sum cost |phi| s.t. phi = bt mu, phi_anchor = 1 ----

    @cached_property
    def _lp_matrix(self) -> sp.csc_matrix:
        """``[I, -I, -bt]``, the constraint matrix of every kind's model, assembled
        column-wise directly (sp.hstack's checks cost more than the LP on small groups)."""
        na, nr = self.bt.shape
        btc = sp.csc_matrix(self.bt)
        btc.sort_indices()
        return sp.csc_matrix(
            (
                np.concatenate([np.ones(na), -np.ones(na), -btc.data]),
                np.concatenate([np.arange(na), np.arange(na), btc.indices]),
                np.concatenate([np.arange(2 * na), 2 * na + btc.indptr]),
            ),
            shape=(na, 2 * na + nr),
        )

    def _model(self, kind: str, cost: np.ndarray):
        """One HiGHS model per kind of cost vector: between anchors only bounds change, so
        each solve starts from the last basis, still dual feasible (the one-intruder
        partners' LPs also change a cost or two: :meth:`_cheapest`)."""
        if kind not in self._lp:
            na, nr = self.bt.shape
            c = np.where(np.isfinite(cost), cost, 0.0)
            # Only bounds change between solves: dual simplex from the last basis, which
            # stays dual feasible; presolve would discard it.
            h = highs.model(
                np.concatenate([c, c, np.zeros(nr)]),
                np.concatenate([np.zeros(2 * na), np.full(nr, -np.inf)]),
                np.full(2 * na + nr, np.inf),
                self._lp_matrix,
                np.zeros(na),
                np.zeros(na),
                presolve="off",
                solver="simplex",
                simplex_strategy=highs.DUAL_SIMPLEX,
            )
            # The objective bound last given (:meth:`_cheapest`'s ``enough`` plus the
            # anchor's cost), in an array so that it is updated in place with the bounds.
            self._lp[kind] = (h, c, np.zeros(2 * na), np.full(2 * na, np.inf), np.full(1, np.inf))
        return self._lp[kind]

    def _cheapest(
        self,
        kind: str,
        cost: np.ndarray,
        anchor: int,
        allowed: np.ndarray,
        enough: float = np.inf,
    ):
        """``min sum_{j != anchor} cost_j |phi_j|`` over aggregations with ``phi_anchor = 1``
        and ``phi`` zero off ``allowed``: (value, multipliers ``mu`` or None, status);
        ``inf`` when there is none. By LP duality the value is how far the anchor can move
        while every other atom moves at most its cost (module docstring).

        With ``enough`` finite, the dual simplex stops once its dual objective, a lower
        bound on the value, passes ``enough`` (HiGHS's ``objective_bound``): the value
        returned is then that bound, ``|z_anchor|`` of the deviation ``z`` reached (the
        row prices, checked here to be a deviation: :meth:`_deviation_at_bound`), with no
        multipliers. A screen needs no more to prove the anchor (on 20x20x10, seed 1, the
        rounds' screen LPs took 14.1 s to optimality, 7.3 s stopped there)."""
        h, c, lower_was, upper_was, bound_was = self._model(kind, cost)
        na = len(self.atoms)
        recost = np.flatnonzero(np.where(np.isfinite(cost), cost, 0.0) != c)
        if recost.size:
            c[recost] = np.where(np.isfinite(cost[recost]), cost[recost], 0.0)
            both = np.concatenate([recost, na + recost]).astype(np.int32)
            h.changeColsCost(len(both), both, np.concatenate([c[recost], c[recost]]))
        # Costs come free at published atoms from the screen (:meth:`_free`); their phi
        # is free whatever the caller allows.
        allowed = allowed | self.published
        upper = np.where(allowed & ~self.unknown, np.inf, 0.0)
        upper = np.concatenate([upper, upper])
        lower = np.zeros(2 * na)
        lower[anchor] = upper[anchor] = 1.0
        upper[na + anchor] = 0.0
        changed = np.flatnonzero((lower != lower_was) | (upper != upper_was)).astype(np.int32)
        if changed.size:
            h.changeColsBounds(len(changed), changed, lower[changed], upper[changed])
            lower_was[:], upper_was[:] = lower, upper
        bound = c[anchor] + enough
        if bound != bound_was[0]:
            h.setOptionValue("objective_bound", bound)
            bound_was[0] = bound
        outcome = highs.run(h, self.w.deadline)
        # Stopped at the bound (HiGHS's status is no Outcome: ERROR; a run refused for
        # the time left keeps the last run's status, hence the outcome first).
        if (
            outcome is Outcome.ERROR
            and h.getModelStatus() == highspy.HighsModelStatus.kObjectiveBound
        ):
            z = self._deviation_at_bound(h, c, anchor, upper[:na] == 0)
            if z is not None and abs(z[anchor]) > enough:
                self.deviation = z
                return abs(z[anchor]), None, "optimal"
            # Not a deviation to the precision asked: on to the optimum from this basis.
            h.setOptionValue("objective_bound", np.inf)
            bound_was[0] = np.inf
            outcome = highs.run(h, self.w.deadline)
        if outcome in (Outcome.UNBOUNDED, Outcome.ERROR):
            # Never right here (costs >= 0: the LP is bounded), but reported by HiGHS's
            # primal simplex from another LP's basis (20x20x10: "unbounded" after two
            # iterations, with zero costs on single-respondent atoms): once more cold,
            # by the dual simplex.
            _, strategy = h.getOptionValue("simplex_strategy")
            h.clearSolver()
            h.setOptionValue("simplex_strategy", highs.DUAL_SIMPLEX)
            h.setOptionValue("objective_bound", np.inf)
            bound_was[0] = np.inf
            outcome = highs.run(h, self.w.deadline)
            h.setOptionValue("simplex_strategy", strategy)
        if outcome is Outcome.INFEASIBLE:
            return np.inf, None, "optimal"
        if outcome is not Outcome.OPTIMAL:
            return np.nan, None, highs.describe(h) if outcome is Outcome.ERROR else outcome.value
        solution = h.getSolution()
        self.deviation = np.asarray(solution.row_dual)
        mu = np.asarray(solution.col_value[2 * na :])
        return h.getObjectiveValue() - c[anchor], mu, "optimal"

    def _deviation_at_bound(
        self, h: highspy.Highs, c: np.ndarray, anchor: int, fixed: np.ndarray
    ) -> np.ndarray | None:
        """The row prices ``z`` of a dual simplex stopped at its objective bound, if they
        are dual feasible for the LP of ``anchor`` (``bt^T z = 0``; ``|z_j| <= c_j`` on
        the atoms other than the anchor whose ``phi_j`` is not ``fixed`` at 0) to within
        ``1e-9`` of the largest ``|z_j|`` (or of 1), else ``None``. HiGHS stops on the
        dual objective of its own, possibly perturbed, costs; checking ``z`` against the
        true ones makes ``|z_anchor|`` a proven lower bound on the LP's value (weak
        duality: ``-z`` is dual feasible too)."""
        z = np.asarray(h.getSolution().row_dual)
        if not np.isfinite(z).all():
            return None
        loose = fixed.copy()
        loose[anchor] = True
        over = np.where(loose, -np.inf, np.abs(z) - c).max(initial=0.0)
        residual = np.abs(self.imbalance @ z).max(initial=0.0)
        return z if max(over, residual) <= 1e-9 * max(np.abs(z).max(), 1.0) else None

    def proven_by_last(self, anchor: int, cost: np.ndarray) -> np.ndarray:
        """``|z|`` of the last LP's deviation ``z`` (its row prices: ``bt^T z = 0``,
        ``|z_j| <= cost_j`` off the anchor), scaled until the anchor's move is within its
        own cost too: a lower bound on every other atom's ``rho`` (LP duality), so one
        solve can prove many atoms."""
        # (1 - 1e-6): the prices are dual feasible to HiGHS's tolerance, not exactly.
        z = np.abs(self.deviation) * (1.0 - 1e-6)
        if z[anchor] > cost[anchor]:
            z = z * (cost[anchor] / z[anchor]) if z[anchor] > 0 else z * 0.0
        return z

    def partner_bounds(
        self, z: np.ndarray, omega: np.ndarray, anchor: int, under: np.ndarray
    ) -> np.ndarray:
        """Per partner atom ``j``: a lower bound on the anchor's partner LP (costs
        ``omega_j`` at ``j``, plain elsewhere) from a deviation's moves ``z = |z|`` within
        plain at every atom but the anchor, and ``under``, another's within omega there.
        Any ``t z + s u`` (``t, s >= 0``, ``u`` signed to move the anchor the same way) is a
        deviation that moves the anchor ``t z_a + s u_a``, and ``j`` at most ``t z_j + s
        u_j`` (triangle inequality); with ``t + s <= 1`` every other atom stays within
        plain, so it is dual feasible where ``j`` stays within ``omega_j`` (weak duality,
        as :class:`Deviations`): ``t = 1, s = 0`` where ``z_j <= omega_j``, else the better
        of ``z`` scaled down alone and the mix on that bound with ``t + s = 1``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            over = z > omega
            scaled = np.where(over, omega / z, 1.0) * z[anchor]
            t = np.where(over, (omega - under) / (z - under), 1.0)
            # t is finite where the mix is read (z_j > omega_j >= u_j), not elsewhere.
            mixed = t * z[anchor] + (1.0 - t) * under[anchor]
        return np.maximum(scaled, np.where(over & (under <= omega), mixed, scaled))

    # -- magnitude rules -------------------------------------------------------------

    def magnitude(self, k: int, near: np.ndarray) -> _Steps:
        """Screen, witnesses, then the MIP, for slot-form rule ``k`` (a generator,
        :meth:`steps`)."""
        w = self.w
        found = yield from self._magnitude_screen(k, near)
        if found is not None:
            return found
        # The screen left the group open: the explicit aggregations (one relation each,
        # the likeliest culprits), then the MIP.
        if (witness := (yield from self.explicit())) is not None:
            return "sensitive", witness, "relation"
        if w.screen_only:
            w.why.add("the screen did not prove every sensitive cell")
            return "undecided", None, "screen"
        return (yield from self._mip(k, near))

    def _magnitude_screen(self, k: int, near: np.ndarray) -> _Steps:
        """The screen (module docstring): a verdict, or None when it cannot decide (a
        generator, :meth:`steps`).

        Per anchor: the LP with costs ``omega``; if it does not prove the anchor, its
        multipliers are judged exactly; without a witness, the split (the LP with costs
        ``-tau X_j``, whose multipliers are judged too). A full check returns at the first
        witness, anchor by anchor. A screen-only check goes through every anchor anyway,
        so it runs the phases for all anchors at once: every ``omega`` LP (in the same
        order, so each proves the same later anchors by :meth:`proven_by_last`), one
        judgement of all their multipliers, the split LPs of the anchors left, one more
        judgement; the witnesses and failures are then read in anchor order, as the
        anchor-by-anchor loop would list them.

        Screen-only, an anchor whose first half of the split (some attacker elsewhere) is
        already proven (by its measures alone or with the kept deviations' bound) gets the
        split's LP first (its own model): when that proves the second half, the anchor is
        proven without its ``omega`` LP, which would run to its optimum (20x20x10, round 1:
        417 of 422 ``omega`` LPs; the check 7.2 -> 5.4 CPU s). The anchor is proven either
        way; a witness that the skipped LP's multipliers would have shown for another atom
        is found later or by the next round, so the rounds' requirements, not the
        verdicts, may differ."""
        w = self.w
        form = w.forms[k]
        omega = self._free(w.arrays.omega[k, self.pos])
        plain = self._free(w.arrays.plain[k, self.pos])
        measure = w.measure[k, self.pos]
        alone = w.arrays.alone[k, self.pos]
        lift, heavy = np.zeros(len(self.atoms)), np.zeros(len(self.atoms), bool)
        if self._spanning():
            # Respondents in several atoms (SPANNING_ALLOWANCE): each atom's costs lowered
            # by what their pieces there may add, except at the atoms that would then
            # cost below 0, whose pieces of the attacked respondent are charged to the
            # anchor instead.
            pieces = self._spanning_pieces()
            top = spanning_top(*pieces, len(self.atoms), len(form.b))
            omega, plain, heavy = spanning_costs(form, omega, plain, measure, top)
            omega, plain = self._free(omega), self._free(plain)
            heavy &= ~self.published
            if heavy.any():
                lift = form.b[0] * spanning_lift(*pieces, len(self.atoms), heavy)
                measure, alone = measure + lift, alone + lift
                near = near | (
                    (measure >= -_NEAR_SENSITIVE * w.scale[k, self.pos])
                    & ~self.published
                    & ~self.unknown
                )
        if not ((omega >= 0).all() and (plain >= 0).all()):
            return None
        tol = _TIE_RTOL * w.scale[k, self.pos]
        everywhere = np.ones(len(self.atoms), bool)
        margins = np.where(form.inclusive, -tol, tol)
        proven = measure < margins  # rho >= 0: nothing to prove
        undecided = "undecided", None, "screen"

        # An LP may stop once its anchor is proven (``rho > S - margin``, by a millionth of
        # the atom's scale so that the bound reached proves it with room).
        enough = measure - margins + 1e-6 * w.scale[k, self.pos]

        # Deviations of earlier checks still feasible here, and each atom's last proof:
        # either half of the split (a group's kept deviations are found once for every
        # rule and half, Deviations._held: on 100x100 hier the rounds' checks 0.72 ->
        # 0.56 s with 799 fewer LPs).
        kept = w.deviations
        by_omega = np.zeros(len(self.atoms))
        by_plain = np.zeros(len(self.atoms))
        if kept is not None:
            open_anchors = np.flatnonzero(near & ~proven)
            by_omega = np.maximum(
                kept.bound(self, omega), kept.recalled(self, k, "omega", omega, open_anchors)
            )
            by_plain = np.maximum(
                kept.bound(self, plain), kept.recalled(self, k, "plain", plain, open_anchors)
            )
        proven |= (measure - by_omega < margins) | (
            (alone - by_omega < margins) & (measure - by_plain < margins)
        )

        def lp(
            kind: str,
            cost: np.ndarray,
            anchor: int,
            model: str | None = None,
            stop: float | None = None,
        ):
            rho, mu, status = self._cheapest(
                model or kind, cost, anchor, everywhere, enough[anchor] if stop is None else stop
            )
            if status != "optimal":
                w.why.add(f"screen LP: {status}")
            elif np.isfinite(rho) and kept is not None:
                # Not from a proof-only check (the trim's trials): the next check would
                # restack the whole pool for them (Deviations.flush; at 10^6 cells about
                # a million moves per trial); their atoms' proofs are remembered anyway.
                if not w.proof_only:
                    kept.add(self, self.deviation * (1.0 - 1e-6))
                if kind == "plain":
                    kept.remember(self, k, kind, [anchor], self.deviation)
            return rho, mu, status == "optimal"

        def plain_first(anchor: int) -> bool:
            # The second half of the split, tried first where the first is proven (see
            # the docstring); True when the anchor is then proven.
            if not alone[anchor] - by_omega[anchor] < margins[anchor]:
                return False
            rho, _, ok = lp("plain", plain, anchor, "plain-first")
            if ok and measure[anchor] - rho < margins[anchor]:
                proven[anchor] = True
                return True
            return False

        def omega_lp(anchor: int):
            rho, mu, ok = lp("omega", omega, anchor)
            if ok and np.isfinite(rho):
                before = proven.copy()
                proven[:] |= measure - self.proven_by_last(anchor, omega) < margins
                if kept is not None:
                    anchors = [anchor, *np.flatnonzero(proven & ~before).tolist()]
                    kept.remember(self, k, "omega", anchors, self.deviation)
            return rho, mu, ok

        # Under a one-intruder rule the first half of the split is decided exactly per
        # partner: the intruder's respondent sits in one other atom j, which then costs
        # omega_j, every other atom plain (no slot of theirs). omega everywhere bounds
        # them all at once, and fails where the partners' LPs do not (60x60 hier, the
        # points of exact's master: 153 of 156 atoms open, every one proven per partner).
        single = len(form.b) == 2 and len(self.atoms) <= PARTNER_MAX_ATOMS

        def partners(anchor: int, under: np.ndarray) -> list[tuple[int, np.ndarray | None]] | None:
            """The partners ``j`` (group positions) whose LP does not prove the first half
            for ``anchor``, with its multipliers: ``[]`` proves it; ``None``: an LP ended
            without an optimum. Called right after the second half's LP proved the anchor: that
            LP's deviation (every atom within plain) settles every partner it moves within
            ``omega_j`` and, mixed with the omega LP's deviation ``under`` (``|z|``,
            within omega at every atom), many others (:meth:`partner_bounds`). The rest
            are tried one by one (:data:`PARTNER_ONE_BY_ONE` or fewer), or as a set: the LP
            with omega on all of them proves each (a cost lower at more atoms), else the
            set is halved, down to single partners; each LP's
            deviation settles others as the first did, and a set the kept deviations
            bound needs no LP. A proof-only check stops at the first partner not
            proven. Not called where the second half's LP is infeasible: no aggregation
            holds the anchor, nor does any under a partner's costs."""
            level = alone[anchor] - margins[anchor]

            def settle(z: np.ndarray) -> None:
                settled[:] |= self.partner_bounds(z, omega, anchor, under) > level

            settled = self.published.copy()  # no respondent of the group sits there
            settled[anchor] = True
            settle(np.abs(self.deviation) * (1.0 - 1e-6))
            stop = level + 1e-6 * w.scale[k, self.pos[anchor]]
            left = np.flatnonzero(~settled)
            if len(left) <= PARTNER_ONE_BY_ONE:
                sets = list(left[::-1, None])  # popped in order, one partner each
            else:
                sets = [left]
            failed: list[tuple[int, np.ndarray | None]] = []
            # On the second half's model, from its basis, which is put back after: a
            # set's costs differ from it at its atoms only (8x6x5x4: a partner's LP took
            # 260 simplex iterations on a model of its own, from another anchor's basis,
            # and 10 by the primal simplex from this one).
            h = self._lp["plain"][0]
            basis = h.getBasis()
            h.setOptionValue("simplex_strategy", highs.WARM_PRIMAL["simplex_strategy"])
            try:
                while sets:
                    part = sets.pop()
                    part = part[~settled[part]]
                    if not part.size:
                        continue
                    cost = plain.copy()
                    cost[part] = omega[part]
                    if kept is not None and kept.bound_at(self, cost, anchor) > level:
                        settled[part] = True
                        continue
                    rho, mu, ok = lp("partner", cost, anchor, "plain", stop=stop)
                    if not ok:
                        return None
                    if alone[anchor] - rho < margins[anchor]:
                        settled[part] = True
                        settle(np.abs(self.deviation) * (1.0 - 1e-6))
                    elif len(part) == 1:
                        failed.append((int(part[0]), mu))
                        if w.proof_only:
                            break
                    else:
                        half = len(part) // 2
                        sets += [part[half:], part[:half]]
            finally:
                h.setOptionValue("simplex_strategy", highs.DUAL_SIMPLEX)
                h.setBasis(basis)
            return failed

        # Split exactly: some attacker elsewhere (the anchor's own coefficient is then at
        # most S_i - b_m x^[m]), or all in the anchor's atom (no other atom holds one: each
        # costs -tau X_j). Only the second needs an LP; the first reuses the omega bound.
        if not w.screen_only or w.proof_only:
            # Anchor by anchor; a proof-only check seeks no witness and stops at the first
            # anchor not proven (in the trim most trials fail: 112 of 127 on 100x100
            # hier, seed 1).
            judge = not w.proof_only
            certified = True
            # Proof-only under a one-intruder rule whose omega is at most plain and alone at
            # most the measure (the p%-rule): the omega LP proves an anchor only where the
            # plain LP and every partner's would too (their costs are at least omega), and
            # where it does not (662 of 810 in the trim's trials on 100x100 hier, seed 1)
            # its deviation only sharpens the partners' bounds: the plain LP and the
            # partners straight away (the whole search's screen LPs 11-16% fewer on 60x60
            # and 100x100 hier, the same patterns; 12-14% fewer again with the plain bounds
            # below).
            direct = (
                w.proof_only
                and single
                and bool((omega <= plain).all() and (alone <= measure).all())
            )
            # The plain LPs' deviations, scaled to stay within plain at their own anchors
            # too (:meth:`proven_by_last`), bound every other anchor's plain LP: the best
            # of them and its deviation, which then starts that anchor's partners.
            plain_lb = np.zeros(len(self.atoms))
            plain_devs: list[np.ndarray] = []
            plain_from = np.full(len(self.atoms), -1)
            for anchor in np.flatnonzero(near).tolist():
                if proven[anchor] or (w.proof_only and plain_first(anchor)):
                    continue
                if direct:
                    if measure[anchor] - plain_lb[anchor] < margins[anchor]:
                        rho = plain_lb[anchor]
                        self.deviation = plain_devs[plain_from[anchor]]
                    else:
                        rho, _, ok = lp("plain", plain, anchor)
                        if not ok or not measure[anchor] - rho < margins[anchor]:
                            return undecided
                        if np.isfinite(rho):
                            z = self.proven_by_last(anchor, plain)
                            better = z > plain_lb
                            plain_lb[better] = z[better]
                            plain_from[better] = len(plain_devs)
                            plain_devs.append(z)
                    # No omega deviation to mix: zero moves are within omega everywhere.
                    failed = partners(anchor, np.zeros(len(self.atoms))) if np.isfinite(rho) else []
                    if failed is None or failed:
                        return undecided
                    continue
                rho, mu, ok = omega_lp(anchor)
                if not ok:
                    return undecided
                if measure[anchor] - rho < margins[anchor]:
                    continue
                under = np.abs(self.deviation) * (1.0 - 1e-6)
                if judge and mu is not None and (witness := (yield from self._judge(mu, "screen"))):
                    return "sensitive", witness, "screen"
                first = alone[anchor] - rho < margins[anchor]
                if first or single:
                    rho, mu, ok = lp("plain", plain, anchor)
                    if not ok:
                        return undecided
                    if measure[anchor] - rho < margins[anchor]:
                        if first:
                            continue
                        failed = partners(anchor, under) if np.isfinite(rho) else []
                        if failed is None:
                            return undecided
                        if not failed:
                            continue
                        for _, mu in failed if judge else ():
                            if mu is not None and (
                                witness := (yield from self._judge(mu, "screen"))
                            ):
                                return "sensitive", witness, "screen"
                    elif (
                        judge
                        and mu is not None
                        and (witness := (yield from self._judge(mu, "screen")))
                    ):
                        return "sensitive", witness, "screen"
                if not judge:
                    return undecided
                # Not proven: later anchors may still meet a witness.
                certified = False
            return ("safe", None, "screen") if certified else None

        # Screen-only: phase by phase over all anchors.
        # (anchor, rho, multipliers, |deviation|) of each omega LP that did not prove.
        open_: list[tuple[int, float, np.ndarray | None, np.ndarray]] = []
        for anchor in np.flatnonzero(near).tolist():
            if proven[anchor] or plain_first(anchor):
                continue
            rho, mu, ok = omega_lp(anchor)
            if not ok:
                return undecided
            if not measure[anchor] - rho < margins[anchor]:
                open_.append((anchor, rho, mu, np.abs(self.deviation) * (1.0 - 1e-6)))
        met: dict[int, Aggregation] = {}
        yield from self._judge_anchors(met, [(a, mu) for a, _, mu, _ in open_ if mu is not None])
        failing: dict[int, tuple[int, ...]] = {}  # anchor: partners not proven (): any
        second: list[tuple[int, np.ndarray]] = []
        for anchor, rho, _, under in open_:
            if anchor in met:
                continue
            first = alone[anchor] - rho < margins[anchor]
            if first or single:
                rho, mu, ok = lp("plain", plain, anchor)
                if not ok:
                    return undecided
                if measure[anchor] - rho < margins[anchor]:
                    if first:
                        continue
                    failed = partners(anchor, under) if np.isfinite(rho) else []
                    if failed is None:
                        return undecided
                    if failed:
                        failing[anchor] = _partner_cells(self.atoms, failed)
                    continue
                if mu is not None:
                    second.append((anchor, mu))
            failing[anchor] = ()
        yield from self._judge_anchors(met, second)
        if not met and not failing:
            return "safe", None, "screen"
        witnesses = []
        for anchor, *_ in open_:
            if anchor in met:
                witnesses.append(met[anchor])
            elif anchor in failing:
                self.failing.append(
                    (
                        k,
                        int(self.atoms[anchor]),
                        failing[anchor],
                        float(lift[anchor]),
                        tuple(self.atoms[heavy].tolist()),
                    )
                )
        if witnesses:
            # Two anchors may meet the same aggregation: each is kept once.
            distinct = {(a.cells.tobytes(), a.coefficients.tobytes()): a for a in witnesses}
            first, *others = distinct.values()
            self.more_found.extend(others)
            return "sensitive", first, "screen"
        return None

    def _judge_anchors(self, into: dict, pending: list[tuple[int, np.ndarray]]) -> _Steps:
        """Judge the multipliers of several anchors in one batch; a witness goes to
        ``into[anchor]`` (a generator, :meth:`steps`)."""
        if pending:
            rows = yield from self._judge_rows(np.stack([mu for _, mu in pending]), "screen")
            into.update((a, found) for (a, _), found in zip(pending, rows) if found)

    def _spanning(self) -> bool:
        """Whether a respondent contributes to two atoms of the group (only a respondent
        of two atoms of the table can: :attr:`_Work.spanning`)."""
        cell, rid, _ = self.w.spanning
        if not len(cell):
            return False
        ids = rid[np.isin(cell, self.pos[~self.published])]
        return len(np.unique(ids)) < len(ids)

    def _spanning_pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(atom, respondent, amount)``, atoms by group position, of the respondents
        in two or more of the group's live atoms (:data:`SPANNING_ALLOWANCE`)."""
        cell, rid, amount = self.w.spanning
        live = ~self.published
        local = np.full(len(self.w.atoms), -1)
        local[self.pos[live]] = np.flatnonzero(live)
        inside = local[cell] >= 0
        return local[cell[inside]], rid[inside], amount[inside]

    def _mip(self, k: int, near: np.ndarray) -> _Steps:
        """Seed 002 section 6 in slot form over the group's atoms (module docstring);
        returns (status, witness, "mip") (a generator, :meth:`steps`)."""
        w = self.w
        form = w.forms[k]
        n, n_rel = self.bt.shape
        # An atom without contributions holds no respondent to attack, and an aggregation
        # of such atoms alone has no magnitude (T = S = 0 meets a strict rule's floor, and
        # the exact rule then rejects that point, leaving the group undecided): they are
        # not among the attacked atoms P, and their moves are free (they change neither S
        # nor T). With no attacked atom left no aggregation is sensitive.
        empty = w.resp.total[self.pos] <= 0
        near = near & ~empty
        if not near.any():
            return "safe", None, "mip"
        P = np.flatnonzero(near)
        N = np.flatnonzero(~near)
        scale = max(float(w.resp.total[self.pos].max(initial=0.0)), 1e-12)
        total = w.resp.total[self.pos] / scale
        s_atom = w.measure[k, self.pos] / scale
        D = max(float(s_atom[P].max(initial=0.0)), 1e-9)
        cap = np.ones(n)
        with np.errstate(divide="ignore"):
            cap[N] = D / (-s_atom[N])
        cap[empty] = np.inf
        cap[self.unknown] = 0.0

        # Candidate respondents: the m largest single-atom respondents of each atom, and
        # every respondent spanning atoms.
        r = w.resp
        m_slots = len(form.b)
        local = np.full(len(w.atoms), -1)
        local[self.pos] = np.arange(n)
        inside = local[r.cell] >= 0
        cell_l, rid, amt = local[r.cell[inside]], r.rid[inside], r.amount[inside] / scale
        uniq, inv, cnt = np.unique(rid, return_inverse=True, return_counts=True)
        spans = cnt[inv] > 1
        order = np.lexsort((-amt, cell_l))
        rank = np.empty(len(order), np.int64)
        sc = cell_l[order]
        rank[order] = np.arange(len(order)) - np.searchsorted(sc, sc, side="left")
        cand_of_entry = np.full(len(rid), -1)
        span_ids = np.unique(inv[spans])
        span_pos = np.full(len(uniq), -1)
        span_pos[span_ids] = np.arange(len(span_ids))
        cand_of_entry[spans] = span_pos[inv[spans]]
        tops = np.flatnonzero(~spans & (rank < m_slots))
        cand_of_entry[tops] = len(span_ids) + np.arange(len(tops))
        n_q = len(span_ids) + len(tops)
        use = cand_of_entry >= 0
        c_mat = sp.csr_matrix((amt[use], (cand_of_entry[use], cell_l[use])), shape=(n_q, n))
        big_m = np.asarray(c_mat @ cap).ravel()
        touches_p = np.asarray(c_mat[:, P].sum(axis=1)).ravel() > 0

        o_lp, o_ln, o_mu = 0, n, 2 * n
        o_beta = o_mu + n_rel
        o_psi = o_beta + len(P)
        o_z = o_psi + m_slots * n_q
        n_col = o_z + m_slots * n_q
        col_lo = np.zeros(n_col)
        col_hi = np.zeros(n_col)
        col_hi[o_lp : o_lp + n] = cap
        col_hi[o_ln : o_ln + n] = cap
        col_lo[o_mu : o_mu + n_rel] = -np.inf
        col_hi[o_mu : o_mu + n_rel] = np.inf
        col_hi[o_beta : o_beta + len(P)] = 1.0
        col_hi[o_psi:o_z] = np.tile(big_m, m_slots)
        z_hi = np.ones(m_slots * n_q)
        z_hi[:n_q] = touches_p.astype(float)  # slot 1: the attacked, in a sensitive atom
        col_hi[o_z:] = z_hi
        integer = np.zeros(n_col, bool)
        integer[o_beta : o_beta + len(P)] = True
        integer[o_z:] = True
        cost = np.zeros(n_col)
        cost[o_lp : o_lp + n] = form.tau * total
        cost[o_ln : o_ln + n] = form.tau * total
        cost[o_psi:o_z] = np.repeat(np.asarray(form.b), n_q)

        blocks, lowers, uppers = [], [], []

        def add(parts: dict, lo, hi):
            blocks.append(_block_row(n_col, parts))
            lowers.append(np.broadcast_to(lo, blocks[-1].shape[0]))
            uppers.append(np.broadcast_to(hi, blocks[-1].shape[0]))

        eye = sp.identity(n, format="csr")
        add({o_lp: eye, o_ln: -eye, o_mu: -self.bt}, 0.0, 0.0)  # phi = bt mu
        n_p = len(P)
        sel = sp.csr_matrix((np.ones(n_p), (np.arange(n_p), P)), shape=(n_p, n))
        ep = sp.identity(n_p, format="csr")
        add({o_lp: sel, o_beta: -ep}, -np.inf, 0.0)  # phi+ <= beta
        add({o_ln: sel, o_beta: ep}, -np.inf, 1.0)  # phi- <= 1 - beta
        ones_p = sp.csr_matrix(np.ones((1, n_p))) @ sel
        add({o_lp: ones_p, o_ln: ones_p}, 1.0, 1.0)  # sum_P |phi| = 1
        eq = sp.identity(n_q, format="csr")
        for s in range(m_slots):
            ps, zs = o_psi + s * n_q, o_z + s * n_q
            add({ps: eq, o_lp: -c_mat, o_ln: -c_mat}, -np.inf, 0.0)  # psi <= X^r
            add({ps: eq, zs: -sp.diags(big_m).tocsr()}, -np.inf, 0.0)  # psi <= M z
            add({zs: sp.csr_matrix(np.ones((1, n_q)))}, -np.inf, 1.0)  # one per slot
        add({o_z + s * n_q: eq for s in range(m_slots)}, -np.inf, 1.0)  # one slot each
        # The floor S >= eps (1 - tau) T, relative to the aggregation's own magnitude: a
        # strict rule's point must clear the exact rule's tie tolerance (100 times over),
        # an inclusive rule's may fall short of 0 by less than it.
        eps = -0.1 * _TIE_RTOL if form.inclusive else _MIP_FLOOR_RTOL
        floor = cost.copy()
        floor[o_lp : o_lp + n] -= eps * (1.0 - form.tau) * total
        floor[o_ln : o_ln + n] -= eps * (1.0 - form.tau) * total
        add({0: sp.csr_matrix(floor[None, :])}, 0.0, np.inf)
        a_all = sp.vstack(blocks, format="csc")

        if highs.now() >= w.deadline:
            w.why.add("time limit reached")
            return "undecided", None, "mip"
        # Any point at or above the floor is a sensitive aggregation: stop at the first.
        h = highs.model(
            cost,
            col_lo,
            col_hi,
            a_all,
            np.concatenate(lowers),
            np.concatenate(uppers),
            maximize=True,
            integer=integer,
            mip_max_improving_sols=1,
        )
        outcome = highs.run(h, w.deadline)
        w.mip_solves += 1
        self.mip_solves += 1
        if outcome is Outcome.INFEASIBLE:
            return "safe", None, "mip"
        x = np.asarray(h.getSolution().col_value) if highs.has_point(h) else None
        if x is not None and len(x) == n_col:
            witness = yield from self._judge(x[o_mu : o_mu + n_rel], "mip")
            if witness is not None:
                return "sensitive", witness, "mip"
        # A limit, or a point the exact rule does not confirm (the request rule and
        # waivers are over-approximated in the MIP, or round-off), leaves the group
        # undecided, never safe. The limit is named as HiGHS reports it: stopping at the
        # first point (the solution limit asked for above) is no limit of the caller's.
        limit = highs.stopped_by(h)
        w.why.add(
            f"{limit} reached in the MIP"
            if limit not in (None, "solution limit")
            else f"MIP ended with {highs.describe(h)!r} at a point the rule does not confirm"
        )
        return "undecided", None, "mip"

    # -- frequency rules -----------------------------------------------------------------

    def _respondent_union(self, atoms: np.ndarray):
        """How the frequency search counts the respondents of a support: ``(start,
        grow, size)`` with ``start(a)`` the count kept for atom ``a`` (a position in the
        group) alone, ``grow(kept, b)`` that of the support with atom ``b`` added, and
        ``size(kept)`` a lower bound on the support's respondents. With distinct
        respondents (:class:`_Respondents`) the sum of the atoms' counts; else the
        respondents seen in any of them (a holding in two atoms once), at least the
        largest atom's count (which also counts holdings of amount 0). Only the atoms
        in the mask ``atoms`` are asked for."""
        r = self.w.resp
        count = r.count[self.pos]
        if r.distinct:
            return (lambda a: float(count[a])), (lambda kept, b: kept + float(count[b])), float
        local = np.full(len(r.total), -1, np.int64)
        local[self.pos[atoms]] = np.flatnonzero(atoms)
        at = local[r.cell]
        keep = at >= 0
        order = np.argsort(at[keep], kind="stable")
        by_atom = at[keep][order]
        rid = r.rid[keep][order]
        cuts = np.searchsorted(by_atom, np.arange(len(self.pos) + 1))
        ids = {
            int(a): frozenset(rid[cuts[a] : cuts[a + 1]].tolist()) for a in np.flatnonzero(atoms)
        }
        return (
            lambda a: (ids[a], float(count[a])),
            lambda kept, b: (kept[0] | ids[b], max(kept[1], float(count[b]))),
            lambda kept: max(float(len(kept[0])), kept[1]),
        )

    def frequency(self, k: int, small: np.ndarray) -> _Steps:
        """Aggregations with fewer respondents than the rule's ``n`` (module docstring);
        returns (status, witness) (a generator, :meth:`steps`)."""
        w = self.w
        n_min = w.rules[k].n
        count = w.resp.count[self.pos]
        positive = small & (count > 0)
        zero = small & (count <= 0)
        # Weighted by respondents, the cheapest aggregation is the likeliest witness.
        cost = np.where(positive, count, 0.0)
        budget = _MAX_SUPPORTS
        subsets = _MAX_SUBSETS
        undecided = False
        respondents, grow, size_of = self._respondent_union(positive)
        for anchor in np.flatnonzero(positive).tolist():
            value, mu, status = self._cheapest("support", cost, anchor, small)
            if status != "optimal":
                w.why.add(f"support LP: {status}")
                return "undecided", None
            if not np.isfinite(value):
                continue  # no aggregation within the small atoms involves the anchor
            witness = yield from self._judge(mu, "support")
            if witness is not None:
                return "sensitive", witness
            if w.screen_only:
                self.failing.append((k, int(self.atoms[anchor]), (), 0.0, ()))
                undecided = True
                continue
            # Supports with fewer than n respondents: the anchor, any zero atoms and other
            # small atoms, grown one atom at a time from the supports of the size below
            # that stay under n (respondents only grow with the support, so a support of
            # n or more has no smaller-than-n superset and is not grown).
            others = np.flatnonzero(positive)
            others = others[others != anchor]
            level: list[tuple[tuple[int, ...], Any]] = [((), respondents(anchor))]
            while level:
                grown = []
                for combo, held in level:
                    for j in range(combo[-1] + 1 if combo else 0, len(others)):
                        subsets -= 1
                        if subsets < 0:
                            w.why.add(f"more than {_MAX_SUBSETS} subsets of small cells to look at")
                            return "undecided", None
                        if subsets % _CLOCK_EVERY == 0 and highs.now() > w.deadline:
                            w.why.add("time limit reached")
                            return "undecided", None
                        union = grow(held, int(others[j]))
                        if size_of(union) >= n_min:
                            continue
                        budget -= 1
                        if budget < 0:
                            w.why.add(f"more than {_MAX_SUPPORTS} supports to enumerate")
                            return "undecided", None
                        chosen = (*combo, j)
                        within = zero.copy()
                        within[anchor] = True
                        within[others[list(chosen)]] = True
                        value, mu, status = self._cheapest("support", cost, anchor, within)
                        if status != "optimal":
                            w.why.add(f"support LP: {status}")
                            return "undecided", None
                        if np.isfinite(value):
                            witness = yield from self._judge(mu, "support")
                            if witness is not None:
                                return "sensitive", witness
                        grown.append((chosen, union))
                level = grown
            # The anchor alone with zero atoms.
            value, mu, status = self._cheapest(
                "support", cost, anchor, zero | (np.arange(len(zero)) == anchor)
            )
            if status == "optimal" and np.isfinite(value):
                witness = yield from self._judge(mu, "support")
                if witness is not None:
                    return "sensitive", witness
        if undecided:
            w.why.add("the support LPs did not prove every cell below the frequency threshold")
            return "undecided", None
        return "safe", None


class Deviations:
    """Deviations of the table's atoms kept between checks of one table (the fast method's
    rounds), to bound the screen's LPs from below without solving them.

    A deviation ``z`` of a group's atoms (``bt^T z = 0``: the cells they make up move
    with every relation among the hidden cells balanced), scaled by ``t`` so that ``|t
    z_j| <= cost_j`` on every known atom ``j`` other than ``i`` (the LP fixes ``phi_j =
    0`` on the unknown ones, which may move freely), is dual feasible for atom ``i``'s
    screen LP with those costs: ``rho_i >= t |z_i|`` (module docstring, the screen; weak
    duality). The largest such ``t`` is ``min_{j != i} cost_j / |z_j|``, so one deviation
    bounds every atom it moves under every rule and either half of the split. Two sources:
    the screen's own LPs (their row prices, :meth:`_Group._cheapest`), and the deviations
    the suppression search found (:meth:`add_cells`: its complements and attacks, which
    move cells of the pattern with every relation balanced).

    A later check's group tests each afresh: ``z`` restricted to the group's atoms must
    satisfy the group's relations to within what it did where it was found (HiGHS's
    tolerance) or ``1e-9`` of its largest move; only then does it bound anything there.
    The fast method's rounds only add hidden cells, and a deviation that leaves the
    added cells' atoms unmoved still holds (8x6x5x4, seed 1: rounds 2 and 3 solved 86
    and 84 screen LPs of about 12 ms for nearly the same anchors; with the screen's kept
    deviations round 3 solved 2; 20x20x10, seed 1: with the search's deviations too,
    round 2 solved 9 instead of 256).

    Apart from the pool, each atom's last proof (:meth:`remember`, :meth:`recalled`): the
    deviation of the screen LP that last bounded it, tested for that atom alone, which
    costs far less than the pool's test; a check that only seeks proofs (the trim's
    trials) adds to these and not to the pool."""

    def __init__(self, relations=None, source: UnionSource | None = None) -> None:
        # Rows over the table's cells (sparse, and column-major to find the rows through a
        # group's atoms) with each row's residual where it was found; new rows wait in a
        # list until the next flush().
        self._rows: tuple[sp.csr_matrix, sp.csc_matrix, np.ndarray] | None = None
        self._new: list[tuple[np.ndarray, np.ndarray, float]] = []
        self.n_cells = 0 if source is None else source.cells.n_cells
        self.nonzeros = 0
        # The table of add_cells (its atom map and relations).
        self._table = None if source is None else _Table.of(relations, source)
        # The deviation that last bounded each atom's screen LP, by (rule, cost, atom
        # cell): (atoms, moves, residual), tested by a later check before that LP.
        self._proofs: dict[tuple[int, str, int], tuple[np.ndarray, np.ndarray, float]] = {}
        self._proof_nonzeros = 0

    def _keep(self, atoms: np.ndarray, z: np.ndarray, residual: float) -> None:
        """Keep the moves ``z`` of ``atoms`` (cell ids), unless :data:`_KEEP_NONZEROS`
        would be passed."""
        if not len(atoms) or self.nonzeros + len(atoms) > _KEEP_NONZEROS:
            return
        self.nonzeros += len(atoms)
        order = np.argsort(atoms)
        self._new.append((atoms[order], z[order], max(residual, 0.0)))

    def add(self, group: _Group, z: np.ndarray) -> None:
        """Keep ``z``, a deviation of ``group``'s atoms (a screen LP's row prices)."""
        self.n_cells = len(group.w.values)
        z = _without_noise(z)
        nz = np.flatnonzero(z)
        residual = np.abs(group.imbalance @ z).max(initial=0.0)
        self._keep(group.atoms[nz], z[nz], residual)

    def remember(self, group: _Group, k: int, kind: str, anchors: list[int], z: np.ndarray):
        """Keep ``z``, the row prices of a screen LP of ``group`` under rule ``k`` and
        costs ``kind`` ("omega" or "plain"), as the last bound of each atom in ``anchors``
        (positions in the group): :meth:`recalled` tests it there in a later check. At
        most :data:`_KEEP_NONZEROS` moves are kept this way."""
        z = _without_noise(z)
        nz = np.flatnonzero(z)
        if not nz.size or self._proof_nonzeros + nz.size > _KEEP_NONZEROS:
            return
        self._proof_nonzeros += nz.size
        residual = float(np.abs(group.imbalance @ z).max(initial=0.0))
        entry = (group.atoms[nz], z[nz] * (1.0 - 1e-6), residual)
        for a in anchors:
            self._proofs[(k, kind, int(group.atoms[a]))] = entry

    def recalled(
        self, group: _Group, k: int, kind: str, cost: np.ndarray, anchors: np.ndarray
    ) -> np.ndarray:
        """Per atom of ``group``: a lower bound on its screen LP's value under rule ``k``
        and costs ``cost`` (of ``kind``) from the deviation that last bounded it
        (:meth:`remember`), tested at the atoms in ``anchors`` only; zero elsewhere.

        The deviation, restricted to the group's atoms, must still balance the group's
        relations (to within what it did where it was found, or ``1e-9`` of its largest
        move): removing a hidden cell (the trim's trials) or adding one (the rounds)
        changes the relations only where it sits, so a proof that did not move the cell
        usually stands. Scaled by the largest ``t`` with ``|t z_j| <= cost_j`` on every
        other known atom, it is dual feasible for the atom's LP: ``rho >= t |z_i|`` (as
        in :meth:`bound`); infinite when no other atom moves (no aggregation reaches the
        atom)."""
        out = np.zeros(len(group.atoms))
        if not self._proofs:
            return out
        keys = [(k, kind, cell) for cell in group.atoms[anchors].tolist()]
        found = [
            (a, e) for a, e in zip(np.asarray(anchors).tolist(), map(self._proofs.get, keys)) if e
        ]
        if not found:
            return out
        # One row per anchor: its proof restricted to the group's atoms (sorted).
        at = np.array([a for a, _ in found])
        cells = np.concatenate([e[0] for _, e in found])
        moves = np.concatenate([e[1] for _, e in found])
        row = np.repeat(np.arange(len(found)), [len(e[0]) for _, e in found])
        pos = np.minimum(np.searchsorted(group.atoms, cells), len(group.atoms) - 1)
        inside = group.atoms[pos] == cells
        z = np.zeros((len(found), len(group.atoms)))
        z[row[inside], pos[inside]] = moves[inside]
        residual = np.abs(group.imbalance @ z.T).max(axis=0, initial=0.0)
        was = np.array([e[2] for _, e in found])
        moved = np.abs(z)
        mine = moved[np.arange(len(found)), at]
        holds = (mine > 0.0) & (residual <= np.maximum(was, 1e-9 * moved.max(axis=1)))
        moved[np.arange(len(found)), at] = 0.0
        c = np.where(np.isfinite(cost) & ~group.unknown, cost, np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 moves: no limit
            scale = np.where(moved > 0.0, c / moved, np.inf).min(axis=1, initial=np.inf)
            out[at[holds]] = (scale * mine)[holds]
        return out

    def add_cells(self, found: list[tuple[np.ndarray, np.ndarray]], hidden: np.ndarray) -> None:
        """Keep deviations the suppression search found, each ``(cells, moves)`` with
        every relation balanced and all its cells hidden in pattern ``hidden`` (its
        complements and attacks); one that moves a published cell (dropped by a clean-up
        since) is left out. Their atoms' moves are kept, shrunk by a millionth as the
        screen's prices are, each with the residual it leaves, through the cells it
        moves, on the relations among hidden cells (the search's solutions drop moves
        below its tolerance). All in one sparse product: at 132,496 cells (the scale
        benchmark's N = 330), round 1's 9,048 deviations in 0.06 s."""
        if self._table is None:
            raise RuntimeError("Deviations(relations, source) is needed for add_cells()")
        t = self._table
        found = [(c, z) for c, z in found if hidden[c].all()]
        if not found:
            return
        cells = np.concatenate([c for c, _ in found])
        values = np.concatenate([z for _, z in found])
        row = np.repeat(np.arange(len(found)), [len(c) for c, _ in found])
        on = t.atom_pos[cells] >= 0
        atoms = sp.csr_matrix(
            (values[on] * (1.0 - 1e-6), (row[on], cells[on])), shape=(len(found), len(hidden))
        )
        # Each cell moves by the sum of its atoms' moves; published cells are left out,
        # as a group's relations leave them out.
        moves = (atoms @ t.g.T) @ sp.diags(hidden.astype(float))
        residual = abs(moves @ t.a_cols.T).max(axis=1).toarray().ravel()
        for k in range(len(found)):
            lo, hi = atoms.indptr[k], atoms.indptr[k + 1]
            self._keep(atoms.indices[lo:hi], atoms.data[lo:hi], residual[k])

    def flush(self) -> None:
        """Make the deviations added so far available to :meth:`bound` (at the start of
        a check: within one, groups share no atom, and a group's own LPs prove by
        :meth:`_Group.proven_by_last`)."""
        if not self._new:
            return
        new = self._new
        rows = sp.csr_matrix(
            (
                np.concatenate([v for _, v, _ in new]),
                np.concatenate([c for c, _, _ in new]),
                np.concatenate(([0], np.cumsum([len(c) for c, _, _ in new]))),
            ),
            shape=(len(new), self.n_cells),
        )
        residual = np.array([r for _, _, r in new])
        if self._rows is not None:
            rows = sp.vstack([self._rows[0], rows], format="csr")
            residual = np.concatenate([self._rows[2], residual])
        self._rows = rows, rows.tocsc(), residual
        self._new = []

    def _held(self, group: _Group) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``|z|`` of the deviations flushed that move an atom of ``group`` and still hold
        there, restricted to its atoms, row by row as ``(indptr, atom positions, moves)``,
        or None; found once per group (the pool changes only between checks) from the
        pool's columns of its atoms, whose entries are those rows' moves there, with one
        sparse product (scipy's checks on the small blocks of 2-D tables cost more than
        the arithmetic)."""
        if self._rows is None:
            return None
        if group.held is not None and group.held[0] is self._rows:
            return group.held[1]
        _, by_cell, found = self._rows
        starts = by_cell.indptr[group.atoms]
        counts = by_cell.indptr[group.atoms + 1] - starts
        total = int(counts.sum())
        held = None
        if total:
            take = ranges(starts, counts)
            hit, row = np.unique(by_cell.indices[take], return_inverse=True)
            row = row.ravel()
            # Row by row, atoms ascending within a row (the entries come atom by atom).
            order = np.argsort(row, kind="stable")
            row, data = row[order], by_cell.data[take][order]
            col = np.repeat(np.arange(len(group.atoms)), counts)[order]
            indptr = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=len(hit)))))
            largest = np.maximum.reduceat(np.abs(data), indptr[:-1])
            moved = sp.csr_matrix((data, col, indptr), shape=(len(hit), len(group.atoms)))
            residual = _row_max(abs(moved @ group.bt))
            holds = residual <= np.maximum(found[hit], 1e-9 * largest)
            keep = holds[row] & (data != 0)
            if keep.any():
                rows = (np.cumsum(holds) - 1)[row[keep]]
                ptr = np.concatenate(
                    ([0], np.cumsum(np.bincount(rows, minlength=int(holds.sum()))))
                )
                held = ptr, col[keep], np.abs(data[keep])
        group.held = (self._rows, held)
        return held

    def bound(self, group: _Group, cost: np.ndarray) -> np.ndarray:
        """Per atom of ``group``: a lower bound on its screen LP's value under costs
        ``cost`` from the deviations flushed that still hold there (zero where none
        does)."""
        out = np.zeros(len(group.atoms))
        held = self._held(group)
        if held is None:
            return out
        indptr, indices, data = held
        n_rows = len(indptr) - 1
        # Per row, the largest scale its atoms' costs allow: the smallest cost_j / |z_j|
        # over the other atoms (the second smallest for the atom that has the smallest).
        c = np.where(np.isfinite(cost) & ~group.unknown, cost, np.inf)
        ratio = c[indices] / data
        row = np.repeat(np.arange(n_rows), np.diff(indptr))
        starts = indptr[:-1][np.diff(indptr) > 0]
        first = np.full(n_rows, np.inf)
        first[row[starts]] = np.minimum.reduceat(ratio, starts)
        at_first = ratio == first[row]
        ties = np.bincount(row, at_first, minlength=n_rows)
        second = np.full(n_rows, np.inf)
        others = np.where(at_first, np.inf, ratio)
        second[row[starts]] = np.minimum.reduceat(others, starts)
        second = np.where(ties > 1, first, second)
        scale = np.where(at_first, second[row], first[row])
        with np.errstate(invalid="ignore"):  # inf * 0 cannot occur: data > 0
            np.maximum.at(out, indices, data * scale)
        return out

    def bound_at(self, group: _Group, cost: np.ndarray, anchor: int) -> float:
        """``bound(group, cost)[anchor]``, from the rows that move ``anchor`` only (the
        one-intruder partners' sets ask it of one atom per set: the trim's trials spent
        about a millisecond each on the whole group's bounds)."""
        held = self._held(group)
        if held is None:
            return 0.0
        indptr, indices, data = held
        at = np.flatnonzero(indices == anchor)
        if not at.size:
            return 0.0
        rows = np.searchsorted(indptr, at, side="right") - 1
        lo, hi = indptr[rows], indptr[rows + 1]
        per = hi - lo
        entry = ranges(lo, per)
        c = np.where(np.isfinite(cost) & ~group.unknown, cost, np.inf)
        ratio = np.where(indices[entry] == anchor, np.inf, c[indices[entry]] / data[entry])
        scale = np.minimum.reduceat(ratio, np.cumsum(per) - per)
        with np.errstate(invalid="ignore"):  # inf * 0 cannot occur: data > 0
            return float((data[at] * scale).max())


def spanning_top(
    cell: np.ndarray, rid: np.ndarray, amount: np.ndarray, n: int, depth: int
) -> np.ndarray:
    """``(n, depth)``: per atom, the largest amounts (descending, 0-padded) among the
    entries ``(cell, rid, amount)`` (one per atom and respondent) of respondents with two
    or more entries: the spanning pieces of :data:`SPANNING_ALLOWANCE`."""
    out = np.zeros((n, depth))
    _, inverse, counts = np.unique(rid, return_inverse=True, return_counts=True)
    several = counts[inverse.ravel()] > 1
    cell, amount = cell[several], amount[several]
    order = np.lexsort((-amount, cell))
    cell, amount = cell[order], amount[order]
    rank = np.arange(len(cell)) - np.searchsorted(cell, cell, side="left")
    keep = rank < depth
    out[cell[keep], rank[keep]] = amount[keep]
    return out


def spanning_lift(
    cell: np.ndarray, rid: np.ndarray, amount: np.ndarray, n: int, heavy: np.ndarray
) -> np.ndarray:
    """Per atom ``i`` of ``n``: ``max_r h_r a_ri`` over the respondents ``r`` with a piece
    ``a_ri`` there and two or more entries ``(cell, rid, amount)`` in all, ``h_r`` its
    pieces in the ``heavy`` atoms other than ``i`` (:data:`SPANNING_ALLOWANCE` 5, over
    ``b_1``)."""
    out = np.zeros(n)
    _, inverse, counts = np.unique(rid, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    several = counts[inverse] > 1
    in_heavy = np.bincount(inverse, weights=heavy[cell], minlength=len(counts))
    others = in_heavy[inverse] - heavy[cell]
    np.maximum.at(out, cell[several], others[several] * amount[several])
    return out


def spanning_costs(form, omega, plain, measure, top: np.ndarray):
    """The screen's costs ``omega`` and ``plain`` with the allowance for respondents
    spanning atoms (:data:`SPANNING_ALLOWANCE`), ``top`` their largest pieces per atom
    (:func:`spanning_top`, at least ``len(form.b)`` deep), and the *heavy* atoms (a mask),
    where the costs of 2-3 would fall below 0 and those of 5 are taken."""
    b = np.asarray(form.b)
    lowered = np.maximum(omega - b[0] * top[:, 0], -measure)
    spread = plain - top[:, : len(b)] @ b
    heavy = (lowered < 0) | (spread < 0)
    return (
        np.where(heavy, omega, lowered),
        np.where(heavy, plain - top[:, : len(b) - 1] @ b[1:], spread),
        heavy,
    )


def _without_noise(z: np.ndarray) -> np.ndarray:
    """A screen LP's row prices ``z`` with every move at most ``1e-9`` of the largest set to
    0, before they are kept (:meth:`Deviations.add`, :meth:`Deviations.remember`).

    HiGHS leaves such moves (to its tolerances) at atoms a deviation must hold still, those
    of zero cost; kept as they were, they made every later bound from the deviation zero
    (``cost_j / |z_j|`` at such an atom scales it to nothing), so on 3-D tables nearly no
    proof carried over to the next round: on 30x30x15 (15,376 cells, one group of about
    2,900 atoms, 677 of zero cost under ``omega``) 430 of 539 recalled proofs moved one,
    and round 2's check, proving the same group again, took 20 s instead of 7.7 s. The
    residual each deviation leaves on the relations is measured after this, and a later
    bound from it is accepted only within that residual (or ``1e-9`` of its largest move),
    as for every kept deviation; :meth:`_Group.proven_by_last` reads the same prices
    within the check that found them."""
    return np.where(np.abs(z) > 1e-9 * np.abs(z).max(initial=0.0), z, 0.0)


def _partner_cells(atoms: np.ndarray, failed: list[tuple[int, np.ndarray | None]]):
    """The cells of the partners not proven (:meth:`_Group._magnitude_screen`), sorted."""
    return tuple(sorted(int(atoms[j]) for j, _ in failed))


def _row_max(m: sp.csr_matrix) -> np.ndarray:
    """The largest entry of each row of ``m`` (0 for a row without entries)."""
    out = np.zeros(m.shape[0])
    filled = np.flatnonzero(np.diff(m.indptr) > 0)
    if filled.size:
        out[filled] = np.maximum(np.maximum.reduceat(m.data, m.indptr[filled]), 0.0)
    return out


def _drive(steps: list[_Steps], values: np.ndarray, source: UnionSource) -> list:
    """Run generators of groups (:meth:`_Group.steps`) side by side and return their
    return values. Each yields a batch of aggregations (rows over the table's cells) and
    waits for the :class:`~service.sdc.unions.Verdict` on it; the batches of every
    generator waiting are judged in one call of :func:`service.sdc.unions.judge`, which
    judges each row on its own (the same verdict as alone, in fewer calls)."""
    out: list = [None] * len(steps)
    waiting: dict[int, sp.csr_matrix] = {}

    def advance(i: int, sent) -> None:
        try:
            waiting[i] = steps[i].send(sent)
        except StopIteration as done:
            out[i] = done.value

    for i in range(len(steps)):
        advance(i, None)
    while waiting:
        batch = list(waiting.items())
        waiting.clear()
        verdict = judge(sp.vstack([rows for _, rows in batch], format="csr"), values, source)
        start = 0
        for i, rows in batch:
            part = slice(start, start + rows.shape[0])
            start = part.stop
            advance(
                i,
                Verdict(
                    verdict.value[part],
                    verdict.checked[part],
                    verdict.fired[:, part],
                    verdict.sensitivity[:, part],
                ),
            )
    return out


def _block_row(n_col: int, blocks: dict) -> sp.csr_matrix:
    """A block row of a model: ``blocks`` maps a column offset to the matrix placed there."""
    n_rows = next(iter(blocks.values())).shape[0]
    parts = [sp.coo_matrix(mat) for mat in blocks.values()]
    data = np.concatenate([p.data for p in parts])
    r = np.concatenate([p.row for p in parts])
    c = np.concatenate([p.col + off for p, off in zip(parts, blocks)])
    return sp.csr_matrix((data, (r, c)), shape=(n_rows, n_col))


class Requirement(NamedTuple):
    """One deviation the screen needs (:class:`Requirements`): ``cell`` moved beyond
    ``level`` while every other atom moves within ``room``."""

    cell: int
    level: float
    room: np.ndarray


class Requirements:
    """What protecting an atom against aggregations asks of the other cells, for the
    suppression methods (:mod:`service.sdc.suppress`).

    The screen of :func:`check_aggregations` certifies a sensitive atom ``i`` under a slot
    rule when no aggregation with ``phi_i = 1`` has ``sum_{j != i} omega_j |phi_j|`` below
    ``S_i - b_m x_i^[m]`` and none has ``sum_{j != i} (-tau X_j) |phi_j|`` below ``S_i``.
    By LP duality each is a deviation of the hidden cells (``A z = 0``, published cells
    fixed) that moves ``i`` beyond the level while every other atom ``j`` moves at most its
    room (margins move with their atoms): protection requirements of the usual shape,
    which the fast method meets with its cheapest-complement LP. Under a frequency rule the
    requirement is that ``i`` moves while the atoms below the threshold stay fixed.
    """

    def __init__(self, relations, source: UnionSource):
        n = source.cells.n_cells
        self.source = source
        t = _Table.of(relations, source)
        atoms, self.rules, forms, resp, arrays = t.atoms, t.rules, t.forms, t.resp, t.arrays
        shape = (len(self.rules), n)
        self.measure = np.full(shape, -np.inf)
        self.alone = np.full(shape, -np.inf)
        self.tie = np.ones(shape)
        self.room_alone = np.full(shape, np.inf)  # cells that are not atoms: free
        self.room_plain = np.full(shape, np.inf)
        # Rooms at an atom the screen took as heavy (SPANNING_ALLOWANCE 5), where some
        # respondent spans atoms.
        spanning = len(t.spanning[0]) > 0
        self.room_heavy_alone = np.full(shape, np.inf) if spanning else self.room_alone
        self.room_heavy_plain = np.full(shape, np.inf) if spanning else self.room_plain
        for k, (rule, form) in enumerate(zip(self.rules, forms)):
            if form is None:
                count = resp.count
                self.measure[k, atoms] = np.where(count > 0, rule.n - count, -np.inf)
                self.room_alone[k, atoms] = np.where(count < rule.n - 1e-9, 0.0, np.inf)
                self.tie[k, atoms] = 1e-9
            else:
                # The screen's costs with the allowance for respondents spanning atoms,
                # table-wide (SPANNING_ALLOWANCE): at most any group's.
                omega, plain, heavy = spanning_costs(
                    form, arrays.omega[k], arrays.plain[k], arrays.measure[k], t.spanning_top
                )
                self.measure[k, atoms] = arrays.measure[k]
                self.alone[k, atoms] = arrays.alone[k]
                # A heavy atom of the table may be light in a group (fewer spanning
                # pieces there): its room is the lower of the two, 0, unless the screen's
                # failing anchor names it heavy (Requirements.at).
                omega, plain = np.maximum(omega, 0.0), np.maximum(plain, 0.0)
                if spanning:
                    self.room_heavy_alone[k, atoms] = omega
                    self.room_heavy_plain[k, atoms] = plain
                self.room_alone[k, atoms] = np.where(heavy, 0.0, omega)
                self.room_plain[k, atoms] = np.where(heavy, 0.0, plain)
                self.tie[k, atoms] = _TIE_RTOL * arrays.scale[k]
        # Atoms of unknown magnitudes are left out of judged aggregations: free here too.
        if source.known is not None:
            unknown = ~np.asarray(source.known, bool)
            self.room_alone[:, unknown] = self.room_plain[:, unknown] = np.inf
            self.measure[:, unknown] = -np.inf
        self.frequency = np.array([f is None for f in forms])
        self.values = np.asarray(source.cells.value, dtype=float)

    def of(self, aggregation: Aggregation) -> list[Requirement]:
        """Requirements against ``aggregation``: those of the atom it attacks (the largest
        own measure under its rule)."""
        k = aggregation.rule
        atoms = aggregation.atoms
        return self.at(k, int(atoms[np.argmax(self.measure[k, atoms])]))

    def at(
        self,
        k: int,
        anchor: int,
        partners: tuple[int, ...] = (),
        lift: float = 0.0,
        heavy: tuple[int, ...] = (),
    ) -> list[Requirement]:
        """The deviations the screen needs for ``anchor`` under rule ``k``, each strictly
        beyond its level; with ``partners`` (atoms, under a one-intruder rule: the check's
        ``failing``), only the one that proves the intruder's respondent in any of them:
        the anchor beyond ``S_i - b_2 x_i^[2]`` with the partners within ``omega``, every
        other atom within ``-tau X_j`` (one complement for them all, stronger than each
        partner's own). ``lift``: what the screen added to the anchor's bounds for
        respondents spanning atoms, ``heavy`` the atoms it took as heavy there
        (:data:`SPANNING_ALLOWANCE` 5)."""

        def beyond(level: float) -> float:
            return level + max(1e-6 * abs(level), 1e3 * self.tie[k, anchor], 1e-9)

        def rooms(kind: str) -> np.ndarray:
            room = getattr(self, f"room_{kind}")[k].copy()
            if heavy:
                room[list(heavy)] = getattr(self, f"room_heavy_{kind}")[k, list(heavy)]
            return room

        if partners:
            room = rooms("plain")
            room[list(partners)] = rooms("alone")[list(partners)]
            room[anchor] = np.inf
            return [Requirement(anchor, beyond(self.alone[k, anchor] + lift), room)]
        out = []
        if self.frequency[k]:
            room = self.room_alone[k].copy()
            room[anchor] = np.inf
            return [Requirement(anchor, 1e-4 * max(1.0, abs(self.values[anchor])), room)]
        for level, kind in (
            (self.alone[k, anchor] + lift, "alone"),
            (self.measure[k, anchor] + lift, "plain"),
        ):
            if level > -self.tie[k, anchor]:
                room = rooms(kind)
                room[anchor] = np.inf
                out.append(Requirement(anchor, beyond(level), room))
        return out
