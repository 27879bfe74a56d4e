"""Feasibility intervals against the seeds' worked examples and an independent brute force."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sdc import audit
from service.sdc.audit import check_protection, feasibility_intervals
from service.sdc.errors import InputError
from service.sdc.table import Hierarchy, LinkedTables, Table
from tests.golden import golden_table
from tests.reference import brute_force, feasibility_intervals_naive

GOLDEN = json.loads((Path(__file__).parent / "data/golden/intervals.json").read_text())


def assert_matches(result, expected):
    assert result.status == "optimal", result.message
    assert result.certified.all()
    np.testing.assert_allclose(result.lower, expected[:, 0], atol=1e-6)
    np.testing.assert_allclose(result.upper, expected[:, 1], atol=1e-6)


# --- golden cases of the seeds -----------------------------------------------------------


@pytest.mark.parametrize("case", GOLDEN, ids=[c["id"] for c in GOLDEN])
def test_golden_intervals(case):
    t, values, suppressed = golden_table(case)
    assert t.check_additivity(values) == []
    # Hidden values must not matter: the audit reads published cells only.
    hidden = np.where(suppressed, np.nan, values)
    for result in (
        feasibility_intervals(t, hidden, suppressed, case["lower_bound"]),
        feasibility_intervals_naive(t, hidden, suppressed, case["lower_bound"]),
    ):
        assert result.status == "optimal"
        got = {
            ",".join(t.key(c)): (lo, hi)
            for c, lo, hi in zip(result.cells, result.lower, result.upper)
        }
        assert got.keys() == case["expect"].keys()
        for key, (lo, hi) in case["expect"].items():
            assert got[key] == pytest.approx((lo, hi), abs=1e-6), key


def test_golden_table_7_protection_seed_002_example_2():
    # A,I = 160 needs an upper bound of 190 (p = 20, x1 = 155, x2 = 4): U = 30.
    case = next(c for c in GOLDEN if c["id"] == "daalmans-table-7")
    t, values, suppressed = golden_table(case)
    res = feasibility_intervals(t, values, suppressed)
    sensitive = res.cells == t.cell_index(("A", "I"))
    check = check_protection(
        values[res.cells], res.lower, res.upper, 30.0, 30.0, sensitive, res.certified
    )
    assert check.all_protected
    # The lower side is 80 from 160: a lower protection of 81 is 1 short.
    check = check_protection(
        values[res.cells], res.lower, res.upper, 30.0, 81.0, sensitive, res.certified
    )
    assert check.lower_too_close.tolist() == sensitive.tolist()
    assert check.missing_lower[sensitive].tolist() == [1.0]
    assert not check.all_protected


# --- brute force on hierarchical, 3-D and linked tables ----------------------------------


def two_level(groups: list[int]) -> Hierarchy:
    children = {"Total": [f"g{g}" for g in range(len(groups))]}
    for g, n in enumerate(groups):
        children[f"g{g}"] = [f"g{g}_{i}" for i in range(n)]
    return Hierarchy.from_children("h", children)


#: The sizes :func:`hierarchical_by_flat` draws from, for ``@given``.
HIERARCHICAL_BY_FLAT = {
    "groups": st.lists(st.integers(1, 3), min_size=1, max_size=3),
    "n_flat": st.integers(1, 3),
}


def hierarchical_by_flat(data, groups, n_flat):
    """A two-level hierarchy crossed with a flat dimension, random leaves (margins
    filled) and a random pattern: (table, values, suppressed)."""
    t = Table([two_level(groups), Hierarchy.flat("f", [f"f{i}" for i in range(n_flat)])])
    leaves = data.draw(st.lists(st.integers(0, 20), min_size=t.n_cells, max_size=t.n_cells))
    values = t.fill_margins(np.where(t.is_leaf, leaves, 0)).astype(float)
    suppressed = np.array(
        data.draw(st.lists(st.booleans(), min_size=t.n_cells, max_size=t.n_cells))
    )
    return t, values, suppressed


@settings(deadline=None, max_examples=30)
@given(data=st.data(), **HIERARCHICAL_BY_FLAT)
def test_hierarchical_by_flat_matches_brute_force(data, groups, n_flat):
    t, values, suppressed = hierarchical_by_flat(data, groups, n_flat)
    res = feasibility_intervals(t, values, suppressed)
    assert_matches(res, brute_force(t.relations, values, suppressed))
    # The true table is feasible, so every interval holds the true value.
    assert (res.lower <= values[res.cells] + 1e-9).all()
    assert (values[res.cells] <= res.upper + 1e-9).all()


@settings(deadline=None, max_examples=40)
@given(data=st.data(), **HIERARCHICAL_BY_FLAT)
def test_intervals_under_a_priori_bounds_match_brute_force(data, groups, n_flat):
    """Per-cell a-priori bounds around the true values (some infinite, some tight): the
    bounds the audit proves without an LP (an earlier optimum reaching a bound implied by
    one relation, :func:`service.sdc.audit._settle`) are the LP extremes."""
    t, values, suppressed = hierarchical_by_flat(data, groups, n_flat)
    slack = st.one_of(st.integers(0, 6).map(float), st.just(np.inf))
    below = np.array(data.draw(st.lists(slack, min_size=t.n_cells, max_size=t.n_cells)))
    above = np.array(data.draw(st.lists(slack, min_size=t.n_cells, max_size=t.n_cells)))
    lower, upper = values - below, values + above
    res = feasibility_intervals(t, values, suppressed, lower_bounds=lower, upper_bounds=upper)
    assert_matches(res, brute_force(t.relations, values, suppressed, lower, upper))


def test_fixed_hierarchy_example():
    # Total -> {A, B}, A -> {A1, A2}, B -> {B1}, crossed with three flat codes.
    h = Hierarchy.from_children("h", {"Total": ["A", "B"], "A": ["A1", "A2"], "B": ["B1"]})
    t = Table([h, Hierarchy.flat("f", ["x", "y", "z"])])
    rng = np.random.default_rng(11)
    values = t.fill_margins(np.where(t.is_leaf, rng.integers(0, 50, t.n_cells), 0))
    suppressed = np.zeros(t.n_cells, dtype=bool)
    for key in [
        ("A1", "x"),
        ("A1", "y"),
        ("A2", "x"),
        ("A2", "y"),
        ("B1", "z"),
        ("B", "z"),
        ("B1", "Total"),
        ("B", "Total"),
    ]:
        suppressed[t.cell_index(key)] = True
    res = feasibility_intervals(t, values, suppressed)
    assert_matches(res, brute_force(t.relations, values, suppressed))
    # B1 is B's only child, so B,z = B1,z; column z (A,z published) fixes both exactly.
    for key in [("B1", "z"), ("B", "z")]:
        i = res.cells.tolist().index(t.cell_index(key))
        assert res.lower[i] == res.upper[i] == pytest.approx(values[t.cell_index(key)])
    # A1,x can move within its 2x2 block.
    i = res.cells.tolist().index(t.cell_index(("A1", "x")))
    assert res.upper[i] > res.lower[i]


@pytest.mark.parametrize("seed", range(4))
def test_three_way_table_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    t = Table(
        [
            Hierarchy.flat("a", ["1", "2", "3"]),
            Hierarchy.flat("b", ["1", "2"]),
            Hierarchy.flat("c", ["1", "2", "3"]),
        ]
    )
    values = t.fill_margins(np.where(t.is_leaf, rng.integers(0, 30, t.n_cells), 0))
    suppressed = rng.random(t.n_cells) < 0.35
    res = feasibility_intervals(t, values, suppressed)
    assert_matches(res, brute_force(t.relations, values, suppressed))


@pytest.mark.parametrize("seed", range(4))
def test_linked_tables_match_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    region = Hierarchy.from_children(
        "region", {"T": ["N", "S"], "N": ["N1", "N2"], "S": ["S1", "S2"]}
    )
    linked = LinkedTables(
        [
            Table([region, Hierarchy.flat("size", ["s", "m", "l"])]),
            Table([Hierarchy.flat("nace", ["C", "F"]), region]),
        ]
    )
    union = linked.union_table
    full = union.fill_margins(np.where(union.is_leaf, rng.integers(0, 40, union.n_cells), 0))
    values = full[linked.union_index]
    assert linked.check_additivity(values) == []
    suppressed = rng.random(linked.n_cells) < 0.4
    res = feasibility_intervals(linked, values, suppressed)
    assert_matches(res, brute_force(linked.relations, values, suppressed))


def _cyclic_linked(sizes=(2, 2, 2)) -> LinkedTables:
    """Tables a x b, b x c and a x c: a cycle, whose cover table's non-negative parts
    restrict the linked cells beyond their own relations."""
    a, b, c = (Hierarchy.flat(n, [f"{n}{i}" for i in range(k)]) for n, k in zip("abc", sizes))
    return LinkedTables([Table([a, b]), Table([b, c]), Table([a, c])])


def test_which_linked_tables_form_a_cycle():
    h = {n: Hierarchy.flat(n, [f"{n}1", f"{n}2"]) for n in "abcd"}

    def linked(*tables):
        return LinkedTables([Table([h[n] for n in t]) for t in tables])

    assert not linked("ab", "bc", "ac").acyclic
    assert not linked("abc", "cd", "ad").acyclic
    assert linked("ab", "bc").acyclic
    assert linked("ab", "bc", "cd").acyclic
    assert linked("ab", "ac", "ad").acyclic
    assert linked("abc", "bcd", "ab").acyclic


def test_cyclic_linked_tables_hide_what_their_cover_table_reveals():
    """Parts (a, b, c) 20, 0; 40, 10; 5, 40; 0, 20: a x b's four cells hidden range over
    [0, 65] by a x b's relations, but a x c and b x c published leave (a0, b0) [20, 35],
    its value 20 the lower end (until 2026-11-27 the intervals were the linked
    relations' alone, and a lower protection of 10 was called met)."""
    linked = _cyclic_linked()
    union = linked.union_table
    parts = np.zeros(union.n_cells)
    for (i, j, k), v in zip(
        itertools.product(range(2), repeat=3), [20, 0, 40, 10, 5, 40, 0, 20], strict=True
    ):
        parts[union.cell_index((f"a{i}", f"b{j}", f"c{k}"))] = v
    values = union.fill_margins(parts)[linked.union_index]
    hidden = np.zeros(linked.n_cells, bool)
    for i, j in itertools.product(range(2), repeat=2):
        hidden[linked.cell_index((f"a{i}", f"b{j}", "Total"))] = True
    res = feasibility_intervals(linked, values, hidden)
    assert res.status == "optimal"
    got = dict(zip(res.cells.tolist(), zip(res.lower.tolist(), res.upper.tolist())))
    assert got[linked.cell_index(("a0", "b0", "Total"))] == pytest.approx((20.0, 35.0))
    assert got[linked.cell_index(("a1", "b0", "Total"))] == pytest.approx((30.0, 45.0))
    # A negative lower bound: the parts may be negative, and the linked relations are
    # all the intruder has.
    lower = np.where(hidden, -100.0, 0.0)
    res = feasibility_intervals(linked, values, hidden, lower)
    assert_matches(res, brute_force(linked.relations, values, hidden, lower))
    assert res.lower.min() == -100.0


@pytest.mark.parametrize("integral", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_cyclic_linked_tables_match_their_cover_table_by_brute_force(seed, integral):
    """The intervals of cyclic linked tables are those of their cover table with every cell
    outside the linked tables hidden (a dense LP per bound; the cover's own cells are not
    bounded, only used); for counts, those of whole cover tables, within the LP's bounds
    rounded inwards and around the true value."""
    rng = np.random.default_rng(500 + seed)
    linked = _cyclic_linked(tuple(rng.integers(2, 5, 3).tolist()))
    union = linked.union_table
    parts = np.where(union.is_leaf, rng.choice([0, 0, 1, 2, 5, 10, 20], union.n_cells), 0)
    full = union.fill_margins(parts.astype(float))
    values = full[linked.union_index]
    hidden = rng.random(linked.n_cells) < 0.5
    res = feasibility_intervals(linked, values, hidden, integral=integral)
    assert res.status == "optimal", res.message
    cover_hidden = np.ones(union.n_cells, bool)
    cover_hidden[linked.union_index] = hidden
    expected = brute_force(union.relations, full, cover_hidden)
    at = np.searchsorted(np.flatnonzero(cover_hidden), linked.union_index[res.cells])
    if not integral:
        assert_matches(res, expected[at])
        return
    # Whole cover tables: within the LP's bounds, rounded inwards, and attained.
    np.testing.assert_array_less(np.ceil(expected[at, 0] - 1e-9) - 1e-9, res.lower + 1e-9)
    np.testing.assert_array_less(res.upper - 1e-9, np.floor(expected[at, 1] + 1e-9) + 1e-9)
    assert np.all(res.lower <= values[res.cells]) and np.all(values[res.cells] <= res.upper)


# --- special cases -----------------------------------------------------------------------


def geurts():
    return golden_table(GOLDEN[0])


def test_single_suppressed_cell_is_exact_without_lp():
    t, values, _ = geurts()
    suppressed = np.zeros(t.n_cells, dtype=bool)
    suppressed[t.cell_index(("1", "1"))] = True
    res = feasibility_intervals(t, values, suppressed)
    assert res.status == "optimal" and res.n_lp_solves == 0
    assert (res.lower.tolist(), res.upper.tolist()) == ([4.0], [4.0])


def test_isolated_cell_gets_its_bounds_without_lp():
    t = Table([Hierarchy.flat("r", ["1", "2"])])
    res = feasibility_intervals(
        t.relations[:0],
        [3.0, 1.0, 2.0],
        np.array([False, True, False]),
        lower_bounds=-5.0,
        upper_bounds=[9.0, 7.0, 9.0],
    )
    assert (res.lower.tolist(), res.upper.tolist(), res.n_lp_solves) == ([-5.0], [7.0], 0)


def test_bounds_of_one_relation_reached_by_an_optimum_need_no_lp():
    """A 2x2 block of a 3x3 table: once min and max of cell (1, 1) are solved, each other
    cell follows from one relation (x12 = 30 - x11, x21 = 40 - x11, x22 = 45 - x21) and
    the two optima reach those bounds, so 2 LPs settle all eight bounds (7 when only the
    a-priori bound 0 could be settled without an LP)."""
    t = Table([Hierarchy.flat("r", ["1", "2", "3"]), Hierarchy.flat("c", ["1", "2", "3"])])
    leaves = {("1", "1"): 10, ("1", "2"): 20, ("1", "3"): 5, ("2", "1"): 30, ("2", "2"): 15}
    leaves |= {("2", "3"): 8, ("3", "1"): 7, ("3", "2"): 9, ("3", "3"): 11}
    values = np.zeros(t.n_cells)
    for key, v in leaves.items():
        values[t.cell_index(key)] = v
    values = t.fill_margins(values)
    block = [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]
    suppressed = np.isin(np.arange(t.n_cells), [t.cell_index(k) for k in block])
    res = feasibility_intervals(t, values, suppressed)
    assert_matches(res, brute_force(t.relations, values, suppressed))
    got = {key: (res.lower[i], res.upper[i]) for i, key in enumerate(block)}
    assert got == {("1", "1"): (0, 30), ("1", "2"): (0, 30), ("2", "1"): (10, 40)} | {
        ("2", "2"): (5, 35)
    }
    assert res.n_lp_solves == 2


def test_unbounded_when_everything_is_suppressed():
    t, values, _ = geurts()
    suppressed = np.ones(t.n_cells, dtype=bool)
    res = feasibility_intervals(t, values, suppressed)
    assert res.status == "optimal" and res.certified.all()
    np.testing.assert_array_equal(res.lower, 0.0)
    np.testing.assert_array_equal(res.upper, np.inf)
    naive = feasibility_intervals_naive(t, values, suppressed)
    np.testing.assert_array_equal(naive.upper, np.inf)


def test_free_lower_bound_gives_minus_infinity():
    t, values, suppressed = geurts()
    res = feasibility_intervals(t, values, suppressed, lower_bounds=-np.inf)
    assert res.status == "optimal"
    np.testing.assert_array_equal(res.lower, -np.inf)
    np.testing.assert_array_equal(res.upper, np.inf)


def test_infeasible_published_values_are_reported_not_raised():
    t, values, suppressed = geurts()
    # Row 3 (all published) no longer adds up.
    broken = values.copy()
    broken[t.cell_index(("3", "Total"))] = 7
    for fn in (feasibility_intervals, feasibility_intervals_naive):
        res = fn(t, broken, suppressed)
        assert res.status == "infeasible" and "relation" in res.message
        assert not res.certified.any() and np.isnan(res.lower).all()
    # Row 1 total 2 cannot hold x11 >= 3 that column 1 forces: infeasible inside the LP.
    broken = values.copy()
    broken[t.cell_index(("1", "Total"))] = 2
    broken[t.cell_index(("Total", "Total"))] = 11
    broken[t.cell_index(("Total", "2"))] = 2
    res = feasibility_intervals(t, broken, suppressed)
    assert res.status == "infeasible" and not res.certified.any()
    assert feasibility_intervals_naive(t, broken, suppressed).status == "infeasible"
    # A single suppressed cell forced below its lower bound.
    only = np.zeros(t.n_cells, dtype=bool)
    only[t.cell_index(("1", "1"))] = True
    res = feasibility_intervals(t, values, only, lower_bounds=5.0)
    assert res.status == "infeasible"
    # A published value outside its bounds.
    res = feasibility_intervals(t, values, suppressed, upper_bounds=8.0)
    assert res.status == "infeasible" and "outside its a-priori bounds" in res.message


def random_two_way(n=30, seed=5):
    rng = np.random.default_rng(seed)
    t = Table(
        [
            Hierarchy.flat("r", [str(i) for i in range(n)]),
            Hierarchy.flat("c", [str(i) for i in range(n)]),
        ]
    )
    values = t.fill_margins(np.where(t.is_leaf, rng.integers(1, 100, t.n_cells), 0))
    suppressed = t.is_leaf & (rng.random(t.n_cells) < 0.2)
    return t, values, suppressed


def test_tiny_time_limit_certifies_nothing_that_needs_an_lp():
    t, values, suppressed = random_two_way()
    full = feasibility_intervals(t, values, suppressed)
    assert full.status == "optimal" and full.n_lp_solves > 0
    res = feasibility_intervals(t, values, suppressed, time_limit=1e-9)
    assert res.status == "time_limit" and res.n_lp_solves == 0
    assert not res.certified.all()
    # No LP ran, so no bound that needs one is claimed.
    assert np.isnan(res.lower[~res.certified]).all()
    assert np.isnan(res.upper[~res.certified]).all()
    np.testing.assert_array_equal(res.lower[res.certified], full.lower[res.certified])


def test_time_limit_midway_keeps_only_proven_bounds(monkeypatch):
    t, values, suppressed = random_two_way()
    full = feasibility_intervals(t, values, suppressed)
    # A clock that advances 1 s per reading: the 5 s budget ends after a few solves.
    clock = iter(range(10**6))
    monkeypatch.setattr(audit.time, "perf_counter", lambda: float(next(clock)))
    res = feasibility_intervals(t, values, suppressed, time_limit=5.0)
    monkeypatch.undo()
    assert res.status == "time_limit" and 0 < res.n_lp_solves < full.n_lp_solves
    assert 0 < res.certified.sum() < len(res.cells)
    for got, ref in ((res.lower, full.lower), (res.upper, full.upper)):
        proven = ~np.isnan(got)
        np.testing.assert_allclose(got[proven], ref[proven], atol=1e-9)
    assert np.isnan(res.upper[~res.certified]).any()


def test_naive_matches_on_a_larger_table_and_takes_subsets():
    t, values, suppressed = random_two_way(n=12, seed=9)
    res = feasibility_intervals(t, values, suppressed)
    naive = feasibility_intervals_naive(t, values, suppressed)
    np.testing.assert_allclose(res.lower, naive.lower, atol=1e-6)
    np.testing.assert_allclose(res.upper, naive.upper, atol=1e-6)
    assert naive.n_lp_solves == 2 * len(res.cells) > res.n_lp_solves
    part = feasibility_intervals_naive(t, values, suppressed, cells=res.cells[:3])
    np.testing.assert_allclose(part.upper, res.upper[:3], atol=1e-6)
    with pytest.raises(InputError, match="cells must be suppressed"):
        feasibility_intervals_naive(t, values, suppressed, cells=[0])


def test_decomposition_into_independent_groups():
    # Two 2x2 blocks that share no relation with a suppressed cell.
    t = Table([Hierarchy.flat("r", list("abcd")), Hierarchy.flat("c", list("wxyz"))])
    values = t.fill_margins(np.where(t.is_leaf, np.arange(t.n_cells) % 7 + 1, 0))
    suppressed = np.zeros(t.n_cells, dtype=bool)
    for key in [
        ("a", "w"),
        ("a", "x"),
        ("b", "w"),
        ("b", "x"),
        ("c", "y"),
        ("c", "z"),
        ("d", "y"),
        ("d", "z"),
    ]:
        suppressed[t.cell_index(key)] = True
    res = feasibility_intervals(t, values, suppressed)
    assert res.n_components == 2
    assert_matches(res, brute_force(t.relations, values, suppressed))


def test_input_errors_name_the_field():
    t, values, suppressed = geurts()
    with pytest.raises(InputError, match="values must have one entry per cell") as e:
        feasibility_intervals(t, values[:-1], suppressed)
    assert e.value.field == "values"
    with pytest.raises(InputError, match="boolean mask"):
        feasibility_intervals(t, values, suppressed.astype(int))
    with pytest.raises(InputError, match="published cell 0 has no finite value") as e:
        feasibility_intervals(t, np.where(np.arange(t.n_cells) == 0, np.nan, values), suppressed)
    assert e.value.cell == 0
    with pytest.raises(InputError, match="bounds of cell 0 are empty"):
        feasibility_intervals(t, values, suppressed, lower_bounds=1.0, upper_bounds=0.0)
    with pytest.raises(InputError, match="time_limit"):
        feasibility_intervals(t, values, suppressed, time_limit=0)


def test_no_suppressed_cells():
    t, values, _ = geurts()
    res = feasibility_intervals(t, values, np.zeros(t.n_cells, dtype=bool))
    assert res.status == "optimal" and res.cells.size == 0 and res.n_lp_solves == 0


def test_time_is_reported():
    t, values, suppressed = geurts()
    before = time.perf_counter()
    res = feasibility_intervals(t, values, suppressed)
    assert 0 < res.seconds <= time.perf_counter() - before


# --- protection check (seed 003 B.2.a.iii) -----------------------------------------------


def test_check_protection_flags():
    values = np.array([100.0, 100.0, 100.0, 100.0, 100.0, 50.0, 100.0, 100.0])
    lower = np.array([100.0, 60.0, 95.0, 85.0, 90.0, 0.0, 80.0, np.nan])
    upper = np.array([100.0, 105.0, 140.0, 115.0, 110.0, np.inf, 120.0, np.nan])
    sensitive = np.array([True, True, True, True, True, True, False, True])
    certified = ~np.isnan(lower)
    c = check_protection(values, lower, upper, 10.0, 10.0, sensitive, certified)
    #                       exact  up-close lo-close fit   equal  unbounded  not-sens uncert
    assert c.exact.tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert c.upper_too_close.tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert c.lower_too_close.tolist() == [1, 0, 1, 0, 0, 0, 0, 0]
    assert c.too_narrow.tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert c.missing_upper[:7].tolist() == [10.0, 5.0, 0, 0, 0, 0, 0]
    assert c.missing_lower[:7].tolist() == [10.0, 0, 5.0, 0, 0, 0, 0]
    assert np.isnan(c.missing_upper[7]) and np.isnan(c.missing_lower[7])
    assert c.protected.tolist() == [0, 0, 0, 1, 1, 1, 1, 0]
    assert not c.all_protected


def test_check_protection_too_narrow_and_tolerance():
    # Width 18 < 10 + 10 although each side alone would be fine for a level of 9.
    c = check_protection([100.0], [91.0], [109.0], [9.0], [11.0], [True], [True])
    assert c.too_narrow.tolist() == [True]
    assert c.lower_too_close.tolist() == [True] and c.missing_lower.tolist() == [2.0]
    assert c.upper_too_close.tolist() == [False]
    # Shortfalls within rtol * magnitude (1e-7 * 1e6 = 0.1 here) are round-off: a
    # shortfall of 1 is flagged, one of 1e-3 is not.
    c = check_protection(
        [1e6, 1e6],
        [0.0, 0.0],
        [1e6 + 10 - 1, 1e6 + 10 - 1e-3],
        10.0,
        0.0,
        [True, True],
        [True, True],
    )
    assert c.upper_too_close.tolist() == [True, False]
    assert c.missing_upper.tolist() == [pytest.approx(1.0), 0.0]
    # An interval whose width is round-off is an exact disclosure even with zero levels.
    c = check_protection(
        [5.0, 5.0], [5.0, 5.0], [5.0 + 1e-9, 5.5], 0.0, 0.0, [True, True], [True, True]
    )
    assert c.exact.tolist() == [True, False]
    assert c.protected.tolist() == [False, True]


def test_audit_flags_golden_table_4_width_rule():
    # Seed 002 Example 1: width at least 50% of the value, i.e. U + L = 0.5 X with U = L.
    case = next(c for c in GOLDEN if c["id"] == "daalmans-table-4")
    t, values, suppressed = golden_table(case)
    res = feasibility_intervals(t, values, suppressed)
    x = values[res.cells]
    sensitive = np.isin(res.cells, [t.cell_index(("A", "I")), t.cell_index(("A", "III"))])
    c = check_protection(x, res.lower, res.upper, 0.25 * x, 0.25 * x, sensitive, res.certified)
    assert c.all_protected  # the seed's "safe according to the widths" verdict


# --- tables accepted with an additivity tolerance ------------------------------------------


def test_tolerance_widens_each_relation_to_a_band():
    """T = a + b + c holds only to within 0.5 (T is 35.4, the cells add to 35): the
    intruder's feasible set is |a + b + c - T| <= 0.5, not the exact plane."""
    t = Table([Hierarchy.flat("c", ["a", "b", "c"], "T")])
    values = np.zeros(t.n_cells)
    for code, v in {"a": 10.0, "b": 20.0, "c": 5.0, "T": 35.4}.items():
        values[t.cell_index((code,))] = v
    a, b = t.cell_index(("a",)), t.cell_index(("b",))
    only_a = np.isin(np.arange(t.n_cells), [a])
    assert feasibility_intervals(t, values, only_a).status == "optimal"  # a pinned to 10.4
    banded = feasibility_intervals(t, values, only_a, tolerance=0.5)
    assert (banded.lower[0], banded.upper[0]) == pytest.approx((9.9, 10.9))
    pair = feasibility_intervals(t, values, np.isin(np.arange(t.n_cells), [a, b]), tolerance=0.5)
    assert pair.status == "optimal"
    np.testing.assert_allclose(np.c_[pair.lower, pair.upper], [[0, 30.9], [0, 30.9]])
    nothing = np.zeros(t.n_cells, bool)
    assert feasibility_intervals(t, values, nothing).status == "infeasible"
    assert feasibility_intervals(t, values, nothing, tolerance=0.5).status == "optimal"
    with pytest.raises(InputError, match="tolerance"):
        feasibility_intervals(t, values, nothing, tolerance=-1)


def test_run_counts_its_deadline_from_the_time_already_spent():
    """HiGHS 1.x measures ``time_limit`` against the run time of all of an object's runs
    (ERGO-Code/HiGHS#1331): a model reused past its limit must still get its seconds."""
    import highspy

    from service.sdc import highs

    rng = np.random.default_rng(0)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    n, m = 300, 200
    h.addVars(n, np.zeros(n), np.full(n, 10.0))
    a = rng.random((m, n))
    for r in range(m):
        idx = np.flatnonzero(a[r] < 0.3).astype(np.int32)
        h.addRow(-np.inf, 50.0, len(idx), idx, a[r, idx])
    h.changeColsCost(n, np.arange(n, dtype=np.int32), -rng.random(n))
    while h.getRunTime() < 0.3:  # a model that has already run for 0.3 s
        h.clearSolver()
        highs.run(h, time.perf_counter() + 60.0)
    h.clearSolver()
    assert highs.run(h, time.perf_counter() + 0.2) is highs.Outcome.OPTIMAL
    assert h.getRunTime() > 0.3


def test_a_reused_mip_gets_only_its_seconds():
    """HiGHS 1.16 measures a MIP's ``time_limit`` from the start of each run, unlike an
    LP's: a MIP that has already run must not be given its past run time again (a 0.3 s
    deadline on a MIP object that ran 1 s would otherwise let it run 1.3 s)."""
    import scipy.sparse as sp

    from service.sdc import highs

    rng = np.random.default_rng(0)
    n = 300
    a = sp.random(n // 2, n, density=0.05, random_state=1, format="csc")
    h = highs.model(
        -rng.random(n),
        np.zeros(n),
        np.full(n, 10.0),
        a,
        np.full(n // 2, -np.inf),
        np.full(n // 2, 3.0),
        integer=np.ones(n, bool),
    )
    assert highs.run(h, time.perf_counter() + 1.0) is highs.Outcome.TIME_LIMIT
    h.changeColsCost(n, np.arange(n, dtype=np.int32), -rng.random(n))
    h.clearSolver()
    start = time.perf_counter()
    assert highs.run(h, start + 0.3) is highs.Outcome.TIME_LIMIT
    assert time.perf_counter() - start < 0.9


@pytest.mark.long
def test_a_warm_start_gone_astray_is_not_an_infeasible_table():
    """Every cell of a 60x60 hierarchical table (values up to about 5e7) known only within
    1,000 of its controlled rounding: the rounding itself and the true table both satisfy
    the relations inside those bounds, so no group is infeasible. Warm-started primal
    simplex once declared a group infeasible after about 2,300 solves; such a verdict is
    now confirmed from scratch first."""
    from benchmarks.suppress import instance
    from service.sdc.rounding import controlled_rounding

    p = instance("60x60 hier", 0).problem
    r = controlled_rounding(p.relations, p.values, 1000.0, time_limit=60).rounded
    lo, hi = np.maximum(0.0, r - 1000.0), r + 1000.0
    assert ((p.values >= lo) & (p.values <= hi)).all()
    iv = feasibility_intervals(p.relations, r, np.ones(p.n_cells, bool), lo, hi, time_limit=120)
    assert iv.status == "optimal" and iv.certified.all()
    x = p.values[iv.cells]
    assert (iv.lower <= x + 1e-6 * np.abs(x)).all() and (iv.upper >= x - 1e-6 * np.abs(x)).all()


# --- aggregations of cells with common parts (found 2026-11-27) ---------------------------


def _linked_problem(regions, leaves, rule, cover=False):
    """Linked tables region x size and nace x region (sizes s, m; nace C, F) over union
    leaves (region, size, nace) with the respondents ``leaves`` gives them (``[(id,
    amount)]``), every linked cell holding its union leaves' contributions. Returns the
    problem, the magnitudes' values, a cell-index function of union keys, each linked
    cell's union leaves (positions) and the contributions by union leaf. With ``cover``
    the problem is on their cover table instead (every cell of the union of the linked
    tables, region x size x nace), with the same contributions."""
    from service.sdc import magnitudes, primary
    from service.sdc.magnitudes import Contributions
    from service.sdc.problem import TableProblem
    from service.sdc.unions import UnionSource

    region = Hierarchy.flat("region", regions, "T")
    linked = LinkedTables(
        [
            Table([region, Hierarchy.flat("size", ["s", "m"], "T")]),
            Table([Hierarchy.flat("nace", ["C", "F"], "T"), region]),
        ]
    )
    union = linked.union_table
    space = union if cover else linked
    in_union = np.arange(union.n_cells) if cover else np.asarray(linked.union_index)
    g = union.aggregation.tocsr()
    by_leaf = [leaves[union.key(int(c))] for c in np.flatnonzero(union.is_leaf)]
    cell_leaves = [g.indices[g.indptr[u] : g.indptr[u + 1]].tolist() for u in in_union]
    per_cell = [[rc for j in ls for rc in by_leaf[j]] for ls in cell_leaves]
    cell = np.array([i for i, lst in enumerate(per_cell) for _ in lst])
    value = np.array([float(a) for lst in per_cell for _, a in lst])
    holding = np.array([r for lst in per_cell for r, _ in lst])
    rules = primary.RuleSet((rule,))
    m = magnitudes.from_contributions(
        space.n_cells, cell, value, holding=holding, depth=rules.depth
    )
    v = primary.assess(m, rules)
    source = UnionSource(m, rules, contributions=Contributions(cell, value, holding))
    problem = TableProblem.of(
        space, m.value, v.sensitive, v.upper_protection, v.lower_protection, unions=source
    )
    index = {union.key(int(u)): i for i, u in enumerate(in_union.tolist())}

    def at(*key):
        return index[key]

    return problem, m.value, at, cell_leaves, by_leaf


def _linked_with_a_singleton():
    """:func:`_linked_problem` with (N1, s, F) one respondent of 100, (N1, m, C) one of 1,
    (N1, s, C) ten of 20, under the p%-rule (p = 20)."""
    from service.sdc.rules import PPercent

    amounts = {
        ("N1", "s", "C"): [20] * 10,
        ("N1", "s", "F"): [100],
        ("N1", "m", "C"): [1],
        ("N1", "m", "F"): [30] * 10,
        ("N2", "s", "C"): [500] + [2] * 5,
        ("N2", "s", "F"): [40] * 2,
        ("N2", "m", "C"): [40] * 5,
        ("N2", "m", "F"): [40] * 5,
    }
    ids = iter(range(1000, 10**6))
    leaves = {k: [(next(ids), float(a)) for a in v] for k, v in amounts.items()}
    problem, values, at, _, _ = _linked_problem(["N1", "N2"], leaves, PPercent(20.0))
    return problem, values, at


def test_an_aggregation_of_linked_cells_with_common_parts_is_not_certified():
    """The cells (N1, s) and (C, N1) of two linked tables share the union leaf (N1, s, C);
    with both hidden, their difference is published and equals x(N1, s, F) - x(N1, m, C) =
    100 - 1: the one respondent of (N1, m, C) learns the singleton to within 1%. Judged
    cell by cell, the ten respondents of (N1, s, C) counted in both cells made it look
    safe, and the audit said ``safe``; now a group of hidden cells that share a part is not
    certified (``aggregations._sharing``), whatever else it decides."""

    problem, values, at = _linked_with_a_singleton()
    pattern = np.zeros(len(values), bool)
    for key in [("N1", "s", "T"), ("N2", "s", "T"), ("N1", "T", "T"), ("N2", "T", "T")]:
        pattern[at(*key)] = True
    pattern[[at("N1", "T", "C"), at("N2", "T", "C")]] = True
    assert pattern[problem.sensitive].all()
    _publishes_the_difference_uncertified(problem, values, at, pattern)


def _publishes_the_difference_uncertified(problem, values, at, pattern):
    """``pattern`` publishes (N1, s) - (C, N1) = 100 - 1 on the union leaves, and the
    audit, which judges linked cells as separate atoms, does not certify it."""
    from service.sdc.audit import audit_pattern
    from tests import bruteforce

    lam = np.zeros(len(values))
    lam[at("N1", "s", "T")], lam[at("N1", "T", "C")] = 1, -1
    assert bruteforce.in_row_space(problem.relations.toarray(), pattern, lam)
    assert lam @ values == 99.0
    result = audit_pattern(problem, pattern)
    assert result.verdict == "uncertified"
    assert result.aggregations.status == "undecided"
    assert "overlap in parts" in result.aggregations.message


def test_linked_cells_with_common_parts_are_not_certified_when_none_is_sensitive():
    """Hiding (N1, s), (C, N1) and N1's total, and the same for N2 so that nothing is
    derived: none of the six is sensitive, yet the pattern publishes (N1, s) - (C, N1) =
    x(N1, s, F) - x(N1, m, C) = 100 - 1, and the one respondent of (N1, m, C) learns the
    singleton. Seed 002 Theorem 2 (an aggregation of non-sensitive cells is safe) holds
    for disjoint parts only; the check skipped such groups and said ``safe`` (a helper's
    campaign, 2026-11-27). Now ``uncertified``, as with a sensitive cell hidden; on the
    cover table the same pattern is judged exactly: ``unsafe``."""
    from service.sdc.audit import audit_pattern
    from service.sdc.rules import PPercent

    amounts = {
        ("N1", "s", "C"): [10] * 10,
        ("N1", "s", "F"): [100],
        ("N1", "m", "C"): [1],
        ("N1", "m", "F"): [10] * 10,
        **{("N2", z, n): [10] * 10 for z in "sm" for n in "CF"},
    }
    ids = iter(range(1000, 10**6))
    leaves = {k: [(next(ids), float(a)) for a in v] for k, v in amounts.items()}
    hidden = [(r, *k) for r in ("N1", "N2") for k in [("s", "T"), ("T", "C"), ("T", "T")]]
    for cover in (False, True):
        problem, values, at, _, _ = _linked_problem(["N1", "N2"], leaves, PPercent(10.0), cover)
        pattern = np.zeros(len(values), bool)
        pattern[[at(*key) for key in hidden]] = True
        if cover:
            # The cover's cells outside the linked tables are never published.
            pattern[[at(r, z, n) for r in ("N1", "N2", "T") for z in "sm" for n in "CF"]] = True
            assert audit_pattern(problem, pattern).verdict == "unsafe"
            continue
        assert not problem.sensitive[pattern].any()
        _publishes_the_difference_uncertified(problem, values, at, pattern)


def test_linked_tables_judged_cell_by_cell_are_never_certified():
    """Published cells of two linked tables publish differences of parts no table has:
    (N1, s) - (N1, F) = x(N1, s, C) - x(N1, m, F) = 300 - 1, so the one respondent of
    (N1, m, F) learns the singleton of (N1, s, C), though every linked cell passes the
    p%-rule (a helper's campaign, 2026-11-27: found with those two cells derived, and
    with nothing suppressed at all, both called ``safe``). The check judges aggregations
    of suppressed cells only, and contributions sent per cell cannot judge parts: nothing
    on such tables is certified, whatever is hidden. On the cover table the same
    publication is judged exactly: ``unsafe``."""
    from service.sdc.audit import audit_pattern
    from service.sdc.rules import PPercent

    amounts = {
        ("N1", "s", "C"): [300],
        ("N1", "m", "F"): [1],
        ("N1", "s", "F"): [10] * 10,
        ("N1", "m", "C"): [10] * 10,
        **{("N2", z, n): [10] * 10 for z in "sm" for n in "CF"},
    }
    ids = iter(range(1000, 10**6))
    leaves = {k: [(next(ids), float(a)) for a in v] for k, v in amounts.items()}
    problem, values, at, _, _ = _linked_problem(["N1", "N2"], leaves, PPercent(10.0))
    assert not problem.sensitive.any()
    derived = np.zeros(len(values), bool)
    derived[[at("N1", "m", "T"), at("N1", "T", "F")]] = True  # N1's totals give both
    for hidden in (np.zeros(len(values), bool), derived):
        result = audit_pattern(problem, hidden)
        assert result.verdict == "uncertified", result.reasons
        assert "overlap in parts" in result.aggregations.message
    cover, _, cover_at, _, _ = _linked_problem(["N1", "N2"], leaves, PPercent(10.0), True)
    outside = np.zeros(cover.n_cells, bool)
    outside[[cover_at(r, z, n) for r in ("N1", "N2", "T") for z in "sm" for n in "CF"]] = True
    assert audit_pattern(cover, outside).verdict == "unsafe"


def test_aggregations_across_groups_of_linked_cells_with_common_parts_are_not_certified():
    """Two groups of hidden cells (one per linked table, no relation in common) whose cells
    overlap in union leaves: a sum of the two groups' aggregations is an aggregation too,
    judged in neither group, and on the leaves it is sensitive under the (p,q)-rule (a
    helper's campaign: both methods returned this pattern as safe after the guard only
    looked within a group). Every group holding a cell that shares a part with another
    hidden cell, in any group, is now undecided."""
    from service.sdc.audit import audit_pattern
    from service.sdc.rules import PriorPosterior
    from tests import bruteforce

    leaves = {
        ("N1", "s", "C"): [(1000, 1000), (1001, 10)],
        ("N1", "s", "F"): [(1002, 300), (1003, 100), (1004, 1000), (1005, 100)],
        ("N1", "m", "C"): [(1006, 10), (7, 3), (1008, 1)],
        ("N1", "m", "F"): [(1009, 1), (1010, 100)],
        ("N2", "s", "C"): [(7, 1), (1012, 1000)],
        ("N2", "s", "F"): [(1013, 100), (7, 300)],
        ("N2", "m", "C"): [(1014, 1)],
        ("N2", "m", "F"): [(1015, 300), (1016, 10), (1017, 100)],
        ("S1", "s", "C"): [(1018, 10)],
        ("S1", "s", "F"): [(1019, 300), (1020, 10), (1021, 10)],
        ("S1", "m", "C"): [(1022, 1000), (1023, 1000)],
        ("S1", "m", "F"): [(1024, 3), (1025, 3)],
    }
    problem, _, at, cell_leaves, by_leaf = _linked_problem(
        ["N1", "N2", "S1"], leaves, PriorPosterior(20.0, 60.0)
    )
    n = len(cell_leaves)
    pattern = np.zeros(n, bool)
    for r in ("N1", "N2", "S1"):
        for key in [(r, "s", "T"), (r, "m", "T"), (r, "T", "C"), (r, "T", "F")]:
            pattern[at(*key)] = True
    assert pattern[problem.sensitive].all()
    lam = np.zeros(n)
    for key, c in [(("N1", "T", "C"), -1), (("N2", "T", "C"), -1), (("S1", "T", "C"), -1)]:
        lam[at(*key)] = c
    for key, c in [(("N1", "m", "T"), 1), (("S1", "m", "T"), 1), (("N2", "s", "T"), -1)]:
        lam[at(*key)] = c
    assert bruteforce.in_row_space(problem.relations.toarray(), pattern, lam)
    atoms = [[(j, 1) for j in ls] for ls in cell_leaves]
    on_leaves = [[(r, float(a)) for r, a in contributions] for contributions in by_leaf]
    assert bruteforce.is_sensitive(lam, on_leaves, ("pq", 20, 60), atoms=atoms)[0]
    result = audit_pattern(problem, pattern)
    assert result.verdict == "uncertified"
    assert "overlap in parts" in result.aggregations.message


#: Respondents' amounts by union leaf of :func:`_linked_without_a_disjoint_pattern`.
AMOUNTS_WITHOUT_A_DISJOINT_PATTERN = {
    ("N1", "s", "C"): [100, 30, 3],
    ("N1", "s", "F"): [1],
    ("N1", "m", "C"): [1],
    ("N1", "m", "F"): [300],
    ("N2", "s", "C"): [1000, 30],
    ("N2", "s", "F"): [1000, 300],
    ("N2", "m", "C"): [30, 30],
    ("N2", "m", "F"): [3, 300, 100],
    ("S1", "s", "C"): [10],
    ("S1", "s", "F"): [30, 1, 300],
    ("S1", "m", "C"): [300, 3, 1],
    ("S1", "m", "F"): [1, 30, 1],
}


def _linked_without_a_disjoint_pattern(cover=False):
    """Linked tables (:func:`_linked_problem`, regions N1, N2, S1, p%-rule p = 20, ten
    sensitive cells) for which both methods find only patterns that hide cells with
    common parts; with ``cover``, their cover table."""
    from service.sdc.rules import PPercent

    ids = iter(range(1000, 10**6))
    leaves = {
        k: [(next(ids), float(a)) for a in v] for k, v in AMOUNTS_WITHOUT_A_DISJOINT_PATTERN.items()
    }
    problem, values, at, _, _ = _linked_problem(["N1", "N2", "S1"], leaves, PPercent(20.0), cover)
    return problem, values, at


def test_suppression_that_must_hide_linked_cells_with_common_parts_says_it_cannot_certify():
    """Where the pattern found hides linked cells with common parts, the audit cannot
    certify it however long it runs (``aggregations.SHARED_PARTS``): no pattern, with
    status ``no_safe_pattern`` and the reason, not ``time_limit`` (which said the audit
    had run out of time, and invited a retry with more)."""
    from service.sdc.suppress import cell_costs, suppress

    problem, values, _ = _linked_without_a_disjoint_pattern()
    assert problem.sensitive.sum() == 10
    for method in ("fast", "exact"):
        r = suppress(problem, cost=cell_costs("value", values), method=method, time_limit=20)
        assert r.status == "no_safe_pattern", (method, r.status, r.message)
        assert not r.suppressed.any()
        assert "cannot be certified" in r.message and "overlap in parts" in r.message


def test_the_cover_table_of_linked_tables_gets_a_certified_pattern():
    """The same linked tables solved on their cover table (region x size x nace, every
    cell outside the linked tables hidden, at no cost, since none is published): the
    aggregations are judged on its leaves, so the pattern is certified; it hides every
    sensitive cell of the linked tables and passes a fresh audit."""
    from service.sdc.audit import audit_pattern
    from service.sdc.suppress import cell_costs, suppress

    problem, values, at = _linked_without_a_disjoint_pattern(cover=True)
    linked, _, linked_at = _linked_without_a_disjoint_pattern()
    keys = [(r, s, n) for r in ("N1", "N2", "S1", "T") for s in "smT" for n in "CFT"]
    in_tables = [key for key in keys if "T" in key[1:]]
    published = np.zeros(len(values), bool)
    published[[at(*key) for key in in_tables]] = True
    cost = np.where(published, cell_costs("value", values), 0.0)
    for method in ("fast", "exact"):
        r = suppress(problem, cost=cost, method=method, time_limit=20, forced=~published)
        assert r.status in ("feasible", "optimal"), (method, r.status, r.message)
        assert r.audit.verdict == "safe"
        assert audit_pattern(problem, r.suppressed).verdict == "safe"
        for key in in_tables:
            assert r.suppressed[at(*key)] >= linked.sensitive[linked_at(*key)]


def test_an_aggregation_with_an_empty_member_pools_its_holdings():
    """A 3x3 table with an empty leaf (x1, y2) under (1,70)-dominance and minimum frequency
    2 (a helper's property test): hiding (T, y0), (T, y1), (x0, T), (x1, T) and every
    leaf but the empty one publishes -(x0, y0) - (x0, y1) - (x0, y2) - (x1, y0) - (x1, y1)
    (the total less (x2, T), (T, y2) and the rest of x2's row), whose holding 1
    (1,000 in (x0, y1) and 100 in (x1, y1)) holds 1,100 of 1,543, over 70%. The audit's MIP
    found it with the empty leaf in it, but an aggregation with a member without raw
    contributions was judged from summaries, which count the holding as two respondents
    (1,000 and 100: under 70%), so the point was not confirmed and the verdict was
    ``uncertified``. An empty cell's contributions are known to be none: ``unsafe``."""
    from service.sdc.audit import audit_pattern
    from service.sdc.rules import Dominance, MinimumFrequency
    from tests.test_suppress import _problem_of_leaves

    t = Table([Hierarchy.flat(d, [f"{d}{i}" for i in range(3)], "T") for d in "xy"])
    leaves = {
        ("x0", "y0"): [(1000, 300)],
        ("x0", "y1"): [(1001, 100), (1, 1000)],
        ("x0", "y2"): [(1003, 30), (1004, 10), (1005, 1)],
        ("x1", "y0"): [(1006, 1), (1007, 1)],
        ("x1", "y1"): [(1, 100)],
        ("x1", "y2"): [],
        ("x2", "y0"): [(1008, 100), (1009, 3)],
        ("x2", "y1"): [(1010, 3)],
        ("x2", "y2"): [(1011, 3), (1012, 100), (1013, 3), (1014, 300)],
    }
    problem = _problem_of_leaves(t, leaves, Dominance(1, 70.0), MinimumFrequency(2))
    hidden = [("T", "y0"), ("T", "y1"), ("x0", "T"), ("x1", "T")]
    hidden += [(x, y) for x in ("x0", "x1", "x2") for y in ("y0", "y1", "y2")]
    hidden.remove(("x1", "y2"))
    pattern = np.zeros(t.n_cells, bool)
    pattern[[t.cell_index(k) for k in hidden]] = True
    result = audit_pattern(problem, pattern)
    assert result.verdict == "unsafe", result.reasons
    assert result.aggregations.worst.rule == 0  # the dominance rule


# --- count tables: intervals of whole numbers (2026-11-27) -------------------------------

#: A 3x3x3 count table (leaves in the table's order) and a pattern, found by a random
#: search: the hidden cell (c2, c1, Total), a count of 5, has the LP interval [2, 7], but
#: no table of whole numbers puts it below 3.
_COUNTS_3D = [2, 0, 1, 0, 1, 0, 1, 2, 2, 1, 2, 2, 0, 1, 0, 2, 0, 0, 0, 1, 2, 2, 1, 2, 0, 2, 0]
_HIDDEN_3D = [1, 3, 7, 8, 11, 12, 13, 16, 17, 21, 22, 23, 24, 25, 26, 29, 30, 31, 32, 37, 39]
_HIDDEN_3D += [41, 42, 43, 44, 45, 46, 47, 48, 50, 51, 53, 54, 55, 56, 58, 59, 60, 61, 62, 63]


def _counts_3d():
    """The table of ``_COUNTS_3D`` (margins filled) and the pattern ``_HIDDEN_3D``."""
    t = Table([Hierarchy.flat(f"d{k}", ["c0", "c1", "c2"]) for k in range(3)])
    leaf = np.zeros(t.n_cells)
    leaf[np.flatnonzero(t.is_leaf)] = _COUNTS_3D
    hidden = np.zeros(t.n_cells, bool)
    hidden[_HIDDEN_3D] = True
    return t, t.fill_margins(leaf), hidden


def _whole_number_interval(a, values, hidden, j):
    """The min and max of cell ``j`` over tables of whole numbers >= 0 that agree with
    the published cells (scipy's MILP, apart from the service)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    a = a.toarray()
    s = np.flatnonzero(hidden)
    rhs = -(a[:, ~hidden] @ values[~hidden])
    rows = np.abs(a[:, s]).sum(axis=1) > 0
    equal = LinearConstraint(a[rows][:, s], rhs[rows], rhs[rows])
    out = []
    for sign in (1.0, -1.0):
        cost = np.zeros(len(s))
        cost[np.flatnonzero(s == j)[0]] = sign
        found = milp(cost, constraints=equal, integrality=np.ones(len(s)), bounds=Bounds(0))
        assert found.status == 0, found.message
        out.append(sign * found.fun)
    return tuple(out)


def test_count_tables_get_intervals_of_whole_numbers():
    """The LP relaxation of a 3-D table need not have whole-number bounds (Cox 2002): the
    LP says [2, 7] for a count of 5, whole-number tables [3, 7]. A lower protection level
    of 3 looked met; for counts the intervals are now those of whole numbers (a MIP where
    the LP's optimum is not whole), and the audit says unsafe. Magnitudes keep the LP's."""
    from service.sdc.audit import audit_pattern
    from service.sdc.problem import TableProblem

    t, x, hidden = _counts_3d()
    j = t.cell_index(("c2", "c1", "Total"))
    assert x[j] == 5 and _whole_number_interval(t.relations, x, hidden, j) == (3.0, 7.0)
    for integral, expected in ((False, (2.0, 7.0)), (True, (3.0, 7.0))):
        iv = feasibility_intervals(t.relations, x, hidden, integral=integral)
        k = int(np.flatnonzero(iv.cells == j)[0])
        assert (iv.lower[k], iv.upper[k]) == pytest.approx(expected) and iv.certified.all()
    sensitive = np.zeros(t.n_cells, bool)
    sensitive[j] = True
    for integral, verdict in ((False, "safe"), (True, "unsafe")):
        problem = TableProblem.of(t, x, sensitive, 0.0, 3.0, integral=integral)
        assert audit_pattern(problem, hidden).verdict == verdict


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_whole_number_intervals_agree_with_a_milp(data):
    """Random 3x3x2 count tables and patterns (the grand total published): every
    interval of the integral audit is the whole-number one (scipy's MILP), and lies
    within the LP's."""
    t = Table(
        [Hierarchy.flat(f"d{k}", [f"c{i}" for i in range(m)]) for k, m in enumerate((3, 3, 2))]
    )
    leaves = np.flatnonzero(t.is_leaf)
    leaf = np.zeros(t.n_cells)
    leaf[leaves] = data.draw(
        st.lists(st.integers(0, 3), min_size=len(leaves), max_size=len(leaves))
    )
    x = t.fill_margins(leaf)
    hidden = np.array(data.draw(st.lists(st.booleans(), min_size=t.n_cells, max_size=t.n_cells)))
    hidden[t.cell_index(("Total", "Total", "Total"))] = False  # every interval bounded
    whole = feasibility_intervals(t.relations, x, hidden, integral=True)
    lp = feasibility_intervals(t.relations, x, hidden)
    assert whole.certified.all()
    for k, j in enumerate(whole.cells.tolist()):
        lo, hi = _whole_number_interval(t.relations, x, hidden, j)
        assert (whole.lower[k], whole.upper[k]) == pytest.approx((lo, hi), abs=1e-6)
        assert lp.lower[k] <= lo + 1e-6 and hi <= lp.upper[k] + 1e-6


def test_whole_number_intervals_ignore_values_that_are_no_table():
    """The hidden cells' values seed the whole-number search as a first whole table, but
    only when they are one: values that do not add up (a randomly rounded table) must
    not be taken for a table the intruder could face. The intervals then come from the
    published cells alone, as scipy's MILP finds them."""
    t, x, hidden = _counts_3d()
    wrong = x.copy()
    wrong[hidden] += 1.0  # whole, but no longer a table
    iv = feasibility_intervals(t.relations, wrong, hidden, integral=True)
    assert iv.certified.all()
    for k, j in enumerate(iv.cells.tolist()):
        expected = _whole_number_interval(t.relations, x, hidden, j)
        assert (iv.lower[k], iv.upper[k]) == pytest.approx(expected, abs=1e-6), j


# --- count tables: inner whole-number intervals from hypercubes (helper-41) ---------------


def _flat_table(shape):
    return Table(
        [Hierarchy.flat(f"d{k}", [f"c{i}" for i in range(m)]) for k, m in enumerate(shape)]
    )


@pytest.mark.parametrize("shape", [(3,), (1, 2), (2, 3), (3, 2, 2), (2, 2, 2, 2)])
def test_hypercube_deviations_keep_every_relation(shape):
    """Every hypercube (two codes per dimension, the total among them or not) moves 2^d
    cells by +-1 and keeps every relation of the flat table: A z = 0."""
    import itertools

    t = _flat_table(shape)
    dims, roots = audit._flat_shape(t)
    assert dims == t.shape and roots == (0,) * len(shape)
    choices = [list(zip(*audit._dimension_pairs(m, r)[:2])) for m, r in zip(dims, roots)]
    n = 0
    for pairs in itertools.product(*choices):
        z = audit._hypercube(dims, roots, pairs)
        assert np.abs(t.relations @ z).max() == 0
        assert (np.abs(z[z != 0]) == 1).all() and (z != 0).sum() == 2 ** len(shape)
        n += 1
    assert n == np.prod([(m + 1) * m // 2 for m in shape])


def test_only_flat_tables_get_hypercubes():
    two_levels = Hierarchy.from_children("d", {"T": ["a", "b"], "a": ["a1", "a2"]})
    assert audit._flat_shape(Table([two_levels, Hierarchy.flat("e", ["x", "y"])])) is None
    assert audit._flat_shape(_flat_table((2, 3)).relations) is None


@pytest.mark.parametrize("batch", [10**9, 7])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (3, 2, 2), (2, 2, 3, 2)])
def test_hypercube_moves_are_the_best_of_each_hypercube(monkeypatch, shape, batch):
    """The vectorised moves (in batches or not) equal, cell by cell, the best step of the
    hypercubes moving it, found one hypercube at a time."""
    import itertools

    monkeypatch.setattr(audit, "_HYPERCUBE_BATCH", batch)
    rng = np.random.default_rng(len(shape))
    t = _flat_table(shape)
    dims, roots = audit._flat_shape(t)
    n = t.n_cells
    hidden = rng.random(n) < 0.9
    up = np.where(rng.random(n) < 0.2, np.inf, rng.integers(1, 4, n))
    up, down = np.where(hidden, up, 0.0), np.where(hidden, rng.integers(1, 4, n), 0.0)
    got_up, got_down = audit._hypercube_moves(dims, roots, up, down, time.perf_counter() + 60)
    best_up, best_down = np.zeros(n), np.zeros(n)
    choices = [list(zip(*audit._dimension_pairs(m, r)[:2])) for m, r in zip(dims, roots)]
    for pairs in itertools.product(*choices):
        z = audit._hypercube(dims, roots, pairs)
        for zz in (z, -z):
            step = min(up[zz > 0].min(initial=np.inf), down[zz < 0].min(initial=np.inf))
            best_up[zz > 0] = np.maximum(best_up[zz > 0], step)
            best_down[zz < 0] = np.maximum(best_down[zz < 0], step)
    assert (got_up == best_up).all() and (got_down == best_down).all()
    assert best_up.max() > 0


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_inner_whole_intervals_hold_and_keep_the_verdicts(data):
    """Random 3x3x2, 3x3x3 and 4x3x3 count tables, patterns, sensitive cells and levels: with
    the levels given, every interval end reported is attained by a whole table (within
    scipy's MILP interval), and each sensitive cell's verdict, by check_protection and by
    the audit, is the one its exact whole-number interval gives. Half the examples go
    without hypercubes (only the true table and whole LP optima as witnesses), so that
    the feasibility MIPs of the cells whose verdict depends on them run."""
    from unittest import mock

    from service.sdc.audit import audit_pattern
    from service.sdc.problem import TableProblem

    if data.draw(st.booleans()):
        no_moves = lambda shape, roots, up, down, deadline: (np.zeros_like(up), np.zeros_like(up))
        with mock.patch.object(audit, "_hypercube_moves", no_moves):
            _check_inner_whole_intervals(data, audit_pattern, TableProblem)
    else:
        _check_inner_whole_intervals(data, audit_pattern, TableProblem)


def _check_inner_whole_intervals(data, audit_pattern, TableProblem):

    t = _flat_table(data.draw(st.sampled_from([(3, 3, 2), (3, 3, 3), (4, 3, 3)])))
    leaves = np.flatnonzero(t.is_leaf)
    leaf = np.zeros(t.n_cells)
    leaf[leaves] = data.draw(
        st.lists(st.integers(0, 4), min_size=len(leaves), max_size=len(leaves))
    )
    x = t.fill_margins(leaf)
    flags = st.lists(st.booleans(), min_size=t.n_cells, max_size=t.n_cells)
    hidden = np.array(data.draw(flags))
    hidden[t.cell_index(("Total", "Total", "Total"))] = False  # every interval bounded
    sensitive = hidden & np.array(data.draw(flags))
    levels = st.lists(st.integers(0, 3), min_size=t.n_cells, max_size=t.n_cells)
    upl, lowl = np.array(data.draw(levels), float), np.array(data.draw(levels), float)
    iv = feasibility_intervals(t, x, hidden, integral=True, levels=(sensitive, upl, lowl))
    assert iv.certified.all() and iv.status == "optimal"
    c = iv.cells
    exact = np.array([_whole_number_interval(t.relations, x, hidden, j) for j in c])
    exact = exact.reshape(-1, 2)
    assert (iv.lower >= exact[:, 0] - 1e-6).all() and (iv.upper <= exact[:, 1] + 1e-6).all()
    args = (upl[c], lowl[c], sensitive[c], np.ones(len(c), bool))
    reported = check_protection(x[c], iv.lower, iv.upper, *args)
    truth = check_protection(x[c], exact[:, 0], exact[:, 1], *args)
    assert (reported.protected == truth.protected).all()
    problem = TableProblem.of(t, x, sensitive, upl, lowl, integral=True)
    verdict = audit_pattern(problem, hidden).verdict
    assert verdict == ("unsafe" if (sensitive[c] & ~truth.protected).any() else "safe")


def test_inner_whole_intervals_are_probed_where_a_verdict_depends_on_them():
    """A 4x3x3 count table (seed 301 of a random search) where four sensitive cells'
    inner intervals (hypercubes, whole LP optima) do not meet their levels while the
    LP's do: the feasibility MIPs settle them, and every verdict is the one of the exact
    whole-number intervals (scipy's MILP). Taking the inner intervals as they are would
    have called those cells unprotected."""
    from unittest import mock

    rng = np.random.default_rng(301)
    t = _flat_table((4, 3, 3))
    leaf = np.zeros(t.n_cells)
    leaves = np.flatnonzero(t.is_leaf)
    leaf[leaves] = rng.integers(0, 5, len(leaves))
    x = t.fill_margins(leaf)
    hidden = rng.random(t.n_cells) < 0.6
    hidden[0] = False  # the grand total
    sensitive = hidden & (rng.random(t.n_cells) < 0.5)
    upl, lowl = (rng.integers(0, 4, t.n_cells).astype(float) for _ in range(2))
    levels = (sensitive, upl, lowl)
    iv = feasibility_intervals(t, x, hidden, integral=True, levels=levels)
    c = iv.cells
    exact = np.array([_whole_number_interval(t.relations, x, hidden, j) for j in c])
    assert (iv.lower >= exact[:, 0]).all() and (iv.upper <= exact[:, 1]).all()
    args = (upl[c], lowl[c], sensitive[c], np.ones(len(c), bool))
    truth = check_protection(x[c], exact[:, 0], exact[:, 1], *args).protected
    assert (check_protection(x[c], iv.lower, iv.upper, *args).protected == truth).all()
    inner_only = lambda self, j, sense, lp, lo, hi, deadline: (
        lo[j] if sense > 0 else hi[j],
        None,
    )
    with mock.patch.object(audit._WholeTables, "bound", inner_only):
        unprobed = feasibility_intervals(t, x, hidden, integral=True, levels=levels)
    protected = check_protection(x[c], unprobed.lower, unprobed.upper, *args).protected
    assert (protected != truth).sum() == 4 and (protected <= truth).all()
