"""The online filter's lean path (service.api.lean) answers exactly as the app's stack:
the same bytes, statuses, headers, metrics and limits; and the request-level checks of the
filter's cells (schemas.filter._checked_cells) give the errors of the per-cell validators
they replaced."""

from __future__ import annotations

import asyncio
import copy

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from schemas.profiles import Profile
from service.api.lean import LeanRoutes
from service.app import create_app
from service.config import Settings
from service.sdc import noise
from tests.callers import ANALYST_KEY, FILTER_KEY, write_keys

SECRET = b"lean-path-test-secret-0123456"
NOISE = {
    "approach": "noise",
    "d": 0.1,
    "jitter": 0.02,
    "ratio_range": [0.5, 1.5],
    "min_weighted_count": 3,
    "p": 10,
}
RULES = {"rules": [{"type": "p_percent", "p": 10}, {"type": "frequency", "n": 3}]}
PROFILES = {
    "online": Profile.model_validate({"rules": RULES, "filter": {"statistical": NOISE}}),
    "aqs": Profile.model_validate(
        {"rules": RULES, "filter": {"statistical": {"approach": "refuse"}}}
    ),
}
CELLS = [
    {
        "key": ["Mining", "Adams"],
        "microdata": {"value": [900, 80, 20], "respondent": ["m1", "m2", "m3"]},
    },
    {
        "key": ["Retail", "Adams"],
        "contributions": [
            {"value": v, "respondent": f"r{i}", "holding": f"h{i // 2}"}
            for i, v in enumerate([120, 110, 100, 90, 80])
        ],
    },
    {"key": ["Farms", "Adams"], "count": 12},
]


def body(profile="online", cells=None) -> dict:
    return {
        "profile": profile,
        "query": {"variables": ["industry", "county"]},
        "cells": copy.deepcopy(CELLS if cells is None else cells),
    }


@pytest.fixture
def app(tmp_path):
    keys = write_keys(
        tmp_path / "keys.json", (FILTER_KEY, "filter", "sha256"), (ANALYST_KEY, "analyst", "sha256")
    )
    return create_app(
        Settings(noise_secret=SECRET, api_keys_file=keys, profiles=PROFILES, max_body_bytes=20_000)
    )


def _lean_routes(app) -> LeanRoutes:
    stack = app.build_middleware_stack() if app.middleware_stack is None else app.middleware_stack
    app.middleware_stack = stack
    while not isinstance(stack, LeanRoutes):
        stack = stack.app
    return stack


