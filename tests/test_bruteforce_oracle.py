"""Hand-checked cases for the brute-force oracle ``tests/bruteforce.py`` (seed 002)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from tests.bruteforce import (
    any_sensitive,
    circuits,
    enumerate_sensitive,
    grid_cell,
    grid_relations,
    in_row_space,
    is_sensitive,
    replicate_judge,
    replicate_witness,
)

P20 = ("p_percent", 20)


def spread(prefix, total, k):
    """``k`` equal respondents sharing ``total``."""
    return [(f"{prefix}{m}", Fraction(total, k)) for m in range(k)]


def grid(values):
    """Row-major cell values of a table given with its margins."""
    return [v for row in values for v in row]


def mask(n, cells):
    return [i in cells for i in range(n)]


def patterns(found):
    return [{i: abs(v) for i, v in lam.items()} for lam, _ in found]


# Seed 002 Table 3 (3 x 3 with margins); Table 4 suppresses A,I  A,III  B,I  B,III.
# The seed prints C's total as 1150; 600 + 450 + 500 = 1550 matches the column totals.
TABLE3 = [[100, 200, 150, 450], [250, 150, 300, 700], [600, 450, 500, 1550], [950, 800, 950, 2700]]
AI, AIII, BI, BIII = (grid_cell(i, j, 3) for i, j in [(0, 0), (0, 2), (1, 0), (1, 2)])


def table4():
    a = grid_relations(3, 3)
    x = grid(TABLE3)
    contributions = [[(f"cell{i}", v)] for i, v in enumerate(x)]
    contributions[AI] = [("a1", 100)]
    contributions[AIII] = [("a3", 150)]
    contributions[BI] = spread("b1_", 250, 10)
    contributions[BIII] = spread("b3_", 300, 10)
    return a, x, mask(len(x), {AI, AIII, BI, BIII}), contributions


def test_grid_relations_hold_on_table3():
    a, x = grid_relations(3, 3), grid(TABLE3)
    assert len(a) == 8 and all(len(row) == 16 for row in a)
    assert all(sum(ai * xi for ai, xi in zip(row, x)) == 0 for row in a)


def test_table4_example3_row_a_is_the_only_sensitive_aggregation():
    a, _, suppressed, contributions = table4()
    found = enumerate_sensitive(a, suppressed, contributions, P20)
    assert patterns(found) == [{AI: 1, AIII: 1}]
    lam, measure = found[0]
    assert lam[AI] == lam[AIII]  # a sum, not a difference
    assert measure == 150  # X1 - 5 * 0
    assert any_sensitive(a, suppressed, contributions, P20)


def test_table4_row_space():
    a, _, suppressed, _ = table4()
    assert in_row_space(a, suppressed, {AI: 1, AIII: 1})
    # eq. (3.7): (3.1) - (3.3) is x13 - x21 = -100 (the seed prints x11 - x21, which is
    # no aggregation: it is not orthogonal to the kernel vector (1, -1, -1, 1)).
    assert in_row_space(a, suppressed, {AIII: 1, BI: -1})
    assert not in_row_space(a, suppressed, {AI: 1, BI: -1})
    assert in_row_space(a, suppressed, {AI: 2.5, AIII: 2.5, BI: 1, BIII: 1})
    assert not in_row_space(a, suppressed, {AI: 1})  # interval [0, 250]
    assert not in_row_space(a, suppressed, {AI: 1, BIII: 1})
    assert not in_row_space(a, suppressed, {AI: 1, grid_cell(0, 1, 3): 1})  # published
    # deriving B,I and B,III makes A,I alone an aggregation (A,I = col I - B,I - C,I)
    assert in_row_space(a, suppressed, {AI: 1}, derived={BI, BIII})
    assert not in_row_space(a, suppressed, {AI: 1, BI: 1}, derived={BI})


def test_numpy_inputs_and_float_coefficients():
    a, _, suppressed, contributions = table4()
    lam = np.zeros(16)
    lam[[AI, AIII]] = 1 / 3
    assert in_row_space(np.array(a), np.array(suppressed), lam)
    lam[AI] = 0.3
    assert not in_row_space(np.array(a), np.array(suppressed), lam)
    found = enumerate_sensitive(np.array(a), np.array(suppressed), contributions, P20)
    assert patterns(found) == [{AI: 1, AIII: 1}]


def test_derived_cells_are_dropped_from_lam():
    a, _, suppressed, contributions = table4()
    found = enumerate_sensitive(a, suppressed, contributions, P20, derived={BI, BIII})
    # A,I and A,III are each computable once B,I and B,III are: single respondents.
    assert {AI: 1} in patterns(found) and {AIII: 1} in patterns(found)
    assert all(BI not in lam and BIII not in lam for lam, _ in found)
    as_mask = np.isin(np.arange(16), [BI, BIII])
    assert enumerate_sensitive(a, suppressed, contributions, P20, derived=as_mask) == found
    assert (
        enumerate_sensitive(a, suppressed, contributions, P20, derived=list(as_mask.tolist()))
        == found
    )


def test_rational_relations_and_scaled_duplicates():
    # x0/2 + x1/3 - x2 = 0 and x0 + x3 - x4 = 0; cells 0, 1, 3 suppressed
    a = [[Fraction(1, 2), Fraction(1, 3), -1, 0, 0], [1, 0, 0, 1, -1]]
    suppressed = [True, True, False, True, False]
    contributions = [[("a", 6)], [("b", 3)], [], [("c", 1), ("d", 1), ("e", 1)], []]
    found = enumerate_sensitive(a, suppressed, contributions, P20)
    assert found == [({0: Fraction(1, 2), 1: Fraction(1, 3)}, Fraction(3))]
    assert in_row_space(a, suppressed, {0: 3, 1: 2})  # 6 x row 0
    assert in_row_space(a, suppressed, [0.5, 1 / 3, 0, 0, 0])
    assert not in_row_space(a, suppressed, {0: 1, 1: 1})
    assert in_row_space(a, suppressed, {0: 0.5, 1: -1 / 3, 3: 1})  # row 1 - row 0
    assert not in_row_space(a, suppressed, {0: -0.5, 1: -1 / 3, 3: 1})


def test_example4_union_is_sensitive():
    union = [("r1", 155), ("r2", 4), ("r3", 1)], [("s1", 28), ("s2", 10), ("s3", 2)]
    sensitive, measure = is_sensitive({0: 1, 1: 1}, list(union), P20)
    assert sensitive and measure == 155 - 5 * (200 - 155 - 28)
    # and found on Table 7's pattern (A,I  A,II  B,I  B,II of Table 6 suppressed)
    a = grid_relations(3, 3)
    x = grid(
        [[160, 380, 340, 880], [40, 80, 60, 180], [610, 800, 270, 1680], [810, 1260, 670, 2740]]
    )
    assert all(sum(ai * xi for ai, xi in zip(row, x)) == 0 for row in a)
    ai, aii, bi, bii = (grid_cell(i, j, 3) for i, j in [(0, 0), (0, 1), (1, 0), (1, 1)])
    contributions = [[(f"cell{i}", v)] for i, v in enumerate(x)]
    contributions[ai], contributions[bi] = union
    contributions[aii], contributions[bii] = spread("u", 380, 20), spread("w", 80, 20)
    suppressed = mask(16, {ai, aii, bi, bii})
    found = enumerate_sensitive(a, suppressed, contributions, P20)
    assert {ai: 1, bi: 1} in patterns(found)
    assert not in_row_space(a, suppressed, {ai: 1})


def test_example5_union_is_not_sensitive():
    union = [("r1", 1000), ("r2", 500), ("r3", 100)], [("s1", 100), ("s2", 30), ("s3", 20)]
    sensitive, measure = is_sensitive({0: 1, 1: 1}, list(union), P20)
    assert not sensitive and measure == 1000 - 5 * 250
    assert is_sensitive({0: 1}, list(union), P20) == (True, 1000 - 5 * 100)  # the cell alone
    # Example 5's Table 7: 2 x 2 with margins, all four inner cells suppressed
    x = grid([[1600, 900, 2500], [150, 2350, 2500], [2000, 1000, 3000], [3750, 4250, 8000]])
    a = grid_relations(3, 2)
    assert all(sum(ai * xi for ai, xi in zip(row, x)) == 0 for row in a)
    ai, aii, bi, bii = (grid_cell(i, j, 2) for i, j in [(0, 0), (0, 1), (1, 0), (1, 1)])
    contributions = [[(f"cell{i}", v)] for i, v in enumerate(x)]
    contributions[ai], contributions[bi] = union
    contributions[aii], contributions[bii] = spread("u", 900, 30), spread("w", 2350, 30)
    found = enumerate_sensitive(a, mask(12, {ai, aii, bi, bii}), contributions, P20)
    assert {ai: 1, bi: 1} not in patterns(found)
    assert found == []


def test_difference_of_diagonal_singletons_2x2():
    a = grid_relations(2, 2)
    ai, aii, bi, bii = (grid_cell(i, j, 2) for i, j in [(0, 0), (0, 1), (1, 0), (1, 1)])
    x = grid([[40, 60, 100], [70, 30, 100], [110, 90, 200]])
    assert all(sum(ai_ * xi for ai_, xi in zip(row, x)) == 0 for row in a)
    contributions = [[(f"cell{i}", v)] for i, v in enumerate(x)]
    contributions[ai], contributions[bii] = [("alone1", 40)], [("alone2", 30)]
    contributions[aii], contributions[bi] = spread("u", 60, 12), spread("w", 70, 14)
    suppressed = mask(9, {ai, aii, bi, bii})
    found = enumerate_sensitive(a, suppressed, contributions, P20)
    assert {ai: 1, bii: 1} in patterns(found)
    lam = next(lam for lam, _ in found if set(lam) == {ai, bii})
    assert lam[ai] == -lam[bii]  # A,I - B,II = row A - column II
    assert in_row_space(a, suppressed, {ai: 1, bii: -1})
    assert not in_row_space(a, suppressed, {ai: 1, bii: 1})


def test_pq_is_inclusive_p_percent_strict_and_empty_not_judged():
    cells = [[("a", 50), ("b", 30), ("c", 10)], []]
    assert is_sensitive({0: 1}, cells, ("p_percent", 20)) == (False, 0)
    assert is_sensitive({0: 1}, cells, ("pq", 20, 100)) == (True, 0)
    assert is_sensitive({0: 1}, cells, ("pq", 20, 50))[1] == 50 - Fraction(50, 20) * 10
    assert is_sensitive({1: 1}, cells, ("pq", 20, 100)) == (False, 0)
    assert is_sensitive({1: 1}, cells, ("p_percent", 20)) == (False, 0)


def test_absolute_contributions_and_holdings():
    cells = [[("h", 100), ("x", -40)], [("h", -50), ("y", 5)], [("z", 1)]]
    # lam = (2, -1): X^h = 2*100 + 50, X^x = 80, X^y = 5
    sensitive, measure = is_sensitive({0: 2, 1: -1}, cells, ("p_percent", 10))
    assert measure == 250 - 10 * 5 and sensitive
    assert is_sensitive({0: 2, 1: -1}, cells, ("frequency", 4)) == (True, 3)
    assert is_sensitive({0: 2, 1: -1}, cells, ("frequency", 3)) == (False, 3)
    assert is_sensitive([0, 0, 0], cells, ("frequency", 3)) == (False, 0)


def test_threshold_rule_counts_cells_with_nonzero_coefficient():
    a, _, suppressed, contributions = table4()
    counts = [5] * 16
    counts[AI], counts[AIII] = 1, 1
    found = enumerate_sensitive(a, suppressed, None, ("threshold", 3), counts=counts)
    assert patterns(found) == [{AI: 1, AIII: 1}]
    assert found[0][1] == 2
    assert is_sensitive({AI: 1, BI: 0}, None, ("threshold", 3), counts) == (True, 1)


def test_too_many_relations():
    a = grid_relations(5, 5)
    suppressed = [True] * 36
    with pytest.raises(ValueError):
        enumerate_sensitive(a, suppressed, [[]] * 36, P20, max_relations=10)


def grid_atoms(r: int, c: int) -> list[list[tuple[int, int]]]:
    """Each cell of :func:`grid_relations`'s grid as the sum of its leaves (``atoms`` of
    the oracle's functions): a margin's respondents are its leaves'."""
    rows = {i: [i] if i < r else list(range(r)) for i in range(r + 1)}
    cols = {j: [j] if j < c else list(range(c)) for j in range(c + 1)}
    return [
        [(grid_cell(i, j, c), 1) for i in rows[gi] for j in cols[gj]]
        for gi in range(r + 1)
        for gj in range(c + 1)
    ]


