"""Large bodies validated in parts (service/api/body_parts.py): the event loop answers
while one is validated, and every answer is the one of a single validation call: the
same model, the same 422s (a cell's index and key, strict types, unknown fields, a key
given twice at any depth, JSON errors with their line and column)."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.sensitivity import SensitivityRequest
from service import collector
from service.api import body as body_module
from service.api import body_parts
from service.api.errors import MAX_ERRORS
from service.app import create_app
from service.config import Settings

from .loop_probe import lags_while

RULES = {"rules": [{"type": "p_percent", "p": 10}]}
#: Codes with escapes and colons: the scan must see where strings end.
ODD_CODES = ['a"b', "x\\", "09:00", 'q\\"', "\\\\", "é€", "{[,:]}"]
KEY_7000 = ['a"b7000', "r"]  # 7000 % 7 == 0


def sensitivity(cells: int, contributions: int = 3) -> dict:
    return {
        "rules": RULES,
        "cells": [
            {
                "key": [ODD_CODES[i % len(ODD_CODES)] + str(i), "r"],
                "contributions": [
                    {"value": v + 0.5, "holding": "h:1"} for v in range(contributions)
                ],
            }
            for i in range(cells)
        ],
    }


def post(client, route: str, raw: bytes):
    return client.post(route, content=raw, headers={"content-type": "application/json"})


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 2 KiB, scanned 4 KiB at a time, for bodies over 1 KiB; records whether
    each body was validated in parts."""
    monkeypatch.setattr(body_parts, "PART_BYTES", 2048)
    monkeypatch.setattr(body_parts, "SCAN_BYTES", 4096)
    used: list[bool] = []
    validated = body_parts.validated

    async def recording(raw, model):
        try:
            result = await validated(raw, model)
        except Exception:
            used.append(True)
            raise
        used.append(result is not None)
        return result

    monkeypatch.setattr(body_parts, "validated", recording)
    return used


def same_answer(client, monkeypatch, used, route: str, raw: bytes, in_parts: bool = True):
    """The reply to ``raw`` validated in one call and in parts: equal; the latter's."""
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 10**12)
    monkeypatch.setattr(body_module, "PARTS_FROM", 10**12)
    once = post(client, route, raw)
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 1024)
    parts = post(client, route, raw)
    assert used[-1] is in_parts
    assert (parts.status_code, parts.json()) == (once.status_code, once.json())
    return parts


def details(reply) -> list[dict]:
    assert reply.status_code == 422, reply.text
    return reply.json()["detail"]


def test_the_same_model(small_parts):
    raw = orjson.dumps(sensitivity(300)) + b"\n"
    cells = sensitivity(2)["cells"]
    cells[1]["contributions"] = [{"value": 1, "weight": 2}] * 2000  # one cell cut too
    big = orjson.dumps({"cells": cells, "profile": "p"})
    for body in (raw, big, json.dumps(json.loads(raw), indent=2).encode()):
        parts = asyncio.run(body_parts.validated(body, SensitivityRequest))
        assert parts == SensitivityRequest.model_validate_json(body)
        assert type(parts) is SensitivityRequest
        assert parts.model_fields_set == {"rules", "cells"} or parts.profile == "p"
    assert small_parts == [True, True, True]


def test_a_valid_body_is_served_alike(client, monkeypatch, small_parts, served_collector):
    monkeypatch.setattr(body_parts, "HIDE_BYTES", 0)  # its parts hidden from the collector
    reply = same_answer(
        client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(sensitivity(300))
    )
    assert reply.status_code == 200
    assert len(reply.json()["cells"]) == 300


def test_a_bad_value_names_its_cell_and_key(client, monkeypatch, small_parts):
    body = sensitivity(9000, 1)
    body["cells"][7000]["contributions"][0]["value"] = "12"
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    assert details(reply) == [
        {
            "field": "contributions.0.value",
            "cell": 7000,
            "key": KEY_7000,
            "message": "Input should be a valid number",
        }
    ]


