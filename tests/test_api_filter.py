"""POST /v1/filter over HTTP: both policies, the query filter's refusals, keyed noise,
roles, bad input (seed 003 C and B.4)."""

from __future__ import annotations

import copy

import numpy as np
import orjson
import pytest

from schemas.profiles import Profile
from service.sdc import noise
from tests.callers import ANALYST_KEY, FILTER_KEY, write_keys

SECRET = b"filter-api-test-secret-0123"
OTHER_SECRET = b"another-secret-for-the-filter"
NOISE = {
    "approach": "noise",
    "d": 0.1,
    "jitter": 0.02,
    "ratio_range": [0.5, 1.5],
    "min_weighted_count": 3,
    "p": 10,
}
REFUSE = {"approach": "refuse", "count_threshold": 3}
QUERY_RULES = {
    "max_dimensions": 2,
    "min_area_population": {"county": 20000},
    "forbidden_combinations": [["age", "occupation"]],
}
P_RULES = {"rules": [{"type": "p_percent", "p": 10}, {"type": "frequency", "n": 3}]}

# Mining/Adams is dominated (900 of 1000, the rest 20: the p%-rule fires); Retail/Adams has
# many similar contributors; Farms/Adams is a count cell.
CELLS = [
    {
        "key": ["Mining", "Adams"],
        "contributions": [
            {"value": 900, "respondent": "m1"},
            {"value": 80, "respondent": "m2"},
            {"value": 20, "respondent": "m3"},
        ],
    },
    {
        "key": ["Retail", "Adams"],
        "contributions": [
            {"value": v, "respondent": f"r{i}", "weight": 2.0}
            for i, v in enumerate([120, 110, 100, 90, 80])
        ],
    },
    {"key": ["Farms", "Adams"], "count": 12},
]


def body(statistical=None, cells=None, query=None, **policy):
    return {
        "policy": copy.deepcopy(
            {
                "rules": P_RULES,
                "filter": {"query": QUERY_RULES, "statistical": statistical or REFUSE},
                **policy,
            }
        ),
        "query": query
        or {"variables": ["industry", "county"], "area_population": {"county": 40000}},
        "cells": copy.deepcopy(CELLS if cells is None else cells),
    }


@pytest.fixture
def client(make_client):
    return make_client(noise_secret=SECRET)


def expected_noisy(cell: dict, secret: bytes, d=0.1, jitter=0.02) -> float:
    """Independent tabulation: sum of m w x with the multipliers of service.sdc.noise."""
    c = cell["contributions"]
    m = noise.multipliers(
        [x.get("holding") or x["respondent"] for x in c],
        [x["respondent"] for x in c],
        secret,
        d,
        jitter,
    )
    return float(sum(mi * x.get("weight", 1.0) * x["value"] for mi, x in zip(m, c)))


# --- the refuse (AQS) approach -------------------------------------------------------------


def test_refuse_approach_publishes_a_safe_table(client):
    r = client.post("/v1/filter", json=body(cells=CELLS[1:]))
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["decision"] == "publish" and got["refusal"] is None
    assert [(c["key"], c["publish"], c["value"], c["reasons"]) for c in got["cells"]] == [
        (["Retail", "Adams"], True, None, []),
        (["Farms", "Adams"], True, None, []),
    ]


def test_refuse_approach_refuses_the_whole_table(client):
    got = client.post("/v1/filter", json=body()).json()
    assert got["decision"] == "refuse" and got["cells"] == []
    assert got["refusal"]["code"] == "sensitive_cells"
    assert got["refusal"]["stage"] == "statistical"
    assert "ask for less detail" in got["refusal"]["message"]


def test_refuse_approach_threshold_on_count_cells(client):
    cells = [{"key": ["Farms", "Adams"], "count": 2}, {"key": ["Farms", "Baker"], "count": 0}]
    assert client.post("/v1/filter", json=body(cells=cells)).json()["decision"] == "refuse"
    cells[0]["count"] = 3  # 3 is not below the threshold; an empty cell is safe
    assert client.post("/v1/filter", json=body(cells=cells)).json()["decision"] == "publish"


