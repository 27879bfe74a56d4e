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

  1. *Screen* (exact when it certifies): for a sensitive cell ``i`` as the attacked one,
     ``S(lambda) <= S_i |lambda_i| - sum_{j != i} omega_j |lambda_j|`` with
     ``omega_j = -tau X_j - sum_{s >= 2} b_s x_j^[s-1]`` (every other cell may host the
     attackers). With ``lambda_i = 1`` the minimum of the right-hand side over the
     aggregations is ``S_i - rho_i``, where by LP duality ``rho_i = max z_i`` over the
     deviations ``A z = 0`` with ``|z_j| <= omega_j``: the same LP as the interval audit,
     with each other cell's room ``omega_j`` (for the p%-rule ``100/p (X_j - x_j^[1] - ..
     - x_j^[c])``: what its contributors other than a coalition hide). ``S_i < rho_i`` for
     every sensitive cell proves the group safe. It applies when no respondent spans two
     cells of the group.
  2. *Witnesses*: the LP's row prices give the aggregation ``lambda = A^T y`` that attains
     ``rho_i``; it and the explicit aggregations (single relations) are judged exactly by
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
* **Frequency rules** (minimum frequency, the threshold rule of count tables) depend on
  the support of ``lambda`` only: an aggregation has at least as many respondents as each
  of its cells, so a sensitive one lies within the cells below the threshold ``Z``.
  Whether an aggregation supported in ``U`` with ``lambda_i != 0`` exists is the LP
  question "can cell ``i`` move while the other cells of ``U`` stay fixed" (``e_i`` is not
  in the projection of the kernel on ``U``); the supports with fewer respondents than the
  threshold are enumerated (there are few: each adds at least one respondent).

Relations that hold within a tolerance are read as exact here: the intruder then knows
more, never less, so the check stays on the safe side.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import rules as rules_mod
from .unions import UnionSource, judge

_MS = highspy.HighsModelStatus
# A cell whose measure is within this share of its scale below 0 is handled as possibly
# sensitive (sign binaries), which keeps the MIP's coefficient bounds moderate.
_NEAR_SENSITIVE = 1e-3
# Relative tolerance of a measure's sign (issue 20: ties follow the rule's comparison).
_TIE_RTOL = 1e-9
# Enumeration budget of the frequency rules' supports per group.
_MAX_SUPPORTS = 2000

STATUSES = ("safe", "sensitive", "undecided", "not_applicable")


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
    """

    cells: np.ndarray
    coefficients: np.ndarray
    value: float
    rule: int
    measure: float
    found_by: str
    relations: np.ndarray
    multipliers: np.ndarray


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
        Groups with a sensitive cell; groups the screen certified; MIPs solved.
    seconds : float
    message : str
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
    total: np.ndarray          # X_i as the rules read it
    count: np.ndarray          # respondents per cell (counts for count tables)
    distinct: bool             # respondents of different cells are known to differ

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
    local = np.full(m.n_cells, -1, dtype=np.int64)
    local[cells] = np.arange(n)
    parts_cell, parts_id, parts_amt = [], [], []
    raw = np.zeros(n, bool)
    c = source.contributions
    next_id = 0
    if c is not None:
        keep = local[c.cell] >= 0
        cc = local[c.cell[keep]]
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
    nz = amount > 0
    return _Respondents(cell[nz], rid[nz], amount[nz], np.abs(m.total[cells]),
                        np.asarray(m.count, dtype=float)[cells], c is None or not raw.any())


def check_aggregations(relations, values, suppressed, source: UnionSource, *,
                       derived=None, deadline: float | None = None,
                       time_limit: float = 60.0) -> AggregationCheck:
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
        ``time.perf_counter()`` value by which to stop; else ``time_limit`` from now.

    Returns
    -------
    AggregationCheck

    Notes
    -----
    Seed 002 sections 3-6; the method and the readings are in the module docstring.
    """
    start = time.perf_counter()
    deadline = start + time_limit if deadline is None else deadline
    a = sp.csr_matrix(getattr(relations, "relations", relations), dtype=float)
    values = np.asarray(values, dtype=float)
    suppressed = np.asarray(suppressed, dtype=bool)
    derived = np.zeros_like(suppressed) if derived is None else np.asarray(derived, bool)
    derived = derived & suppressed
    hidden = suppressed & ~derived
    cells = np.flatnonzero(hidden)
    work = _Work(a, values, hidden, cells, source, deadline)
    found, undecided, statuses = [], [], []
    groups = screened = 0
    for members, rows in work.groups():
        outcome = work.decide(members, rows)
        if outcome is None:
            continue
        groups += 1
        status, aggregation, how = outcome
        statuses.append(status)
        screened += status == "safe" and how == "screen"
        if aggregation is not None:
            found.append(aggregation)
        elif status != "safe":
            undecided.append(cells[members])
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
        "sensitive": f"{len(found)} group(s) of suppressed cells publish a sensitive "
                     "aggregation",
        "undecided": "not every group of suppressed cells was decided: " + "; ".join(
            sorted(work.why)),
        "not_applicable": "some suppressed cells have no contributions or summary, so the "
                          "rule cannot be applied to aggregations that include them",
    }
    return AggregationCheck(
        status, np.flatnonzero(derived), tuple(found),
        np.concatenate(undecided) if undecided else np.zeros(0, np.int64), groups, screened,
        work.mip_solves, time.perf_counter() - start, messages[status])