def test_strict_types_and_unknown_fields_alike(client, monkeypatch, small_parts):
    body = sensitivity(400)
    body["cells"][3]["contributions"][1]["value"] = True
    body["cells"][150]["contributions"][0]["weight"] = "2"
    body["cells"][151]["contributions"][2]["waiver"] = 1
    body["cells"][152]["colour"] = "red"
    body["cells"][399]["summary"] = {"total": 10, "count": "3"}
    body["profile"] = 5
    body["extra"] = [1, 2]
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    found = [(d["field"], d["cell"]) for d in details(reply)]
    assert found == [
        ("contributions.1.value", 3),
        ("contributions.0.weight", 150),
        ("contributions.2.waiver", 151),
        ("colour", 152),
        ("summary.count", 399),
        ("profile", None),
        ("extra", None),
    ]


def test_the_model_and_list_validators_see_every_cell(client, monkeypatch, small_parts):
    body = sensitivity(300)
    body["profile"] = "p"  # and rules: the model's validator refuses it
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    assert [d["message"] for d in details(reply)] == [
        "Value error, give exactly one of 'rules' and 'profile'"
    ]
    cells = [{"key": [f"c{i}", "A"], "count": i} for i in range(400)]
    cells[350]["summary"] = {"total": 1, "count": 1}  # two sources: the list's own check
    policy = {"rules": RULES, "filter": {"statistical": {"approach": "refuse"}}}
    raw = orjson.dumps({"policy": policy, "query": {"variables": ["a", "b"]}, "cells": cells})
    reply = same_answer(client, monkeypatch, small_parts, "/v1/filter", raw)
    assert [(d["cell"], d["key"]) for d in details(reply)] == [(350, ["c350", "A"])]
    del cells[350]["summary"]
    raw = orjson.dumps({"policy": policy, "query": {"variables": ["a", "b"]}, "cells": cells})
    assert same_answer(client, monkeypatch, small_parts, "/v1/filter", raw).status_code == 200


@pytest.mark.parametrize(
    "old, new, field, cell",
    [
        # deep inside a cell
        (
            b'{"value":2.5,"holding":"h:1"}',
            b'{"value":2.5,"holding":"h:1","value":3}',
            "contributions.2.value",
            0,
        ),
        # the body's own key
        (b'"rules":', b'"rules":{"rules":[]},"rules":', "rules", None),
        # the list cut into parts, given twice
        (b'"cells":', b'"cells":[],"cells":', "cells", None),
    ],
)
def test_a_key_given_twice_is_named(client, monkeypatch, small_parts, old, new, field, cell):
    raw = orjson.dumps(sensitivity(9000, 3))
    if cell is not None:  # in cell 7000: after its third contribution's start
        at = raw.index(orjson.dumps(KEY_7000[0]))
        raw = raw[:at] + raw[at:].replace(old, new, 1)
        cell = 7000
    else:
        raw = raw.replace(old, new, 1)
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)
    (detail,) = details(reply)
    assert (detail["field"], detail["cell"]) == (field, cell)
    assert detail["message"] == "the field is given twice in one JSON object; give it once"
    if cell is not None:
        assert detail["key"] == KEY_7000


def test_one_large_cell_is_cut_too(client, monkeypatch, small_parts):
    body = sensitivity(3)
    body["cells"][1]["contributions"] = [{"value": i} for i in range(20_000)]
    body["cells"][1]["contributions"][15_000] = {"value": None}
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    assert [(d["field"], d["cell"], d["key"]) for d in details(reply)] == [
        ("contributions.15000.value", 1, ["x\\1", "r"])
    ]
    body["cells"][1]["contributions"][15_000] = {"value": 1}
    raw = orjson.dumps(body)
    at = raw.index(b'{"value":1}', raw.index(b'{"value":1}') + 1)  # the second: item 15000
    raw = raw[:at] + b'{"value":1,"value":1}' + raw[at + len(b'{"value":1}') :]
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)
    assert [(d["field"], d["cell"]) for d in details(reply)] == [("contributions.15000.value", 1)]


