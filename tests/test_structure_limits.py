"""Table structure against hostile callers (issue 14): the table a structure spans and the
reply a frequency table gets are bounded by SDC_MAX_CELLS before anything of their size
is allocated; structure checks are linear and name a few codes, not all; hierarchies whose
codes name two things are refused; a broken margin is named without its difference.

Sizes are chosen so that the old code fails these tests by a clear margin (a table of
9 million cells, a quadratic check on 100,000 codes) while the new code answers in
milliseconds; a small ``max_cells`` shows that the limit counts margins and linked tables.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import numpy as np
import pytest

from service.sdc.errors import some
from service.sdc.table import Hierarchy, LinkedTables, StructureError, Table, table_size

FREQ = "/v1/frequency/sensitivity"


def flat(name: str, n: int, total: str = "Total") -> dict:
    return {"name": name, "leaves": [f"{name}{i}" for i in range(n)], "total": total}


def leaf_cells(*dims: dict) -> list[dict]:
    """A value of 1 in every leaf cell of flat dimensions."""
    keys = [[]]
    for d in dims:
        keys = [k + [leaf] for k in keys for leaf in d["leaves"]]
    return [{"key": k, "value": 1} for k in keys]


def detail_of(r, status: int) -> dict:
    assert r.status_code == status, r.text
    (detail,) = r.json()["detail"]
    return detail


def chain(n: int) -> dict[str, str]:
    """``child -> parent``: Total <- c0 <- c1 <- ... <- c(n-1), one leaf at depth n."""
    return {f"c{i}": (f"c{i - 1}" if i else "Total") for i in range(n)}


# --------------------------------------------------------------------------- table size


def test_table_product_is_refused_in_milliseconds_before_allocation(client):
    # 3000 x 3000 leaves and one cell: 9 million cells. The old code built them all
    # (about 1 GB and seconds) before answering a 422; now a 413 names the structure.
    body = {
        "structure": {"dimensions": [flat("a", 3000), flat("b", 3000)]},
        "cells": [{"key": ["a0", "b0"], "value": 1}],
    }
    tracemalloc.start()
    started = time.perf_counter()
    r = client.post("/v1/audit", json=body)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    detail = detail_of(r, 413)
    assert detail["field"] == "structure.dimensions"
    assert detail["message"] == (
        "9006001 table cells (margins included) exceed the limit of 1000000 per request"
    )
    assert seconds < 1.0
    assert peak < 40e6  # 9 million int64 cell numbers alone would be 72 MB


def single_child_chain(name: str, n: int) -> dict:
    """A dimension whose total sits on a chain of ``n`` codes with one child each, above
    a single leaf: ``n + 2`` codes, one leaf."""
    children = {"Total": ["c0"], **{f"c{i}": [f"c{i + 1}"] for i in range(n - 1)}}
    children[f"c{n - 1}"] = [f"{name}-leaf"]
    return {"name": name, "children": children}


@pytest.mark.parametrize("url", ["/v1/audit", "/v1/suppress", "/v1/round", "/v1/adjust"])
def test_margins_over_few_leaf_cells_are_refused(client, url):
    # Two chains of 998 single children over one leaf each: 10^6 cells, at the cell limit,
    # from a 36 KB body with one leaf cell. Served, /v1/adjust took 2.8 GiB and 25 s past a
    # 5 s time limit and /v1/round 2.2 GiB (a campaign, h51); now a 413 before any work.
    dims = [single_child_chain("a", 998), single_child_chain("b", 998)]
    cell = {"key": ["a-leaf", "b-leaf"], "value": 7}
    body = {"structure": {"dimensions": dims}, "cells": [cell], "time_limit": 5}
    if url == "/v1/round":
        body["base"] = 5
    detail = detail_of(client.post(url, json=body), 413)
    assert detail["field"] == "structure.dimensions"
    assert detail["message"].startswith(
        "the table has 1000000 cells (margins included) over 1 leaf cells: more than 64"
    )


def test_a_short_chain_of_single_children_is_served(client):
    # Below the floor of 100,000 cells a table may have any number of margins per leaf.
    dims = [single_child_chain("a", 300), single_child_chain("b", 300)]
    body = {
        "structure": {"dimensions": dims},
        "cells": [{"key": ["a-leaf", "b-leaf"], "value": 7, "suppressed": True}],
    }
    r = client.post("/v1/audit", json=body)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("url", ["/v1/audit", "/v1/suppress"])
def test_margins_count_toward_the_limit(make_client, url):
    # 10 x 10 leaves are 100 leaf cells but 11 x 11 = 121 cells with the margins.
    client = make_client(max_cells=120)
    body = {
        "structure": {"dimensions": [flat("a", 10), flat("b", 10)]},
        "cells": [{"key": ["a0", "b0"], "value": 1}],
    }
    detail = detail_of(client.post(url, json=body), 413)
    assert detail["field"] == "structure.dimensions"
    assert detail["message"].startswith("121 table cells (margins included)")


def test_a_table_at_the_limit_is_served(make_client):
    client = make_client(max_cells=121)
    dims = [flat("a", 10), flat("b", 10)]
    r = client.post(
        "/v1/audit", json={"structure": {"dimensions": dims}, "cells": leaf_cells(*dims)}
    )
    assert r.status_code == 200, r.text
    assert r.json()["verdict"] == "safe"


def test_hierarchy_codes_count_every_level(make_client):
    # Total, N, S and three leaves: 6 codes, so 6 x 6 = 36 cells.
    dim = {"name": "r", "children": {"Total": ["N", "S"], "N": ["m1", "m2"], "S": ["m3"]}}
    body = {
        "structure": {"dimensions": [dim, {**dim, "name": "q"}]},
        "cells": [
            {"key": [a, b], "value": 1} for a in ("m1", "m2", "m3") for b in ("m1", "m2", "m3")
        ],
    }
    detail = detail_of(make_client(max_cells=35).post("/v1/audit", json=body), 413)
    assert (detail["field"], detail["message"][:3]) == ("structure.dimensions", "36 ")
    assert make_client(max_cells=36).post("/v1/audit", json=body).status_code == 200


def test_linked_tables_count_the_sum_of_their_tables(make_client):
    # Two one-dimensional tables of 61 cells each: 122 cells, though every combination
    # of both dimensions (61 x 61) would be far more.
    a, b = flat("a", 60), flat("b", 60)
    body = {
        "structure": {"dimensions": [a, b], "tables": [["a"], ["b"]]},
        "cells": [{"key": [x, "Total"], "value": 1} for x in a["leaves"]]
        + [{"key": ["Total", y], "value": 1} for y in b["leaves"]],
    }
    detail = detail_of(make_client(max_cells=121).post("/v1/audit", json=body), 413)
    assert (detail["field"], detail["message"][:4]) == ("structure.tables", "122 ")
    assert make_client(max_cells=122).post("/v1/audit", json=body).status_code == 200


def test_linked_dimensions_beyond_int64_are_a_422_not_a_500(client):
    # Four tables of two 250-code dimensions: 250,000 cells, but the eight dimensions
    # together have 250**8 > 2**63 combinations, which numbered the linked cells before
    # (a ValueError and a 500).
    dims = [flat(f"d{i}", 249) for i in range(8)]
    body = {
        "structure": {
            "dimensions": dims,
            "tables": [[f"d{i}", f"d{i + 1}"] for i in range(0, 8, 2)],
        },
        "cells": [{"key": ["d00", "d10"] + ["Total"] * 6, "value": 1}],
    }
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert detail["field"] == "structure.tables"
    assert "too many combinations" in detail["message"]


def test_table_size_is_exact_in_python_ints():
    assert table_size([100_000] * 8) == 10**40
    big = [Hierarchy.flat(f"d{i}", [f"x{k}" for k in range(300)]) for i in range(8)]
    with pytest.raises(StructureError, match="too many cells"):
        Table(big)  # 301**8 > 2**63: refused, not wrapped around
    with pytest.raises(StructureError, match="too many combinations"):
        LinkedTables([Table(big[i : i + 2]) for i in range(0, 8, 2)])


# --------------------------------------------------------------------------- frequency reply


def freq_body(n_keys: int, n_targets: int, **rules) -> dict:
    return {
        "dimensions": [
            {"name": "k", "codes": [f"k{i}" for i in range(n_keys)]},
            {"name": "y", "codes": [f"y{i}" for i in range(n_targets)]},
        ],
        "keys": ["k"],
        "targets": ["y"],
        "cells": [{"key": ["k0", "y0"], "count": 5}],
        "rules": rules or {"extended": {}},
    }


def test_frequency_reply_is_bounded_before_computing(client):
    # 1000 x 1000 codes and one cell (15 KiB): the old code answered 95 MB after seconds.
    started = time.perf_counter()
    detail = detail_of(client.post(FREQ, json=freq_body(1000, 1000)), 413)
    assert time.perf_counter() - started < 1.0
    assert detail["field"] == "dimensions"
    # 1,000,000 cells, 1000 key marginals and 1000 target marginals.
    assert detail["message"].startswith("1002000 cells, marginals and areas in the reply")


def test_frequency_limit_counts_every_entry_of_the_reply(make_client):
    # 3 x 3 cells, 3 key marginals, 3 target marginals: 15 entries. The old check counted
    # the 9 cells only.
    body = freq_body(3, 3)
    assert detail_of(make_client(max_cells=14).post(FREQ, json=body), 413)["field"] == "dimensions"
    r = make_client(max_cells=15).post(FREQ, json=body)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert len(reply["cells"]) + len(reply["key_marginals"]) + len(reply["target_marginals"]) == 15
    # The threshold rule alone lists the cells only.
    assert (
        make_client(max_cells=9).post(FREQ, json=freq_body(3, 3, threshold={"t": 3})).status_code
        == 200
    )


def test_frequency_limit_counts_the_levels_of_a_key_hierarchy(make_client):
    # Level 1 has 2 areas: up to 2 x 3 area cells and 2 area rows, 8 more for analysts.
    body = freq_body(3, 3)
    body["dimensions"][0]["hierarchy"] = [{"k0": "R", "k1": "R", "k2": "S"}]
    assert make_client(max_cells=22).post(FREQ, json=body).status_code == 413
    assert make_client(max_cells=23).post(FREQ, json=body).status_code == 200


# --------------------------------------------------------------------------- linear checks


def test_duplicate_leaf_at_the_end_of_100000_is_found_in_linear_time():
    leaves = [f"c{i}" for i in range(100_000)] + ["c99990"]
    started = time.perf_counter()
    with pytest.raises(StructureError, match="code 'c99990' is listed twice") as e:
        Hierarchy.flat("d", leaves)
    assert time.perf_counter() - started < 0.5  # the old check took minutes
    assert e.value.code == "c99990"


def test_duplicate_leaf_through_the_api(client):
    leaves = [f"c{i}" for i in range(99_999)] + ["c5"]
    body = {
        "structure": {"dimensions": [{"name": "d", "leaves": leaves}]},
        "cells": [{"key": ["c1"], "value": 1}],
    }
    started = time.perf_counter()
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert time.perf_counter() - started < 1.5
    assert detail["field"] == "structure.dimensions.0"
    assert detail["message"] == "dimension 'd': code 'c5' is listed twice"


def test_unreachable_cycle_of_60000_codes_is_named_briefly(client):
    children = {"Total": ["x"], **{f"c{i}": [f"c{(i + 1) % 60_000}"] for i in range(60_000)}}
    body = {
        "structure": {"dimensions": [{"name": "d", "children": children}]},
        "cells": [{"key": ["x"], "value": 1}],
    }
    started = time.perf_counter()
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert time.perf_counter() - started < 1.5  # 53 s and a 709 KB message before
    assert detail["field"] == "structure.dimensions.0"
    assert detail["message"] == (
        "dimension 'd': codes 'c0' -> 'c59999' -> 'c59998' -> 'c59997' -> 'c59996' and "
        "59995 more form a cycle, so 'c0' does not roll up to the total 'Total'"
    )


def test_short_cycle_is_named_in_full():
    with pytest.raises(StructureError, match="codes 'A' -> 'C' -> 'B' -> 'A' form a cycle"):
        Hierarchy("d", {"Total": None, "x": "Total", "A": "C", "B": "A", "C": "B"})


@pytest.mark.parametrize(
    "parents, listed",
    [
        (
            {f"c{i}": None for i in range(10_000)},
            "several roots ('c0', 'c1', 'c2', 'c3', 'c4' and 9995 more)",
        ),
        (
            {f"c{i}": f"p{i}" for i in range(10_000)},
            "several roots: 'p0', 'p1', 'p2', 'p3', 'p4' and 9995 more are parents",
        ),
    ],
)
def test_many_roots_are_named_briefly(parents, listed):
    with pytest.raises(StructureError) as e:
        Hierarchy("d", parents)
    assert listed in str(e.value)
    assert len(str(e.value)) < 300


def test_some_names_five_codes_then_counts():
    assert some(["a"]) == "'a'"
    assert some([f"c{i}" for i in range(5)]) == "'c0', 'c1', 'c2', 'c3', 'c4'"
    assert (
        some([f"c{i}" for i in range(7)], " -> ")
        == "'c0' -> 'c1' -> 'c2' -> 'c3' -> 'c4' and 2 more"
    )


def test_chain_of_100000_codes_without_recursion_or_quadratic_work():
    started = time.perf_counter()
    h = Hierarchy("d", chain(100_000))
    table = Table([h])
    values = table.fill_margins(np.where(table.is_leaf, 3.0, np.nan))
    assert time.perf_counter() - started < 3.0
    assert int(h.depth.max()) == 100_000 and h.depth[:3].tolist() == [0, 1, 2]
    assert np.all(values == 3.0)  # every code sums the one leaf


def test_fill_margins_of_a_deep_broad_tree_without_the_leaf_matrix():
    # A chain of 3000 codes with 3000 leaves under its end: the codes x leaves matrix has
    # 9 million entries (over 100 MB); rolling up level by level needs the cells only.
    parents = {**chain(3000), **{f"l{i}": "c2999" for i in range(3000)}}
    table = Table([Hierarchy("d", parents), Hierarchy.flat("y", ["A", "B"])])
    x = np.where(table.is_leaf, 1.0, np.nan)
    tracemalloc.start()
    filled = table.fill_margins(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 10e6
    grid = filled.reshape(table.shape)
    assert grid[0].tolist() == [6000.0, 3000.0, 3000.0]  # the total: every leaf
    assert grid[3000].tolist() == [6000.0, 3000.0, 3000.0]  # c2999, just above them
    assert grid[3001].tolist() == [2.0, 1.0, 1.0]  # a leaf


def test_fill_margins_equals_the_sum_of_leaves_on_random_trees():
    rng = np.random.default_rng(14)
    for _ in range(40):
        dims = []
        for d in range(int(rng.integers(1, 4))):
            n = int(rng.integers(1, 25))
            dims.append(
                Hierarchy(
                    f"d{d}",
                    {
                        f"c{i}": "T" if i == 0 or rng.random() < 0.3 else f"c{rng.integers(0, i)}"
                        for i in range(n)
                    },
                )
            )
        table = Table(dims)
        x = rng.normal(size=table.n_cells)
        filled = table.fill_margins(x)
        np.testing.assert_allclose(
            filled, table.aggregation @ x[table.is_leaf], rtol=1e-12, atol=1e-12
        )
        assert np.abs(table.relations @ filled).max(initial=0) < 1e-9
    # A dimension of the total alone has nothing to add up.
    table = Table([Hierarchy.from_children("t", {"T": []}), Hierarchy.flat("y", ["a", "b"])])
    assert table.fill_margins([np.nan, 2.0, 5.0]).tolist() == [7.0, 2.0, 5.0]


def test_deep_key_of_a_count_table_is_refused(client):
    # Rules 1a and 2a repeat at every level of a key: a chain of 1000 codes is 999 levels.
    children = {"Total": ["c0"], **{f"c{i}": [f"c{i + 1}"] for i in range(999)}}
    body = {
        "structure": {
            "dimensions": [{"name": "k", "children": children}, {"name": "y", "leaves": ["A", "B"]}]
        },
        "cells": [{"key": ["c999", "A"], "value": 3}, {"key": ["c999", "B"], "value": 4}],
        "counts": {"extended": {}, "keys": ["k"], "targets": ["y"]},
    }
    started = time.perf_counter()
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert time.perf_counter() - started < 1.5
    assert detail["field"] == "counts.keys"
    assert "at most 10 levels" in detail["message"] and "has 999" in detail["message"]


# --------------------------------------------------------------------------- one code, one thing


def freq_hierarchy(levels: list[dict]) -> dict:
    body = freq_body(3, 2)
    body["dimensions"][0]["hierarchy"] = levels
    return body


def test_frequency_code_under_two_areas_is_refused(client):
    # A JSON object repeating a key: the parser kept the last silently, so k0 was put
    # under S without a word. Refused for every body (service/api/body.py), naming the
    # code in the field.
    raw = json.dumps(freq_hierarchy([{"k0": "R", "k1": "R", "k2": "S"}, {"R": "C", "S": "C"}]))
    for repeated, field in (
        ('"k0": "R", "k0": "S"', "dimensions.0.hierarchy.0.k0"),
        ('"R": "C", "R": "D"', "dimensions.0.hierarchy.1.R"),
    ):
        sent = raw.replace(repeated.split(", ")[0], repeated)
        r = client.post(FREQ, content=sent, headers={"content-type": "application/json"})
        assert detail_of(r, 422)["field"] == field


@pytest.mark.parametrize(
    "levels, lvl, message",
    [
        (
            [{"k0": "R", "k1": "R", "k2": "S"}, {"R": "k0", "S": "k0"}],
            1,
            "level-2 area 'k0' has the name of a leaf code",
        ),
        ([{"k0": "k1", "k1": "k1", "k2": "S"}], 0, "level-1 area 'k1' has the name of a leaf code"),
        (
            [{"k0": "R", "k1": "R", "k2": "S"}, {"R": "R", "S": "R"}],
            1,
            "level-2 area 'R' has the name of a level-1 area",
        ),
    ],
)
def test_frequency_area_named_like_another_code_is_refused(client, levels, lvl, message):
    detail = detail_of(client.post(FREQ, json=freq_hierarchy(levels)), 422)
    assert detail["field"] == f"dimensions.0.hierarchy.{lvl}"
    assert detail["message"].startswith(message)


@pytest.mark.parametrize("counts", [None, {"threshold": 3}])
def test_children_code_under_two_areas_is_refused(client, counts):
    # Magnitude and count tables share the 'children' form, where every name is one code.
    body = {
        "structure": {
            "dimensions": [
                {"name": "k", "children": {"Total": ["N", "S"], "N": ["m1", "m2"], "S": ["m2"]}},
                {"name": "y", "leaves": ["A"]},
            ]
        },
        "cells": [{"key": ["m1", "A"], "value": 3}, {"key": ["m2", "A"], "value": 4}],
    }
    if counts:
        body["counts"] = counts
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert detail["field"] == "structure.dimensions.0"
    assert detail["message"] == "dimension 'k': code 'm2' is listed under both 'N' and 'S'"


def test_children_code_twice_under_one_parent():
    with pytest.raises(StructureError, match="code 'a' is listed twice under 'T'"):
        Hierarchy.from_children("d", {"T": ["a", "b", "a"]})


# --------------------------------------------------------------------------- no data echoed


def test_margin_error_names_the_cell_without_the_difference(client):
    dims = [flat("r", 2, "T"), flat("c", 2, "T")]
    cells = leaf_cells(*dims) + [{"key": ["r0", "T"], "value": 987654}]
    detail = detail_of(
        client.post("/v1/audit", json={"structure": {"dimensions": dims}, "cells": cells}), 422
    )
    assert (detail["field"], detail["cell"], detail["key"]) == ("value", 4, ["r0", "T"])
    assert detail["message"] == (
        "margins do not add up: dimension 'c': 'T' = sum of its 2 "
        "children at r='r0' does not hold within "
        "structure.tolerance (0)"
    )
    for echoed in ("987654", "987652", "-987652"):
        assert echoed not in detail["message"]


# --------------------------------------------------------------------------- cells and keys


def test_unknown_code_after_many_cells_is_named_in_linear_time(client):
    # Each cell was looked up again to find the one to name: 40,000 cells took 11 s.
    n = 20_000
    body = {
        "structure": {"dimensions": [flat("d", n)]},
        "cells": [{"key": [f"d{i}"], "value": 1} for i in range(n - 1)]
        + [{"key": ["zz"], "value": 1}],
    }
    started = time.perf_counter()
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert time.perf_counter() - started < 2.0
    assert (detail["field"], detail["cell"], detail["key"]) == ("key", n - 1, ["zz"])
    assert detail["message"] == "dimension 'd' has no code 'zz'"


def test_the_cell_named_is_the_one_with_the_code_named(client):
    # Cell 0 has an unknown code on the second dimension, cell 1 on the first; the
    # message names the first dimension's, so the cell is 1 (the old code said 0).
    body = {
        "structure": {"dimensions": [flat("a", 2), flat("b", 2)]},
        "cells": [{"key": ["a0", "zz"], "value": 1}, {"key": ["qq", "b0"], "value": 1}],
    }
    detail = detail_of(client.post("/v1/audit", json=body), 422)
    assert (detail["cell"], detail["key"]) == (1, ["qq", "b0"])
    assert detail["message"] == "dimension 'a' has no code 'qq'"


def test_cell_keys_share_the_code_strings():
    # 300 x 300 codes of 200 characters: a fixed-width string array of every cell's key
    # took 144 MB (GBs at a million cells); references to the codes take a few.
    dims = [Hierarchy.flat(n, [n * 195 + f"{i:05d}" for i in range(299)]) for n in "ab"]
    table = Table(dims)
    tracemalloc.start()
    keys = table.keys
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20e6
    assert keys.shape == (90_000, 2)
    assert keys[300].tolist() == ["a" * 195 + "00000", "Total"] == list(table.key(300))
    assert keys[300, 0] is dims[0].codes[1]


# ------------------------------------------------------- deep hierarchies over their leaves


def broom(depth: int, leaves: int) -> dict:
    """A chain of ``depth`` codes under the total, ``leaves`` leaves at its end."""
    children = {"Total": ["c0"], **{f"c{i}": [f"c{i + 1}"] for i in range(depth - 1)}}
    children[f"c{depth - 1}"] = [f"l{j}" for j in range(leaves)]
    return {"name": "r", "children": children}


def test_a_deep_chain_over_many_leaves_is_refused_before_its_leaf_map():
    """3,000 chain codes over 3,000 leaves: 6,001 x 2 cells, but every leaf lies under
    3,002 x 2 cells, 18 million entries of the cell-to-leaf map, over 16 per allowed cell
    (max_cells 1,000,000). Before, the audit built them (13.6 s, 2.8 GB)."""
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.config import Settings

    client = TestClient(create_app(Settings(max_cells=1_000_000)))
    dims = [broom(3000, 3000), flat("s", 1)]
    cells = [
        {"key": [f"l{j}", "s0"], "contributions": [{"value": 5.0}, {"value": 3.0}, {"value": 1.0}]}
        for j in range(3000)
    ]
    body = {
        "structure": {"dimensions": dims},
        "rules": {"rules": [{"type": "p_percent", "p": 15}]},
        "cells": cells,
    }
    started = time.perf_counter()
    detail = detail_of(client.post("/v1/audit", json=body), 413)
    assert time.perf_counter() - started < 2.0
    assert detail["field"] == "structure.dimensions"
    assert "18012000 entries" in detail["message"] and "too deep" in detail["message"]


def test_pooled_contributions_are_bounded(make_client):
    """Margins pool their leaves' contributions: 2 x 2 leaves with 3 contributions each
    are pooled into 3 margins each (36 entries). A limit of 2 cells (32 map entries)
    refuses it with the count; the structure check passes (2 x 2 flat: 16 entries)."""
    client = make_client(max_cells=9)
    dims = [flat("a", 2), flat("b", 2)]
    cells = [
        {"key": [a, b], "contributions": [{"value": 5.0}, {"value": 3.0}, {"value": 1.0}]}
        for a in ("a0", "a1")
        for b in ("b0", "b1")
    ]
    body = {
        "structure": {"dimensions": dims},
        "rules": {"rules": [{"type": "p_percent", "p": 15}]},
        "cells": cells,
    }
    assert client.post("/v1/audit", json=body).status_code == 200
    from service.pipeline import tables

    old = tables.LEAF_MAP_FACTOR
    try:
        tables.LEAF_MAP_FACTOR = 3  # 27 entries allowed: the pooling needs 36
        detail = detail_of(client.post("/v1/audit", json=body), 413)
    finally:
        tables.LEAF_MAP_FACTOR = old
    assert detail["field"] == "cells" and "needs 36 entries" in detail["message"]
