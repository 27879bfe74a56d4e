"""POST /v1/noise (issue 17 part 4; seed 003 B.4): a magnitude table with the service's
keyed multiplicative noise, cells with too little noise flagged or suppressed, and each
cell's relative change."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.profiles import Profile
from service.sdc import noise
from tests.callers import ANALYST_KEY, FILTER_KEY

SECRET = b"test-noise-secret"


def table(**extra) -> dict:
    """2x2 leaves; e5 and e6 belong to one enterprise g1 (one noise direction)."""
    out = {
        "structure": {
            "dimensions": [
                {"name": "size", "leaves": ["A", "B"]},
                {"name": "act", "leaves": ["I", "II"]},
            ]
        },
        "cells": [
            {
                "key": ["A", "I"],
                "contributions": [{"value": 100}, {"value": 50}],
                "respondents": ["e1", "e2"],
                "protection": {"upper": 10, "lower": 10},
            },
            {"key": ["A", "II"], "contributions": [{"value": 200}], "respondents": ["e3"]},
            {
                "key": ["B", "I"],
                "contributions": [{"value": 40}, {"value": 60, "holding": "g1"}],
                "respondents": ["e4", "e5"],
                "protection": {"upper": 5, "lower": 8},
            },
            {
                "key": ["B", "II"],
                "contributions": [{"value": 300, "holding": "g1"}],
                "respondents": ["e6"],
                "protection": {"upper": 20, "lower": 40},
            },
        ],
        "noise": {"d": 0.1, "jitter": 0.0},
    }
    out.update(extra)
    return out


# With jitter 0 every multiplier is 1.1 or 0.9 by its enterprise's keyed direction:
# e1 up; e2, e3, e4 and g1 down (asserted in the first test). Noisy leaves:
# A,I = 110 + 45 = 155 (true 150), A,II = 180 (200), B,I = 36 + 54 = 90 (100),
# B,II = 270 (300); margins the sums.
NOISY = {
    ("Total", "Total"): (695.0, 750.0),
    ("Total", "I"): (245.0, 250.0),
    ("Total", "II"): (450.0, 500.0),
    ("A", "Total"): (335.0, 350.0),
    ("A", "I"): (155.0, 150.0),
    ("A", "II"): (180.0, 200.0),
    ("B", "Total"): (360.0, 400.0),
    ("B", "I"): (90.0, 100.0),
    ("B", "II"): (270.0, 300.0),
}
# |noise| against the larger protection level: A,I 5 < 10 and B,II 30 < 40 are too
# little; B,I 10 >= 8 is enough.
TOO_LITTLE = {("A", "I"), ("B", "II")}


@pytest.fixture
def client(make_client):
    return make_client(noise_secret=SECRET)


def by_key(reply):
    return {tuple(c["key"]): c for c in reply["cells"]}


def test_the_keyed_directions_the_hand_check_uses():
    assert noise.directions(["e1", "e2", "e3", "e4", "g1"], SECRET).tolist() == [
        1.0,
        -1.0,
        -1.0,
        -1.0,
        -1.0,
    ]


def test_noisy_table_hand_checked(client):
    r = client.post("/v1/noise", json=table())
    assert r.status_code == 200, r.text
    cells = by_key(r.json())
    for k, (noisy, true) in NOISY.items():
        assert cells[k]["value"] == pytest.approx(noisy), k
        assert cells[k]["relative_change"] == pytest.approx((noisy - true) / true), k
        assert cells[k]["status"] == ("flagged" if k in TOO_LITTLE else "published")
    assert r.json()["summary"] == {
        "cells": 9,
        "sensitive": 3,
        "flagged": 2,
        "max_relative_change": pytest.approx(0.1),
        "mean_relative_change": pytest.approx(sum(abs(n - t) / t for n, t in NOISY.values()) / 9),
    }


def test_suppress_option_and_derivable_cells(client):
    reply = client.post("/v1/noise", json=table(flagged="suppress")).json()
    cells = by_key(reply)
    for k in TOO_LITTLE:
        # Each is the only unknown of its row: A,Total - A,II gives A,I's noisy value.
        assert cells[k] == {
            "key": list(k),
            "status": "suppressed",
            "value": None,
            "relative_change": pytest.approx(cells[k]["relative_change"]),
            "sensitive": True,
            "derivable": True,
        }
    assert cells[("B", "I")]["value"] == pytest.approx(90.0)
    # Max and mean over published cells only.
    published = [(n - t) / t for k, (n, t) in NOISY.items() if k not in TOO_LITTLE]
    assert reply["summary"]["mean_relative_change"] == pytest.approx(
        sum(map(abs, published)) / len(published)
    )


def test_filter_role_gets_published_noisy_values_only(make_client, key_file):
    policy = {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "filter": {
            "statistical": {
                "approach": "noise",
                "d": 0.1,
                "jitter": 0.0,
                "ratio_range": [0.5, 1.5],
                "min_weighted_count": 0,
                "p": 10,
            }
        },
    }
    secured = make_client(
        api_keys_file=key_file,
        noise_secret=SECRET,
        profiles={"survey": Profile.model_validate(policy)},
    )
    body = table(profile="survey")
    del body["noise"]
    for c in body["cells"]:
        c.pop("protection", None)
    inline = secured.post("/v1/noise", json=table(), headers={"X-API-Key": FILTER_KEY})
    assert inline.status_code == 403
    r = secured.post("/v1/noise", json=body, headers={"X-API-Key": FILTER_KEY})
    assert r.status_code == 200, r.text
    # p% with p = 10: A,I (100, 50) needs 10 and has 5, so it is flagged; the others are
    # published with their noisy values, and nothing else is said.
    cells = by_key(r.json())
    assert cells[("A", "I")] == {"key": ["A", "I"], "status": "flagged", "value": None}
    for k, (noisy, _) in NOISY.items():
        if k != ("A", "I"):
            assert cells[k] == {"key": list(k), "status": "published", "value": noisy}
    assert "relative_change" not in r.text and "max_relative_change" not in r.json()["summary"]
    analyst = secured.post("/v1/noise", json=body, headers={"X-API-Key": ANALYST_KEY}).json()
    assert by_key(analyst)[("A", "I")]["value"] == pytest.approx(155.0)


def test_errors_name_the_field_and_cell(client, make_client):
    no_secret = make_client().post("/v1/noise", json=table())
    assert no_secret.status_code == 422 and "SDC_NOISE_SECRET" in no_secret.text
    b = table()
    b["cells"][2]["respondents"] = ["e4"]
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert (detail["field"], detail["cell"]) == ("respondents", 2)
    b = table()
    b["cells"][1] = {"key": ["A", "II"], "value": 200}
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert (detail["field"], detail["cell"]) == ("contributions", 1)
    b = table()
    b["cells"][3]["respondents"] = ["e5"]  # e5 is listed under e4's row with holding g1
    b["cells"][3]["contributions"][0]["holding"] = "g2"
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert detail["field"] == "contributions.holding" and detail["cell"] == 3
    b = table(noise={"d": 0.1, "jitter": 0.2})
    assert client.post("/v1/noise", json=b).status_code == 422
    b = table()
    del b["noise"]
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert detail["field"] == "noise"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.integers(1, 1000), min_size=6, max_size=6),
    d=st.floats(0.01, 0.45),
    spread=st.floats(0, 0.99),
)
def test_noisy_tables_add_up_and_move_each_leaf_within_the_level(client, values, d, spread):
    jitter = d * spread
    keys = [(r, c) for r in "ab" for c in "xyz"]
    body = {
        "structure": {
            "dimensions": [
                {"name": "r", "leaves": ["a", "b"]},
                {"name": "c", "leaves": list("xyz")},
            ]
        },
        "cells": [
            {"key": list(k), "contributions": [{"value": v}], "respondents": [f"r{i}"]}
            for i, (k, v) in enumerate(zip(keys, values))
        ],
        "noise": {"d": d, "jitter": jitter},
    }
    first = client.post("/v1/noise", json=body).json()
    assert client.post("/v1/noise", json=body).json() == first  # keyed: reproducible
    cells = by_key(first)
    for k in keys:
        assert abs(cells[k]["relative_change"]) <= d + jitter + 1e-12
        assert abs(cells[k]["relative_change"]) >= d - jitter - 1e-12
    for r in "ab":
        assert cells[(r, "Total")]["value"] == pytest.approx(
            sum(cells[(r, c)]["value"] for c in "xyz")
        )
    assert cells[("Total", "Total")]["value"] == pytest.approx(sum(cells[k]["value"] for k in keys))