def test_non_finite_numbers_name_their_cell(client, monkeypatch, small_parts):
    raw = orjson.dumps(sensitivity(9000, 1))
    at = raw.index(orjson.dumps(KEY_7000[0]))
    raw = raw[:at] + raw[at:].replace(b"0.5", b"NaN", 1)
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)
    assert [(d["cell"], d["key"]) for d in details(reply)] == [(7000, KEY_7000)]


@pytest.mark.parametrize(
    "where",
    [
        "in a part",
        "a bracket of the other kind",
        "before the list",
        "after the list",
        "after the body",
        "a trailing comma",
        "a bracket missing",
        "a bracket missing after a list",
        "the value closed early, a string open later",
        "a string open",
        "a bracket closing nothing",
        "an array",
    ],
)
def test_json_errors_keep_their_line_and_column(client, monkeypatch, small_parts, where):
    raw = json.dumps(sensitivity(600), indent=1, ensure_ascii=False).encode()
    if where == "in a part":
        at = raw.index(b'"h:1"', len(raw) // 2)
        raw = raw[:at] + b"x" + raw[at:]
    elif where == "a bracket of the other kind":
        at = raw.index(b'"r"\n   ]', len(raw) // 2) + 7
        raw = raw[:at] + b"}" + raw[at + 1 :]
    elif where == "before the list":
        raw = raw.replace(b'"p": 10', b'"p": 1O', 1)
    elif where == "after the list":
        raw = raw[: raw.rindex(b"}")] + b', "profile": nul}'
    elif where == "after the body":
        raw += b"\n x"
    elif where == "a trailing comma":
        at = raw.rindex(b"  }\n ]")
        raw = raw[: at + 3] + b"," + raw[at + 3 :]
    elif where == "a bracket missing":
        raw = raw[: raw.rindex(b"}")]
    elif where == "a bracket missing after a list":
        raw = orjson.dumps(sensitivity(600))[:-1]
    elif where == "the value closed early, a string open later":  # found by fuzzing
        raw = orjson.dumps(sensitivity(600)).replace(b',"cells":', b'},"cells":', 1)
        raw = raw.replace(b'{"key"', b'{""key"', 1)
    elif where == "a string open":
        raw = raw[: raw.rindex(b'"') - 1]
    elif where == "a bracket closing nothing":
        raw += b"\n]"
    else:
        raw = b"[" + raw + b",]"
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)
    (detail,) = details(reply)
    assert detail["message"].startswith("body is not valid JSON (")
    assert " at line " in detail["message"]


def test_codes_with_colons_and_other_routes(client, monkeypatch, small_parts):
    cells = [{"key": [f"{i // 60:02}:{i % 60:02}"], "count": i % 7} for i in range(1000)]
    raw = orjson.dumps(
        {
            "dimensions": [{"name": "t", "codes": [c["key"][0] for c in cells]}],
            "cells": cells,
            "rules": {"threshold": {"t": 3}},
        }
    )
    assert (
        same_answer(client, monkeypatch, small_parts, "/v1/frequency/sensitivity", raw).status_code
        == 200
    )
    leaves = [f"l{i}" for i in range(300)]
    cells = [{"key": [leaf, "A"], "value": 1.5} for leaf in leaves]
    cells[200]["value"] = "1.5"
    body = {
        "structure": {
            "dimensions": [{"name": "x", "leaves": leaves}, {"name": "y", "leaves": ["A"]}]
        },
        "rules": RULES,
        "cells": cells,
    }
    reply = same_answer(client, monkeypatch, small_parts, "/v1/audit", orjson.dumps(body))
    assert [(d["field"], d["cell"], d["key"]) for d in details(reply)] == [
        ("value", 200, ["l200", "A"])
    ]


def test_the_loop_answers_while_a_large_body_is_validated(monkeypatch, served_collector):
    """A body that takes about a second to validate: the longest wait of the event loop
    meanwhile is a small part of it (in one call it was all of it). Its last value is
    invalid, so that the reply (422) waits for the whole validation and nothing else. The
    collector is the served app's (:func:`service.collector.tune`, its parts hidden): with
    the test session's objects in view, a full pass over them is the longest wait."""
    monkeypatch.setattr(body_parts, "HIDE_BYTES", 0)
    # The full collection after the reply (a test of its own below) walks the whole test
    # session's heap here (0.2 s once hypothesis is imported), not a served app's (45 ms).
    monkeypatch.setattr(collector, "look_again", lambda: None)
    body = sensitivity(15_000, 10)
    body["cells"][-1]["contributions"][-1]["value"] = "1"
    raw = orjson.dumps(body)
    reply, waits, total = lags_while(create_app(Settings()), "/v1/sensitivity", raw)
    lags = [end - start for start, end in waits]
    assert reply.status_code == 422
    assert max(lags) < 0.25 * total, (max(lags), total)


def test_what_was_hidden_from_the_collector_is_collected_after_the_reply(served_collector):
    class Node:
        pass

    cycle = Node()
    cycle.itself = cycle
    gone = weakref.ref(cycle)
    collector.hide()  # as a large body's parts are validated
    del cycle
    gc.collect()
    assert gone() is not None  # frozen
    collector.look_again()  # the request answered
    assert gone() is None


EDITS = [b'"', b"\\", b"[", b"]", b"{", b"}", b",", b":", b" ", b"1", b"a", b"\n", b'\\"', b""]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    cells=st.integers(5, 80),
    bad=st.booleans(),
    edits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 2), st.sampled_from(EDITS)),
        max_size=3,
    ),
)
def test_mutated_bodies_get_the_answer_of_one_call(
    client, monkeypatch, small_parts, cells, bad, edits
):
    """Fuzzing the scan: a valid body with odd codes (quotes, backslashes, brackets,
    colons in strings), or one whose every value is a string (``bad``: past MAX_ERRORS
    errors from 51 cells), then up to three bytes inserted, replaced or deleted anywhere
    (structural characters, escapes, whitespace): validated in parts of 256 bytes, the
    reply is the one-call reply, status and body, whether the edits broke the JSON, a
    value, or nothing (the parts then fall back to one call where they cannot answer)."""
    monkeypatch.setattr(body_parts, "PART_BYTES", 256)
    monkeypatch.setattr(body_parts, "SCAN_BYTES", 512)
    body = sensitivity(cells, 2)
    if bad:
        for cell in body["cells"]:
            for c in cell["contributions"]:
                c["value"] = str(c["value"])
    raw = bytearray(orjson.dumps(body))
    for where, how, text in edits:
        at = int(where * len(raw))
        if how == 0:
            raw[at:at] = text
        elif how == 1:
            raw[at : at + 1] = text
        else:
            del raw[at : at + len(text) or 1]
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 10**12)
    monkeypatch.setattr(body_module, "PARTS_FROM", 10**12)
    once = post(client, "/v1/sensitivity", bytes(raw))
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 256)
    parts = post(client, "/v1/sensitivity", bytes(raw))
    assert (parts.status_code, parts.json()) == (once.status_code, once.json()), bytes(raw)


