"""The fast method: cheapest complementary sets one requirement at a time, a clean-up,
and the protection of aggregations (see :mod:`service.sdc.suppress`)."""

from __future__ import annotations

import numpy as np

from .. import highs
from ..aggregations import Requirements, check_aggregations
from .lps import Attacker, Cheapest
from .problem import SearchProblem, requirements


def protect(p: SearchProblem, att: Attacker, cheapest: Cheapest):
    """Protect one requirement at a time by a cheapest complementary set (module doc).

    Returns (pattern, status, message, protection LPs, witnesses); when the time runs out
    the pattern is ``None``, the status ``time_limit`` and the last item the partial
    pattern with the requirements not yet met or checked, ``(y, [(i, sense, level)])``:
    every earlier requirement is met by that pattern (its deviation stays feasible)."""
    y = p.forced.copy()
    iters = 0
    witness = []
    late = "time limit reached before every sensitive cell was protected"
    levels = requirements(p)
    for k, (i, sense, level) in enumerate(levels):
        # Already protected by earlier suppressions: a local attack, then the whole table's.
        attack, outcome = cheapest.support(
            i, sense, level, y, p.room_up, p.room_down, within_pattern=True
        )
        if outcome == "optimal":
            witness.append(attack)
            continue
        used, outcome = cheapest.support(i, sense, level, y, p.room_up, p.room_down)
        iters += 1
        if outcome == "infeasible":
            return (
                None,
                "no_safe_pattern",
                (
                    f"cell {i} cannot be protected {'upwards' if sense > 0 else 'downwards'} by "
                    f"{level:g} with the cells allowed as complements (forbidden, zero cells)"
                ),
                iters,
                None,
            )
        if outcome == "time_limit":
            return None, "time_limit", late, iters, (y, levels[k:])
        if outcome != "optimal":
            return (
                None,
                "no_safe_pattern",
                f"protection LP ended with status {outcome!r}",
                iters,
                None,
            )
        y[used] = True
        witness.append(used)
    return y, "feasible", "every sensitive cell protected", iters, witness


def remove_superfluous(
    p: SearchProblem,
    att: Attacker,
    cheapest: Cheapest,
    y: np.ndarray,
    witness: list,
    deadline: float,
) -> np.ndarray:
    """Drop secondary suppressions, most expensive first, while all stay protected.

    Each requirement keeps the support of an attack that reaches its level (a witness,
    from :func:`protect`); removing a cell outside every witness cannot stop any attack, so
    only the requirements whose witness uses the cell are solved again, first by a local
    attack (:meth:`Cheapest.support` within the pattern), then on the whole table."""
    levels = requirements(p)
    witness = list(witness)
    candidates = np.flatnonzero(y & ~p.forced)
    for j in candidates[np.argsort(-p.cost[candidates], kind="stable")].tolist():
        if highs.now() > deadline:
            break  # what is left is safe, only not as lean
        trial = y.copy()
        trial[j] = False
        renewed, ok, attacker_set = {}, True, False
        for k, (i, sense, level) in enumerate(levels):
            if j not in witness[k]:
                continue
            if highs.now() > deadline:
                ok = False  # not confirmed in time: the cell stays suppressed
                break
            attack, outcome = cheapest.support(
                i, sense, level, trial, p.room_up, p.room_down, within_pattern=True
            )
            if outcome == "optimal":
                renewed[k] = attack
                continue
            if not attacker_set:
                att.set_pattern(trial)
                attacker_set = True
            value, _, outcome = att.reach(i, sense)
            if outcome != "optimal" or not highs.reaches(value, level, p.values[i]):
                ok = False
                break
            renewed[k] = att.support() if np.isfinite(value) else np.arange(len(y))
        if ok:
            y = trial
            for k, support in renewed.items():
                witness[k] = support
    att.set_pattern(y)
    return y


def check_pattern(
    p: SearchProblem, y: np.ndarray, screen_only: bool = False, proven: set | None = None
):
    """The aggregation check of pattern ``y`` (cells derived through the a-priori bounds
    are left to the final audit), or ``None`` without contributions or a union rule."""
    if p.table.unions is None:
        return None
    return check_aggregations(
        p.table.structure,
        p.values,
        y,
        p.table.unions,
        deadline=p.deadline,
        screen_only=screen_only,
        proven=proven,
    )


def protect_aggregations(
    p: SearchProblem, y: np.ndarray, cheapest: Cheapest, max_rounds: int = 200
):
    """Suppress until no aggregation is sensitive (fast method; the incumbent of exact).

    The check runs with the screen only; every sensitive atom it cannot prove, and the
    atom each sensitive aggregation found attacks, gets the deviations the screen needs
    (:class:`service.sdc.aggregations.Requirements`), each met by the cheapest complements
    as in :func:`protect`, until the screen proves every group. A group it cannot handle (a
    holding spanning cells) is left to the full check of the final audit. Returns
    (pattern or None, why)."""
    if p.table.unions is None:
        return y, ""
    needs = Requirements(p.table.structure, p.table.unions)
    room_cap = np.maximum(p.room_up, p.room_down)
    y = y.copy()
    proven: set = set()
    for _ in range(max_rounds):
        check = check_pattern(p, y, screen_only=True, proven=proven)
        if check.status == "undecided" and highs.now() >= p.deadline:
            # Groups left undecided by the clock, not by the screen: not protected.
            return None, "time limit reached protecting aggregations of suppressed cells"
        todo = [r for found in check.found for r in needs.of(found)]
        todo += [r for k, atom in dict.fromkeys(check.failing) for r in needs.at(k, atom)]
        if not todo:
            return y, ""
        for anchor, level, room in todo:
            room = np.minimum(room, room_cap)
            used, outcome = cheapest.support(anchor, 1.0, level, y, room, room)
            if outcome == "infeasible":
                return None, (
                    f"cell {anchor} cannot be protected against aggregations of "
                    "suppressed cells with the cells allowed as complements"
                )
            if outcome != "optimal":
                return None, (
                    "time limit reached protecting aggregations of suppressed cells"
                    if outcome == "time_limit"
                    else f"protection LP ended with status {outcome!r}"
                )
            y[used] = True
    return None, "aggregations of suppressed cells could not be made safe"