@pytest.mark.parametrize(
    "query, code",
    [
        (
            {"variables": ["industry", "county", "size"], "area_population": {"county": 40000}},
            "too_many_variables",
        ),
        ({"variables": ["age", "occupation"]}, "forbidden_combination"),
        (
            {"variables": ["industry", "county"], "area_population": {"county": 19999}},
            "area_too_small",
        ),
        ({"variables": ["industry", "county"]}, "area_too_small"),
    ],
)
def test_query_filter_refuses_before_looking_at_figures(client, query, code):
    # The cells are invalid for this query (wrong key length): the query stage runs first.
    got = client.post("/v1/filter", json=body(query=query)).json()
    assert got["decision"] == "refuse"
    assert got["refusal"]["code"] == code and got["refusal"]["stage"] == "query"
    assert "20000" not in str(got)


def test_minimum_population_of_the_query(client):
    b = body(cells=CELLS[1:])
    b["policy"]["filter"]["query"]["min_population"] = 100_000
    b["query"]["population"] = 99_999
    assert client.post("/v1/filter", json=b).json()["refusal"]["code"] == "population_too_small"
    b["query"]["population"] = 100_000
    assert client.post("/v1/filter", json=b).json()["decision"] == "publish"


# --- the noise (ARMS) approach -------------------------------------------------------------


def test_noise_approach_publishes_noisy_values_and_suppresses_failing_cells(client):
    got = client.post("/v1/filter", json=body(NOISE)).json()
    assert got["decision"] in ("publish", "suppress")
    mining, retail, farms = got["cells"]
    # Retail: 5 contributors with weight 2 (weighted count 10), no dominance: published
    # with the noisy value.
    assert retail["publish"] and retail["reasons"] == []
    assert retail["value"] == pytest.approx(expected_noisy(CELLS[1], SECRET))
    assert retail["value"] != pytest.approx(1000.0)
    assert farms == {"key": ["Farms", "Adams"], "publish": True, "value": None, "reasons": []}
    # Mining: the p%-rule shortfall is U = 0.1 * 900 - 20 = 70; suppressed exactly when
    # its noise is below that.
    noise_amount = abs(expected_noisy(CELLS[0], SECRET) - 1000.0)
    assert mining["publish"] == (noise_amount >= 70)
    assert ("p_percent_noise" in mining["reasons"]) == (noise_amount < 70)


def test_noise_criteria_over_http(client):
    cells = [
        {
            "key": ["A", "x"],
            "contributions": [{"value": 10, "respondent": "a1"}, {"value": 10, "respondent": "a2"}],
        },
        {"key": ["B", "x"], "count": 2},
        {
            "key": ["C", "x"],
            "contributions": [
                {"value": 990, "respondent": "c1"},
                {"value": 5, "respondent": "c2"},
                {"value": 5, "respondent": "c3"},
            ],
        },
    ]
    strict = {**NOISE, "ratio_range": [1.0, 1.0]}  # any noise is outside [1, 1]
    got = client.post("/v1/filter", json=body(strict, cells=cells)).json()
    assert got["decision"] == "suppress"
    reasons = {tuple(c["key"]): c["reasons"] for c in got["cells"]}
    assert "weighted_count" in reasons[("A", "x")]  # 2 < 3
    assert reasons[("B", "x")] == ["weighted_count"]  # a count cell: count 2 < 3
    assert "noise_ratio" in reasons[("C", "x")]
    assert all(not c["publish"] and c["value"] is None for c in got["cells"])


def test_same_respondent_same_noise_in_every_query(client, make_client):
    """Repeating or differencing queries cannot average the noise away: a respondent's
    multiplier depends on its id and the secret only."""
    first = client.post("/v1/filter", json=body(NOISE)).json()["cells"][1]["value"]
    again = client.post("/v1/filter", json=body(NOISE)).json()["cells"][1]["value"]
    alone = client.post("/v1/filter", json=body(NOISE, cells=[CELLS[1]])).json()
    assert first == again == alone["cells"][0]["value"]
    # The same respondents split over two cells of another query: the parts add up to
    # the same noisy total.
    split = [
        {"key": ["Retail", "Adams"], "contributions": CELLS[1]["contributions"][:2]},
        {"key": ["Retail", "Baker"], "contributions": CELLS[1]["contributions"][2:]},
    ]
    lax = {**NOISE, "min_weighted_count": 0}
    parts = client.post("/v1/filter", json=body(lax, cells=split)).json()["cells"]
    assert sum(p["value"] for p in parts) == pytest.approx(first)
    other = make_client(noise_secret=OTHER_SECRET)
    assert other.post("/v1/filter", json=body(NOISE)).json()["cells"][1]["value"] == pytest.approx(
        expected_noisy(CELLS[1], OTHER_SECRET)
    )
    assert other.post("/v1/filter", json=body(NOISE)).json()["cells"][1]["value"] != first