def test_a_newline_in_a_string_is_placed_as_one_call_places_it(client, monkeypatch, small_parts):
    """The parser stops at a raw newline inside a string and says column 0 of the next
    line; the parts said the line before, column 281 (found by the fuzzing above)."""
    raw = orjson.dumps(sensitivity(40, 2)).replace(b'"r"', b'"r\nr"', 30)
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)
    assert "at line 2 column 0" in details(reply)[0]["message"]


def test_a_422_lists_the_first_errors_only(client, monkeypatch, small_parts):
    """A 10 MiB body of 600,000 bad values took 29 s to answer, its 422 listing every one
    (61 MiB; 2026-11-27): now the first MAX_ERRORS in the body's order and one entry
    saying there are more, the same in parts (which stop validating there and only parse
    the rest, so that a later syntax error is still the one reported, as in one call)."""
    from service.api.errors import MORE_ERRORS

    body = sensitivity(400, 1)
    for cell in body["cells"]:
        cell["contributions"][0]["value"] = "1"
    raw = orjson.dumps(body)
    detail = details(same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw))
    assert len(detail) == MAX_ERRORS + 1 and detail[-1]["message"] == MORE_ERRORS
    assert [d["cell"] for d in detail[:MAX_ERRORS]] == list(range(MAX_ERRORS))
    broken = raw[:-2] + b",]}"  # a syntax error at the end: a trailing comma
    detail = details(same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", broken))
    assert len(detail) == 1 and "not valid JSON" in detail[0]["message"]


def audit_body(parents: int, **more) -> dict:
    """An audit whose first dimension is a hierarchy of ``parents`` parents with two
    leaves each (codes with quotes, colons and escapes), and cells on two of its leaves."""
    children = {"Total": [f"p:{i}" for i in range(parents)]}
    children |= {f"p:{i}": [ODD_CODES[i % 7] + f"{i}a", f"{i}b"] for i in range(parents)}
    structure = {
        "dimensions": [
            {"name": "x", "children": children},
            {"name": "y", "leaves": ["A", "B"]},
        ]
    }
    cells = [
        {"key": [leaf, y], "value": 10.0 + n}
        for n, (leaf, y) in enumerate([(children["p:0"][0], "A"), ("0b", "B")])
    ]
    return {"structure": structure, "rules": RULES, "cells": cells, **more}


def odd(raw: bytes, old: bytes, new: bytes, after: bytes = b"") -> bytes:
    """``raw`` with the first ``old`` after ``after`` replaced by ``new``."""
    at = raw.index(old, raw.index(after) if after else 0)
    return raw[:at] + new + raw[at + len(old) :]


GOOD_AUDIT = orjson.dumps(audit_body(300))


@pytest.mark.parametrize(
    "raw",
    [
        GOOD_AUDIT,  # a hierarchy cut into parts, served
        odd(GOOD_AUDIT, b'"250b"', b"250", b'"p:250":'),  # a number for a code
        odd(GOOD_AUDIT, b'"250b"', b'"' + b"c" * 300 + b'"', b'"p:250":'),  # too long
        odd(GOOD_AUDIT, b'"p:250":', b'"' + b"p" * 300 + b'":'),  # a key too long
        odd(GOOD_AUDIT, b'"p:250":', b'"p:3":'),  # a parent given twice, parts apart
        odd(GOOD_AUDIT, b'"p:4":', b'"p:3":'),  # given twice in one part
        odd(GOOD_AUDIT, b'"250b"]', b'"250b",]', b'"p:250":'),  # a trailing comma
        odd(GOOD_AUDIT, b'"p:250":', b'"p:250"'),  # a colon missing
        odd(GOOD_AUDIT, b'"p:250":', b"1:"),  # a key that is not a string
        GOOD_AUDIT.replace(b'"leaves":["A","B"]', b'"leaves":' + orjson.dumps(["A"] * 2000)),
        GOOD_AUDIT.replace(b'"Total":[', b'"Total":[' + b"1," * 1500),  # past MAX_ERRORS
        GOOD_AUDIT.replace(b'"Total":[', b'"Total":[' + b'{"a":' * 150 + b"1" + b"}" * 150 + b","),
    ],
)
def test_mappings_and_lists_of_codes_alike(client, monkeypatch, small_parts, raw):
    """A hierarchy (a mapping of codes to lists of codes) and a dimension's leaves cut
    into parts: every error of one call, in its order, a key given twice across parts,
    JSON errors in a key, and values of the wrong kind (their errors do not depend on
    what they hold: validated as ``{}``)."""
    same_answer(client, monkeypatch, small_parts, "/v1/audit", raw)


@pytest.mark.parametrize(
    "extra",
    [
        b'"extra":' + orjson.dumps([{"a": [i, {}]} for i in range(2000)]),
        b'"extra":' + orjson.dumps({f"k{i}": i for i in range(2000)}),
        b",".join(b'"k%d":%d' % (i % 150, i) for i in range(3000)),  # keys given twice too
        b'"profile":' + orjson.dumps({f"k{i}": i for i in range(2000)}),  # a wrong kind
        b'"rules":' + orjson.dumps(list(range(3000))),
        b'"rules":[' + orjson.dumps(list(range(3000))) + b"]",
        b'"extra":' + orjson.dumps(list(range(3000)))[:-1] + b",]",  # a trailing comma
        b'"extra":' + orjson.dumps(list(range(3000))).replace(b"2999", b"2999 1"),
        b'"extra":' + orjson.dumps(list(range(3000))) + b" 1",
        b'"extra":' + b"[" * 199 + orjson.dumps(list(range(3000))) + b"]" * 199,  # 201 deep
        b'"extra":' + b"[" * 200 + orjson.dumps(list(range(3000))) + b"]" * 200,  # too deep
        b'"extra":[' + b"1" * 5000 + b"]",  # a number out of range
    ],
)
def test_unknown_fields_and_values_of_the_wrong_kind_alike(client, monkeypatch, small_parts, extra):
    """An unknown field is refused whatever its value (only checked as JSON), many
    unknown keys are refused as one call refuses them (each once, the first
    ``MAX_ERRORS``), and a value of the wrong kind gets its error; JSON errors in them,
    the parser's recursion limit included, as one call places them."""
    raw = orjson.dumps(sensitivity(60))[:-1] + b"," + extra + b"}"
    same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)


