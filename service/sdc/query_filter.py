"""The online query filter of seed 003 section C: a query filter on the query's definition,
then a statistical-results filter on its figures, under one of two policies.

Seed 003 C: "Any request submitted by a user passes through two filters; the Query filter
and the Statistical Results filter. The purpose of the Query filter is to detect those
queries that will not pass disclosure limitation before the query is submitted for
execution, such as the geographic variable must meet a minimum threshold. The Statistical
Results Filter checks the final values in the cells of the resulting table."

The two policies of the seed:

* ``"refuse"`` (the AQS approach): "If a table does not pass the filters, the entire table
  is suppressed and the user does not receive the table. The AQS system does not perform
  any cell suppression." A magnitude cell fails when the profile's sensitivity rules flag
  it (:func:`service.sdc.primary.assess`), a count cell when the threshold rule does
  (:func:`service.sdc.frequency.threshold_rule`). The user is told to ask for less detail.
* ``"noise"`` (the ARMS approach): multiplicative noise on the microdata first
  (:mod:`service.sdc.noise`, seed 003 B.4), then "primary cell suppression without any
  complementary suppression"; a cell is suppressed when it fails any of the three
  criteria of seed 003 C, implemented in :func:`noise_criteria`.

Readings chosen:

* Query filter rules (the seed names one example, a minimum threshold for the geography;
  the others are what online systems commonly set): a maximum number of variables in the
  query; a minimum population of the query's universe; a minimum population of the
  smallest area of each geographic variable the query uses; variable combinations that may
  not appear together. All are checked before any figure is looked at, and the first rule
  that fails gives the refusal reason.
* ARMS criterion 3, "the cell fails the p-percent rule and has insufficient noise to
  protect the actual value": the p%-rule's upper protection level
  ``U = p/100 x_1 - (X - x_1 - ... - x_{c+1})`` (seed 000, table "Upper protection
  levels"; ``c`` the profile's p%-rule coalition, 1 without one) is the uncertainty about
  ``x_1`` the coalition still lacks. The noise that hides ``x_1`` from it is not the whole
  ``|X' - X|``: the multipliers are keyed on the respondent alone, so a respondent that
  makes up a published cell alone reads its own multiplier off it and in every other cell
  subtracts its own noise exactly. The noise counted is
  :func:`service.sdc.noise.noise_left` (``min(|D|, min_r |D - D_r|)`` over the other units
  ``r`` for ``c = 1``, units being holdings as the p%-rule counts them), and the cell is
  suppressed when ``U > 0`` and that noise is below ``U``.
* ARMS criterion 2, "the weighted farm count for a cell is small": suppressed when the sum
  of the sampling weights of its contributions (its number of contributions if
  unweighted) is below ``min_weighted_count``; a count cell (no contributions) is judged
  by its count.
* ARMS criterion 1: the ratio ``X' / X`` outside ``[ratio_low, ratio_high]``; a cell whose
  true value is 0 has no noise and ratio 1 by convention.
* Noise is applied to ``weight x value`` (the seed: "noise is added to the weights for
  underlying microdata"), so the published value is ``X' = sum_i m_i w_i x_i``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from . import noise
from .magnitudes import Magnitudes
from .rules import PPercent

Decision = Literal["publish", "suppress", "refuse"]


@dataclass(frozen=True)
class Refusal:
    """Why a whole table is refused: a stable ``code`` and a message a user can act on.

    Messages never name a rule's parameter (seed 003 B.1.e: parameters are confidential)."""

    code: str
    message: str
    stage: Literal["query", "statistical"]


@dataclass(frozen=True)
class QueryRules:
    """The query filter's rules (seed 003 C, "Query filter"), set in a profile.

    Attributes
    ----------
    max_dimensions : int or None
        Most variables a query may cross.
    min_population : float or None
        Least population of the query's universe (e.g. the selected geography).
    min_area_population : mapping of str to float
        Per geographic variable, the least population of any area of it in the query
        (the seed's "the geographic variable must meet a minimum threshold").
    forbidden_combinations : tuple of frozenset of str
        Sets of variables that may not all appear in one query.
    """

    max_dimensions: int | None = None
    min_population: float | None = None
    min_area_population: Mapping[str, float] = field(default_factory=dict)
    forbidden_combinations: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True)
