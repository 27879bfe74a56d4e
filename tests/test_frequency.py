"""Threshold rule and seed 001's extended threshold rules (service.sdc.frequency)."""

import numpy as np
import pytest

from service.sdc import frequency as fq
from service.sdc.errors import InputError
from tests.golden import load

ONLY = dict(rule_1a=False, rule_1b=False, rule_2a=False, rule_2b=False, rule_3=False)


def _only(**kwargs) -> fq.ExtendedThresholdConfig:
    """A config with every rule off except those switched on in ``kwargs``."""
    return fq.ExtendedThresholdConfig(**{**ONLY, **kwargs})


def _cells(mask) -> set:
    return {tuple(int(i) for i in ix) for ix in np.argwhere(mask)}


def _flag_sets(result) -> dict:
    return {r: _cells(f) for r, f in result.flags.items()}


# --- golden case: seed 001, "Example revisited" -------------------------------------------

GOLDEN = load("frequency.json")[0]
GOLDEN_COUNTS = np.array(GOLDEN["counts"])


def _golden_config(**extra) -> fq.ExtendedThresholdConfig:
    t = GOLDEN["thresholds"]
    on = {f"rule_{r}": True for r in GOLDEN["rules_applied"]}
    return _only(
        **on,
        t_key_abs=t["t_key_abs"],
        t_target_abs=t["t_target_abs"],
        t_key_rel=t["t_key_rel"],
        t_target_rel=t["t_key_rel"],
        t_min_cell=t["t_min"],
        t_min_key=t["t_min"],
        t_min_target=t["t_min"],
        **extra,
    )


def _golden_labels(result) -> dict:
    keys, cats = GOLDEN["key_values"], GOLDEN["target_categories"]
    out = {}
    for rule in fq.RULE_NAMES:
        for k, y in sorted(_cells(result.flags.get(rule, np.zeros(0, bool)))):
            out.setdefault(f"{keys[k]},{cats[y]}", []).append(rule)
    return out


def test_golden_shape_and_rules():
    assert GOLDEN_COUNTS.shape == (12, 4)
    assert GOLDEN["rules_applied"] == ["1a", "1b", "2a", "3"]
    cfg = _golden_config()
    assert cfg.rules == ("1a", "1b", "2a", "3")


def test_golden_cell_flags_exactly():
    result = fq.extended_threshold_rules(
        GOLDEN_COUNTS, key_axes=0, target_axes=1, config=_golden_config()
    )
    assert _golden_labels(result) == GOLDEN["expect_flags"]
    assert set(result.flags) == {"1a", "1b", "2a", "3"}  # 2b off: no entry
    assert _cells(result.unsafe) == _cells(np.logical_or.reduce(list(result.flags.values())))


def test_golden_marginal_flags():
    result = fq.extended_threshold_rules(GOLDEN_COUNTS, 0, 1, _golden_config())
    keys, cats = GOLDEN["key_values"], GOLDEN["target_categories"]
    np.testing.assert_array_equal(
        result.key_marginal_counts[1], [200, 20, 2, 20, 20, 20, 20, 4, 4, 1, 300, 301]
    )
    np.testing.assert_array_equal(result.target_marginal_counts, [884, 21, 6, 1])
    marginal = {f"key {keys[i]}": ["3"] for i in np.flatnonzero(result.key_marginal_flags[1])}
    marginal |= {f"target {cats[i]}": ["3"] for i in np.flatnonzero(result.target_marginal_flags)}
    assert marginal == GOLDEN["expect_marginal_flags"]


def test_golden_note_rule_2b_also_catches_key_7():
    """The note: with rule 2b on as well, the key-7 singleton is caught by 2b too."""
    cfg = _golden_config(rule_2b=True)
    result = fq.extended_threshold_rules(GOLDEN_COUNTS, 0, 1, cfg)
    # 100 * 6/6 and 100 * 1/1 >= 99; the largest other share is 298/884 or 3/21.
    assert _cells(result.flags["2b"]) == {(6, 2), (6, 3)}
    assert _golden_labels(result)["7,D"] == ["1b", "2b", "3"]


def test_golden_note_simple_threshold():
    """The note: the simple threshold t = 3 alone catches only these cells."""
    flagged = fq.threshold_rule(GOLDEN_COUNTS, 3)
    keys, cats = GOLDEN["key_values"], GOLDEN["target_categories"]
    labels = {f"{keys[k]}{cats[y]}" for k, y in _cells(flagged)}
    assert labels == {"3A", "4B", "5B", "7D", "8B", "9A", "9B", "10A"}


