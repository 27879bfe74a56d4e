"""POST /v1/frequency/sensitivity through the real app: seed 001's golden case, each
extended threshold rule alone, several target variables, a hierarchical key, both zero-cell
policies, the plain threshold rule, the filter role's decisions, and 422s naming the field.

Rules (seed 001, "Threshold rules"; readings in service/sdc/frequency.py), f_yk a cell,
f_k its key marginal (summed over the target), f_y its target marginal (summed over the key):
  1a  f_yk >= f_k - t_key_abs          2a  100 f_yk / f_k >= t_key_rel
  1b  f_yk >= f_y - t_target_abs       2b  100 f_yk / f_y >= t_target_rel
  3   0 < f_yk < t_min_cell; marginals 0 < f_k < t_min_key, 0 < f_y < t_min_target
  threshold (seed 003 A): 0 < count < t (zeros too with zero_cells "sensitive")
"""

from __future__ import annotations

import pytest

from tests.callers import FILTER_KEY, write_keys
from tests.golden import load

URL = "/v1/frequency/sensitivity"
OFF = dict(rule_1a=False, rule_1b=False, rule_2a=False, rule_2b=False, rule_3=False)


def table(
    dims: dict[str, list[str]],
    counts: dict[tuple, int],
    *,
    keys=(),
    targets=(),
    hierarchy: dict | None = None,
    **rules,
) -> dict:
    """A request body: ``dims`` name -> codes, ``counts`` key tuple -> count (zeros left
    out, as a caller would), ``rules`` the 'rules' object."""
    dimensions = [{"name": n, "codes": c} for n, c in dims.items()]
    for d in dimensions:
        if hierarchy and d["name"] in hierarchy:
            d["hierarchy"] = hierarchy[d["name"]]
    return {
        "dimensions": dimensions,
        "keys": list(keys),
        "targets": list(targets),
        "cells": [{"key": list(k), "count": n} for k, n in counts.items() if n],
        "rules": rules,
    }


def post(client, body, **kwargs) -> dict:
    r = client.post(URL, json=body, **kwargs)
    assert r.status_code == 200, r.text
    return r.json()


def flagged(reply) -> dict[str, list[str]]:
    """'k,y' -> rules, for the cells some rule flags."""
    return {",".join(c["key"]): c["rules"] for c in reply["cells"] if c["rules"]}


def extended(**config) -> dict:
    """Extended rules with every rule off except those in ``config``."""
    return {"extended": {**OFF, **config}}


# --------------------------------------------------------------------------- golden case

GOLDEN = load("frequency.json")[0]


def golden_body() -> dict:
    keys, cats = [str(k) for k in GOLDEN["key_values"]], GOLDEN["target_categories"]
    counts = {(k, y): n for k, row in zip(keys, GOLDEN["counts"]) for y, n in zip(cats, row)}
    t = GOLDEN["thresholds"]
    on = {f"rule_{r}": True for r in GOLDEN["rules_applied"]}
    return table(
        {"key": keys, "Y": cats},
        counts,
        keys=["key"],
        targets=["Y"],
        **extended(
            **on,
            t_key_abs=t["t_key_abs"],
            t_target_abs=t["t_target_abs"],
            t_key_rel=t["t_key_rel"],
            t_target_rel=t["t_key_rel"],
            t_min_cell=t["t_min"],
            t_min_key=t["t_min"],
            t_min_target=t["t_min"],
        ),
    )


