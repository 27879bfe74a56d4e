"""The two LPs of the suppression search, each one HiGHS model reused across solves.

:class:`Attacker`: how far an intruder can move a sensitive cell under a pattern (the
attacker LP of the module :mod:`service.sdc.suppress`), with the row prices that give the
capacity cuts. :class:`Cheapest`: the cheapest-complement LP of the fast method.
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from .. import highs
from ..highs import Outcome
from ..table import Table
from .problem import SearchProblem, requirements

# Deviations below this share of a protection level do not make a cell a complement.
_SUPPORT_RTOL = highs.FEASIBILITY_RTOL


def _times(y: np.ndarray, room: np.ndarray) -> np.ndarray:
    """``y_j room_j``, 0 where ``y_j = 0`` (even for an unbounded room)."""
    return np.multiply(y, room, out=np.zeros(len(y)), where=y > 0)


class Attacker:
    """The attacker LP in HiGHS over the cells a pattern suppresses (and the relations that
    touch them): published cells cannot move, so they need no column. A pattern within the
    model's columns only changes column bounds and an attack only the costs, so every solve
    starts from the last basis. A pattern reaching beyond them adds its new cells to the
    model, each as two columns ``z+ - z-`` (both ``>= 0``, nonbasic at 0: the last basis
    stays primal feasible), while at most :attr:`idle_share` of the model's cells would
    lie outside the pattern; else the model is built again over the pattern alone."""

    #: A model of more cells than this share outside the pattern is built again: its
    #: idle columns cost every simplex iteration (exact's points wander over the table).
    idle_share = 0.5

    def __init__(self, p: SearchProblem):
        self.p = p
        self.n = p.a.shape[1]
        self.a_csc = p.a.tocsc()
        self.cols = np.zeros(0, dtype=np.int64)
        # Each cell's column (``z``, or ``z+`` of a cell added later), and its ``z-``
        # column for a cell added later (-1 otherwise, and for cells without a column).
        self.position = np.full(self.n, -1, dtype=np.int64)
        self.minus = np.full(self.n, -1, dtype=np.int64)
        self.rows = np.zeros(0, dtype=np.int64)
        self.row_position = np.full(p.a.shape[0], -1, dtype=np.int64)
        self.h: highspy.Highs | None = None
        self.lower = self.upper = np.zeros(self.n)  # the columns' bounds, by cell
        self.costed = (-1, 0.0)  # (cell, sense) whose cost is set
        self.cold = False  # built, not yet solved
        self.growths = 0  # models grown rather than built again

    def _build(self, cols: np.ndarray) -> None:
        sub = self.a_csc[:, cols]
        self.rows = np.flatnonzero(np.diff(sub.tocsr().indptr) > 0)
        sub = sub[self.rows].tocsc()
        m, k = sub.shape
        self.h = highs.model(
            np.zeros(k),
            self.lower[cols],
            self.upper[cols],
            sub,
            np.zeros(m),
            np.zeros(m),
            maximize=True,
            **highs.WARM_PRIMAL,
        )
        self.cols = cols
        self.position[:] = -1
        self.position[cols] = np.arange(len(cols))
        self.minus[:] = -1
        self.row_position[:] = -1
        self.row_position[self.rows] = np.arange(m)
        self.costed = (-1, 0.0)
        self.cold = True

    def _grow(self, new: np.ndarray, down: np.ndarray, up: np.ndarray) -> None:
        """Add cells ``new`` (bounds ``down <= z <= up``, by cell) as ``z+`` and ``z-``
        columns, and the relations through them not yet in the model (equalities with
        basic slacks): the last basis stays a basis, primal feasible."""
        h = self.h
        assert h is not None
        sub = self.a_csc[:, new]
        fresh = np.setdiff1d(sub.indices, self.rows)
        if fresh.size:
            h.addRows(
                len(fresh),
                np.zeros(len(fresh)),
                np.zeros(len(fresh)),
                0,
                np.zeros(len(fresh), dtype=np.int32),
                np.zeros(0, dtype=np.int32),
                np.zeros(0),
            )
            self.row_position[fresh] = len(self.rows) + np.arange(len(fresh))
            self.rows = np.concatenate([self.rows, fresh])
        k = len(new)
        start = h.getNumCol()
        index = self.row_position[sub.indices].astype(np.int32)
        h.addCols(
            2 * k,
            np.zeros(2 * k),
            np.zeros(2 * k),
            np.concatenate([up[new], -down[new]]),
            2 * sub.nnz,
            np.concatenate([sub.indptr[:-1], sub.nnz + sub.indptr[:-1]]).astype(np.int32),
            np.concatenate([index, index]),
            np.concatenate([sub.data, -sub.data]),
        )
        self.position[new] = start + np.arange(k)
        self.minus[new] = start + k + np.arange(k)
        self.cols = np.concatenate([self.cols, new])
        self.growths += 1

    def set_pattern(self, y: np.ndarray, room_up=None, room_down=None) -> None:
        """Room ``y_j U_j`` up and ``y_j D_j`` down; ``y`` may be fractional (the LP
        relaxation of the master is separated with the same attacker). Other rooms than
        the problem's ``U``, ``D`` may be given (the requirements of aggregations)."""
        y = np.asarray(y, dtype=float)
        up = _times(y, self.p.room_up if room_up is None else room_up)
        down = -_times(y, self.p.room_down if room_down is None else room_down)
        support = np.flatnonzero(y > 0)
        new = support[self.position[support] < 0]
        if self.h is None or (
            new.size and len(self.cols) + len(new) > len(support) / (1.0 - self.idle_share)
        ):
            self.lower, self.upper = down, up
            self._build(support)
            return
        if new.size:
            self._grow(new, down, up)
            self.lower[new], self.upper[new] = down[new], up[new]
        changed = np.flatnonzero((up != self.upper) | (down != self.lower))
        if changed.size:
            split = self.minus[changed] >= 0
            whole = changed[~split]
            halves = changed[split]
            if whole.size:
                self.h.changeColsBounds(
                    len(whole), self.position[whole].astype(np.int32), down[whole], up[whole]
                )
            if halves.size:
                cols = np.concatenate([self.position[halves], self.minus[halves]])
                self.h.changeColsBounds(
                    len(cols),
                    cols.astype(np.int32),
                    np.zeros(len(cols)),
                    np.concatenate([up[halves], -down[halves]]),
                )
        self.lower, self.upper = down, up

    def reset(self) -> None:
        """Build the model afresh at the next pattern, over its cells alone (one column
        each): before a phase whose patterns shrink, a model grown by split columns
        costs more per iteration than one cold start."""
        self.h = None

    def _model(self) -> highspy.Highs:
        if self.h is None:
            raise RuntimeError("Attacker.set_pattern() must come before an attack")
        return self.h

    def _costs(self, cell: int, sense: float) -> tuple[list[int], list[float]]:
        """The columns of ``cell`` and their costs for ``max sense * z_cell``."""
        if self.minus[cell] < 0:
            return [int(self.position[cell])], [sense]
        return [int(self.position[cell]), int(self.minus[cell])], [sense, -sense]

    def reach(self, i: int, sense: float) -> tuple[float, np.ndarray | None, str]:
        """``max sense * z_i`` under the current pattern, the row prices, the outcome."""
        # Always maximise, with cost +-1 on the attacked cell: only costs change between
        # solves, so the last basis stays primal feasible for the primal simplex.
        h = self._model()
        if self.costed != (i, sense):
            idx, costs = self._costs(i, sense)
            last = self.costed[0]
            if last >= 0 and last != i and self.position[last] >= 0:
                was, _ = self._costs(last, 0.0)
                idx, costs = was + idx, [0.0] * len(was) + costs
            h.changeColsCost(len(idx), np.array(idx, dtype=np.int32), np.array(costs))
            self.costed = (i, sense)
        if self.cold:
            # A model just built has no basis to go on from: from the slack basis the dual
            # simplex beats the primal (20x20x10, the protection's 227 attacks: 449 -> 476
            # iterations but 12.9 -> 7.2 ms each, the same optima).
            h.setOptionValue("simplex_strategy", highs.DUAL_SIMPLEX)
            outcome = highs.run(h, self.p.deadline)
            h.setOptionValue("simplex_strategy", highs.WARM_PRIMAL["simplex_strategy"])
            self.cold = False
        else:
            outcome = highs.run(h, self.p.deadline)
        if outcome is Outcome.OPTIMAL:
            value = h.getInfo().objective_function_value
            prices = np.zeros(self.p.a.shape[0])  # rows off the model touch no room: 0
            prices[self.rows] = h.getSolution().row_dual
            return value, prices, "optimal"
        if outcome is Outcome.UNBOUNDED:
            return np.inf, None, "optimal"
        return np.nan, None, highs.describe(h) if outcome is Outcome.ERROR else outcome.value

    def support(self) -> np.ndarray:
        """Cells the last optimal attack moves: only their removal can stop it."""
        return self.deviation()[0]

    def deviation(self) -> tuple[np.ndarray, np.ndarray]:
        """The last optimal attack: (cells it moves, their moves)."""
        values = np.asarray(self._model().getSolution().col_value)
        minus = self.minus[self.cols]
        z = values[self.position[self.cols]] - np.where(minus >= 0, values[minus], 0.0)
        moved = np.abs(z) > 1e-9 * max(1.0, np.abs(z).max(initial=0.0))
        return self.cols[moved], z[moved]

    def cut(self, i: int, sense: float, prices, y: np.ndarray) -> np.ndarray:
        """Coefficients of the capacity cut for cell ``i``: of the two sign conventions of
        the row prices, the one whose bound is tightest at ``y`` (both are valid). Direction
        0 (:func:`misses`): ``prices`` of the upward and the downward attack, the sum of
        their cuts, which bounds the interval's width."""
        if sense == 0:
            up, down = prices
            return self.cut(i, 1.0, up, y) + self.cut(i, -1.0, down, y)

        def coefficients(g: np.ndarray) -> np.ndarray:
            r = -(self.p.a.T @ g)
            r[i] += sense
            # r = sense e_i - A^T g already carries the direction (module docstring).
            return self.p.room_up * np.maximum(0.0, r) + self.p.room_down * np.maximum(0.0, -r)

        plus, minus = coefficients(prices), coefficients(-prices)
        return minus if minus @ y < plus @ y else plus  # a tie keeps the first


