"""Margins computed from leaves are judged (issue 20): their contributions are the pooled
contributions of their leaves (one holding across several leaves counted once); margins
over summaries or bare values must come with their own summary or are refused."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

STRUCTURE = {
    "dimensions": [
        {"name": "r", "leaves": ["A", "B"], "total": "T"},
        {"name": "c", "leaves": ["I", "II", "III"], "total": "T"},
    ]
}
RULES = {"rules": [{"type": "p_percent", "p": 20}, {"type": "frequency", "n": 3}]}


def contributions(amounts, holdings=None):
    holdings = holdings or [None] * len(amounts)
    return [{"value": v, **({"holding": h} if h else {})} for v, h in zip(amounts, holdings)]


def test_a_row_total_dominated_by_one_holding_is_sensitive(client):
    """Row A's leaves each look safe (three contributors), but one holding owns 150 of
    row A's 175: the computed total is a primary, with its own protection level."""
    leaves = {
        ("A", "I"): ([100, 10, 10], ["h", None, None]),
        ("A", "II"): ([50, 3, 2], ["h", None, None]),
        ("A", "III"): ([0], None),
        ("B", "I"): ([30, 30, 30], None),
        ("B", "II"): ([30, 30, 30], None),
        ("B", "III"): ([30, 30, 30], None),
    }
    cells = [{"key": list(k), "contributions": contributions(*v)} for k, v in leaves.items()]
    body = {"structure": STRUCTURE, "cells": cells, "rules": RULES}
    r = client.post("/v1/sensitivity", json={"cells": cells, "rules": RULES})
    assert r.status_code == 200
    audit = client.post("/v1/audit", json=body).json()
    by = {tuple(c["key"]): c for c in audit["cells"]}
    # x1 = 150 (the holding), rest 175 - 150 - 10 = 15: 0.2 * 150 - 15 = 15 > 0.
    assert by[("A", "T")]["sensitive"] is True
    assert by[("A", "T")]["upper_protection"] == 15.0
    assert audit["verdict"] == "unsafe" and "published" in audit["reasons"][0]
    r = client.post("/v1/suppress", json=body).json()
    assert {tuple(c["key"]): c["status"] for c in r["cells"]}[("A", "T")] == "primary"
    assert r["safe"] and r["audit"]["verdict"] == "safe"


def test_margin_over_a_summary_is_refused_or_sent(client):
    cells = [
        {"key": ["A", "I"], "contributions": contributions([100, 90, 80])},
        {"key": ["A", "II"], "summary": {"total": 60, "count": 3, "largest": [30, 20]}},
        {"key": ["A", "III"], "contributions": contributions([10, 10, 10])},
    ] + [
        {"key": ["B", c], "contributions": contributions([30, 30, 30])} for c in ("I", "II", "III")
    ]
    body = {"structure": STRUCTURE, "cells": cells, "rules": RULES}
    r = client.post("/v1/audit", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    # The first margin over A,II in table order: the grand total.
    assert detail["field"] == "cells" and "the margin ['T', 'T']" in detail["message"]
    # Sent with its own summary (and the column and grand totals above it), it is judged.
    margins = [
        {"key": ["A", "T"], "summary": {"total": 360, "count": 9, "largest": [100, 90]}},
        {"key": ["T", "II"], "summary": {"total": 150, "count": 6, "largest": [30, 30]}},
        {"key": ["T", "T"], "summary": {"total": 630, "count": 18, "largest": [100, 90]}},
    ]
    r = client.post("/v1/audit", json={**body, "cells": cells + margins})
    assert r.status_code == 200, r.text


@st.composite
def tables(draw):
    leaves = {}
    for row in ("A", "B"):
        for col in ("I", "II", "III"):
            k = draw(st.integers(0, 3))
            amounts = [draw(st.integers(1, 50)) for _ in range(k)]
            holdings = [draw(st.sampled_from([None, None, "h1", "h2"])) for _ in range(k)]
            leaves[(row, col)] = (amounts, holdings)
    return leaves


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(leaves=tables())
def test_leaves_only_equals_all_cells(client, leaves):
    """Sending only the leaves gives the same primaries, levels and pattern as sending
    every margin with its leaves' contributions listed (holdings spanning leaves)."""
    leaf_cells = [{"key": list(k), "contributions": contributions(*v)} for k, v in leaves.items()]
    margin_cells = []
    for r in ("A", "B", "T"):
        for c in ("I", "II", "III", "T"):
            if r != "T" and c != "T":
                continue
            below = [v for (lr, lc), v in leaves.items() if r in (lr, "T") and c in (lc, "T")]
            amounts = [a for v in below for a in v[0]]
            holdings = [h for v in below for h in v[1]]
            margin_cells.append({"key": [r, c], "contributions": contributions(amounts, holdings)})
    replies = []
    for cells in (leaf_cells, leaf_cells + margin_cells):
        r = client.post(
            "/v1/suppress", json={"structure": STRUCTURE, "cells": cells, "rules": RULES}
        )
        assert r.status_code == 200, r.text
        replies.append(r.json())
    a, b = replies
    assert a["cells"] == b["cells"]
    assert a["safe"] == b["safe"]
    if a["safe"]:
        levels = [
            {tuple(c["key"]): c.get("upper_protection") for c in x["audit"]["cells"]}
            for x in replies
        ]
        assert levels[0] == levels[1]


def test_every_cell_with_contributions_in_any_order(client):
    """Every cell sent with contributions, margins last: each keeps its own value (the
    magnitudes were once taken in request order as if it were table order)."""
    cells = [
        {"key": [r, c], "contributions": contributions([10 * i + 5, 3, 2])}
        for i, (r, c) in enumerate([(r, c) for r in "AB" for c in ("I", "II", "III")])
    ]
    totals = {}
    for cell in cells:
        r, c = cell["key"]
        for key in ((r, "T"), ("T", c), ("T", "T")):
            totals.setdefault(key, []).extend(cell["contributions"])
    body = {
        "structure": STRUCTURE,
        "rules": RULES,
        "cells": cells + [{"key": list(k), "contributions": v} for k, v in totals.items()],
    }
    r = client.post("/v1/audit", json=body)
    assert r.status_code == 200, r.text