def test_golden_seed_001_example_revisited(client):
    reply = post(client, golden_body())
    assert flagged(reply) == GOLDEN["expect_flags"]
    marginal = {f"key {m['key'][0]}": m["rules"] for m in reply["key_marginals"] if m["rules"]}
    marginal |= {
        f"target {m['key'][1]}": m["rules"] for m in reply["target_marginals"] if m["rules"]
    }
    assert marginal == GOLDEN["expect_marginal_flags"]
    # every cell of the 12 x 4 table, sent or not, in row-major order
    assert [c["key"] for c in reply["cells"][:5]] == [
        ["1", "A"],
        ["1", "B"],
        ["1", "C"],
        ["1", "D"],
        ["2", "A"],
    ]
    assert len(reply["cells"]) == 48
    by_key = {",".join(c["key"]): c for c in reply["cells"]}
    assert by_key["1,A"] == {
        "key": ["1", "A"],
        "status": "unsafe",
        "sensitive": True,
        "count": 200,
        "rules": ["1a", "2a"],
        "inherited": [],
    }
    assert by_key["1,B"]["status"] == "empty" and by_key["1,B"]["count"] == 0
    assert by_key["7,A"]["status"] == "safe" and by_key["7,A"]["rules"] == []
    # marginals: f_k per key value, f_y per target class
    assert [m["count"] for m in reply["key_marginals"]] == [
        200,
        20,
        2,
        20,
        20,
        20,
        20,
        4,
        4,
        1,
        300,
        301,
    ]
    assert [m["key"] for m in reply["target_marginals"]] == [
        [None, "A"],
        [None, "B"],
        [None, "C"],
        [None, "D"],
    ]
    assert [m["count"] for m in reply["target_marginals"]] == [884, 21, 6, 1]
    # 16 flagged cells; 48 - 22 non-zero = 26 empty; 1a flags 13 cells, 1b 2, 2a 6, 3 4.
    assert reply["summary"] == {
        "cells": 48,
        "unsafe": 16,
        "empty": 26,
        "marginals_unsafe": 2,
        "by_rule": {"1a": 13, "1b": 2, "2a": 6, "3": 4},
    }
    assert reply["levels"] == []


def test_golden_note_rule_2b_and_simple_threshold(client):
    """The golden note: rule 2b also catches the key-7 singleton; the plain threshold t = 3
    alone catches only 3A, 4B, 5B, 7D, 8B, 9A, 9B, 10A."""
    body = golden_body()
    body["rules"]["extended"]["rule_2b"] = True
    assert flagged(post(client, body))["7,D"] == ["1b", "2b", "3"]
    body["rules"] = {"threshold": {"t": 3}}
    assert set(flagged(post(client, body))) == {
        "3,A",
        "4,B",
        "5,B",
        "7,D",
        "8,B",
        "9,A",
        "9,B",
        "10,A",
    }


# --------------------------------------------------------------------------- each rule alone
#
#          A   B   C  | f_k
#   k0:   10   1   0  | 11
#   k1:    4   4   4  | 12
#   k2:    0   0   2  |  2
#   f_y:  14   5   6  | 25

SMALL_DIMS = {"k": ["k0", "k1", "k2"], "Y": ["A", "B", "C"]}
SMALL = {
    ("k0", "A"): 10,
    ("k0", "B"): 1,
    ("k0", "C"): 0,
    ("k1", "A"): 4,
    ("k1", "B"): 4,
    ("k1", "C"): 4,
    ("k2", "A"): 0,
    ("k2", "B"): 0,
    ("k2", "C"): 2,
}


def small(**rules) -> dict:
    return table(SMALL_DIMS, SMALL, keys=["k"], targets=["Y"], **rules)


@pytest.mark.parametrize(
    "config, expected",
    [
        # 1a, t = 1: f_yk >= f_k - 1: k0 A 10 >= 10, k2 C 2 >= 1; k1 4 >= 11 no.
        (dict(rule_1a=True, t_key_abs=1), {"k0,A": ["1a"], "k2,C": ["1a"]}),
        # 1b, t = 1: f_yk >= f_y - 1: k1 B 4 >= 4; A needs 13, C needs 5.
        (dict(rule_1b=True, t_target_abs=1), {"k1,B": ["1b"]}),
        # 2a, t = 95: k0 A 10/11 = 90.9 % < 95; k2 C 2/2 = 100 %.
        (dict(rule_2a=True, t_key_rel=95), {"k2,C": ["2a"]}),
        # 2b, t = 80: k1 B 4/5 = 80 % (inclusive); A 10/14 = 71 %, C 4/6 = 67 %.
        (dict(rule_2b=True, t_target_rel=80), {"k1,B": ["2b"]}),
        # 3, t_min_cell = 2: the singleton k0 B only.
        (dict(rule_3=True, t_min_cell=2, t_min_key=1, t_min_target=1), {"k0,B": ["3"]}),
    ],
)
def test_each_rule_alone(client, config, expected):
    reply = post(client, small(**extended(**config)))
    assert flagged(reply) == expected
    assert {",".join(c["key"]) for c in reply["cells"] if c["sensitive"]} == set(expected)
    assert reply["summary"]["unsafe"] == len(expected)
    assert reply["summary"]["by_rule"] == {list(expected.values())[0][0]: len(expected)}
    assert not any(m["sensitive"] for m in reply["key_marginals"] + reply["target_marginals"])


