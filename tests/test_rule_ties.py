"""Exact ties of the sensitivity rules (issue 20 part 2; service/sdc/rules.py, "Exact ties").

Every case below has a measure ``S`` that is exactly 0 in real arithmetic while floating
point computes a tiny nonzero value of the sign named in the case. The strict rules
(p%-rule, dominance, request rule, minimum frequency: seed 000 and seed 003 B.1, ``S > 0``)
must call such a cell safe and the inclusive (p,q) rule (seed 002 section 2, ``S >= 0``)
sensitive, with protection level exactly 0 either way. Moving the cell off the tie by
``1e-6`` relative gives the ordinary verdict on each side.
"""

import numpy as np
import pytest

from service.sdc import magnitudes, primary
from service.sdc.rules import (
    TIE_RTOL,
    Dominance,
    MinimumFrequency,
    PPercent,
    PriorPosterior,
    RequestRule,
)

OFF = 1e-6  # relative distance from the tie of the "just off" cases (>> TIE_RTOL)


def cell(values, request=None, weight=None, depth=3):
    values = np.asarray(values, float)
    cells = np.zeros(values.size, int)
    weight = None if weight is None else np.asarray(weight, float)
    request = None if request is None else np.asarray(request, bool)
    return magnitudes.from_contributions(
        1, cells, values, depth=depth, weight=weight, request=request
    )


def verdict(rule, m):
    """(sensitive, upper protection level, reported S) of the one cell of ``m``."""
    result = primary.assess(m, primary.RuleSet(rules=(rule,)))
    return (
        bool(result.sensitive[0]),
        float(result.upper_protection[0]),
        float(result.sensitivity[0, 0]),
    )


# (rule, contributions, requested flags, sign of the floating-point S at the tie)
TIES = [
    # The issue's case: 0.15 x 84 = 12.6 = 10.8 + 1.1 + 0.7, the p%-rule without coalition.
    pytest.param(PPercent(15, c=0), [84, 10.8, 1.1, 0.7], None, +1, id="p_percent-c0-issue"),
    # X - x1 - x2 = p/100 x1 with the default coalition c = 1.
    pytest.param(PPercent(10), [3.0, 1.0, 0.2, 0.1], None, +1, id="p_percent-pos"),
    pytest.param(PPercent(10), [2.0, 0.7, 0.1, 0.1], None, -1, id="p_percent-neg"),
    pytest.param(PPercent(20), [2.0, 0.7, 0.3, 0.1], None, +1, id="p_percent20-pos"),
    # q (X - x1 - x2) = p x1, q/p = 4.
    pytest.param(PriorPosterior(10, 40), [0.8, 0.3, 0.1, 0.1], None, -1, id="pq-neg"),
    pytest.param(PriorPosterior(10, 40), [1.6, 0.5, 0.3, 0.1], None, +1, id="pq-pos"),
    pytest.param(PriorPosterior(15, 100, c=0), [84, 10.8, 1.1, 0.7], None, +1, id="pq-c0-issue"),
    # (1,k): x1 = k/100 X; (2,k): x1 + x2 = k/100 X.
    pytest.param(Dominance(1, 70), [0.7, 0.2, 0.1], None, +1, id="dominance1-pos"),
    pytest.param(Dominance(1, 80), [1.2, 0.2, 0.1], None, -1, id="dominance1-neg"),
    pytest.param(Dominance(2, 80), [0.5, 0.3, 0.1, 0.1], None, +1, id="dominance2-pos"),
    pytest.param(Dominance(2, 80), [0.7, 0.5, 0.2, 0.1], None, -1, id="dominance2-neg"),
    # r = k/100 X, the requester the largest contributor or not.
    pytest.param(RequestRule(60), [0.6, 0.3, 0.1], [True, False, False], +1, id="request-pos"),
    pytest.param(RequestRule(60), [0.3, 0.1, 0.1], [True, False, False], -1, id="request-neg"),
    pytest.param(
        RequestRule(25), [0.2, 0.5, 0.1], [True, False, False], +1, id="request-not-largest-pos"
    ),
]


@pytest.mark.parametrize("rule, values, asked, sign", TIES)
def test_exact_tie_follows_the_rules_own_comparison(rule, values, asked, sign):
    m = cell(values, asked)
    raw = rule._measure(m)[0]
    # The case is a real tie that floating point misses (else it would test nothing).
    assert np.sign(raw) == sign
    assert abs(raw) <= rule.tie_tolerance(m)[0]
    sensitive, level, s = verdict(rule, m)
    assert s == 0.0  # reported as the exact tie it is
    assert sensitive is isinstance(rule, PriorPosterior)  # S >= 0 fires, S > 0 does not
    assert level == 0.0  # a tie needs no protection
    assert rule.upper_protection(m)[0] == 0.0  # also read directly (query filter)
    # fires on the floating-point S with the magnitudes gives the same verdict
    assert bool(rule.fires(np.array([raw]), m)[0]) is sensitive
    assert bool(rule.fires(rule.sensitivity(m))[0]) is sensitive


def _moved(rule, values, asked, factor):
    """The same cell with its largest contribution (the requester's, for the request rule)
    multiplied by ``factor``: ``S`` moves off the tie by about ``OFF`` relative."""
    values = list(map(float, values))
    if isinstance(rule, RequestRule):
        i = asked.index(True)
    else:
        i = int(np.argmax(values))
    values[i] *= factor
    return cell(values, asked)