def test_noise_is_symmetric_over_many_respondents(client):
    """Over 2000 one-respondent cells the relative noise X'/X - 1 is symmetric about 0:
    about half the respondents go up, and the mean is 0 within sampling error."""
    cells = [
        {
            "key": [f"r{i}", "x"],
            "count": None,
            "contributions": [{"value": 100.0, "respondent": f"resp-{i}"}],
        }
        for i in range(2000)
    ]
    for c in cells:
        del c["count"]
    lax = {**NOISE, "min_weighted_count": 0, "p": 1e-9}  # publish everything
    got = client.post("/v1/filter", json=body(lax, cells=cells)).json()["cells"]
    rel = np.array([c["value"] / 100.0 - 1.0 for c in got])
    assert np.all(np.abs(np.abs(rel) - 0.1) <= 0.02 + 1e-12)
    up = int((rel > 0).sum())
    assert abs(up - 1000) < 3 * np.sqrt(2000 * 0.25)  # binomial(2000, 1/2), 3 sigma
    assert abs(rel.mean()) < 3 * rel.std() / np.sqrt(2000)


def test_noise_needs_a_configured_secret(make_client):
    r = make_client().post("/v1/filter", json=body(NOISE))
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "policy"
    assert "SDC_NOISE_SECRET" in r.json()["detail"][0]["message"]


# --- profiles and roles --------------------------------------------------------------------

PROFILE = Profile.model_validate(
    {"rules": P_RULES, "filter": {"query": QUERY_RULES, "statistical": NOISE}}
)


def test_profile_and_roles(make_client, tmp_path):
    keys = write_keys(
        tmp_path / "keys.json", (FILTER_KEY, "filter", "sha256"), (ANALYST_KEY, "analyst", "sha256")
    )
    client = make_client(
        noise_secret=SECRET,
        api_keys_file=keys,
        profiles={"online": PROFILE, "plain": Profile.model_validate({"rules": P_RULES})},
    )
    b = body()
    del b["policy"]
    b["profile"] = "online"
    as_filter = client.post("/v1/filter", json=b, headers={"X-API-Key": FILTER_KEY})
    as_analyst = client.post("/v1/filter", json=b, headers={"X-API-Key": ANALYST_KEY})
    assert as_filter.status_code == as_analyst.status_code == 200
    decisions = as_filter.json()
    assert all(
        set(c) <= {"key", "publish", "value"} or c.get("reasons") is None
        for c in decisions["cells"]
    )
    assert [c["value"] for c in decisions["cells"]] == [
        c["value"] for c in as_analyst.json()["cells"]
    ]
    assert all(c["reasons"] is not None for c in as_analyst.json()["cells"])
    text = as_filter.text + as_analyst.text
    for secret_or_parameter in (SECRET.decode(), '"d"', "jitter", "ratio", "m1", "MineCo"):
        assert secret_or_parameter not in text
    inline = body(NOISE)
    r = client.post("/v1/filter", json=inline, headers={"X-API-Key": FILTER_KEY})
    assert r.status_code == 403 and "profile" in r.json()["detail"][0]["message"]
    assert (
        client.post("/v1/filter", json=inline, headers={"X-API-Key": ANALYST_KEY}).status_code
        == 200
    )
    b["profile"] = "plain"
    r = client.post("/v1/filter", json=b, headers={"X-API-Key": FILTER_KEY})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "profile"
    b["profile"] = "nope"
    assert (
        client.post("/v1/filter", json=b, headers={"X-API-Key": FILTER_KEY}).json()["detail"][0][
            "message"
        ]
        == "unknown profile"
    )


# --- bad input -------------------------------------------------------------------------------


def _error(client, b) -> dict:
    r = client.post("/v1/filter", json=b)
    assert r.status_code == 422, r.text
    return r.json()["detail"][0]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/xml"])
def test_body_must_be_sent_as_json(client, content_type):
    """The filter reads its body from the bytes (service.api.body), with the same rule as
    FastAPI's reader: JSON needs a JSON content type."""
    headers = {} if content_type is None else {"content-type": content_type}
    r = client.post("/v1/filter", content=orjson.dumps(body()), headers=headers)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["field"] is None and "Content-Type: application/json" in detail["message"]
    r = client.post(
        "/v1/filter",
        content=orjson.dumps(body()),
        headers={"content-type": "application/vnd.query+json; charset=utf-8"},
    )
    assert r.status_code == 200, r.text


