"""POST /v1/noise (issue 17 part 4; seed 003 B.4): a magnitude table with the service's
keyed multiplicative noise, cells with too little noise flagged or suppressed, and each
cell's relative change."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.profiles import Profile
from service.pipeline.noisy_table import derivable_cells, intruder_noise
from service.sdc import noise
from service.sdc.problem import relations_of
from service.sdc.table import Hierarchy, Table
from tests.callers import ANALYST_KEY, FILTER_KEY

SECRET = b"test-noise-secret"


def table(**extra) -> dict:
    """2x2 leaves; e5 and e6 belong to one enterprise g1 (one noise direction)."""
    out = {
        "structure": {
            "dimensions": [
                {"name": "size", "leaves": ["A", "B"]},
                {"name": "act", "leaves": ["I", "II"]},
            ]
        },
        "cells": [
            {
                "key": ["A", "I"],
                "contributions": [{"value": 100}, {"value": 50}],
                "respondents": ["e1", "e2"],
                "protection": {"upper": 10, "lower": 10},
            },
            {"key": ["A", "II"], "contributions": [{"value": 200}], "respondents": ["e3"]},
            {
                "key": ["B", "I"],
                "contributions": [{"value": 40}, {"value": 60, "holding": "g1"}],
                "respondents": ["e4", "e5"],
                "protection": {"upper": 5, "lower": 8},
            },
            {
                "key": ["B", "II"],
                "contributions": [{"value": 300, "holding": "g1"}],
                "respondents": ["e6"],
                "protection": {"upper": 20, "lower": 40},
            },
        ],
        "noise": {"d": 0.1, "jitter": 0.0},
    }
    out.update(extra)
    return out


# With jitter 0 every multiplier is 1.1 or 0.9 by its enterprise's keyed direction:
# e1 up; e2, e3, e4 and g1 down (asserted in the first test). Noisy leaves:
# A,I = 110 + 45 = 155 (true 150), A,II = 180 (200), B,I = 36 + 54 = 90 (100),
# B,II = 270 (300); margins the sums.
NOISY = {
    ("Total", "Total"): (695.0, 750.0),
    ("Total", "I"): (245.0, 250.0),
    ("Total", "II"): (450.0, 500.0),
    ("A", "Total"): (335.0, 350.0),
    ("A", "I"): (155.0, 150.0),
    ("A", "II"): (180.0, 200.0),
    ("B", "Total"): (360.0, 400.0),
    ("B", "I"): (90.0, 100.0),
    ("B", "II"): (270.0, 300.0),
}
# The noise left to an intruder who knows its own multiplier (the largest respondent is
# protected; any other may be the intruder) against the larger protection level: A,I (e1
# 100 protected, e2 knows its -5) min(|5|, |5 + 5|) = 5 < 10; B,II (g1
# alone, an outsider sees all of it) 30 < 40; B,I (g1 60 protected, e4 knows its -4)
# min(10, |-10 + 4|) = 6 < 8, though its whole noise 10 would be enough.
TOO_LITTLE = {("A", "I"), ("B", "II"), ("B", "I")}


@pytest.fixture
def client(make_client):
    return make_client(noise_secret=SECRET)


def by_key(reply):
    return {tuple(c["key"]): c for c in reply["cells"]}


def test_the_keyed_directions_the_hand_check_uses():
    assert noise.directions(["e1", "e2", "e3", "e4", "g1"], SECRET).tolist() == [
        1.0,
        -1.0,
        -1.0,
        -1.0,
        -1.0,
    ]


def test_noisy_table_hand_checked(client):
    r = client.post("/v1/noise", json=table())
    assert r.status_code == 200, r.text
    cells = by_key(r.json())
    for k, (noisy, true) in NOISY.items():
        assert cells[k]["value"] == pytest.approx(noisy), k
        assert cells[k]["relative_change"] == pytest.approx((noisy - true) / true), k
        assert cells[k]["status"] == ("flagged" if k in TOO_LITTLE else "published")
    assert r.json()["summary"] == {
        "cells": 9,
        "sensitive": 3,
        "flagged": 3,
        "max_relative_change": pytest.approx(0.1),
        "mean_relative_change": pytest.approx(sum(abs(n - t) / t for n, t in NOISY.values()) / 9),
    }


def test_suppress_option_and_derivable_cells(client):
    reply = client.post("/v1/noise", json=table(flagged="suppress")).json()
    cells = by_key(reply)
    for k in TOO_LITTLE:
        # A,I is the only unknown of row A (A,Total - A,II), then B,I of column I, then
        # B,II of row B: each noisy value follows from the published ones.
        assert cells[k] == {
            "key": list(k),
            "status": "suppressed",
            "value": None,
            "relative_change": pytest.approx(cells[k]["relative_change"]),
            "sensitive": True,
            "derivable": True,
        }
    assert cells[("A", "II")]["value"] == pytest.approx(180.0)
    # Max and mean over published cells only.
    published = [(n - t) / t for k, (n, t) in NOISY.items() if k not in TOO_LITTLE]
    assert reply["summary"]["mean_relative_change"] == pytest.approx(
        sum(map(abs, published)) / len(published)
    )


def test_filter_role_gets_published_noisy_values_only(make_client, key_file):
    policy = {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "filter": {
            "statistical": {
                "approach": "noise",
                "d": 0.1,
                "jitter": 0.0,
                "ratio_range": [0.5, 1.5],
                "min_weighted_count": 0,
                "p": 10,
            }
        },
    }
    secured = make_client(
        api_keys_file=key_file,
        noise_secret=SECRET,
        profiles={"survey": Profile.model_validate(policy)},
    )
    body = table(profile="survey")
    del body["noise"]
    for c in body["cells"]:
        c.pop("protection", None)
    inline = secured.post("/v1/noise", json=table(), headers={"X-API-Key": FILTER_KEY})
    assert inline.status_code == 403
    r = secured.post("/v1/noise", json=body, headers={"X-API-Key": FILTER_KEY})
    assert r.status_code == 200, r.text
    # p% with p = 10: A,I (100, 50) needs 10 and has 5, so it is flagged; the others are
    # published with their noisy values, and nothing else is said.
    cells = by_key(r.json())
    assert cells[("A", "I")] == {"key": ["A", "I"], "status": "flagged", "value": None}
    for k, (noisy, _) in NOISY.items():
        if k != ("A", "I"):
            assert cells[k] == {"key": list(k), "status": "published", "value": noisy}
    assert "relative_change" not in r.text and "max_relative_change" not in r.json()["summary"]
    analyst = secured.post("/v1/noise", json=body, headers={"X-API-Key": ANALYST_KEY}).json()
    assert by_key(analyst)[("A", "I")]["value"] == pytest.approx(155.0)


def test_errors_name_the_field_and_cell(client, make_client):
    no_secret = make_client().post("/v1/noise", json=table())
    assert no_secret.status_code == 422 and "SDC_NOISE_SECRET" in no_secret.text
    b = table()
    b["cells"][2]["respondents"] = ["e4"]
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert (detail["field"], detail["cell"]) == ("respondents", 2)
    b = table()
    b["cells"][1] = {"key": ["A", "II"], "value": 200}
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert (detail["field"], detail["cell"]) == ("contributions", 1)
    b = table()
    b["cells"][3]["respondents"] = ["e5"]  # e5 is listed under e4's row with holding g1
    b["cells"][3]["contributions"][0]["holding"] = "g2"
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert detail["field"] == "contributions.holding" and detail["cell"] == 3
    b = table(noise={"d": 0.1, "jitter": 0.2})
    assert client.post("/v1/noise", json=b).status_code == 422
    b = table()
    del b["noise"]
    detail = client.post("/v1/noise", json=b).json()["detail"][0]
    assert detail["field"] == "noise"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.integers(1, 1000), min_size=6, max_size=6),
    d=st.floats(0.01, 0.45),
    spread=st.floats(0, 0.99),
)
def test_noisy_tables_add_up_and_move_each_leaf_within_the_level(client, values, d, spread):
    jitter = d * spread
    keys = [(r, c) for r in "ab" for c in "xyz"]
    body = {
        "structure": {
            "dimensions": [
                {"name": "r", "leaves": ["a", "b"]},
                {"name": "c", "leaves": list("xyz")},
            ]
        },
        "cells": [
            {"key": list(k), "contributions": [{"value": v}], "respondents": [f"r{i}"]}
            for i, (k, v) in enumerate(zip(keys, values))
        ],
        "noise": {"d": d, "jitter": jitter},
    }
    first = client.post("/v1/noise", json=body).json()
    assert client.post("/v1/noise", json=body).json() == first  # keyed: reproducible
    cells = by_key(first)
    for k in keys:
        assert abs(cells[k]["relative_change"]) <= d + jitter + 1e-12
        assert abs(cells[k]["relative_change"]) >= d - jitter - 1e-12
    for r in "ab":
        assert cells[(r, "Total")]["value"] == pytest.approx(
            sum(cells[(r, c)]["value"] for c in "xyz")
        )
    assert cells[("Total", "Total")]["value"] == pytest.approx(sum(cells[k]["value"] for k in keys))


def test_a_respondent_alone_in_a_cell_learns_its_multiplier(client):
    # The multiplier is keyed on the respondent alone (service.sdc.noise), so e4, alone
    # in I (40 published as 36), reads its multiplier 0.9 and subtracts 0.9 x 20 = 18
    # from II rather than 20: of II's noise (g1's e5 100 -> 90, e4 20 -> 18: -12) only
    # g1's -10 still hides g1 from it. Level 11: |-12| >= 11 would pass; 10 < 11 does not.
    # And g1, knowing its own -10, is left 2 to hide e4: a level given on the cell says
    # nothing of whom it protects, so it holds for e4 too (2 < 10); a level of 2 passes.
    body = {
        "structure": {"dimensions": [{"name": "act", "leaves": ["I", "II"]}]},
        "cells": [
            {"key": ["I"], "contributions": [{"value": 40}], "respondents": ["e4"]},
            {
                "key": ["II"],
                "contributions": [{"value": 100, "holding": "g1"}, {"value": 20}],
                "respondents": ["e5", "e4"],
                "protection": {"upper": 11, "lower": 11},
            },
        ],
        "noise": {"d": 0.1, "jitter": 0.0},
    }
    cells = by_key(client.post("/v1/noise", json=body).json())
    assert cells[("I",)]["value"] == pytest.approx(36.0)
    assert cells[("II",)]["value"] == pytest.approx(108.0)
    assert cells[("II",)]["status"] == "flagged"
    body["cells"][1]["protection"] = {"upper": 10, "lower": 10}
    assert by_key(client.post("/v1/noise", json=body).json())[("II",)]["status"] == "flagged"
    body["cells"][1]["protection"] = {"upper": 2, "lower": 2}
    assert by_key(client.post("/v1/noise", json=body).json())[("II",)]["status"] == "published"


def test_intruder_noise_coalitions_and_single_units():
    # One leaf, three units: target t (100, noise +10), r1 (30, -3), r2 (20, +2): D = 9.
    # c = 1: min(|9|, |9 + 3|, |9 - 2|) = 7; c = 2: also |9| - (3 + 2) = 4.
    members = sp.csr_matrix(np.ones((1, 1)))
    rows = np.zeros(3, np.int64)
    unit = np.array([0, 1, 2])
    moved, weighted = np.array([10.0, -3.0, 2.0]), np.array([100.0, 30.0, 20.0])
    sens, d = np.array([True]), np.array([9.0])
    assert intruder_noise(members, rows, unit, moved, weighted, sens, d, 1)[0][0] == 7
    assert intruder_noise(members, rows, unit, moved, weighted, sens, d, 2)[0][0] == 4
    # t, knowing its own +10, is left |9 - 10| = 1 to hide r1 and r2; with r1 or r2 in
    # its coalition (c = 2), max(1 - 3, 0) = 0.
    assert intruder_noise(members, rows, unit, moved, weighted, sens, d, 1)[1][0] == 1
    assert intruder_noise(members, rows, unit, moved, weighted, sens, d, 2)[1][0] == 0
    # One unit (two establishments of a holding): an outsider, the whole noise.
    one = np.array([0, 0, 0])
    assert intruder_noise(members, rows, one, moved, weighted, sens, d, 1)[0][0] == 9


def bridge_table():
    t = Table(
        [Hierarchy.flat("r", ["A", "B", "C"], "T"), Hierarchy.flat("c", ["I", "II", "III"], "T")]
    )
    return t


def test_derivable_finds_a_cell_no_single_relation_gives():
    # Two suppressed rectangles (A,B x I,II and C,T x III,T) and B,III between them: no
    # relation has one unknown (the old peeling found nothing), but rows A + B minus
    # columns I + II leave B,III alone, so its noisy value is published in effect. The
    # rectangles are cycles: each cell can move around its cycle, not derivable.
    t = bridge_table()
    keys = [("A", "I"), ("A", "II"), ("B", "I"), ("B", "II"), ("C", "III"), ("C", "T"),
            ("T", "III"), ("T", "T"), ("B", "III")]  # fmt: skip
    suppressed = np.zeros(t.n_cells, bool)
    for k in keys:
        suppressed[t.cell_index(k)] = True
    got = derivable_cells(t, suppressed)
    assert [t.key(int(j)) for j in np.flatnonzero(got)] == [("B", "III")]
    # With A,I published too, row A and column I give A,II and B,I, and then the rest of
    # that rectangle: B,II (row B, once B,I and B,III are known).
    suppressed[t.cell_index(("A", "I"))] = False
    got = {t.key(int(j)) for j in np.flatnonzero(derivable_cells(t, suppressed))}
    assert got == {("A", "II"), ("B", "I"), ("B", "II"), ("B", "III")}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), rows=st.integers(1, 4), cols=st.integers(1, 4))
def test_derivable_is_the_rank_test(data, rows, cols):
    """A suppressed cell is derivable iff adding its unit vector to the unknowns' relations
    does not raise their rank (numpy's rank, apart from the function's own method)."""
    t = Table([Hierarchy.flat("r", [f"r{i}" for i in range(rows)], "T"),
               Hierarchy.flat("c", [f"c{j}" for j in range(cols)], "T")])  # fmt: skip
    suppressed = np.array(
        data.draw(st.lists(st.booleans(), min_size=t.n_cells, max_size=t.n_cells))
    )
    got = derivable_cells(t, suppressed)
    a = relations_of(t).toarray()[:, suppressed]
    rank = np.linalg.matrix_rank(a) if a.size else 0
    for i, j in enumerate(np.flatnonzero(suppressed)):
        e = np.zeros((1, a.shape[1]))
        e[0, i] = 1
        assert got[j] == (np.linalg.matrix_rank(np.vstack([a, e])) == rank)
    assert not got[~suppressed].any()


def test_a_holding_and_a_respondent_of_the_same_id_are_two_units(client):
    # Directions (first test): e2, e3, e4 down, so with jitter 0 e2 alone (100), e5 in
    # holding "e2" (40, keyed by e2) and e4 (20) all get 0.9. Leaf I: D = -10 - 4 - 2 = -16;
    # three units, as the rules count them: the holding knows its -4, |D + 4| = 12 < 13,
    # flagged. Taking the holding for respondent e2 (one unit of 140, -14) left only e4 as
    # an intruder: |D + 2| = 14 >= 13, published.
    for holding in ("e2", "g7"):
        body = {
            "structure": {"dimensions": [{"name": "act", "leaves": ["I", "II"]}]},
            "cells": [
                {
                    "key": ["I"],
                    "contributions": [
                        {"value": 100},
                        {"value": 40, "holding": holding},
                        {"value": 20},
                    ],
                    "respondents": ["e2", "e5", "e4"],
                    "protection": {"upper": 13, "lower": 13},
                },
                {"key": ["II"], "contributions": [{"value": 50}], "respondents": ["e3"]},
            ],
            "noise": {"d": 0.1, "jitter": 0.0},
        }
        cells = by_key(client.post("/v1/noise", json=body).json())
        assert cells[("I",)]["value"] == pytest.approx(144.0)
        assert cells[("I",)]["status"] == "flagged", holding


def test_a_sensitive_cell_without_noise_is_flagged_whatever_its_level(client):
    """An empty cell made sensitive (`empty_cells: sensitive`) has level 0 and no noise:
    it was published as 0.0, exactly, and not flagged (a helper's campaign, 2026-11-27).
    A level of 0 asks that the cell not be disclosed exactly: flagged now."""
    body = table()
    body["cells"][1] = {"key": ["A", "II"], "contributions": [], "respondents": []}
    body["cells"][0].pop("protection")
    body["cells"][2].pop("protection")
    body["cells"][3].pop("protection")
    body["rules"] = {"rules": [{"type": "p_percent", "p": 10}], "empty_cells": "sensitive"}
    reply = client.post("/v1/noise", json=body)
    assert reply.status_code == 200, reply.text
    cell = by_key(reply.json())["A", "II"]
    assert cell["sensitive"] and cell["status"] == "flagged", cell


def test_the_largest_respondent_is_an_intruder_too(make_client):
    """A helper's campaign (2026-11-27) on the filter, the same noise here: one cell of
    a3 1000, b2 900, c0 20 and d0 20 under the p%-rule (p = 15). a3, knowing its own
    noise, is left |D - D_a3| to hide b2, whose level against it is 0.15 * 900 - 40 = 95:
    flagged when that is short, though every other respondent is left enough to hide
    a3."""
    secret = b"campaign-h40-secret-0123456789abcdef"
    ids, values = ["a3", "b2", "c0", "d0"], np.array([1000.0, 900.0, 20.0, 20.0])
    moved = (noise.multipliers(ids, ids, secret, 0.1, 0.03) - 1.0) * values
    assert abs(moved.sum() - moved[0]) < 95 <= abs(moved.sum() - moved[1:]).min()
    body = {
        "structure": {"dimensions": [{"name": "act", "leaves": ["Mining"]}]},
        "cells": [
            {
                "key": ["Mining"],
                "contributions": [{"value": v} for v in values.tolist()],
                "respondents": ids,
            }
        ],
        "rules": {"rules": [{"type": "p_percent", "p": 15}]},
        "noise": {"d": 0.1, "jitter": 0.03},
    }
    reply = make_client(noise_secret=secret).post("/v1/noise", json=body)
    assert reply.status_code == 200, reply.text
    assert by_key(reply.json())["Mining",]["status"] == "flagged"


def _one_dimension(cells: list[dict], leaves: list[str]) -> dict:
    return {
        "structure": {"dimensions": [{"name": "a", "leaves": leaves}]},
        "cells": cells,
        "rules": {"rules": [{"type": "p_percent", "p": 15}]},
        "noise": {"d": 0.1, "jitter": 0.0},
        "flagged": "suppress",
    }


def test_a_respondent_in_two_leaves_is_one_unit_in_their_margin(client):
    """e1 reports 60 in a0 and 60 in a1 (one establishment, one multiplier), e2 10 in a1.
    In Total e1 is one respondent of 120: level 0.15 * 120 = 18, and e2, knowing its own
    noise, is left e1's 12. The rules counted e1's contributions as two respondents
    (60, 60, 10: not sensitive) while the noise pooled them, and Total was published
    (a helper's campaign, 2026-11-27). Now the rules count e1 once, as the noise does."""
    body = _one_dimension(
        [
            {"key": ["a0"], "contributions": [{"value": 60}], "respondents": ["e1"]},
            {
                "key": ["a1"],
                "contributions": [{"value": 60}, {"value": 10}],
                "respondents": ["e1", "e2"],
            },
        ],
        ["a0", "a1"],
    )
    reply = client.post("/v1/noise", json=body)
    assert reply.status_code == 200, reply.text
    total = by_key(reply.json())["Total",]
    assert total["sensitive"] and total["status"] == "suppressed", total


def test_a_respondent_listed_twice_in_a_leaf_is_one_unit(client):
    """e1 60 + e1 60 + e2 10 in one leaf: one respondent of 120 beside 10 (sensitive),
    not three; with sampling weights the rules cannot pool it (weights and holdings do
    not go together): a 422 naming the respondents and the cell."""
    cells = [
        {
            "key": ["a0"],
            "contributions": [{"value": 60}, {"value": 60}, {"value": 10}],
            "respondents": ["e1", "e1", "e2"],
        },
        {
            "key": ["a1"],
            "contributions": [{"value": 500}, {"value": 400}, {"value": 300}],
            "respondents": ["e3", "e4", "e5"],
        },
    ]
    reply = client.post("/v1/noise", json=_one_dimension(cells, ["a0", "a1"]))
    assert reply.status_code == 200, reply.text
    a0 = by_key(reply.json())["a0",]
    assert a0["sensitive"] and a0["status"] == "suppressed", a0
    for x in cells[0]["contributions"]:
        x["weight"] = 2.0
    reply = client.post("/v1/noise", json=_one_dimension(cells, ["a0", "a1"]))
    assert reply.status_code == 422, reply.text
    (detail,) = reply.json()["detail"]
    assert detail["field"] == "respondents" and detail["cell"] == 0, detail


def test_derivable_cells_of_a_large_group_let_other_threads_run():
    """The null-space test of a group of 1,331 unknowns (every leaf of 11 x 11 x 11
    suppressed) used scipy's SVD, which held the GIL throughout: the event loop, health
    checks included, stalled for 6 s behind one /v1/noise request (a campaign, h51).
    Measured relative to the call's own time: the longest stretch in which this thread
    could not run must be a small part of it."""
    import threading
    import time

    dims = [Hierarchy.flat(n, [f"{n}{i}" for i in range(11)], "T") for n in "abc"]
    t = Table(dims)
    suppressed = np.asarray(t.is_leaf, bool).copy()
    out = {}

    def work():
        out["derivable"] = derivable_cells(t, suppressed)

    worker = threading.Thread(target=work)
    started = last = time.perf_counter()
    worst = 0.0
    worker.start()
    while worker.is_alive():
        time.sleep(0.001)
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    worker.join()
    elapsed = time.perf_counter() - started
    # Every leaf of a flat table hidden: each moves around a cycle, none is derivable.
    assert not out["derivable"].any()
    assert worst < 0.5 * elapsed, (worst, elapsed)


def test_derivable_cells_of_one_wide_relation_in_linear_memory():
    """4,500 hidden leaves under one total: the groups were the components of ``sub^T
    sub``, 4,501^2 entries (over 300 MB, +450 MiB on a server, a campaign, h51); now those
    of the graph cells <-> relations. The group is past the dense test's limit: every
    cell is reported derivable (the safe side)."""
    import tracemalloc

    t = Table([Hierarchy.flat("a", [f"a{i}" for i in range(4500)], "T")])
    suppressed = np.asarray(t.is_leaf, bool).copy()
    tracemalloc.start()
    got = derivable_cells(t, suppressed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got[suppressed].all() and not got[~suppressed].any()
    assert peak < 20e6, peak