def test_golden_inclusive_boundaries():
    """Rows where the inequality holds with equality (rest = t, share = t): key 6 and 11."""
    result = fq.extended_threshold_rules(GOLDEN_COUNTS, 0, 1, _only(rule_1a=True, t_key_abs=2))
    # With t = 2 the rows whose rest is exactly 3 (keys 6, 11, 12) drop out of rule 1a.
    labels = {k for k, y in _cells(result.flags["1a"])}
    assert {5, 10, 11}.isdisjoint(labels)
    assert labels == {0, 1, 2, 3, 4, 7, 8, 9}
    rel = fq.extended_threshold_rules(GOLDEN_COUNTS, 0, 1, _only(rule_2a=True, t_key_rel=99.003))
    # 297/300 = 99 % exactly drops out; 298/301 = 99.0033 % stays.
    assert _cells(rel.flags["2a"]) == {(0, 0), (1, 0), (2, 0), (9, 0), (11, 0)}


# --- simple threshold rule ----------------------------------------------------------------


def test_threshold_rule_zeros():
    counts = np.array([[0, 1, 2], [3, 4, 0]])
    np.testing.assert_array_equal(
        fq.threshold_rule(counts, 3), [[False, True, True], [False, False, False]]
    )
    np.testing.assert_array_equal(
        fq.threshold_rule(counts, 3, zero_cells="sensitive"),
        [[True, True, True], [False, False, True]],
    )
    assert not fq.threshold_rule(counts, 0).any()
    np.testing.assert_array_equal(fq.threshold_rule([1.0, 5.0], 5.5), [True, True])


# --- each rule alone on a hand-made table -------------------------------------------------
#
#          A   B   C  | f_k
#   k0:   10   1   0  | 11
#   k1:    4   4   4  | 12
#   k2:    0   0   2  |  2
#   f_y:  14   5   6  | 25

SMALL = np.array([[10, 1, 0], [4, 4, 4], [0, 0, 2]])


@pytest.mark.parametrize(
    "config, rule, expected",
    [
        # 1a, t = 1: f_yk >= f_k - 1: k0 A 10 >= 10, k2 C 2 >= 1; k1 4 >= 11 no.
        (dict(rule_1a=True, t_key_abs=1), "1a", {(0, 0), (2, 2)}),
        # 1b, t = 1: f_yk >= f_y - 1: B 4 >= 4; A needs 13, C needs 5.
        (dict(rule_1b=True, t_target_abs=1), "1b", {(1, 1)}),
        # 2a, t = 95: k0 A 90.9 % < 95; k2 C 100 %.
        (dict(rule_2a=True, t_key_rel=95), "2a", {(2, 2)}),
        # 2b, t = 80: B 4/5 = 80 % (boundary, inclusive); A 10/14 = 71 %, C 4/6 = 67 %.
        (dict(rule_2b=True, t_target_rel=80), "2b", {(1, 1)}),
        # 3, t_min_cell = 2: the singleton k0 B.
        (dict(rule_3=True, t_min_cell=2, t_min_key=3, t_min_target=6), "3", {(0, 1)}),
    ],
)
def test_each_rule_alone(config, rule, expected):
    result = fq.extended_threshold_rules(SMALL, [0], [1], _only(**config))
    assert set(result.flags) == {rule}
    assert _cells(result.flags[rule]) == expected
    assert _cells(result.unsafe) == expected
    if rule != "3":
        assert not result.key_marginal_flags[1].any()
        assert not result.target_marginal_flags.any()


def test_rule_3_marginals():
    result = fq.extended_threshold_rules(
        SMALL, 0, 1, _only(rule_3=True, t_min_cell=2, t_min_key=3, t_min_target=6)
    )
    np.testing.assert_array_equal(result.key_marginal_counts[1], [11, 12, 2])
    np.testing.assert_array_equal(result.key_marginal_flags[1], [False, False, True])
    np.testing.assert_array_equal(result.target_marginal_counts, [14, 5, 6])
    np.testing.assert_array_equal(result.target_marginal_flags, [False, True, False])
    # a zero marginal is not flagged (the rule's "0 <")
    empty_row = np.vstack([SMALL, [0, 0, 0]])
    r2 = fq.extended_threshold_rules(empty_row, 0, 1, _only(rule_3=True, t_min_key=3))
    np.testing.assert_array_equal(r2.key_marginal_flags[1], [False, False, True, False])


