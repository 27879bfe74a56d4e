"""The fast method: cheapest complementary sets one requirement at a time, a clean-up,
and the protection of aggregations (see :mod:`service.sdc.suppress`)."""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from .. import highs
from ..aggregations import (
    Deviations,
    Requirements,
    Trials,
    check_aggregations,
    hidden_groups,
)
from ..audit import audit_pattern
from .lps import Attacker, Cheapest
from .problem import SearchProblem, requirements

# Progress of long runs (issue 16 part 3): INFO lines with lazy %-arguments, at most one
# progress line per PROGRESS_SECONDS within a phase, so a level above INFO costs a cached
# level check per requirement and nothing else.
log = logging.getLogger("sdc.suppress")
#: Seconds between two progress lines of one phase.
PROGRESS_SECONDS = 10.0
#: A swap of the clean-up is kept only when the cells added cost at least this share
#: less than the cell dropped: ties would let the pass trade cells back and forth.
SWAP_GAIN_RTOL = 1e-6
#: With aggregation rounds after the clean-up, the share of its candidates, dearest
#: first, that it swaps (:func:`_passes`).
SWAP_SHARE = 0.25


class _Ticker:
    """Whether a progress line is due: INFO enabled and PROGRESS_SECONDS since the last."""

    def __init__(self) -> None:
        self.next = time.monotonic() + PROGRESS_SECONDS

    def due(self) -> bool:
        if not log.isEnabledFor(logging.INFO):
            return False
        now = time.monotonic()
        if now < self.next:
            return False
        self.next = now + PROGRESS_SECONDS
        return True


def protect(p: SearchProblem, att: Attacker, cheapest: Cheapest):
    """Protect one requirement at a time by a cheapest complementary set (module doc).

    Returns (pattern, status, message, protection LPs, witnesses, proven); when the time
    runs out the pattern is ``None``, the status ``time_limit`` and the witnesses the
    partial pattern with the requirements not yet met or checked, ``(y, [(i, sense,
    level)])``: every earlier requirement is met by that pattern (its deviation stays
    feasible). ``proven``: the status ``no_safe_pattern`` is a proof, a sensitive cell's
    own level (the audit's) that no deviation over every cell allowed meets, so no
    pattern within the caller's constraints protects it."""
    y = p.forced.copy()
    iters = 0
    witness = []
    late = "time limit reached before every sensitive cell was protected"
    levels = requirements(p)
    ticker = _Ticker()
    # Requirements of a cell are done once the last of them is: cells done = how many of
    # these last positions lie before the current requirement.
    last = {}
    for k, (i, _, _) in enumerate(levels):
        last[i] = k
    ends = np.sort(np.fromiter(last.values(), np.int64, len(last)))
    log.info(
        "protection: start, %d sensitive cells, %d requirements, %d forced suppressions",
        len(ends),
        len(levels),
        int(y.sum()),
    )
    for k, (i, sense, level) in enumerate(levels):
        if ticker.due():
            log.info(
                "protection: %d of %d sensitive cells done (%d of %d requirements), "
                "%d protection LPs, %d cells suppressed",
                int(np.searchsorted(ends, k)),
                len(ends),
                k,
                len(levels),
                iters,
                int(y.sum()),
            )
        # Already protected by earlier suppressions: a deviation found before, a local
        # attack, then the whole table's.
        attack, outcome = cheapest.attack(i, sense, level, y, p.room_up, p.room_down)
        if outcome == "optimal":
            witness.append(attack)
            continue
        used, outcome = cheapest.support(i, sense, level, y, p.room_up, p.room_down)
        iters += 1
        if outcome == "infeasible":
            audited = (p.table.upper_protection if sense > 0 else p.table.lower_protection)[i]
            return (
                None,
                "no_safe_pattern",
                (
                    f"cell {i} cannot be protected {'upwards' if sense > 0 else 'downwards'} by "
                    f"{level:g} with the cells allowed as complements (forbidden, zero cells)"
                ),
                iters,
                None,
                # Not the search's own raised levels (dominance conditions, escalations).
                bool(p.sensitive[i] and level == audited),
            )
        if outcome == "time_limit":
            return None, "time_limit", late, iters, (y, levels[k:]), False
        if outcome != "optimal":
            return (
                None,
                "no_safe_pattern",
                f"protection LP ended with status {outcome!r}",
                iters,
                None,
                False,
            )
        y[used] = True
        witness.append(used)
    log.info(
        "protection: end, %d sensitive cells protected, %d protection LPs, %d cells suppressed",
        len(ends),
        iters,
        int(y.sum()),
    )
    return y, "feasible", "every sensitive cell protected", iters, witness, False


