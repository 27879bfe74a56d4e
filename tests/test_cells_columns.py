"""The two wire forms of a magnitude cell's contributions (objects and ``microdata``
columns) become the same core contributions, whichever path builds them
(:func:`service.pipeline.cells.contributions_of`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.filter import FilterCell
from service.pipeline.cells import contributions_of

_contribution = st.tuples(
    st.floats(0, 1e6, allow_nan=False),
    st.one_of(st.none(), st.sampled_from(["G1", "G2", "G3"])),
    st.floats(0.5, 20),
)
_cell = st.lists(_contribution, min_size=1, max_size=6)


def _as_objects(rows, weighted):
    return {
        "key": ["k"],
        "contributions": [
            {"value": v, "holding": h, **({"weight": w} if weighted else {})} for v, h, w in rows
        ],
    }


def _as_columns(rows, with_holding, weighted):
    micro = {"value": [v for v, _, _ in rows]}
    if with_holding:
        micro["holding"] = [h for _, h, _ in rows]
    if weighted:
        micro["weight"] = [w for _, _, w in rows]
    return {"key": ["k"], "microdata": micro}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_cell, st.booleans(), st.booleans()), min_size=1, max_size=6))
def test_columns_and_objects_give_the_same_contributions(cells):
    # A cell without a holding column has every holding None; without weights, weight 1.
    objects, columns = [], []
    for rows, with_holding, weighted in cells:
        rows = [(v, h if with_holding else None, w if weighted else 1.0) for v, h, w in rows]
        objects.append(FilterCell.model_validate(_as_objects(rows, True)))
        columns.append(FilterCell.model_validate(_as_columns(rows, with_holding, weighted)))
    index = list(range(len(cells)))
    a = contributions_of(objects, index, "replicate")
    b = contributions_of(columns, index, "replicate")
    np.testing.assert_array_equal(a.cell, b.cell)
    np.testing.assert_array_equal(a.value, b.value)
    if b.weight is not None:  # objects always carry weights here; columns only when sent
        np.testing.assert_array_equal(a.weight, b.weight)
    else:
        np.testing.assert_array_equal(a.weight, np.ones(a.value.size))
    if a.holding is None:
        assert b.holding is None
    else:
        np.testing.assert_array_equal(a.holding, b.holding)


def test_columns_hand_checked():
    cells = [
        FilterCell.model_validate(
            {"key": ["a"], "microdata": {"value": [5, 3], "holding": ["G", None]}}
        ),
        FilterCell.model_validate({"key": ["b"], "microdata": {"value": [7], "weight": [2.0]}}),
        FilterCell.model_validate({"key": ["c"], "microdata": {"value": [1, 1, 4]}}),
    ]
    c = contributions_of(cells, [2, 0, 1], "replicate")
    assert c.cell.tolist() == [0, 0, 0, 1, 1, 2]
    assert c.value.tolist() == [1, 1, 4, 5, 3, 7]
    assert c.holding.tolist() == [-1, -1, -1, 0, -1, -1]
    assert c.weight.tolist() == [1, 1, 1, 1, 1, 2]
    assert c.waiver is None and c.request is None