def test_informative_zeros():
    result = fq.extended_threshold_rules(
        SMALL, 0, 1, _only(rule_1a=True, t_key_abs=1, zero_cells="informative")
    )
    # k0 is dominated by A, so its zero C is informative; k2 by C: its zeros A, B.
    assert _cells(result.flags["1a"]) == {(0, 0), (0, 2), (2, 0), (2, 1), (2, 2)}
    r1b = fq.extended_threshold_rules(
        SMALL, 0, 1, _only(rule_1b=True, t_target_abs=1, zero_cells="informative")
    )
    # column B (1, 4, 0) is dominated by k1, so its zero (k2 B) is informative
    assert _cells(r1b.flags["1b"]) == {(1, 1), (2, 1)}
    golden = fq.extended_threshold_rules(
        GOLDEN_COUNTS, 0, 1, _golden_config(zero_cells="informative")
    )
    # key 1 (200, 0, 0, 0): all of its zeros now carry 1a and 2a
    assert {(0, 1), (0, 2), (0, 3)} <= _cells(golden.flags["1a"])
    assert {(0, 1), (0, 2), (0, 3)} <= _cells(golden.flags["2a"])
    # key 7 has no zero; key 6 (17, 3, 0, 0): A flagged by 1a, so C and D are informative
    assert _cells(golden.flags["1a"]) >= {(5, 2), (5, 3)}
    assert not golden.flags["1a"][6].any()


# --- several target variables -------------------------------------------------------------
#
# counts[k, y1, y2]:  k0 = [[5, 0], [2, 4]],  k1 = [[3, 3], [3, 3]]

THREE_D = np.array([[[5, 0], [2, 4]], [[3, 3], [3, 3]]])


def test_several_targets_rule_1a():
    cfg = _only(rule_1a=True, t_key_abs=1)
    # target y1 (axis 1), y2 fixed: f_k[k0] = (7, 4): only (k0, y1=1, y2=1) 4 >= 3.
    r1 = fq.extended_threshold_rules(THREE_D, 0, 1, cfg)
    assert _cells(r1.flags["1a"]) == {(0, 1, 1)}
    # target y2 (axis 2), y1 fixed: f_k[k0] = (5, 6): only (k0, 0, 0) 5 >= 4.
    r2 = fq.extended_threshold_rules(THREE_D, 0, 2, cfg)
    assert _cells(r2.flags["1a"]) == {(0, 0, 0)}
    both = fq.extended_threshold_rules(THREE_D, 0, (1, 2), cfg)
    assert _cells(both.flags["1a"]) == {(0, 1, 1), (0, 0, 0)}
    np.testing.assert_array_equal(both.key_marginal_counts[1], [[7, 4], [6, 6]])
    np.testing.assert_array_equal(both.key_marginal_counts[2], [[5, 6], [6, 6]])


def test_several_targets_rules_1b_and_3():
    cfg = _only(
        rule_1b=True, t_target_abs=1, rule_3=True, t_min_cell=3, t_min_key=5, t_min_target=4
    )
    result = fq.extended_threshold_rules(THREE_D, [0], [1, 2], cfg)
    # f_y sums over the key only: [[8, 3], [5, 7]]; (k1, 0, 1) = 3 >= 3 - 1.
    np.testing.assert_array_equal(result.target_marginal_counts, [[8, 3], [5, 7]])
    assert _cells(result.flags["1b"]) == {(1, 0, 1)}
    assert _cells(result.flags["3"]) == {(0, 1, 0)}  # the 2
    np.testing.assert_array_equal(result.target_marginal_flags, [[False, True], [False, False]])
    np.testing.assert_array_equal(result.key_marginal_flags[1], [[False, True], [False, False]])
    assert not result.key_marginal_flags[2].any()  # 5 is not < 5


def test_other_axes_held_fixed():
    """An axis that is neither key nor target splits the table into independent slices."""
    stacked = np.stack([SMALL, SMALL.T])  # axis 0: a by-variable
    cfg = _only(rule_1a=True, t_key_abs=1)
    result = fq.extended_threshold_rules(stacked, 1, 2, cfg)
    alone0 = fq.extended_threshold_rules(SMALL, 0, 1, cfg).flags["1a"]
    alone1 = fq.extended_threshold_rules(SMALL.T, 0, 1, cfg).flags["1a"]
    np.testing.assert_array_equal(result.flags["1a"], np.stack([alone0, alone1]))