def remove_superfluous(
    p: SearchProblem,
    att: Attacker,
    cheapest: Cheapest,
    y: np.ndarray,
    witness: list,
    deadline: float,
    accept: Callable[[np.ndarray, int], bool] | None = None,
    phase: str = "clean-up",
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """Drop secondary suppressions, most expensive first, while all stay protected; then,
    with the time left, swap: drop a cell whose requirements cheaper complements meet.

    Each requirement keeps the support of an attack that reaches its level (a witness,
    from :func:`protect`); removing a cell outside every witness cannot stop any attack, so
    only the requirements whose witness uses the cell are solved again, first by a local
    attack (:meth:`Cheapest.support` within the pattern), then on the whole table.

    A swap (a local search of the greedy's pattern, in the spirit of Fischetti and
    Salazar's heuristic clean-up) re-solves each requirement the cell's removal breaks by
    the cheapest complementary set (:meth:`Cheapest.support`, suppressed cells nearly
    free), and keeps the exchange when the cells added cost less than the cell dropped:
    every requirement then has a witness again and the cost falls strictly, so the pass
    ends. Which passes run (:func:`_passes`): under intervals alone a pass of removals,
    then one of swaps over what it left, so the removals come first when time is short;
    with aggregation rounds after it, on tables whose complements are solved on boxes
    (hierarchical tables), one pass that swaps its dearest candidates where a removal
    alone fails; otherwise, and in the trim (``accept``), removals only.

    ``witness`` is updated in place: on return it holds a witness of every requirement
    within the pattern returned. ``accept(trial, j)``, if given, must also hold for the
    removal of ``j`` to stand (:func:`trim`); cells in ``keep`` are not tried; ``phase``
    names the pass in the log."""
    levels = requirements(p)
    # Which requirements' witnesses use each cell, so that a candidate visits only those
    # (scanning every witness per candidate was 1.7 of 8 s on 100x100 hier).
    users = _Users(witness, len(y))
    ticker = _Ticker()
    tried = removed = swapped = 0
    tried_cells = ~p.forced if keep is None else ~p.forced & ~keep
    candidates = np.flatnonzero(y & tried_cells)
    log.info("%s: start, %d candidate cells", phase, len(candidates))
    cheapest.reset()
    for n_pass, swap_share in enumerate(_passes(p, cheapest, accept)):
        if n_pass:
            candidates = np.flatnonzero(y & tried_cells)
            log.info("%s: swaps, %d candidate cells", phase, len(candidates))
        swaps_until = swap_share * len(candidates)
        for rank, j in enumerate(candidates[np.argsort(-p.cost[candidates], kind="stable")]):
            j, swap = int(j), rank < swaps_until
            if highs.now() > deadline:
                break  # what is left is safe, only not as lean
            if ticker.due():
                log.info("%s: %d candidates tried, %d removed", phase, tried, removed + swapped)
            tried += 1
            trial = y.copy()
            trial[j] = False
            renewed = _renew(p, att, cheapest, trial, j, users, levels, deadline, swap)
            if renewed is None or (accept is not None and not accept(trial, j)):
                continue
            if (trial & ~y).any():
                swapped += 1
            else:
                removed += 1
            y = trial
            for k, support in renewed.items():
                users.renew(k, witness[k], support)
                witness[k] = support
    log.info(
        "%s: end, %d candidates tried, %d removed, %d swapped, %d cells suppressed",
        phase,
        tried,
        removed,
        swapped,
        int(y.sum()),
    )
    att.set_pattern(y)
    return y


class _Users:
    """Which requirements' witnesses use each cell: those at the start as a sparse
    matrix (cells x requirements, 5 bytes an entry), the witnesses renewed since in sets.
    A dict of Python sets for all of them held about 30 bytes an entry, and 8 flat
    dimensions of 3 leaves start with 9.5 million entries (300 MiB)."""

    def __init__(self, witness: list, n_cells: int):
        sizes = np.fromiter((np.size(w) for w in witness), np.int64, len(witness))
        indptr = np.concatenate(([0], np.cumsum(sizes)))
        cells = np.empty(int(indptr[-1]), np.int32 if n_cells < 2**31 else np.int64)
        for k, w in enumerate(witness):
            cells[indptr[k] : indptr[k + 1]] = w
        by_requirement = sp.csr_matrix(
            (np.ones(cells.size, bool), cells, indptr), shape=(len(witness), n_cells)
        )
        self._start = by_requirement.tocsc()  # a cell's requirements ascending
        self._renewed = np.zeros(len(witness), bool)
        self._since: dict[int, set[int]] = {}

    def of(self, cell: int) -> list[int]:
        """The requirements whose witness uses ``cell``, ascending."""
        at = self._start.indices[self._start.indptr[cell] : self._start.indptr[cell + 1]]
        found = set(at[~self._renewed[at]].tolist())
        return sorted(found | self._since.get(cell, set()))

    def renew(self, k: int, old, new) -> None:
        """Requirement ``k``'s witness ``old`` replaced by ``new``."""
        if self._renewed[k]:
            for c in np.asarray(old).tolist():
                self._since[c].discard(k)
        self._renewed[k] = True
        for c in np.asarray(new).tolist():
            self._since.setdefault(c, set()).add(k)


def _passes(p: SearchProblem, cheapest: Cheapest, accept: Callable | None) -> tuple[float, ...]:
    """The passes of :func:`remove_superfluous`: for each, the share of its candidates,
    dearest first, that may be swapped when a removal alone fails.

    Under intervals alone the swaps keep 1.0-2.5% of the value (docs/performance-journal.md),
    after a pass of plain removals: ``(0, 1)``. With aggregation rounds after the clean-up
    a second pass of swaps gained 0-0.2% of the value for 27-53% more time (60x60 and
    100x100 hier, 10x10x5), as the rounds added back what the swaps saved; with the trim
    after the rounds, one pass that swaps the dearest quarter of the candidates
    (:data:`SWAP_SHARE`) keeps less value on the 2-D hierarchical presets for 6-13% more
    solver work (docs/performance-journal.md, "Fifteenth stop"). Not on tables without
    boxes (flat 3-D and 4-D: each complement an LP over the whole table), where swaps were
    mixed (10x10x5 2.30 -> 2.39% of the value for twice the work, 8x6x5x4 2.38 -> 2.36%).
    The trim (``accept``) never swaps: its check covers the dropped cell's group alone."""
    if accept is not None:
        return (0.0,)
    if p.table.unions is None:
        return (0.0, 1.0)
    return (SWAP_SHARE,) if cheapest.boxes is not None else (0.0,)


def _renew(
    p: SearchProblem,
    att: Attacker,
    cheapest: Cheapest,
    trial: np.ndarray,
    j: int,
    users: _Users,
    levels: list,
    deadline: float,
    swap: bool,
) -> dict | None:
    """New witnesses of the requirements whose witness uses ``j``, for ``trial`` (``j``
    dropped; with ``swap``, cells added to ``trial`` in place, costing less than ``j``
    in all), or ``None`` when one is not met."""
    renewed: dict = {}
    attacker_set = False
    added = 0.0
    # A swap must hide another cell of each relation left publishing a sensitive cell, j
    # excepted (j back would cost all it saves): the dearest of their cheapest cells bounds
    # what it adds.
    need = users.of(j)
    if (
        need
        and (alone := _leaves_alone(p, cheapest.a_csc, trial, j))
        and (not swap or _least_addition(p, trial, j, alone) >= p.cost[j] * (1 - SWAP_GAIN_RTOL))
    ):
        return None
    for k in need:
        i, sense, level = levels[k]
        if highs.now() > deadline:
            return None  # not confirmed in time: the cell stays suppressed
        attack, outcome = cheapest.attack(i, sense, level, trial, p.room_up, p.room_down)
        if outcome == "optimal":
            renewed[k] = attack
            continue
        if swap:
            used, outcome = cheapest.support(i, sense, level, trial, p.room_up, p.room_down)
            if outcome != "optimal":
                return None
            new = used[~trial[used]]
            added += float(p.cost[new].sum())
            if added >= p.cost[j] * (1.0 - SWAP_GAIN_RTOL):
                return None
            trial[new] = True
            renewed[k] = used
            continue
        if outcome != "untried":
            # No attack on the boxes around the cell: it stays suppressed
            # rather than ask the whole pattern's attacker, which costs far more per
            # candidate (100x100 hier, seconds of clean-up: more candidates tried and
            # 0.997% of the value suppressed against 1.027%).
            return None
        if not attacker_set:
            att.set_pattern(trial)
            attacker_set = True
        value, _, outcome = att.reach(i, sense)
        if outcome != "optimal" or not highs.reaches(value, level, p.values[i]):
            return None
        if np.isfinite(value):
            found = att.deviation()
            cheapest.deviations.add(found)
            renewed[k] = found[0]
        else:
            renewed[k] = np.arange(len(trial))
    return renewed


def _leaves_alone(p: SearchProblem, a_csc, trial: np.ndarray, j: int) -> list[int]:
    """The relations through ``j`` in which ``trial`` (``j`` just dropped) leaves a
    sensitive cell the only hidden cell: each then publishes it exactly, so none of its
    requirements can be met (the search's relations are exact) and a removal is refused
    without an LP. Fischetti and Salazar's simplest bridgeless inequality, which exact's
    master also carries (seed 000, Secondary tabular data protection methods). On 100x100
    hier (seed 2) 1,089 of the 1,311 removals the clean-up and the trim refuse, each of
    which cost an attack LP."""
    rows = a_csc.indices[a_csc.indptr[j] : a_csc.indptr[j + 1]]
    alone = []
    for r in rows.tolist():
        cells = p.a.indices[p.a.indptr[r] : p.a.indptr[r + 1]]
        hidden = cells[trial[cells]]
        if len(hidden) == 1 and p.sensitive[hidden[0]]:
            alone.append(r)
    return alone


def _least_addition(p: SearchProblem, trial: np.ndarray, j: int, rows: list[int]) -> float:
    """A lower bound on the cost a swap of ``j`` adds: every relation in ``rows`` needs
    one more hidden cell other than ``j`` (:func:`_leaves_alone`), so it adds at least the
    cheapest such cell of the dearest relation; ``inf`` where a relation has none."""
    least = 0.0
    for r in rows:
        cells = p.a.indices[p.a.indptr[r] : p.a.indptr[r + 1]]
        open_ = cells[~trial[cells] & (cells != j)]
        least = max(least, float(p.cost[open_].min()) if open_.size else np.inf)
    return least


def check_pattern(
    p: SearchProblem,
    y: np.ndarray,
    screen_only: bool = False,
    proven: set | None = None,
    deviations: Deviations | None = None,
    until: float | None = None,
    proof_only: bool = False,
):
    """The aggregation check of pattern ``y`` (cells derived through the a-priori bounds
    are left to the final audit) by ``until`` (default the search's deadline), or
    ``None`` without contributions or a union rule; ``proven`` and ``deviations`` as in
    :func:`service.sdc.aggregations.check_aggregations`."""
    if p.table.unions is None:
        return None
    return check_aggregations(
        p.table.structure,
        p.values,
        y,
        p.table.unions,
        deadline=p.deadline if until is None else until,
        screen_only=screen_only,
        proof_only=proof_only,
        proven=proven,
        deviations=deviations,
    )


def protect_aggregations(
    p: SearchProblem,
    y: np.ndarray,
    cheapest: Cheapest,
    max_rounds: int = 200,
    proven: set | None = None,
    deviations: Deviations | None = None,
):
    """Suppress until no aggregation is sensitive (fast method; the incumbent of exact).

    The check runs with the screen only; every sensitive atom it cannot prove, and the
    atom each sensitive aggregation found attacks, gets the deviations the screen needs
    (:class:`service.sdc.aggregations.Requirements`), each met by the cheapest complements
    as in :func:`protect`, until the screen proves every group. A group it cannot handle (a
    holding spanning cells) is left to the full check of the final audit; so is a pattern
    whose requirements are all met while the screen still fails an atom (:func:`_audit`:
    returned if the audit calls it safe, else a relation of an aggregation it found is
    opened, :func:`_open_relations`). Returns (pattern or None, why). ``proven``
    collects the groups proven safe (see
    :func:`service.sdc.aggregations.check_aggregations`), for the final audit of the
    same table; ``deviations``, the pool of kept deviations (made here if not given),
    for :func:`trim` after."""
    if p.table.unions is None:
        return y, ""
    log.info("aggregations: start, %d cells suppressed", int(y.sum()))
    needs = Requirements(p.table.structure, p.table.unions)
    room_cap = np.maximum(p.room_up, p.room_down)
    y = y.copy()
    proven = set() if proven is None else proven
    # The screen's deviations of a round, and the search's complements and attacks so
    # far, prove anchors of the next without an LP.
    if deviations is None:
        deviations = Deviations(p.table.structure, p.table.unions)
    ticker = _Ticker()
    cheapest.reset()
    for round_ in range(1, max_rounds + 1):
        deviations.add_cells(cheapest.deviations.take(), y)
        check = check_pattern(p, y, screen_only=True, proven=proven, deviations=deviations)
        if check.status == "undecided" and highs.now() >= p.deadline:
            # Groups left undecided by the clock, not by the screen: not protected.
            log.info("aggregations: round %d, time limit reached", round_)
            return None, "time limit reached protecting aggregations of suppressed cells"
        # Every requirement carries a room over all cells: expanded one anchor at a time,
        # in the same order as a list would be (they do not depend on the pattern), not all
        # up front, which held requirements x cells floats (issue 16 part 3: 1,411 x 59,049,
        # about 0.6 GiB, in round 1 on a 220x220 table with 2-level hierarchies).
        anchors = [functools.partial(needs.of, found) for found in check.found]
        anchors += [functools.partial(needs.at, *failed) for failed in dict.fromkeys(check.failing)]
        log.info(
            "aggregations: round %d, %d groups with a sensitive cell, %d proven, "
            "%d sensitive, %d cells the screen did not prove, %d cells to protect, %.1f s check",
            round_,
            check.groups,
            check.screened,
            len(check.found),
            len({failed[:2] for failed in check.failing}),
            len(anchors),
            check.seconds,
        )
        todo = (r for expand in anchors for r in expand())
        first = next(todo, None)
        if first is None:
            log.info("aggregations: end after %d rounds, %d cells suppressed", round_, int(y.sum()))
            return y, ""
        before = int(y.sum())
        for done, need in enumerate(itertools.chain([first], todo)):
            anchor, level = need.cell, need.level
            if ticker.due():
                log.info(
                    "aggregations: round %d, %d requirements met (%d cells to protect), "
                    "%d cells suppressed",
                    round_,
                    done,
                    len(anchors),
                    int(y.sum()),
                )
            room = np.minimum(need.room, room_cap)
            # Most requirements of a round are met by the cells added earlier in it (on
            # 20x20x10, 197 of 235 that no kept deviation proved): an attack within the
            # pattern says so before the cheapest complement is searched for, as in protect.
            if cheapest.attack(anchor, 1.0, level, y, room, room)[1] == "optimal":
                continue
            used, outcome = cheapest.support(anchor, 1.0, level, y, room, room)
            if outcome == "infeasible":
                # The level is the screen's sufficient condition (partners, holdings'
                # lift), not a proof that no pattern protects the cell: say only that.
                return None, (
                    f"cell {anchor}: no complement among the cells allowed meets the "
                    "aggregation screen's requirement (a sufficient condition for safety "
                    "against aggregations of suppressed cells, not a necessary one)"
                )
            if outcome != "optimal":
                return None, (
                    "time limit reached protecting aggregations of suppressed cells"
                    if outcome == "time_limit"
                    else f"protection LP ended with status {outcome!r}"
                )
            y[used] = True
        if int(y.sum()) > before:
            continue
        # No cell added: open a relation an aggregation the screen found is read from.
        # With none found, every requirement was met without the screen proving every
        # atom: the final audit decides (its MIP, and cells the intervals pin down
        # counted as published): the pattern as it is if safe, else it opens a relation
        # of an aggregation the audit found.
        found = check.found
        if not found:
            audit = _audit(p, y, proven)
            if audit.safe:
                log.info("aggregations: end after %d rounds, audited safe", round_)
                return y, ""
            found = () if audit.aggregations is None else audit.aggregations.found
        if not _open_relations(p, y, found):
            break
    return None, UNSETTLED


def trim(
    p: SearchProblem,
    att: Attacker,
    cheapest: Cheapest,
    y: np.ndarray,
    witness: list,
    proven: set,
    deviations: Deviations,
    deadline: float,
) -> np.ndarray:
    """Drop the secondary cells that the aggregation rounds made superfluous, most
    expensive first, until ``deadline``: the clean-up of :func:`remove_superfluous` once
    more, a removal standing only if the aggregation check's screen proves every group
    of hidden cells it leaves where the cell's group was. The rounds add cells for the
    aggregations that the protection's complements then no longer need (60x60 hier,
    seed 1: 19 of the 80 most expensive secondary cells could go, 1.006% -> 0.945% of
    the value, judged by the full audit).

    Why that proves the trial: the aggregations of a group depend on its hidden cells
    alone (:func:`service.sdc.aggregations.hidden_groups`), and removing ``j`` only
    splits the group that held it; so the check runs on that group's hidden cells less
    ``j`` (every group the trial has there, whole), and the other groups keep their
    verdicts. Cells of groups the screen leaves undecided (a holding spanning cells,
    unknown contributions) are not tried, nor those of groups over
    :data:`TRIM_GROUP_CELLS`. The final audit judges the result in full, as ever.
    ``witness`` must hold a witness of every requirement within ``y`` (the clean-up's,
    still valid: the rounds only add cells); groups proven on the way join ``proven``;
    ``deviations`` is the rounds' pool (:func:`protect_aggregations`).

    The dearest candidates go first, by cost alone. The cells the rounds added used to
    count three times their cost (they go about three times as often: the expected
    saving of a trial, when the trim's box held 60% of it); with the box holding nearly
    all of it, cost alone leaves less value on every 2-D hierarchical preset
    (deterministic mode, seeds 0-2: 100x100 0.8847 / 0.8863 / 0.8676% -> 0.8837 / 0.8844
    / 0.8633%, 60x60 0.8697 / 0.8673 / 0.9276% -> 0.8683 / 0.8635 / 0.9276%, 2-5% more
    solver work) and on larger ones on the wall clock (200x200 and 300x300 with 2-level
    hierarchies, seed 1: 0.8491 -> 0.8480%, 0.8660 -> 0.8647%, the same seconds)."""
    if p.table.unions is None:
        return y
    group = hidden_groups(p.table.structure, p.table.unions, y)
    sizes = np.bincount(group[y], minlength=1)
    keep = y & (sizes[np.maximum(group, 0)] > TRIM_GROUP_CELLS)
    if not (y & ~p.forced & ~keep).any():
        return y
    base = check_pattern(
        p, y, screen_only=True, proven=proven, deviations=deviations, until=deadline
    )
    if base.found or base.failing:
        return y
    keep[base.undecided] = True
    # The hidden cells of each group, label by label, so that a trial's part is made
    # from its group alone (a full-length comparison per trial cost about a millisecond
    # at 10^6 cells).
    hidden = np.flatnonzero(y)
    by_label = np.argsort(group[hidden], kind="stable")
    first = np.searchsorted(group[hidden][by_label], np.arange(group.max() + 2))

    trials = Trials(p.table.structure, p.values, p.table.unions, deadline, proven, deviations)

    def accept(trial: np.ndarray, j: int) -> bool:
        # The part of the pattern that held ``j``'s group as the trim began, as it stands
        # (sorted): removals only split groups.
        cells = hidden[by_label[first[group[j]] : first[group[j] + 1]]]
        now = cells[trial[cells] | (cells == j)]
        verdict = trials.without(now, j)
        if verdict is None:
            # An atom of j in another hidden cell: the smaller pattern's own check.
            part = np.zeros(len(trial), bool)
            part[cells] = trial[cells]
            check = check_pattern(
                p, part, proof_only=True, proven=proven, deviations=deviations, until=deadline
            )
            return check.status == "safe"
        if verdict:
            trials.accepted(now[now != j])
        return verdict

    return remove_superfluous(p, att, cheapest, y, witness, deadline, accept, "trim", keep)


#: The trim leaves the cells of groups larger than this: each trial re-screens the group
#: of its cell. Measured on the fast method's patterns (seed 1): 60x60 and 100x100 hier
#: have 41 and 114 groups of at most 30 hidden cells (a trial: 3-6 ms); 10x10x5, 8x6x5x4
#: and 20x20x10 one group of 149-870 (a trial: 0.1-2 s, and their trims removed 1 cell
#: in 2.2 s, 10 in 266 s and 12 in 435 s).
TRIM_GROUP_CELLS = 100


#: Why :func:`protect_aggregations` stopped when its rounds could not settle every group:
#: the final audit (with the full check) decides, as after a time limit.
UNSETTLED = "aggregations of suppressed cells could not be made safe"


def _audit(p: SearchProblem, y: np.ndarray, proven: set, end: float | None = None):
    """The final audit of ``y`` (``proven``: the groups proven so far, see
    :func:`service.sdc.aggregations.check_aggregations`) on the wall clock until ``end``,
    by default the search's end (deterministic mode: its wall deadline). The rounds' last
    resort (:func:`protect_aggregations`; found by a helper's property test: a 3-D table
    with empty leaves under the (p,q)-rule, whose rounds met every requirement without the
    screen proving every atom and ended with no pattern, while the audit called their
    pattern safe), and the fast method's final audit (:func:`audited`)."""
    if end is None:
        c = highs.clock()
        end = c.wall_deadline if isinstance(c, highs.WorkClock) else p.deadline
    return audit_pattern(p.table, y, time_limit=max(end - time.perf_counter(), 1e-3), proven=proven)


#: Repairs of a pattern the final audit rejects for a sensitive aggregation (:func:`audited`).
AUDIT_REPAIRS = 5


def audited(
    p: SearchProblem,
    cheapest: Cheapest,
    y: np.ndarray,
    proven: set,
    deviations: Deviations,
    end: float,
):
    """``(pattern, its final audit)`` for the fast method: ``y`` audited until ``end``
    (wall clock), and where the audit finds a sensitive aggregation (with the cells the
    intervals pin down counted as published, which the rounds leave to the audit), a
    relation it is read from opened (:func:`_open_relations`) and the rounds run again
    (:func:`protect_aggregations`), up to :data:`AUDIT_REPAIRS` times while the search
    has time left; the last pattern and its audit otherwise. Found on the wide
    brute-force tests' small tables (2026-11-27): 44 of 298 got no pattern, 40 of them
    for "1 sensitive aggregation" the final audit found, though hiding every cell was
    safe in all 44."""
    audit = _audit(p, y, proven, end)
    for _ in range(AUDIT_REPAIRS):
        found = () if audit.safe or audit.aggregations is None else audit.aggregations.found
        trial = y.copy()
        if not found or highs.now() >= p.deadline or not _open_relations(p, trial, found):
            break
        repaired, _ = protect_aggregations(p, trial, cheapest, proven=proven, deviations=deviations)
        if repaired is None:
            break
        y = repaired
        audit = _audit(p, y, proven, end)
    return y, audit


def _open_relations(p: SearchProblem, y: np.ndarray, found) -> int:
    """The rounds' fallback when a round's requirements add no cell: for each sensitive
    aggregation in ``found``, suppress the cheapest published cell that may be a
    complement in one of the relations it is read from (those with fewest hidden cells
    first), so that no longer publishes it; the next check judges the new pattern.
    Returns how many cells were added (0: nothing left to open).

    Why: the requirements protect the atom an aggregation attacks, which can be met while
    the aggregation stays published exactly (a 1,004,004-cell table: two sensitive cells,
    the only hidden ones of a relation, their sum's union sensitive under the p%-rule,
    each cell movable by its level against the other; 200 rounds added nothing and the
    search ended with no pattern). Each call adds a cell, so the rounds end."""
    added = 0
    for aggregation in found:
        rows = [
            (int(y[p.a.indices[p.a.indptr[r] : p.a.indptr[r + 1]]].sum()), r)
            for r in aggregation.relations.tolist()
        ]
        for _, r in sorted(rows):
            cells = p.a.indices[p.a.indptr[r] : p.a.indptr[r + 1]]
            free = cells[~y[cells] & p.allowed[cells]]
            if free.size:
                y[free[np.argmin(p.cost[free])]] = True
                added += 1
                break
    return added