class _Work:
    """The state shared by the groups of one check."""

    def __init__(self, a, values, hidden, cells, source: UnionSource, deadline):
        self.a, self.values, self.hidden, self.cells = a, values, hidden, cells
        self.source, self.deadline = source, deadline
        self.rules = source.ruleset.effective_rules()
        self.resp = _respondents(source, cells)
        known = np.ones(len(values), bool) if source.known is None else source.known
        self.known = np.asarray(known, bool)[cells]
        self.a_s = a[:, cells].tocsr()
        self.mip_solves = 0
        self.why: set[str] = set()
        self.forms = [slot_form(r) for r in self.rules]
        depth = max([1] + [len(f.b) for f in self.forms if f is not None])
        self.top = self.resp.top(depth)
        self.measure = np.full((len(self.rules), len(cells)), np.nan)
        self.scale = np.ones((len(self.rules), len(cells)))
        for k, f in enumerate(self.forms):
            if f is None:
                continue
            b = np.asarray(f.b)
            self.measure[k] = f.tau * self.resp.total + self.top[:, :len(b)] @ b
            self.scale[k] = np.maximum((1.0 - f.tau) * self.resp.total, 1e-300)

    def groups(self):
        """Connected groups of hidden cells (local indices) and the relations touching them."""
        active = np.flatnonzero(np.diff(self.a_s.indptr) > 0)
        b = self.a_s[active]
        n_s = len(self.cells)
        pattern = sp.csr_matrix((np.ones(b.nnz), b.indices, b.indptr), shape=b.shape)
        graph = sp.bmat([[sp.csr_matrix((n_s, n_s)), pattern.T],
                         [pattern, sp.csr_matrix((len(active), len(active)))]], format="csr")
        n_lab, labels = connected_components(graph, directed=False)
        cell_label, row_label = labels[:n_s], labels[n_s:]
        cell_order = np.argsort(cell_label, kind="stable")
        row_order = np.argsort(row_label, kind="stable")
        cb = np.searchsorted(cell_label[cell_order], np.arange(n_lab + 1))
        rb = np.searchsorted(row_label[row_order], np.arange(n_lab + 1))
        for g in range(n_lab):
            rows = active[row_order[rb[g]:rb[g + 1]]]
            if rows.size:   # a hidden cell in no relation publishes nothing
                yield cell_order[cb[g]:cb[g + 1]], rows

    # -- one group -----------------------------------------------------------------

    def decide(self, members: np.ndarray, rows: np.ndarray):
        """``(status, aggregation or None, how)``, or ``None`` for a group without a
        sensitive cell under any rule (safe by seed 002 Theorem 2)."""
        known = self.known[members]
        relevant = []
        for k, f in enumerate(self.forms):
            if f is None:
                small = self._frequency_small(k, members) & known
                if small.any():
                    relevant.append((k, small))
            else:
                near = self.measure[k, members] >= -_NEAR_SENSITIVE * self.scale[k, members]
                if (near & known).any():
                    relevant.append((k, near & known))
        if not relevant:
            return None
        group = _Group(self, members, rows)
        witness = group.explicit()
        if witness is not None:
            return "sensitive", witness, "relation"
        statuses, how = [], "screen"
        for k, mask in relevant:
            if time.perf_counter() > self.deadline:
                self.why.add("time limit reached")
                return "undecided", None, "time"
            if self.forms[k] is None:
                status, witness = group.frequency(k, mask)
                how = "support"
            else:
                status, witness, how_k = group.magnitude(k, mask)
                how = how_k if how_k != "screen" else how
            if witness is not None:
                return "sensitive", witness, how
            statuses.append(status)
        if "undecided" in statuses:
            return "undecided", None, how
        if not known.all():
            # Only aggregations that leave out the cells of unknown magnitudes were judged.
            return "not_applicable", None, how
        return "safe", None, how

    def _frequency_small(self, k: int, members: np.ndarray) -> np.ndarray:
        n = self.rules[k].n
        count = self.resp.count[members]
        return count < n - 1e-9


