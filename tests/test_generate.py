"""The random table generator (tests.generate): determinism, additivity, margins as
unions of their leaves' contributions, and the shares of empty and small cells."""

import numpy as np
import pytest

from service.sdc import primary
from service.sdc.rules import MinimumFrequency, PPercent
from tests import generate as gen


def test_same_seed_same_table_other_seed_other_table():
    a = gen.preset("30x30", seed=5)
    b = gen.preset("30x30", seed=5)
    c = gen.preset("30x30", seed=6)
    for field in ("cell", "value", "holding"):
        np.testing.assert_array_equal(
            getattr(a.contributions, field), getattr(b.contributions, field)
        )
    assert a.values.tobytes() == b.values.tobytes()
    assert not np.array_equal(a.values, c.values)


def test_values_are_additive_and_sums_of_contributions():
    g = gen.generate((12, 9, 4), groups=(3, None, 2), seed=2, shared_share=0.2)
    assert g.n_cells == (1 + 3 + 12) * (1 + 9) * (1 + 2 + 4)
    assert np.abs(g.table.relations @ g.values).max() == 0.0
    np.testing.assert_array_equal(g.table.fill_margins(g.leaf_values), g.values)
    # Leaf values from the microdata, every value from the cell's contributions.
    leaf = np.bincount(g.leaf_cell, weights=g.leaf_value, minlength=g.n_cells)
    np.testing.assert_array_equal(leaf, g.leaf_values)
    c = g.contributions
    np.testing.assert_array_equal(
        np.bincount(c.cell, weights=c.value, minlength=g.n_cells), g.values
    )
    assert (g.leaf_value >= 1).all() and (g.leaf_value == np.round(g.leaf_value)).all()


def test_margins_hold_the_union_of_their_leaves_respondents():
    g = gen.generate((6, 5), groups=(2, None), seed=3, shared_share=0.3)
    t, c = g.table, g.contributions
    total = t.cell_index(("Total", "Total"))
    group = t.cell_index(("ag1", "b2"))
    # The grand total holds every contribution once; its respondents are all holdings.
    assert (c.cell == total).sum() == g.leaf_value.size
    assert g.counts[total] == np.unique(g.leaf_holding).size
    # A subtotal holds exactly the contributions of its leaves (ag1 = a3, a4, a5).
    below = np.isin(g.leaf_cell, [t.cell_index((f"a{i}", "b2")) for i in (3, 4, 5)])
    np.testing.assert_array_equal(np.sort(c.value[c.cell == group]), np.sort(g.leaf_value[below]))
    # Magnitudes sum a holding's contributions within a cell: counts agree.
    m = g.magnitudes()
    np.testing.assert_array_equal(m.count, g.counts)
    np.testing.assert_array_equal(m.total, g.values)


def test_shared_holdings_stay_in_their_row():
    g = gen.generate((8, 20), seed=4, shared_share=0.5)
    row = g.table.key_positions[g.leaf_cell, 0]
    first_row = {}
    for h, r in zip(g.leaf_holding.tolist(), row.tolist()):
        assert first_row.setdefault(h, r) == r
    assert np.unique(g.leaf_holding).size < g.leaf_holding.size


@pytest.mark.parametrize("shares", [(0.1, 0.1, 0.1), (0.3, 0.05, 0.2)])
def test_shares_of_empty_singleton_and_pair_cells(shares):
    empty, single, pair = shares
    g = gen.generate((100, 100), seed=9, empty_share=empty, singleton_share=single, pair_share=pair)
    n = g.counts[g.table.is_leaf]
    assert n.size == 10_000
    # Binomial standard error at 10,000 cells is at most 0.005; allow 4 of them.
    assert abs((n == 0).mean() - empty) < 0.02
    assert abs((n == 1).mean() - single) < 0.02
    assert abs((n == 2).mean() - pair) < 0.02
    assert abs(n[n >= 3].mean() - 10.0) < 0.15


def test_pareto_amounts_are_heavier_tailed_than_lognormal():
    p = gen.generate((40, 40), seed=1, distribution="pareto", alpha=1.1)
    assert p.leaf_value.min() >= 1000  # scale * (1 + Lomax) >= scale
    assert np.max(p.leaf_value) / np.median(p.leaf_value) > 100


def test_rules_find_sensitive_leaves_and_some_margins():
    g = gen.preset("30x30", seed=0)
    rules = primary.RuleSet(rules=(PPercent(15), MinimumFrequency(3)))
    verdict = primary.assess(g.magnitudes(rules.depth), rules)
    leaf = g.table.is_leaf
    # Singletons and pairs (about 10% of leaves) are all flagged by the frequency rule,
    # and dominated cells with three or more contributors by the p%-rule.
    small = leaf & (g.counts >= 1) & (g.counts < 3)
    assert verdict.sensitive[small].all()
    assert verdict.sensitive[leaf & (g.counts >= 3)].any()
    assert 0.08 < verdict.sensitive[leaf].mean() < 0.15
    assert not verdict.sensitive[g.counts == 0].any()  # empty cells are not sensitive


def test_sizes_of_the_presets():
    cells = {
        name: int(
            np.prod(
                [
                    n + 1 + (g or 0)
                    for n, g in zip(kw["shape"], kw.get("groups") or [None] * len(kw["shape"]))
                ]
            )
        )
        for name, kw in gen.SIZES.items()
    }
    assert cells == {
        "10x10": 121,
        "30x30": 961,
        "60x60 hier": 4_489,
        "100x100 hier": 12_321,
        "20x20x10": 4_851,
        "10x10x5": 726,
        "8x6x5x4": 1_890,
        "250x200": 50_451,
        "250x200 sparse": 50_451,
    }
    assert gen.preset("10x10").n_cells == 121


def test_bad_arguments():
    with pytest.raises(ValueError, match="sum"):
        gen.generate((3, 3), empty_share=0.6, singleton_share=0.6)
    with pytest.raises(ValueError, match="distribution"):
        gen.generate((3, 3), distribution="uniform")
    with pytest.raises(ValueError, match="groups"):
        gen.generate((3, 3), groups=(5, None))
    with pytest.raises(KeyError):
        gen.preset("7x7")
