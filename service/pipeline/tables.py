"""Structured tables on the wire to the core's table problem: the table, each request
cell's place in it, values with margins filled and checked, a-priori bounds, and what
makes cells sensitive (:class:`TableInputs`, then :func:`table_problem`).

Shared by the audit and the suppression. Errors name the request's cell number (the
core's cell numbering is the table's, which the caller never sees).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from schemas import rules as wire
from schemas.adjust import AdjustRequest
from schemas.frequency import MAX_COUNT, ExtendedRules
from schemas.noise import NoiseRequest
from schemas.rounding import RoundRequest
from schemas.tables import (
    AuditRequest,
    CountRules,
    Dimension,
    Structure,
    SuppressRequest,
    TableCell,
)
from service.config import Settings
from service.sdc import frequency, magnitudes, primary
from service.sdc.audit import without_a_priori_conditions
from service.sdc.errors import InputError
from service.sdc.problem import RuleConditions, TableProblem, reachable_levels
from service.sdc.rules import MinimumFrequency
from service.sdc.table import Hierarchy, LinkedTables, StructureError, Table, table_size
from service.sdc.unions import UnionSource, spread

from .cells import check_unique_cell_keys, contributions_of, magnitudes_of, ruled_magnitudes
from .errors import TABLE_FIELDS, LimitError, RequestInputError, core_errors
from .frequency import variable_axes
from .limits import check_cell_count, solver_seconds
from .rules import resolve_rules, rule_labels, ruleset_from_wire


@dataclass(frozen=True)
class ResolvedTableRequest:
    """What a table request (:data:`TableRequest`) is served with."""

    rules: wire.RuleSet | None  # none when cells carry protection levels only
    disclose: bool  # whether the rule set's measures may be shown
    time_limit: float  # solver seconds, capped by the service
    max_pooled_entries: int  # the most contributions margins may pool from leaves
    cover: bool = False  # linked tables solved on their cover table (:func:`cover_cell`)


#: The requests built on a table structure: they share structure, cells, counts, rules,
#: profile and time_limit, which is all :func:`resolve_table_request` reads.
TableRequest = AuditRequest | SuppressRequest | AdjustRequest | RoundRequest


def resolve_table_request(body: TableRequest, settings: Settings) -> ResolvedTableRequest:
    """Check a table request against the service's limits before anything of its size is
    built (:func:`check_table_size`), and resolve its rule set or profile and time limit."""
    check_table_size(body.structure, settings.max_cells)
    spec, disclose = (
        resolve_rules(body.rules, body.profile, settings)
        if body.rules is not None or body.profile is not None
        else (None, True)
    )
    if body.counts is not None:
        bad = [
            i
            for i, c in enumerate(body.cells)
            if c.contributions is not None or c.summary is not None
        ]
        if bad:
            raise RequestInputError(
                "cells of a count table carry counts as values, not contributions or summaries",
                field="contributions",
                cell=bad[0],
            )
    cover = cover_cell(body.structure, body.cells)
    if cover is not None:
        if isinstance(body, (AdjustRequest, RoundRequest)):
            raise RequestInputError(
                "a cell in none of the linked tables (their cover table) is accepted by "
                "/v1/audit and /v1/suppress only",
                field="key",
                cell=cover,
            )
        check_table_size(body.structure, settings.max_cells, cover=True)
    return ResolvedTableRequest(
        spec,
        disclose,
        solver_seconds(body.time_limit, settings),
        LEAF_MAP_FACTOR * settings.max_cells,
        cover is not None,
    )


def request_size(body: TableRequest | NoiseRequest) -> int:
    """What reading a table request takes, in entries: its cells, and its structure's
    codes as sent (each dimension's leaves, or its parents and their children) and linked
    tables' names. The size by which it is resolved inline or in the worker pool
    (:func:`service.api.compute_pool.compute`): an 18 MB hierarchy of 800,000 parents over
    one cell took :func:`resolve_table_request` 2 s, which on the event loop held every
    other request that long (a campaign, h68)."""
    return len(body.cells) + structure_size(body.structure)


def structure_size(structure: Structure) -> int:
    """The entries of a structure as sent (see :func:`request_size`); C-speed sums."""
    n = sum(len(t) for t in structure.tables or ())
    for dim in structure.dimensions:
        if dim.leaves is not None:
            n += len(dim.leaves)
        else:
            children = _children(dim)
            n += len(children) + sum(map(len, children.values()))
    return n


def cover_cell(structure: Structure, cells: Sequence[TableCell]) -> int | None:
    """The first cell of a linked-tables request that lies in none of the tables (codes
    other than the total in dimensions no one table has together, such as a leaf of
    every dimension), or ``None``.

    Such a request is solved on the linked tables' *cover table*, the one table over
    all their dimensions, with every cell outside the tables hidden: none is published.
    Its leaves are the finest parts, so every aggregation of hidden cells is judged on
    them (seed 002 section 5), which the linked tables alone cannot do for cells with
    common parts (:data:`service.sdc.aggregations.SHARED_PARTS`); de Wolf and Giessing
    protect linked tables on their cover table in tau-ARGUS's modular method likewise."""
    if structure.tables is None:
        return None
    names = [dim.name for dim in structure.dimensions]
    totals = [dim.total for dim in structure.dimensions]
    if any(not t or len(set(t)) != len(t) or not set(t) <= set(names) for t in structure.tables):
        # Refused naming the table when the structure is read (space_from_wire); /v1/round
        # and /v1/adjust refused it as a cover table's cell instead, naming cell 0.
        return None
    tables = [set(t) for t in structure.tables]
    for i, c in enumerate(cells):
        if len(c.key) != len(names):
            continue  # refused with its cell when the table is built
        spanned = {n for n, code, total in zip(names, c.key, totals) if code != total}
        if not any(spanned <= t for t in tables):
            return i
    return None


#: Codes are told apart in this many sets, by their hash (:func:`_counts`).
CODE_SETS = 256


def _counts(dim: Dimension) -> tuple[int, int]:
    """The codes of a dimension as sent, total included, and its leaf codes (codes
    without children; at least 1), counted without building its hierarchy (exactly its
    sizes when it is well-formed). Any number of codes may come before the limit is
    checked, so they go to :data:`CODE_SETS` sets by hash, each grown a little at a time
    in Python code, which lets the event loop in every 5 ms: one set of 1.6 million codes
    grows by copying itself whole, and each copy held the interpreter, and so the loop,
    0.1-0.5 s even from a pool thread (a campaign, h68)."""
    if dim.leaves is not None:
        return len(dim.leaves) + 1, len(dim.leaves)
    children = _children(dim)
    kids: list[set[str]] = [set() for _ in range(CODE_SETS)]
    for ks in children.values():
        for kid in ks:
            kids[hash(kid) % CODE_SETS].add(kid)
    n_codes = sum(map(len, kids))
    n_codes += sum(1 for code in children if code not in kids[hash(code) % CODE_SETS])
    n_leaves = sum(1 for part in kids for kid in part if not children.get(kid))
    return n_codes, max(1, n_leaves)


def _children(dim: Dimension) -> dict[str, list[str]]:
    """The parent-to-children map of a dimension sent without ``leaves`` (the schema
    requires exactly one of the two)."""
    assert dim.children is not None, "Dimension requires leaves or children"
    return dim.children


#: Every cell written as the sum of its leaf cells (the margins' pooled contributions, the
#: aggregation check's atoms) takes, per leaf cell, one entry for each cell above it: the
#: product over dimensions of its codes' depths + 1 (9 on a two-level 2-D table, 16 with
#: three levels). At most this many entries per table cell allowed on average; a deep
#: chain of codes (thousands of levels above a leaf) is refused before it is built.
LEAF_MAP_FACTOR = 16

#: A table of more than :data:`MARGIN_FLOOR` cells may have at most
#: :data:`MARGIN_FACTOR` cells (margins included) per leaf cell. Every leaf cell is sent,
#: so this ties the work and memory of a request to its body: hierarchies whose codes
#: mostly have a single child otherwise made a 36 KB body a table of 10^6 cells (two
#: chains of 999 codes over one leaf: /v1/adjust 2.8 GiB and 25 s past a 5 s limit,
#: /v1/round 2.2 GiB; a campaign, h51). Real tables stay far below: a flat dimension of
#: ``k`` leaves has ``1 + 1/k`` codes per leaf, a tree whose parents have two children or
#: more under 2, so 64 allows 6 such dimensions, or a few classifications with chains of
#: single children.
MARGIN_FACTOR = 64
MARGIN_FLOOR = 100_000


def _leaf_depths(dim: Dimension) -> int:
    """Sum over the dimension's leaf codes of their depth + 1 (the total has depth 0),
    from the wire form in one pass; codes unreachable from the total do not count (the
    hierarchy refuses them when it is built)."""
    if dim.leaves is not None:
        return 2 * len(dim.leaves)
    children = _children(dim)
    total, depth, todo = 0, {dim.total: 0}, [dim.total]
    while todo:
        code = todo.pop()
        kids = children.get(code, ())
        if not kids:
            total += depth[code] + 1
        for kid in kids:
            if kid not in depth:
                depth[kid] = depth[code] + 1
                todo.append(kid)
    return total


def check_table_size(structure: Structure, max_cells: int, cover: bool = False) -> None:
    """:class:`LimitError` when the table the structure spans, margins included (linked
    tables: their cells added up; with ``cover``, their cover table, :func:`cover_cell`),
    has more cells than ``max_cells`` (``SDC_MAX_CELLS``), or its map of cells to leaf
    cells more than :data:`LEAF_MAP_FACTOR` entries per allowed cell; from the codes per
    dimension, in Python ints, before any array of the table's size exists."""
    counts = [_counts(dim) for dim in structure.dimensions]  # (codes, leaves)
    sizes = {dim.name: c for dim, (c, _) in zip(structure.dimensions, counts)}
    what = "table cells (margins included)"
    if structure.tables is None or cover:
        n = table_size(c for c, _ in counts)
        field = "structure.dimensions" if structure.tables is None else "structure.tables"
        if cover:
            what = "cells of the linked tables' cover table (a cell in none of them was sent)"
    else:
        # Unknown names are refused when the tables are built.
        n = sum(
            table_size(sizes[name] for name in names if name in sizes) for names in structure.tables
        )
        field = "structure.tables"
    check_cell_count(n, max_cells, what=what, field=field)
    leaves = {dim.name: k for dim, (_, k) in zip(structure.dimensions, counts)}
    if structure.tables is None or cover:
        n_leaf = table_size(leaves.values())
    else:
        n_leaf = sum(
            table_size(leaves[name] for name in names if name in leaves)
            for names in structure.tables
        )
    if n > MARGIN_FLOOR and n > MARGIN_FACTOR * n_leaf:
        raise LimitError(
            f"the table has {n} cells (margins included) over {n_leaf} leaf cells: more than "
            f"{MARGIN_FACTOR} per leaf cell in a table of over {MARGIN_FLOOR} cells (its "
            "hierarchies are mostly codes with a single child)",
            field=field,
        )
    if structure.tables is None or cover:
        entries = table_size(_leaf_depths(dim) for dim in structure.dimensions)
        limit = LEAF_MAP_FACTOR * max_cells
        if entries > limit:
            raise LimitError(
                f"the table's cells over its leaf cells need {entries} entries, "
                f"over the limit of {limit} ({LEAF_MAP_FACTOR} per allowed "
                "cell): its hierarchies are too deep for its size",
                field=field,
            )


def space_from_wire(structure: Structure) -> Table | LinkedTables:
    """The table (or linked tables) the structure describes."""
    dims: dict[str, Hierarchy] = {}
    for d, dim in enumerate(structure.dimensions):
        try:
            h = (
                Hierarchy.flat(dim.name, dim.leaves, dim.total)
                if dim.leaves is not None
                else Hierarchy.from_children(dim.name, _children(dim))
            )
        except StructureError as exc:
            raise RequestInputError(exc.message, field=f"structure.dimensions.{d}") from None
        if dims.setdefault(dim.name, h) is not h:
            raise RequestInputError(
                f"dimension name {dim.name!r} is used twice", field=f"structure.dimensions.{d}.name"
            )
    if structure.tables is None:
        return Table(list(dims.values()))
    sets: list[frozenset[str]] = []
    for t, names in enumerate(structure.tables):
        unknown = [n for n in names if n not in dims]
        if unknown or not names or len(set(names)) != len(names):
            why = f"unknown dimension {unknown[0]!r}" if unknown else "empty or repeated names"
            raise RequestInputError(f"linked table {t}: {why}", field=f"structure.tables.{t}")
        # A table is its set of dimensions (its cells are keyed in the order of
        # 'dimensions'): one listed again, in any order, is the same table, kept once.
        # Kept twice it was two linked tables over the same cells, judged cell by cell and
        # so never certified (no_safe_pattern until 2026-11-27).
        if frozenset(names) not in sets:
            sets.append(frozenset(names))
    missing = set(dims) - {n for names in structure.tables for n in names}
    if missing:
        raise RequestInputError(
            f"dimension {sorted(missing)[0]!r} is in no linked table", field="structure.tables"
        )
    # Keys are read in the order of 'dimensions'; the linked space orders them by first
    # appearance in 'tables' (as listed, before the tables within others are dropped).
    if list(dict.fromkeys(n for names in structure.tables for n in names)) != list(dims):
        raise RequestInputError(
            "list the dimensions in the order they first appear in 'tables'",
            field="structure.dimensions",
        )
    # A table whose dimensions are all in another is part of it: its cells are margins of
    # the larger table and its relations are the larger table's. Kept, the request was
    # linked tables judged cell by cell, never certified; and until 2026-11-27, with only
    # the larger table's leaves sent, a 422 naming 'leaf_values' (filled_margins).
    tables = [
        Table([h for n, h in dims.items() if n in s])
        for s in sets
        if not any(s < other for other in sets)
    ]
    try:
        linked = LinkedTables(tables, order=list(dims))
    except StructureError as exc:
        raise RequestInputError(exc.message, field="structure.tables") from None
    return linked


@dataclass(frozen=True)
class TableInputs:
    """A request's table as arrays in the core's cell order (length ``space.n_cells``)."""

    space: Table | LinkedTables
    cell_of_request: np.ndarray  # table cell of each request cell
    request_of_cell: np.ndarray  # request index of each table cell, -1 if not sent
    values: np.ndarray
    lower_bounds: np.ndarray
    upper_bounds: np.ndarray
    sensitive: np.ndarray
    upper_protection: np.ndarray
    lower_protection: np.ndarray
    unions: UnionSource | None
    rule_labels: list[str]
    fired: np.ndarray | None  # (rules, n_cells) when a rule set was applied
    n_contributors: np.ndarray  # 0 where unknown
    # Cover table of linked tables (:func:`cover_cell`): the cells of the linked tables,
    # the others never published; None: every cell may be published.
    published: np.ndarray | None = None
    # A count table: the values are whole numbers, and the intruder knows it.
    integral: bool = False
    # What each cell was shifted by (``negative_values`` mode ``shift``: ``values`` are
    # ``Y = X + N M``); None: not shifted. Replies subtract it (:meth:`scale_offset`).
    offset: np.ndarray | None = None
    # A count table's dominance conditions (seed 001 rules 1-2) the audit checks.
    conditions: RuleConditions | None = None

    def reachable_levels(self) -> tuple[np.ndarray, np.ndarray]:
        """``(upper, lower)`` protection levels capped at the a-priori range, as the
        routes judged by feasibility intervals judge them
        (:func:`service.sdc.problem.reachable_levels`)."""
        return reachable_levels(
            self.values,
            self.upper_protection,
            self.lower_protection,
            self.lower_bounds,
            self.upper_bounds,
            self.integral,
        )

    def scale_offset(self) -> np.ndarray:
        """``values - offset`` is the caller's scale: zeros unless shifted."""
        return np.zeros(self.space.n_cells) if self.offset is None else self.offset

    def cell_keys(self, cells) -> list[list[str]]:
        return [list(self.space.key(int(c))) for c in cells]


def table_inputs(
    structure: Structure,
    cells: Sequence[TableCell],
    spec: wire.RuleSet | None,
    *,
    labels_with_parameters: bool,
    counts: CountRules | None = None,
    max_entries: int | None = None,
    cover: bool = False,
) -> TableInputs:
    """The table and its cells' values, sensitivity and bounds. ``max_entries``: the most
    contributions margins may pool from their leaves (413 beyond); ``cover``: linked
    tables as their cover table (:func:`cover_cell`, its size checked by the caller)."""
    space: Table | LinkedTables = space_from_wire(structure)
    published = None
    if cover and isinstance(space, LinkedTables):
        published = np.zeros(space.union_table.n_cells, bool)
        published[space.union_index] = True
        space = space.union_table
    n = space.n_cells
    check_unique_cell_keys([c.key for c in cells])
    for i, c in enumerate(cells):
        if len(c.key) != len(space.dimensions):
            raise RequestInputError(
                f"a cell key needs {len(space.dimensions)} codes "
                f"({', '.join(space.names)}), got {len(c.key)}",
                field="key",
                cell=i,
            )
    try:
        where = space.cell_indices(
            np.array([c.key for c in cells], dtype=object).T
            if cells
            else [[] for _ in space.dimensions]
        )
    except StructureError as exc:
        # The cell the message is about (looking each cell up again was quadratic).
        raise RequestInputError(exc.message, field="key", cell=exc.index) from None
    where = np.asarray(where, dtype=np.int64)
    request_of_cell = np.full(n, -1, dtype=np.int64)
    request_of_cell[where] = np.arange(len(cells))

    ruleset = ruleset_from_wire(spec) if spec is not None else None
    m, known, contributions = _magnitudes(cells, where, n, spec, ruleset)
    if ruleset is not None and isinstance(space, Table):
        m, known, contributions = _pooled_margins(
            space, cells, where, m, known, contributions, ruleset, max_entries
        )
    if contributions is not None:
        contributions = contributions.in_cell_order()
    values = _values(space, cells, where, m, known)
    if ruleset is not None:
        _check_value_of_source(space, cells, where, contributions, ruleset, request_of_cell)
        # The rules' share of "the cell value" (frequency_range) is of the value audited:
        # a summary's total is a sum of absolute contributions under 'absolute' and
        # 'relaxed' (until 2026-11-27 a summarised -340 of 366 and 26 got 10% of 392).
        m = dataclasses.replace(m, value=np.where(known, values, m.value))
    lower = _bounds(cells, where, n, "lower_bound", 0.0)
    upper = _bounds(cells, where, n, "upper_bound", np.inf)
    offset = None
    if ruleset is not None and ruleset.negative.mode == "shift":
        offset = _shift_offset(
            space, m, known, contributions, ruleset.negative.bound, request_of_cell
        )
        values = values + offset
        # The caller's a-priori bounds are on the published scale: an intruder who knows
        # x >= l knows y = x + N M >= l + N M, and every y >= 0 (seed 004 section 2.2).
        # Until 2026-11-27 the lower bounds were replaced by 0 and the upper bounds read
        # on the shifted scale: a bound the intruder knows was ignored (a pattern called
        # safe that the same bound makes unsafe under 'absolute'), and a value within its
        # upper bound was refused as above it.
        given_lower = _bounds(cells, where, n, "lower_bound", -np.inf)
        lower = np.maximum(0.0, given_lower + offset)
        upper = upper + offset
    negative = (values < 0) & np.isfinite(lower) & (lower >= 0)
    if negative.any():
        raise cell_error(
            space,
            request_of_cell,
            negative,
            "lower_bound",
            "is negative: tables with negative cells need explicit a-priori bounds "
            "(lower_bound) on every cell that may be suppressed (a margin may be sent "
            "with its bounds and no value)",
        )
    bad = np.flatnonzero(lower > upper)
    if bad.size:
        raise RequestInputError(
            "lower_bound exceeds upper_bound",
            field="lower_bound",
            cell=int(request_of_cell[bad[0]]),
        )
    _check_finite_within_bounds(space, values, lower, upper, request_of_cell)

    sensitive = np.zeros(n, bool)
    up = np.zeros(n)
    lo = np.zeros(n)
    fired = None
    labels: list[str] = []
    if spec is not None and ruleset is not None:  # ruleset is spec's, as the core reads it
        verdict = primary.assess(m, ruleset)
        # Cells sent without contributions or summary are not assessed (not "empty").
        sensitive = verdict.sensitive & known
        up = np.where(sensitive, verdict.upper_protection, 0.0)
        lo = np.where(sensitive, verdict.lower_protection, 0.0)
        fired = verdict.fired & known
        labels = rule_labels(spec.rules, with_parameters=labels_with_parameters)
    unions = (
        UnionSource(m, ruleset, known=known, contributions=contributions)
        if ruleset is not None and known.any()
        else None
    )
    conditions = None
    if counts is not None:
        sensitive, up, labels, unions, conditions = _count_sensitivity(
            space, values, counts, request_of_cell
        )
        lo = up.copy()
    for i, c in enumerate(cells):
        if c.protection is not None:
            j = where[i]
            sensitive[j] = True
            up[j] = max(up[j], c.protection.upper)
            lo[j] = max(lo[j], c.protection.lower)
    return TableInputs(
        space,
        where,
        request_of_cell,
        values,
        lower,
        upper,
        sensitive,
        up,
        lo,
        unions,
        labels,
        fired,
        np.where(known, m.count, 0.0),
        published,
        integral=counts is not None,
        offset=offset,
        conditions=conditions,
    )


def _check_finite_within_bounds(space, values, lower, upper, request_of_cell) -> None:
    """Every value finite (a computed margin can overflow) and within its cell's a-priori
    bounds (:func:`cell_error` names the cell)."""
    for bad, field, why in (
        (~np.isfinite(values), "value", "is too large: the sum overflows"),
        (values < lower, "lower_bound", "lies below its lower_bound"),
        (values > upper, "upper_bound", "lies above its upper_bound"),
    ):
        if bad.any():
            raise cell_error(space, request_of_cell, bad, field, why)


def cell_error(
    space, request_of_cell: np.ndarray, bad: np.ndarray, field: str, why: str, what: str = "value"
) -> RequestInputError:
    """The 422 about the table cells ``bad`` (a mask): the first of them the request sent
    (``the cell's value {why}``, ``cell`` its number), else the first computed margin,
    named by its key in the message (``the computed margin ['A', 'Total'] {why}``: the
    wire's ``cell`` numbers sent cells only). ``what`` is the cell's quantity in question
    (``value``, ``protection level``)."""
    sent = request_of_cell[bad]
    sent = sent[sent >= 0]
    if sent.size:
        return RequestInputError(f"the cell's {what} {why}", field=field, cell=int(sent.min()))
    margin = computed_margin(space, int(np.flatnonzero(bad)[0]))
    subject = margin if what == "value" else f"the {what} of {margin}"
    return RequestInputError(f"{subject} {why}", field=field)


def computed_margin(space, cell: int) -> str:
    """How a message names a cell the request did not send (a margin the service
    computed): by its key, since the wire's ``cell`` numbers sent cells only."""
    return f"the computed margin {list(space.key(cell))}"


def _count_sensitivity(space, values, counts: CountRules, request_of_cell):
    """The threshold rule and/or seed 001's extended threshold rules on every cell of a
    count table (margins included), protection ``range`` percent of the count (DESIGN
    item 4: 0 or a configured range)."""
    bad = ~(
        np.isfinite(values) & (values >= 0) & (values == np.round(values)) & (values <= MAX_COUNT)
    )
    if bad.any():
        # A cell the caller sent first (a computed margin inherits its leaves' fault).
        raise cell_error(
            space,
            request_of_cell,
            bad,
            "value",
            f"is not a whole count from 0 to {MAX_COUNT}: a count table's cells are counts",
        )
    # Named dimensions are checked even when only the threshold rule runs.
    axes = variable_axes(counts.keys, counts.targets, list(space.names), prefix="counts.")
    sensitive = np.zeros(len(values), bool)
    conditions = None
    with core_errors(TABLE_FIELDS, request_of_cell):
        if counts.threshold is not None:
            sensitive |= frequency.threshold_rule(
                values, counts.threshold, zero_cells=counts.zero_cells
            )
        if counts.extended is not None:
            sensitive |= _extended(space, values, counts.extended, *axes)
            config = frequency.ExtendedThresholdConfig(**counts.extended.model_dump())
            conditions = frequency.dominance_conditions_on_table(space, values, *axes, config)
    level = np.where(sensitive, counts.range / 100.0 * values, 0.0)
    # A union of suppressed cells counts the respondents of its members: the threshold
    # rule (or rule 3 of the extended rules) on it is the minimum frequency rule on summed
    # counts (seed 002 section 4). Dominance rules 1-2 define nothing for a union.
    minimum = [] if counts.threshold is None else [(counts.threshold, "threshold")]
    if counts.extended is not None and counts.extended.rule_3:
        minimum.append((counts.extended.t_min_cell, "3"))
    if not minimum:
        return sensitive, level, [], None, conditions
    t, label = max(minimum)
    n = len(values)
    as_counts = magnitudes.Magnitudes(
        value=values,
        total=values,
        count=values,
        largest=np.zeros((n, 2)),
        target=np.zeros(n),
        requested=np.zeros(n),
        protectable=np.ones(n, bool),
        all_zero=np.zeros(n, bool),
    )
    unions = UnionSource(as_counts, primary.RuleSet((MinimumFrequency(int(np.ceil(t))),)))
    return sensitive, level, [label], unions, conditions


def _extended(space, values, extended: ExtendedRules, key_axes, target_axes) -> np.ndarray:
    if not isinstance(space, Table):
        raise RequestInputError(
            "the extended rules need one table, not linked tables", field="counts.extended"
        )
    config = frequency.ExtendedThresholdConfig(**extended.model_dump())
    return frequency.extended_threshold_rules_on_table(space, values, key_axes, target_axes, config)


def _magnitudes(cells, where, n, spec, ruleset):
    """Magnitudes in table order, which cells have them, and the raw contributions."""
    has = [i for i, c in enumerate(cells) if c.contributions is not None or c.summary is not None]
    known = np.zeros(n, bool)
    known[where[has]] = True
    if ruleset is None:
        if has:
            raise RequestInputError(
                "contributions or summaries need 'rules' or 'profile' to be assessed",
                field="rules",
                cell=has[0],
            )
        return _empty(n, 2), known, None
    m_part = magnitudes_of(cells, spec, ruleset, index=has) if has else None
    with_contributions = [i for i in has if cells[i].contributions is not None]
    contributions = None
    if with_contributions:
        c = contributions_of(cells, with_contributions, spec.weights)
        contributions = c.renumbered(where[with_contributions])
    parts = [(where[has], m_part)] if m_part is not None else []
    rest = np.flatnonzero(~known)
    if rest.size:
        parts.append((rest, _empty(rest.size, ruleset.depth)))
    return magnitudes.merge(n, parts), known, contributions


def _pooled_margins(
    space: Table, cells, where, m, known, contributions, ruleset, max_entries: int | None = None
):
    """Margins sent without contributions or summary get their leaves' contributions.

    A margin's respondents are those of the leaves below it (one holding across several
    leaves counted once, seed 000 Holdings), so it is judged by the same rules as any cell
    and gets its own protection levels (issue 20). Summaries cannot be pooled (which of
    two cells' largest contributors are the same respondent is unknown), nor can bare
    values: a margin with such a leaf below it and any leaf with contributions or a
    summary is refused, unless it is sent with its own summary or contributions. A margin
    none of whose leaves has either stays unassessed, like its leaves.
    """
    n = space.n_cells
    leaf_cells = np.flatnonzero(space.is_leaf)
    margins = np.flatnonzero(~known & ~space.is_leaf)
    if not margins.size:
        return m, known, contributions
    raw = np.zeros(n, bool)
    raw[where[[i for i, c in enumerate(cells) if c.contributions is not None]]] = True
    below = space.aggregation[margins].tocsr()  # margins x leaves
    n_leaves = np.diff(below.indptr)
    n_raw = below @ raw[leaf_cells].astype(float)
    n_known = below @ known[leaf_cells].astype(float)
    mixed = (n_known > 0) & (n_raw < n_leaves)
    if mixed.any():
        key = list(space.key(int(margins[np.flatnonzero(mixed)[0]])))
        raise RequestInputError(
            f"the margin {key} is computed from leaves sent with a summary or a bare value "
            "next to leaves with contributions or a summary: its contributors cannot be "
            "pooled from them; send the margin with its own summary or contributions, or "
            "every leaf below it with contributions",
            field="cells",
        )
    pool = margins[n_raw == n_leaves]
    if not pool.size or contributions is None:
        return m, known, contributions
    if max_entries is not None:
        # Each contribution once more in every margin above its leaf (at most; only the
        # pooled margins take it), counted before anything of that size is built.
        above = np.ones(n, np.int64)
        for d, h in enumerate(space.dimensions):
            above *= h.depth[space.key_positions[:, d]] + 1
        entries = int(((above - 1)[contributions.cell]).sum())
        if entries > max_entries:
            raise LimitError(
                f"pooling the leaves' contributions into the margins needs "
                f"{entries} entries, over the limit of {max_entries}; send the "
                "margins with their own summary",
                field="cells",
            )
    # Each leaf contribution once more in every pooled margin above its leaf. What is
    # of the pooled entries' size is dropped as soon as it is used: on 8 flat dimensions
    # (3.3 million entries) the matrices and indices kept alive tripled the peak.
    g = below[n_raw == n_leaves]  # pooled margins x leaves
    del below
    over_leaves = sp.csr_matrix((g.data, leaf_cells[g.indices], g.indptr), shape=(len(pool), n))
    del g
    source = UnionSource(m, ruleset, contributions=contributions)
    rows, _, src = spread(over_leaves, source, weights=False)
    del over_leaves, source
    pooled = dataclasses.replace(contributions.taken(src), cell=rows)  # numbered in pool
    with core_errors():  # its cells are margins the request did not send
        m_pool = ruled_magnitudes(len(pool), pooled, ruleset)
    del pooled
    per_margin = np.bincount(rows, minlength=len(pool))
    del rows
    rest = np.setdiff1d(np.arange(n), pool)
    m = magnitudes.merge(n, [(rest, _take(m, rest)), (pool, m_pool)])
    known = known.copy()
    known[pool] = True
    return m, known, _with_pooled(contributions, src, pool, per_margin)


def _with_pooled(
    contributions: magnitudes.Contributions,
    src: np.ndarray,
    pool: np.ndarray,
    per_margin: np.ndarray,
) -> magnitudes.Contributions:
    """The leaves' contributions and, margin by margin of ``pool`` (ascending), copies of
    ``per_margin`` of them (``src``, in order), in cell order (stable): each column written
    once into its place. Put end to end and then sorted, every column was held twice
    (3.3 million entries on 8 flat dimensions)."""
    cell = np.asarray(contributions.cell)
    order = np.argsort(cell, kind="stable")
    # A leaf's contribution goes after the pooled copies in margins numbered below its
    # cell (the pooled margins were sent without contributions: no cell is in both).
    copies_before = np.concatenate(([0], np.cumsum(per_margin)))
    at = np.arange(len(cell)) + copies_before[np.searchsorted(pool, cell[order])]
    copied = np.ones(len(cell) + len(src), bool)
    copied[at] = False

    def column(a: np.ndarray, copies: np.ndarray | None = None) -> np.ndarray:
        a = np.asarray(a)
        out = np.empty(len(copied), a.dtype)
        out[at] = a[order]
        out[copied] = a[src] if copies is None else copies
        return out

    def optional(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else column(a)

    return magnitudes.Contributions(
        column(cell, np.repeat(pool, per_margin)),
        column(contributions.value),
        optional(contributions.holding),
        optional(contributions.weight),
        optional(contributions.waiver),
        optional(contributions.request),
        contributions.weights_mode,
    )


def _take(m: magnitudes.Magnitudes, index: np.ndarray) -> magnitudes.Magnitudes:
    """The magnitudes of cells ``index``."""
    return magnitudes.Magnitudes(
        **{f.name: getattr(m, f.name)[index] for f in dataclasses.fields(m)}
    )


def _empty(n: int, depth: int) -> magnitudes.Magnitudes:
    """Magnitudes of cells sent without contributions or summary (no contributors)."""
    return magnitudes.from_summaries(
        np.zeros(n), np.zeros(n), np.full((n, depth), np.nan), depth=depth
    )


def _values(space, cells, where, m, known) -> np.ndarray:
    """Every cell's value: as sent, else from its contributions or summary, else the sum
    of its children; margins sent must add up (within the structure's tolerance)."""
    n = space.n_cells
    x = np.full(n, np.nan)
    given = np.zeros(n, bool)
    for i, c in enumerate(cells):
        if c.value is not None:
            x[where[i]] = c.value
            given[where[i]] = True
    from_sources = known & ~given
    x[from_sources] = m.value[from_sources]
    given |= from_sources
    leaves_missing = np.flatnonzero(space.is_leaf & ~given)
    if leaves_missing.size:
        key = list(space.key(int(leaves_missing[0])))
        sent = np.flatnonzero(where == leaves_missing[0])
        raise RequestInputError(
            f"leaf cell {key} has no value, contributions or summary",
            field="value",
            cell=int(sent[0]) if sent.size else None,
        )
    if not given.all():
        x = np.where(given, x, filled_margins(space, x))
    return x


#: Relative slack of :func:`_check_value_of_source` (rounding of the sums, not of data).
_SOURCE_RTOL = 1e-9


def _check_value_of_source(space, cells, where, contributions, ruleset, request_of_cell):
    """A cell sent with a ``value`` and its contributions or summary: the value is their
    sum (the summary's total), else a 422 naming the cell. The table is audited on the
    value and the rules read the contributions; until 2026-11-27 they could disagree
    unnoticed, and a cell published as 950 was judged on a summary of 1000 (largest 900,
    50: the p% level 40 where its own value gives 90), so a pattern that leaves it 40 was
    called safe. Under ``absolute`` and ``relaxed`` a summary gives absolute contributions
    (seed 002 section 5): the value's magnitude is at most their total, and a cell sent
    with a summary needs its value (until 2026-11-27 it took the total, a sum of
    magnitudes: a cell of +100 and -80 was audited as 180, a pattern called safe that
    leaves its value 20 less than its level 30 from the bound 0)."""
    n = space.n_cells
    absolute = ruleset.negative.uses_absolute_values
    sent = np.zeros(n, bool)
    value = np.zeros(n)
    source = np.zeros(n)  # the sum the value must equal
    scale = np.zeros(n)  # the sum of magnitudes, for the rounding slack
    summary = np.zeros(n, bool)
    for i, c in enumerate(cells):
        if absolute and c.value is None and c.summary is not None:
            raise RequestInputError(
                f"the cell's value is needed: under negative_values "
                f"'{ruleset.negative.mode}' a summary's total is the sum of absolute "
                "contributions, not the cell's value",
                field="value",
                cell=i,
            )
        if c.value is None or (c.contributions is None and c.summary is None):
            continue
        j = where[i]
        sent[j] = True
        value[j] = c.value
        if c.summary is not None:
            summary[j] = True
            source[j] = c.summary.total
            scale[j] = abs(c.summary.total)
    if not sent.any():
        return
    if contributions is not None:
        weighted = np.asarray(contributions.value, dtype=np.float64)
        if contributions.weight is not None:
            weighted = weighted * contributions.weight
        raw = sent & ~summary
        source[raw] = np.bincount(contributions.cell, weights=weighted, minlength=n)[raw]
        scale[raw] = np.bincount(contributions.cell, weights=np.abs(weighted), minlength=n)[raw]
    slack = _SOURCE_RTOL * np.maximum(1.0, np.maximum(scale, np.abs(value)))
    off = np.where(summary & absolute, np.abs(value) - source, np.abs(value - source)) > slack
    bad = sent & off
    if not bad.any():
        return
    first = int(request_of_cell[bad].min())  # every such cell was sent
    if not summary[where[first]]:
        why = "is not the sum of its contributions"
    elif absolute:
        why = "exceeds its summary's total of absolute contributions"
    else:
        why = "is not its summary's total"
    raise RequestInputError(f"the cell's value {why}", field="value", cell=first)


def _shift_offset(space, m, known, contributions, shift: float, request_of_cell) -> np.ndarray:
    """``Y - X`` of the table of ``y = x + M`` per observation (seed 004 section 2.2): leaf
    cells ``Y = X + n M`` with ``n`` the cell's observations, margins their sums. Audit and
    suppression run on ``Y`` with every lower bound at least 0, as the seed proposes, so
    that intervals and protection levels are on one scale; replies move values and
    intervals back by it (``TableInputs.offset``).

    ``n`` counts what the rules shift: each contribution (a holding's contributions are
    shifted one by one and then summed, seed 000 Holdings; the sum of the weights under
    sampling weights), a summary's ``count``. Until 2026-11-27 it was the number of
    holdings, so a holding of ``k`` contributions was ``k M`` above its ``x`` for the rules
    and ``M`` in the table: an a-priori bound ``x >= -N M`` the intruder does not have
    (two contributions of -60 in one holding with ``M = 100`` refused as a negative cell
    without bounds)."""
    missing = np.flatnonzero(space.is_leaf & ~known)
    if missing.size:
        cell = int(request_of_cell[missing[0]])
        raise RequestInputError(
            "the shift for negative values needs contributions or a summary "
            "on every leaf cell (its number of contributors)",
            field="cells",
            cell=cell if cell >= 0 else None,
        )
    n = m.count.copy()
    if contributions is not None:
        rows = np.bincount(contributions.cell, minlength=space.n_cells).astype(bool)
        n[rows] = np.bincount(
            contributions.cell, weights=contributions.weight, minlength=space.n_cells
        )[rows]
    return filled_margins(space, np.where(space.is_leaf, n * shift, np.nan))


def filled_margins(space, x: np.ndarray) -> np.ndarray:
    """Margins computed from the leaves, table by table for linked tables."""
    if isinstance(space, Table):
        return space.fill_margins(x)
    # A table's leaves can be another table's margins (a table within another: region
    # and region x size), so a table is filled once its leaves are known; the leaves of
    # the linked cells come first, and each pass fills at least one table until none is
    # left. Until 2026-11-27 the tables were filled in the order listed, and a smaller
    # table listed first read its leaves as nan ("leaf value of cell ('A',) is not
    # finite", naming an internal field and numbering the cell in that table).
    out = np.asarray(x, dtype=float).copy()
    todo = list(zip(space.tables, space.table_cells))
    while todo:
        ready = [(t, c) for t, c in todo if not np.isnan(out[c][t.is_leaf]).any()]
        for table, cells in ready or todo:  # none ready: fill_margins names a missing leaf
            try:
                out[cells] = table.fill_margins(out[cells])
            except InputError as exc:  # numbered in the linked cells, named as a value
                at = int(cells[exc.cell]) if exc.cell is not None else None
                what = "" if at is None else f" {list(space.key(at))}"
                raise InputError(
                    f"the value of cell{what} is not finite", field="values", cell=at
                ) from None
        todo = [(t, c) for t, c in todo if all(t is not r for r, _ in ready)]
    return out


def _bounds(cells, where, n, name, default) -> np.ndarray:
    b = np.full(n, default)
    for i, c in enumerate(cells):
        if (v := getattr(c, name)) is not None:
            b[where[i]] = v
    return b


def checked_table_inputs(body, resolved: ResolvedTableRequest) -> TableInputs:
    """:func:`table_inputs` of an audit or suppression request, its margins checked
    (:func:`check_additivity`)."""
    inputs = table_inputs(
        body.structure,
        body.cells,
        resolved.rules,
        labels_with_parameters=body.rules is not None,
        counts=body.counts,
        max_entries=resolved.max_pooled_entries,
        cover=resolved.cover,
    )
    check_additivity(inputs, body.structure.tolerance)
    return inputs


def on_published_scale(inputs: TableInputs) -> TableInputs:
    """``inputs`` moved back from ``Y = X + N M`` (the shift for negative values, seed 004
    section 2.2) to the scale the caller publishes, with the a-priori bounds ``y >= 0``
    as ``x >= -N M``; the protection levels are the same on both scales (``N M`` is a
    constant per cell). For the methods whose output is the publication itself (rounding
    and adjustment): a table rounded or adjusted on the shifted scale is not the
    caller's table (until 2026-11-27 /v1/round and /v1/adjust returned ``Y``'s values)."""
    if inputs.offset is None:
        return inputs
    off = inputs.offset
    return dataclasses.replace(
        inputs,
        values=inputs.values - off,
        lower_bounds=inputs.lower_bounds - off,
        upper_bounds=inputs.upper_bounds - off,
        offset=None,
    )


def check_additivity(inputs: TableInputs, tolerance: float) -> None:
    """Sent margins that do not add up are an error naming a broken relation and a sent
    cell of it: preferably a relation whose margin was sent (a wrong margin breaks its own
    relation to its parts), named by that margin; else the first broken relation, named
    by the first of its cells that was sent."""
    space, sent_as = inputs.space, inputs.request_of_cell
    with core_errors(TABLE_FIELDS, sent_as):
        broken = space.check_additivity(inputs.values, tolerance)
    if not broken:
        return
    parent = space.relation_parent
    v = next((b for b in broken if sent_as[parent[b.index]] >= 0), broken[0])
    members = sent_as[np.concatenate([[parent[v.index]], space.relations[v.index].indices])]
    sent = members[members >= 0]
    # By how much is left out: the difference is derived from the data (README, errors).
    raise RequestInputError(
        f"margins do not add up: {v.description} does not hold within "
        f"structure.tolerance ({tolerance:g})",
        field="value",
        cell=int(sent[0]) if sent.size else None,
    )


#: The most a table's dominance conditions are pruned for (:func:`table_problem`).
PRUNE_SECONDS = 5.0


def table_problem(
    inputs: TableInputs,
    tolerance: float,
    *,
    reachable: bool = True,
    deadline: float | None = None,
    conditions: bool = True,
) -> TableProblem:
    """The core's problem of a request's table; with ``reachable`` (audit, suppression,
    rounding: judged by feasibility intervals) the levels capped at the a-priori range
    (:meth:`TableInputs.reachable_levels`), without it (controlled adjustment) as found.

    A count table's dominance conditions (seed 001 rules 1-2) are kept for the routes
    that audit a pattern, pruned of those the relations and bounds prove on their own
    within :data:`PRUNE_SECONDS` and half of what is left before ``deadline`` (the
    request's, ``time.perf_counter()``: until 2026-11-27 the pruning took its 5 s on top
    of a /v1/audit limit of 1 s); without ``conditions`` (rounding and adjustment, which
    read none) they are dropped unread."""
    upper, lower = (
        inputs.reachable_levels()
        if reachable
        else (inputs.upper_protection, inputs.lower_protection)
    )
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        problem = TableProblem.of(
            inputs.space,
            inputs.values,
            inputs.sensitive,
            upper,
            lower,
            inputs.lower_bounds,
            inputs.upper_bounds,
            unions=inputs.unions,
            tolerance=tolerance,
            integral=inputs.integral,
            conditions=inputs.conditions if conditions else None,
        )
    if problem.conditions is not None:
        # At most a few seconds: an undecided condition is kept (conservative).
        now = time.perf_counter()
        until = now + PRUNE_SECONDS
        if deadline is not None:
            until = min(until, now + 0.5 * max(deadline - now, 0.0))
        problem = without_a_priori_conditions(problem, until)
    return problem