def test_rule_3_on_marginals(client):
    # f_k = 11, 12, 2: t_min_key = 3 flags k2's marginal; f_y = 14, 5, 6: t_min_target = 6
    # flags B's. Internal cells: t_min_cell = 3 flags k0 B (1) and k2 C (2).
    reply = post(client, small(**extended(rule_3=True, t_min_cell=3, t_min_key=3, t_min_target=6)))
    assert flagged(reply) == {"k0,B": ["3"], "k2,C": ["3"]}
    assert [(m["key"], m["count"], m["sensitive"], m["rules"]) for m in reply["key_marginals"]] == [
        (["k0", None], 11, False, []),
        (["k1", None], 12, False, []),
        (["k2", None], 2, True, ["3"]),
    ]
    assert [(m["key"], m["count"], m["rules"]) for m in reply["target_marginals"]] == [
        ([None, "A"], 14, []),
        ([None, "B"], 5, ["3"]),
        ([None, "C"], 6, []),
    ]
    assert reply["summary"]["marginals_unsafe"] == 2


# --------------------------------------------------------------------------- zero cells


def test_zero_cells_dominant_and_informative(client):
    # 1a, t = 1 flags k0 A and k2 C. Informative zeros: also the zeros of those rows,
    # k0 C and k2 A, k2 B ("everybody else in this row has to have ...", seed 001).
    dominant = post(client, small(**extended(rule_1a=True, t_key_abs=1)))
    informative = post(
        client, small(**extended(rule_1a=True, t_key_abs=1, zero_cells="informative"))
    )
    assert set(flagged(dominant)) == {"k0,A", "k2,C"}
    assert set(flagged(informative)) == {"k0,A", "k0,C", "k2,A", "k2,B", "k2,C"}
    status = {",".join(c["key"]): c["status"] for c in dominant["cells"]}
    assert status["k0,C"] == "empty" and status["k2,A"] == "empty"
    status = {",".join(c["key"]): c["status"] for c in informative["cells"]}
    assert status["k0,C"] == "unsafe" and status["k2,A"] == "unsafe"
    assert informative["summary"]["empty"] == 0 and dominant["summary"]["empty"] == 3


def test_threshold_rule_zero_cells_safe_and_sensitive(client):
    # 0 < count < 3: k0 B (1) and k2 C (2); zeros k0 C, k2 A, k2 B are empty cells.
    safe = post(client, small(threshold={"t": 3}))
    assert flagged(safe) == {"k0,B": ["threshold"], "k2,C": ["threshold"]}
    assert safe["summary"] == {
        "cells": 9,
        "unsafe": 2,
        "empty": 3,
        "marginals_unsafe": 0,
        "by_rule": {"threshold": 2},
    }
    assert safe["key_marginals"] == [] and safe["target_marginals"] == []
    sensitive = post(client, small(threshold={"t": 3, "zero_cells": "sensitive"}))
    assert set(flagged(sensitive)) == {"k0,B", "k2,C", "k0,C", "k2,A", "k2,B"}
    assert sensitive["summary"]["empty"] == 0


