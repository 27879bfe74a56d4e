"""Partial suppression (issue 17 part 3; seed 000, Salazar 2003): ``publish: "intervals"``
on ``/v1/suppress`` publishes each suppressed cell's feasibility interval instead of a
cross, and the reply's audit is recomputed with those intervals as a-priori bounds."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.callers import FILTER_KEY
from tests.test_api_suppress import body
from tests.test_suppress_reply import INTERVALS, VALUES, by_key


def with_published_bounds(request: dict, reply: dict) -> dict:
    """The audit request an intruder's view amounts to: the caller's table and rules,
    the pattern, and each published interval as the cell's a-priori bounds."""
    audit = copy.deepcopy(request)
    for key in ("method", "cost", "publish", "work_limit"):
        audit.pop(key, None)
    cells = by_key(reply)
    sent = {tuple(c["key"]) for c in audit["cells"]}
    audit["cells"] += [{"key": list(k)} for k in cells if k not in sent]  # margins
    for c in audit["cells"]:
        c.pop("constraint", None)
        c.pop("cost", None)
        out = cells[tuple(c["key"])]
        c["suppressed"] = out["status"] != "published"
        if out.get("published") is not None:
            c["lower_bound"], c["upper_bound"] = out["published"]
    return audit


def test_table_6_publishes_its_intervals_and_stays_safe(client):
    request = body(publish="intervals")
    reply = client.post("/v1/suppress", json=request).json()
    assert reply["safe"] and reply["audit"]["verdict"] == "safe"
    cells = by_key(reply)
    assert {k: c["published"] for k, c in cells.items() if "published" in c} == INTERVALS
    assert {k: c["value"] for k, c in cells.items()} == VALUES
    # The recomputed audit: the published bounds leave every interval as it was.
    assert {tuple(c["key"]): c["interval"] for c in reply["audit"]["cells"]} == INTERVALS
    assert all(c["protected"] for c in reply["audit"]["cells"] if c["sensitive"])
    # And so does an audit that an intruder's knowledge is given to.
    audit = client.post("/v1/audit", json=with_published_bounds(request, reply)).json()
    assert audit["verdict"] == "safe"
    assert {tuple(c["key"]): c["interval"] for c in audit["cells"]} == INTERVALS
    # Loss and pattern are those of the crosses' reply.
    crosses = client.post("/v1/suppress", json=body()).json()
    assert reply["loss"] == crosses["loss"]
    assert [c["status"] for c in reply["cells"]] == [c["status"] for c in crosses["cells"]]


def test_crosses_by_default(client):
    reply = client.post("/v1/suppress", json=body()).json()
    assert not any("published" in c for c in reply["cells"])


def test_the_filter_role_gets_the_published_intervals_only(make_client, key_file):
    secured = make_client(api_keys_file=key_file)
    reply = secured.post(
        "/v1/suppress", json=body(publish="intervals"), headers={"X-API-Key": FILTER_KEY}
    ).json()
    assert reply["safe"] and reply["audit"] is None
    cells = by_key(reply)
    assert {k: c["published"] for k, c in cells.items() if "published" in c} == INTERVALS
    assert all(cells[k]["value"] is None and "interval" not in cells[k] for k in INTERVALS)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.integers(1, 60), min_size=9, max_size=9),
    sensitive=st.sets(st.integers(0, 8), min_size=1, max_size=2),
    level=st.integers(1, 30),
)
def test_published_intervals_never_unprotect_a_cell(client, values, sensitive, level):
    """Any 3x3 table with one or two sensitive cells: with its intervals published, a safe
    reply stays safe under an audit that takes them as bounds, with the same intervals."""
    keys = [(r, c) for r in "abc" for c in "xyz"]
    request = {
        "structure": {
            "dimensions": [
                {"name": "r", "leaves": list("abc")},
                {"name": "c", "leaves": list("xyz")},
            ]
        },
        "cells": [
            {"key": list(k), "value": v}
            | ({"protection": {"upper": level, "lower": level}} if i in sensitive else {})
            for i, (k, v) in enumerate(zip(keys, values))
        ],
        "publish": "intervals",
    }
    reply = client.post("/v1/suppress", json=request).json()
    if not reply["safe"]:
        assert all(c.get("published") is None for c in reply["cells"])
        return
    published = {k: c["published"] for k, c in by_key(reply).items() if "published" in c}
    assert published == {k: c["interval"] for k, c in by_key(reply).items() if "interval" in c}
    audit = client.post("/v1/audit", json=with_published_bounds(request, reply)).json()
    assert audit["verdict"] == "safe", audit["reasons"]
    assert {tuple(c["key"]): c["interval"] for c in audit["cells"]} == published