def call(app, raw: bytes, *, method="POST", path="/v1/filter", key=FILTER_KEY, headers=()):
    """One request through the app's ASGI interface: its status, headers and body bytes."""
    head = [
        (b"host", b"testserver"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
        (b"x-request-id", b"fixed-id-1"),
        *headers,
    ]
    if key is not None:
        head.append((b"x-api-key", key.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": head,
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
        "app": app,
    }
    sent: list[dict] = []
    chunks = [raw]

    async def receive():
        if chunks:
            return {"type": "http.request", "body": chunks.pop(), "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start, *rest = sent
    return start["status"], start["headers"], b"".join(m.get("body", b"") for m in rest)


def both(app, raw: bytes, **options):
    """The reply of the lean path and of the stack to the same request."""
    lean = _lean_routes(app)
    on_lean = call(app, raw, **options)
    routes, lean.routes = lean.routes, {}
    try:
        on_stack = call(app, raw, **options)
    finally:
        lean.routes = routes
    return on_lean, on_stack


NUL_KEY = [{"key": ["A", "x\x00"], "count": 1}]


@pytest.mark.parametrize(
    "case",
    [
        {"raw": orjson.dumps(body())},
        {"raw": orjson.dumps(body("aqs"))},
        {"raw": orjson.dumps(body()), "key": ANALYST_KEY},
        {"raw": orjson.dumps(body()), "key": None},  # 401
        {"raw": orjson.dumps(body()), "key": "wrong.key"},  # 401
        {"raw": orjson.dumps(body(cells=NUL_KEY))},  # 422 from validation
        {"raw": orjson.dumps(body(profile="nope"))},  # 422 from the pipeline
        {"raw": orjson.dumps({**body(), "profile": None, "policy": {}})},  # 422
        {"raw": b"{not json"},
        {"raw": orjson.dumps(body()), "headers": [(b"content-type", b"text/plain")]},
        {"raw": b"[" + b" " * 25_000 + b"]"},  # 413 by Content-Length
        {"raw": orjson.dumps(body(cells=[{"key": ["A"], "count": 1}]))},  # key length
    ],
    ids=[
        "noise",
        "refuse",
        "analyst",
        "no key",
        "wrong key",
        "NUL",
        "unknown profile",
        "inline policy",
        "not JSON",
        "content type",
        "too large",
        "key length",
    ],
)
def test_lean_path_answers_as_the_stack(app, case):
    raw = case.pop("raw")
    headers = case.pop("headers", ())
    on_lean, on_stack = both(app, raw, headers=headers, **case)
    assert on_lean == on_stack
    status, head, _ = on_lean
    assert (b"x-request-id", b"fixed-id-1") in head
    assert status in (200, 401, 413, 422)


def test_inline_policy_of_the_filter_role_is_forbidden_on_both_paths(app):
    inline = {
        "policy": {"rules": RULES, "filter": {"statistical": NOISE}},
        "query": {"variables": ["industry", "county"]},
        "cells": CELLS,
    }
    on_lean, on_stack = both(app, orjson.dumps(inline))
    assert on_lean == on_stack and on_lean[0] == 403


def test_other_methods_and_paths_go_through_the_stack(app):
    assert call(app, b"", method="GET")[0] == 405
    assert call(app, orjson.dumps(body()), path="/v1/filter/")[0] in (307, 404)
    assert call(app, orjson.dumps(body()), path="/v1/filterx")[0] == 404


def test_lean_requests_are_counted_under_the_route(app):
    for _ in range(2):
        assert call(app, orjson.dumps(body()))[0] == 200
    assert call(app, b"{", key=None)[0] == 401
    text = generate_latest(app.state.metrics.registry).decode()
    assert 'sdc_http_requests_total{method="POST",route="/v1/filter",status="200"} 2.0' in text
    # Refused before any route is matched, as on the stack.
    assert 'sdc_http_requests_total{method="POST",route="unmatched",status="401"} 1.0' in text
    assert 'sdc_rejected_requests_total{reason="unauthorized"} 1.0' in text
    assert 'sdc_filter_decisions_total{decision="publish"} 2.0' in text
    assert "sdc_cells_evaluated_total 6.0" in text


# ------------------------------------------------------------------- request-level checks


def _errors(client_app, cells):
    status, _, reply = call(client_app, orjson.dumps(body(cells=cells)))
    assert status == 422, reply
    return [(d["field"], d["cell"], d["message"]) for d in orjson.loads(reply)["detail"]]


def test_cell_checks_name_field_and_cell_in_cell_order(app):
    good = {"key": ["A", "x"], "count": 1}
    cells = [
        good,
        {"key": ["B", "x"], "microdata": {"value": [1, 2], "weight": [1.0]}},
        {"key": ["C", "x\x00"], "count": 1, "summary": {"total": 1, "count": 1}},
        {"key": ["D", "x"]},
        {"key": ["E", "x"], "count": 2, "microdata": {"value": [1]}},
    ]
    assert _errors(app, cells) == [
        ("microdata", 1, "Value error, 'weight' must have one entry per value"),
        ("key.1", 2, "Value error, code contains a NUL character"),
        (
            "cells",
            3,
            "Value error, give exactly one of 'count', 'contributions', 'microdata' and 'summary'",
        ),
        (
            "cells",
            4,
            "Value error, give exactly one of 'count', 'contributions', 'microdata' and 'summary'",
        ),
    ]


_code = st.text(st.sampled_from("ab\x00é"), max_size=3)
_column = st.lists(st.sampled_from(["r1", "r2"]), max_size=3)
_cell = st.fixed_dictionaries(
    {"key": st.lists(_code, min_size=2, max_size=2)},
    optional={
        "count": st.integers(0, 5),
        "microdata": st.fixed_dictionaries(
            {"value": st.lists(st.just(1.0), min_size=1, max_size=3)},
            optional={"respondent": _column, "holding": _column},
        ),
        "summary": st.just({"total": 1.0, "count": 1.0}),
    },
)


def _expected(cells: list[dict]) -> list[tuple]:
    """The errors the per-cell validators gave, stated independently: per cell, its codes'
    NULs, then its first microdata column of another length, else the one-source rule."""
    out = []
    for i, cell in enumerate(cells):
        failed = False
        for j, code in enumerate(cell["key"]):
            if "\x00" in code:
                failed = True
                out.append((f"key.{j}", i, "Value error, code contains a NUL character"))
        micro = cell.get("microdata")
        for name in ("respondent", "holding"):
            if micro and name in micro and len(micro[name]) != len(micro["value"]):
                failed = True
                out.append(("microdata", i, f"Value error, '{name}' must have one entry per value"))
                break
        sources = sum(k in cell for k in ("count", "contributions", "microdata", "summary"))
        if not failed and sources != 1:
            message = "give exactly one of 'count', 'contributions', 'microdata' and 'summary'"
            out.append(("cells", i, "Value error, " + message))
    return out


@settings(max_examples=60, deadline=None)
@given(cells=st.lists(_cell, min_size=1, max_size=4))
def test_cell_checks_agree_with_the_validators_per_cell(cells):
    from pydantic import ValidationError

    from schemas.filter import FilterRequest

    request = {"profile": "p", "query": {"variables": ["a", "b"]}, "cells": cells}
    expected = _expected(cells)
    try:
        FilterRequest.model_validate_json(orjson.dumps(request))
    except ValidationError as error:
        got = []
        for e in error.errors():
            loc = list(e["loc"][2:])
            got.append((".".join(map(str, loc)) or "cells", e["loc"][1], e["msg"]))
        assert got == expected
    else:
        assert expected == []


# ------------------------------------------------------------------- noise on factorized ids


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["e1", "e2", "e3", "e4"]), st.sampled_from(["A", "B"])),
        min_size=1,
        max_size=12,
    )
)
def test_factorized_multipliers_are_the_multipliers(rows):
    """The filter's path (ids factorized once, the dict cache of uniforms) gives the
    multipliers of service.sdc.noise.multipliers, cold cache or warm."""
    establishment = [f"{ent}-{est}" for est, ent in rows]  # one enterprise per establishment
    enterprise = [ent for _, ent in rows]
    noise._cache.clear()
    expected = noise.multipliers(enterprise, establishment, SECRET, 0.1, 0.02)
    est_ids, est_row = noise.factorize(establishment)
    ent_ids, ent_row = noise.factorize(enterprise)
    for _ in range(2):  # cold, then from the cache
        got = noise.factorized_multipliers(ent_ids, ent_row, est_ids, est_row, SECRET, 0.1, 0.02)
        np.testing.assert_array_equal(got, expected)
    # Hand-checked: each multiplier is 1 +- (d + jitter (2u - 1)), u from the keyed hash.
    u = [noise._uniform(noise.prf_key(SECRET), b"jitter", e) for e in establishment]
    s = [
        1 if noise._uniform(noise.prf_key(SECRET), b"direction", e) < 0.5 else -1
        for e in enterprise
    ]
    np.testing.assert_allclose(
        expected, [1 + si * (0.1 + 0.02 * (2 * ui - 1)) for si, ui in zip(s, u)], rtol=0, atol=0
    )
