"""Deterministic random magnitude tables for tests and benchmarks of secondary suppression
(and, at the end, a query's answer for the online filter: :func:`filter_answer`).

A generated table has ``n`` dimensions, each flat (a total over ``k`` leaves) or a 2-level
hierarchy (a total over groups, each group over a contiguous run of the leaves). Every leaf
cell gets a random number of contributors and each contributor a skewed amount, so that the
primary rules find what they find in business statistics: cells with one or two
contributors, cells dominated by one large respondent, and empty cells.

Why skewed: "for establishments, these reported values are typically highly skewed with a
few very large reported values that might easily be associated with a particular
respondent" (seed 003 section B, tables of magnitude data); the p%- and dominance rules of
seed 000 ("Sensitivity rules") only fire where one or two contributions dominate. Amounts
are lognormal (``scale * exp(sigma Z)``) or Pareto (``scale * (1 + Lomax(alpha))``, heavier
tailed for small ``alpha``), rounded up to whole units so that every sum is exact in floating
point and tables can be written to other tools without decimals.

Margins: a margin cell's contributions are the union of the contributions of the leaf cells
below it (each respondent keeps its ``holding`` id), so the rules judge margins, and the
implicitly published unions of :mod:`service.sdc.unions`, on the same respondents (seed 002
section 5: one respondent in several cells is one respondent of their union). Values are
additive: ``table.relations @ values == 0`` exactly.

Contributors per leaf cell (before holdings are shared): 0 with probability ``empty_share``,
1 with ``singleton_share``, 2 with ``pair_share``, otherwise ``3 + Poisson(mean - 3)``.
With ``shared_share > 0`` that share of the contributions is re-assigned to the respondent
(holding) of another contribution of the same row (same code on the first dimension), as
when an enterprise group reports in several cells; within one cell such contributions are
summed by :func:`service.sdc.magnitudes.from_contributions` (seed 000, "Holdings").

Determinism: everything is drawn from one ``numpy.random.Generator`` seeded with ``seed``
(PCG64), in a fixed order, so the same arguments give the same table byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from service.sdc import magnitudes
from service.sdc.magnitudes import Contributions
from service.sdc.table import Hierarchy, Table
from service.sdc.unions import expand

DISTRIBUTIONS = ("lognormal", "pareto")


def dimension(name: str, n_leaves: int, groups: int | None = None) -> Hierarchy:
    """A flat dimension (``groups=None``) or a 2-level one with ``groups`` subtotals.

    Leaves are ``{name}{i}``; in the 2-level case group ``g`` is ``{name}g{g}`` and holds a
    contiguous run of leaves, the runs as equal as possible (``numpy.array_split``).
    """
    if n_leaves < 1:
        raise ValueError(f"dimension {name!r} needs at least one leaf")
    leaves = [f"{name}{i}" for i in range(n_leaves)]
    if groups is None:
        return Hierarchy.flat(name, leaves)
    if not 1 <= groups <= n_leaves:
        raise ValueError(f"dimension {name!r}: groups must be in 1..{n_leaves}")
    children = {"Total": [f"{name}g{g}" for g in range(groups)]}
    for g, run in enumerate(np.array_split(np.arange(n_leaves), groups)):
        children[f"{name}g{g}"] = [leaves[i] for i in run]
    return Hierarchy.from_children(name, children)


@dataclass(frozen=True)
class GeneratedTable:
    """A random table with its contributions.

    Attributes
    ----------
    table : Table
    contributions : Contributions
        Every cell's contributions, margins included (``cell`` is the table's cell index; a
        margin holds one entry per contribution of each leaf below it). ``holding`` is the
        respondent id.
    values : numpy.ndarray, shape (n_cells,)
        Every cell's value (sum of its contributions); additive.
    counts : numpy.ndarray, shape (n_cells,)
        Respondents (distinct holdings) per cell.
    leaf_cell, leaf_value, leaf_holding : numpy.ndarray
        The leaf-level contributions (microdata): cell index, amount, respondent.
    seed : int
    """

    table: Table
    contributions: Contributions
    values: np.ndarray
    counts: np.ndarray
    leaf_cell: np.ndarray
    leaf_value: np.ndarray
    leaf_holding: np.ndarray
    seed: int

    @property
    def n_cells(self) -> int:
        return self.table.n_cells

    @property
    def leaf_values(self) -> np.ndarray:
        """Values with margins set to 0 (the input of :meth:`Table.fill_margins`)."""
        return np.where(self.table.is_leaf, self.values, 0.0)

    def magnitudes(self, depth: int = 2) -> magnitudes.Magnitudes:
        """Every cell's ordered magnitudes (holdings summed within a cell)."""
        c = self.contributions
        return magnitudes.from_contributions(
            self.n_cells, c.cell, c.value, holding=c.holding, depth=depth
        )


