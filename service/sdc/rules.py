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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from . import conversions
from .magnitudes import Magnitudes


@dataclass(frozen=True)
class MinimumFrequency:
    """Minimum frequency rule (seed 000, table "Sensitivity rules"): unsafe when ``N < n``.

    The measure is ``S = n - N``. Empty cells (``N = 0``) are left to the empty-cell
    policy of :func:`service.sdc.primary.assess`.
    """

    n: int
    kind: ClassVar[str] = "frequency"
    concentration: ClassVar[bool] = False

    @property
    def depth(self) -> int:
        return 1

    def sensitivity(self, m: Magnitudes) -> np.ndarray:
        return self.n - m.count

    def fires(self, s: np.ndarray) -> np.ndarray:
        return s > 0

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        """0 (seed 000 recommends it) or ``frequency_range`` percent of the cell value."""
        return frequency_range / 100.0 * np.abs(m.value)

    def relaxed(self, f: float) -> MinimumFrequency:
        return self


@dataclass(frozen=True)
class Dominance:
    """(n,k)-dominance rule.

    ``S = sum_{i<=n} x_i - k/(100-k) sum_{i>n} x_i`` (seed 003 B.1.c), sensitive when
    ``S > 0``, i.e. ``x_1 + ... + x_n > k/100 X`` (seed 000, eq-dominance-formula).
    Upper protection level ``100/k (x_1 + ... + x_n) - X`` (seed 000, table "Upper
    protection levels"); with ``n = 1`` this is the (1,k) row.
    """

    n: int
    k: float
    kind: ClassVar[str] = "dominance"
    concentration: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return self.n

    def sensitivity(self, m: Magnitudes) -> np.ndarray:
        top = m.top_sum(self.n)
        return top - self.k / (100.0 - self.k) * (m.total - top)

    def fires(self, s: np.ndarray) -> np.ndarray:
        return s > 0

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return 100.0 / self.k * m.top_sum(self.n) - m.total

    def relaxed(self, f: float) -> Dominance:
        return Dominance(self.n, conversions.k_relaxed(self.k, f))


def _coalition_remainder(m: Magnitudes, c: int) -> np.ndarray:
    """``X - x_1 - ... - x_{c+1}``: what the largest contributor's value is hidden in once
    a coalition of ``c`` (the next largest) subtracts its own (seed 003 B.1.a)."""
    return m.total - m.top_sum(c + 1)


@dataclass(frozen=True)
class PPercent:
    """p%-rule with coalitions of size ``c``.

    ``S = x_1 - 100/p sum_{i>=c+2} x_i`` (seed 003 B.1.a), sensitive when ``S > 0``,
    i.e. ``X - x_2 - x_1 < p/100 x_1`` for ``c = 1`` (seed 000, eq-p-percent-formula).
    Upper protection level ``p/100 x_1 - (X - x_1 - x_2)`` (seed 000, table "Upper
    protection levels", proved in its Example 5), which is ``p/100 S``.
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

    def sensitivity(self, m: Magnitudes) -> np.ndarray:
        return m.target - 100.0 / self.p * self._remainder(m)

    def fires(self, s: np.ndarray) -> np.ndarray:
        return s > 0

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return self.p / 100.0 * m.target - self._remainder(m)

    def relaxed(self, f: float) -> PPercent:
        return PPercent(conversions.p_relaxed(self.p, f), self.c)


@dataclass(frozen=True)
class PriorPosterior:
    """(p,q) prior-posterior rule with coalitions of size ``c``.

    ``S = x_1 - q/p sum_{i>=c+2} x_i`` (seed 003 B.1.b), the seed 002 section 2 measure
    ``p x_1 - q sum_{r>=3} x_r`` divided by ``p``; sensitive when ``S >= 0`` (seed 002).
    Upper protection level ``p/q x_1 - (X - x_1 - x_2)`` (seed 000, table "Upper
    protection levels").
    """

    p: float
    q: float
    c: int = 1
    kind: ClassVar[str] = "pq"
    concentration: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return self.c + 1

    def _remainder(self, m: Magnitudes) -> np.ndarray:
        return _coalition_remainder(m, self.c)

    def sensitivity(self, m: Magnitudes) -> np.ndarray:
        return m.target - self.q / self.p * self._remainder(m)

    def fires(self, s: np.ndarray) -> np.ndarray:
        return s >= 0

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return self.p / self.q * m.target - self._remainder(m)

    def relaxed(self, f: float) -> PriorPosterior:
        """Seed 004 strategy 1: the a-priori bound becomes ``q f``, so ``p/q`` becomes ``p/(q f)``."""
        return PriorPosterior(self.p, self.q * f, self.c)


@dataclass(frozen=True)
class RequestRule:
    """Request rule of foreign-trade statistics (seed 000, "Foreign trade rules").

    With ``r`` the largest contribution of a respondent that asked for protection:
    ``S = r - k/(100-k) (X - r)``, sensitive when ``S > 0``, i.e. ``r > k/100 X``; upper
    protection level ``100/k r - X`` (the (1,k) row of seed 000's table). Cells where
    nobody asked have ``r = 0`` and ``S <= 0``.
    """

    k: float
    kind: ClassVar[str] = "request"
    concentration: ClassVar[bool] = True

    @property
    def depth(self) -> int:
        return 1

    def sensitivity(self, m: Magnitudes) -> np.ndarray:
        return m.requested - self.k / (100.0 - self.k) * (m.total - m.requested)

    def fires(self, s: np.ndarray) -> np.ndarray:
        return s > 0

    def upper_protection(self, m: Magnitudes, frequency_range: float = 0.0) -> np.ndarray:
        return 100.0 / self.k * m.requested - m.total

    def relaxed(self, f: float) -> RequestRule:
        return RequestRule(conversions.k_relaxed(self.k, f))


Rule = MinimumFrequency | Dominance | PPercent | PriorPosterior | RequestRule

#: The rules by the name the API accepts in a rule's ``type``.
RULES: dict[str, type] = {cls.kind: cls for cls in
                          (MinimumFrequency, Dominance, PPercent, PriorPosterior, RequestRule)}
