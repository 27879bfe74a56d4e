"""A small integer program for the tests of solver limits (deterministic mode, limit names)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from service.sdc import highs


def integer_program(**options):
    """A bounded integer program that HiGHS 1.16 solves in 18,120 simplex iterations and
    481 nodes (hand-run): long enough that a budget binds in its root and in its tree.
    ``options`` go to :func:`service.sdc.highs.model`."""
    rng = np.random.default_rng(0)
    n, m = 60, 40
    a = sp.random(m, n, density=0.3, random_state=1, format="csc")
    a.data = np.round(a.data * 20)
    return highs.model(
        -rng.integers(1, 30, n).astype(float),
        np.zeros(n),
        np.full(n, 5.0),
        a,
        np.full(m, -np.inf),
        np.full(m, 50.0),
        integer=np.ones(n, bool),
        **options,
    )