def test_an_array_for_a_body_alike(client, monkeypatch, small_parts):
    """A body that is an array: the model's error, whatever the array holds (checked as
    JSON only)."""
    raw = b"[" + orjson.dumps(sensitivity(60)) + b"]"
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", raw)
    assert [d["message"] for d in details(reply)] == ["Input should be an object"]


def test_a_cell_is_named_when_only_another_field_is_cut(client, monkeypatch, small_parts):
    """The cells short, an unknown field long: the error of a cell still names its key
    (the fuzzing below found it unnamed)."""
    body = sensitivity(5)
    body["cells"][3]["colour"] = "red"
    body["zz"] = list(range(3000))
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    assert [(d["field"], d["cell"], d["key"]) for d in details(reply)] == [
        ("colour", 3, ['q\\"3', "r"]),
        ("zz", None, None),
    ]


def test_an_unknown_field_of_a_cell_alike(client, monkeypatch, small_parts):
    body = sensitivity(60)
    body["cells"][7]["zz"] = [{"a": i} for i in range(3000)]
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    assert [(d["field"], d["cell"]) for d in details(reply)] == [("zz", 7)]


def test_a_hierarchy_of_areas_and_microdata_alike(client, monkeypatch, small_parts):
    codes = [f"c{i}" for i in range(3000)]
    body = {
        "dimensions": [
            {
                "name": "x",
                "codes": codes,
                "hierarchy": [{c: f"a{i % 9}" for i, c in enumerate(codes)}],
            },
            {"name": "y", "codes": ["A"]},
        ],
        "keys": ["x"],
        "targets": ["y"],
        "cells": [{"key": ["c1", "A"], "count": 4}],
        "rules": {"extended": {}},
    }
    route = "/v1/frequency/sensitivity"
    assert (
        same_answer(client, monkeypatch, small_parts, route, orjson.dumps(body)).status_code == 200
    )
    body["dimensions"][0]["hierarchy"][0]["c2000"] = 5
    same_answer(client, monkeypatch, small_parts, route, orjson.dumps(body))
    cell = {"key": ["a"], "microdata": {"value": [1.5] * 3000, "weight": [1.0] * 2999 + [0.0]}}
    policy = {"rules": RULES, "filter": {"statistical": {"approach": "refuse"}}}
    body = {"policy": policy, "query": {"variables": ["a"]}, "cells": [cell]}
    same_answer(client, monkeypatch, small_parts, "/v1/filter", orjson.dumps(body))
    cell["microdata"] = {"value": ["1"] * 3000}
    same_answer(client, monkeypatch, small_parts, "/v1/filter", orjson.dumps(body))


