"""Contributions to ordered magnitudes, on hand-checked cells."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sdc import magnitudes
from service.sdc.errors import InputError
from service.sdc.magnitudes import NegativePolicy


def test_cells_are_independent_and_ordered():
    cell = np.array([1, 0, 1, 1, 0])
    value = np.array([5.0, 7.0, 9.0, 1.0, 3.0])
    m = magnitudes.from_contributions(3, cell, value, depth=3)
    np.testing.assert_array_equal(m.largest, [[7, 3, 0], [9, 5, 1], [0, 0, 0]])
    np.testing.assert_array_equal(m.total, [10, 15, 0])
    np.testing.assert_array_equal(m.count, [2, 3, 0])
    np.testing.assert_array_equal(m.empty, [False, False, True])


def test_contributions_in_cell_order_keep_each_row_and_the_order_within_a_cell():
    c = magnitudes.Contributions(
        np.array([1, 0, 1, 1, 0]),
        np.array([5.0, 7.0, 9.0, 1.0, 3.0]),
        holding=np.array([10, 11, 12, 13, 14]),
    )
    assert not c.is_in_cell_order
    s = c.in_cell_order()
    np.testing.assert_array_equal(s.cell, [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(s.value, [7, 3, 5, 9, 1])
    np.testing.assert_array_equal(s.holding, [11, 14, 10, 12, 13])
    assert s.weight is None and s.is_in_cell_order and s.in_cell_order() is s


def test_holdings_are_summed_within_a_cell_only():
    # Holding 0 contributes 60 + 30 to cell 0 and 5 to cell 1: 90 in cell 0, 5 in cell 1.
    cell = np.array([0, 0, 0, 1, 1])
    value = np.array([60.0, 30.0, 10.0, 5.0, 20.0])
    holding = np.array([0, 0, -1, 0, -1])
    m = magnitudes.from_contributions(2, cell, value, holding=holding)
    np.testing.assert_array_equal(m.largest, [[90, 10], [20, 5]])
    np.testing.assert_array_equal(m.count, [2, 2])


def test_waiver_puts_largest_unwaived_first():
    # Seed 000 Waivers: the 100 waived, so s = 50 (largest without waiver), r = 100.
    value = np.array([100.0, 50.0, 20.0, 5.0])
    waiver = np.array([True, False, False, False])
    m = magnitudes.from_contributions(1, np.zeros(4, int), value, waiver=waiver, depth=4)
    np.testing.assert_array_equal(m.largest[0], [50, 100, 20, 5])
    assert m.target[0] == 50 and m.protectable[0]


def test_all_waived_cell_is_not_protectable():
    m = magnitudes.from_contributions(
        1, np.zeros(2, int), np.array([3.0, 1.0]), waiver=np.array([True, True])
    )
    assert not m.protectable[0]


def test_fractional_replicate_weights_share_a_slot():
    # 100 with weight 1.5 and 10 with weight 2: slot 1 is 100; slot 2 is half 100, half 10.
    m = magnitudes.from_contributions(
        1, np.zeros(2, int), np.array([100.0, 10.0]), weight=np.array([1.5, 2.0]), depth=3
    )
    np.testing.assert_allclose(m.largest[0], [100, 55, 10])
    assert m.total[0] == 170 and m.count[0] == 3.5


def test_sample_public_weights_subtract_weighted_values():
    # Seed 000 eq-p-percent-weighted-alt: intruders subtract w_i x_i^s, x_1^s is protected.
    m = magnitudes.from_contributions(
        1,
        np.zeros(2, int),
        np.array([100.0, 1.0]),
        weight=np.array([2.0, 3.0]),
        weights_mode="sample_public_weights",
    )
    np.testing.assert_allclose(m.largest[0], [200, 3])
    assert m.target[0] == 100 and m.total[0] == 203


def test_holdings_with_weights_refused():
    with pytest.raises(InputError, match="holdings cannot be combined") as err:
        magnitudes.from_contributions(
            2,
            np.array([0, 1]),
            np.array([1.0, 2.0]),
            holding=np.array([-1, 4]),
            weight=np.array([1.0, 2.0]),
        )
    assert err.value.cell == 1 and err.value.field == "contributions.holding"


def test_negative_refused_by_default_with_cell():
    with pytest.raises(InputError) as err:
        magnitudes.from_contributions(2, np.array([0, 1]), np.array([1.0, -2.0]))
    assert err.value.cell == 1


def test_negative_allowed_when_no_concentration_rule():
    m = magnitudes.from_contributions(
        1, np.zeros(2, int), np.array([1.0, -2.0]), refuse_negative=False
    )
    assert m.value[0] == -1


def test_absolute_contributions_after_holdings():
    # Seed 002 section 5: the holding nets +5 and -3 to 2 first, then |2|.
    m = magnitudes.from_contributions(
        1,
        np.zeros(3, int),
        np.array([5.0, -3.0, -4.0]),
        holding=np.array([0, 0, -1]),
        negative=NegativePolicy("absolute"),
    )
    np.testing.assert_array_equal(m.largest[0], [4, 2])
    assert m.total[0] == 6 and m.value[0] == -2


def test_shift_bound_violation_names_cell():
    with pytest.raises(InputError, match="a-priori bound") as err:
        magnitudes.from_contributions(
            1, np.zeros(1, int), np.array([-20.0]), negative=NegativePolicy("shift", shift=10.0)
        )
    assert err.value.cell == 0


@pytest.mark.parametrize(
    "total,count,largest,message",
    [
        ([10.0], [-1.0], [[5.0, 3.0]], "count must be >= 0"),
        ([10.0], [3.0], [[3.0, 5.0]], "decreasing order"),
        ([10.0], [3.0], [[8.0, 5.0]], "more than the total"),
        ([10.0], [1.0], [[5.0, 3.0]], "more largest contributions than contributors"),
        ([10.0], [5.0], [[5.0, np.nan]], "needs the 2 largest"),
        ([-10.0], [5.0], [[5.0, 3.0]], "non-negative"),
        ([np.inf], [5.0], [[5.0, 3.0]], "finite"),
    ],
)
def test_summary_validation(total, count, largest, message):
    with pytest.raises(InputError, match=message) as err:
        magnitudes.from_summaries(np.array(total), np.array(count), np.array(largest))
    assert err.value.cell == 0


def test_summary_with_fewer_contributors_than_depth_is_complete():
    m = magnitudes.from_summaries(np.array([7.0]), np.array([1.0]), np.array([[7.0]]), depth=3)
    np.testing.assert_array_equal(m.largest[0], [7, 0, 0])


def test_summary_shift_applies_seed004_eq1():
    m = magnitudes.from_summaries(
        np.array([-5.0]),
        np.array([3.0]),
        np.array([[4.0, -1.0]]),
        negative=NegativePolicy("shift", shift=10.0),
    )
    assert m.total[0] == 25.0 and m.value[0] == -5.0  # Y = X + n M
    np.testing.assert_array_equal(m.largest[0], [14, 9])


def test_merge_keeps_request_order():
    a = magnitudes.from_contributions(1, np.zeros(2, int), np.array([3.0, 1.0]))
    b = magnitudes.from_summaries(
        np.array([9.0, 4.0]), np.array([2.0, 1.0]), np.array([[5.0, 4.0], [4.0, np.nan]])
    )
    m = magnitudes.merge(3, [([1], a), ([0, 2], b)])
    np.testing.assert_array_equal(m.total, [9, 4, 4])
    np.testing.assert_array_equal(m.largest, [[5, 4], [3, 1], [4, 0]])


def test_all_zero_summaries_ignore_a_shift_sent_with_another_mode():
    """A summary cell of zeros is all-zero whatever ``shift`` says when the mode does not
    apply it (only mode "shift" shifts summaries, sent in their own units); with mode
    "shift" its shifted largest contribution is the shift itself."""
    total, count, largest = np.array([0.0, 7.0]), np.array([2.0, 2.0]), np.array([[0.0], [5.0]])
    for mode in ("absolute", "refuse"):
        policy = magnitudes.NegativePolicy(mode, shift=5.0)
        m = magnitudes.from_summaries(total, count, largest, depth=1, negative=policy)
        assert m.all_zero.tolist() == [True, False]
    shifted = magnitudes.from_summaries(
        total, count, largest, depth=1, negative=magnitudes.NegativePolicy("shift", shift=5.0)
    )
    assert shifted.all_zero.tolist() == [True, False]


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    n_cells=st.integers(1, 12),
    block=st.integers(1, 6),
    mode=st.sampled_from(["absolute", "shift"]),
)
def test_blocks_of_cells_give_the_same_magnitudes_to_the_bit(data, n_cells, block, mode):
    """Contributions in cell order are ordered block of cells by block (BLOCK at 10^6
    cells): every quantity is the one computed at once."""
    u = data.draw(st.integers(0, 40))
    cell = np.sort(
        np.array(
            data.draw(st.lists(st.integers(0, n_cells - 1), min_size=u, max_size=u)), dtype=np.int64
        )
    )
    value = np.array(data.draw(st.lists(st.integers(-5, 50), min_size=u, max_size=u)), float)
    holding = np.array(data.draw(st.lists(st.integers(-1, 4), min_size=u, max_size=u)), np.int64)
    waiver = np.array(data.draw(st.lists(st.booleans(), min_size=u, max_size=u)), bool)
    request = np.array(data.draw(st.lists(st.booleans(), min_size=u, max_size=u)), bool)
    kw = dict(holding=holding, waiver=waiver, request=request, depth=3)
    kw["negative"] = NegativePolicy(mode, shift=10.0 if mode == "shift" else None)
    whole = magnitudes.from_contributions(n_cells, cell, value, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(magnitudes, "BLOCK", block)
        blocked = magnitudes.from_contributions(n_cells, cell, value, **kw)
    for f in dataclasses.fields(magnitudes.Magnitudes):
        np.testing.assert_array_equal(getattr(blocked, f.name), getattr(whole, f.name), f.name)


def test_an_error_in_a_later_block_names_its_cell(monkeypatch):
    monkeypatch.setattr(magnitudes, "BLOCK", 2)
    cell = np.array([0, 0, 1, 2, 3, 3, 4])
    value = np.array([1.0, 2.0, 3.0, 4.0, 5.0, -20.0, 6.0])
    with pytest.raises(InputError) as err:
        magnitudes.from_contributions(5, cell, value, negative=NegativePolicy("shift", shift=10.0))
    assert err.value.cell == 3