@pytest.mark.parametrize("rule, values, asked, sign", TIES)
def test_just_above_the_tie_fires(rule, values, asked, sign):
    m = _moved(rule, values, asked, 1 + OFF)
    sensitive, level, s = verdict(rule, m)
    assert s > 10 * rule.tie_tolerance(m)[0]
    assert sensitive
    assert level > 0


@pytest.mark.parametrize("rule, values, asked, sign", TIES)
def test_just_below_the_tie_does_not_fire(rule, values, asked, sign):
    m = _moved(rule, values, asked, 1 - OFF)
    sensitive, level, s = verdict(rule, m)
    assert s < -10 * rule.tie_tolerance(m)[0]
    assert not sensitive
    assert level == 0.0
    assert rule.upper_protection(m)[0] < 0  # the level formula itself stays signed


@pytest.mark.parametrize("scale", [1e-6, 1e3, 1e9, 1e12])
@pytest.mark.parametrize("rule, values, asked, sign", TIES)
def test_tie_is_relative_to_the_cell(rule, values, asked, sign, scale):
    """The tolerance scales with the cell: the same tie at any unit is still a tie."""
    m = cell(np.asarray(values, float) * scale, asked)
    sensitive, level, s = verdict(rule, m)
    assert s == 0.0
    assert sensitive is isinstance(rule, PriorPosterior)
    assert level == 0.0


def test_tolerance_is_per_cell():
    """A large cell just off its tie next to a tiny cell at its tie: each cell is judged
    against its own magnitudes, so the large cell's S (far above the small cell's
    tolerance, far below its own magnitudes) still fires and the tie does not."""
    rule = PPercent(10)
    big = np.array([3.0, 1.0, 0.2, 0.1]) * 1e9
    big[0] *= 1 + OFF
    tiny = np.array([3.0, 1.0, 0.2, 0.1]) * 1e-6
    values = np.concatenate([big, tiny])
    m = magnitudes.from_contributions(2, np.repeat([0, 1], 4), values, depth=3)
    result = primary.assess(m, primary.RuleSet(rules=(rule,)))
    assert result.sensitive.tolist() == [True, False]
    assert result.sensitivity[0, 1] == 0.0
    assert result.upper_protection[1] == 0.0
    tol = rule.tie_tolerance(m)
    assert tol[0] > 1e6 * tol[1]


def test_issue_example_with_both_rules():
    """The issue's cell under p% and (p,q) with the same p/q ratio at once: (p,q) flags it
    (seed 002 section 2), the p%-rule does not (seed 000, seed 003 B.1.a), and the
    protection level is 0 (a tie needs none)."""
    m = cell([84, 10.8, 1.1, 0.7])
    rules = (PPercent(15, c=0), PriorPosterior(15, 100, c=0))
    result = primary.assess(m, primary.RuleSet(rules=rules))
    assert result.fired[:, 0].tolist() == [False, True]
    assert result.sensitive[0]
    assert result.sensitivity[:, 0].tolist() == [0.0, 0.0]
    assert result.upper_protection[0] == 0.0 and result.lower_protection[0] == 0.0


def test_all_zero_cell_is_unchanged():
    """Seed 002 section 2: a cell of zeros is unsafe under (p,q), safe under the strict
    rules; its tolerance is 0, so nothing about it changes."""
    m = cell([0.0, 0.0, 0.0])
    for rule in (PPercent(10), Dominance(1, 80), RequestRule(60)):
        assert rule.tie_tolerance(m)[0] == 0.0
        assert verdict(rule, m)[0] is False
    assert verdict(PriorPosterior(10, 40), m) == (True, 0.0, 0.0)


# Minimum frequency: counts compare exactly; weighted counts (sums of weights) that are n
# in real arithmetic are ties.


@pytest.mark.parametrize(
    "weight, n_obs, sign",
    [
        (0.3, 10, +1),  # 0.3 x 10 = 2.9999999999999996: S = 3 - N > 0 in floating point
        (0.1, 30, -1),  # 0.1 x 30 = 3.0000000000000013
        (0.2, 15, -1),  # 3.0000000000000004
    ],
)
def test_frequency_weighted_tie_is_safe(weight, n_obs, sign):
    rule = MinimumFrequency(3)
    m = cell(np.ones(n_obs), weight=np.full(n_obs, weight))
    raw = rule._measure(m)[0]
    assert np.sign(raw) == sign and abs(raw) <= rule.tie_tolerance(m)[0]
    sensitive, level, s = verdict(rule, m)
    assert not sensitive and s == 0.0 and level == 0.0
    assert not rule.fires(np.array([raw]), m)[0]


@pytest.mark.parametrize("factor, fires", [(1 - OFF, True), (1 + OFF, False)])
def test_frequency_weighted_just_off_the_tie(factor, fires):
    rule = MinimumFrequency(3)
    m = cell(np.ones(10), weight=np.full(10, 0.3 * factor))
    assert verdict(rule, m)[0] is fires


@pytest.mark.parametrize("n_obs", [1, 2, 3, 4])
def test_frequency_integer_counts_are_exact(n_obs):
    rule = MinimumFrequency(3)
    m = cell(np.full(n_obs, 5.0))
    assert verdict(rule, m)[0] is (n_obs < 3)
    assert rule.tie_tolerance(m)[0] < 1e-6  # far below one contributor


def test_frequency_large_counts_stay_exact():
    """The tolerance stays below one contributor for any realistic count."""
    rule = MinimumFrequency(10**6)
    m = magnitudes.from_contributions(1, np.zeros(10**6 - 1, int), np.ones(10**6 - 1), depth=2)
    assert verdict(rule, m)[0]
    assert TIE_RTOL * (2 * 10**6) < 1
