"""The wire contract: every /v1 route's reply, for every example its OpenAPI document
gives and for both roles, is an instance of the route's reply model and carries nothing
the model does not describe; every error reply is an ``ErrorReply``.

The pipeline builds replies as plain dicts (a model object per cell would cost more than
the online filter's work), so this is what holds them to the models.
"""

from __future__ import annotations

import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel

from schemas.errors import ErrorReply
from schemas.profiles import Profile
from service.api import v1
from service.app import create_app
from service.config import Settings
from tests.callers import ANALYST_KEY, FILTER_KEY

ROUTES = {route.path: route for route in v1.router.routes if isinstance(route, APIRoute)}


def _examples() -> list:
    """(path, example number, body) of every example of every /v1 request body."""
    spec = create_app(Settings()).openapi()
    out = []
    for path in ROUTES:
        schema = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        name = schema["schema"]["$ref"].rsplit("/", 1)[1]
        for k, example in enumerate(spec["components"]["schemas"][name]["examples"]):
            out.append(pytest.param(path, example, id=f"{path}#{k}"))
    return out


EXAMPLES = _examples()


def test_every_route_has_an_example_and_a_reply_model():
    assert {p.values[0] for p in EXAMPLES} == set(ROUTES) and len(ROUTES) == len(v1.ENDPOINTS)
    for route in ROUTES.values():
        assert issubclass(route.response_model, BaseModel), route.path


def assert_conforms(model: type[BaseModel], reply: dict) -> None:
    """``reply`` is valid for ``model`` and has no field the model leaves out (read back
    with only the fields the reply set, it is the reply)."""
    parsed = model.model_validate(reply)
    assert parsed.model_dump(mode="json", exclude_unset=True) == reply


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """An app with both roles' keys, and a profile holding the filter example's policy so
    that the filter role can send that example by the profile's name."""
    from fastapi.testclient import TestClient

    from tests.callers import write_keys

    keys = write_keys(
        tmp_path_factory.mktemp("keys") / "keys.json",
        (FILTER_KEY, "filter", "hmac-sha256"),
        (ANALYST_KEY, "analyst", "sha256"),
    )
    policy = next(p.values[1]["policy"] for p in EXAMPLES if p.values[0] == "/v1/filter")
    settings = Settings(
        api_keys_file=keys,
        profiles={
            "example": Profile.model_validate(policy),
            "noisy": Profile.model_validate(NOISY_PROFILE),
        },
        noise_secret=b"contract-test-noise-secret",
    )
    return TestClient(create_app(settings))


#: For the filter role's /v1/noise: the example's rules and noise level as a profile (the
#: filter role may not send a noise level of its own).
NOISY_PROFILE = {
    "rules": {"rules": [{"type": "p_percent", "p": 10}]},
    "filter": {
        "statistical": {
            "approach": "noise",
            "d": 0.1,
            "jitter": 0.02,
            "ratio_range": [0.85, 1.15],
            "min_weighted_count": 3,
            "p": 10,
        }
    },
}


@pytest.mark.parametrize("role", ["analyst", "filter"])
@pytest.mark.parametrize("path,example", EXAMPLES)
def test_replies_conform_to_the_reply_model(secured, path, example, role):
    key = ANALYST_KEY if role == "analyst" else FILTER_KEY
    if role == "filter" and "policy" in example:
        # The filter role names a profile: the one that holds the example's policy.
        example = {**{k: v for k, v in example.items() if k != "policy"}, "profile": "example"}
    if role == "filter" and "noise" in example:
        example = {
            **{k: v for k, v in example.items() if k not in ("noise", "rules")},
            "profile": "noisy",
        }
    r = secured.post(path, json=example, headers={"X-API-Key": key})
    if role == "filter" and path == "/v1/conversions":
        assert r.status_code == 403  # analysts only
        assert_conforms(ErrorReply, r.json())
        return
    assert r.status_code == 200, r.text
    assert_conforms(ROUTES[path].response_model, r.json())


@pytest.mark.parametrize("path,example", EXAMPLES)
def test_error_replies_conform_to_the_error_model(secured, make_client, path, example):
    """422 (a body that is no request), 401 (no key) and 413 (more cells than the
    service's limit) are ``ErrorReply`` objects, the 422 and the 413 naming a field."""
    invalid = secured.post(path, json={}, headers={"X-API-Key": ANALYST_KEY})
    assert invalid.status_code == 422
    assert_conforms(ErrorReply, invalid.json())
    assert invalid.json()["detail"][0]["field"]
    unauthorized = secured.post(path, json=example)
    assert unauthorized.status_code == 401
    assert_conforms(ErrorReply, unauthorized.json())
    if "cells" in example:
        too_large = make_client(max_cells=1).post(path, json=example)
        assert too_large.status_code == 413
        assert_conforms(ErrorReply, too_large.json())
        assert too_large.json()["detail"][0]["field"] == "cells"


def test_input_errors_conform_to_the_error_model(secured):
    """A core error in the request's terms (pipeline.errors) names the field, the cell
    and its key."""
    body = {
        "cells": [
            {"key": ["a"], "contributions": [{"value": 3}]},
            {"key": ["a"], "contributions": [{"value": 4}]},
        ],
        "rules": {"rules": [{"type": "frequency", "n": 3}]},
    }
    r = secured.post("/v1/sensitivity", json=body, headers={"X-API-Key": ANALYST_KEY})
    assert r.status_code == 422
    assert_conforms(ErrorReply, r.json())
    assert r.json()["detail"] == [
        {
            "field": "key",
            "cell": 1,
            "key": ["a"],
            "message": "duplicate cell key: the same key as cell 0",
        }
    ]


def test_refusals_before_the_route_are_documented():
    """Every /v1 operation documents the statuses the service's layers in front of it
    answer with (401, 403, 408, 431, 503), and those with cells 429 (the filter role's
    budget), each as an ``ErrorReply``."""
    spec = create_app(Settings()).openapi()
    for path in ROUTES:
        responses = spec["paths"][path]["post"]["responses"]
        expected = {"401", "403", "408", "431", "503"} | (
            {"429"} if path != "/v1/conversions" else set()
        )
        assert expected <= set(responses), path
        assert ("429" in responses) == (path != "/v1/conversions"), path
        for status in expected:
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorReply"}