# --- hierarchical key ---------------------------------------------------------------------
#
# leaves (municipalities) x target (A, B); regions R0 = {m0, m1}, R1 = {m2, m3}; one country.
#   m0: 95  5      R0: 103  7     country: 111 19
#   m1:  8  2      R1:   8 12
#   m2:  5  5
#   m3:  3  7

LEAVES = np.array([[95, 5], [8, 2], [5, 5], [3, 7]])
REGIONS = [[0, 0, 1, 1], [0, 0]]


def test_hierarchical_key_hand_checked():
    cfg = _only(rule_1a=True, t_key_abs=2, rule_2a=True, t_key_rel=90)
    result = fq.extended_threshold_rules(LEAVES, 0, 1, cfg, hierarchies={0: REGIONS})
    # leaves: 1a m1 A (rest 2 <= 2); 2a m0 A (95 %).
    # level 1: R0 checked for both rules (it has unsafe leaves), R1 entirely safe: skipped.
    #   R0 A: rest 7 > 2 (1a safe); 103/110 = 93.6 % >= 90 (2a unsafe).
    # level 2: the country is checked for 2a only (R0 A unsafe); 111/130 = 85.4 %: safe.
    assert _cells(result.flags["1a"]) == {(1, 0)}
    assert _cells(result.flags["2a"]) == {(0, 0), (1, 0)}  # m1 A from region R0
    assert _cells(result.inherited["2a"]) == {(0, 0), (1, 0)}
    assert not result.inherited["1a"].any()
    lv1, lv2 = result.levels
    assert (lv1.level, lv1.key_axis, lv1.target_axis) == (1, 0, 1)
    np.testing.assert_array_equal(lv1.counts, [[103, 7], [8, 12]])
    np.testing.assert_array_equal(lv1.checked["1a"], [[True], [False]])
    np.testing.assert_array_equal(lv1.checked["2a"], [[True], [False]])
    assert not lv1.flags["1a"].any()
    np.testing.assert_array_equal(lv1.flags["2a"], [[True, False], [False, False]])
    np.testing.assert_array_equal(lv2.counts, [[111, 19]])
    np.testing.assert_array_equal(lv2.checked["1a"], [[False]])
    np.testing.assert_array_equal(lv2.checked["2a"], [[True]])
    assert not lv2.flags["2a"].any()
    # without the hierarchy m1 A is safe by 2a (80 %)
    flat = fq.extended_threshold_rules(LEAVES, 0, 1, cfg)
    assert _cells(flat.flags["2a"]) == {(0, 0)}


def test_hierarchy_accepts_one_flat_level_and_second_key_axis():
    # two key axes (region-coded axis 0, a second key axis 1), target axis 2
    counts = np.stack([LEAVES, LEAVES], axis=1)  # shape (4, 2, 2)
    cfg = _only(rule_2a=True, t_key_rel=90)
    result = fq.extended_threshold_rules(
        counts, (0, 1), 2, cfg, hierarchies={0: fq.KeyHierarchy([0, 0, 1, 1])}
    )
    assert _cells(result.flags["2a"]) == {(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)}
    (lv1,) = result.levels
    assert lv1.counts.shape == (2, 2, 2)


def test_inherited_flags_skip_empty_leaves():
    # R0 = {m0, m1}: m0 (100, 1) is unsafe by 2a (99.0 %), m1 (0, 0) is empty;
    # R0 as a whole (100, 1) is unsafe: the empty m1 A is not marked.
    leaves = np.array([[100, 1], [0, 0], [5, 5]])
    cfg = _only(rule_2a=True, t_key_rel=99)
    result = fq.extended_threshold_rules(leaves, 0, 1, cfg, hierarchies={0: [[0, 0, 1]]})
    assert _cells(result.levels[0].flags["2a"]) == {(0, 0)}
    assert _cells(result.flags["2a"]) == {(0, 0)}


