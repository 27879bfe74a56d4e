"""Rule profiles held by the service: named rule sets whose parameters never leave it
(seed 000: "it is absolutely essential to keep the parameters of a concentration rule
confidential"; seed 003 B.1.e)."""

from __future__ import annotations

import json

import pytest

from service.config import ConfigError, Settings

# Unusual numbers, so that finding them in a reply cannot be a coincidence.
SECRET_P = 17.5
SECRET_N, SECRET_K = 3, 87.25
SECRET_RULES = {
    "rules": [
        {"type": "p_percent", "p": SECRET_P},
        {"type": "dominance", "n": SECRET_N, "k": SECRET_K},
    ],
    "frequency_range": 7.75,
}
SECRET_TEXTS = ["17.5", "87.25", "7.75"]

CELLS = [
    # 1000, 50 and 17 x 10: X = 1220, R = X - x1 - x2 = 170.
    # p = 17.5: S = 1000 - 100/17.5 * 170 = 28.57 > 0 -> unsafe (p = 10 would say safe);
    # (3, 87.25): S = 1060 - 87.25/12.75 * 160 = -34.9 -> does not fire
    {"key": ["p fires"], "contributions": [{"value": v} for v in (1000, 50, *[10] * 17)]},
    # (3, 87.25): S = 90 - 87.25/12.75 * 10 = 21.57 > 0 -> unsafe (k = 90 would say safe)
    {"key": ["dominance fires"], "contributions": [{"value": v} for v in (50, 30, 10, 10)]},
    # p: S = 1000 - 5.714 * 400 < 0;  (3,k): 1800 < 0.8725 * 2200 = 1919.5 -> safe
    {"key": ["safe"], "summary": {"total": 2200, "count": 5, "largest": [1000, 500, 300]}},
    {"key": ["empty"], "contributions": []},
]


