"""Small hostile requests must not exhaust memory: the peak traced memory of a pipeline
call is bounded relative to what the request makes it hold (pooled contributions, the
clean-up's witnesses), not by wall figures.

A 0.7 MB /v1/suppress body of 8 flat dimensions of 3 leaves pools 3.3 million leaf
contributions into its margins; the pooling held about 108 bytes per pooled entry at its
peak (345 MiB) where the result keeps 16. A 0.2 MB body of 7 dimensions hands the fast
method's clean-up 9.5 million witness entries, which an index of Python sets held at
about 30 bytes each (300 MiB). Smaller tables of the same shapes are used here.
"""

from __future__ import annotations

import itertools
import time
import tracemalloc

import numpy as np

import service.sdc.suppress as suppress_module
from schemas.tables import SuppressRequest
from service.config import Settings
from service.pipeline.suppress import protect
from service.pipeline.tables import checked_table_inputs, resolve_table_request


def flat_body(dimensions: int, leaves: int = 3) -> SuppressRequest:
    """Every leaf cell of ``dimensions`` flat dimensions, two contributions each (many
    sensitive under p% 10), the margins left to be pooled."""
    codes = [[f"d{d}l{i}" for i in range(leaves)] for d in range(dimensions)]
    cells = [
        {"key": list(key), "contributions": [{"value": 10 + i % 7}, {"value": 1 + i % 3}]}
        for i, key in enumerate(itertools.product(*codes))
    ]
    return SuppressRequest.model_validate(
        {
            "structure": {
                "dimensions": [{"name": f"d{d}", "leaves": c} for d, c in enumerate(codes)]
            },
            "cells": cells,
            "rules": {"rules": [{"type": "p_percent", "p": 10}]},
            "method": "fast",
            "time_limit": 60,
        }
    )


def traced_peak(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_pooling_margins_peaks_at_a_few_copies_of_the_pooled_contributions():
    body = flat_body(7)  # 2,187 leaf cells; each contribution in 127 margins
    resolved = resolve_table_request(body, Settings())
    inputs = checked_table_inputs(body, resolved)
    assert inputs.unions is not None and inputs.unions.contributions is not None
    pooled = inputs.unions.contributions
    entries = len(pooled.cell)
    assert entries == 2 * 3**7 * 2**7  # the leaves' and the margins' copies
    kept = sum(a.nbytes for a in (pooled.cell, pooled.value))
    del inputs, pooled
    peak = traced_peak(checked_table_inputs, body, resolved)
    # What the result keeps is 16 bytes an entry; the pooling held 109 at its peak
    # (margins x leaves matrices, the spread's indices and the rules' sort kept alive).
    assert peak < 4.5 * kept, (peak / entries, kept / entries)


def test_clean_up_index_of_witnesses_is_compact(monkeypatch):
    body = flat_body(5)
    resolved = resolve_table_request(body, Settings())
    seen: list[int] = []
    clean_up = suppress_module.remove_superfluous

    def counted(p, att, cheapest, y, witness, *rest):
        seen.append(sum(len(np.asarray(w)) for w in witness))
        return clean_up(p, att, cheapest, y, witness, *rest)

    monkeypatch.setattr(suppress_module, "remove_superfluous", counted)
    peak = traced_peak(protect, body, resolved, time.perf_counter(), False)
    assert seen and seen[0] > 100_000  # 486 requirements, 243 cells in each witness
    # The witnesses themselves are 8 bytes an entry; an index of Python sets by cell
    # held about 75 bytes an entry at the peak.
    assert peak < 40 * seen[0], peak / seen[0]