class _Group:
    """One connected group of hidden cells: its relations and the LP over its deviations."""

    def __init__(self, work: _Work, members: np.ndarray, rows: np.ndarray):
        self.w = work
        self.members = members
        self.rows = rows
        self.sub = work.a_s[rows][:, members].tocsc()
        # Cells whose magnitudes are unknown take no part in a judged aggregation: free in
        # the LPs (their row prices then give them coefficient 0), fixed to 0 in the MIP.
        self.unknown = ~work.known[members]
        self._lp = None

    # -- evaluation ------------------------------------------------------------------

    def _judge(self, mu: np.ndarray, how: str) -> Aggregation | None:
        """Exact verdict on the aggregations ``lambda = mu^T A`` (rows of ``mu`` are
        multipliers of the group's relations), the most sensitive one or ``None``.

        Building ``lambda`` from ``mu`` makes every candidate a genuine aggregation, what
        ever produced ``mu`` (row prices of an LP, a MIP point, a single relation)."""
        mu = np.atleast_2d(np.asarray(mu, dtype=float))
        lam = np.asarray(self.sub.T @ mu.T).T
        scale = np.abs(lam).max(axis=1, keepdims=True)
        keep = scale.ravel() > 1e-12
        if not keep.any():
            return None
        mu, lam = mu[keep] / scale[keep], lam[keep] / scale[keep]
        # Defined up to a factor (seed 002 section 3): orient the published value >= 0.
        value = lam @ self.w.values[self.w.cells[self.members]]
        first = lam[np.arange(len(lam)), np.argmax(lam != 0, axis=1)]
        flip = np.where((value < 0) | ((value == 0) & (first < 0)), -1.0, 1.0)[:, None]
        mu, lam = mu * flip, lam * flip
        # Round-off of the row prices: coefficients below 1e-9 of the largest are zero.
        lam[np.abs(lam) < 1e-9] = 0.0
        coo = sp.coo_matrix(lam)
        full = sp.csr_matrix((coo.data, (coo.row, self.w.cells[self.members][coo.col])),
                             shape=(lam.shape[0], len(self.w.values)))
        verdict = judge(full, self.w.values, self.w.source)
        sens = verdict.fired & verdict.checked[None, :]
        best = None
        for r, k in zip(*np.nonzero(sens.T)):
            s = float(verdict.sensitivity[k, r])
            if best is None or s > best.measure:
                nz = np.flatnonzero(lam[r])
                cells = self.w.cells[self.members[nz]]
                used = np.flatnonzero(np.abs(mu[r]) > 1e-12)
                best = Aggregation(cells, lam[r, nz], float(verdict.value[r]), int(k), s, how,
                                   self.rows[used], mu[r, used])
        return best

    def explicit(self) -> Aggregation | None:
        """The explicit aggregations (one relation each, seed 002 eq. 3.6), judged exactly."""
        several = np.flatnonzero(np.diff(self.sub.tocsr().indptr) >= 2)
        if not several.size:
            return None
        mu = np.zeros((len(several), len(self.rows)))
        mu[np.arange(len(several)), several] = 1.0
        return self._judge(mu, "relation")

    # -- the deviation LP: max z_i s.t. A z = 0, bounds per cell ---------------------------

    def _model(self) -> highspy.Highs:
        if self._lp is None:
            m, k = self.sub.shape
            lp = highspy.HighsLp()
            lp.num_col_, lp.num_row_ = k, m
            lp.col_cost_ = np.zeros(k)
            lp.col_lower_ = np.zeros(k)
            lp.col_upper_ = np.zeros(k)
            lp.row_lower_ = np.zeros(m)
            lp.row_upper_ = np.zeros(m)
            lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
            lp.a_matrix_.start_ = self.sub.indptr.astype(np.int32)
            lp.a_matrix_.index_ = self.sub.indices.astype(np.int32)
            lp.a_matrix_.value_ = self.sub.data.astype(float)
            lp.sense_ = highspy.ObjSense.kMaximize
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
            h.passModel(lp)
            self._lp = h
        return self._lp

    def _reach(self, anchor: int, lower: np.ndarray, upper: np.ndarray):
        """``max z_anchor`` with the given bounds: (value or inf, the row prices ``y`` whose
        aggregation ``A^T y`` attains it by LP duality, or None; status)."""
        h = self._model()
        k = len(self.members)
        idx = np.arange(k, dtype=np.int32)
        h.changeColsBounds(k, idx, lower, upper)
        cost = np.zeros(k)
        cost[anchor] = 1.0
        h.changeColsCost(k, idx, cost)
        remaining = self.w.deadline - time.perf_counter()
        if remaining <= 0:
            return np.nan, None, "time_limit"
        h.setOptionValue("time_limit", float(h.getRunTime() + remaining))
        h.run()
        status = h.getModelStatus()
        if status == _MS.kUnbounded:
            return np.inf, None, "optimal"
        if status != _MS.kOptimal:
            return np.nan, None, "time_limit" if status == _MS.kTimeLimit else "error"
        y = np.asarray(h.getSolution().row_dual)
        return h.getInfo().objective_function_value, y, "optimal"

    # -- magnitude rules -------------------------------------------------------------

    def magnitude(self, k: int, near: np.ndarray):
        """Screen, witnesses, then the MIP, for slot-form rule ``k``."""
        w = self.w
        form = w.forms[k]
        idx = self.members
        multi = self._spanning()
        if not multi:
            top = w.top[idx]
            b = np.asarray(form.b)
            omega = -form.tau * w.resp.total[idx] - top[:, :len(b) - 1] @ b[1:]
            tol = _TIE_RTOL * w.scale[k, idx]
            omega = np.where(np.abs(omega) <= tol, 0.0, omega)
            omega[self.unknown] = np.inf
            if (omega >= 0).all():
                certified = True
                for anchor in np.flatnonzero(near).tolist():
                    lower, upper = -omega.copy(), omega.copy()
                    lower[anchor], upper[anchor] = -np.inf, np.inf
                    rho, prices, status = self._reach(anchor, lower, upper)
                    if status != "optimal":
                        w.why.add(f"screen LP: {status}")
                        return "undecided", None, "screen"
                    s_i = w.measure[k, idx[anchor]]
                    margin = tol[anchor] if not form.inclusive else -tol[anchor]
                    if s_i - rho < margin:
                        continue
                    certified = False
                    if prices is not None:
                        witness = self._judge(prices, "screen")
                        if witness is not None:
                            return "sensitive", witness, "screen"
                if certified:
                    return "safe", None, "screen"
        return self._mip(k, near)

    def _spanning(self) -> bool:
        """Whether a respondent contributes to two cells of the group."""
        r = self.w.resp
        if r.distinct:
            return False
        inside = np.isin(r.cell, self.members)
        ids = r.rid[inside]
        return len(np.unique(ids)) < len(ids)

    def _mip(self, k: int, near: np.ndarray):
        """Seed 002 section 6 in slot form (module docstring); returns (status, witness,
        "mip")."""
        w = self.w
        form = w.forms[k]
        idx = self.members
        n, n_rel = len(idx), self.sub.shape[0]
        P = np.flatnonzero(near)
        N = np.flatnonzero(~near)
        scale = max(float(w.resp.total[idx].max(initial=0.0)), 1e-12)
        total = w.resp.total[idx] / scale
        s_cell = w.measure[k, idx] / scale
        D = max(float(s_cell[P].max(initial=0.0)), 1e-9)
        cap = np.ones(n)
        with np.errstate(divide="ignore"):
            cap[N] = D / (-s_cell[N])
        cap[self.unknown] = 0.0

        # Candidate respondents: the m largest single-cell respondents of each cell, and
        # every respondent spanning cells.
        r = w.resp
        m_slots = len(form.b)
        inside = np.isin(r.cell, idx)
        pos = np.full(len(w.cells), -1)
        pos[idx] = np.arange(n)
        cell_l, rid, amt = pos[r.cell[inside]], r.rid[inside], r.amount[inside] / scale
        uniq, inv, cnt = np.unique(rid, return_inverse=True, return_counts=True)
        spans = cnt[inv] > 1
        order = np.lexsort((-amt, cell_l))
        rank = np.empty(len(order), np.int64)
        sc = cell_l[order]
        rank[order] = np.arange(len(order)) - np.searchsorted(sc, sc, side="left")
        single_top = ~spans & (rank < m_slots)
        cand_of_entry = np.full(len(rid), -1)
        span_ids = np.unique(inv[spans])
        n_span = len(span_ids)
        span_pos = np.full(len(uniq), -1)
        span_pos[span_ids] = np.arange(n_span)
        cand_of_entry[spans] = span_pos[inv[spans]]
        tops = np.flatnonzero(single_top)
        cand_of_entry[tops] = n_span + np.arange(len(tops))
        n_q = n_span + len(tops)
        use = cand_of_entry >= 0
        # X^r = sum_i c_ir w_i, as a (n_q, n) matrix
        c_mat = sp.csr_matrix((amt[use], (cand_of_entry[use], cell_l[use])), shape=(n_q, n))
        big_m = np.asarray(c_mat @ cap).ravel()
        in_p = np.zeros(n, bool)
        in_p[P] = True
        touches_p = np.asarray(c_mat[:, P].sum(axis=1)).ravel() > 0

        # Column layout.
        o_lp, o_ln, o_mu = 0, n, 2 * n
        o_beta = o_mu + n_rel
        o_psi = o_beta + len(P)
        o_z = o_psi + m_slots * n_q
        n_col = o_z + m_slots * n_q
        col_lo = np.zeros(n_col)
        col_hi = np.zeros(n_col)
        col_hi[o_lp:o_lp + n] = cap
        col_hi[o_ln:o_ln + n] = cap
        col_lo[o_mu:o_mu + n_rel] = -np.inf
        col_hi[o_mu:o_mu + n_rel] = np.inf
        col_hi[o_beta:o_beta + len(P)] = 1.0
        col_hi[o_psi:o_z] = np.tile(big_m, m_slots)
        z_hi = np.ones(m_slots * n_q)
        z_hi[:n_q] = touches_p.astype(float)        # slot 1: the attacked, in a sensitive cell
        col_hi[o_z:] = z_hi
        integrality = np.zeros(n_col, dtype=np.int64)
        integrality[o_beta:o_beta + len(P)] = 1
        integrality[o_z:] = 1
        cost = np.zeros(n_col)
        cost[o_lp:o_lp + n] = form.tau * total
        cost[o_ln:o_ln + n] = form.tau * total
        cost[o_psi:o_z] = np.repeat(np.asarray(form.b), n_q)

        rows, row_lo, row_hi = [], [], []

        def add(block_cols, lo, hi):
            rows.append(block_cols)
            row_lo.append(lo)
            row_hi.append(hi)

        eye = sp.identity(n, format="csr")
        # lp - ln - A^T mu = 0
        add(self._cols(n_col, {o_lp: eye, o_ln: -eye, o_mu: -self.sub.T.tocsr()}),
            np.zeros(n), np.zeros(n))
        n_p = len(P)
        sel = sp.csr_matrix((np.ones(n_p), (np.arange(n_p), P)), shape=(n_p, n))
        ep = sp.identity(n_p, format="csr")
        add(self._cols(n_col, {o_lp: sel, o_beta: -ep}), np.full(n_p, -np.inf), np.zeros(n_p))
        add(self._cols(n_col, {o_ln: sel, o_beta: ep}), np.full(n_p, -np.inf), np.ones(n_p))
        ones_p = sp.csr_matrix(np.ones((1, n_p))) @ sel
        add(self._cols(n_col, {o_lp: ones_p, o_ln: ones_p}), np.ones(1), np.ones(1))
        eq = sp.identity(n_q, format="csr")
        for s in range(m_slots):
            ps, zs = o_psi + s * n_q, o_z + s * n_q
            add(self._cols(n_col, {ps: eq, o_lp: -c_mat, o_ln: -c_mat}),
                np.full(n_q, -np.inf), np.zeros(n_q))
            add(self._cols(n_col, {ps: eq, zs: -sp.diags(big_m).tocsr()}),
                np.full(n_q, -np.inf), np.zeros(n_q))
            add(self._cols(n_col, {zs: sp.csr_matrix(np.ones((1, n_q)))}),
                np.full(1, -np.inf), np.ones(1))
        add(self._cols(n_col, {o_z + s * n_q: eq for s in range(m_slots)}),
            np.full(n_q, -np.inf), np.ones(n_q))
        tol = _TIE_RTOL * (1.0 - form.tau)
        floor = -tol if form.inclusive else tol
        add(sp.csr_matrix(cost[None, :]), np.full(1, floor), np.full(1, np.inf))
        a_all = sp.vstack(rows, format="csc")
        lo = np.concatenate(row_lo)
        hi = np.concatenate(row_hi)

        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_col, a_all.shape[0]
        lp.col_cost_ = cost
        lp.col_lower_ = col_lo
        lp.col_upper_ = col_hi
        lp.row_lower_ = lo
        lp.row_upper_ = hi
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = a_all.indptr.astype(np.int32)
        lp.a_matrix_.index_ = a_all.indices.astype(np.int32)
        lp.a_matrix_.value_ = a_all.data.astype(float)
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.integrality_ = [highspy.HighsVarType.kInteger if v else highspy.HighsVarType.kContinuous
                           for v in integrality]
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_max_improving_sols", 1)
        remaining = w.deadline - time.perf_counter()
        if remaining <= 0:
            w.why.add("time limit reached")
            return "undecided", None, "mip"
        h.setOptionValue("time_limit", float(remaining))
        h.passModel(lp)
        h.run()
        w.mip_solves += 1
        status = h.getModelStatus()
        if status == _MS.kInfeasible:
            return "safe", None, "mip"
        x = np.asarray(h.getSolution().col_value) if h.getInfo().primal_solution_status else None
        if x is not None and len(x) == n_col:
            witness = self._judge(x[o_mu:o_mu + n_rel], "mip")
            if witness is not None:
                return "sensitive", witness, "mip"
        # A time limit, or a point the exact rule does not confirm (the request rule and
        # waivers are over-approximated in the MIP, or round-off), leaves the group
        # undecided, never safe.
        w.why.add("time limit reached in the MIP" if status == _MS.kTimeLimit else
                  f"MIP ended with {h.modelStatusToString(status)!r} at a point the rule "
                  "does not confirm")
        return "undecided", None, "mip"

    @staticmethod
    def _cols(n_col: int, blocks: dict) -> sp.csr_matrix:
        """A block row: ``blocks`` maps a column offset to the matrix placed there."""
        n_rows = next(iter(blocks.values())).shape[0]
        parts = []
        for off, mat in blocks.items():
            coo = sp.coo_matrix(mat)
            parts.append((coo.data, coo.row, coo.col + off))
        data = np.concatenate([p[0] for p in parts])
        r = np.concatenate([p[1] for p in parts])
        c = np.concatenate([p[2] for p in parts])
        return sp.csr_matrix((data, (r, c)), shape=(n_rows, n_col))

    # -- frequency rules -----------------------------------------------------------------

    def frequency(self, k: int, small: np.ndarray):
        """Aggregations with fewer respondents than the rule's ``n`` (module docstring)."""
        w = self.w
        n_min = w.rules[k].n
        count = w.resp.count[self.members]
        positive = small & (count > 0)
        zero = small & (count <= 0)
        budget = _MAX_SUPPORTS
        for anchor in np.flatnonzero(positive).tolist():
            within = small.copy()
            exists, prices, status = self._support_exists(anchor, within)
            if status != "optimal":
                w.why.add(f"support LP: {status}")
                return "undecided", None
            if not exists:
                continue   # no aggregation within the small cells involves the anchor
            if prices is not None:
                witness = self._judge(prices, "support")
                if witness is not None:
                    return "sensitive", witness
            # Supports with fewer than n respondents: the anchor, any zero cells and a few
            # other small cells.
            others = np.flatnonzero(positive)
            others = others[others != anchor]
            for size in range(0, n_min):
                for combo in itertools.combinations(others.tolist(), size):
                    budget -= 1
                    if budget < 0:
                        w.why.add(f"more than {_MAX_SUPPORTS} supports to enumerate")
                        return "undecided", None
                    chosen = np.array([anchor, *combo])
                    if count[chosen].sum() >= n_min and w.resp.distinct:
                        continue
                    within = zero.copy()
                    within[chosen] = True
                    exists, prices, status = self._support_exists(anchor, within)
                    if status != "optimal":
                        w.why.add(f"support LP: {status}")
                        return "undecided", None
                    if exists and prices is not None:
                        witness = self._judge(prices, "support")
                        if witness is not None:
                            return "sensitive", witness
        return "safe", None

    def _support_exists(self, anchor: int, within: np.ndarray):
        """Whether an aggregation supported in ``within`` involves ``anchor``: it does
        unless a deviation moves the anchor while the rest of ``within`` stays fixed."""
        k = len(self.members)
        within = within & ~self.unknown
        # Cells outside ``within`` are free, so the row prices give an aggregation that is
        # zero there (their reduced costs vanish); the anchor's bound keeps the LP bounded.
        lower = np.full(k, -np.inf)
        upper = np.full(k, np.inf)
        lower[within], upper[within] = 0.0, 0.0
        lower[anchor], upper[anchor] = -1.0, 1.0
        value, prices, status = self._reach(anchor, lower, upper)
        if status != "optimal":
            return False, None, status
        return value < 0.5, prices, status




