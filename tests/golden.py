"""Access to the golden cases kept in tests/data/golden (copies of ../shared/golden)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from service.sdc.table import Hierarchy, Table

GOLDEN_DIR = Path(__file__).parent / "data" / "golden"
SHARED_GOLDEN_DIR = Path(__file__).resolve().parents[2] / "shared" / "golden"


def load(name: str) -> list[dict]:
    return json.loads((GOLDEN_DIR / name).read_text())


def cases(name: str):
    """pytest parameters: one per golden case, named by its id."""
    import pytest

    return [pytest.param(c, id=c["id"]) for c in load(name)]


def golden_table(case):
    """The table of a golden intervals case: its relations, values and suppression
    pattern (cells published as ``null``)."""
    rows = Hierarchy.flat("row", case["rows"][:-1], case["rows"][-1])
    cols = Hierarchy.flat("col", case["cols"][:-1], case["cols"][-1])
    t = Table([rows, cols])
    values = np.empty(t.n_cells)
    suppressed = np.zeros(t.n_cells, dtype=bool)
    for i, r in enumerate(case["rows"]):
        for k, c in enumerate(case["cols"]):
            cell = t.cell_index((r, c))
            values[cell] = case["values"][i][k]
            suppressed[cell] = case["published"][i][k] is None
    return t, values, suppressed