class Cheapest:
    """The cheapest-complement LP of the fast method (module docstring): a deviation
    ``z = up - down`` with ``A z = 0`` that moves one cell by its level, each unit of
    ``|z_j|`` priced ``c_j / level`` (nearly free for cells already suppressed); its support
    is what to suppress. One HiGHS model per part of the table it is tried on (boxes,
    level sub-tables, the whole table), kept; a requirement changes costs and bounds
    only. On a whole table of :attr:`priced_min_cells` or more the LP is solved by column
    generation over a model made per requirement instead (:meth:`_priced`; the whole
    model is its fallback). Attacks within a pattern are decided by an
    :class:`Attacker` of its own."""

    def __init__(self, p: SearchProblem):
        self.p = p
        self.n = len(p.values)
        self.columns = np.arange(2 * self.n, dtype=np.int32)
        table = p.table.structure
        self.boxes = Boxes(table) if isinstance(table, Table) else None
        if self.boxes is not None and self.boxes.smallest() > self.boxes.max_share * self.n:
            self.boxes = None  # flat dimensions: every box is most of the table
        self.levels = Levels(table) if isinstance(table, Table) else None
        self.a_csc = p.a.tocsc()
        self.local_solves = self.global_solves = 0
        #: Every optimal deviation found, to prove later requirements without an LP (and,
        #: with contributions, anchors of the aggregation screen).
        self.deviations = Deviations(record=p.table.unions is not None)
        # Models kept warm between requirements, built on first use: the whole table's
        # (key None), each level sub-table's (key: its depths) and the latest boxes' (key:
        # their cells; a box of whole sibling groups recurs for every cell of its block).
        self._models: dict[int | bytes | None, highspy.Highs] = {}
        # The attacker over the pattern's cells (see _reach), built on first use.
        self._attacker: Attacker | None = None
        self.pattern_attacks = 0

    #: Box models kept (each a few hundred cells, about 80 KiB), the least recently used
    #: dropped first: at 59,049 cells (220x220, 2-level hierarchies) the protection built
    #: 1,359 of its 5,004 box models with 256 kept, 484 with 1,024 or 2,048 (2.68 -> 2.13
    #: CPU s; 80 MiB more within suppress()).
    kept_boxes = 1024

    def _model(self, key: int | bytes | None, cells: np.ndarray) -> highspy.Highs:
        """The cheapest-complement LP over ``cells``, kept under ``key`` (costs and bounds
        are all a requirement changes)."""
        if key is None and len(cells) < self.n:
            key = cells.tobytes()
        h = self._models.get(key)
        if isinstance(key, bytes):
            if h is not None:
                self._models[key] = self._models.pop(key)  # the most recent last
                return h
            boxes = [k for k in self._models if isinstance(k, bytes)]
            if len(boxes) >= self.kept_boxes:
                del self._models[boxes[0]]  # the least recently used
        elif h is not None:
            return h
        h = self._build(cells)
        self._models[key] = h
        return h

    def _build(self, cells: np.ndarray, every_row: bool = False) -> highspy.Highs:
        """A cheapest-complement model over ``cells`` (columns ``[A_S, -A_S]``, the rows
        through them, or every row of the table with ``every_row`` so that columns can be
        added), all costs and bounds 0. Solved from the slack basis by the dual simplex
        without presolve: on 20x20x10's whole-table LPs presolve took more than half of
        each solve (60 LPs: 3.7 s with it, 1.6 s without, the same optima)."""
        both = self._both(cells, every_row)
        m = both.shape[0]
        zeros = np.zeros(both.shape[1])
        return highs.model(
            zeros,
            zeros,
            zeros,
            both,
            np.zeros(m),
            np.zeros(m),
            solver="simplex",
            simplex_strategy=highs.DUAL_SIMPLEX,
            presolve="off",
        )

    def _both(self, cells: np.ndarray, every_row: bool) -> sp.csc_matrix:
        """``[A_S, -A_S]`` over the rows through ``cells``, or every row of the table."""
        a = self.a_csc
        # The columns of A_S gathered directly (scipy's slicing cost more than the LP on
        # a box of a few hundred cells).
        counts = a.indptr[cells + 1] - a.indptr[cells]
        ptr = np.concatenate([[0], np.cumsum(counts)])
        at = np.repeat(a.indptr[cells] - ptr[:-1], counts) + np.arange(ptr[-1])
        if every_row:
            m, local = a.shape[0], a.indices[at]
        else:
            used, local = np.unique(a.indices[at], return_inverse=True)
            m = len(used)
        data = a.data[at]
        return sp.csc_matrix(
            (
                np.concatenate([data, -data]),
                np.concatenate([local, local]),
                np.concatenate([ptr, ptr[-1] + ptr[1:]]),
            ),
            shape=(m, 2 * len(cells)),
        )

    def support(
        self,
        i: int,
        sense: float,
        level: float,
        y: np.ndarray,
        room_up: np.ndarray,
        room_down: np.ndarray,
        *,
        within_pattern: bool = False,
    ):
        """Cells of the cheapest deviation moving cell ``i`` by ``level`` in direction
        ``sense`` within the rooms (disallowed cells get none): (cells, outcome) with
        outcome ``optimal``, ``infeasible``, ``time_limit`` or HiGHS's status.

        Tried first on boxes of codes around the cell (:class:`Boxes`), then on the cell's
        level sub-table (:class:`Levels`), then on the whole table: a deviation on part of
        the table, zero elsewhere, is one of the whole table's, so a part that has one
        gives a valid (if perhaps dearer) complement; an infeasible part only widens the
        search. ``within_pattern``: only the suppressed cells ``y`` may move: a deviation
        found proves the requirement met by ``y`` (an attack). Where the cell has boxes
        only they are tried, and ``infeasible`` (no attack on a box around the cell) proves
        nothing; elsewhere the attacker LP over the whole pattern (:meth:`_reach`) decides,
        and ``infeasible`` proves the requirement missed. ``untried``: the cell itself is
        not in ``y``."""
        p = self.p
        if highs.now() >= p.deadline:
            return None, "time_limit"
        # Prices are read on the cells a model uses, never over the whole table per
        # requirement (at 59,049 cells that was a third of the protection's time).
        ask = _Ask(p, i, sense, level, y, within_pattern, room_up, room_down)
        tried = False
        if self.boxes is not None:
            for width in self.boxes.widths:
                cells = self.boxes.around(i, width, ask.score)
                if cells is None or len(cells) > self.boxes.max_share * self.n:
                    break
                found = self._solve(cells, ask)
                if found[1] != "infeasible":
                    return found
                tried = True
        if within_pattern and not tried and y[i]:
            # No box: the attacker LP over the whole pattern decides exactly, from its
            # last basis (8x6x5x4, a whole clean-up: 4.1 s against 18 s for the cheapest
            # complement within the pattern from the slack basis, and 25 s for the level
            # sub-table's LP then the attacker; the same pattern).
            return self._reach(ask)
        if self.levels is not None:
            key, cells = self.levels.of(i)
            if key is not None:
                found = self._solve(cells, ask, key=key)
                if found[1] != "infeasible":
                    return found
        if within_pattern:
            return None, "infeasible" if tried else "untried"
        return self._solve(None, ask)

    def reset(self) -> None:
        """:meth:`Attacker.reset` of the attacker within patterns (:meth:`_reach`)."""
        if self._attacker is not None:
            self._attacker.reset()

    def attack(
        self,
        i: int,
        sense: float,
        level: float,
        y: np.ndarray,
        room_up: np.ndarray,
        room_down: np.ndarray,
    ):
        """An attack within pattern ``y`` that meets ``(i, sense, level)``: a kept
        deviation (no LP), else :meth:`support` with ``within_pattern``; (cells, outcome)
        as there."""
        kept = self.deviations.meeting(i, sense, level, y, room_up, room_down)
        if kept is not None:
            return kept, "optimal"
        return self.support(i, sense, level, y, room_up, room_down, within_pattern=True)

    def _reach(self, ask: _Ask):
        """Whether pattern ``ask.y`` meets the requirement, by the attacker LP over its
        cells (started from its last basis): (cells of the attack, ``optimal``) or (None,
        ``infeasible``), as :meth:`support` within the pattern."""
        if self._attacker is None:
            self._attacker = Attacker(self.p)
        att = self._attacker
        att.set_pattern(ask.y, ask.room_up, ask.room_down)
        self.pattern_attacks += 1
        value, _, outcome = att.reach(ask.i, ask.sense)
        if outcome != "optimal":
            return None, outcome
        if not highs.reaches(value, ask.level, self.p.values[ask.i]):
            return None, "infeasible"
        if not np.isfinite(value):
            return np.flatnonzero(ask.y), "optimal"
        found = att.deviation()
        self.deviations.add(found)
        return found[0], "optimal"

    def _solve(self, cells, ask: _Ask, key=None):
        """The cheapest-complement LP of requirement ``ask`` over ``cells`` (all when
        ``None``), the other cells held at their values; ``key`` keeps the model for later
        requirements."""
        if cells is None:
            self.global_solves += 1
            if self.n >= self.priced_min_cells:
                return self._priced(ask)
            cells = np.arange(self.n)
        else:
            self.local_solves += 1
        return self._kept(cells, ask, key)

    def _kept(self, cells: np.ndarray, ask: _Ask, key):
        """:meth:`_solve` on the model kept for ``cells`` under ``key``."""
        h = self._model(key, cells)
        m = len(cells)
        lower, upper, unit = _columns(ask, cells)
        columns = self.columns[: 2 * m]
        h.changeColsCost(2 * m, columns, np.concatenate([unit, unit]))
        h.changeColsBounds(2 * m, columns, lower, upper)
        # From the slack basis, not the last requirement's: with every column at its lower
        # bound 0 and costs >= 0 it is dual feasible, and the dual simplex only routes the
        # one cell's move, where the last optimal basis, for another cell and costs, is
        # far off (20x20x10: 12 protection LPs 0.51 s cold against 4.84 s warm, the same
        # complements; about 430 against 4,000 iterations each).
        h.clearSolver()
        outcome = highs.run(h, self.p.deadline)
        if outcome is not Outcome.OPTIMAL:
            return None, _failed(h, outcome)
        z = np.asarray(h.getSolution().col_value)
        return self._found(cells, z[:m], z[m:], ask)

    def _found(self, cells: np.ndarray, up: np.ndarray, down: np.ndarray, ask: _Ask):
        """The support of an optimal deviation ``up - down`` over ``cells``, kept."""
        moved = (up + down) > _SUPPORT_RTOL * ask.level
        self.deviations.add((cells[moved], (up - down)[moved]))
        return cells[moved], "optimal"

    #: Whole tables of at least this many cells solve their complement LP by column
    #: generation (:meth:`_priced`); smaller ones keep one model of the whole table.
    priced_min_cells = 2_000
    #: Shares of the usable cells not yet suppressed that column generation starts from,
    #: cheapest first; while the restricted LP is infeasible the next is tried, then the
    #: whole table's model.
    priced_shares = (0.2, 0.4)

    def _priced(self, ask: _Ask):
        """The whole table's cheapest complement by column generation: the LP over the
        suppressed cells and the cheapest of the others (:attr:`priced_shares`), with every
        row of the table; the row prices ``pi`` of its optimum give each cell left out the
        reduced costs ``c_j - a_j^T pi`` (up) and ``c_j + a_j^T pi`` (down), the cells with
        a negative one are added and the LP solved again (the dual simplex from the last
        basis), until none is left: then its optimum is the whole table's (Dantzig and
        Wolfe's pricing; the LP over every cell is the same LP with those columns at 0).
        Measured on 20x20x10 (seed 1, the fast method with the aggregation rounds): the
        protection's 142 LPs 4.9 -> 3.8 s, the rounds' 40 LPs 5.2 -> 2.6 s, the same
        optima and pattern; a model of a fifth of the cells costs about a third per simplex
        iteration, and most optima need no cell beyond the start or one more solve."""
        p, n = self.p, self.n
        lower, upper, unit = _columns(ask, np.arange(n))
        movable = (upper[:n] > 0) | (upper[n:] > 0)
        hidden = movable & ask.y
        hidden[ask.i] = True
        others = np.flatnonzero(movable & ~hidden)
        tol = highs.FEASIBILITY_RTOL * np.maximum(1.0, unit)
        for share in self.priced_shares:
            k = int(share * len(others))
            cheap = others[np.argpartition(unit[others], k)[:k]] if k < len(others) else others
            cells = np.union1d(np.flatnonzero(hidden), cheap)
            inset = np.zeros(n, dtype=bool)
            inset[cells] = True
            # The model's columns: blocks of (up of the block's cells, down of them).
            h = self._build(cells, every_row=True)
            pairs = np.concatenate([cells, n + cells])
            h.changeColsCost(len(pairs), self.columns[: len(pairs)], unit[pairs % n])
            h.changeColsBounds(len(pairs), self.columns[: len(pairs)], lower[pairs], upper[pairs])
            while True:
                outcome = highs.run(h, p.deadline)
                if outcome is Outcome.INFEASIBLE:
                    break  # too few cells: widen
                if outcome is not Outcome.OPTIMAL:
                    return None, _failed(h, outcome)
                priced = self.a_csc.T @ np.asarray(h.getSolution().row_dual)
                new = np.flatnonzero(
                    ~inset
                    & (
                        ((unit - priced < -tol) & (upper[:n] > 0))
                        | ((unit + priced < -tol) & (upper[n:] > 0))
                    )
                )
                if not new.size:
                    z = np.asarray(h.getSolution().col_value)
                    up = np.bincount(pairs, weights=z, minlength=2 * n)
                    return self._found(np.arange(n), up[:n], up[n:], ask)
                block = np.concatenate([new, n + new])
                added = self._both(new, every_row=True)
                h.addCols(
                    len(block),
                    unit[block % n],
                    lower[block],
                    upper[block],
                    added.nnz,
                    added.indptr[:-1].astype(np.int32),
                    added.indices.astype(np.int32),
                    added.data,
                )
                pairs = np.concatenate([pairs, block])
                inset[new] = True
        return self._kept(np.arange(n), ask, None)