def test_threshold_rule_alone_needs_no_keys_or_targets(client):
    body = table({"region": ["N", "S"]}, {("N",): 2, ("S",): 7}, threshold={"t": 5})
    reply = post(client, body)
    assert [(c["key"], c["status"], c["rules"]) for c in reply["cells"]] == [
        (["N"], "unsafe", ["threshold"]),
        (["S"], "safe", []),
    ]


def test_threshold_and_extended_together(client):
    reply = post(client, small(threshold={"t": 3}, **extended(rule_1a=True, t_key_abs=1)))
    assert flagged(reply) == {"k0,A": ["1a"], "k0,B": ["threshold"], "k2,C": ["1a", "threshold"]}


# --------------------------------------------------------------------------- several targets
#
# key K x target T1 (a, b) x target T2 (x, y):
#   k0: a: x 5, y 0    b: x 2, y 1
#   k1: a: x 3, y 3    b: x 3, y 3
# Each target in turn, the other held fixed (module docstring of service.sdc.frequency).

CUBE_DIMS = {"K": ["k0", "k1"], "T1": ["a", "b"], "T2": ["x", "y"]}
CUBE = {
    ("k0", "a", "x"): 5,
    ("k0", "a", "y"): 0,
    ("k0", "b", "x"): 2,
    ("k0", "b", "y"): 1,
    ("k1", "a", "x"): 3,
    ("k1", "a", "y"): 3,
    ("k1", "b", "x"): 3,
    ("k1", "b", "y"): 3,
}


def test_several_target_variables(client):
    body = table(
        CUBE_DIMS,
        CUBE,
        keys=["K"],
        targets=["T1", "T2"],
        **extended(
            rule_1a=True, t_key_abs=2, rule_3=True, t_min_cell=2, t_min_key=2, t_min_target=4
        ),
    )
    reply = post(client, body)
    # 1a, t = 2, over T1 (f_k = sum over a, b): k0 x: 5+2 = 7, a x 5 >= 5; k0 y: 0+1 = 1,
    #   b y 1 >= -1. Over T2 (f_k = sum over x, y): k0 a: 5, a x 5 >= 3; k0 b: 2+1 = 3,
    #   b x 2 >= 1 and b y 1 >= 1. k1: rows of 6, 3 >= 4 fails. 3: k0 b y = 1 < 2.
    assert flagged(reply) == {"k0,a,x": ["1a"], "k0,b,x": ["1a"], "k0,b,y": ["1a", "3"]}
    # key marginals: over T1 (null at T1), then over T2 (null at T2); rule 3: k0 y = 1 < 2
    assert [(m["key"], m["count"], m["rules"]) for m in reply["key_marginals"]] == [
        (["k0", None, "x"], 7, []),
        (["k0", None, "y"], 1, ["3"]),
        (["k1", None, "x"], 6, []),
        (["k1", None, "y"], 6, []),
        (["k0", "a", None], 5, []),
        (["k0", "b", None], 3, []),
        (["k1", "a", None], 6, []),
        (["k1", "b", None], 6, []),
    ]
    # target marginals: summed over K; a y = 3 < 4
    assert [(m["key"], m["count"], m["rules"]) for m in reply["target_marginals"]] == [
        ([None, "a", "x"], 8, []),
        ([None, "a", "y"], 3, ["3"]),
        ([None, "b", "x"], 5, []),
        ([None, "b", "y"], 4, []),
    ]
    # only T1 as target: k0 b x (flagged over T2 only) is safe
    body["targets"] = ["T1"]
    assert set(flagged(post(client, body))) == {"k0,a,x", "k0,b,y"}


# --------------------------------------------------------------------------- key hierarchy
#
# municipalities x target (A, B); regions R0 = {m0, m1}, R1 = {m2, m3}; one country C.
#   m0: 95  5      R0: 103  7     C: 111 19
#   m1:  8  2      R1:   8 12
#   m2:  5  5
#   m3:  3  7

