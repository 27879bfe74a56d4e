"""Property tests (hypothesis) of the sensitivity rules: the seeds' theorems as invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sdc import conversions, magnitudes, primary
from service.sdc.rules import Dominance, MinimumFrequency, PPercent, PriorPosterior

# Integer-valued contributions keep the arithmetic exact enough to test inequalities
# without tolerance games; zero is included on purpose.
contribution_lists = st.lists(st.integers(0, 10_000).map(float), min_size=1, max_size=12)
percent = st.floats(0.5, 99.5, allow_nan=False)


def measure(rule, values, **kw):
    values = np.asarray(values, float)
    m = magnitudes.from_contributions(
        1, np.zeros(values.size, int), values, depth=max(2, rule.depth), **kw
    )
    return rule.sensitivity(m)[0], m


def fires(rule, values):
    s, _ = measure(rule, values)
    return bool(rule.fires(np.array([s]))[0])


@settings(max_examples=300, deadline=None)
@given(contribution_lists, percent)
def test_seed000_proof_a_safe_under_2k_implies_safe_under_p(values, p):
    """Seed 000 proof A: with k = 100*100/(100+p), safe under (2,k) implies safe under p%."""
    k = conversions.k2_from_p_seed000(p)
    if not fires(Dominance(2, k), values):
        assert not fires(PPercent(p), values)


@settings(max_examples=300, deadline=None)
@given(contribution_lists, percent)
def test_seed003_table1_1k1_and_2k2_imply_p_percent(values, p):
    """Seed 003 Table 1: S^(1,k1) > 0 or S^(2,k2) > 0 implies S^p% > 0, with
    k1 = 100/(p/100+1) and k2 = 200/(p/100+2)."""
    k1, k2 = conversions.k1_from_p(p / 100), conversions.k2_from_p(p / 100)
    if fires(Dominance(1, k1), values) or fires(Dominance(2, k2), values):
        assert fires(PPercent(p), values)


@settings(max_examples=300, deadline=None)
@given(contribution_lists, st.floats(0.5, 50, allow_nan=False), st.floats(1.05, 10))
def test_seed003_table1_for_pq_uses_q_over_p(values, p, ratio):
    """Seed 003 Table 1 with the pq rule: the table's k1, k2 with p/100 replaced by p/q."""
    q = p * ratio
    k1, k2 = conversions.k1_from_p(p / q), conversions.k2_from_p(p / q)
    if fires(Dominance(1, k1), values) or fires(Dominance(2, k2), values):
        assert fires(PriorPosterior(p, q), values)


@settings(max_examples=200, deadline=None)
@given(contribution_lists, st.floats(0.5, 99, allow_nan=False), st.floats(1.05, 20))
def test_pq_is_p_star_percent(values, p, ratio):
    """Seed 000 eq-p-star: (p,q) and the p%-rule with p* = 100 p/q flag the same cells
    (away from the boundary S = 0, where (p,q) is inclusive)."""
    q = p * ratio
    s_pq, _ = measure(PriorPosterior(p, q), values)
    s_p, _ = measure(PPercent(conversions.p_star(p, q)), values)
    assert s_pq == pytest.approx(s_p, rel=1e-9, abs=1e-6)


rules_under_test = st.sampled_from(
    [
        Dominance(1, 85),
        Dominance(2, 90),
        Dominance(3, 75),
        PPercent(10),
        PPercent(25, c=2),
        PriorPosterior(10, 50),
        MinimumFrequency(3),
    ]
)