def write_profiles(tmp_path, profiles: dict, name: str = "profiles.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"profiles": profiles}))
    return path


@pytest.fixture
def profile_settings(tmp_path) -> Settings:
    path = write_profiles(
        tmp_path,
        {
            "secret": {"rules": SECRET_RULES, "disclose_measures": False},
            "open": {"rules": SECRET_RULES, "disclose_measures": True},
            "default": {"rules": SECRET_RULES},
        },
    )
    return Settings.from_env({"SDC_PROFILES": str(path)})


@pytest.fixture
def profile_client(make_client, profile_settings):
    return make_client(
        profiles=profile_settings.profiles, profiles_path=profile_settings.profiles_path
    )


def by_profile(client, name: str):
    response = client.post("/v1/sensitivity", json={"cells": CELLS, "profile": name})
    assert response.status_code == 200, response.text
    return response


def by_rules(client):
    response = client.post("/v1/sensitivity", json={"cells": CELLS, "rules": SECRET_RULES})
    assert response.status_code == 200, response.text
    return response.json()


# --------------------------------------------------------------------------- loading


def test_profiles_are_loaded_from_the_file(profile_settings):
    assert set(profile_settings.profiles) == {"secret", "open", "default"}
    assert profile_settings.profiles["secret"].disclose_measures is False
    assert profile_settings.profiles["open"].disclose_measures is True


def test_disclose_measures_defaults_to_false(profile_settings):
    assert profile_settings.profiles["default"].disclose_measures is False


def test_readyz_counts_the_profiles(profile_client):
    response = profile_client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["profiles"] == 3


def test_no_profiles_setting_means_no_profiles():
    assert Settings.from_env({}).profiles == {}
    assert Settings.from_env({"SDC_PROFILES": ""}).profiles == {}


# --------------------------------------------------------------------------- verdicts


def test_profile_gives_the_same_verdicts_as_its_rules(profile_client):
    direct = by_rules(profile_client)
    named = by_profile(profile_client, "secret").json()
    assert [(c["key"], c["status"], c["sensitive"]) for c in named["cells"]] == [
        (c["key"], c["status"], c["sensitive"]) for c in direct["cells"]
    ]
    assert [c["status"] for c in named["cells"]] == ["unsafe", "unsafe", "safe", "empty"]
    assert named["summary"] == direct["summary"] == {"cells": 4, "sensitive": 2, "empty": 1}
    assert named["profile"] == "secret"


def test_profile_reply_keeps_totals_and_counts(profile_client):
    named = by_profile(profile_client, "secret").json()
    assert [(c["total"], c["count"]) for c in named["cells"]] == [
        (1220.0, 19.0),
        (100.0, 4.0),
        (2200.0, 5.0),
        (0, 0),
    ]


# --------------------------------------------------------------------------- confidentiality


def test_profile_reply_does_not_contain_the_parameters(profile_client):
    text = by_profile(profile_client, "secret").text
    for secret in SECRET_TEXTS:
        assert secret not in text


def test_profile_reply_has_no_measures_or_protection_levels(profile_client):
    for cell in by_profile(profile_client, "secret").json()["cells"]:
        assert cell.get("measures") is None
        assert cell.get("upper_protection") is None
        assert cell.get("lower_protection") is None


def test_profile_fired_labels_carry_no_parameters(profile_client):
    cells = by_profile(profile_client, "secret").json()["cells"]
    assert cells[0]["fired"] == ["p_percent"]
    assert cells[1]["fired"] == ["dominance"]
    for cell in cells:
        for label in cell["fired"]:
            assert "(" not in label and "=" not in label
            assert str(SECRET_N) not in label


def test_sending_the_rules_directly_does_label_with_parameters(profile_client):
    # the contrast to the test above: the caller knows its own parameters
    direct = by_rules(profile_client)
    assert direct["cells"][0]["fired"] == ["p_percent(p=17.5,c=1)"]


def test_profile_with_disclose_measures_returns_them(profile_client):
    named = by_profile(profile_client, "open").json()
    direct = by_rules(profile_client)
    for mine, theirs in zip(named["cells"], direct["cells"]):
        assert mine["measures"] is not None
        # same S values; labels are the rule types (no parameters)
        assert list(mine["measures"]) == ["p_percent", "dominance"]
        for s_profile, s_direct in zip(mine["measures"].values(), theirs["measures"].values()):
            assert s_profile == (None if s_direct is None else pytest.approx(s_direct))
        assert mine["upper_protection"] == pytest.approx(theirs["upper_protection"])
    # p fires: S = 1000 - 100/17.5 * 170 = 28.571...
    assert named["cells"][0]["measures"]["p_percent"] == pytest.approx(1000 - 100 / 17.5 * 170)


def test_unknown_profile_names_the_field(profile_client):
    response = profile_client.post("/v1/sensitivity", json={"cells": CELLS, "profile": "Secret"})
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["field"] == "profile"


def test_error_reply_under_a_profile_does_not_contain_the_parameters(profile_client):
    # a negative contribution is refused; the message must not reveal the rule set
    body = {"cells": [{"key": ["neg"], "contributions": [{"value": -1}]}], "profile": "secret"}
    response = profile_client.post("/v1/sensitivity", json=body)
    assert response.status_code == 422
    for secret in SECRET_TEXTS:
        assert secret not in response.text


# --------------------------------------------------------------------------- bad files


def test_invalid_profile_file_raises_config_error_without_the_values(tmp_path):
    path = write_profiles(
        tmp_path, {"bad": {"rules": {"rules": [{"type": "p_percent", "p": 117.5}]}}}
    )
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SDC_PROFILES": str(path)})
    message = str(caught.value)
    assert "117.5" not in message
    assert "profiles.bad.rules.rules.0" in message  # the field is named


def test_invalid_pq_profile_does_not_reveal_p_and_q(tmp_path):
    path = write_profiles(
        tmp_path, {"bad": {"rules": {"rules": [{"type": "pq", "p": 17.5, "q": 12.25}]}}}
    )  # q < p
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SDC_PROFILES": str(path)})
    message = str(caught.value)
    assert "17.5" not in message
    assert "12.25" not in message


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"profiles": {"x": {"rules": {"rules": []}}}}),
        json.dumps(
            {
                "profiles": {
                    "x": {"rules": {"rules": [{"type": "p_percent", "p": 10}]}, "surprise": True}
                }
            }
        ),
        json.dumps({"profiles": {"x": {"rules": {"rules": [{"type": "magic"}]}}}}),
        json.dumps({"profiles": []}),
        json.dumps({}),
    ],
    ids=[
        "not json",
        "no rules",
        "extra field",
        "unknown rule",
        "profiles not a mapping",
        "no profiles",
    ],
)
def test_malformed_profile_files_raise_config_error(tmp_path, content):
    path = tmp_path / "profiles.json"
    path.write_text(content)
    with pytest.raises(ConfigError):
        Settings.from_env({"SDC_PROFILES": str(path)})


def test_missing_profile_file_raises_config_error(tmp_path):
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SDC_PROFILES": str(tmp_path / "nowhere.json")})
    assert "nowhere.json" in str(caught.value)


def test_profile_path_that_is_a_directory_raises_config_error(tmp_path):
    with pytest.raises(ConfigError):
        Settings.from_env({"SDC_PROFILES": str(tmp_path)})