def test_circuits_of_a_2x2_with_its_margins():
    """Every cell of a 2x2 hidden, margins published: the rows and columns publish the
    sums of their pairs, and their differences the diagonals' differences, six circuits
    of two cells each. With the row totals hidden too, only the columns' pairs are left;
    with the diagonal and a row total hidden, both diagonal cells are derived from their
    columns, and the row total less (0,0) is the published (0,1) (singleton circuits on
    the leaves)."""
    a, atoms = grid_relations(2, 2), grid_atoms(2, 2)
    corners = [grid_cell(i, j, 2) for i in range(2) for j in range(2)]
    found = circuits(a, mask(9, corners), atoms=atoms)
    assert sorted(sorted(c) for c in found) == sorted(
        sorted(pair) for pair in itertools.combinations(corners, 2)
    )
    assert all({abs(v) for v in c.values()} == {1} for c in found)
    rows = corners + [grid_cell(0, 2, 2), grid_cell(1, 2, 2)]
    found = sorted(sorted(c) for c in circuits(a, mask(9, rows), atoms=atoms))
    assert found == [
        sorted([grid_cell(0, 0, 2), grid_cell(1, 0, 2)]),
        sorted([grid_cell(0, 1, 2), grid_cell(1, 1, 2)]),
    ]
    diagonal = [grid_cell(0, 0, 2), grid_cell(1, 1, 2), grid_cell(0, 2, 2)]
    found = sorted(sorted(c) for c in circuits(a, mask(9, diagonal), atoms=atoms))
    assert found == [[grid_cell(0, 0, 2)], [grid_cell(0, 1, 2)], [grid_cell(1, 1, 2)]]


