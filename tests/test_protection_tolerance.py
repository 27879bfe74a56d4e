"""check_protection's tolerance is relative to the cell's value and protection levels, never
to the far bound of its interval (issue 13, "Interval flags on the right scale")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sdc.audit import PROTECTION_RTOL, audit_pattern, check_protection
from service.sdc.problem import TableProblem
from service.sdc.table import Hierarchy, Table


def two_by_two(leaves: dict[tuple[str, str], float]):
    """A 2x2 table with margins: rows A, B and columns I, J, each with a total T."""
    t = Table([Hierarchy.flat("row", ["A", "B"], "T"), Hierarchy.flat("col", ["I", "J"], "T")])
    values = np.zeros(t.n_cells)
    for r in ("A", "B", "T"):
        for c in ("I", "J", "T"):
            rows = ("A", "B") if r == "T" else (r,)
            cols = ("I", "J") if c == "T" else (c,)
            values[t.cell_index((r, c))] = sum(leaves[a, b] for a in rows for b in cols)
    assert t.check_additivity(values) == []
    return t, values


def test_far_bound_does_not_hide_a_lower_bound_at_the_value():
    # A,I = 100 with protection 30 up and down; A,J = B,I = 1e9 and B,J = 0; all four
    # suppressed. B,J >= 0 gives A,I >= 100: the lower bound is the value itself, while the
    # upper bound is 1e9 + 100. A tolerance of 1e-7 of that far bound (100 > 30) used to
    # call the cell protected.
    t, values = two_by_two({("A", "I"): 100.0, ("A", "J"): 1e9, ("B", "I"): 1e9, ("B", "J"): 0.0})
    leaves = [t.cell_index(k) for k in (("A", "I"), ("A", "J"), ("B", "I"), ("B", "J"))]
    suppressed = np.zeros(t.n_cells, dtype=bool)
    suppressed[leaves] = True
    sensitive = np.zeros(t.n_cells, dtype=bool)
    sensitive[t.cell_index(("A", "I"))] = True
    levels = np.where(sensitive, 30.0, 0.0)

    audit = audit_pattern(TableProblem.of(t, values, sensitive, levels, levels), suppressed)

    (k,) = np.flatnonzero(audit.intervals.cells == t.cell_index(("A", "I")))
    assert audit.intervals.certified[k]
    assert audit.intervals.lower[k] == pytest.approx(100.0, abs=1e-6)
    assert audit.intervals.upper[k] == pytest.approx(1e9 + 100.0, rel=1e-9)
    check = audit.protection
    assert check.lower_too_close[k]
    assert check.missing_lower[k] == pytest.approx(30.0, abs=1e-6)
    assert not check.upper_too_close[k] and not check.exact[k] and not check.too_narrow[k]
    assert not check.protected[k]
    assert not audit.safe
    assert audit.verdict != "safe"


@pytest.mark.parametrize(
    "far",
    [1e9 + 100.0, 1e9, 1e9 + 200.0, np.inf],
    ids=["exact", "round-off below", "round-off above", "unbounded"],
)
def test_check_protection_with_a_far_upper_bound(far):
    # Lower bound at the value, upper bound far away (and possibly off by solver round-off
    # of ~1e-7 * 1e9 = 100): only the lower side is flagged, whatever the far bound.
    c = check_protection([100.0], [100.0], [far], [30.0], [30.0], [True], [True])
    assert c.lower_too_close.tolist() == [True]
    assert c.missing_lower.tolist() == [pytest.approx(30.0)]
    assert c.upper_too_close.tolist() == [False] and c.missing_upper.tolist() == [0.0]
    assert c.exact.tolist() == [False] and c.too_narrow.tolist() == [False]
    assert c.protected.tolist() == [False]


def test_check_protection_with_a_far_lower_bound():
    # The mirror image: upper bound 10 above the value (U = 30), lower bound 1e9 below.
    c = check_protection([100.0], [100.0 - 1e9], [110.0], [30.0], [30.0], [True], [True])
    assert c.upper_too_close.tolist() == [True]
    assert c.missing_upper.tolist() == [pytest.approx(20.0)]
    assert c.lower_too_close.tolist() == [False] and not c.protected[0]


def test_far_bound_with_a_near_bound_that_reaches_its_level():
    # Exactly 30 below and 1e9 above: protected ("at least equal", seed 002 criterion 1),
    # also when the near bound carries round-off of the value's scale (1e-7 * 100).
    c = check_protection(
        [100.0, 100.0, 100.0],
        [70.0, 70.0 + 5e-6, 70.5],
        [1e9 + 100.0] * 3,
        30.0,
        30.0,
        [True] * 3,
        [True] * 3,
    )
    assert c.protected.tolist() == [True, True, False]
    assert c.lower_too_close.tolist() == [False, False, True]


def test_value_scale_never_forgives_a_bound_at_the_value():
    # A large cell with a small level (a p%-rule level is what the cell fails the rule
    # by): tol = 1e-7 * 1e9 = 100 exceeds L = 30, but a shortfall is forgiven by at most
    # 1% of the level, so a lower bound at the value, or 1 short, is flagged.
    x = 1e9
    c = check_protection(
        [x, x, x, x],
        [x, x - 29.0, x - 29.8, x - 30.0],
        [x + 1e6] * 4,
        30.0,
        30.0,
        [True] * 4,
        [True] * 4,
    )
    assert c.lower_too_close.tolist() == [True, True, False, False]
    assert c.missing_lower[:2].tolist() == [pytest.approx(30.0), pytest.approx(1.0)]
    assert c.protected.tolist() == [False, False, True, True]


def test_zero_level_tolerates_round_off_on_the_wrong_side_of_the_value():
    # X is feasible, so a bound round-off past it is X: no flag for a level of 0 (the
    # width is not round-off, so no exact disclosure either). Beyond round-off: flagged.
    x = 1e6  # tol = 0.1
    c = check_protection(
        [x, x], [0.0, 0.0], [x - 1e-3, x - 1.0], 0.0, 0.0, [True, True], [True, True]
    )
    assert c.upper_too_close.tolist() == [False, True]
    assert c.protected.tolist() == [True, False]


def test_infinite_level_is_never_reached_and_does_not_widen_the_tolerance():
    c = check_protection([100.0], [0.0], [100.0 + 1e-3], [np.inf], [0.0], [True], [True])
    assert c.upper_too_close.tolist() == [True]
    assert c.exact.tolist() == [False]  # tol stays 1e-7 * 100, not inf


@settings(max_examples=300, deadline=None)
@given(
    x=st.floats(-1e12, 1e12),
    level_up=st.floats(0, 1e6),
    level_low=st.floats(0, 1e6),
    gap_up=st.floats(0, 1e6),
    gap_low=st.floats(0, 1e6),
    far=st.sampled_from([0.0, 1e9, 1e15, np.inf]),
)
def test_protected_means_each_bound_reaches_its_level_up_to_round_off(
    x, level_up, level_low, gap_up, gap_low, far
):
    """Sound reading: a cell called protected has each bound at least 99% of its level
    away, and at most rtol * max(1, |X|, U, L) short of it; a far bound changes nothing."""
    hi, lo = x + gap_up, x - gap_low
    c = check_protection(
        [x, x, x],
        [lo, lo - far, lo],
        [hi, hi, hi + far],
        level_up,
        level_low,
        [True] * 3,
        [True] * 3,
    )
    if c.protected[0]:
        tol = PROTECTION_RTOL * max(1.0, abs(x), level_up, level_low)
        # gaps as computed in floating point
        d_up, d_low = hi - x, x - lo
        for d, level in ((d_up, level_up), (d_low, level_low)):
            assert d >= 0.99 * level - 1e-9 * max(1.0, abs(x))
            assert d >= level - tol - 1e-9 * max(1.0, abs(x))
    # A far bound widens its own side only: the other side's flag does not move.
    assert c.upper_too_close[1] == c.upper_too_close[0]
    assert c.lower_too_close[2] == c.lower_too_close[0]
