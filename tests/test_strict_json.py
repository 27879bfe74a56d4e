"""Loose JSON refused (issue 14, part 8): numbers must be JSON numbers (not ``"50"`` nor
``true``), integers have no fraction, booleans are ``true`` or ``false``; a key given twice
in one object is a 422 naming it, at any depth, and the check costs a count on the
bodies that repeat none (service/api/body.py)."""

from __future__ import annotations

import json

import orjson
import pytest

from schemas.filter import FilterRequest
from schemas.profiles import Profile
from schemas.sensitivity import SensitivityRequest
from service.api import body as body_module
from service.api import repeated_keys
from service.app import create_app
from service.config import Settings
from tests.generate import FILTER_QUERY, filter_answer

RULES = {"rules": [{"type": "p_percent", "p": 10}]}
SENSITIVITY = {
    "rules": RULES,
    "cells": [
        {
            "key": ["Mining", "North"],
            "contributions": [{"value": 50000, "holding": "A"}, {"value": 49000}, {"value": 1000}],
        },
        {
            "key": ["Mining", "South"],
            "summary": {"total": 110000, "count": 3, "largest": [52000, 50000]},
        },
    ],
}
FILTER = {
    "policy": {"rules": RULES, "filter": {"statistical": {"approach": "refuse"}}},
    "query": {"variables": ["industry", "county"], "area_population": {"county": 9000}},
    "cells": [
        {"key": ["Mining", "Adams"], "count": 12},
        {"key": ["Retail", "Adams"], "microdata": {"value": [900, 80, 20]}},
    ],
}
FREQUENCY = {
    "dimensions": [{"name": "area", "codes": ["a", "b"]}],
    "cells": [{"key": ["a"], "count": 4}, {"key": ["b"], "count": 7}],
    "rules": {"threshold": {"t": 3}},
}


def post(client, route: str, raw: bytes):
    return client.post(route, content=raw, headers={"content-type": "application/json"})


def only_error(r) -> dict:
    assert r.status_code == 422, r.text
    (detail,) = r.json()["detail"]
    return detail


# --- numbers are JSON numbers ----------------------------------------------------------------


def with_value(body: dict, path: tuple, value) -> bytes:
    """``body`` as JSON with the value at ``path`` replaced by ``value``."""
    copy = json.loads(json.dumps(body))
    node = copy
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return json.dumps(copy).encode()


@pytest.mark.parametrize(
    "route, body, path, field, cell, message",
    [
        (
            "/v1/sensitivity",
            SENSITIVITY,
            ("cells", 0, "contributions", 1, "value"),
            "contributions.1.value",
            0,
            "Input should be a valid number",
        ),
        (
            "/v1/sensitivity",
            SENSITIVITY,
            ("cells", 1, "summary", "count"),
            "summary.count",
            1,
            "Input should be a valid number",
        ),
        (
            "/v1/sensitivity",
            SENSITIVITY,
            ("rules", "rules", 0, "p"),
            "rules.rules.0.p_percent.p",
            None,
            "Input should be a valid number",
        ),
        (
            "/v1/filter",
            FILTER,
            ("cells", 0, "count"),
            "count",
            0,
            "Input should be a valid integer",
        ),
        (
            "/v1/filter",
            FILTER,
            ("cells", 1, "microdata", "value", 2),
            "microdata.value.2",
            1,
            "Input should be a valid number",
        ),
        (
            "/v1/filter",
            FILTER,
            ("query", "area_population", "county"),
            "query.area_population.county",
            None,
            "Input should be a valid number",
        ),
        (
            "/v1/frequency/sensitivity",
            FREQUENCY,
            ("cells", 1, "count"),
            "count",
            1,
            "Input should be a valid integer",
        ),
    ],
)
@pytest.mark.parametrize("loose", ["98765", True])
def test_strings_and_booleans_are_not_numbers(
    client, route, body, path, field, cell, message, loose
):
    detail = only_error(post(client, route, with_value(body, path, loose)))
    assert (detail["field"], detail["cell"], detail["message"]) == (field, cell, message)
    if cell is not None:
        assert detail["key"] == body["cells"][cell]["key"]
    assert "98765" not in json.dumps(detail)  # the value sent is never echoed


