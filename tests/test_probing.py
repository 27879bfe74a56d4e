"""What a filter-role caller can learn by probing, and what it costs (issue 14, part 7 and
the messages of part 8): a cap on cells per request and a budget of cells per minute per
key on every route the filter role may call, counted per key id in the metrics; error
messages that name no parameter of a profile, and one answer for every profile the filter
route cannot use."""

from __future__ import annotations

import json

import pytest

from service.api.cell_budget import CellBudget
from service.config import ConfigError, Settings
from service.metrics import Metrics
from tests.callers import ANALYST_KEY, FILTER_KEY

AS_FILTER = {"X-API-Key": FILTER_KEY}
AS_ANALYST = {"X-API-Key": ANALYST_KEY}
RULES = {"rules": [{"type": "p_percent", "p": 10}, {"type": "dominance", "n": 3, "k": 80}]}
PROFILES = {
    "profiles": {
        "online": {"rules": RULES, "filter": {"statistical": {"approach": "refuse"}}},
        "tables": {"rules": RULES},  # no filter policy
    }
}


@pytest.fixture
def files(tmp_path, key_file):
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps(PROFILES))
    return key_file, profiles


@pytest.fixture
def service(make_client, files):
    """A service with a budget of 100 cells a minute and at most 60 cells a request."""
    key_file, profiles = files
    return make_client(
        api_keys_file=key_file,
        profiles_path=profiles,
        profiles=Settings.from_env({"SDC_PROFILES": str(profiles)}).profiles,
        filter_max_cells=60,
        filter_cells_per_minute=100,
    )


