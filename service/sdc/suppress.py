"""Secondary cell suppression: the cheapest further suppressions that protect every
sensitive cell, and the audit that proves it.

Model (seed 000 "Secondary tabular data protection methods"; seed 003 B.2.b; Fischetti and
Salazar 2000 as cited there). A table ``A x = 0`` with true values ``a``, a-priori bounds
``lb <= x <= ub``, sensitive cells ``P`` with upper and lower protection levels ``UPL_i``,
``LPL_i``, and a cost ``c_j`` per cell. A pattern ``y in {0,1}^n`` protects cell ``i`` when
an intruder who knows the published cells can neither rule out ``x_i >= a_i + UPL_i`` nor
``x_i <= a_i - LPL_i``: with deviations ``z = x - a``,

    max / min  z_i   s.t.  A z = 0,  -y_j D_j <= z_j <= y_j U_j                 (attacker)

must reach ``UPL_i`` and ``-LPL_i``, where ``U_j = ub_j - a_j`` and ``D_j = a_j - lb_j`` are
the room a suppressed cell has. By LP duality the attacker's maximum for a given ``y`` is at
most ``sum_j y_j (U_j max(0, r_j) + D_j max(0, -r_j))`` for *any* row prices ``g``, with
``r = e_i - A^T g``; so every ``g`` yields the valid inequality (a Benders / "capacity" cut)

    sum_j (U_j max(0, r_j) + D_j max(0, -r_j)) y_j >= UPL_i,

and the optimal ``g`` of the attacker LP at a pattern that fails makes it violated there.

Methods
-------
``fast``
    Cells are protected one at a time, largest first (seed 003 B.2.b: "protecting the
    sensitive cells one at a time by a cheapest complementary set found by linear
    programming"): for cell ``i`` and each direction one LP finds a deviation ``z`` with
    ``z_i`` at the protection level whose support is cheapest, each unit of ``|z_j|``
    priced ``c_j / level`` (0 for cells already suppressed). The support is suppressed; the
    deviation stays feasible for the final pattern, so the cell stays protected. Then
    suppressions that turned out superfluous are removed, most expensive first, as long as
    every sensitive cell stays protected (time permitting).
``exact``
    The mixed-integer model of Fischetti and Salazar: ``min c y`` with ``y = 1`` on
    sensitive and forced cells, ``y = 0`` on forbidden ones, and the capacity cuts above
    added as the attacker LPs find them violated (never enumerated up front). Started from
    the ``fast`` pattern as incumbent; with a time limit it returns the best safe pattern
    and the proven gap.

Both then check the implicitly published unions (:mod:`service.sdc.unions`, seed 002
sections 3-5); a sensitive union in relation ``k`` is removed by suppressing one more cell
of ``k`` (the cheapest allowed one for ``fast``; for ``exact`` a no-good cut "this exact set
of suppressed cells in ``k`` is not allowed"). Every returned pattern has passed
:func:`service.sdc.audit.audit_pattern`; one that does not is never reported as a success.

Readings
--------
* Zero cells are never complements (seed 003 B.2: a zero cell protects nothing under
  subadditive rules, and its interval would reveal the zero); neither are cells the caller
  forbids. Sensitive zero cells are still suppressed.
* A sensitive cell whose protection levels are both 0 (frequency rules without a range)
  must at least not be disclosed exactly: it is given an upper level of
  ``1e-4 max(1, |a_i|)``, above the audit's exactness tolerance.
* Protection levels beyond the a-priori range (``LPL_i > a_i - lb_i``) are capped at it:
  no pattern can leave an intruder less certain than the bounds already do.
* Unbounded room (``ub = inf``) is capped at ``2 max |a| + max UPL``: an intruder's room can
  only be larger, so the cap can make a pattern more cautious, never less safe; the audit
  is run with the true bounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from .aggregations import Requirements, check_aggregations
from .audit import PatternAudit, audit_pattern, limit_run
from .errors import InputError

COST_KINDS = ("value", "unity", "contributors", "log", "weights")
METHODS = ("fast", "exact")
_MS = highspy.HighsModelStatus
# Deviations below this share of a protection level do not make a cell a complement.
_SUPPORT_RTOL = 1e-7
# Attacker reach within this relative tolerance of the level counts as reaching it.
_REACH_RTOL = 1e-7
_MIN_LEVEL_RTOL = 1e-4


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
            raise InputError("cost 'contributors' needs the cells' contributors",
                             field="cost")
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


@dataclass(frozen=True)
class SuppressionResult:
    """A suppression pattern and how it was found.

    Attributes
    ----------
    suppressed : numpy.ndarray of bool
        Primary and secondary suppressions (``None``-free: all False when no safe pattern).
    secondary : numpy.ndarray of bool
        Suppressed cells that are not sensitive.
    method : {"fast", "exact"}
    status : {"optimal", "feasible", "time_limit", "no_safe_pattern"}
        ``optimal``: exact and proven; ``feasible``: the fast method's safe pattern;
        ``time_limit``: the time ran out. With a pattern (``safe``), exact stopped early
        and returns its best audited pattern with ``gap``; without one (``suppressed`` all
        False), no safe pattern was reached or certified in time and ``unprotected`` lists
        the sensitive cells left unprotected (``message`` says why): the table may well
        have a safe pattern. ``no_safe_pattern``: none exists within the caller's
        constraints, or the pattern found failed the audit (``message`` says why).
    objective : float
        Cost of the pattern's suppressions (all suppressed cells).
    lower_bound : float
        Proven lower bound on the optimal cost (exact method), else nan.
    audit : PatternAudit
        The audit of the returned pattern.
    message : str
    seconds : float
    iterations : int
        Master solves (exact) or protection LPs (fast).
    unprotected : numpy.ndarray of int
        With no pattern returned: the sensitive cells not protected (or not proven
        protected in time) by the pattern the search had reached, sorted; empty otherwise.
    """

    suppressed: np.ndarray
    secondary: np.ndarray
    method: str
    status: str
    objective: float
    lower_bound: float
    audit: PatternAudit | None
    message: str
    seconds: float
    iterations: int
    unprotected: np.ndarray | None = None

    def __post_init__(self):
        cells = () if self.unprotected is None else self.unprotected
        object.__setattr__(self, "unprotected", np.unique(np.asarray(cells, np.int64)))

    @property
    def gap(self) -> float:
        """Relative gap between the pattern's cost and the proven lower bound."""
        if not np.isfinite(self.lower_bound):
            return float("nan")
        return max(0.0, self.objective - self.lower_bound) / max(self.objective, 1e-12)

    @property
    def safe(self) -> bool:
        return self.audit is not None and self.audit.safe


