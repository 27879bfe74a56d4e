"""The two LPs of the suppression search, each one HiGHS model reused across solves.

:class:`Attacker`: how far an intruder can move a sensitive cell under a pattern (the
attacker LP of the module :mod:`service.sdc.suppress`), with the row prices that give the
capacity cuts. :class:`Cheapest`: the cheapest-complement LP of the fast method.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .. import highs
from ..highs import Outcome
from .problem import SearchProblem, requirements

# Deviations below this share of a protection level do not make a cell a complement.
_SUPPORT_RTOL = highs.FEASIBILITY_RTOL


class Attacker:
    """The attacker LP in HiGHS over the cells a pattern suppresses (and the relations that
    touch them): published cells cannot move, so they need no column. A pattern within the
    model's columns only changes column bounds and an attack only the costs, so every solve
    starts from the last basis; a pattern reaching beyond them rebuilds the model."""

    def __init__(self, p: SearchProblem):
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
        self.h = highs.model(np.zeros(k), -y[cols] * self.p.room_down[cols],
                             y[cols] * self.p.room_up[cols], sub, np.zeros(m), np.zeros(m),
                             maximize=True, **highs.WARM_PRIMAL)
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
        outcome = highs.run(self.h, self.p.deadline)
        if outcome is Outcome.OPTIMAL:
            value = self.h.getInfo().objective_function_value
            prices = np.zeros(self.p.a.shape[0])   # rows off the model touch no room: 0
            prices[self.rows] = self.h.getSolution().row_dual
            return value, prices, "optimal"
        if outcome is Outcome.UNBOUNDED:
            return np.inf, None, "optimal"
        return np.nan, None, highs.describe(self.h) if outcome is Outcome.ERROR else outcome.value

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



class Cheapest:
    """The cheapest-complement LP of the fast method (module docstring): a deviation
    ``z = up - down`` with ``A z = 0`` that moves one cell by its level, each unit of
    ``|z_j|`` priced ``c_j / level`` (nearly free for cells already suppressed); its support
    is what to suppress. One HiGHS model; a requirement changes costs and bounds only."""

    def __init__(self, p: SearchProblem):
        self.p = p
        n, n_rows = len(p.values), p.a.shape[0]
        self.n = n
        a_t = p.a.tocsc()
        zeros = np.zeros(2 * n)
        self.model = highs.model(zeros, zeros, zeros, sp.hstack([a_t, -a_t], format="csc"),
                                 np.zeros(n_rows), np.zeros(n_rows), solver="simplex")
        self.columns = np.arange(2 * n, dtype=np.int32)

    def support(self, i: int, sense: float, level: float, y: np.ndarray, room_up: np.ndarray,
                room_down: np.ndarray):
        """Cells of the cheapest deviation moving cell ``i`` by ``level`` in direction
        ``sense`` within the rooms (disallowed cells get none): (cells, outcome) with
        outcome ``optimal``, ``infeasible``, ``time_limit`` or HiGHS's status."""
        p, n = self.p, self.n
        if time.perf_counter() >= p.deadline:
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
        outcome = highs.run(self.model, p.deadline)
        if outcome is not Outcome.OPTIMAL:
            return None, highs.describe(self.model) if outcome is Outcome.ERROR else outcome.value
        z = np.asarray(self.model.getSolution().col_value)
        return np.flatnonzero((z[:n] + z[n:]) > _SUPPORT_RTOL * level), "optimal"


def unprotected(att: Attacker, p: SearchProblem, y: np.ndarray):
    """The requirements the pattern ``y`` misses: (cell, direction, level, prices)."""
    att.set_pattern(y)
    missing = []
    for i, sense, level in requirements(p):
        value, prices, outcome = att.reach(i, sense)
        if outcome != "optimal":
            return None, outcome
        if not highs.reaches(value, level, p.values[i]):
            missing.append((i, sense, level, prices))
    return missing, "optimal"