def test_lone_surrogate_is_invalid_json(client):
    raw = orjson.dumps(body()).replace(b'"Mining"', b'"\\ud800"', 1)
    r = client.post("/v1/filter", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["message"].startswith("body is not valid JSON")


@pytest.mark.parametrize(
    "count, message",
    [(-1, "greater than or equal to 0"), (2.5, "integer"), (2**60, "less than or equal to")],
)
def test_bad_count_names_field_and_cell(client, count, message):
    b = body()
    b["cells"][2]["count"] = count
    detail = _error(client, b)
    assert detail["field"] == "count" and detail["cell"] == 2
    assert detail["key"] == ["Farms", "Adams"] and message in detail["message"]


def test_noise_needs_respondents_and_contributions(client):
    b = body(NOISE)
    del b["cells"][1]["contributions"][3]["respondent"]
    detail = _error(client, b)
    assert (detail["field"], detail["cell"]) == ("contributions.3.respondent", 1)
    assert detail["key"] == ["Retail", "Adams"]
    b = body(NOISE)
    b["cells"][1] = {
        "key": ["Retail", "Adams"],
        "summary": {"total": 500, "count": 5, "largest": [120, 110]},
    }
    detail = _error(client, b)
    assert (detail["field"], detail["cell"]) == ("summary", 1)


def test_enterprise_direction_and_respondent_under_two_holdings(client):
    cells = [
        {
            "key": ["A", "x"],
            "contributions": [
                {"value": 100, "respondent": "a1", "holding": "H"},
                {"value": 100, "respondent": "a2", "holding": "H"},
                {"value": 100, "respondent": "a3", "holding": "H"},
            ],
        },
        {"key": ["B", "x"], "contributions": [{"value": 100, "respondent": "b1", "holding": "H"}]},
    ]
    lax = {**NOISE, "min_weighted_count": 0, "p": 1e-9}
    got = client.post("/v1/filter", json=body(lax, cells=cells)).json()["cells"]
    # One enterprise: every establishment is moved the same way (seed 003 B.4).
    assert (got[0]["value"] > 300) == (got[1]["value"] > 100)
    assert got[0]["value"] == pytest.approx(expected_noisy(cells[0], SECRET))
    cells[1]["contributions"][0] = {"value": 100, "respondent": "a1", "holding": "G"}
    detail = _error(client, body(lax, cells=cells))
    assert (detail["field"], detail["cell"]) == ("contributions.holding", 1)
    cells[1] = {
        "key": ["B", "x"],
        "microdata": {"value": [100], "respondent": ["a1"], "holding": ["G"]},
    }
    detail = _error(client, body(lax, cells=cells))
    assert (detail["field"], detail["cell"]) == ("microdata.holding", 1)


def test_key_length_and_missing_rules(client):
    b = body()
    b["cells"][0]["key"] = ["Mining"]
    detail = _error(client, b)
    assert (detail["field"], detail["cell"]) == ("key", 0)
    b = body()
    del b["policy"]["rules"]
    assert _error(client, b)["field"] == "policy.rules"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"d": 0.7}, "policy.filter.statistical.noise.d"),
        ({"jitter": 0.2}, "policy.filter.statistical.noise"),
        ({"ratio_range": [1.1, 1.2]}, "policy.filter.statistical.noise"),
        ({"p": 0}, "policy.filter.statistical.noise.p"),
    ],
)
def test_bad_policy_parameters(client, change, field):
    detail = _error(client, body({**NOISE, **change}))
    assert detail["field"] == field
    assert "0.7" not in detail["message"] and "0.2" not in detail["message"]


@pytest.mark.parametrize("statistical", [REFUSE, NOISE])
def test_cells_without_contributions(client, statistical):
    """An empty contribution list is an empty cell: published under refuse (nobody to
    identify), suppressed under noise (weighted count 0), never an error."""
    cells = [{"key": ["A", "x"], "contributions": []}, {"key": ["B", "x"], "count": 5}]
    got = client.post("/v1/filter", json=body(statistical, cells=cells[:1])).json()
    expected = statistical is REFUSE
    assert got["cells"][0]["publish"] is expected and got["cells"][0]["value"] is None
    got = client.post("/v1/filter", json=body(statistical, cells=cells)).json()
    assert [c["publish"] for c in got["cells"]] == [expected, True]