@pytest.mark.parametrize("zero_cells", ["dominant", "informative"])
def test_hierarchy_skip_never_changes_a_verdict(zero_cells):
    """The seed's skip of entirely safe areas equals checking every area of the coarsened
    table (module docstring: exact for rules 1a and 2a)."""
    rng = np.random.default_rng(12345)
    parents = [np.array([0, 0, 1, 1, 1, 2, 3, 3]), np.array([0, 0, 1, 1]), np.array([0, 0])]
    h = fq.KeyHierarchy(parents)
    cfg = _only(rule_1a=True, t_key_abs=3, rule_2a=True, t_key_rel=85, zero_cells=zero_cells)
    for _ in range(200):
        counts = rng.integers(0, 12, size=(8, 3, 2)) * (rng.random((8, 3, 2)) < 0.6)
        result = fq.extended_threshold_rules(counts, 0, (1, 2), cfg, hierarchies={0: h})
        for lv in result.levels:
            direct = fq.extended_threshold_rules(lv.counts, 0, lv.target_axis, cfg)
            for r in ("1a", "2a"):
                np.testing.assert_array_equal(lv.flags[r], direct.flags[r])


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "counts, cell",
    [
        ([[1, 2], [3, -1]], 3),
        ([[1, 2.5], [3, 4]], 1),
        ([[1, 2], [float("nan"), 4]], 2),
        ([[1, 2], [float("inf"), 4]], 2),
    ],
)
def test_bad_counts_name_the_cell(counts, cell):
    with pytest.raises(InputError) as e:
        fq.extended_threshold_rules(counts, 0, 1)
    assert e.value.field == "counts" and e.value.cell == cell
    with pytest.raises(InputError) as e:
        fq.threshold_rule(counts, 3)
    assert e.value.field == "counts" and e.value.cell == cell


@pytest.mark.parametrize(
    "counts", [[1, 2, 3], [["a", "b"], ["c", "d"]], [[True, False]], [[1, 2], [3]]]
)
def test_bad_counts_shape_or_type(counts):
    with pytest.raises(InputError) as e:
        fq.extended_threshold_rules(counts, 0, 1)
    assert e.value.field == "counts"


@pytest.mark.parametrize(
    "keys, targets, field",
    [
        (0, 0, "target_axes"),
        ((0, 1), 1, "target_axes"),
        (2, 1, "key_axes"),
        (0, -3, "target_axes"),
        ((), 1, "key_axes"),
        (0, (), "target_axes"),
        ((0, 0), 1, "key_axes"),
        (0, "1", "target_axes"),
        (0.0, 1, "key_axes"),
    ],
)
def test_bad_axes(keys, targets, field):
    with pytest.raises(InputError) as e:
        fq.extended_threshold_rules(SMALL, keys, targets)
    assert e.value.field == field


def test_negative_axes_are_numpy_style():
    a = fq.extended_threshold_rules(SMALL, -2, -1, _only(rule_1a=True, t_key_abs=1))
    assert _cells(a.flags["1a"]) == {(0, 0), (2, 2)}


@pytest.mark.parametrize(
    "name, value",
    [
        ("t_key_abs", -1),
        ("t_target_abs", -0.5),
        ("t_key_rel", 0),
        ("t_key_rel", 100.5),
        ("t_target_rel", -5),
        ("t_target_rel", 101),
        ("t_min_cell", -1),
        ("t_min_key", -2),
        ("t_min_target", float("nan")),
        ("t_key_abs", "3"),
        ("rule_1a", 1),
        ("zero_cells", "all"),
    ],
)
def test_bad_config(name, value):
    with pytest.raises(InputError) as e:
        fq.ExtendedThresholdConfig(**{name: value})
    assert e.value.field == name


def test_relative_threshold_100_is_allowed():
    cfg = _only(rule_2a=True, t_key_rel=100)
    assert _cells(fq.extended_threshold_rules(SMALL, 0, 1, cfg).flags["2a"]) == {(2, 2)}


@pytest.mark.parametrize(
    "hierarchies",
    [
        {1: [[0, 0, 1]]},  # on the target axis
        {0: [[0, 0, 1, 1]]},  # 4 leaves for an axis of length 3
        {0: [[0, 0, 1], [0, 0, 0]]},  # level 2 has 3 codes for 2 areas
        {0: [[0, -1, 1]]},  # negative code
        {0: []},  # no level
        {5: [[0, 0, 1]]},  # axis out of range
        [[0, 0, 1]],  # not a mapping
    ],
)
def test_bad_hierarchy(hierarchies):
    with pytest.raises(InputError) as e:
        fq.extended_threshold_rules(SMALL, 0, 1, hierarchies=hierarchies)
    assert e.value.field == "hierarchies"


def test_bad_threshold_rule_parameters():
    with pytest.raises(InputError) as e:
        fq.threshold_rule([1, 2], -1)
    assert e.value.field == "t"
    with pytest.raises(InputError) as e:
        fq.threshold_rule([1, 2], 3, zero_cells="maybe")
    assert e.value.field == "zero_cells"
