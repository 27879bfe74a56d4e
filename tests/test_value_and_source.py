"""A table cell sent with a ``value`` and its contributions or summary: the table is
audited on the value and the rules read the contributions, so the two must agree, else a
422 naming the field and the cell (a helper's campaign on negative values, h52). Under
``absolute`` and ``relaxed`` a summary holds absolute contributions (seed 002 section 5),
so its total is no cell value: such a cell needs its value."""

from __future__ import annotations

import pytest

STRUCTURE = {"dimensions": [{"name": "r", "leaves": ["a", "b"], "total": "T"}]}


def summary(total, count, largest):
    return {"total": total, "count": count, "largest": largest}


def body(a, negative=None, p=10):
    """a (p% level from its summary) and b hidden; b >= 460 is known, so a <= 1450 - 460
    = 990: 40 above a's value of 950."""
    rules = {"rules": [{"type": "p_percent", "p": p}]}
    if negative is not None:
        rules["negative_values"] = negative
    return {
        "structure": STRUCTURE,
        "cells": [
            {"key": ["a"], "suppressed": True, **a},
            {
                "key": ["b"],
                "summary": summary(500, 5, [100, 100]),
                "suppressed": True,
                "lower_bound": 460,
            },
            {"key": ["T"], "value": 1450, "summary": summary(1450, 8, [900, 100])},
        ],
        "rules": rules,
    }


def test_a_consistent_summary_is_audited_on_its_own_level(client):
    r = client.post("/v1/audit", json=body({"value": 950, "summary": summary(950, 3, [900, 50])}))
    assert r.status_code == 200, r.text
    reply = r.json()
    a = reply["cells"][0]
    assert a["upper_protection"] == pytest.approx(90.0)  # 10% of 900, nothing else left
    assert reply["verdict"] == "unsafe"


@pytest.mark.parametrize("negative", [None, {"mode": "shift", "shift": 10}])
def test_a_value_that_is_not_its_summarys_total_is_refused(client, negative):
    # The summary of 1000 (largest 900, 50) gave the level 90 - 50 = 40 and the audit
    # said safe; the cell's own value, 950, leaves nothing besides them: level 90.
    a = {"value": 950, "summary": summary(1000, 3, [900, 50])}
    r = client.post("/v1/audit", json=body(a, negative))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["field"] == "value" and detail["cell"] == 0 and detail["key"] == ["a"]
    assert "summary's total" in detail["message"]


@pytest.mark.parametrize("endpoint", ["/v1/audit", "/v1/suppress", "/v1/round", "/v1/adjust"])
def test_a_value_that_is_not_the_sum_of_its_contributions_is_refused(client, endpoint):
    b = body({"value": 950, "contributions": [{"value": 900}, {"value": 50}, {"value": 50}]})
    extra = {"base": 5} if endpoint == "/v1/round" else {}
    if endpoint != "/v1/audit":
        for c in b["cells"]:
            c.pop("suppressed", None)
    r = client.post(endpoint, json={**b, **extra})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["field"] == "value" and detail["cell"] == 0
    assert "sum of its contributions" in detail["message"]


def test_a_value_equal_to_its_mixed_sign_contributions_is_accepted(client):
    b = body(
        {"value": 0.3, "contributions": [{"value": 0.1}, {"value": 0.5}, {"value": -0.3}]},
        {"mode": "absolute"},
    )
    b["cells"][1]["summary"] = summary(500, 5, [100, 100])
    b["cells"][1]["value"] = 500
    b["cells"][1]["lower_bound"] = 0
    b["cells"][2] = {"key": ["T"], "value": 500.3, "summary": summary(500.9, 8, [100, 100])}
    r = client.post("/v1/audit", json=b)
    assert r.status_code == 200, r.text


def test_absolute_summaries_need_the_cells_value(client):
    # a = +100 - 80 = 20, its absolute contributions 180. Audited on 180 (T on 280),
    # a's interval was [0, 280]; on the cell's value it is [0, 120].
    b = {
        "structure": STRUCTURE,
        "cells": [
            {"key": ["a"], "summary": summary(180, 2, [100, 80]), "suppressed": True},
            {
                "key": ["b"],
                "contributions": [{"value": 40}, {"value": 30}, {"value": 30}],
                "suppressed": True,
            },
            {"key": ["T"], "summary": summary(280, 5, [100, 80])},
        ],
        "rules": {
            "rules": [{"type": "p_percent", "p": 30}],
            "negative_values": {"mode": "absolute"},
        },
    }
    r = client.post("/v1/audit", json=b)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["field"] == "value" and detail["cell"] == 0
    assert "absolute" in detail["message"]
    b["cells"][0]["value"] = 20
    b["cells"][2]["value"] = 120
    r = client.post("/v1/audit", json=b)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["cells"][0]["interval"] == pytest.approx([0.0, 120.0])
    # The lower level 30 is beyond a's a-priori range (its bound 0, 20 below): capped at
    # 20, which the interval reaching 0 meets (service.sdc.problem.reachable_levels).
    assert reply["cells"][0]["upper_protection"] == pytest.approx(30.0)
    assert reply["cells"][0]["lower_protection"] == pytest.approx(20.0)
    assert reply["verdict"] == "safe"
    # A value above the absolute total is no value of those contributions.
    b["cells"][0]["value"] = 181
    b["cells"][2]["value"] = 281
    r = client.post("/v1/audit", json=b)
    assert r.status_code == 422 and r.json()["detail"][0]["cell"] == 0