TABLE_EDITS = [*EDITS, b'"zz":[1,{"a":[]}],', b'"a":1,', b"[" * 8, b"]" * 8, b"null", b"1e999"]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    parents=st.integers(2, 30),
    extra=st.sampled_from(["none", "unknown", "keys", "profile", "deep"]),
    edits=st.lists(
        st.tuples(
            st.floats(0, 1, exclude_max=True), st.integers(0, 2), st.sampled_from(TABLE_EDITS)
        ),
        max_size=3,
    ),
)
def test_mutated_tables_get_the_answer_of_one_call(
    client, monkeypatch, small_parts, parents, extra, edits
):
    """Fuzzing the cuts of mappings, lists of codes and unknown fields: an audit whose
    hierarchy (odd codes) is cut into parts of 256 bytes, with an unknown field holding
    arrays and objects, many unknown keys, an object where the profile's name belongs,
    or values nested near the parser's recursion limit; then up to three edits anywhere
    (structural characters, escapes, members, brackets). The reply is the one-call reply,
    status and body."""
    monkeypatch.setattr(body_parts, "PART_BYTES", 256)
    monkeypatch.setattr(body_parts, "SCAN_BYTES", 512)
    body = audit_body(parents)
    if extra == "unknown":
        body["zz"] = [{"a": [i, "b:c"]} for i in range(40)]
    elif extra == "keys":
        body |= {f"k{i % 120}": [i] for i in range(150)}
    elif extra == "profile":
        body["profile"] = {f"k{i}": {"a": i} for i in range(40)}
    elif extra == "deep":
        body["zz"] = [1]
        for _ in range(198):
            body["zz"] = [body["zz"]]
    raw = bytearray(orjson.dumps(body))
    for where, how, text in edits:
        at = int(where * len(raw))
        if how == 0:
            raw[at:at] = text
        elif how == 1:
            raw[at : at + 1] = text
        else:
            del raw[at : at + len(text) or 1]
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 10**12)
    monkeypatch.setattr(body_module, "PARTS_FROM", 10**12)
    once = post(client, "/v1/audit", bytes(raw))
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 256)
    parts = post(client, "/v1/audit", bytes(raw))
    assert (parts.status_code, parts.json()) == (once.status_code, once.json()), bytes(raw)


