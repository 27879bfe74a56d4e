"""Primary sensitivity rules as linear sensitivity measures (seed 003 B.1).

Every rule maps the ordered magnitudes of all cells to a sensitivity value ``S`` per cell,
normalised so that the weight of the protected contribution is 1 (seed 003 B.1), and to
an upper protection level (seed 000, table "Upper protection levels"). A cell is sensitive
under a rule when ``S > 0``, or ``S >= 0`` for the (p,q) rule (seed 002 section 2).

Rules share one interface, so a new rule is a new class and an entry in :data:`RULES`,
and nothing else changes (the GaussSuppression design named in DESIGN.md).

Readings chosen where the seeds leave room:

* (p,q) fires on ``S >= 0`` (seed 002 section 2, "sensitive if and only if S >= 0"),
  although seed 003 B.1.b writes ``> 0``: only the inclusive reading makes a cell whose
  contributions are all zero unsafe, which seed 002 argues for explicitly. The p%-rule
  keeps the strict inequality of seed 000 and seed 003 B.1.a.
* Coalitions (seed 003 B.1.a): the p%- and (p,q)-rules take a coalition size ``c``;
  the intruders subtract ``x_2 .. x_{c+1}``. The protection level generalises the seed 000
  table the same way: ``p/100 x_1 - (X - x_1 - ... - x_{c+1})``.
* Request rule (seed 000, "Foreign trade rules"): the seed protects the largest
  contributor when it asked for protection and contributes over k% of the total. We test
  the largest contribution among the respondents that asked, so a cell where the largest
  contributor asked is judged exactly as the seed says, and a requester that is not the
  largest is protected too. Its measure and protection level are those of the (1,k) rule
  applied to the requester's contribution.
* Minimum frequency: not a linear measure of magnitudes; ``S = n - N`` (the contributors
  missing) so that ``S > 0`` exactly when ``N < n``. Its protection level is 0 or a
  configured percentage of the cell value (seed 000, after the protection-level table).
* Exact ties (issue 20): the seeds' comparisons are statements about real numbers: strict
  for the p%-rule (seed 000 eq-p-percent-formula ``<``, seed 003 B.1.a ``S > 0``), the
  dominance and request rules (seed 000 eq-dominance-formula ``>``, seed 003 B.1.c) and the
  minimum frequency rule (``N < n``), inclusive for (p,q) (seed 002 section 2, ``S >= 0``).
  A cell whose real-arithmetic ``S`` is exactly 0 (e.g. 84, 10.8, 1.1, 0.7 at p = 15
  without coalition: ``0.15 x 84 = 12.6 = 10.8 + 1.1 + 0.7``) must therefore be safe under
  the strict rules and sensitive under (p,q), but floating point gives ``S = +-1e-14`` or
  so. Every rule therefore reads ``|S| <= tol`` as ``S = 0`` and then applies its own
  comparison: :meth:`sensitivity` reports such an ``S`` as exactly 0, ``fires`` is
  ``S > tol`` for the strict rules and ``S >= -tol`` for (p,q), and the upper protection
  level of a tie (which is a positive multiple of ``S``, so 0 in real arithmetic) is
  exactly 0. The tolerance is ``tol = TIE_RTOL * scale`` with ``TIE_RTOL = 1e-9`` and
  ``scale`` the sum of the magnitudes of the terms the measure adds up, each times its
  coefficient in ``S``: for ``S = a - w b`` (``a`` the protected amount, ``b = X - T`` the
  remainder, ``T`` the amounts subtracted, ``w`` the rule's weight ``100/p``, ``q/p`` or
  ``k/(100-k)``) it is ``|a| + w (|X| + |T|)``, which bounds the rounding of the summed
  totals and of the subtraction ``X - T``. For the minimum frequency rule it is
  ``n + |N|``: below 1 for any realistic count, so integer counts compare exactly and
  only a weighted count within ``1e-9`` relative of ``n`` is a tie (ten weights of 0.3 add
  up to ``2.9999999999999996``, which is ``N = 3``).
  A true ``S`` closer to 0 than ``1e-9`` of the cell's magnitudes is read as a tie too;
  figures are not known that precisely.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from . import conversions
from .magnitudes import Magnitudes

#: Relative tolerance under which a measure ``S`` is an exact tie ``S = 0`` (module
#: docstring, "Exact ties"); the absolute tolerance is this times the rule's ``tie_scale``.
TIE_RTOL = 1e-9


class _TieAware(ABC):
    """What every rule shares: the tie tolerance, the measure with ties set to exactly 0,
    and ``fires`` by the rule's own comparison (module docstring, "Exact ties").

    A rule defines ``_measure(m)``, ``tie_scale(m)`` and the class attribute ``inclusive``
    (``S >= 0`` fires, else ``S > 0``).
    """

    inclusive: ClassVar[bool] = False

    @abstractmethod
    def _measure(self, m: Magnitudes) -> np.ndarray:
        """``S`` per cell as floating point computes it."""

    @abstractmethod
    def tie_scale(self, m: Magnitudes) -> np.ndarray:
        """Per cell, the magnitude of the terms ``S`` adds up (module docstring)."""

    def tie_tolerance(self, m: Magnitudes) -> np.ndarray:
        """Per cell, the ``|S|`` at or below which ``S`` is read as exactly 0:
        ``TIE_RTOL * tie_scale(m)``."""
        return TIE_RTOL * self.tie_scale(m)

    def _tie(self, m: Magnitudes) -> np.ndarray:
        return np.abs(self._measure(m)) <= self.tie_tolerance(m)

    def sensitivity(self, m: Magnitudes) -> np.ndarray:
        """The measure ``S`` per cell, exactly 0 where it is within the tie tolerance."""
        s = self._measure(m)
        return np.where(np.abs(s) <= self.tie_tolerance(m), 0.0, s)

    def fires(self, s: np.ndarray, m: Magnitudes | None = None) -> np.ndarray:
        """Whether the cells with measure ``s`` are sensitive under this rule.

        With ``m`` (the cells' magnitudes, aligned with ``s``), ``|s| <= tie_tolerance(m)``
        is a tie, ``S = 0``: a strict rule fires when ``s > tol``, the inclusive (p,q) rule
        when ``s >= -tol``. Without ``m`` the comparison is exact, which is the same verdict
        for an ``s`` from :meth:`sensitivity` (ties are exactly 0 there already).
        """
        s = np.asarray(s, dtype=float)
        tol = 0.0 if m is None else self.tie_tolerance(m)
        return s >= -tol if self.inclusive else s > tol

    def _tie_level(self, m: Magnitudes, level: np.ndarray) -> np.ndarray:
        """``level`` with ties at exactly 0: every concentration rule's upper protection
        level is a positive multiple of its ``S``, hence 0 at a tie."""
        return np.where(self._tie(m), 0.0, level)


@dataclass(frozen=True)
class MinimumFrequency(_TieAware):
    """Minimum frequency rule (seed 000, table "Sensitivity rules"): unsafe when ``N < n``.

    The measure is ``S = n - N``. Empty cells (``N = 0``) are left to the empty-cell
    policy of :func:`service.sdc.primary.assess`. Ties (module docstring): scale
    ``n + |N|``, so integer counts compare exactly and a weighted count that rounds to just
    below ``n`` (ten weights of 0.3 against ``n = 3``) is ``N = n``, safe.
    """

    n: int
    kind: ClassVar[str] = "frequency"
    concentration: ClassVar[bool] = False

    @property
    def depth(self) -> int:
        return 1

    def _measure(self, m: Magnitudes) -> np.ndarray:
        return self.n - m.count

    def tie_scale(self, m: Magnitudes) -> np.ndarray:
        return self.n + np.abs(m.count)

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        """0 (seed 000 recommends it) or ``frequency_range`` percent of the cell value."""
        return frequency_range / 100.0 * np.abs(m.value)

    def relaxed(self, f: float) -> MinimumFrequency:
        return self


@dataclass(frozen=True)
class Dominance(_TieAware):
    """(n,k)-dominance rule.

    ``S = sum_{i<=n} x_i - k/(100-k) sum_{i>n} x_i`` (seed 003 B.1.c), sensitive when
    ``S > 0``, i.e. ``x_1 + ... + x_n > k/100 X`` (seed 000, eq-dominance-formula).
    Upper protection level ``100/k (x_1 + ... + x_n) - X`` (seed 000, table "Upper
    protection levels"), which is ``(100-k)/k S``; with ``n = 1`` this is the (1,k) row.
    Ties (module docstring): scale ``|T| + k/(100-k) (|X| + |T|)``, ``T = x_1 + ... + x_n``;
    ``x_1 + ... + x_n = k/100 X`` exactly is safe, with protection level 0.
    """

    n: int
    k: float
    kind: ClassVar[str] = "dominance"
    concentration: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return self.n

    def _measure(self, m: Magnitudes) -> np.ndarray:
        top = m.top_sum(self.n)
        return top - self.k / (100.0 - self.k) * (m.total - top)

    def tie_scale(self, m: Magnitudes) -> np.ndarray:
        top = np.abs(m.largest[:, : self.n]).sum(axis=1)
        return top + self.k / (100.0 - self.k) * (np.abs(m.total) + top)

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return self._tie_level(m, 100.0 / self.k * m.top_sum(self.n) - m.total)

    def relaxed(self, f: float) -> Dominance:
        return Dominance(self.n, conversions.k_relaxed(self.k, f))


def _coalition_remainder(m: Magnitudes, c: int) -> np.ndarray:
    """``X - x_1 - ... - x_{c+1}``: what the largest contributor's value is hidden in once
    a coalition of ``c`` (the next largest) subtracts its own (seed 003 B.1.a)."""
    return m.total - m.top_sum(c + 1)


def _coalition_scale(m: Magnitudes, c: int, weight: float) -> np.ndarray:
    """Tie scale of ``S = x_1 - weight (X - x_1 - ... - x_{c+1})`` (module docstring)."""
    subtracted = np.abs(m.largest[:, : c + 1]).sum(axis=1)
    return np.abs(m.target) + weight * (np.abs(m.total) + subtracted)


def _second_level(m: Magnitudes, coef: float, remainder: np.ndarray) -> np.ndarray:
    """``coef x_2 - (X - x_1 - ... - x_{c+1})``: a concentration rule's level for the
    second largest amount against a coalition holding the largest and the next ``c - 1``
    (the same remainder as the largest's). Without noise it never exceeds the largest's;
    with a fixed noise per respondent the largest is left another noise than the others
    (:func:`service.sdc.noise.noise_left_to_largest`)."""
    second = m.largest[:, 1] if m.largest.shape[1] > 1 else np.zeros(len(m.target))
    return coef * second - remainder


@dataclass(frozen=True)
class PPercent(_TieAware):
    """p%-rule with coalitions of size ``c``.

    ``S = x_1 - 100/p sum_{i>=c+2} x_i`` (seed 003 B.1.a), sensitive when ``S > 0``,
    i.e. ``X - x_2 - x_1 < p/100 x_1`` for ``c = 1`` (seed 000, eq-p-percent-formula).
    Upper protection level ``p/100 x_1 - (X - x_1 - x_2)`` (seed 000, table "Upper
    protection levels", proved in its Example 5), which is ``p/100 S``. Ties (module
    docstring): scale ``|x_1| + 100/p (|X| + |x_1 + ... + x_{c+1}|)``; a cell with
    ``X - x_1 - ... - x_{c+1} = p/100 x_1`` exactly is safe, with protection level 0.
    """

    p: float
    c: int = 1
    kind: ClassVar[str] = "p_percent"
    concentration: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return self.c + 1

    def _remainder(self, m: Magnitudes) -> np.ndarray:
        return _coalition_remainder(m, self.c)

    def _measure(self, m: Magnitudes) -> np.ndarray:
        return m.target - 100.0 / self.p * self._remainder(m)

    def tie_scale(self, m: Magnitudes) -> np.ndarray:
        return _coalition_scale(m, self.c, 100.0 / self.p)

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return self._tie_level(m, self.p / 100.0 * m.target - self._remainder(m))

    def second_level(self, m: Magnitudes) -> np.ndarray:
        """The level of the second largest amount against a coalition holding the largest
        (:func:`_second_level`, seed 003 B.1.a with ``x_2`` as target)."""
        return _second_level(m, self.p / 100.0, self._remainder(m))

    def relaxed(self, f: float) -> PPercent:
        return PPercent(conversions.p_relaxed(self.p, f), self.c)


@dataclass(frozen=True)
class PriorPosterior(_TieAware):
    """(p,q) prior-posterior rule with coalitions of size ``c``.

    ``S = x_1 - q/p sum_{i>=c+2} x_i`` (seed 003 B.1.b), the seed 002 section 2 measure
    ``p x_1 - q sum_{r>=3} x_r`` divided by ``p``; sensitive when ``S >= 0`` (seed 002).
    Upper protection level ``p/q x_1 - (X - x_1 - x_2)`` (seed 000, table "Upper
    protection levels"), which is ``p/q S``. Ties (module docstring): scale
    ``|x_1| + q/p (|X| + |x_1 + ... + x_{c+1}|)``; a cell with
    ``q (X - x_1 - ... - x_{c+1}) = p x_1`` exactly is sensitive (``S >= 0``), with
    protection level 0.
    """

    p: float
    q: float
    c: int = 1
    kind: ClassVar[str] = "pq"
    concentration: ClassVar[bool] = True
    inclusive: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return self.c + 1

    def _remainder(self, m: Magnitudes) -> np.ndarray:
        return _coalition_remainder(m, self.c)

    def _measure(self, m: Magnitudes) -> np.ndarray:
        return m.target - self.q / self.p * self._remainder(m)

    def tie_scale(self, m: Magnitudes) -> np.ndarray:
        return _coalition_scale(m, self.c, self.q / self.p)

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return self._tie_level(m, self.p / self.q * m.target - self._remainder(m))

    def second_level(self, m: Magnitudes) -> np.ndarray:
        """The level of the second largest amount against a coalition holding the largest
        (:func:`_second_level`, seed 003 B.1.b with ``x_2`` as target)."""
        return _second_level(m, self.p / self.q, self._remainder(m))

    def relaxed(self, f: float) -> PriorPosterior:
        """Seed 004 strategy 1: the a-priori bound becomes ``q f``, so ``p/q`` becomes
        ``p/(q f)``."""
        return PriorPosterior(self.p, self.q * f, self.c)


@dataclass(frozen=True)
class RequestRule(_TieAware):
    """Request rule of foreign-trade statistics (seed 000, "Foreign trade rules").

    With ``r`` the largest contribution of a respondent that asked for protection:
    ``S = r - k/(100-k) (X - r)``, sensitive when ``S > 0``, i.e. ``r > k/100 X``; upper
    protection level ``100/k r - X`` (the (1,k) row of seed 000's table), which is
    ``(100-k)/k S``. Cells where nobody asked have ``r = 0`` and ``S <= 0``. Ties (module
    docstring): scale ``|r| + k/(100-k) (|X| + |r|)``; ``r = k/100 X`` exactly is safe.
    """

    k: float
    kind: ClassVar[str] = "request"
    concentration: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return 1

    def _measure(self, m: Magnitudes) -> np.ndarray:
        return m.requested - self.k / (100.0 - self.k) * (m.total - m.requested)

    def tie_scale(self, m: Magnitudes) -> np.ndarray:
        r = np.abs(m.requested)
        return r + self.k / (100.0 - self.k) * (np.abs(m.total) + r)

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return self._tie_level(m, 100.0 / self.k * m.requested - m.total)

    def relaxed(self, f: float) -> RequestRule:
        return RequestRule(conversions.k_relaxed(self.k, f))


Rule = MinimumFrequency | Dominance | PPercent | PriorPosterior | RequestRule

#: The rules by the name the API accepts in a rule's ``type``.
RULES: dict[str, type] = {
    cls.kind: cls for cls in (MinimumFrequency, Dominance, PPercent, PriorPosterior, RequestRule)
}
