"""The online query filter (service.sdc.query_filter, POST /v1/filter; seed 003 C)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from schemas.profiles import Profile
from service.config import ConfigError, Settings
from service.sdc import magnitudes, noise
from service.sdc import query_filter as qf

SECRET = b"filter-test-secret-0123456789"

# --- query filter --------------------------------------------------------------------------

RULES = qf.QueryRules(
    max_dimensions=2,
    min_population=1000,
    min_area_population={"county": 5000},
    forbidden_combinations=(frozenset({"age", "occupation"}),),
)


@pytest.mark.parametrize(
    "query, code",
    [
        (qf.Query(("industry", "county"), 2000, {"county": 5000}), None),
        (qf.Query(("industry", "county", "size"), 2000, {"county": 9000}), "too_many_variables"),
        (qf.Query(("age", "occupation"), 2000), "forbidden_combination"),
        (qf.Query(("age",), 2000), None),  # half a combination
        (qf.Query(("industry",), 999), "population_too_small"),
        (qf.Query(("industry",), None), "population_too_small"),  # not given: not shown safe
        (qf.Query(("county",), 2000, {"county": 4999}), "area_too_small"),
        (qf.Query(("county",), 2000), "area_too_small"),
        (qf.Query(("state",), 2000), None),  # no limit on state
    ],
)
def test_query_filter_rules(query, code):
    refusal = qf.check_query(query, RULES)
    assert (refusal.code if refusal else None) == code
    if refusal:
        assert refusal.stage == "query"
        assert "ask" in refusal.message or "choose" in refusal.message or "drop" in refusal.message
        assert "5000" not in refusal.message and "1000" not in refusal.message


def test_query_filter_without_rules_passes_everything():
    assert qf.check_query(qf.Query(tuple("abcdefgh")), qf.QueryRules()) is None


# --- ARMS criteria, hand-checked ------------------------------------------------------------

NOISE = qf.NoiseRules(
    d=0.1, jitter=0.0, ratio_low=0.95, ratio_high=1.08, min_weighted_count=3, p=10
)


def _magnitudes(cells: list[list[float]]) -> magnitudes.Magnitudes:
    cell = np.repeat(np.arange(len(cells)), [len(c) for c in cells])
    return magnitudes.from_contributions(len(cells), cell, np.concatenate(cells), depth=2)


def test_noise_criteria_by_hand():
    # Cell 0: 900, 80, 20: U = 0.1 * 900 - 20 = 70; noise 50 < 70 -> p_percent_noise.
    # Cell 1: the same with noise 90 >= 70 -> published; ratio 1.09 > 1.08 -> noise_ratio.
    # Cell 2: 500, 400, 300, 200: U = 50 - 500 < 0, ratio 0.96: published.
    # Cell 3: 60, 40: weighted count 2 < 3 -> weighted_count; U = 6 - 0 = 6, noise 7 >= 6.
    m = _magnitudes([[900, 80, 20], [900, 80, 20], [500, 400, 300, 200], [60, 40]])
    cells = qf.NoisyCells(
        true_value=np.array([1000.0, 1000, 1400, 100]),
        noisy_value=np.array([1050.0, 1090, 1400 * 0.96, 107]),
        weighted_count=np.array([3.0, 3, 4, 2]),
        noise_left=np.array([50.0, 90, 1400 * 0.04, 7]),
        # Cell 3's second, 40, has level 4 - 0 = 4 against the first: 5 left >= 4.
        noise_left_to_largest=np.array([90.0, 90, 1400 * 0.04, 5]),
    )
    got = qf.noise_criteria(cells, m, NOISE)
    assert got["p_percent_noise"].tolist() == [True, False, False, False]
    # With 3 left to the first, the second (level 4) is not hidden: cell 3 stops.
    cells = dataclasses.replace(cells, noise_left_to_largest=np.array([90.0, 90, 56, 3]))
    assert qf.noise_criteria(cells, m, NOISE)["p_percent_noise"].tolist() == [
        True,
        False,
        False,
        True,
    ]
    assert got["noise_ratio"].tolist() == [False, True, False, False]
    assert got["weighted_count"].tolist() == [False, False, False, True]


def test_zero_cell_has_ratio_one():
    m = _magnitudes([[0.0, 0.0, 0.0]])
    cells = qf.NoisyCells(np.zeros(1), np.zeros(1), np.array([3.0]), np.zeros(1), np.zeros(1))
    got = qf.noise_criteria(cells, m, NOISE)
    assert not any(v.any() for v in got.values())


def test_add_noise_tabulates_weighted_noisy_microdata():
    rules = qf.NoiseRules(0.1, 0.02, 0.5, 1.5, 0, 10)
    cell = np.array([0, 0, 1])
    value = np.array([100.0, 50.0, 10.0])
    weight = np.array([2.0, 1.0, 3.0])
    ent, est = ["A", "B", "A"], ["a1", "b1", "a2"]
    got = qf.add_noise(2, cell, value, weight, ent, est, SECRET, rules)
    m = noise.multipliers(ent, est, SECRET, 0.1, 0.02)
    np.testing.assert_allclose(got.true_value, [250.0, 30.0])
    np.testing.assert_allclose(got.noisy_value, [200 * m[0] + 50 * m[1], 30 * m[2]])
    np.testing.assert_allclose(got.weighted_count, [3.0, 3.0])


def test_decide():
    assert qf.decide(np.array([False, False]), "refuse") == ("publish", None)
    assert qf.decide(np.array([False, True]), "refuse") == ("refuse", qf.SENSITIVE_CELLS)
    assert qf.decide(np.array([False, True]), "noise") == ("suppress", None)


# --- configuration --------------------------------------------------------------------------

NOISE_POLICY = {
    "approach": "noise",
    "d": 0.1,
    "jitter": 0.02,
    "ratio_range": [0.5, 1.5],
    "min_weighted_count": 3,
    "p": 10,
}


def test_noise_profile_needs_a_secret():
    profile = Profile.model_validate(
        {
            "rules": {"rules": [{"type": "frequency", "n": 3}]},
            "filter": {"statistical": NOISE_POLICY},
        }
    )
    with pytest.raises(ConfigError, match="SDC_NOISE_SECRET"):
        Settings(profiles={"online": profile})
    assert Settings(profiles={"online": profile}, noise_secret=SECRET).profiles


def test_noise_secret_from_environment_is_checked_and_never_printed(tmp_path):
    with pytest.raises(ConfigError, match="at least 16"):
        Settings.from_env({"SDC_NOISE_SECRET": "short"})
    s = Settings.from_env({"SDC_NOISE_SECRET": SECRET.decode()})
    assert s.noise_secret == SECRET
    assert SECRET.decode() not in repr(s)
    path = tmp_path / "noise-secret"
    path.write_text(SECRET.decode() + "\n")  # as a mounted Secret may end
    assert Settings.from_env({"SDC_NOISE_SECRET_FILE": str(path)}).noise_secret == SECRET
    path.write_text("REPLACE with: python -c 'import secrets; ...'")  # the template's
    with pytest.raises(ConfigError, match="white space"):
        Settings.from_env({"SDC_NOISE_SECRET_FILE": str(path)})
    with pytest.raises(ConfigError, match="not both"):
        Settings.from_env({"SDC_NOISE_SECRET_FILE": str(path), "SDC_NOISE_SECRET": "x" * 20})
    with pytest.raises(ConfigError, match="cannot read"):
        Settings.from_env({"SDC_NOISE_SECRET_FILE": str(tmp_path / "missing")})
