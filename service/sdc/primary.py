"""Primary sensitivity of magnitude cells and their protection levels.

:func:`assess` evaluates a rule set on the ordered magnitudes of all cells at once: each
rule's measure ``S``, which rules fire, the verdict, and the upper and lower protection
levels from the rule that demands the most (seed 000, table "Upper protection levels").

Policies for cells the rules do not speak to (documented in the README too):

* Empty cells (no contributors): status ``empty``, never sensitive, protection 0, as
  tau-ARGUS treats them; ``empty_cells="sensitive"`` makes them unsafe instead (for
  structural zeros whose emptiness itself is confidential).
* Cells whose contributions are all zero: ``zero_cells="rules"`` (default) applies the
  rules as written, so the (p,q) rule flags them (seed 002 section 2) and the strict
  rules do not; ``"sensitive"`` flags them whatever the rules; ``"safe"`` never does.
* Lower protection level = upper protection level, "out of symmetry considerations"
  (seed 000, after the protection-level table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .errors import InputError
from .magnitudes import Magnitudes, NegativePolicy
from .rules import Rule

ZeroPolicy = Literal["rules", "sensitive", "safe"]
EmptyPolicy = Literal["safe", "sensitive"]

STATUS_SAFE, STATUS_UNSAFE, STATUS_EMPTY = "safe", "unsafe", "empty"


@dataclass(frozen=True)
class RuleSet:
    """Rules evaluated together, with the policies that go with them.

    Attributes
    ----------
    rules : tuple of Rule
        A cell is sensitive when any rule fires (seed 003 B.1.d, the combination rule).
    negative : NegativePolicy
    zero_cells : {"rules", "sensitive", "safe"}
    empty_cells : {"safe", "sensitive"}
    frequency_range : float
        Percent of the cell value used as protection level when only frequency rules fire.
    """

    rules: tuple[Rule, ...]
    negative: NegativePolicy = field(default_factory=NegativePolicy)
    zero_cells: ZeroPolicy = "rules"
    empty_cells: EmptyPolicy = "safe"
    frequency_range: float = 0.0

    @property
    def depth(self) -> int:
        """Largest contributions the rules read (at least two, for reporting ``x_1, x_2``)."""
        return max([2, *(r.depth for r in self.rules)])

    @property
    def has_concentration_rule(self) -> bool:
        return any(r.concentration for r in self.rules)

    def effective_rules(self) -> tuple[Rule, ...]:
        """The rules as evaluated: relaxed to ``p/f``, ``k_f`` under ``negative.mode ==
        "relaxed"`` (seed 004 strategy 1), unchanged otherwise."""
        if self.negative.mode != "relaxed":
            return self.rules
        relaxed = tuple(r.relaxed(self.negative.relaxation) for r in self.rules)
        for rule in relaxed:
            params = [getattr(rule, name) for name in ("p", "k") if hasattr(rule, name)]
            if any(not 0.0 < v < 100.0 for v in params):
                raise InputError(
                    "the relaxation factor takes a rule parameter outside (0, 100)",
                    field="rules.negative_values.factor",
                )
        return relaxed


@dataclass(frozen=True)
class Assessment:
    """Verdicts for all cells.

    Attributes
    ----------
    sensitivity : ndarray, shape (rules, m)
        Each rule's measure ``S``; NaN where the rule does not apply (a concentration rule
        on a cell where every contributor waived protection, or an empty cell).
    fired : ndarray of bool, shape (rules, m)
    sensitive : ndarray of bool, shape (m,)
    status : ndarray of str, shape (m,)
        ``safe``, ``unsafe`` or ``empty``.
    zero_forced : ndarray of bool, shape (m,)
        Sensitive by the zero-cell policy ``"sensitive"`` or the empty-cell policy.
    upper_protection, lower_protection : ndarray, shape (m,)
        0 where the cell is not sensitive.
    """

    sensitivity: np.ndarray
    fired: np.ndarray
    sensitive: np.ndarray
    status: np.ndarray
    zero_forced: np.ndarray
    upper_protection: np.ndarray
    lower_protection: np.ndarray


def assess(m: Magnitudes, ruleset: RuleSet) -> Assessment:
    """Evaluate every rule of ``ruleset`` on every cell of ``m``.

    Parameters
    ----------
    m : Magnitudes
        From :func:`service.sdc.magnitudes.from_contributions` or ``from_summaries``.
    ruleset : RuleSet

    Returns
    -------
    Assessment

    Notes
    -----
    A cell is sensitive when any rule fires (seed 003 B.1.d: the combination
    ``max(S^a, S^b)`` of subadditive measures is a subadditive measure). Its upper
    protection level is the largest level among the concentration rules that fired, or,
    where only frequency rules fired, ``frequency_range`` percent of the cell value; the
    lower level is the same (seed 000, after table "Upper protection levels").
    """
    rules = ruleset.effective_rules()
    n_rules, n_cells = len(rules), m.n_cells
    empty = m.empty
    s = np.empty((n_rules, n_cells))
    fired = np.zeros((n_rules, n_cells), bool)
    level = np.zeros((n_rules, n_cells))
    for i, rule in enumerate(rules):  # a loop over the few rules; each is vectorised over cells
        applies = ~empty & (m.protectable if rule.concentration else True)
        si = rule.sensitivity(m)
        s[i] = np.where(applies, si, np.nan)
        fired[i] = applies & rule.fires(si)
        level[i] = np.where(fired[i], rule.upper_protection(m, ruleset.frequency_range), 0.0)

    # The frequency range is the level of cells that only frequency rules flag (seed 000,
    # after the protection-level table); where a concentration rule fired, its level holds.
    frequency = np.array([not r.concentration for r in rules], bool)
    if frequency.any() and not frequency.all():
        by_concentration = fired[~frequency].any(axis=0)
        level[frequency] = np.where(by_concentration, 0.0, level[frequency])

    zero = m.all_zero
    if ruleset.zero_cells == "safe":
        fired[:, zero] = False
        level[:, zero] = 0.0
    forced = np.zeros(n_cells, bool)
    if ruleset.zero_cells == "sensitive":
        forced |= zero
    if ruleset.empty_cells == "sensitive":
        forced |= empty

    sensitive = fired.any(axis=0) | forced
    upper = np.maximum(level.max(axis=0, initial=0.0), 0.0)
    status = np.where(sensitive, STATUS_UNSAFE, np.where(empty, STATUS_EMPTY, STATUS_SAFE))
    return Assessment(
        sensitivity=s,
        fired=fired,
        sensitive=sensitive,
        status=status,
        zero_forced=forced,
        upper_protection=upper,
        lower_protection=upper.copy(),
    )