def _failed(h: highspy.Highs, outcome: Outcome) -> str:
    """The outcome of a solve that found no optimum, as :meth:`Cheapest.support` names it."""
    return highs.describe(h) if outcome is Outcome.ERROR else outcome.value


def _columns(ask: _Ask, cells: np.ndarray):
    """(lower, upper, unit) of the cheapest-complement LP's columns for ``cells``: bounds
    of the up columns then the down columns (``2 m`` each), and each cell's price per unit
    of ``|z_j|`` (the same up and down). Disallowed cells get no room; the requirement's
    own cell moves at least the level its way and not at all the other."""
    m = len(cells)
    ok = ask.allowed(cells)
    upper = np.concatenate(
        [np.where(ok, ask.room_up[cells], 0.0), np.where(ok, ask.room_down[cells], 0.0)]
    )
    lower = np.zeros(2 * m)
    at = np.flatnonzero(cells == ask.i)
    if at.size:
        own = int(at[0])
        col, opposite = (own, m + own) if ask.sense > 0 else (m + own, own)
        upper[col] = max(ask.level, upper[col])
        upper[opposite] = 0.0  # else up and down cancel out
        lower[col] = ask.level
    return lower, upper, ask.unit(cells)


class _Ask:
    """One requirement put to :class:`Cheapest`: cell ``i`` moved by ``level`` in
    direction ``sense`` within the rooms, by the cells of pattern ``y`` alone when
    ``within``; its prices are read on the cells a model uses."""

    __slots__ = ("p", "i", "sense", "level", "y", "within", "room_up", "room_down")

    def __init__(self, p, i, sense, level, y, within, room_up, room_down):
        self.p, self.i, self.sense, self.level = p, i, sense, level
        self.y, self.within, self.room_up, self.room_down = y, within, room_up, room_down

    def allowed(self, cells: np.ndarray) -> np.ndarray:
        """Which of ``cells`` may move (disallowed cells get no room)."""
        return self.y[cells] if self.within else self.p.allowed[cells] | self.y[cells]

    def unit(self, cells: np.ndarray) -> np.ndarray:
        """The price of a unit of ``|z_j|``: ``c_j / level``, and a thousandth of it for
        cells already suppressed (nearly free; a little cost keeps the support, the
        requirement's witness for the clean-up, small)."""
        return np.where(self.y[cells], 1e-3, 1.0) * (self.p.cost[cells] + 1e-9) / self.level

    def score(self, cells: np.ndarray) -> np.ndarray:
        """The cost of using each of ``cells``; ``inf`` when it may not move."""
        return np.where(self.allowed(cells), self.unit(cells), np.inf)


