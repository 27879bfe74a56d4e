"""The project's golden copies equal ../shared/golden whenever that folder exists."""

import pytest

from tests.golden import GOLDEN_DIR, SHARED_GOLDEN_DIR


@pytest.mark.skipif(not SHARED_GOLDEN_DIR.is_dir(), reason="../shared/golden not present")
def test_copies_equal_shared_golden():
    shared = sorted(p.name for p in SHARED_GOLDEN_DIR.glob("*.json"))
    ours = sorted(p.name for p in GOLDEN_DIR.glob("*.json"))
    assert ours == shared
    for name in shared:
        assert (GOLDEN_DIR / name).read_bytes() == (SHARED_GOLDEN_DIR / name).read_bytes(), name
