"""A whole magnitude table published with keyed multiplicative noise (``/v1/noise``; seed
003 B.4). The multipliers are :func:`service.sdc.noise.multipliers`, the same keyed noise
as the online filter's noise approach (:mod:`.query_filter`), so a respondent's noise is
the same in a table and in every query."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from schemas.noise import NoiseCell, NoiseLevel, NoiseRequest
from schemas.rules import RuleSet
from service.config import Settings
from service.sdc import noise
from service.sdc.problem import relations_of

from .cells import ContributionRows
from .errors import TABLE_FIELDS, RequestInputError, Wire, core_errors
from .query_filter import noise_key
from .rules import resolve_rules
from .tables import (
    LEAF_MAP_FACTOR,
    check_additivity,
    check_table_size,
    filled_margins,
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
    sensitive cell with ``|D| <`` its protection level. Reading chosen: the larger of the
    upper and lower levels, since the direction of a cell's noise is secret and it must
    cover whichever side an intruder estimates from (the filter's criterion 3 uses the
    p%-rule's upper level, which equals its lower one). Such cells are flagged, or with
    ``flagged = "suppress"`` left out. No complementary suppression is applied (as in
    ARMS), and a suppressed cell's noisy value may follow from published noisy margins:
    analysts see that as ``derivable`` (relations whose only unknown it is, repeated
    until nothing changes) and can send the table to ``/v1/suppress``.

    Without ``diagnostics`` (the filter role) the reply holds the noisy values of
    published cells only: the relative change with the noisy value gives the true one.
    """
    level = setup.level
    secret = noise_key(settings.noise_secret)
    inputs = table_inputs(
        body.structure,
        body.cells if setup.rules is not None else [_bare(c) for c in body.cells],
        setup.rules,
        labels_with_parameters=body.rules is not None,
        max_entries=LEAF_MAP_FACTOR * settings.max_cells,
    )
    check_additivity(inputs, body.structure.tolerance)
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
    cell_of_row, weighted, enterprise, establishment = _microdata(body, sent.tolist())
    with core_errors(FIELDS, numbers=ContributionRows(sent, cell_of_row), cells=body.cells):
        m = noise.multipliers(enterprise, establishment, secret, level.d, level.jitter)
        moved = noise.apply_noise(weighted, m) - weighted
    leaf_noise = np.bincount(cell_of_row, moved, minlength=leaves.size)
    d = np.full(space.n_cells, np.nan)
    d[leaves] = leaf_noise
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        d = filled_margins(space, d)
    true = inputs.values
    noisy = true + d
    level_needed = np.maximum(inputs.upper_protection, inputs.lower_protection)
    flagged = inputs.sensitive & (np.abs(d) < level_needed)
    suppressed = flagged if body.flagged == "suppress" else np.zeros_like(flagged)
    relative = np.divide(d, true, out=np.zeros_like(d), where=true != 0)
    relative_known = (true != 0) | (d == 0)
    derivable = _derivable(space, suppressed)
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
) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """For every contribution of the leaves (request cells ``sent``, in leaf order): its
    leaf (position in ``sent``), ``w x``, its enterprise (holding, or itself) and its
    establishment. 422 naming the cell for a leaf without contributions or respondents."""
    cell_of_row: list[int] = []
    weighted: list[float] = []
    enterprise: list[str] = []
    establishment: list[str] = []
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
    return (
        np.asarray(cell_of_row, np.int64),
        np.asarray(weighted, np.float64),
        enterprise,
        establishment,
    )


def _derivable(space, suppressed: np.ndarray) -> np.ndarray:
    """Suppressed cells whose value follows from the published ones: a relation with a
    single unknown cell gives it; a cell so found is known for the other relations, until
    nothing changes (additive relations, one at a time: a sufficient test, not the full
    linear-algebra one of the audit)."""
    a = (relations_of(space) != 0).astype(np.float64).tocsr()
    unknown = suppressed.copy()
    derived = np.zeros_like(suppressed)
    while True:
        single = np.flatnonzero(a @ unknown.astype(float) == 1)
        if not single.size:
            return derived
        found = np.unique(a[single].indices[unknown[a[single].indices]])
        derived[found] = True
        unknown[found] = False