def test_integers_are_numbers_but_numbers_with_a_fraction_are_not_integers(client):
    # An integer where a number is expected: as before.
    assert post(client, "/v1/sensitivity", json.dumps(SENSITIVITY).encode()).status_code == 200
    # 12.0 for a count: integers are written without a fraction.
    detail = only_error(post(client, "/v1/filter", with_value(FILTER, ("cells", 0, "count"), 12.0)))
    assert (detail["field"], detail["cell"]) == ("count", 0)
    detail = only_error(
        post(
            client,
            "/v1/conversions",
            json.dumps({"rule": {"type": "dominance", "n": 2.0, "k": 80}}).encode(),
        )
    )
    assert detail["field"] == "rule.dominance.n"


def test_booleans_are_true_or_false(client):
    raw = with_value(SENSITIVITY, ("cells", 0, "contributions", 2, "waiver"), 1)
    detail = only_error(post(client, "/v1/sensitivity", raw))
    assert (detail["field"], detail["cell"]) == ("contributions.2.waiver", 0)
    assert detail["message"] == "Input should be a valid boolean"


def test_profiles_are_strict_too():
    """A profile file with a string for a number stops the service at start (the same
    models); one built in code may still pass a list for the ratio range."""
    with pytest.raises(ValueError, match="valid number"):
        Profile.model_validate_json(
            json.dumps({"rules": {"rules": [{"type": "p_percent", "p": "10"}]}})
        )
    profile = Profile.model_validate(
        {
            "rules": RULES,
            "filter": {
                "statistical": {
                    "approach": "noise",
                    "d": 0.1,
                    "ratio_range": [0.8, 1.2],
                    "min_weighted_count": 3,
                    "p": 10,
                }
            },
        }
    )
    assert profile.filter.statistical.ratio_range == (0.8, 1.2)


# --- a key given twice -----------------------------------------------------------------------


def test_rules_sent_twice_is_refused_not_last_wins(client):
    raw = (
        b'{"cells": '
        + orjson.dumps(SENSITIVITY["cells"])
        + b', "rules": {"rules": [{"type": "p_percent", "p": 90}]}, "rules": '
        + orjson.dumps(RULES)
        + b"}"
    )
    detail = only_error(post(client, "/v1/sensitivity", raw))
    assert detail == {
        "field": "rules",
        "cell": None,
        "key": None,
        "message": "the field is given twice in one JSON object; give it once",
    }


@pytest.mark.parametrize(
    "route, raw, field, cell",
    [
        # in a contribution of a cell: the cell is named by its index and key
        (
            "/v1/sensitivity",
            b'{"rules": {"rules": [{"type": "p_percent", "p": 10}]}, "cells": ['
            b'{"key": ["a"], "contributions": [{"value": 1}]}, {"key": ["b"], "contributions": '
            b'[{"value": 5}, {"value": 4, "holding": "H", "value": 40}]}]}',
            "contributions.1.value",
            1,
        ),
        # in a rule, a member of a union of models
        (
            "/v1/sensitivity",
            b'{"rules": {"rules": [{"type": "p_percent", "p": 10, "p": 50}]}, '
            b'"cells": [{"key": ["a"], "contributions": [{"value": 1}]}]}',
            "rules.rules.0.p",
            None,
        ),
        # in a dict of the filter's query, after whitespace before the colon
        (
            "/v1/filter",
            b'{"policy": {"filter": {"statistical": {"approach": "refuse"}}}, '
            b'"query": {"variables": ["v"], "area_population": {"v": 10, "v" : 20000}}, '
            b'"cells": [{"key": ["x"], "count": 5}]}',
            "query.area_population.v",
            None,
        ),
        # spelt with an escape: the same key to JSON
        (
            "/v1/filter",
            b'{"policy": {"filter": {"statistical": {"approach": "refuse"}}}, '
            b'"query": {"variables": ["v"]}, "cells": [{"key": ["x"], "count": 5, '
            b'"c\\u006funt": 6}]}',
            "count",
            0,
        ),
        # inside the value a repeated key throws away: the outer repetition is named
        (
            "/v1/filter",
            b'{"policy": {"filter": {"statistical": {"approach": "refuse"}}}, '
            b'"query": {"variables": ["v"]}, "cells": [{"key": ["x"], "microdata": '
            b'{"value": {"a": {"b": 1, "b": 2}}, "value": [3]}}]}',
            "microdata.value",
            0,
        ),
        # colons in strings force the exact count: still found
        (
            "/v1/frequency/sensitivity",
            b'{"dimensions": [{"name": "t", "codes": ["09:00", "10:00"]}],'
            b' "cells": [{"key": ["09:00"], "count": 4, "count": 1}],'
            b' "rules": {"threshold": {"t": 3}}}',
            "count",
            0,
        ),
    ],
)
def test_a_repeated_key_is_named_at_any_depth(client, route, raw, field, cell):
    json.loads(raw)  # valid JSON: only the repetition is wrong
    detail = only_error(post(client, route, raw))
    assert (detail["field"], detail["cell"]) == (field, cell)
    assert detail["message"] == "the field is given twice in one JSON object; give it once"