LEAF_DIMS = {"m": ["m0", "m1", "m2", "m3"], "Y": ["A", "B"]}
LEAVES = {
    ("m0", "A"): 95,
    ("m0", "B"): 5,
    ("m1", "A"): 8,
    ("m1", "B"): 2,
    ("m2", "A"): 5,
    ("m2", "B"): 5,
    ("m3", "A"): 3,
    ("m3", "B"): 7,
}
REGIONS = [{"m0": "R0", "m1": "R0", "m2": "R1", "m3": "R1"}, {"R0": "C", "R1": "C"}]


def test_hierarchical_key(client):
    body = table(
        LEAF_DIMS,
        LEAVES,
        keys=["m"],
        targets=["Y"],
        hierarchy={"m": REGIONS},
        **extended(rule_2a=True, t_key_rel=90),
    )
    reply = post(client, body)
    # leaves: m0 A 95/100 = 95 % >= 90. Level 1: R0 is checked (m0 A unsafe), R1 entirely
    # safe and skipped; R0 A 103/110 = 93.6 %: unsafe, which marks m0 A and m1 A. m1 A
    # alone is 8/10 = 80 %: flagged only through its region. Level 2: C is checked (R0 A
    # unsafe); 111/130 = 85.4 %: safe.
    assert flagged(reply) == {"m0,A": ["2a"], "m1,A": ["2a"]}
    inherited = {",".join(c["key"]): c["inherited"] for c in reply["cells"] if c["inherited"]}
    assert inherited == {"m0,A": ["2a"], "m1,A": ["2a"]}
    assert reply["levels"] == [
        {
            "dimension": "m",
            "target": "Y",
            "level": 1,
            "checked": [["R0", None]],
            "cells": [{"key": ["R0", "A"], "count": 103, "rules": ["2a"]}],
        },
        {"dimension": "m", "target": "Y", "level": 2, "checked": [["C", None]], "cells": []},
    ]
    # without the hierarchy only m0 A
    del body["dimensions"][0]["hierarchy"]
    reply = post(client, body)
    assert flagged(reply) == {"m0,A": ["2a"]}
    assert reply["levels"] == []


def test_areas_key_marginals_are_listed(client):
    """An area's count at the target's total is a key marginal too (seed 001 rule 3):
    /v1/suppress flagged it (README, count tables), and this route did not list it, so
    a caller reading the marginals here published North's 2 with ``t_min_key`` 3
    (2026-11-27). Now listed after the leaves' marginals, under their area codes, with
    the threshold rule's verdict where the request has it."""
    leaves = {**LEAVES, ("m1", "A"): 1, ("m1", "B"): 0, ("m0", "A"): 0, ("m0", "B"): 1}
    body = table(
        LEAF_DIMS, leaves, keys=["m"], targets=["Y"], hierarchy={"m": REGIONS},
        **extended(rule_3=True, t_min_key=3),
    )  # fmt: skip
    reply = post(client, body)
    areas = [m for m in reply["key_marginals"] if m["key"][0] in ("R0", "R1", "C")]
    assert areas == [
        {"key": ["R0", None], "sensitive": True, "count": 2, "rules": ["3"]},
        {"key": ["R1", None], "sensitive": False, "count": 20, "rules": []},
        {"key": ["C", None], "sensitive": False, "count": 22, "rules": []},
    ]
    assert reply["summary"]["marginals_unsafe"] == 3  # m0, m1 and R0
    body["rules"]["threshold"] = {"t": 25}
    areas = [m for m in post(client, body)["key_marginals"] if m["key"][0] in ("R1", "C")]
    assert [m["rules"] for m in areas] == [["threshold"], ["threshold"]]


def test_hierarchical_key_rule_1a_levels(client):
    # 1a, t = 2: leaves m1 A (rest 2 <= 2). Level 1: R0 checked; R0 A rest 7 > 2, safe;
    # R1 skipped. Level 2: nothing unsafe below, nothing checked.
    body = table(
        LEAF_DIMS,
        LEAVES,
        keys=["m"],
        targets=["Y"],
        hierarchy={"m": REGIONS},
        **extended(rule_1a=True, t_key_abs=2),
    )
    reply = post(client, body)
    assert flagged(reply) == {"m1,A": ["1a"]}
    assert all(c["inherited"] == [] for c in reply["cells"])
    assert [(lv["level"], lv["checked"], lv["cells"]) for lv in reply["levels"]] == [
        (1, [["R0", None]], []),
        (2, [], []),
    ]