@dataclass
class _Problem:
    a: sp.csr_matrix
    values: np.ndarray
    sensitive: np.ndarray
    upl: np.ndarray
    lpl: np.ndarray
    room_up: np.ndarray     # U_j, capped
    room_down: np.ndarray   # D_j
    cost: np.ndarray
    allowed: np.ndarray     # may be a complement
    forced: np.ndarray
    lower_bounds: np.ndarray
    upper_bounds: np.ndarray
    deadline: float


class _Attacker:
    """The attacker LP in HiGHS over the cells a pattern suppresses (and the relations that
    touch them): published cells cannot move, so they need no column. A pattern within the
    model's columns only changes column bounds and an attack only the costs, so every solve
    starts from the last basis; a pattern reaching beyond them rebuilds the model."""

    def __init__(self, p: _Problem):
        self.p = p
        self.n = p.a.shape[1]
        self.a_csc = p.a.tocsc()
        self.cols = np.zeros(0, dtype=np.int64)
        self.position = np.full(self.n, -1, dtype=np.int64)
        self.rows = np.zeros(0, dtype=np.int64)
        self.h = None
        self.pattern = np.zeros(self.n)

    def _build(self, cols: np.ndarray, y: np.ndarray) -> None:
        sub = self.a_csc[:, cols]
        self.rows = np.flatnonzero(np.diff(sub.tocsr().indptr) > 0)
        sub = sub[self.rows].tocsc()
        m, k = sub.shape
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = k, m
        lp.col_cost_ = np.zeros(k)
        lp.col_lower_ = -y[cols] * self.p.room_down[cols]
        lp.col_upper_ = y[cols] * self.p.room_up[cols]
        lp.row_lower_ = np.zeros(m)
        lp.row_upper_ = np.zeros(m)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = sub.indptr.astype(np.int32)
        lp.a_matrix_.index_ = sub.indices.astype(np.int32)
        lp.a_matrix_.value_ = sub.data.astype(float)
        lp.sense_ = highspy.ObjSense.kMaximize
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.h.setOptionValue("presolve", "off")
        self.h.setOptionValue("solver", "simplex")
        self.h.setOptionValue("simplex_strategy", 4)   # primal: see service.sdc.audit
        self.h.passModel(lp)
        self.cols = cols
        self.position[:] = -1
        self.position[cols] = np.arange(len(cols))
        self.costed = (-1, 0.0)

    def set_pattern(self, y: np.ndarray) -> None:
        """Room ``y_j U_j`` up and ``y_j D_j`` down; ``y`` may be fractional (the LP
        relaxation of the master is separated with the same attacker)."""
        y = np.asarray(y, dtype=float)
        support = np.flatnonzero(y > 0)
        if self.h is None or (self.position[support] < 0).any():
            self._build(support, y)
        else:
            changed = np.flatnonzero(y != self.pattern)
            if changed.size:
                self.h.changeColsBounds(len(changed), self.position[changed].astype(np.int32),
                                        -y[changed] * self.p.room_down[changed],
                                        y[changed] * self.p.room_up[changed])
        self.pattern = y.copy()

    def reach(self, i: int, sense: float) -> tuple[float, np.ndarray | None, str]:
        """``max sense * z_i`` under the current pattern, the row prices, the outcome."""
        # Always maximise, with cost +-1 on the attacked cell: only costs change between
        # solves, so the last basis stays primal feasible for the primal simplex.
        i_col = int(self.position[i])
        if self.costed != (i_col, sense):
            idx = [i_col] if self.costed[0] in (-1, i_col) else [self.costed[0], i_col]
            costs = [sense] if len(idx) == 1 else [0.0, sense]
            self.h.changeColsCost(len(idx), np.array(idx, dtype=np.int32), np.array(costs))
            self.costed = (i_col, sense)
        remaining = self.p.deadline - time.perf_counter()
        if remaining <= 0:
            return np.nan, None, "time_limit"
        limit_run(self.h, remaining)
        self.h.run()
        status = self.h.getModelStatus()
        if status == _MS.kOptimal:
            value = self.h.getInfo().objective_function_value
            prices = np.zeros(self.p.a.shape[0])   # rows off the model touch no room: 0
            prices[self.rows] = self.h.getSolution().row_dual
            return value, prices, "optimal"
        if status == _MS.kUnbounded:
            return np.inf, None, "optimal"
        if status == _MS.kTimeLimit:
            return np.nan, None, "time_limit"
        return np.nan, None, self.h.modelStatusToString(status)

    def support(self) -> np.ndarray:
        """Cells the last optimal attack moves: only their removal can stop it."""
        z = np.asarray(self.h.getSolution().col_value)
        return self.cols[np.abs(z) > 1e-9 * max(1.0, np.abs(z).max(initial=0.0))]

    def cut(self, i: int, sense: float, prices: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Coefficients of the capacity cut for cell ``i``: of the two sign conventions of
        the row prices, the one whose bound is tightest at ``y`` (both are valid)."""
        best, best_lhs = None, np.inf
        for g in (prices, -prices):
            r = -(self.p.a.T @ g)
            r[i] += sense
            # r = sense e_i - A^T g already carries the direction (module docstring).
            coef = self.p.room_up * np.maximum(0.0, r) + self.p.room_down * np.maximum(0.0, -r)
            lhs = coef @ y
            if lhs < best_lhs:
                best, best_lhs = coef, lhs
        return best


def _levels(p: _Problem) -> list[tuple[int, float, float]]:
    """(cell, direction, level) of every protection requirement, largest cells first."""
    order = np.flatnonzero(p.sensitive)
    order = order[np.argsort(-np.abs(p.values[order]), kind="stable")]
    out = []
    for i in order.tolist():
        out.append((i, 1.0, p.upl[i]))
        if p.lpl[i] > 0:
            out.append((i, -1.0, p.lpl[i]))
    return out


def _unprotected(att: _Attacker, p: _Problem, y: np.ndarray):
    """The requirements the pattern ``y`` misses: (cell, direction, level, prices)."""
    att.set_pattern(y)
    missing = []
    for i, sense, level in _levels(p):
        value, prices, outcome = att.reach(i, sense)
        if outcome != "optimal":
            return None, outcome
        if value < level - _REACH_RTOL * max(1.0, level, abs(p.values[i])):
            missing.append((i, sense, level, prices))
    return missing, "optimal"


def _prepare(relations, values, sensitive, upper_protection, lower_protection, cost,
             forbidden, forced, lower_bounds, upper_bounds, deadline) -> _Problem:
    a = sp.csr_matrix(getattr(relations, "relations", relations), dtype=float)
    n = a.shape[1]
    x = np.asarray(values, dtype=float)
    vec = lambda v, d: np.broadcast_to(np.asarray(d if v is None else v, dtype=float),  # noqa: E731
                                       (n,)).copy()
    sens = np.asarray(sensitive, dtype=bool)
    upl, lpl = vec(upper_protection, 0.0), vec(lower_protection, 0.0)
    upl = np.where(sens, upl, 0.0)
    lpl = np.where(sens, lpl, 0.0)
    floor = _MIN_LEVEL_RTOL * np.maximum(1.0, np.abs(x))
    upl = np.where(sens & (upl + lpl <= 0), floor, upl)
    lb, ub = vec(lower_bounds, 0.0), vec(upper_bounds, np.inf)
    cap = 2.0 * np.abs(x).max(initial=0.0) + upl.max(initial=0.0) + 1.0
    room_up = np.minimum(ub - x, cap)
    room_down = np.minimum(x - lb, cap)
    if (room_up < 0).any() or (room_down < 0).any():
        j = int(np.flatnonzero((room_up < 0) | (room_down < 0))[0])
        raise InputError(f"cell {j} lies outside its a-priori bounds", field="lower_bound", cell=j)
    # No intruder is less certain than the a-priori range: levels beyond it are capped.
    upl = np.minimum(upl, np.minimum(ub - x, np.inf))
    lpl = np.minimum(lpl, x - lb)
    forbidden = np.zeros(n, bool) if forbidden is None else np.asarray(forbidden, bool)
    forced = np.zeros(n, bool) if forced is None else np.asarray(forced, bool)
    both = forbidden & (forced | sens)
    if both.any():
        j = int(np.flatnonzero(both)[0])
        raise InputError("a cell cannot be both forbidden and sensitive or forced",
                         field="forbid", cell=j)
    allowed = ~forbidden & (x != 0)
    return _Problem(a, x, sens, upl, lpl, room_up, room_down, np.asarray(cost, float),
                    allowed | sens | forced, forced | sens, lb, ub, deadline)


def suppress(relations, values, sensitive, upper_protection, lower_protection, *, cost,
             forbidden=None, forced=None, lower_bounds=0.0, upper_bounds=np.inf,
             unions=None, method: str = "fast", time_limit: float = 60.0,
             tolerance: float = 0.0) -> SuppressionResult:
    """Choose secondary suppressions that protect every sensitive cell.

    Parameters
    ----------
    relations : scipy.sparse matrix or Table or LinkedTables
    values : array_like, shape (n_cells,)
        True cell values (additive).
    sensitive : array_like of bool
    upper_protection, lower_protection : array_like
        Protection levels (seed 000, table "Upper protection levels").
    cost : array_like
        Per-cell cost (:func:`cell_costs`).
    forbidden, forced : array_like of bool, optional
        Cells that may not be suppressed (key figures) / must be.
    lower_bounds, upper_bounds : float or array_like
        A-priori bounds of the intruder (default non-negativity).
    unions : service.sdc.unions.UnionSource, optional
        To check the implicitly published unions of the pattern.
    method : {"fast", "exact"}
    time_limit : float
        Seconds for the whole call, audit included.
    tolerance : float
        Additivity tolerance, passed to the audit.

    Returns
    -------
    SuppressionResult
    """
    start = time.perf_counter()
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; one of {', '.join(METHODS)}",
                         field="method")
    if not time_limit > 0:
        raise InputError("time_limit must be > 0 seconds", field="time_limit")
    # ``time_limit`` is the whole call: it ends at ``end``. The final audit (every interval
    # and every aggregation; it can take longer than finding the pattern) keeps a quarter
    # of it: the search stops at ``p.deadline``, and the audit gets all that is left.
    audit_share = 0.25
    end = start + time_limit
    deadline = start + (1.0 - audit_share) * time_limit
    p = _prepare(relations, values, sensitive, upper_protection, lower_protection, cost,
                 forbidden, forced, lower_bounds, upper_bounds, deadline)
    att = _Attacker(p)
    cheapest = _Cheapest(p)
    y, status, message, iters, witness = _fast(p, att, cheapest)
    lower_bound = np.nan

    def done(y, status, message, **how) -> SuppressionResult:
        return _finish(p, att, relations, y, status, message, lower_bound, iters, unions,
                       method, start, end, tolerance, **how)

    if y is None:
        return done(None, status, message, partial=witness if status == "time_limit" else None)
    # The clean-up re-solves attacks per candidate and can cost far more than finding
    # the pattern: it gets a quarter of the protection phase's time plus 2 s, most
    # expensive cells first, so the largest savings come early (100 x 100 hierarchical
    # table, 1,036 primaries: 20 s protection; a clean-up as long again saved 0.6% more
    # of the cost), and at most half the search time left, which the protection of the
    # aggregations needs after it. Under "exact" it only seeds the MIP.
    now = time.perf_counter()
    spent = now - start
    share = 0.3 if method == "exact" else 0.8
    until = min(now + 0.5 * (p.deadline - now), start + share * time_limit,
                start + 1.25 * spent + 2.0)
    y = _remove_superfluous(p, att, y, witness, until)
    # The exact method's incumbent must be safe in every respect (see _exact).
    protected, why = _protect_aggregations(p, relations, y, unions, cheapest)
    if protected is None:
        if not why.startswith("time limit"):
            return done(None, "no_safe_pattern", why)
        # Out of time: the audit may still prove the pattern safe, else it names the
        # cells left unprotected.
        return done(y, status, message, unfinished=why)
    y = protected
    if method == "fast":
        return done(y, status, message)
    # Exact: the incumbent is audited before the MIP, so a better pattern the MIP finds
    # but the audit cannot certify in time falls back to it; the MIP stops early enough
    # for an audit like this one (twice its time) or the reserved share, if longer.
    begun = time.perf_counter()
    first = audit_pattern(relations, p.values, y, p.sensitive, p.upl, p.lpl,
                          p.lower_bounds, p.upper_bounds, unions=unions,
                          time_limit=max(end - begun, 1e-3), tolerance=tolerance)
    known = (y, first)
    if first.verdict == "uncertified":
        return done(y, status, message, known=known)
    p.deadline = min(p.deadline, end - max(audit_share * time_limit,
                                           2.0 * (time.perf_counter() - begun)))
    if time.perf_counter() >= p.deadline:
        return done(y, "time_limit", "time limit reached before the MIP could start; the "
                    "fast method's pattern is returned", known=known)
    y, status, message, lower_bound, iters = _exact(p, att, y, relations, unions)
    return done(y, status, message, known=known)


def _finish(p, att, relations, y, status, message, lower_bound, iters, unions, method, start,
            end, tolerance, *, partial=None, unfinished=None, known=None
            ) -> SuppressionResult:
    """The result: ``y`` returned only if it passed the full audit, run with the time left
    until ``end`` (or taken from ``known``, an audited ``(pattern, audit)``, for that same
    pattern; a safe ``known`` pattern is the fallback when ``y`` fails).

    ``partial``: the fast method ran out protecting (``(pattern, requirements left)``, see
    :func:`_fast`); the requirements left are checked against the partial pattern until
    ``end`` to say which cells it leaves unprotected. ``unfinished``: why the protection
    of ``y`` stopped short of the end (time); a ``y`` the audit then rejects is a time
    limit, not a failure of the table."""
    n = len(p.values)
    none = np.zeros(n, bool)

    def result(y, status, message, audit=None, unprotected=None):
        return SuppressionResult(y, y & ~p.sensitive, method, status, float(p.cost @ y),
                                 lower_bound, audit, message, time.perf_counter() - start,
                                 iters, unprotected)

    if y is None and partial is None:
        return result(none, status, message)
    if y is None:
        pattern, todo = partial
        p.deadline = end
        att.set_pattern(pattern)
        short, unchecked = set(), set()
        for i, sense, level in todo:
            if i in short or i in unchecked:
                continue
            value, _, outcome = att.reach(i, sense)
            if outcome != "optimal":
                unchecked.add(i)
            elif value < level - _REACH_RTOL * max(1.0, level, abs(p.values[i])):
                short.add(i)
        unchecked -= short
        cells = short | unchecked
        total = int(p.sensitive.sum())
        return result(none, "time_limit", (
            f"time limit reached before every sensitive cell was protected: the pattern "
            f"reached protects {total - len(cells)} of {total} sensitive cells; "
            f"{len(short)} need further suppressions"
            + (f" and {len(unchecked)} could not be checked in time" if unchecked else "")
            + " (see 'unprotected'); no pattern is returned; a longer time limit may "
            "find one"), unprotected=sorted(cells))
    if known is not None and np.array_equal(known[0], y):
        audit = known[1]
    else:
        audit = audit_pattern(relations, p.values, y, p.sensitive, p.upl, p.lpl,
                              p.lower_bounds, p.upper_bounds, unions=unions,
                              time_limit=max(end - time.perf_counter(), 1e-3),
                              tolerance=tolerance)
    if audit.safe:
        if unfinished is not None:
            message = f"{unfinished}, but the audit proved the pattern safe"
        return result(y, status, message, audit)
    reasons = "; ".join(audit.reasons)
    late = audit.verdict == "uncertified"
    if known is not None and known[1].safe:
        # Never a pattern that did not pass; the audited incumbent did.
        return result(known[0], "time_limit" if late else "feasible",
                      "the MIP's better pattern " + (
                          "could not be certified in time" if late else
                          f"did not pass the audit ({reasons})")
                      + "; the audited pattern of the fast method is returned", known[1])
    # The sensitive cells the audit does not prove protected: published, an interval too
    # narrow or not certified, or in a sensitive or undecided aggregation.
    iv, check = audit.intervals, audit.protection
    unprotected = set(audit.published_sensitive.tolist())
    if check is not None and audit.verdict != "infeasible":
        unprotected.update(iv.cells[check.sensitive & ~(iv.certified & check.protected)]
                           .tolist())
    if audit.aggregations is not None:
        for found in audit.aggregations.found:
            members = found.cells[p.sensitive[found.cells]]
            unprotected.update((members if members.size else found.cells).tolist())
        undecided = np.asarray(audit.aggregations.undecided, np.int64)
        unprotected.update(undecided[p.sensitive[undecided]].tolist())
    unprotected = sorted(unprotected)
    if late:
        return result(none, "time_limit", "time limit reached certifying the pattern found: "
                      f"the audit's verdict is uncertified ({reasons}); no pattern is "
                      "returned", audit, unprotected)
    if unfinished is not None and audit.verdict == "unsafe":
        return result(none, "time_limit", f"{unfinished}: the pattern reached does not pass "
                      f"the audit ({reasons}); no pattern is returned", audit, unprotected)
    # Never a pattern that did not pass: the audit of the rejected one says why.
    return result(none, "no_safe_pattern", "the pattern found did not pass the audit: "
                  + reasons, audit, unprotected)


class _Cheapest:
    """The cheapest-complement LP of the fast method (module docstring): a deviation
    ``z = up - down`` with ``A z = 0`` that moves one cell by its level, each unit of
    ``|z_j|`` priced ``c_j / level`` (nearly free for cells already suppressed); its support
    is what to suppress. One HiGHS model; a requirement changes costs and bounds only."""

    def __init__(self, p: _Problem):
        self.p = p
        n, n_rows = len(p.values), p.a.shape[0]
        self.n = n
        self.model = highspy.Highs()
        self.model.setOptionValue("output_flag", False)
        a_t = p.a.tocsc()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = 2 * n, n_rows
        lp.col_cost_ = np.zeros(2 * n)
        lp.col_lower_ = np.zeros(2 * n)
        lp.col_upper_ = np.zeros(2 * n)
        lp.row_lower_ = np.zeros(n_rows)
        lp.row_upper_ = np.zeros(n_rows)
        both = sp.hstack([a_t, -a_t], format="csc")
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = both.indptr.astype(np.int32)
        lp.a_matrix_.index_ = both.indices.astype(np.int32)
        lp.a_matrix_.value_ = both.data.astype(float)
        self.model.passModel(lp)
        self.model.setOptionValue("solver", "simplex")
        self.columns = np.arange(2 * n, dtype=np.int32)

    def support(self, i: int, sense: float, level: float, y: np.ndarray, room_up: np.ndarray,
                room_down: np.ndarray):
        """Cells of the cheapest deviation moving cell ``i`` by ``level`` in direction
        ``sense`` within the rooms (disallowed cells get none): (cells, outcome) with
        outcome ``optimal``, ``infeasible``, ``time_limit`` or HiGHS's status."""
        p, n = self.p, self.n
        remaining = p.deadline - time.perf_counter()
        if remaining <= 0:
            return None, "time_limit"
        allowed = p.allowed | y
        upper = np.concatenate([np.where(allowed, room_up, 0.0),
                                np.where(allowed, room_down, 0.0)])
        col, opposite = (i, n + i) if sense > 0 else (n + i, i)
        upper[col] = max(level, upper[col])
        upper[opposite] = 0.0                 # else up and down cancel out
        lower = np.zeros(2 * n)
        lower[col] = level
        # Cells already suppressed are nearly free (a little cost keeps the support, the
        # requirement's witness for the clean-up, small).
        unit = np.where(y, 1e-3, 1.0) * (p.cost + 1e-9) / level
        self.model.changeColsCost(2 * n, self.columns, np.concatenate([unit, unit]))
        self.model.changeColsBounds(2 * n, self.columns, lower, upper)
        limit_run(self.model, remaining)
        self.model.run()
        status = self.model.getModelStatus()
        if status == _MS.kInfeasible:
            return None, "infeasible"
        if status != _MS.kOptimal:
            return None, ("time_limit" if status == _MS.kTimeLimit
                          else self.model.modelStatusToString(status))
        z = np.asarray(self.model.getSolution().col_value)
        return np.flatnonzero((z[:n] + z[n:]) > _SUPPORT_RTOL * level), "optimal"


def _fast(p: _Problem, att: _Attacker, cheapest: _Cheapest):
    """Protect one requirement at a time by a cheapest complementary set (module doc).

    Returns (pattern, status, message, protection LPs, witnesses); when the time runs out
    the pattern is ``None``, the status ``time_limit`` and the last item the partial
    pattern with the requirements not yet met or checked, ``(y, [(i, sense, level)])``:
    every earlier requirement is met by that pattern (its deviation stays feasible)."""
    y = p.forced.copy()
    iters = 0
    witness = []
    late = "time limit reached before every sensitive cell was protected"
    levels = _levels(p)
    for k, (i, sense, level) in enumerate(levels):
        att.set_pattern(y)
        reached, _, outcome = att.reach(i, sense)
        if outcome == "time_limit":
            return None, "time_limit", late, iters, (y, levels[k:])
        if outcome == "optimal" and reached >= level - _REACH_RTOL * max(1.0, level):
            # Already protected by earlier suppressions.
            witness.append(att.support() if np.isfinite(reached) else np.flatnonzero(y))
            continue
        used, outcome = cheapest.support(i, sense, level, y, p.room_up, p.room_down)
        iters += 1
        if outcome == "infeasible":
            return None, "no_safe_pattern", (
                f"cell {i} cannot be protected {'upwards' if sense > 0 else 'downwards'} by "
                f"{level:g} with the cells allowed as complements (forbidden, zero cells)"), iters, None
        if outcome == "time_limit":
            return None, "time_limit", late, iters, (y, levels[k:])
        if outcome != "optimal":
            return None, "no_safe_pattern", f"protection LP ended with status {outcome!r}", \
                iters, None
        y[used] = True
        witness.append(used)
    return y, "feasible", "every sensitive cell protected", iters, witness


def _remove_superfluous(p: _Problem, att: _Attacker, y: np.ndarray, witness: list,
                        deadline: float) -> np.ndarray:
    """Drop secondary suppressions, most expensive first, while all stay protected.

    Each requirement keeps the support of an attack that reaches its level (a witness,
    from :func:`_fast`); removing a cell outside every witness cannot stop any attack, so
    only the requirements whose witness uses the cell are solved again."""
    levels = _levels(p)
    witness = list(witness)
    candidates = np.flatnonzero(y & ~p.forced)
    for j in candidates[np.argsort(-p.cost[candidates], kind="stable")].tolist():
        if time.perf_counter() > deadline:
            break   # what is left is safe, only not as lean
        trial = y.copy()
        trial[j] = False
        att.set_pattern(trial)
        renewed, ok = {}, True
        for k, (i, sense, level) in enumerate(levels):
            if j not in witness[k]:
                continue
            if time.perf_counter() > deadline:
                ok = False      # not confirmed in time: the cell stays suppressed
                break
            value, _, outcome = att.reach(i, sense)
            if outcome != "optimal" or value < level - _REACH_RTOL * max(1.0, level,
                                                                        abs(p.values[i])):
                ok = False
                break
            renewed[k] = att.support() if np.isfinite(value) else np.arange(len(y))
        if ok:
            y = trial
            for k, support in renewed.items():
                witness[k] = support
    att.set_pattern(y)
    return y


def _exact(p: _Problem, att: _Attacker, incumbent: np.ndarray, relations, unions):
    """Fischetti-Salazar branch-and-cut by iterated MIP solves with capacity cuts.

    ``incumbent`` must be safe (intervals and unions): it satisfies every cut, so it starts
    each MIP and bounds its objective, and a MIP with nothing at or below that bound
    proves the incumbent optimal.
    """
    n = len(p.values)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, 0
    lp.col_cost_ = p.cost.copy()
    lp.col_lower_ = np.where(p.forced, 1.0, 0.0)
    lp.col_upper_ = np.where(p.allowed, 1.0, 0.0)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.zeros(n + 1, dtype=np.int32)
    h.passModel(lp)
    best = incumbent.copy()
    best_cost = float(p.cost @ best)
    lower = 0.0
    iters = 0
    # A cell alone among suppressed cells in one of its relations is disclosed exactly.
    a = p.a.tocsr()
    for i in np.flatnonzero(p.sensitive).tolist():
        for r in a[:, [i]].nonzero()[0].tolist():
            others = a.indices[a.indptr[r]:a.indptr[r + 1]]
            others = others[others != i]
            h.addRow(1.0, highspy.kHighsInf, len(others), others.astype(np.int32),
                     np.ones(len(others)))
    iters += _root_cuts(h, p, att, n)
    while True:
        remaining = p.deadline - time.perf_counter()
        if remaining <= 0:
            return best, "time_limit", "time limit reached; best safe pattern returned", \
                lower, iters
        limit_run(h, remaining)
        h.setOptionValue("mip_rel_gap", 1e-9)
        # The best safe pattern satisfies every cut: a start for HiGHS, and a bound no
        # better pattern may exceed.
        h.setOptionValue("objective_bound", best_cost + 1e-9 * max(1.0, best_cost))
        start = highspy.HighsSolution()
        start.col_value = best.astype(float)
        h.setSolution(start)
        h.run()
        iters += 1
        status = h.getModelStatus()
        info = h.getInfo()
        if status == _MS.kInfeasible:
            # Nothing satisfies the cuts at a cost within the incumbent's: it is optimal.
            return best, "optimal", "proven optimal", best_cost, iters
        if status not in (_MS.kOptimal, _MS.kTimeLimit):
            return best, "time_limit", f"MIP ended with {h.modelStatusToString(status)}", \
                lower, iters
        lower = max(lower, float(info.mip_dual_bound))
        if status == _MS.kTimeLimit or info.primal_solution_status == 0:
            return best, "time_limit", "time limit reached in the MIP; best safe pattern " \
                "returned", lower, iters
        y = np.asarray(h.getSolution().col_value) > 0.5
        missing, outcome = _unprotected(att, p, y)
        if outcome != "optimal":
            return best, "time_limit", "time limit reached checking a pattern", lower, iters
        if missing:
            _add_cuts(h, att, missing, y.astype(float))
            continue
        check = _check(p, relations, y, unions)
        if check is not None and check.status == "undecided":
            return best, "time_limit", "time limit reached checking the aggregations of " \
                "a pattern", lower, iters
        if check is None or check.status != "sensitive":
            cost = float(p.cost @ y)
            if cost <= best_cost + 1e-9:
                best, best_cost = y, cost
            return best, "optimal", "proven optimal", min(lower, best_cost), iters
        for idx, coef, rhs in _aggregation_no_goods(p, y, check):
            h.addRow(rhs, highspy.kHighsInf, len(idx), idx.astype(np.int32), coef)


def _add_cuts(h: highspy.Highs, att: _Attacker, missing, y: np.ndarray) -> None:
    for i, sense, level, prices in missing:
        coef = att.cut(i, sense, prices, y)
        nz = np.flatnonzero(coef > 1e-12)
        h.addRow(level, highspy.kHighsInf, len(nz), nz.astype(np.int32), coef[nz])


def _root_cuts(h: highspy.Highs, p: _Problem, att: _Attacker, n: int,
               max_rounds: int = 200) -> int:
    """Cutting planes on the LP relaxation of the master before any branching: the
    attacker LP with fractional room ``y_j U_j`` separates capacity cuts just as for a
    0/1 pattern, and a strong root bound is what lets the MIP close the gap."""
    cont = np.arange(n, dtype=np.int32)
    h.changeColsIntegrality(n, cont, np.array([highspy.HighsVarType.kContinuous] * n))
    rounds = 0
    try:
        for rounds in range(1, max_rounds + 1):
            remaining = p.deadline - time.perf_counter()
            if remaining <= 0:
                break
            limit_run(h, remaining)
            h.run()
            if h.getModelStatus() != _MS.kOptimal:
                break
            y = np.clip(np.asarray(h.getSolution().col_value), 0.0, 1.0)
            missing, outcome = _unprotected(att, p, y)
            if outcome != "optimal" or not missing:
                break
            _add_cuts(h, att, missing, y)
    finally:
        h.changeColsIntegrality(n, cont, np.array([highspy.HighsVarType.kInteger] * n))
    return rounds


def _check(p: _Problem, relations, y: np.ndarray, unions, screen_only: bool = False):
    """The aggregation check of pattern ``y`` (cells derived through the a-priori bounds
    are left to the final audit), or ``None`` without contributions or a union rule."""
    if unions is None:
        return None
    return check_aggregations(relations, p.values, y, unions, deadline=p.deadline,
                              screen_only=screen_only)


def _protect_aggregations(p: _Problem, relations, y: np.ndarray, unions,
                          cheapest: _Cheapest, max_rounds: int = 200):
    """Suppress until no aggregation is sensitive (fast method; the incumbent of exact).

    The check runs with the screen only; every sensitive atom it cannot prove, and the
    atom each sensitive aggregation found attacks, gets the deviations the screen needs
    (:class:`service.sdc.aggregations.Requirements`), each met by the cheapest complements
    as in :func:`_fast`, until the screen proves every group. A group it cannot handle (a
    holding spanning cells) is left to the full check of the final audit. Returns
    (pattern or None, why)."""
    if unions is None:
        return y, ""
    needs = Requirements(relations, unions)
    room_cap = np.maximum(p.room_up, p.room_down)
    y = y.copy()
    for _ in range(max_rounds):
        check = _check(p, relations, y, unions, screen_only=True)
        todo = [r for found in check.found for r in needs.of(found)]
        todo += [r for k, atom in dict.fromkeys(check.failing) for r in needs.at(k, atom)]
        if not todo:
            return y, ""
        for anchor, level, room in todo:
            room = np.minimum(room, room_cap)
            used, outcome = cheapest.support(anchor, 1.0, level, y, room, room)
            if outcome == "infeasible":
                return None, (f"cell {anchor} cannot be protected against aggregations of "
                              "suppressed cells with the cells allowed as complements")
            if outcome != "optimal":
                return None, ("time limit reached protecting aggregations of suppressed "
                              "cells" if outcome == "time_limit" else
                              f"protection LP ended with status {outcome!r}")
            y[used] = True
    return None, "aggregations of suppressed cells could not be made safe"


def _aggregation_no_goods(p: _Problem, y: np.ndarray, check):
    """For each sensitive aggregation: suppress another cell of the relations it is read
    from, or drop a non-forced member. Valid: a pattern that keeps those published cells
    published and the members suppressed publishes the same aggregation."""
    cuts = []
    for found in check.found:
        v = p.a[found.relations].T @ found.multipliers
        touched = np.flatnonzero(np.abs(v) > 1e-9 * np.abs(v).max(initial=1.0))
        outside = touched[~y[touched]]
        members = found.cells[~p.forced[found.cells]]
        # sum_{outside} y + sum_{free members} (1 - y) >= 1
        idx = np.concatenate([outside, members])
        coef = np.concatenate([np.ones(len(outside)), -np.ones(len(members))])
        cuts.append((idx, coef, 1.0 - len(members)))
    return cuts