class Query:
    """A query's definition as the online system describes it.

    Attributes
    ----------
    variables : tuple of str
        The variables crossed in the answer.
    population : float or None
        Population of the query's universe, if the system knows it.
    area_population : mapping of str to float
        Per geographic variable used, the population of its smallest area in the query.
    """

    variables: tuple[str, ...]
    population: float | None = None
    area_population: Mapping[str, float] = field(default_factory=dict)


def check_query(query: Query, rules: QueryRules) -> Refusal | None:
    """The query filter: the first rule the query's definition fails, or ``None``.

    A rule whose figure the query does not give (a population the system did not send)
    fails: the filter cannot show the query is safe, so it does not pass it.
    """
    if rules.max_dimensions is not None and len(query.variables) > rules.max_dimensions:
        return Refusal(
            "too_many_variables",
            "the query crosses too many variables; ask for fewer variables",
            "query",
        )
    used = set(query.variables)
    for combination in rules.forbidden_combinations:
        if combination <= used:
            names = ", ".join(sorted(combination))
            return Refusal(
                "forbidden_combination",
                f"the variables {names} may not be combined in one query; drop one of them",
                "query",
            )
    if rules.min_population is not None and (
        query.population is None or query.population < rules.min_population
    ):
        return Refusal(
            "population_too_small",
            "the population of the query is too small; choose a larger population or area",
            "query",
        )
    for variable in sorted(used & set(rules.min_area_population)):
        smallest = query.area_population.get(variable)
        if smallest is None or smallest < rules.min_area_population[variable]:
            return Refusal(
                "area_too_small",
                f"the areas of {variable} are too small; ask for a coarser level of {variable}",
                "query",
            )
    return None


SENSITIVE_CELLS = Refusal(
    "sensitive_cells",
    "the table would disclose information about "
    "individual respondents; ask for less detail (fewer variables or "
    "coarser categories)",
    "statistical",
)


@dataclass(frozen=True)
class NoiseRules:
    """The ARMS policy's parameters (seed 003 B.4 and C), all confidential.

    Attributes
    ----------
    d, jitter : float
        Noise level and spread (see :func:`service.sdc.noise.multipliers`).
    ratio_low, ratio_high : float
        Criterion 1: range of ``X' / X`` within which a cell may be published.
    min_weighted_count : float
        Criterion 2: least weighted count of a published cell.
    p : float
        Criterion 3: the p%-rule's ``p`` (percent).
    c : int
        Criterion 3: the largest intruder coalition (the profile's p%-rule ``c``).
    """

    d: float
    jitter: float
    ratio_low: float
    ratio_high: float
    min_weighted_count: float
    p: float
    c: int = 1


@dataclass(frozen=True)
class NoisyCells:
    """Microdata of the magnitude cells of one answer, with the noise applied.

    Attributes
    ----------
    true_value, noisy_value, weighted_count : ndarray, shape (m,)
        ``X = sum w x``, ``X' = sum m w x`` and ``sum w`` per cell.
    noise_left : ndarray, shape (m,)
        The noise that still hides the cell's largest unit from a coalition that knows its
        own noise (:func:`service.sdc.noise.noise_left`); ``|X' - X|`` only for a cell of
        one unit.
    noise_left_to_largest : ndarray, shape (m,)
        The noise that still hides the other units from a coalition holding the largest
        (:func:`service.sdc.noise.noise_left_to_largest`); ``inf`` for a cell of one unit.
    """

    true_value: np.ndarray
    noisy_value: np.ndarray
    weighted_count: np.ndarray
    noise_left: np.ndarray
    noise_left_to_largest: np.ndarray


def add_noise(
    n_cells: int,
    cell: np.ndarray,
    value: np.ndarray,
    weight: np.ndarray | None,
    enterprise: Sequence,
    establishment: Sequence,
    secret: bytes,
    rules: NoiseRules,
) -> NoisyCells:
    """Tabulate the answer's microdata with and without the noise of seed 003 B.4.

    The multiplier of each establishment comes from :func:`service.sdc.noise.multipliers`
    (keyed by the secret, so it is the same in every query); the noisy cell is
    ``X' = sum_i m_i w_i x_i`` (seed 003 B.4: the noise in a cell is the sum of its
    establishments' noise). The unit an intruder is counted as is the enterprise
    (holding), as the p%-rule counts respondents.
    """
    value = noise.checked_numbers(value, "values")
    if weight is not None:
        weight = noise.checked_numbers(weight, "weights")
    m = noise.multipliers(enterprise, establishment, secret, rules.d, rules.jitter)
    unit = noise.factorize(noise.checked_ids(enterprise, "enterprise_ids"))[1]
    return noisy_cells(n_cells, cell, value, weight, m, unit, rules.c)


