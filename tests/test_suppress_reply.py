"""Replies a user can use as they are (issue 18 part 4): ``/v1/suppress`` gives every cell's
value, margins included, and for analysts each suppressed cell's feasibility interval, so
that the reply can be audited or published without rebuilding the table."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.callers import ANALYST_KEY, FILTER_KEY
from tests.test_api_suppress import body

# Table 6 (tests.test_api_suppress) with its margins; the pattern is the rectangle
# A,I  A,III  B,I  B,III. Along it A,I = 160 + t, A,III = 340 - t, B,I = 40 - t,
# B,III = 60 + t with every cell >= 0: -60 <= t <= 40, which gives the intervals below.
VALUES = {
    ("Total", "Total"): 2740.0,
    ("Total", "I"): 810.0,
    ("Total", "II"): 1260.0,
    ("Total", "III"): 670.0,
    ("A", "Total"): 880.0,
    ("A", "I"): 160.0,
    ("A", "II"): 380.0,
    ("A", "III"): 340.0,
    ("B", "Total"): 180.0,
    ("B", "I"): 40.0,
    ("B", "II"): 80.0,
    ("B", "III"): 60.0,
    ("C", "Total"): 1680.0,
    ("C", "I"): 610.0,
    ("C", "II"): 800.0,
    ("C", "III"): 270.0,
}
INTERVALS = {
    ("A", "I"): [100.0, 200.0],
    ("A", "III"): [300.0, 400.0],
    ("B", "I"): [0.0, 100.0],
    ("B", "III"): [0.0, 100.0],
}


def by_key(reply: dict) -> dict:
    return {tuple(c["key"]): c for c in reply["cells"]}


def audit_body(request: dict, reply: dict) -> dict:
    """An audit request built from the suppression reply alone (and the structure the
    caller sent): each cell's value and whether it is suppressed, no rules (intervals do
    not depend on them)."""
    return {
        "structure": request["structure"],
        "cells": [
            {"key": c["key"], "value": c["value"], "suppressed": c["status"] != "published"}
            for c in reply["cells"]
        ],
    }


@pytest.fixture
def secured(make_client, key_file):
    return make_client(api_keys_file=key_file)


@pytest.mark.parametrize("method", ["fast", "exact"])
def test_values_and_intervals_on_table_6(client, method):
    reply = client.post("/v1/suppress", json=body(method=method)).json()
    assert reply["safe"]
    cells = by_key(reply)
    assert {k: c["value"] for k, c in cells.items()} == VALUES
    assert {k: c["interval"] for k, c in cells.items() if "interval" in c} == INTERVALS
    assert {k for k, c in cells.items() if c["status"] != "published"} == set(INTERVALS)
    # The same intervals as the audit the pattern passed (no second audit).
    audited = {tuple(c["key"]): c["interval"] for c in reply["audit"]["cells"]}
    assert audited == INTERVALS


def test_filter_role_gets_no_suppressed_value_or_interval(secured):
    as_filter = secured.post("/v1/suppress", json=body(), headers={"X-API-Key": FILTER_KEY})
    as_analyst = secured.post("/v1/suppress", json=body(), headers={"X-API-Key": ANALYST_KEY})
    assert as_filter.status_code == as_analyst.status_code == 200
    cells = by_key(as_filter.json())
    assert {k: c["value"] for k, c in cells.items() if c["status"] == "published"} == {
        k: v for k, v in VALUES.items() if k not in INTERVALS
    }
    assert all(cells[k]["value"] is None for k in INTERVALS)
    assert "interval" not in as_filter.text and 'published": [' not in as_filter.text
    # The analyst sees them: the difference is the role, not the request.
    assert by_key(as_analyst.json())[("A", "I")]["value"] == 160.0


def test_filter_role_gets_no_value_of_a_reply_that_is_not_safe(secured):
    """With no safe pattern nothing is publishable: the filter role gets no values."""
    b = body()
    for i in (1, 2, 3, 6):  # A,II A,III B,I C,I: every partner of A,I
        b["cells"][i]["constraint"] = "forbid"
    b["cells"] += [
        {"key": ["A", "Total"], "constraint": "forbid"},  # margins, computed
        {"key": ["Total", "I"], "constraint": "forbid"},
    ]
    r = secured.post("/v1/suppress", json=b, headers={"X-API-Key": FILTER_KEY}).json()
    assert not r["safe"] and r["solver"]["status"] == "no_safe_pattern"
    assert all(c["value"] is None for c in r["cells"])


def test_auditing_the_reply_alone_gives_the_same_intervals(client):
    request = body()
    reply = client.post("/v1/suppress", json=request).json()
    audit = client.post("/v1/audit", json=audit_body(request, reply))
    assert audit.status_code == 200, audit.text
    intervals = {tuple(c["key"]): c["interval"] for c in audit.json()["cells"]}
    assert intervals == {k: c["interval"] for k, c in by_key(reply).items() if "interval" in c}
    assert intervals == INTERVALS


def test_shifted_tables_reply_on_the_original_scale(client):
    """Under negative_values 'shift' (seed 004 section 2.2; M = 50 per contributor) the
    table is protected in y = x + N M; the reply's values and intervals are x's. A,I
    (three contributors, 155 + 4 - 40 = 119) is 119 + 150 on the shifted scale."""
    b = body()
    b["cells"][0] = {
        "key": ["A", "I"],
        "contributions": [{"value": 155}, {"value": 4}, {"value": -40}],
    }
    b["rules"]["negative_values"] = {"mode": "shift", "shift": 50}
    reply = client.post("/v1/suppress", json=b).json()
    assert reply["safe"], reply["solver"]
    cells = by_key(reply)
    assert cells[("A", "I")]["value"] == 119.0
    assert cells[("A", "Total")]["value"] == 119.0 + 380 + 340
    assert cells[("Total", "Total")]["value"] == 2740.0 - 41
    # The audit's intervals are the cells', on the original scale (until 2026-11-27 they
    # were on the shifted one: 3 * 50 more on A,I, 4 * 50 on the other leaves).
    for audited in reply["audit"]["cells"]:
        k = tuple(audited["key"])
        lo, hi = audited["interval"]
        assert cells[k]["interval"] == [lo, hi]
        assert lo <= cells[k]["value"] <= hi
    assert cells[("A", "I")]["interval"][0] < 0  # its three contributors are each >= -50


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.integers(1, 60), min_size=6, max_size=6),
    sensitive=st.integers(0, 5),
    level=st.integers(1, 30),
)
def test_reply_values_add_up_and_reaudit_agrees(client, values, sensitive, level):
    """Any 2x3 table with one sensitive cell: the reply's values are the table's (margins
    the sums of their leaves), each suppressed cell's value lies in its interval, and an
    audit of the reply alone gives the same intervals."""
    keys = [(r, c) for r in ("a", "b") for c in ("x", "y", "z")]
    request = {
        "structure": {
            "dimensions": [
                {"name": "r", "leaves": ["a", "b"]},
                {"name": "c", "leaves": list("xyz")},
            ]
        },
        "cells": [
            {"key": list(k), "value": v}
            | ({"protection": {"upper": level, "lower": level}} if i == sensitive else {})
            for i, (k, v) in enumerate(zip(keys, values))
        ],
    }
    reply = client.post("/v1/suppress", json=request).json()
    cells = by_key(reply)
    for k, v in zip(keys, values):
        assert cells[k]["value"] == v
    for r in ("a", "b"):
        assert cells[(r, "Total")]["value"] == sum(cells[(r, c)]["value"] for c in "xyz")
    assert cells[("Total", "Total")]["value"] == sum(values)
    if not reply["safe"]:
        assert not any("interval" in c for c in reply["cells"])
        return
    for c in reply["cells"]:
        if c["status"] != "published":
            lo, hi = c["interval"]
            assert lo <= c["value"] <= (hi if hi is not None else float("inf"))
    audit = client.post("/v1/audit", json=audit_body(request, reply)).json()
    assert {tuple(c["key"]): c["interval"] for c in audit["cells"]} == {
        k: c["interval"] for k, c in cells.items() if "interval" in c
    }