class Requirements:
    """What protecting a cell against aggregations asks of the other cells, for the
    suppression methods (:mod:`service.sdc.suppress`).

    The screen of :func:`check_aggregations` certifies a sensitive cell ``i`` under a slot
    rule when some deviation ``A z = 0`` of the suppressed cells moves ``i`` by more than its
    measure ``S_i`` while every other cell ``j`` moves by at most ``omega_j`` (module
    docstring). That is a protection requirement of the usual shape, with level ``S_i``
    and room ``omega_j`` both ways instead of the a-priori room, so the fast method meets
    it with the same cheapest-complement LP. Under a frequency rule the requirement is
    that ``i`` can move while the cells below the threshold stay fixed (room 0).
    """

    def __init__(self, source: UnionSource):
        n = source.cells.n_cells
        self.source = source
        self.rules = source.ruleset.effective_rules()
        resp = _respondents(source, np.arange(n))
        forms = [slot_form(r) for r in self.rules]
        depth = max([1] + [len(f.b) for f in forms if f is not None])
        top = resp.top(depth)
        self.measure = np.full((len(self.rules), n), -np.inf)
        self.room = np.zeros((len(self.rules), n))
        for k, (rule, form) in enumerate(zip(self.rules, forms)):
            if form is None:
                self.measure[k] = np.where(resp.count > 0, rule.n - resp.count, -np.inf)
                self.room[k] = np.where(resp.count < rule.n - 1e-9, 0.0, np.inf)
                continue
            b = np.asarray(form.b)
            self.measure[k] = form.tau * resp.total + top[:, :len(b)] @ b
            omega = -form.tau * resp.total - top[:, :len(b) - 1] @ b[1:]
            self.room[k] = np.maximum(omega, 0.0)
        # Aggregations through cells of unknown magnitudes are not judged (check_aggregations):
        # such a cell is free in the screen, so it may absorb any deviation here too.
        if source.known is not None:
            self.room[:, ~np.asarray(source.known, bool)] = np.inf
        self.frequency = np.array([f is None for f in forms])
        self.scale = np.maximum(resp.total, 1.0)

    def of(self, aggregation: Aggregation) -> tuple[int, float, np.ndarray]:
        """``(cell, level, room)``: the member the aggregation attacks (the largest own
        measure under its rule) and what protecting it against the screen takes."""
        k = aggregation.rule
        cells = aggregation.cells
        anchor = int(cells[np.argmax(self.measure[k, cells])])
        room = self.room[k].copy()
        room[anchor] = np.inf
        if self.frequency[k]:
            level = 1e-4 * max(1.0, abs(float(self.source.cells.value[anchor])))
        else:
            s = float(self.measure[k, anchor])
            # Strictly beyond the measure, by more than the screen's tie tolerance.
            level = s + max(1e-6 * abs(s), 1e-6 * self.scale[anchor])
        return anchor, level, room
