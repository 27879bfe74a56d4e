"""Negative values by the shift (seed 004 section 2.2, ``negative_values`` mode ``shift``):
the audit and suppression run on ``Y = X + N M``, but what the caller sends (a-priori
bounds) and what the reply shows (intervals, aggregation values) are on the published
scale ``X``. Found by a helper's campaign (h50): the caller's lower bounds were replaced
by 0 on the shifted scale (a bound the intruder knows ignored: ``safe`` where the same
table under ``absolute`` is ``unsafe``), upper bounds were read on the shifted scale (a
value within its bound refused), and /v1/audit's intervals were on the shifted scale."""

from __future__ import annotations

import pytest

STRUCTURE = {
    "dimensions": [
        {"name": "r", "leaves": ["a", "b"], "total": "T"},
        {"name": "c", "leaves": ["1", "2"], "total": "T"},
    ]
}


def cells(**bounds_of_a2):
    """a1 a singleton of 100 (sensitive under p = 10, levels 10), a2 = 50 with a negative
    contribution, b1 = 120, b2 = 140; every leaf hidden, the margins published."""
    out = [
        {"key": ["a", "1"], "contributions": [{"value": 100}], "suppressed": True},
        {
            "key": ["a", "2"],
            "contributions": [{"value": 40}, {"value": 30}, {"value": -20}],
            "suppressed": True,
        },
        {"key": ["b", "1"], "contributions": [{"value": 40}] * 3, "suppressed": True},
        {
            "key": ["b", "2"],
            "contributions": [{"value": 50}, {"value": 50}, {"value": 40}],
            "suppressed": True,
        },
    ]
    out[1].update(bounds_of_a2)
    return out


def body(negative, **bounds_of_a2):
    return {
        "structure": STRUCTURE,
        "cells": cells(**bounds_of_a2),
        "rules": {"rules": [{"type": "p_percent", "p": 10}], "negative_values": negative},
    }


SHIFT = {"mode": "shift", "shift": 20}


def interval(reply, key):
    return next(c for c in reply["cells"] if c["key"] == key)["interval"]


def test_the_audit_reports_intervals_on_the_published_scale(client):
    # a1 + a2 = 150 with a2 >= -3 * 20: a1 <= 210; a1 >= -20 (one contributor >= -M).
    # On the shifted scale (Y = X + N M) the same interval is [0, 230].
    r = client.post("/v1/audit", json=body(SHIFT))
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["verdict"] == "safe"
    assert interval(reply, ["a", "1"]) == pytest.approx([-20.0, 210.0])
    assert interval(reply, ["a", "2"]) == pytest.approx([-60.0, 170.0])
    assert interval(reply, ["b", "1"]) == pytest.approx([10.0, 240.0])


def test_a_lower_bound_the_intruder_knows_is_kept_under_the_shift(client):
    # An intruder who knows a2 >= 45 reads a1 = 150 - a2 <= 105: short of a1's upper
    # level (100 + 10), as the same table under 'absolute' says.
    absolute = client.post("/v1/audit", json=body({"mode": "absolute"}, lower_bound=45)).json()
    assert absolute["verdict"] == "unsafe"
    assert interval(absolute, ["a", "1"]) == pytest.approx([0.0, 105.0])
    r = client.post("/v1/audit", json=body(SHIFT, lower_bound=45))
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["verdict"] == "unsafe"  # was "safe": the bound replaced by 0 on Y
    assert interval(reply, ["a", "1"]) == pytest.approx([-20.0, 105.0])
    assert interval(reply, ["a", "2"]) == pytest.approx([45.0, 170.0])
    a1 = next(c for c in reply["cells"] if c["key"] == ["a", "1"])
    assert a1["protected"] is False and a1["flags"]["upper_too_close"] is True


def test_an_upper_bound_is_read_on_the_published_scale(client):
    # a2 = 50 <= 51: accepted (was a 422, "the cell's value lies above its upper_bound",
    # read against Y = 50 + 3 * 20 = 110); then a1 = 150 - a2 >= 99.
    r = client.post("/v1/audit", json=body(SHIFT, upper_bound=51))
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["verdict"] == "unsafe"
    assert interval(reply, ["a", "1"]) == pytest.approx([99.0, 210.0])
    assert interval(reply, ["a", "2"]) == pytest.approx([-60.0, 51.0])
    # A bound the value really exceeds is still refused.
    r = client.post("/v1/audit", json=body(SHIFT, upper_bound=49))
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "upper_bound"


def test_suppression_keeps_the_bounds_and_one_scale(client):
    """A certified pattern (none from 2026-11-27 until 2026-11-28, when no group of two
    hidden cells was certified under the shift: aggregations.SHIFT_READING) keeps the
    intruder's bound and reports on the published scale."""
    b = body(SHIFT, lower_bound=45)
    for c in b["cells"]:
        del c["suppressed"]
    r = client.post("/v1/suppress", json=b)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["safe"] is True and reply["audit"]["verdict"] == "safe"
    shown = {tuple(c["key"]): c for c in reply["cells"]}
    assert shown[("a", "1")]["value"] == 100.0
    # The cells' intervals and the audit's are the same, on the published scale.
    for c in reply["audit"]["cells"]:
        if c["suppressed"]:
            assert c["interval"] == pytest.approx(shown[tuple(c["key"])]["interval"])
    lo, hi = shown[("a", "1")]["interval"]
    assert lo <= 100.0 - 10.0 and hi >= 100.0 + 10.0
    lo2, _ = shown[("a", "2")]["interval"]
    assert lo2 >= 45.0  # the intruder's bound
    # The information loss is in the caller's values too (it was y's: N M more per cell).
    hidden = [c for c in reply["cells"] if c["status"] != "published"]
    assert reply["loss"]["value"] == pytest.approx(sum(abs(c["value"]) for c in hidden))
    everything = sum(abs(c["value"]) for c in reply["cells"])
    assert reply["loss"]["value_share"] == pytest.approx(reply["loss"]["value"] / everything)


