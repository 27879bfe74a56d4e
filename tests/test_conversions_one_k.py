"""The p%-rule less protective than a (1,k1) dominance rule, p/100 = 100/k1 - 2 (seed 003
D), in the core and through POST /v1/conversions (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.sdc import conversions, magnitudes
from service.sdc.rules import Dominance, PPercent


def fires(rule, values) -> tuple[bool, float, float]:
    """(fires, S, cell total) of ``rule`` on one cell with these contributions."""
    values = np.asarray(values, float)
    m = magnitudes.from_contributions(
        1, np.zeros(values.size, int), values, depth=max(2, rule.depth)
    )
    s = rule.sensitivity(m)
    return bool(rule.fires(s)[0]), float(s[0]), float(values.sum())


# --------------------------------------------------------------------------- the formula


def test_seed_003_d_values():
    assert conversions.p_from_1k(40) == pytest.approx(50.0)
    # Seed 003 D: "With k1 = 75, the less conservative p-percent rule would have p = -66.7"
    assert conversions.p_from_1k(75) == pytest.approx(-66.67, abs=0.01)
    # and back, k1 = 100 / (p/100 + 2): "For p = 17.65%, we would need k1 = 45.94"
    k1 = 100 / (17.65 / 100 + 2)
    assert k1 == pytest.approx(45.94, abs=0.01)
    assert conversions.p_from_1k(k1) == pytest.approx(17.65)
    assert conversions.p_from_1k(50) == 0.0


def test_one_k_40_gives_p_50_less_protective():
    found = conversions.equivalents("dominance", {"n": 1, "k": 40})
    less = [e for e in found if e.relation == "less_protective"]
    assert [(e.kind, e.params, e.source) for e in less] == [
        ("p_percent", {"p": pytest.approx(50.0)}, "seed 003 D")
    ]
    # p/100 = 100/40 - 1 = 1.5 for the covering rule: p = 150 is not a p%-rule the API takes
    assert not [e for e in found if e.relation == "more_protective"]


@pytest.mark.parametrize("k", [50, 50.000001, 60, 75, 90, 99.5])
def test_no_less_protective_p_for_k1_from_50(k):
    found = conversions.equivalents("dominance", {"n": 1, "k": k})
    assert not [e for e in found if e.relation == "less_protective"]


def test_covering_rule_kept_for_one_k():
    # (1,75): the existing more protective p/100 = 100/75 - 1 (seed 003 Table 1: 33.3%)
    found = conversions.equivalents("dominance", {"n": 1, "k": 75})
    assert [(e.params["p"], e.relation) for e in found] == [
        (pytest.approx(100 / 3), "more_protective")
    ]


def test_two_k_unchanged():
    found = conversions.equivalents("dominance", {"n": 2, "k": 80})
    assert [(e.params["p"], e.relation, e.source) for e in found] == [
        (
            pytest.approx(25.0),
            "less_protective",
            "seed 000 How to obtain the p parameter (proof A)",
        ),
        (pytest.approx(50.0), "more_protective", "seed 003 D"),
    ]


# --------------------------------------------------------------------------- the direction


@settings(max_examples=400, deadline=None)
@given(
    values=st.lists(st.integers(0, 10_000).map(float), min_size=1, max_size=12),
    k1=st.floats(100 / 3 + 0.01, 49.99),
)
def test_p_percent_sensitive_implies_one_k_sensitive(values, k1):
    """S^(1,k1) >= S^p% (seed 003 D): every cell the p%-rule flags, (1,k1) flags too."""
    p = conversions.p_from_1k(k1)
    assert 0 < p < 100
    p_fires, s_p, total = fires(PPercent(p), values)
    if p_fires and s_p > 1e-9 * max(1.0, total):  # leave floating-point ties aside
        assert fires(Dominance(1, k1), values)[0]


def test_one_k_flags_cells_the_p_percent_rule_does_not():
    # z1 = 41 > 40: sensitive under (1,40); with z2 = 1 the p = 50 measure is
    # 3 * 41 + 2 * 1 - 200 < 0: safe. The p%-rule is the less protective of the two.
    values = [41.0] + [1.0] * 59
    assert fires(Dominance(1, 40), values)[0]
    assert not fires(PPercent(50), values)[0]


# --------------------------------------------------------------------------- the route


def convert(client, rule):
    response = client.post("/v1/conversions", json={"rule": rule})
    assert response.status_code == 200, response.text
    return response.json()["equivalents"]


def test_route_one_k_40(client):
    found = convert(client, {"type": "dominance", "n": 1, "k": 40})
    assert found == [
        {
            "rule": {"type": "p_percent", "p": 50.0, "c": 1},
            "relation": "less_protective",
            "source": "seed 003 D",
        }
    ]


@pytest.mark.parametrize("k", [50, 75])
def test_route_one_k_from_50_has_no_less_protective_p(client, k):
    found = convert(client, {"type": "dominance", "n": 1, "k": k})
    assert not [e for e in found if e["relation"] == "less_protective"]


def test_route_one_k_75_keeps_the_covering_rule(client):
    found = convert(client, {"type": "dominance", "n": 1, "k": 75})
    assert [(e["rule"]["type"], e["relation"], e["source"]) for e in found] == [
        ("p_percent", "more_protective", "seed 003 D")
    ]
    assert found[0]["rule"]["p"] == pytest.approx(100 / 3)