def test_microdata_errors_name_the_microdata_field(client):
    cells = [{"key": ["A", "x"], "microdata": {"value": [5, -3], "respondent": ["a", "b"]}}]
    detail = _error(client, body(NOISE, cells=cells))
    assert (detail["field"], detail["cell"]) == ("microdata.value", 0)
    cells[0]["microdata"] = {"value": [5, 3], "respondent": ["a"]}
    detail = _error(client, body(NOISE, cells=cells))
    assert detail["field"] == "microdata" and "one entry per value" in detail["message"]
    cells[0]["microdata"] = {"value": [5, 3]}
    detail = _error(client, body(NOISE, cells=cells))
    assert (detail["field"], detail["cell"]) == ("microdata.respondent", 0)


def test_a_respondent_listed_twice_in_a_cell_is_refused(client):
    """Three rows of one establishment would pass the p%-rule and the weighted count as
    three contributors and publish its noisy figure, i.e. its multiplier (1 + d)."""
    cells = [
        {
            "key": ["A", "x"],
            "microdata": {"value": [100, 100, 100], "respondent": ["r1", "r2", "r1"]},
        }
    ]
    detail = _error(client, body(NOISE, cells=cells))
    assert (detail["field"], detail["cell"]) == ("microdata.respondent", 0)
    cells = [
        {"key": ["A", "x"], "count": 4},
        {
            "key": ["A", "y"],
            "contributions": [{"value": 1, "respondent": "r1"}, {"value": 2, "respondent": "r1"}],
        },
    ]
    detail = _error(client, body(NOISE, cells=cells))
    assert (detail["field"], detail["cell"]) == ("contributions.respondent", 1)
    # The same respondent in two cells is a respondent of each (other establishments).
    cells = [
        {"key": ["A", "x"], "microdata": {"value": [5], "respondent": ["r1"]}},
        {"key": ["A", "y"], "microdata": {"value": [6], "respondent": ["r1"]}},
    ]
    assert client.post("/v1/filter", json=body(NOISE, cells=cells)).status_code == 200


def test_a_holding_and_a_respondent_of_the_same_id_are_two_units(make_client):
    # Under this secret A's direction is down: with jitter 0 every multiplier keyed by A, C
    # or E is 0.9 (tests/test_filter_intruder_noise.py). One cell: respondent A alone 1000,
    # C in holding "A" 400, E 20; p = 15: U = 0.15 x 1000 - 20 = 130 (three units, as the
    # p%-rule counts them). D = -100 - 40 - 2 = -142; the holding "A" knows its own -40:
    # |D - D_A'| = 102 < 130, suppressed. Taking the holding for respondent A (one unit of
    # 1400) left only E as an intruder, |D - D_E| = 140 >= 130: published.
    client = make_client(noise_secret=b"filter-test-secret-0123456789")
    statistical = {**NOISE, "jitter": 0.0, "min_weighted_count": 0, "p": 15}
    for holding in ("A", "H"):
        cell = {
            "key": ["Mining", "Adams"],
            "contributions": [
                {"value": 1000, "respondent": "A"},
                {"value": 400, "respondent": "C", "holding": holding},
                {"value": 20, "respondent": "E"},
            ],
        }
        got = client.post("/v1/filter", json=body(statistical, cells=[cell])).json()
        assert [(c["publish"], c["reasons"]) for c in got["cells"]] == [
            (False, ["p_percent_noise"])
        ], holding


@pytest.mark.parametrize("negative", [None, {"mode": "absolute"}, {"mode": "shift", "shift": 500}])
def test_noise_refuses_negative_contributions_with_advice_that_applies(client, negative):
    """The noise approach reads contributions as they are (its p%-rule criterion is
    meaningless for negative values, seed 000); the policy's negative_values is the refuse
    approach's. Until 2026-11-27 the refusal advised choosing a negative_values mode,
    which the noise approach ignores (the same 422 with one)."""
    b = body(NOISE)
    if negative is not None:
        b["policy"]["rules"] = {**P_RULES, "negative_values": negative}
    b["cells"][1]["contributions"][2]["value"] = -100
    detail = _error(client, b)
    assert detail["cell"] == 1 and detail["key"] == ["Retail", "Adams"]
    assert detail["field"].startswith("contributions")
    assert "noise approach" in detail["message"]
    assert "choose negative_values" not in detail["message"]