def codes(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def body_of(route: str, n: int) -> dict:
    """A valid request of ``n`` cells for ``route``."""
    if route == "/v1/filter":
        return {
            "profile": "online",
            "query": {"variables": ["area"]},
            "cells": [{"key": [c], "count": 10} for c in codes(n)],
        }
    if route == "/v1/sensitivity":
        return {
            "rules": RULES,
            "cells": [
                {
                    "key": [c],
                    "contributions": [{"value": 5}, {"value": 4}, {"value": 3}, {"value": 2}],
                }
                for c in codes(n)
            ],
        }
    if route == "/v1/frequency/sensitivity":
        return {
            "dimensions": [{"name": "area", "codes": codes(n)}],
            "cells": [{"key": [c], "count": 10} for c in codes(n)],
            "rules": {"threshold": {"t": 3}},
        }
    table = {
        "structure": {"dimensions": [{"name": "area", "leaves": codes(n)}]},
        "cells": [{"key": [c], "value": 10} for c in codes(n)],
    }
    return table if route == "/v1/audit" else {**table, "method": "fast"}


ROUTES = ["/v1/filter", "/v1/sensitivity", "/v1/frequency/sensitivity", "/v1/audit", "/v1/suppress"]


def sample(client, name: str, **labels) -> float | None:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                return float(value)
    return None


# --- the token bucket ------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_grants_a_minutes_worth_then_refills_at_its_rate():
    clock = Clock()
    budget = CellBudget(600, 600, Metrics.create().filter_cells, clock=clock)  # 10 a second
    assert budget.take("portal", 400) == 0.0
    assert budget.take("portal", 200) == 0.0
    assert budget.take("portal", 50) == pytest.approx(5.0)  # empty: 50 cells take 5 s
    assert budget.take("other", 600) == 0.0  # every key its own bucket
    clock.now += 3.0
    assert budget.take("portal", 50) == pytest.approx(2.0)  # 30 back, a refusal took none
    clock.now += 2.0
    assert budget.take("portal", 50) == 0.0
    clock.now += 3600.0
    assert budget.take("portal", 600) == 0.0  # full, never more than full
    assert budget.take("portal", 1) == pytest.approx(0.1)


def test_bucket_counts_each_keys_cells_by_outcome():
    metrics = Metrics.create()
    budget = CellBudget(100, 100, metrics.filter_cells, clock=Clock())
    budget.take("portal", 70)
    budget.take("portal", 70)
    budget.take("portal", 30)
    value = metrics.registry.get_sample_value
    assert value("sdc_filter_cells_total", {"key_id": "portal", "outcome": "admitted"}) == 100
    assert value("sdc_filter_cells_total", {"key_id": "portal", "outcome": "refused"}) == 70


# --- over HTTP: every route the filter role may call ----------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_filter_role_cells_are_capped_per_request(service, route):
    r = service.post(route, json=body_of(route, 61), headers=AS_FILTER)
    assert r.status_code == 413, r.text
    detail = r.json()["detail"][0]
    assert detail["field"] == "cells"
    assert detail["message"] == "61 cells exceed the limit of 60 per request for the filter role"
    # Nothing was charged: the same key still has its whole minute.
    assert service.post(route, json=body_of(route, 60), headers=AS_FILTER).status_code == 200
    assert service.post(route, json=body_of(route, 61), headers=AS_ANALYST).status_code == 200


@pytest.mark.parametrize("route", ROUTES)
def test_filter_role_budget_refuses_with_retry_after(service, route):
    assert service.post(route, json=body_of(route, 60), headers=AS_FILTER).status_code == 200
    r = service.post(route, json=body_of(route, 50), headers=AS_FILTER)  # 40 left
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_requests"
    assert r.json()["detail"][0]["field"] == "cells"
    assert "Retry-After" in r.json()["detail"][0]["message"]
    # 10 cells missing at 100 a minute: 6 seconds.
    assert r.headers["retry-after"] == "6"
    assert service.post(route, json=body_of(route, 40), headers=AS_FILTER).status_code == 200
    # Analysts are not budgeted.
    for _ in range(3):
        assert service.post(route, json=body_of(route, 60), headers=AS_ANALYST).status_code == 200
    assert sample(service, "sdc_filter_cells_total", key_id="portal", outcome="admitted") == 100
    assert sample(service, "sdc_filter_cells_total", key_id="portal", outcome="refused") == 50
    assert sample(service, "sdc_rejected_requests_total", reason="rate_limited") == 1
    assert sample(service, "sdc_filter_cells_total", key_id="methods") is None


def test_refused_bodies_are_charged_too(service):
    """A probe that ends in a 422 of the rules (an unknown profile, a negative value) has
    still been judged against the profile: its cells count."""
    b = body_of("/v1/sensitivity", 60)
    b.pop("rules")
    b["profile"] = "no-such-profile"
    r = service.post("/v1/sensitivity", json=b, headers=AS_FILTER)
    assert r.status_code == 422
    r = service.post("/v1/sensitivity", json=body_of("/v1/sensitivity", 60), headers=AS_FILTER)
    assert r.status_code == 429


def test_a_sweep_is_refused_within_its_first_minute(service):
    """The review's probe: [100, 100, r] for a sweep of r gives p, one cell per r. With a
    budget of 100 cells a minute the sweep gets 100 values of r a minute and no more."""
    judged = 0
    for start in range(0, 1000, 50):
        b = {
            "profile": "online",
            "cells": [
                {"key": [f"r{r}"], "contributions": [{"value": 100}, {"value": 100}, {"value": r}]}
                for r in range(start, start + 50)
            ],
        }
        r = service.post("/v1/sensitivity", json=b, headers=AS_FILTER)
        if r.status_code != 200:
            assert r.status_code == 429
            break
        judged += 50
    assert judged == 100


def test_settings_of_the_budget():
    s = Settings.from_env({"SDC_FILTER_MAX_CELLS": "500", "SDC_FILTER_CELLS_PER_MINUTE": "9000"})
    assert (s.filter_max_cells, s.filter_cells_per_minute) == (500, 9000)
    d = Settings.from_env({})
    assert (d.filter_max_cells, d.filter_cells_per_minute) == (10_000, 6_000_000)
    with pytest.raises(ConfigError, match="SDC_FILTER_CELLS_PER_MINUTE must be at least"):
        Settings.from_env({"SDC_FILTER_MAX_CELLS": "500", "SDC_FILTER_CELLS_PER_MINUTE": "499"})
    with pytest.raises(ConfigError, match="SDC_FILTER_MAX_CELLS must be at least 1"):
        Settings.from_env({"SDC_FILTER_MAX_CELLS": "0"})


# --- messages that name no parameter ---------------------------------------------------------


def test_too_few_largest_names_the_depth_to_analysts_only(service):
    """The profile's dominance rule reads the 3 largest: a summary with 2 of a cell's 5
    contributors is refused, and the filter role is not told how many were needed."""
    b = {
        "profile": "online",
        "cells": [
            {"key": ["x"], "summary": {"total": 100, "count": 5, "largest": [40, 30, 10]}},
            {"key": ["y"], "summary": {"total": 100, "count": 5, "largest": [40, 30]}},
        ],
    }
    as_analyst = service.post("/v1/sensitivity", json=b, headers=AS_ANALYST)
    assert as_analyst.status_code == 422
    assert (
        as_analyst.json()["detail"][0]["message"]
        == "the rule set needs the 3 largest contributions of this cell"
    )
    as_filter = service.post("/v1/sensitivity", json=b, headers=AS_FILTER)
    assert as_filter.status_code == 422
    detail = as_filter.json()["detail"][0]
    assert (detail["field"], detail["cell"], detail["key"]) == ("summary.largest", 1, ["y"])
    assert "3" not in detail["message"] and "largest" in detail["message"]
    # The same on the filter route (refuse approach, magnitudes by the profile's rules).
    r = service.post("/v1/filter", json={**b, "query": {"variables": ["area"]}}, headers=AS_FILTER)
    assert r.status_code == 422
    assert r.json()["detail"][0]["message"] == detail["message"]


def test_filter_route_answers_alike_for_missing_and_unusable_profiles(service):
    b = body_of("/v1/filter", 2)
    replies = []
    for name in ("tables", "no-such-profile"):
        r = service.post("/v1/filter", json={**b, "profile": name}, headers=AS_FILTER)
        assert r.status_code == 422
        replies.append(r.json())
    assert replies[0] == replies[1]
    assert replies[0]["detail"][0] == {
        "field": "profile",
        "cell": None,
        "key": None,
        "message": "unknown profile",
    }
    # Analysts may be told why.
    r = service.post("/v1/filter", json={**b, "profile": "tables"}, headers=AS_ANALYST)
    assert r.json()["detail"][0]["message"] == "the profile has no filter policy"