# --------------------------------------------------------------------------- filter role


def test_filter_role_gets_decisions_only(make_client, tmp_path):
    secured = make_client(
        api_keys_file=write_keys(tmp_path / "keys.json", (FILTER_KEY, "filter", "sha256"))
    )
    body = table(
        LEAF_DIMS,
        LEAVES,
        keys=["m"],
        targets=["Y"],
        hierarchy={"m": REGIONS},
        **extended(
            rule_2a=True, t_key_rel=90, rule_3=True, t_min_cell=3, t_min_key=3, t_min_target=3
        ),
    )
    r = secured.post(URL, json=body, headers={"X-API-Key": FILTER_KEY})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["cells"] == [
        {"key": ["m0", "A"], "status": "unsafe", "sensitive": True},
        {"key": ["m0", "B"], "status": "safe", "sensitive": False},
        {"key": ["m1", "A"], "status": "unsafe", "sensitive": True},
        {"key": ["m1", "B"], "status": "unsafe", "sensitive": True},  # 2 < 3 (rule 3)
        {"key": ["m2", "A"], "status": "safe", "sensitive": False},
        {"key": ["m2", "B"], "status": "safe", "sensitive": False},
        {"key": ["m3", "A"], "status": "safe", "sensitive": False},
        {"key": ["m3", "B"], "status": "safe", "sensitive": False},
    ]
    assert reply["key_marginals"][0] == {"key": ["m0", None], "sensitive": False}
    assert reply["target_marginals"] == [
        {"key": [None, "A"], "sensitive": False},
        {"key": [None, "B"], "sensitive": False},
    ]
    assert reply["summary"] == {"cells": 8, "unsafe": 3, "empty": 0, "marginals_unsafe": 0}
    assert "levels" not in reply
    # The areas' key marginals are decisions too (the level reports are diagnostics).
    assert reply["key_marginals"][-3:] == [
        {"key": [area, None], "sensitive": False} for area in ("R0", "R1", "C")
    ]
    for word in ("rules", "count", "inherited", "2a", "103", "95", "checked"):
        assert word not in r.text


# --------------------------------------------------------------------------- bad input


def error(client, body, status=422) -> dict:
    r = client.post(URL, json=body)
    assert r.status_code == status, r.text
    (detail,) = r.json()["detail"]
    return detail


@pytest.mark.parametrize("count", [-4, 2.5])
def test_bad_count_names_the_cell(client, count):
    body = small(threshold={"t": 3})
    body["cells"][3]["count"] = count
    detail = error(client, body)
    assert (detail["field"], detail["cell"], detail["key"]) == ("count", 3, ["k1", "B"])


