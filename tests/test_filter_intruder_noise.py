"""The noise left to an intruder who knows its own noise (service.sdc.noise.noise_left),
in the online filter's criterion 3 (seed 003 B.4 and C)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sdc import magnitudes, noise
from service.sdc import query_filter as qf

SECRET = b"filter-test-secret-0123456789"


def test_a_known_own_noise_suppresses_a_cell_the_whole_noise_published():
    # d = 0.1, no jitter: A, C and E all get 0.9 under this secret (checked below).
    # One cell: A 1000, C 400, E 20; p = 15: U = 0.15 * 1000 - 20 = 130.
    # D = -100 - 40 - 2 = -142: |D| = 142 >= 130 was published before.
    # C knows its own -40: |D - D_C| = 102 < 130 -> suppressed now (|D - D_E| = 140).
    ids = ["A", "C", "E"]
    np.testing.assert_allclose(noise.multipliers(ids, ids, SECRET, 0.1, 0.0), [0.9, 0.9, 0.9])
    rules = qf.NoiseRules(0.1, 0.0, 0.5, 1.5, 0, 15)
    cell, value = np.zeros(3, np.int64), np.array([1000.0, 400.0, 20.0])
    cells = qf.add_noise(1, cell, value, None, ids, ids, SECRET, rules)
    np.testing.assert_allclose(cells.noisy_value - cells.true_value, [-142.0])
    np.testing.assert_allclose(cells.noise_left, [102.0])
    m = magnitudes.from_contributions(1, cell, value, depth=2)
    assert cells.true_value[0] - cells.noisy_value[0] >= 130  # the old test passed it
    assert qf.noise_criteria(cells, m, rules)["p_percent_noise"].tolist() == [True]
    # C and E in one holding "H" (one unit, noise -42): |D - D_H| = 100 < 130, still.
    held = qf.add_noise(1, cell, value, None, ["A", "H", "H"], ids, SECRET, rules)
    np.testing.assert_allclose(held.noise_left, [100.0])
    # A alone: an outsider faces the whole noise, 100 (= |D|).
    alone = qf.add_noise(1, np.zeros(1, np.int64), value[:1], None, ids[:1], ids[:1], SECRET, rules)
    np.testing.assert_allclose(alone.noise_left, [100.0])


def test_coalitions_by_hand():
    # The three units of test_noisy_table: t (100, +10), r1 (30, -3), r2 (20, +2), D = 9:
    # c = 1: min(9, 12, 7) = 7; c = 2: also 9 - (3 + 2) = 4; c = 3 (two others): 4.
    args = (np.zeros(3, np.int64), np.array([100.0, 30, 20]), np.array([10.0, -3, 2]))
    for c, want in ((1, 7.0), (2, 4.0), (3, 4.0)):
        assert noise.noise_left(*args, np.array([9.0]), 1, c).tolist() == [want]
    # Two units share the largest value (100, noises +10 and -4), a third 20 (+1), D = 7:
    # either large one may be the target and the other the intruder, so both are
    # subtracted: min(7, |7 - 10|, |7 + 4|, |7 - 1|) = 3 (with the first alone as target, 6).
    tied = (np.zeros(3, np.int64), np.array([100.0, 100, 20]), np.array([10.0, -4, 1]))
    assert noise.noise_left(*tied, np.array([7.0]), 1).tolist() == [3.0]
    # Empty and single-unit cells: |D|.
    got = noise.noise_left(
        np.array([1]), np.array([5.0]), np.array([2.0]), np.array([-3.0, 2.0]), 2
    )
    assert got.tolist() == [3.0, 2.0]


def _loop(cell, value, own, total, n_cells, c):
    """The per-cell reading, written plainly."""
    out = np.abs(total).astype(float)
    for k in range(n_cells):
        rows = np.flatnonzero(cell == k)
        if rows.size <= 1:
            continue
        largest = value[rows] == value[rows].max()
        # A shared largest value: each is a target, none is left out of the intruders.
        others = own[rows] if largest.sum() > 1 else own[rows[~largest]]
        left = min(abs(total[k]), float(np.abs(total[k] - others).min()))
        if c > 1:
            top = float(np.sort(np.abs(others))[::-1][:c].sum())
            left = min(left, max(abs(total[k]) - top, 0.0))
        out[k] = left
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(
                    st.integers(0, n - 1),
                    st.integers(0, 20).map(float),  # small integers: ties happen
                    st.floats(-50, 50, allow_nan=False),
                ),
                max_size=25,
            ),
            st.lists(st.floats(-100, 100, allow_nan=False), min_size=n, max_size=n),
            st.integers(1, 4),
        )
    )
)
def test_vectorised_equals_the_per_cell_loop(case):
    n, rows, total, c = case
    cell = np.array([r[0] for r in rows], np.int64)
    value = np.array([r[1] for r in rows])
    own = np.array([r[2] for r in rows])
    total = np.array(total)
    got = noise.noise_left(cell, value, own, total, n, c)
    np.testing.assert_allclose(got, _loop(cell, value, own, total, n, c), rtol=0, atol=1e-9)
    assert (got >= 0).all() and (got <= np.abs(total) + 1e-12).all()


def test_filter_suppresses_over_http_what_it_published_before(make_client):
    # x1, x2, x4 all get 1.1 under this secret (jitter 0): D = 100 + 40 + 2 = 142 >= U =
    # 0.15 * 1000 - 20 = 130, but x2 knows its own +40: 102 < 130 -> suppressed.
    secret = b"filter-api-test-secret-0123"
    ids = ["x1", "x2", "x4"]
    np.testing.assert_allclose(noise.multipliers(ids, ids, secret, 0.1, 0.0), [1.1, 1.1, 1.1])
    stat = {
        "approach": "noise",
        "d": 0.1,
        "jitter": 0.0,
        "ratio_range": [0.5, 1.5],
        "min_weighted_count": 0,
        "p": 15,
    }
    contributions = [
        {"value": v, "respondent": r} for v, r in zip([1000, 400, 20], ids, strict=True)
    ]
    body = {
        "policy": {
            "rules": {"rules": [{"type": "p_percent", "p": 10}]},
            "filter": {"statistical": stat},
        },
        "query": {"variables": ["industry"]},
        "cells": [{"key": ["Mining"], "contributions": contributions}],
    }
    got = make_client(noise_secret=secret).post("/v1/filter", json=body).json()
    assert got["decision"] == "suppress"
    assert got["cells"][0]["reasons"] == ["p_percent_noise"]
    # x2 and x4 in one holding: the holding knows its own +42, 100 < 130: still suppressed.
    for x in contributions[1:]:
        x["holding"] = "H"
    got = make_client(noise_secret=secret).post("/v1/filter", json=body).json()
    assert got["cells"][0]["reasons"] == ["p_percent_noise"]


def test_the_largest_unit_is_an_intruder_too(make_client):
    """A helper's campaign (2026-11-27): README's example policy on one cell of a3 1000,
    b2 900, c0 20 and d0 20 was published. Without noise, protecting the largest
    protects the others; with a fixed multiplier per respondent, a3 knows its own noise
    and is left |D - D_a3| to hide b2, whose level against it is 0.15 * 900 - 40 = 95.
    The cell is stopped when that is short, as the other side always was."""
    secret = b"campaign-h40-secret-0123456789abcdef"
    ids, values = ["a3", "b2", "c0", "d0"], np.array([1000.0, 900.0, 20.0, 20.0])
    moved = (noise.multipliers(ids, ids, secret, 0.1, 0.03) - 1.0) * values
    left_to_a3 = abs(moved.sum() - moved[0])
    assert left_to_a3 < 0.15 * 900 - 40  # 72.2 < 95: b2 is given away to a3
    assert abs(moved.sum() - moved[1:]).min() >= 0.15 * 1000 - 40  # a3 was hidden
    stat = {
        "approach": "noise",
        "d": 0.1,
        "jitter": 0.03,
        "ratio_range": [0.85, 1.15],
        "min_weighted_count": 3,
        "p": 15,
    }
    body = {
        "policy": {"filter": {"statistical": stat}},
        "query": {"variables": ["industry"]},
        "cells": [{"key": ["Mining"], "microdata": {"value": values.tolist(), "respondent": ids}}],
    }
    got = make_client(noise_secret=secret).post("/v1/filter", json=body).json()
    assert not got["cells"][0]["publish"]
    assert got["cells"][0]["reasons"] == ["p_percent_noise"]


def _loop_to_largest(cell, value, own, total, n_cells, c):
    """noise_left_to_largest per cell, written plainly."""
    out = np.full(n_cells, np.inf)
    for k in range(n_cells):
        rows = np.flatnonzero(cell == k)
        if rows.size <= 1:
            continue
        top = rows[np.lexsort((np.arange(rows.size), -value[rows]))[0]]
        left = abs(total[k] - own[top])
        if c > 1:
            rest = np.sort(np.abs(own[rows[rows != top]]))[::-1][: c - 1].sum()
            left = min(left, max(left - rest, 0.0))
        out[k] = left
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(
                    st.integers(0, n - 1),
                    st.floats(0, 100, allow_nan=False),
                    st.floats(-50, 50, allow_nan=False),
                ),
                max_size=20,
                unique_by=lambda r: r[1],  # no ties: the largest is one unit
            ),
            st.lists(st.floats(-100, 100, allow_nan=False), min_size=n, max_size=n),
            st.integers(1, 3),
        )
    )
)
def test_noise_left_to_largest_equals_the_per_cell_loop(case):
    n, rows, total, c = case
    cell = np.array([r[0] for r in rows], np.int64)
    value = np.array([r[1] for r in rows])
    own = np.array([r[2] for r in rows])
    total = np.array(total)
    got = noise.noise_left_to_largest(cell, value, own, total, n, c)
    np.testing.assert_allclose(got, _loop_to_largest(cell, value, own, total, n, c), atol=1e-9)
