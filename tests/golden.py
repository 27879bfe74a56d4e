"""Access to the golden cases kept in tests/data/golden (copies of ../shared/golden)."""

from __future__ import annotations

import json
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "data" / "golden"
SHARED_GOLDEN_DIR = Path(__file__).resolve().parents[2] / "shared" / "golden"


def load(name: str) -> list[dict]:
    return json.loads((GOLDEN_DIR / name).read_text())


def cases(name: str):
    """pytest parameters: one per golden case, named by its id."""
    import pytest

    return [pytest.param(c, id=c["id"]) for c in load(name)]