def test_replicate_judge_reads_slots_and_weighted_counts():
    """Seed 000's example, 100 of weight 4 and 10 of weight 7: slots 100, 100, T = 470,
    N = 11. Fractional weights share a slot in proportion: 20 x 0.5 with 12 x 0.5 and
    12 x 1 (h58's aggregation) fills slots 16 and 12 of 28 (p% at 30: 16 > 0), and its
    count is 2 whatever the multipliers."""
    obs = {0: [(100, 4)], 1: [(10, 7)]}
    assert replicate_judge({0: 1, 1: 1}, obs, ("frequency", 12)) == (True, 11)
    assert replicate_judge({0: 1, 1: 1}, obs, ("frequency", 11)) == (False, 11)
    assert replicate_judge({0: 1, 1: 1}, obs, ("dominance", 2, 40)) == (
        True,
        200 - Fraction(40, 60) * 270,
    )
    obs = {0: [(20, "0.5")], 1: [(12, "0.5"), (12, 1)]}
    assert replicate_judge({0: 1, 1: -1}, obs, ("p_percent", 30)) == (True, 16)
    assert replicate_judge({0: 1, 1: Fraction(1, 3)}, obs, ("frequency", 2)) == (False, 2)
    assert replicate_judge({0: 1}, obs, ("frequency", 2)) == (True, Fraction(1, 2))
    assert replicate_judge({0: 1}, {0: []}, ("frequency", 2)) == (False, 0)


