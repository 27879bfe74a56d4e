"""A whole magnitude table published with keyed multiplicative noise (``/v1/noise``; seed
003 B.4). The multipliers are :func:`service.sdc.noise.multipliers`, the same keyed noise
as the online filter's noise approach (:mod:`.query_filter`), so a respondent's noise is
the same in a table and in every query."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph

from schemas.noise import NoiseCell, NoiseLevel, NoiseRequest
from schemas.rules import RuleSet
from service.config import Settings
from service.sdc import noise
from service.sdc.problem import relations_of
from service.sdc.table import Table

from .cells import ContributionRows
from .errors import TABLE_FIELDS, RequestInputError, Wire, core_errors
from .query_filter import noise_key
from .rules import resolve_rules
from .tables import (
    LEAF_MAP_FACTOR,
    check_additivity,
    check_table_size,
    filled_margins,
    on_published_scale,
    table_inputs,
)

#: The noise's core errors in this request's terms (the filter's ``NOISE_FIELDS`` name
#: ``contributions.respondent``; here the ids are the cell's ``respondents``).
FIELDS: dict[str, Wire] = {
    "enterprise_ids": ("contributions.holding", "a respondent is listed under two holdings"),
    "establishment_ids": "respondents",
    "values": "contributions.value",
    "multipliers": "contributions.value",
}


@dataclass(frozen=True)
class NoiseSetup:
    """What a request is served with: its rule set (or none), and the noise level (from
    the request or the profile's filter policy)."""

    rules: RuleSet | None
    level: NoiseLevel


def resolve(body: NoiseRequest, settings: Settings) -> NoiseSetup:
    """The rule set and the noise level, checked before anything of the table's size is
    built. A filter-role caller names a profile's noise level (``noise`` inline is 403 at
    the route, as for the filter's inline policy)."""
    check_table_size(body.structure, settings.max_cells)
    noise_key(settings.noise_secret)
    spec = None
    if body.rules is not None or body.profile is not None:
        spec, _ = resolve_rules(body.rules, body.profile, settings)
    level = body.noise
    if level is None:
        profile = None if body.profile is None else settings.profiles.get(body.profile)
        policy = None if profile is None or profile.filter is None else profile.filter
        stat = None if policy is None else policy.statistical
        if stat is None or stat.approach != "noise":
            raise RequestInputError(
                "give 'noise' or a profile whose filter policy uses the noise approach",
                field="noise",
            )
        level = NoiseLevel(d=stat.d, jitter=stat.jitter)
    return NoiseSetup(spec, level)


def noisy_table(
    body: NoiseRequest, setup: NoiseSetup, settings: Settings, diagnostics: bool
) -> dict:
    """The reply (a :class:`~schemas.noise.NoiseReply`).

    Seed 003 B.4: each establishment's reported value ``x`` (times its weight ``w``) is
    multiplied by its keyed multiplier ``m`` before tabulation, so a leaf's noisy value is
    ``X' = sum m w x`` and its noise ``D = sum (m - 1) w x``; a margin's noise is the sum
    of its leaves' ("the amount of noise in any cell value is simply the sum of the noise
    in its component establishments"), so the noisy table adds up. The relative change of
    a cell is ``D / X``.

    Which cells the noise does not protect (seed 003 C, ARMS criterion 3: "the cell fails
    the p-percent rule and has insufficient noise to protect the actual value"): a
    sensitive cell whose noise left to an intruder (:func:`intruder_noise`) is below its
    protection level, or, for a level of 0, with no noise left at all (published as it
    is, disclosed). Reading chosen: the larger of the upper and lower levels, since the
    direction of a cell's noise is secret and it must cover whichever side an intruder
    estimates from (the filter's criterion 3 uses the p%-rule's upper level, which equals
    its lower one). Such cells are flagged, or with ``flagged = "suppress"`` left out. No
    complementary suppression is applied (as in ARMS), and a suppressed cell's noisy value
    may follow from the published noisy cells: analysts see that as ``derivable``
    (:func:`derivable_cells`) and can protect the table further (README).

    Without ``diagnostics`` (the filter role) the reply holds the noisy values of
    published cells only: the relative change with the noisy value gives the true one.
    """
    level = setup.level
    secret = noise_key(settings.noise_secret)
    inputs = table_inputs(
        body.structure,
        _one_unit_per_respondent(body.cells)
        if setup.rules is not None
        else [_bare(c) for c in body.cells],
        setup.rules,
        labels_with_parameters=body.rules is not None,
        max_entries=LEAF_MAP_FACTOR * settings.max_cells,
    )
    check_additivity(inputs, body.structure.tolerance)
    # The noisy table is the published one: under the shift for negative values the
    # rules ran on y = x + M, but the values noised are x's (until 2026-11-27 the reply
    # published y's, N M above every cell).
    inputs = on_published_scale(inputs)
    space = inputs.space
    leaves = np.flatnonzero(space.is_leaf)
    sent = inputs.request_of_cell[leaves]
    missing = leaves[sent < 0]
    if missing.size:
        raise RequestInputError(
            f"every leaf needs its contributions; leaf {list(space.key(int(missing[0])))} "
            "was not sent",
            field="cells",
        )
    cell_of_row, weighted, enterprise, establishment, units = _microdata(body, sent.tolist())
    with core_errors(FIELDS, numbers=ContributionRows(sent, cell_of_row), cells=body.cells):
        m = noise.multipliers(enterprise, establishment, secret, level.d, level.jitter)
        moved = noise.apply_noise(weighted, m) - weighted
    leaf_noise = np.bincount(cell_of_row, moved, minlength=leaves.size)
    unit = noise.factorize(units)[1]
    d = np.full(space.n_cells, np.nan)
    d[leaves] = leaf_noise
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        d = filled_margins(space, d)
    true = inputs.values
    noisy = true + d
    level_needed = np.maximum(inputs.upper_protection, inputs.lower_protection)
    members = leaf_membership(space, leaves)
    left, left_to_largest = intruder_noise(
        members, cell_of_row, unit, moved, weighted, inputs.sensitive, d, coalition(setup.rules)
    )
    # A level of 0 (an all-zero cell under the (p,q)-rule, an empty cell made sensitive)
    # asks only that the cell not be disclosed exactly, and without noise left it is.
    flagged = inputs.sensitive & (
        (left < level_needed)
        | (left <= 0)
        | (left_to_largest < second_levels(inputs, level_needed))
    )
    suppressed = flagged if body.flagged == "suppress" else np.zeros_like(flagged)
    relative = np.divide(d, true, out=np.zeros_like(d), where=true != 0)
    relative_known = (true != 0) | (d == 0)
    derivable = derivable_cells(space, suppressed)
    status = np.where(suppressed, "suppressed", np.where(flagged, "flagged", "published"))
    cells = []
    for c, (k, s) in enumerate(zip(space.keys.tolist(), status.tolist())):
        shown = s == "published" or (diagnostics and s == "flagged")
        entry: dict = {"key": list(k), "status": s, "value": float(noisy[c]) if shown else None}
        if diagnostics:
            entry["relative_change"] = float(relative[c]) if relative_known[c] else None
            entry["sensitive"] = bool(inputs.sensitive[c])
            if s == "suppressed":
                entry["derivable"] = bool(derivable[c])
        cells.append(entry)
    published = ~suppressed & relative_known
    summary: dict = {
        "cells": int(space.n_cells),
        "sensitive": int(inputs.sensitive.sum()),
        "flagged": int(flagged.sum()),
    }
    if diagnostics:
        changes = np.abs(relative[published])
        summary["max_relative_change"] = float(changes.max()) if changes.size else None
        summary["mean_relative_change"] = float(changes.mean()) if changes.size else None
    return {"cells": cells, "summary": summary}


#: The holding the rules count a respondent's contributions under when it is listed more
#: than once without one (not a name a request can send: Names are printable).
_RESPONDENT_UNIT = "\x00respondent:"


def _one_unit_per_respondent(cells: list[NoiseCell]) -> list[NoiseCell]:
    """The cells with every respondent (establishment) that is listed more than once
    without a holding, in one leaf or in several, made one unit for the rules, as the
    noise counts it (:func:`_microdata`: one multiplier per respondent): its
    contributions under one holding of its own. The rules counted them as several
    respondents while the noise check pooled them, so a margin over two leaves of one
    respondent (60 + 60 beside 10) was not sensitive and was published, though the other
    respondent, knowing its own noise, reads the first's total to within 10% (a helper's
    campaign, 2026-11-27). Sampling weights and holdings do not go together (the rules
    refuse them): such a respondent with weights is a 422."""
    seen: dict[str, int] = {}
    for cell in cells:
        for x, rid in zip(cell.contributions or (), cell.respondents or ()):
            if x.holding is None:
                seen[rid] = seen.get(rid, 0) + 1
    repeated = {rid for rid, n in seen.items() if n > 1}
    if not repeated:
        return cells
    out = []
    for i, cell in enumerate(cells):
        contributions = list(cell.contributions or ())
        changed = False
        for k, (x, rid) in enumerate(zip(contributions, cell.respondents or ())):
            if x.holding is None and rid in repeated:
                if x.weight is not None:
                    raise RequestInputError(
                        f"respondent {rid!r} is listed in more than one contribution with "
                        "sampling weights: the rules count one respondent as one unit, "
                        "which weights do not allow; send its contributions as one",
                        field="respondents",
                        cell=i,
                    )
                contributions[k] = x.model_copy(update={"holding": _RESPONDENT_UNIT + rid})
                changed = True
        out.append(cell.model_copy(update={"contributions": contributions}) if changed else cell)
    return out


def _bare(cell: NoiseCell) -> NoiseCell:
    """A cell as a value only, for a table without rules (protection levels given on the
    cells): contributions are assessed only under rules, and here they only carry the
    noise. The value is the sent one, else ``sum w x`` (the noise's own tabulation)."""
    if cell.contributions is None:
        return cell
    total = sum(x.value * (1.0 if x.weight is None else x.weight) for x in cell.contributions)
    value = cell.value if cell.value is not None else total
    return cell.model_copy(update={"contributions": None, "value": value})


def _microdata(
    body: NoiseRequest, sent: list[int]
) -> tuple[np.ndarray, np.ndarray, list[str], list[str], list[tuple[bool, str]]]:
    """For every contribution of the leaves (request cells ``sent``, in leaf order): its
    leaf (position in ``sent``), ``w x``, its enterprise (holding, or itself: the id its
    noise direction is keyed by), its establishment, and its unit as the rules count
    respondents: ``(True, holding)`` or ``(False, respondent)``, so that a holding and a
    respondent of the same id are two units, as :mod:`service.sdc.magnitudes` counts them.
    422 naming the cell for a leaf without contributions or respondents."""
    cell_of_row: list[int] = []
    weighted: list[float] = []
    enterprise: list[str] = []
    establishment: list[str] = []
    units: list[tuple[bool, str]] = []
    for position, i in enumerate(sent):
        cell = body.cells[i]
        if cell.contributions is None:
            raise RequestInputError(
                "the noise is added to the microdata: a leaf needs its contributions "
                "(not a value or a summary)",
                field="contributions",
                cell=i,
            )
        ids = cell.respondents
        if ids is None or len(ids) != len(cell.contributions):
            raise RequestInputError(
                "the noise needs the respondent (establishment) of every contribution, "
                "one id per contribution",
                field="respondents",
                cell=i,
            )
        for x, rid in zip(cell.contributions, ids):
            cell_of_row.append(position)
            weighted.append(x.value * (1.0 if x.weight is None else x.weight))
            establishment.append(rid)
            enterprise.append(rid if x.holding is None else x.holding)
            units.append((x.holding is not None, enterprise[-1]))
    return (
        np.asarray(cell_of_row, np.int64),
        np.asarray(weighted, np.float64),
        enterprise,
        establishment,
        units,
    )


def coalition(rules: RuleSet | None) -> int:
    """The largest intruder coalition the rule set assumes (its p%- and (p,q)-rules' ``c``;
    1 without rules: protection levels sent on the cells)."""
    if rules is None:
        return 1
    return max([int(getattr(r, "c", 1)) for r in rules.rules] + [1])


def leaf_membership(space, leaves: np.ndarray) -> sp.csr_matrix:
    """``R`` of shape ``(n_cells, len(leaves))``: each cell as the sum of the leaves
    ``leaves`` (cell numbers, in order). A table's :attr:`~Table.aggregation`; linked
    tables compose theirs, a cell that is a leaf of one table and a total of another taking
    its leaves from the other (passes until nothing changes, at most one per table)."""
    position = np.full(space.n_cells, -1)
    position[leaves] = np.arange(leaves.size)
    if isinstance(space, Table):
        return sp.csr_matrix(space.aggregation)
    r = sp.csr_matrix(
        (np.ones(leaves.size), (leaves, np.arange(leaves.size))),
        shape=(space.n_cells, leaves.size),
    )
    for _ in range(len(space.tables) + 1):
        before = r.nnz
        rows = r.tolil()
        for table, cells in zip(space.tables, space.table_cells):
            inner = r[cells[table.is_leaf]]
            block = sp.csr_matrix(table.aggregation) @ inner
            for i, c in enumerate(cells):
                if position[c] < 0:
                    rows[c] = block[i]
        r = sp.csr_matrix(rows)
        r.data[:] = 1.0
        if r.nnz == before:
            break
    return r


def second_levels(inputs, level_needed: np.ndarray) -> np.ndarray:
    """Each cell's level for its second largest unit against a coalition holding the
    largest (:func:`service.sdc.rules.PPercent.second_level`): the largest over the rule
    set's rules, a rule without one (dominance, frequency, request) counting its own
    level, the largest's (conservative: the second's is never higher). Cells whose level
    was given on the cell, above the rules', keep it: nothing says whom it protects."""
    if inputs.unions is None:
        return level_needed
    m = inputs.unions.cells
    rules = inputs.unions.ruleset.rules
    first = np.max([r.upper_protection(m) for r in rules], axis=0)
    second = np.max(
        [r.second_level(m) if hasattr(r, "second_level") else r.upper_protection(m) for r in rules],
        axis=0,
    )
    given = level_needed > first + 1e-9 * np.maximum(1.0, np.abs(first))
    return np.where(given, level_needed, np.minimum(second, level_needed))


def intruder_noise(
    members: sp.csr_matrix,
    cell_of_row: np.ndarray,
    unit: np.ndarray,
    moved: np.ndarray,
    weighted: np.ndarray,
    sensitive: np.ndarray,
    noise_of_cell: np.ndarray,
    c: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The noise that still hides a sensitive cell's largest respondent from an intruder
    who knows its own multiplier (``nan`` elsewhere).

    Why (the single-contributor exposure): the multipliers are keyed on the respondent
    alone (:mod:`service.sdc.noise`: the direction on the enterprise, the jitter on the
    establishment), so a respondent has one multiplier in every cell, table and filter
    query. A cell it makes up alone publishes ``m x``; it knows ``x``, so it learns ``m``
    (and its enterprise's direction), and in any other cell it subtracts its noisy
    contribution ``m x`` exactly rather than ``x``: its own noise no longer hides the
    others. Reading chosen: every respondent is assumed to know its own noise (it can,
    whenever such a cell is published, and an intruder who knows a respondent's value
    from elsewhere learns it the same way); keying the multiplier per cell instead would
    give one total different noise in two tables or queries, which seed 003 B.4 and C's
    fixed per-respondent noise is there to prevent.

    The check: seed 003 B.1.a protects the largest respondent (unit: the holding, as the
    rules count respondents) against a coalition of up to ``c`` other respondents, and
    the others against a coalition holding the largest, which its own noise leaves
    another noise (:func:`service.sdc.noise.noise_left_to_largest`; a campaign found the
    filter publishing 1000, 900, 20, 20, the largest left 72.2 to hide the second, whose
    level is 95): the first is compared with the cell's level, the second with the
    level of the second largest unit
    (:func:`second_levels`). Returns both, per cell: (left to the others, left to the
    largest). For
    ``c = 1`` the noise left is ``min(|D|, min_r |D - D_r|)`` over the other units ``r``
    of the cell (``D_r``: ``r``'s noise in the cell, over every leaf below it); for ``c >
    1`` also at most ``|D|`` minus the ``c`` largest ``|D_r|`` (a lower bound on what any
    coalition of ``c`` leaves, triangle inequality: conservative). A cell of one unit is
    hidden by ``|D|`` (the intruder is an outsider). The bound itself is
    :func:`service.sdc.noise.noise_left`, shared with the online filter."""
    out = np.full(members.shape[0], np.nan)
    to_largest = np.full(members.shape[0], np.nan)
    cells = np.flatnonzero(sensitive)
    if not cells.size:
        return out, to_largest
    n_units = int(unit.max()) + 1 if unit.size else 0
    shape = (members.shape[1], n_units)
    per_noise = sp.csr_matrix((moved, (cell_of_row, unit)), shape=shape)
    per_value = sp.csr_matrix((weighted, (cell_of_row, unit)), shape=shape)
    present = sp.csr_matrix((np.ones(unit.size), (cell_of_row, unit)), shape=shape)
    sub = members[cells]
    # (cell, unit) rows: every unit present below each sensitive cell, in unit order.
    rows = sp.csr_matrix(sub @ present)
    rows.sort_indices()
    pairs = rows.tocoo()
    noise_u = np.asarray(sp.csr_matrix(sub @ per_noise)[pairs.row, pairs.col]).ravel()
    value_u = np.asarray(sp.csr_matrix(sub @ per_value)[pairs.row, pairs.col]).ravel()
    rows = (pairs.row, value_u, noise_u, np.asarray(noise_of_cell)[cells], cells.size, c)
    out[cells] = noise.noise_left(*rows)
    to_largest[cells] = noise.noise_left_to_largest(*rows)
    return out, to_largest


#: Cells of a connected group of unknowns beyond which the exact test (a dense null
#: space) is not run; such a group's cells are reported derivable (the safe side).
DENSE_LIMIT = 1500


def derivable_cells(space, suppressed: np.ndarray) -> np.ndarray:
    """Suppressed cells whose noisy value follows exactly from the published ones.

    A cell ``j`` of the unknowns ``U`` is determined by ``A_U x_U = -A_K x_K`` (``K`` the
    published cells) iff every solution has the same ``x_j``, i.e. iff the null space of
    ``A_U`` is 0 at ``j``. First the cheap part: a relation with a single unknown gives it,
    repeated until nothing changes; the cells left form groups connected through shared
    relations, and each group's null space is computed (SVD, dense) unless it has more
    than :data:`DENSE_LIMIT` cells, when all its cells are reported derivable (safe side:
    the agency is told to protect them). The peeling alone missed cells: in a 2-D table a
    cell linking two suppressed rectangles is the sum of their rows minus their columns,
    though no relation has it as its only unknown."""
    a = sp.csr_matrix(relations_of(space), dtype=np.float64)
    pattern = (a != 0).astype(np.float64).tocsr()
    unknown = suppressed.copy()
    derived = np.zeros_like(suppressed)
    while True:
        single = np.flatnonzero(pattern @ unknown.astype(float) == 1)
        if not single.size:
            break
        found = np.unique(pattern[single].indices[unknown[pattern[single].indices]])
        derived[found] = True
        unknown[found] = False
    cells = np.flatnonzero(unknown)
    if not cells.size:
        return derived
    sub = a[:, cells].tocsr()
    sub = sub[np.flatnonzero(np.diff(sub.indptr))]
    # Groups: cells linked by a relation they share, the components of the bipartite graph
    # cells <-> relations (linear in its entries; sub^T sub, which was built for this, has
    # k^2 entries for a relation of k unknowns: 1-D, 4,500 leaves flagged, +450 MiB).
    n_cells = sub.shape[1]
    pattern = sp.csr_matrix((np.ones(sub.nnz), sub.indices, sub.indptr), shape=sub.shape)
    graph = sp.bmat([[None, pattern.T], [pattern, None]], format="csr")
    _, labels = scipy.sparse.csgraph.connected_components(graph, directed=False)
    group = labels[:n_cells]
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.diff(group[order], prepend=-1))
    for members in np.split(order, starts[1:]):
        if members.size > DENSE_LIMIT:
            derived[cells[members]] = True
            continue
        block = sub[:, members]
        block = block[np.flatnonzero(np.diff(block.tocsr().indptr))].toarray()
        derived[cells[members[~_free_columns(block)]]] = True
    return derived


def _free_columns(block: np.ndarray) -> np.ndarray:
    """Which unknowns (columns) the relations ``block`` leave free: those whose unit
    vector is outside the row space, i.e. where the null space is not 0. From the thin SVD
    (``min(m, n)`` right singular vectors, not the ``n x n`` that ``scipy.linalg.null_space``
    computes): the null space's squared norm at ``j`` is 1 less that of the row space's
    orthonormal basis; under 1e-9 the cell is taken as derivable (the safe side).

    numpy's SVD also releases the GIL; scipy's held it for the whole solve, so that a
    /v1/noise table of 11 x 11 x 11 leaves, every one flagged (a group of 1,331 cells),
    stalled the event loop, health checks included, for 6 s (a campaign, h51)."""
    if not block.size:
        return np.ones(block.shape[1], bool)
    _, s, vh = np.linalg.svd(block, full_matrices=False)
    tol = max(block.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0)
    basis = vh[: int((s > tol).sum())]
    return 1.0 - np.einsum("ij,ij->j", basis, basis) > 1e-9