@settings(max_examples=300, deadline=None)
@given(contribution_lists, rules_under_test, st.randoms(use_true_random=False))
def test_measure_does_not_depend_on_order(values, rule, rnd):
    shuffled = list(values)
    rnd.shuffle(shuffled)
    assert measure(rule, values)[0] == pytest.approx(measure(rule, shuffled)[0], abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(contribution_lists, contribution_lists, rules_under_test)
def test_subadditivity(a, b, rule):
    """Seed 003 B.1: nonincreasing weights make S subadditive, S(A u B) <= S(A) + S(B)
    for cells with different respondents; so unions of safe cells are safe."""
    s_a, _ = measure(rule, a)
    s_b, _ = measure(rule, b)
    s_ab, _ = measure(rule, a + b)
    assert s_ab <= s_a + s_b + 1e-6 * (1 + abs(s_a) + abs(s_b))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 1000).map(float)), min_size=1, max_size=15
    ),
    rules_under_test,
)
def test_holdings_summed_equal_preaggregated(rows, rule):
    """Seed 000 Holdings: sending a holding's contributions separately with its id gives
    the measure of sending their sum as one contribution."""
    holding = np.array([h for h, _ in rows])
    values = np.array([v for _, v in rows])
    m_split = magnitudes.from_contributions(
        1, np.zeros(len(rows), int), values, holding=holding, depth=3
    )
    summed = np.bincount(holding, weights=values)[np.unique(holding)]
    m_sum = magnitudes.from_contributions(1, np.zeros(summed.size, int), summed, depth=3)
    assert rule.sensitivity(m_split)[0] == pytest.approx(rule.sensitivity(m_sum)[0], abs=1e-6)
    assert m_split.count[0] == m_sum.count[0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1000).map(float), st.integers(1, 6)), min_size=1, max_size=8),
    rules_under_test,
)
def test_integer_replicate_weights_equal_explicit_replication(rows, rule):
    """Seed 000 Sampling weights: an integer weight w stands for w equal contributions."""
    values = np.array([v for v, _ in rows])
    weights = np.array([w for _, w in rows], float)
    m_w = magnitudes.from_contributions(
        1, np.zeros(len(rows), int), values, weight=weights, depth=3
    )
    replicated = np.repeat(values, weights.astype(int))
    m_r = magnitudes.from_contributions(1, np.zeros(replicated.size, int), replicated, depth=3)
    np.testing.assert_allclose(m_w.largest, m_r.largest)
    assert rule.sensitivity(m_w)[0] == pytest.approx(rule.sensitivity(m_r)[0], abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(contribution_lists, rules_under_test)
def test_protection_level_positive_exactly_when_needed(values, rule):
    """Seed 000 "Upper protection levels": a fired concentration rule demands a level >= 0
    and, for the p%-rule, the level is p/100 times the measure (seed 000 Example 5)."""
    ruleset = primary.RuleSet(rules=(rule,))
    values = np.asarray(values, float)
    m = magnitudes.from_contributions(1, np.zeros(values.size, int), values, depth=ruleset.depth)
    result = primary.assess(m, ruleset)
    assert result.upper_protection[0] >= 0
    if not result.sensitive[0]:
        assert result.upper_protection[0] == 0
    if isinstance(rule, PPercent) and result.sensitive[0]:
        assert result.upper_protection[0] == pytest.approx(rule.p / 100 * result.sensitivity[0, 0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-1000, 1000).map(float), min_size=1, max_size=10), st.floats(1.5, 10))
def test_relaxed_is_absolute_with_relaxed_parameters(values, f):
    """Seed 004 strategy 1: mode 'relaxed' is the rule with p/f on absolute contributions."""
    values = np.asarray(values)
    cell = np.zeros(values.size, int)
    relaxed = primary.RuleSet(
        (PPercent(20),), negative=magnitudes.NegativePolicy("relaxed", factor=f)
    )
    m = magnitudes.from_contributions(1, cell, values, negative=relaxed.negative)
    by_hand = primary.RuleSet((PPercent(20 / f),), negative=magnitudes.NegativePolicy("absolute"))
    m_abs = magnitudes.from_contributions(1, cell, values, negative=by_hand.negative)
    assert primary.assess(m, relaxed).sensitivity[0, 0] == pytest.approx(
        primary.assess(m_abs, by_hand).sensitivity[0, 0]
    )


def test_shift_matches_seed004_closed_form():
    """Seed 004 section 2.1: on y = x + M the p%-measure is
    p/100 x1 - (X - x1 - x2) - M((n-2) - p/100), up to the factor p/100 of normalisation."""
    x = np.array([500.0, -40.0, 30.0, -200.0, 10.0])
    big_m, p = 1000.0, 10.0
    m = magnitudes.from_contributions(
        1, np.zeros(x.size, int), x, negative=magnitudes.NegativePolicy("shift", shift=big_m)
    )
    s = PPercent(p).sensitivity(m)[0]
    xs = np.sort(x)[::-1]
    closed = p / 100 * xs[0] - (x.sum() - xs[0] - xs[1]) - big_m * ((x.size - 2) - p / 100)
    assert p / 100 * s == pytest.approx(closed)
    assert m.value[0] == pytest.approx(x.sum())  # the published value is untouched
    assert m.total[0] == pytest.approx(x.sum() + x.size * big_m)  # Y = X + n M, seed 004 (1)