def test_replicate_witness_finds_a_small_weighted_union():
    """A 2x2 whose row 0 holds two cells of weight 1.2 (row 1: weight 5 each), every
    cell hidden: the row total publishes their sum, 2.4 < 3 contributors. With the rows'
    totals hidden too, every aggregation holds a cell of weight 5; with (0,1) of weight 2
    the row's sum has 3.2."""
    a, atoms = grid_relations(2, 2), grid_atoms(2, 2)
    corners = [grid_cell(i, j, 2) for i in range(2) for j in range(2)]
    obs = [[] for _ in range(9)]
    obs[grid_cell(0, 0, 2)] = [(10, "1.2")]
    obs[grid_cell(0, 1, 2)] = [(10, "1.2")]
    obs[grid_cell(1, 0, 2)] = [(10, 5)]
    obs[grid_cell(1, 1, 2)] = [(10, 5)]
    freq3 = [("frequency", 3)]
    phi, rule, count = replicate_witness(a, mask(9, corners), obs, freq3, atoms=atoms)
    assert set(phi) == set(corners[:2]) and rule == 0 and count == Fraction(12, 5)
    hidden = mask(9, corners + [grid_cell(0, 2, 2), grid_cell(1, 2, 2)])
    assert replicate_witness(a, hidden, obs, freq3, atoms=atoms) is None
    obs[grid_cell(0, 1, 2)] = [(10, 2)]
    assert replicate_witness(a, mask(9, corners), obs, freq3, atoms=atoms) is None