def test_colons_in_strings_are_not_repeated_keys(client):
    raw = (
        b'{"dimensions": [{"name": "t:1", "codes": ["09:00", "10:00"]}], "cells": '
        b'[{"key": ["09:00"], "count": 4}, {"key": ["10:00"], "count": 1}], '
        b'"rules": {"threshold": {"t": 3}}}'
    )
    assert post(client, "/v1/frequency/sensitivity", raw).status_code == 200


def no_repeats(raw: bytes, validated) -> bool:
    return repeated_keys.no_repeated_keys(
        raw, repeated_keys.keys_read([validated], type(validated))
    )


def example_bodies():
    """Every documented request model with each of its OpenAPI examples."""
    create_app(Settings())  # the routes register their models in body.DOCUMENTED
    for model in body_module.DOCUMENTED.values():
        for example in model.model_json_schema().get("examples", []):
            yield pytest.param(model, example, id=model.__name__)


@pytest.mark.parametrize("model, example", list(example_bodies()))
def test_keys_read_equal_the_keys_sent(model, example):
    """The count validation read is exact on every documented model: it equals the colons
    of a body without colons in its strings (the fast path), and one key more is seen."""
    raw = orjson.dumps(example)
    assert b":" not in b"".join(repeated_keys.STRING.findall(raw))
    validated = model.model_validate_json(raw)
    assert repeated_keys.keys_read([validated], model) == raw.count(b":")
    assert no_repeats(raw, validated)
    twice = raw[:-1] + b", " + raw[1:]  # every top-level key twice
    assert not no_repeats(twice, model.model_validate_json(twice))


def test_fast_path_on_the_filter_shapes():
    """The online filter's answers (the filter benchmark's, tests/generate.py) are proven
    free of repeated keys by the count alone, as objects or as microdata columns."""
    for form in ("microdata", "objects", "counts"):
        raw = orjson.dumps(
            {"profile": "p", "query": FILTER_QUERY, "cells": filter_answer(50, 1, form)}
        )
        validated = FilterRequest.model_validate_json(raw)
        assert repeated_keys.keys_read([validated], FilterRequest) == raw.count(b":")


def test_one_repeat_among_thousands_of_objects():
    cells = [
        {"key": [f"c{i}"], "contributions": [{"value": i}, {"value": 1, "weight": 2}]}
        for i in range(2000)
    ]
    raw = orjson.dumps({"rules": RULES, "cells": cells})
    assert no_repeats(raw, SensitivityRequest.model_validate_json(raw))
    repeated = raw.replace(b'{"value":1,"weight":2}', b'{"value":1,"weight":2,"weight":3}', 1)
    assert not no_repeats(repeated, SensitivityRequest.model_validate_json(repeated))


def test_a_type_the_count_cannot_place_is_an_error():
    from typing import Any

    with pytest.raises(TypeError, match="cannot count"):
        repeated_keys._shape(Any)
    with pytest.raises(TypeError, match="cannot count"):
        repeated_keys._shape(list[Profile | None])  # objects in a list are never null
    assert repeated_keys._shape(list[str | None]) is None
    assert repeated_keys._shape(dict[str, list[Profile]]) == ("dict", ("list", ("model", Profile)))