def test_errors_never_repeat_counts_or_thresholds(client):
    body = small(**extended(t_key_rel=123.456))
    body["cells"][0]["count"] = -98765
    r = client.post(URL, json=body)
    assert r.status_code == 422
    assert "98765" not in r.text and "123.456" not in r.text
    assert {d["field"] for d in r.json()["detail"]} == {"count", "rules.extended.t_key_rel"}


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda b: b.update(targets=["Z"]), "targets.0"),
        (lambda b: b.update(keys=["k", "nope"]), "keys.1"),
        (lambda b: b.update(targets=["k"]), "targets"),
        (lambda b: b.update(keys=[]), "keys"),
        (lambda b: b["rules"]["extended"].update(t_key_rel=0), "rules.extended.t_key_rel"),
        (
            lambda b: b["rules"]["extended"].update(t_target_rel=100.5),
            "rules.extended.t_target_rel",
        ),
        (lambda b: b["rules"]["extended"].update(t_key_abs=-1), "rules.extended.t_key_abs"),
        (lambda b: b["rules"]["extended"].update(zero_cells="all"), "rules.extended.zero_cells"),
        (lambda b: b.update(rules={"threshold": {"t": -1}}), "rules.threshold.t"),
        (lambda b: b.update(rules={}), "rules"),
        (lambda b: b["dimensions"][1].update(codes=["A", "B", "A"]), "dimensions.1.codes"),
        (
            lambda b: b["dimensions"][1].update(hierarchy=[{"A": "X", "B": "X", "C": "X"}]),
            "dimensions.1.hierarchy",
        ),
        (
            lambda b: b["dimensions"][0].update(hierarchy=[{"k0": "R", "k1": "R"}]),
            "dimensions.0.hierarchy.0",
        ),
        (
            lambda b: b["dimensions"][0].update(
                hierarchy=[{"k0": "R", "k1": "R", "k2": "R", "k9": "R"}]
            ),
            "dimensions.0.hierarchy.0",
        ),
        (
            lambda b: b["dimensions"][0].update(
                hierarchy=[{"k0": "R", "k1": "R", "k2": "S"}, {"R": "C"}]
            ),
            "dimensions.0.hierarchy.1",
        ),
    ],
)
def test_bad_request_names_the_field(client, change, field):
    body = small(**extended(rule_1a=True))
    change(body)
    assert error(client, body)["field"] == field


def test_unknown_code_and_duplicate_cell_name_the_cell(client):
    body = small(threshold={"t": 3})
    body["cells"][2]["key"] = ["k1", "Z"]
    detail = error(client, body)
    assert (detail["field"], detail["cell"], detail["key"]) == ("key", 2, ["k1", "Z"])
    assert "'Y'" in detail["message"]
    body["cells"][2]["key"] = ["k0", "A"]
    detail = error(client, body)
    assert (detail["field"], detail["cell"]) == ("key", 2)
    body["cells"][2]["key"] = ["k0"]
    assert error(client, body)["cell"] == 2


def test_table_over_the_cell_limit_413(make_client):
    client = make_client(max_cells=8)
    detail = error(client, small(threshold={"t": 3}), status=413)  # 3 x 3 = 9 cells
    assert detail["field"] == "dimensions"


def test_counts_adding_up_beyond_2_53_refused(client):
    body = table(
        {"k": ["a", "b"], "Y": ["A"]}, {("a", "A"): 2**53, ("b", "A"): 2**53}, threshold={"t": 3}
    )
    assert error(client, body)["field"] == "cells"


def test_metrics_count_cells_and_sensitive_cells(client):
    post(client, golden_body())
    text = client.get("/metrics").text
    assert "sdc_cells_evaluated_total 48.0" in text
    assert "sdc_sensitive_cells_total 16.0" in text


def test_the_threshold_rule_marks_marginals_too(client):
    """The threshold rule (t = 3) beside the extended rules: key k0's marginal counts 2.
    /v1/suppress marks such a margin primary ("margins included"), but this endpoint
    listed it not sensitive, with rule 3's verdict alone (a helper's campaign,
    2026-11-27). Now both rules judge the marginals."""
    off = {r: False for r in ("rule_1a", "rule_1b", "rule_2a", "rule_2b", "rule_3")}
    body = {
        "dimensions": [
            {"name": "k", "codes": ["k0", "k1"]},
            {"name": "y", "codes": ["y0", "y1"]},
        ],
        "keys": ["k"],
        "targets": ["y"],
        "cells": [
            {"key": ["k0", "y0"], "count": 1},
            {"key": ["k0", "y1"], "count": 1},
            {"key": ["k1", "y0"], "count": 5},
            {"key": ["k1", "y1"], "count": 5},
        ],
        "rules": {"threshold": {"t": 3}, "extended": off},
    }
    reply = client.post("/v1/frequency/sensitivity", json=body).json()
    marginals = {tuple(m["key"]): m for m in reply["key_marginals"]}
    assert marginals["k0", None] == {
        "key": ["k0", None],
        "sensitive": True,
        "count": 2,
        "rules": ["threshold"],
    }
    assert not marginals["k1", None]["sensitive"]
    assert reply["summary"]["marginals_unsafe"] == 1