class Deviations:
    """The deviations found so far, for proving requirements without an LP.

    A deviation ``z`` (``A z = 0``) over suppressed cells, scaled by any ``t`` (of either
    sign) with ``t z_i`` at a requirement's level and ``t z_j`` within every cell's room,
    is an attack that meets the requirement (module :mod:`service.sdc.suppress`): the
    cheapest complement of a cell upwards, negated, often protects it downwards too. Only
    the latest ``per_cell`` deviations through a cell are kept."""

    per_cell = 6
    #: At most this many nonzeros held for :meth:`take` between two calls.
    recent_nonzeros = 1_000_000

    def __init__(self, record: bool = False) -> None:
        self.through: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        # With ``record``, every deviation added since the last take(), for the screen of
        # the aggregation check (service.sdc.aggregations.Deviations.add_cells).
        self._recent: list[tuple[np.ndarray, np.ndarray]] | None = [] if record else None
        self._held = 0

    def take(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The deviations added since the last call (none unless recording)."""
        out = self._recent or []
        if self._recent is not None:
            self._recent, self._held = [], 0
        return out

    def add(self, found: tuple[np.ndarray, np.ndarray]) -> None:
        order = np.argsort(found[0])
        found = (found[0][order], found[1][order])
        if self._recent is not None and self._held + len(found[0]) <= self.recent_nonzeros:
            self._recent.append(found)
            self._held += len(found[0])
        for c in found[0].tolist():
            kept = self.through.setdefault(c, [])
            kept.append(found)
            if len(kept) > self.per_cell:
                del kept[0]

    def meeting(
        self,
        i: int,
        sense: float,
        level: float,
        y: np.ndarray,
        room_up: np.ndarray,
        room_down: np.ndarray,
    ) -> np.ndarray | None:
        """Cells of a kept deviation that meets ``(i, sense, level)`` within the rooms of
        pattern ``y``, or ``None``."""
        for cells, z in reversed(self.through.get(i, ())):
            if not y[cells].all():
                continue
            zi = float(z[np.searchsorted(cells, i)])
            if zi == 0.0:
                continue
            t = sense * level / zi
            move = t * z
            if (move <= room_up[cells]).all() and (-move <= room_down[cells]).all():
                return cells
        return None


class Levels:
    """Level sub-tables: the cells whose code lies at the same depth as a given cell's in
    every dimension (all interior cells of a table with flat dimensions, or one face of
    its margins), with the relations through them and every other cell held at its value.

    A deviation there is one of the whole table's. The cheapest complement of an interior
    cell seldom moves a margin (a margin costs the sum of its line under the value cost),
    and the sub-table's LP is far cheaper: measured on the 8x6x5x4 table with totals
    (1,890 cells, 960 interior), 40 protection LPs took 0.69 s there against 7.6 s over the
    whole table, with the same pattern. A sub-table of more than ``max_share`` of the
    table is not worth a separate model."""

    max_share = 0.6

    def __init__(self, table: Table):
        pos = table.key_positions
        depths = [h.depth[pos[:, d]] for d, h in enumerate(table.dimensions)]
        shape = tuple(int(h.depth.max()) + 1 for h in table.dimensions)
        self.profile = np.ravel_multi_index(depths, shape) if depths else np.zeros(0, np.int64)
        self.n = len(self.profile)
        self.cells: dict[int, np.ndarray | None] = {}

    def of(self, i: int) -> tuple[int | None, np.ndarray]:
        """(key, cells) of cell ``i``'s level sub-table; key ``None`` when it is too large
        to be worth it."""
        key = int(self.profile[i])
        if key not in self.cells:
            members = np.flatnonzero(self.profile == key)
            self.cells[key] = members if len(members) <= self.max_share * self.n else None
        cells = self.cells[key]
        return (None, np.zeros(0, np.int64)) if cells is None else (key, cells)


class Boxes:
    """Boxes of cells around a cell of a table, for local complement searches.

    A box is a product of code sets, one per dimension: the cell's own code, its parent
    and up to ``width`` of its siblings and of its children, those whose cell on the line
    through the given cell is cheapest. A deviation inside a box with every relation
    balanced is the 2x2 (x2...) cycle of seed 003 B.2.b's complementary sets, and the
    relations that reach outside the box only hold its cells at 0 where they must.
    """

    #: Widths tried before the whole table. Measured on the benchmark's 100x100 table with
    #: a 2-level hierarchy (groups of 10): width 2, 3+8, 5 and 9 gave 1,307, 1,196, 1,111
    #: and 1,018 secondary cells (the whole-table LP alone 1,025): whole sibling groups,
    #: the sub-tables of tau-ARGUS's modular method, lose nothing.
    widths = (9,)
    #: Boxes above this share of the table are not worth it: on 20x20x10 a box of width 9
    #: (1,331 of 4,851 cells) found 30% more secondary cells than the whole-table LP.
    max_share = 0.1

    def __init__(self, table: Table):
        self.shape = table.shape
        # Row-major: cell = sum over dimensions of position * stride.
        self.strides = np.cumprod((1,) + self.shape[::-1][:-1])[::-1]
        self.positions = table.key_positions
        self.kin = []
        for h in table.dimensions:
            parent = h.parent
            kids = [
                h.children_idx[h.children_ptr[c] : h.children_ptr[c + 1]] for c in range(h.n_codes)
            ]
            sibs = [kids[parent[c]] if parent[c] >= 0 else np.array([c]) for c in range(h.n_codes)]
            self.kin.append((parent, kids, sibs))

    def smallest(self) -> int:
        """Cells of the smallest box there can be (narrowest width, fewest kin)."""
        width, size = min(self.widths), 1
        for parent, kids, sibs in self.kin:
            size *= min(
                1 + int(parent[c] >= 0) + min(width, len(sibs[c]) - 1) + min(width, len(kids[c]))
                for c in range(len(parent))
            )
        return size

    def around(self, i: int, width: int, score) -> np.ndarray | None:
        """Cells of the box of ``width`` around cell ``i`` (``score(cells)``: the cost of
        using each, ``inf`` when it may not be used), or ``None`` when that box is the
        whole table."""
        at = self.positions[i]
        base = int(at @ self.strides)
        sets, whole = [], True
        for d, (parent, kids, sibs) in enumerate(self.kin):
            code = int(at[d])
            chosen = [np.array([code])]
            if parent[code] >= 0:
                chosen.append(np.array([parent[code]]))
            for group in (sibs[code], kids[code]):
                group = group[group != code]
                if len(group) > width:
                    line = base + (group - code) * self.strides[d]
                    group = group[np.argsort(score(line), kind="stable")[:width]]
                chosen.append(group)
            codes = np.unique(np.concatenate(chosen))
            whole &= len(codes) == self.shape[d]
            sets.append(codes)
        if whole:
            return None
        grid = np.ix_(*sets)
        return np.ravel_multi_index(grid, self.shape).ravel()


def misses(att: Attacker, p: SearchProblem, i: int, sense: float, level: float):
    """Whether the pattern set in ``att`` misses the requirement ``(i, sense, level)``:
    ``(missed requirement or None, outcome)``, the missed one as ``(cell, direction,
    level, prices)``.

    A cell that need only not be disclosed exactly (``p.width``: its own levels are 0,
    README "Secondary suppression") is protected by any interval at least that wide,
    whichever way it reaches: the search asks it upwards, but moving only downwards is
    as good (seed 003 B.2.a.iii: what the audit flags is exact disclosure). It misses
    when ``max z_i + max(-z_i)``, the interval's width, falls short; then its direction
    is 0 and its prices are those of both attacks, whose capacity cuts add up to a cut
    valid for every pattern that meets the width (:meth:`Attacker.cut`). Until
    2026-11-27 exact proved optimal the cheapest pattern that moves such a cell upwards:
    6 cells on a 2x2 table where the 4 leaves, moving it downwards, are audited safe
    (a helper's campaign, ``tests/test_exact_claims.py``)."""
    width = p.width[i]
    up, prices, outcome = att.reach(i, 1.0 if width > 0 else sense)
    if outcome != "optimal":
        return None, outcome
    if width <= 0:
        met = highs.reaches(up, level, p.values[i])
        return (None if met else (i, sense, level, prices)), outcome
    if highs.reaches(up, width, p.values[i]):
        return None, outcome
    down, down_prices, outcome = att.reach(i, -1.0)
    if outcome != "optimal":
        return None, outcome
    if highs.reaches(up + down, width, p.values[i]):
        return None, outcome
    return (i, 0.0, width, (prices, down_prices)), outcome


def unprotected(att: Attacker, p: SearchProblem, y: np.ndarray):
    """The requirements the pattern ``y`` misses (:func:`misses`): (cell, direction,
    level, prices)."""
    att.set_pattern(y)
    missing = []
    for i, sense, level in requirements(p):
        missed, outcome = misses(att, p, i, sense, level)
        if outcome != "optimal":
            return None, outcome
        if missed is not None:
            missing.append(missed)
    return missing, "optimal"