def generate(
    shape: Sequence[int],
    *,
    groups: Sequence[int | None] | None = None,
    seed: int = 0,
    empty_share: float = 0.1,
    singleton_share: float = 0.05,
    pair_share: float = 0.05,
    mean_contributors: float = 10.0,
    distribution: str = "lognormal",
    sigma: float = 1.0,
    alpha: float = 1.2,
    scale: float = 1000.0,
    shared_share: float = 0.0,
) -> GeneratedTable:
    """Generate a random magnitude table (module docstring for the model).

    Parameters
    ----------
    shape : sequence of int
        Leaves per dimension, e.g. ``(100, 100)``.
    groups : sequence of int or None, optional
        Per dimension, the number of subtotals of a 2-level hierarchy, or ``None`` (flat).
    seed : int
    empty_share, singleton_share, pair_share : float
        Probabilities that a leaf cell has 0, 1 or 2 contributors; the rest get
        ``3 + Poisson(mean_contributors - 3)``. With the defaults, p% (p = 15) plus minimum
        frequency 3 flag about 11% of the leaf cells (the benchmark's setting).
    mean_contributors : float
        Mean contributors of a cell with three or more (>= 3).
    distribution : {"lognormal", "pareto"}
    sigma : float
        Lognormal shape (log-scale standard deviation).
    alpha : float
        Pareto (Lomax) tail index; smaller is heavier.
    scale : float
        Typical amount.
    shared_share : float
        Share of contributions moved to another contribution's respondent in the same row.

    Returns
    -------
    GeneratedTable
    """
    shares = np.array([empty_share, singleton_share, pair_share], dtype=float)
    if (shares < 0).any() or shares.sum() > 1:
        raise ValueError(
            "empty_share, singleton_share and pair_share must be >= 0 and sum to at most 1"
        )
    if mean_contributors < 3:
        raise ValueError("mean_contributors must be >= 3")
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}")
    if not 0 <= shared_share <= 1:
        raise ValueError("shared_share must be in [0, 1]")
    groups = [None] * len(shape) if groups is None else list(groups)
    if len(groups) != len(shape):
        raise ValueError("groups needs one entry per dimension")
    names = [chr(ord("a") + d) for d in range(len(shape))]
    table = Table([dimension(n, k, g) for n, k, g in zip(names, shape, groups)])

    rng = np.random.default_rng(seed)
    leaves = np.flatnonzero(table.is_leaf)  # leaf cells in cell order
    n_leaves = leaves.size
    kind = rng.choice(4, size=n_leaves, p=np.append(shares, 1.0 - shares.sum()))
    many = 3 + rng.poisson(mean_contributors - 3.0, size=n_leaves)
    sizes = np.where(kind == 3, many, kind)  # kinds 0, 1, 2 are 0, 1, 2 contributors
    leaf_of = np.repeat(np.arange(n_leaves), sizes)  # leaf position of each contribution
    u = leaf_of.size
    if distribution == "lognormal":
        amount = scale * rng.lognormal(0.0, sigma, size=u)
    else:
        amount = scale * (1.0 + rng.pareto(alpha, size=u))
    amount = np.ceil(amount)

    holding = np.arange(u, dtype=np.int64)
    if shared_share > 0 and u:
        # Another contribution of the same row: rows are contiguous runs of leaf_of because
        # leaf cells are in row-major cell order and the first dimension varies slowest.
        row = table.key_positions[leaves[leaf_of], 0]
        start = np.searchsorted(row, row, side="left")
        stop = np.searchsorted(row, row, side="right")
        move = rng.random(u) < shared_share
        other = start + np.floor(rng.random(u) * (stop - start)).astype(np.int64)
        holding = np.where(move, holding[other], holding)

    # Each contribution goes to its leaf and to every margin above it: for each cell of
    # the aggregation matrix M (cells x leaves), in cell order, the contributions of its
    # leaves in leaf order (read straight from M's rows: at 10^6 cells, sorting 60 million
    # copies took the generator's peak to 7.7 GiB).
    agg = table.aggregation.tocsr().sorted_indices()  # a copy: the table's is left as it is
    per_leaf = np.bincount(leaf_of, minlength=n_leaves)
    rows, _, src = expand(agg, np.cumsum(per_leaf) - per_leaf, per_leaf)
    cell = rows.astype(np.int64)
    del rows
    contributions = Contributions(cell=cell, value=amount[src], holding=holding[src])
    del src

    values = np.bincount(cell, weights=contributions.value, minlength=table.n_cells)
    if shared_share > 0:
        radix = int(holding.max(initial=0)) + 1
        pairs = np.unique(cell * radix + contributions.holding)
        counts = np.bincount(pairs // radix, minlength=table.n_cells).astype(float)
    else:  # every contribution its own respondent
        counts = np.bincount(cell, minlength=table.n_cells).astype(float)
    return GeneratedTable(
        table, contributions, values, counts, leaves[leaf_of], amount, holding, seed
    )


#: The benchmark sizes of issue 4: name -> keyword arguments of :func:`generate`.
SIZES: dict[str, dict] = {
    "10x10": dict(shape=(10, 10)),
    "30x30": dict(shape=(30, 30)),
    "60x60 hier": dict(shape=(60, 60), groups=(6, 6)),
    "100x100 hier": dict(shape=(100, 100), groups=(10, 10)),
    "20x20x10": dict(shape=(20, 20, 10)),
    # The 3-D and 4-D sizes of issue 16's aims.
    "10x10x5": dict(shape=(10, 10, 5)),
    "8x6x5x4": dict(shape=(8, 6, 5, 4)),
    "250x200": dict(shape=(250, 200)),
    # With 10% primaries every row holds about 20 that protect one another (no secondary
    # is needed); with 2% the suppression problem is real.
    "250x200 sparse": dict(shape=(250, 200), singleton_share=0.01, pair_share=0.01),
}


def preset(name: str, seed: int = 0, **overrides) -> GeneratedTable:
    """One of :data:`SIZES`, with any :func:`generate` argument overridden."""
    if name not in SIZES:
        raise KeyError(f"unknown size {name!r}; one of {', '.join(SIZES)}")
    return generate(**{**SIZES[name], "seed": seed, **overrides})


# --------------------------------------------------------------------------- online filter

#: A query of the online filter (``/v1/filter``) that passes its query stage.
FILTER_QUERY = {
    "variables": ["industry", "county"],
    "population": 500000,
    "area_population": {"county": 45000},
}


def filter_answer(n_cells: int, seed: int, form: str = "microdata") -> list[dict]:
    """A query's answer: ``n_cells`` cells keyed (industry, county), as ``"counts"``, or
    magnitudes with 4-8 contributions each as ``"microdata"`` columns or ``"objects"``."""
    rng = np.random.default_rng(seed)
    cells = []
    for i in range(n_cells):
        key = [f"industry-{i // 10}", f"county-{i % 10}"]
        if form == "counts":
            cells.append({"key": key, "count": int(rng.integers(0, 40))})
            continue
        values = [round(float(v), 2) for v in rng.lognormal(8, 1.2, int(rng.integers(4, 9)))]
        respondents = [f"est-{i}-{j}" for j in range(len(values))]
        holdings = [f"ent-{i}-{j // 2}" for j in range(len(values))]
        if form == "microdata":
            cells.append(
                {
                    "key": key,
                    "microdata": {"value": values, "respondent": respondents, "holding": holdings},
                }
            )
        else:
            cells.append(
                {
                    "key": key,
                    "contributions": [
                        {"value": v, "respondent": r, "holding": h}
                        for v, r, h in zip(values, respondents, holdings)
                    ],
                }
            )
    return cells