def noisy_cells(
    n_cells: int,
    cell: np.ndarray,
    value: np.ndarray,
    weight: np.ndarray | None,
    m: np.ndarray,
    unit: np.ndarray,
    c: int,
) -> NoisyCells:
    """:func:`add_noise` with each contribution's multiplier ``m`` and unit number ``unit``
    (its holding's, or its own without one) given, for a caller that computed them from ids
    it had already factorized (:func:`service.sdc.noise.factorized_multipliers`).

    The (cell, unit) rows of :func:`service.sdc.noise.noise_left` come from one sort of
    ``cell * n_units + unit`` (vectorised: the filter's hot path has no loop per cell).
    ``value``, ``weight`` and ``m`` are finite floats, as the callers checked them (the
    filter's :func:`service.sdc.magnitudes.from_contributions`, :func:`add_noise`)."""
    weighted = value if weight is None else weight * value
    noisy_w = weighted * m  # noise.apply_noise without its checks: done by the callers
    moved = noisy_w - weighted
    true = _cell_sums(cell, weighted, n_cells)
    noisy = _cell_sums(cell, noisy_w, n_cells)
    total = noisy - true
    n_units = int(unit.max()) + 1 if unit.size else 1
    pair, row = np.unique(cell * n_units + unit, return_inverse=True)
    rows = (
        pair // n_units,
        np.bincount(row, weighted, minlength=pair.size),
        np.bincount(row, moved, minlength=pair.size),
        total,
        n_cells,
        c,
    )
    return NoisyCells(
        true_value=true,
        noisy_value=noisy,
        weighted_count=_cell_sums(cell, np.ones_like(value) if weight is None else weight, n_cells),
        noise_left=noise.noise_left(*rows),
        noise_left_to_largest=noise.noise_left_to_largest(*rows),
    )


def _cell_sums(cell: np.ndarray, x: np.ndarray, n_cells: int) -> np.ndarray:
    # float even without contributions (numpy's bincount gives int64 for empty weights)
    return np.bincount(cell, x, minlength=n_cells).astype(np.float64, copy=False)


CRITERIA = ("noise_ratio", "weighted_count", "p_percent_noise")


def noise_criteria(cells: NoisyCells, m: Magnitudes, rules: NoiseRules) -> dict[str, np.ndarray]:
    """The three ARMS suppression criteria of seed 003 C, per cell.

    Parameters
    ----------
    cells : NoisyCells
        True and noisy values and weighted counts.
    m : Magnitudes
        The same cells' ordered magnitudes (true values), for the p%-rule.
    rules : NoiseRules

    Returns
    -------
    dict of str to ndarray of bool
        ``"noise_ratio"``: ``X'/X`` outside ``[ratio_low, ratio_high]`` (criterion 1);
        ``"weighted_count"``: ``sum w < min_weighted_count`` (criterion 2);
        ``"p_percent_noise"``: ``U > 0`` and the noise left below ``U``, ``U`` the
        p%-rule's upper protection level (criterion 3; see the module docstring); or the
        same for the second largest unit against a coalition holding the largest, which
        its own noise leaves another noise (a helper's campaign, 2026-11-27: 1000, 900,
        20, 20 under the README's policy were published, the largest left 72.2 to hide
        the second, whose level is 95).
    """
    x, xn = cells.true_value, cells.noisy_value
    ratio = np.divide(xn, x, out=np.ones_like(x), where=x != 0)
    rule = PPercent(rules.p, rules.c)
    shortfall = rule.upper_protection(m)
    second = rule.second_level(m)
    return {
        "noise_ratio": (ratio < rules.ratio_low) | (ratio > rules.ratio_high),
        "weighted_count": cells.weighted_count < rules.min_weighted_count,
        "p_percent_noise": ((shortfall > 0) & (cells.noise_left < shortfall))
        | ((second > 0) & (cells.noise_left_to_largest < second)),
    }


def decide(
    suppressed: np.ndarray, policy: Literal["refuse", "noise"]
) -> tuple[Decision, Refusal | None]:
    """The table's decision from the cells the statistical filter stops.

    Under ``"refuse"`` any stopped cell refuses the table (AQS); under ``"noise"`` the
    stopped cells are suppressed and the rest published (ARMS, no complementary
    suppression).
    """
    if not suppressed.any():
        return "publish", None
    if policy == "refuse":
        return "refuse", SENSITIVE_CELLS
    return "suppress", None
