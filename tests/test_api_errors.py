"""Bad input gets a 4xx with an error payload naming the field (and the cell and its key
where a cell is concerned), never a 500."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

P10 = {"type": "p_percent", "p": 10}
RULES = {"rules": [P10]}
GOOD_CELL = {"key": ["good"], "contributions": [{"value": 50}, {"value": 30}, {"value": 20}]}


def request_with(*cells, rules=RULES) -> dict:
    return copy.deepcopy({"cells": [GOOD_CELL, *cells], "rules": rules})


def assert_error(response, status: int = 422, *, field=..., cell=..., key=...) -> dict:
    """The reply has the error shape; checks the first detail's field, cell and key when
    given (``...`` means: not checked)."""
    assert response.status_code == status, response.text
    reply = response.json()
    assert set(reply) == {"error", "detail"}
    assert reply["error"] == {413: "payload_too_large", 422: "invalid_request"}[status]
    assert reply["detail"], "detail must name at least one problem"
    first = reply["detail"][0]
    assert {"field", "cell", "key", "message"} <= set(first)
    assert isinstance(first["message"], str) and first["message"]
    if field is not ...:
        assert first["field"] == field, first
    if cell is not ...:
        assert first["cell"] == cell, first
    if key is not ...:
        assert first["key"] == key, first
    return first


def post_raw(client, body: bytes, path: str = "/v1/sensitivity"):
    return client.post(path, content=body, headers={"content-type": "application/json"})


# --------------------------------------------------------------------------- non-finite numbers


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_non_finite_contribution_value(client, literal):
    body = (
        b'{"cells": [{"key": ["good"], "contributions": [{"value": 1}]},'
        b' {"key": ["bad"], "contributions": [{"value": 2}, {"value": ' + literal + b"}]}],"
        b' "rules": {"rules": [{"type": "p_percent", "p": 10}]}}'
    )
    first = assert_error(post_raw(client, body), cell=1, key=["bad"])
    assert first["field"] == "contributions.1.value"


@pytest.mark.parametrize("field", ["total", "count"])
@pytest.mark.parametrize("literal", [b"NaN", b"Infinity"])
def test_non_finite_summary_numbers(client, field, literal):
    summary = {"total": 100, "count": 3, "largest": [50, 30]}
    text = json.dumps({"cells": [{"key": ["s"], "summary": summary}], "rules": RULES})
    body = text.replace(f'"{field}": {summary[field]}', f'"{field}": __X__').encode()
    body = body.replace(b"__X__", literal)
    assert_error(post_raw(client, body), field=f"summary.{field}", cell=0, key=["s"])


def test_non_finite_summary_largest(client):
    body = (
        b'{"cells": [{"key": ["s"], "summary": {"total": 100, "count": 3,'
        b' "largest": [Infinity, 30]}}], "rules": {"rules": [{"type": "p_percent", "p": 10}]}}'
    )
    first = assert_error(post_raw(client, body), cell=0, key=["s"])
    assert first["field"].startswith("summary.largest")


def test_non_finite_rule_parameter(client):
    body = (
        b'{"cells": [{"key": ["a"], "contributions": [{"value": 1}]}],'
        b' "rules": {"rules": [{"type": "p_percent", "p": NaN}]}}'
    )
    first = assert_error(post_raw(client, body), cell=None)
    assert first["field"].startswith("rules.rules.0")


def test_non_finite_weight(client):
    body = (
        b'{"cells": [{"key": ["w"], "contributions": [{"value": 1, "weight": Infinity}]}],'
        b' "rules": {"rules": [{"type": "p_percent", "p": 10}]}}'
    )
    first = assert_error(post_raw(client, body), cell=0, key=["w"])
    assert first["field"] == "contributions.0.weight"


def test_non_finite_conversion_parameter(client):
    response = post_raw(client, b'{"rule": {"type": "p_percent", "p": NaN}}', "/v1/conversions")
    first = assert_error(response)
    assert first["field"].startswith("rule")


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize(
    "contributions",
    [
        [{"value": 1e308}, {"value": 1e308}],  # X = 2e308 overflows
        [{"value": 1e308, "weight": 2}, {"value": 1}],  # X-hat = 2e308 + 1 overflows
    ],
    ids=["sum", "weighted"],
)
def test_overflowing_cell_total(client, contributions):
    response = client.post(
        "/v1/sensitivity", json=request_with({"key": ["huge"], "contributions": contributions})
    )
    assert_error(response, field="contributions.value", cell=1, key=["huge"])


def test_overflowing_shifted_summary_names_the_summary(client):
    # Y = X + N M = 1e308 + 3 * 1e308 overflows
    # (a summary before it: contributions shifted by 1e308 would overflow first)
    body = {
        "cells": [
            {"key": ["ok"], "summary": {"total": 10, "count": 1, "largest": [10]}},
            {"key": ["huge"], "summary": {"total": 1e308, "count": 3, "largest": [1e308, 0]}},
        ],
        "rules": {"rules": [P10], "negative_values": {"mode": "shift", "shift": 1e308}},
    }
    first = assert_error(client.post("/v1/sensitivity", json=body), cell=1, key=["huge"])
    assert first["field"].startswith("summary")


# --------------------------------------------------------------------------- summaries


def summary_cell(**summary) -> dict:
    return {"key": ["S", "1"], "summary": summary}


def test_summary_negative_count(client):
    response = client.post(
        "/v1/sensitivity",
        json=request_with(
            summary_cell(total=100, count=-1, largest=[]),
        ),
    )
    assert_error(response, field="summary.count", cell=1, key=["S", "1"])


def test_summary_largest_exceeding_total(client):
    response = client.post(
        "/v1/sensitivity", json=request_with(summary_cell(total=100, count=2, largest=[120, 10]))
    )
    assert_error(response, field="summary.largest", cell=1, key=["S", "1"])


def test_summary_largest_out_of_order(client):
    response = client.post(
        "/v1/sensitivity", json=request_with(summary_cell(total=100, count=3, largest=[20, 50]))
    )
    assert_error(response, field="summary.largest", cell=1, key=["S", "1"])


def test_summary_more_largest_than_count(client):
    response = client.post(
        "/v1/sensitivity", json=request_with(summary_cell(total=100, count=2, largest=[50, 30, 20]))
    )
    assert_error(response, field="summary.largest", cell=1, key=["S", "1"])


def test_summary_fewer_largest_than_the_rules_need(client):
    # (3,k)-dominance needs x1 + x2 + x3; the cell has 5 contributors and gives 2
    response = client.post(
        "/v1/sensitivity",
        json=request_with(
            summary_cell(total=100, count=5, largest=[50, 30]),
            rules={"rules": [{"type": "dominance", "n": 3, "k": 80}]},
        ),
    )
    assert_error(response, field="summary.largest", cell=1, key=["S", "1"])


def test_summary_error_in_a_mixed_table_names_the_request_position(client):
    body = {
        "cells": [
            {"key": ["s0"], "summary": {"total": 10, "count": 1, "largest": [10]}},
            {"key": ["c1"], "contributions": [{"value": 1}]},
            {"key": ["s2"], "summary": {"total": 10, "count": 2, "largest": [3, 9]}},
        ],
        "rules": RULES,
    }
    response = client.post("/v1/sensitivity", json=body)
    assert_error(response, field="summary.largest", cell=2, key=["s2"])


# --------------------------------------------------------------------------- cells and keys


def test_duplicate_cell_keys(client):
    body = {
        "cells": [
            {"key": ["A", "1"], "contributions": [{"value": 1}]},
            {"key": ["B", "1"], "contributions": [{"value": 2}]},
            {"key": ["A", "1"], "contributions": [{"value": 3}]},
        ],
        "rules": RULES,
    }
    assert_error(client.post("/v1/sensitivity", json=body), field="key", cell=2, key=["A", "1"])


def test_empty_cells_list(client):
    response = client.post("/v1/sensitivity", json={"cells": [], "rules": RULES})
    assert_error(response, field="cells", cell=None)


def test_cell_with_both_contributions_and_summary(client):
    response = client.post(
        "/v1/sensitivity",
        json=request_with(
            {
                "key": ["both"],
                "contributions": [{"value": 1}],
                "summary": {"total": 1, "count": 1, "largest": [1]},
            }
        ),
    )
    assert_error(response, cell=1, key=["both"])


def test_cell_with_neither_contributions_nor_summary(client):
    response = client.post("/v1/sensitivity", json=request_with({"key": ["none"]}))
    assert_error(response, cell=1, key=["none"])


@pytest.mark.parametrize(
    "key",
    ["A", [1, 2], [["A"]], None, {"a": "b"}],
    ids=["string", "ints", "nested", "null", "object"],
)
def test_key_not_a_list_of_strings(client, key):
    response = client.post(
        "/v1/sensitivity", json=request_with({"key": key, "contributions": [{"value": 1}]})
    )
    first = assert_error(response, cell=1, key=None)  # nothing to echo as a key
    assert first["field"].startswith("key")


def test_key_empty_list(client):
    response = client.post(
        "/v1/sensitivity", json=request_with({"key": [], "contributions": [{"value": 1}]})
    )
    assert_error(response, field="key", cell=1, key=[])


def test_missing_key(client):
    response = client.post("/v1/sensitivity", json=request_with({"contributions": [{"value": 1}]}))
    assert_error(response, field="key", cell=1, key=None)


@pytest.mark.parametrize("where", ["request", "cell", "contribution", "summary", "rule", "ruleset"])
def test_extra_unknown_field(client, where):
    body = request_with({"key": ["x"], "summary": {"total": 1, "count": 1, "largest": [1]}})
    target = {
        "request": body,
        "cell": body["cells"][0],
        "contribution": body["cells"][0]["contributions"][0],
        "summary": body["cells"][1]["summary"],
        "rule": body["rules"]["rules"][0],
        "ruleset": body["rules"],
    }[where]
    target["surprise"] = 1
    first = assert_error(client.post("/v1/sensitivity", json=body))
    assert first["field"].endswith("surprise")


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    "rule",
    [
        {"type": "p_percent", "p": 0},
        {"type": "p_percent", "p": 100},
        {"type": "p_percent", "p": -1},
        {"type": "p_percent", "p": 10, "c": 0},
        {"type": "dominance", "n": 1, "k": 100},
        {"type": "dominance", "n": 1, "k": 0},
        {"type": "dominance", "n": 0, "k": 80},
        {"type": "pq", "p": 20, "q": 10},  # q < p
        {"type": "pq", "p": 20, "q": 20},  # q == p
        {"type": "frequency", "n": 0},
        {"type": "request", "k": 100},
        {"type": "p_percent"},  # p missing
    ],
    ids=[
        "p=0",
        "p=100",
        "p=-1",
        "c=0",
        "k=100",
        "k=0",
        "n=0",
        "q<p",
        "q==p",
        "freq n=0",
        "request k=100",
        "p missing",
    ],
)
def test_invalid_rule_parameters(client, rule):
    response = client.post("/v1/sensitivity", json=request_with(rules={"rules": [rule]}))
    first = assert_error(response, cell=None, key=None)
    assert first["field"].startswith("rules.rules.0"), first


def test_unknown_rule_type(client):
    response = client.post(
        "/v1/sensitivity", json=request_with(rules={"rules": [{"type": "magic", "p": 10}]})
    )
    first = assert_error(response, cell=None)
    assert first["field"].startswith("rules.rules.0")


def test_no_rules_in_rule_set(client):
    response = client.post("/v1/sensitivity", json=request_with(rules={"rules": []}))
    assert_error(response, field="rules.rules", cell=None)


@pytest.mark.parametrize(
    "negative_values",
    [
        {"mode": "relaxed"},
        {"mode": "relaxed", "factor": 1},
        {"mode": "shift"},
        {"mode": "shift", "shift": 0},
        {"mode": "sideways"},
    ],
)
def test_invalid_negative_values_policy(client, negative_values):
    response = client.post(
        "/v1/sensitivity",
        json=request_with(rules={"rules": [P10], "negative_values": negative_values}),
    )
    first = assert_error(response, cell=None)
    assert first["field"].startswith("rules.negative_values")


def test_unknown_profile(client):
    response = client.post("/v1/sensitivity", json={"cells": [GOOD_CELL], "profile": "nope"})
    assert_error(response, field="profile", cell=None, key=None)


def test_both_rules_and_profile(client):
    response = client.post("/v1/sensitivity", json={**request_with(), "profile": "p"})
    assert_error(response, cell=None)


def test_neither_rules_nor_profile(client):
    response = client.post("/v1/sensitivity", json={"cells": [GOOD_CELL]})
    assert_error(response, cell=None)


# --------------------------------------------------------------------------- the body itself


@pytest.mark.parametrize("path", ["/v1/sensitivity", "/v1/conversions", "/v1/filter"])
@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b'{"cells": [', b"\xff\xfe"],
    ids=["garbage", "empty", "truncated", "not utf-8"],
)
def test_body_not_json(client, path, body):
    assert_error(post_raw(client, body, path), field=None, cell=None, key=None)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/sensitivity",
        "/v1/conversions",
        "/v1/audit",
        "/v1/suppress",
        "/v1/frequency/sensitivity",
    ],
)
def test_body_needs_a_json_content_type(client, path):
    response = client.post(path, content=b"{}", headers={"content-type": "text/plain"})
    detail = assert_error(response, field=None, cell=None, key=None)
    assert "Content-Type: application/json" in detail["message"]


@pytest.mark.parametrize("path", ["/v1/sensitivity", "/v1/conversions", "/v1/filter"])
@pytest.mark.parametrize("body", [b"[]", b'[{"cells": []}]', b'"text"', b"42", b"null"])
def test_body_json_but_not_an_object(client, path, body):
    assert_error(post_raw(client, body, path), cell=None, key=None)


def large_body(n_bytes: int) -> bytes:
    cells = [{"key": [f"cell{i}"], "contributions": [{"value": i}]} for i in range(n_bytes // 30)]
    body = json.dumps({"cells": cells, "rules": RULES}).encode()
    assert len(body) > n_bytes
    return body


def test_body_over_the_limit_by_content_length(make_client):
    client = make_client(max_body_bytes=1000)
    assert_error(post_raw(client, large_body(1000)), 413)


def test_body_over_the_limit_streamed_without_content_length(make_client):
    client = make_client(max_body_bytes=1000)
    body = large_body(1000)

    def chunks():
        for start in range(0, len(body), 100):
            yield body[start : start + 100]

    response = client.post(
        "/v1/sensitivity", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert_error(response, 413)


def test_body_under_the_limit_is_served(make_client):
    client = make_client(max_body_bytes=1000)
    response = client.post("/v1/sensitivity", json=request_with())
    assert response.status_code == 200


def test_too_many_cells(make_client):
    client = make_client(max_cells=2)
    body = {
        "cells": [{"key": [str(i)], "contributions": [{"value": 1}]} for i in range(3)],
        "rules": RULES,
    }
    assert_error(client.post("/v1/sensitivity", json=body), 413, field="cells", cell=None)


def test_as_many_cells_as_allowed(make_client):
    client = make_client(max_cells=2)
    body = {
        "cells": [{"key": [str(i)], "contributions": [{"value": 1}]} for i in range(2)],
        "rules": RULES,
    }
    assert client.post("/v1/sensitivity", json=body).status_code == 200


# --------------------------------------------------------------------------- conversions


@pytest.mark.parametrize(
    "body",
    [
        {"rule": {"type": "frequency", "n": 3}},  # not convertible
        {"rule": {"type": "p_percent", "p": 10}, "negative_factor": 1},
        {"rule": {"type": "p_percent", "p": 10}, "negative_factor": 0.5},
        {"rule": {"type": "dominance", "n": 2, "k": 100}},
        {"rule": {"type": "p_percent", "p": 10}, "extra": True},
        {},
    ],
)
def test_conversion_bad_input(client, body):
    first = assert_error(client.post("/v1/conversions", json=body), cell=None)
    assert first["field"] is None or isinstance(first["field"], str)


# --------------------------------------------------------------------------- known 500s


def test_conversion_pq_relaxed_beyond_the_q_limit_is_not_a_500(make_client):
    client = make_client(raise_server_exceptions=False)
    response = client.post(
        "/v1/conversions", json={"rule": {"type": "pq", "p": 10, "q": 5000}, "negative_factor": 4}
    )
    assert response.status_code in (200, 422), response.text


@pytest.mark.parametrize(
    "body",
    [
        {"rule": {"type": "dominance", "n": 2, "k": 99.99999999999999}, "negative_factor": 2},
        {"rule": {"type": "p_percent", "p": 5e-324}, "negative_factor": 4},
    ],
    ids=["k_f rounds to 100", "p_f underflows to 0"],
)
def test_conversion_relaxed_to_an_invalid_parameter_is_not_a_500(make_client, body):
    client = make_client(raise_server_exceptions=False)
    response = client.post("/v1/conversions", json=body)
    assert response.status_code in (200, 422), response.text


@pytest.mark.parametrize(
    "rule",
    [
        {"type": "dominance", "n": 1, "k": 99.99999999999999},
        {"type": "request", "k": 99.99999999999999},
        {"type": "p_percent", "p": 5e-324},
    ],
    ids=["dominance", "request", "p_percent"],
)
def test_relaxed_rule_with_extreme_parameter_is_not_a_500(make_client, rule):
    client = make_client(raise_server_exceptions=False)
    response = client.post(
        "/v1/sensitivity",
        json={
            "cells": [{"key": ["a"], "contributions": [{"value": 5}, {"value": -1}]}],
            "rules": {"rules": [rule], "negative_values": {"mode": "relaxed", "factor": 2}},
        },
    )
    assert response.status_code in (200, 422), response.text


def test_nul_in_a_code_is_refused(client):
    """numpy string arrays drop trailing NULs, so "A\\0" would merge with "A"."""
    response = client.post(
        "/v1/sensitivity", json=request_with({"key": ["good\x00"], "contributions": [{"value": 5}]})
    )
    detail = assert_error(response, field="key.0", cell=1)
    assert "NUL" in detail["message"]
    structure = {"dimensions": [{"name": "r", "leaves": ["A", "A\x00"], "total": "T"}]}
    cells = [{"key": ["A"], "value": 1}, {"key": ["A\x00"], "value": 2}]
    response = client.post("/v1/audit", json={"structure": structure, "cells": cells})
    assert response.status_code == 422 and "NUL" in response.text, response.text


@pytest.mark.parametrize("value", [b"1", b"-1"], ids=["reply", "error reply"])
def test_lone_surrogate_in_key_is_not_a_500(make_client, value):
    client = make_client(raise_server_exceptions=False)
    body = (
        b'{"cells": [{"key": ["\\ud800"], "contributions": [{"value": ' + value + b"}]}],"
        b' "rules": {"rules": [{"type": "p_percent", "p": 10}]}}'
    )
    response = post_raw(client, body)
    assert response.status_code in (200, 422), response.text


# --------------------------------------------------------------------------- fuzzing

VALID_SENSITIVITY = {
    "cells": [
        {
            "key": ["Mining", "North"],
            "contributions": [
                {"value": 50000, "holding": "A"},
                {"value": 49000, "waiver": True},
                {"value": 1000, "request": True},
            ],
        },
        {
            "key": ["Mining", "South"],
            "summary": {"total": 110000, "count": 3, "largest": [52000, 50000], "requested": 8000},
        },
        {
            "key": ["Mining", "East"],
            "contributions": [{"value": 10, "weight": 2.5}, {"value": -3, "weight": 1}],
        },
        {"key": ["Mining", "West"], "contributions": []},
    ],
    "rules": {
        "rules": [
            {"type": "p_percent", "p": 10, "c": 1},
            {"type": "pq", "p": 10, "q": 50},
            {"type": "dominance", "n": 2, "k": 85},
            {"type": "frequency", "n": 3},
            {"type": "request", "k": 70, "name": "req"},
        ],
        "weights": "sample",
        "negative_values": {"mode": "shift", "shift": 5},
        "zero_cells": "rules",
        "empty_cells": "safe",
        "frequency_range": 5,
    },
}
VALID_CONVERSIONS = [
    {"rule": {"type": "dominance", "n": 2, "k": 80}},
    {"rule": {"type": "p_percent", "p": 10, "c": 1}, "negative_factor": 4},
    {"rule": {"type": "pq", "p": 10, "q": 50}},
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "p_percent",
            "pq",
            "dominance",
            "frequency",
            "request",
            "rules",
            "cells",
            "key",
            "value",
            "summary",
            "shift",
            "relaxed",
        ]
    )
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(max_size=10)
            | st.sampled_from(
                [
                    "cells",
                    "rules",
                    "key",
                    "value",
                    "summary",
                    "contributions",
                    "type",
                    "p",
                    "q",
                    "k",
                    "n",
                    "total",
                    "count",
                    "largest",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw, base):
    """A valid request with a few random edits: replace, delete or add a member."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            return draw(json_values)
        path = draw(st.sampled_from(paths))
        parent = obj
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(json_values)
        else:
            parent.append(draw(json_values))
    return obj


def _encode(obj) -> bytes:
    # json.dumps writes NaN/Infinity literals, which is what a careless client sends
    return json.dumps(obj).encode()


FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ALLOWED = {200, 413, 422}


@FUZZ
@given(body=json_values | mutated(VALID_SENSITIVITY))
def test_fuzz_sensitivity_never_500(make_client, body):
    client = make_client(raise_server_exceptions=False)
    response = post_raw(client, _encode(body))
    assert response.status_code in ALLOWED, (body, response.text)
    assert "error" in response.json() or response.status_code == 200


@FUZZ
@given(body=json_values | st.one_of([mutated(b) for b in VALID_CONVERSIONS]))
def test_fuzz_conversions_never_500(make_client, body):
    client = make_client(raise_server_exceptions=False)
    response = post_raw(client, _encode(body), "/v1/conversions")
    assert response.status_code in ALLOWED, (body, response.text)