def plain(body_):
    for c in body_["cells"]:
        del c["suppressed"]
    return body_


@pytest.mark.parametrize("method", ["controlled", "random"])
def test_rounding_rounds_the_published_table(client, method):
    # Until 2026-11-27 /v1/round rounded Y = X + N M: a1 came back as 120 (100 + 20),
    # the table as 410 + 200 (every leaf's N M) = 610.
    b = plain(body(SHIFT))
    b["cells"][0]["contributions"] = [{"value": 101}]
    extra = {"seed": 7} if method == "random" else {}
    r = client.post("/v1/round", json={**b, "base": 5, "method": method, **extra})
    assert r.status_code == 200, r.text
    cells = {tuple(c["key"]): c for c in r.json()["cells"]}
    assert cells[("a", "1")]["original"] == 101.0
    assert cells[("T", "T")]["original"] == 411.0
    assert cells[("a", "1")]["rounded"] in (100.0, 105.0)
    for c in cells.values():
        assert c["rounded"] % 5 == 0
        assert abs(c["rounded"] - c["original"]) < 5


def test_adjustment_adjusts_the_published_table(client):
    r = client.post("/v1/adjust", json=plain(body(SHIFT)))
    assert r.status_code == 200, r.text
    cells = {tuple(c["key"]): c for c in r.json()["cells"]}
    assert cells[("a", "1")]["value"] == 100.0  # was 120: Y = 100 + 20
    assert cells[("a", "2")]["value"] == 50.0  # was 110
    assert cells[("T", "T")]["value"] == 410.0  # was 610
    for c in cells.values():
        assert c["adjusted"] == pytest.approx(c["value"] + c["deviation"])
    assert cells[("a", "1")]["protected"] is True
    assert abs(cells[("a", "1")]["deviation"]) >= 12.0 - 1e-6  # the level on Y, unchanged


def test_the_noisy_table_is_the_published_one(make_client):
    """/v1/noise under the shift: the rules run on y, the noise is published on x (until
    2026-11-27 the reply's noisy values were y's, N M = 20 per contributor above x's)."""
    client = make_client(noise_secret=b"a campaign's secret, 32 bytes or more")
    b = plain(body(SHIFT))
    for i, c in enumerate(b["cells"]):
        c["respondents"] = [f"e{i}-{k}" for k in range(len(c["contributions"]))]
    b["noise"] = {"d": 0.1, "jitter": 0.02}
    r = client.post("/v1/noise", json=b)
    assert r.status_code == 200, r.text
    cells = {tuple(c["key"]): c for c in r.json()["cells"]}
    true = {("a", "1"): 100.0, ("a", "2"): 50.0, ("b", "1"): 120.0, ("b", "2"): 140.0}
    true |= {("T", "T"): 410.0, ("a", "T"): 150.0, ("T", "1"): 220.0}
    # Noise of d = 10% (+-2%) on each contribution moves a cell by at most 12% of the
    # absolute sum of its contributions (a2: 40 + 30 + 20); y is 20 per contributor above x.
    absolute = {("a", "1"): 100, ("a", "2"): 90, ("b", "1"): 120, ("b", "2"): 140}
    absolute |= {("T", "T"): 450, ("a", "T"): 190, ("T", "1"): 220}
    for key, x in true.items():
        c = cells[key]
        assert c["value"] is not None, c
        assert c["value"] == pytest.approx(x * (1 + c["relative_change"]))
        assert abs(c["value"] - x) <= 0.12 * absolute[key] + 1e-9


def test_a_holding_is_shifted_per_contribution_in_the_table_too(client):
    """A holding of k contributions is k M above its x for the rules (each contribution
    y = x + M, then summed, seed 000 Holdings) and, since 2026-11-27, in the table: the
    table used N M with N the holdings, a bound x >= -N M the intruder does not have, so
    two contributions of -60 of one holding (each >= -M = -100, the cell -120) were
    refused as a negative cell without bounds."""
    b = body({"mode": "shift", "shift": 100})
    b["cells"][0]["contributions"] = [
        {"value": -60, "holding": "H"},
        {"value": -60, "holding": "H"},
    ]
    r = client.post("/v1/audit", json=b)
    assert r.status_code == 200, r.text
    reply = r.json()
    # a1 >= -2 M (two observations); a1 = -70 - a2 <= -70 + 3 M (a2 = 50, three).
    assert interval(reply, ["a", "1"]) == pytest.approx([-200.0, 230.0])
    a1 = next(c for c in reply["cells"] if c["key"] == ["a", "1"])
    # One holding, y1 = -120 + 2 M = 80: the p% level p/100 y1 = 8 on either scale.
    assert a1["sensitive"] is True and a1["upper_protection"] == pytest.approx(8.0)