@pytest.mark.parametrize("levels", [196, 197, 198])
def test_the_parsers_recursion_limit_inside_a_cell(client, monkeypatch, small_parts, levels):
    """A value nested near the parser's limit inside a cell: a part's text is shallower
    than the body (the cell's list is its outer array), so the parts once validated a
    value that one call refuses as too deep (a different 422)."""
    body = sensitivity(200)
    value: object = 1.5
    for _ in range(levels):
        value = [value]
    body["cells"][150]["contributions"][0]["value"] = value
    reply = same_answer(client, monkeypatch, small_parts, "/v1/sensitivity", orjson.dumps(body))
    assert len(details(reply)) == 1


def test_many_errors_of_a_smaller_body_are_listed_from_parts(client, monkeypatch, small_parts):
    """A body under the size validated in parts with more than MAX_ERRORS errors: one
    call finds them, the parts list the first ones (Pydantic's list of all of them is made
    in Python: 0.4 s for 128,000), the same reply."""
    body = sensitivity(400, 1)
    for cell in body["cells"]:
        cell["contributions"][0]["value"] = "1"
    raw = orjson.dumps(body)
    monkeypatch.setattr(body_module, "LARGE_BODY_BYTES", 10**12)
    monkeypatch.setattr(body_module, "PARTS_FROM", 10**12)
    once = post(client, "/v1/sensitivity", raw)
    monkeypatch.setattr(body_module, "PARTS_FROM", 1024)
    parts = post(client, "/v1/sensitivity", raw)
    assert small_parts == [True]
    assert (parts.status_code, parts.json()) == (once.status_code, once.json())
    assert len(details(parts)) == MAX_ERRORS + 1
