"""Sensitive cells of count tables (``/v1/frequency/sensitivity``).

The threshold rule (seed 003 section A) and seed 001's extended threshold rules, both in
:mod:`service.sdc.frequency`; this module only turns the wire table into a dense array of
counts, the axes of the key and target variables and the key hierarchies, and the verdicts
back into cells.
"""

from __future__ import annotations

import itertools

import numpy as np

from schemas.frequency import CountDimension, FrequencyRequest
from service.sdc import frequency as fq
from service.sdc.table import table_size

from .cells import check_unique_cell_keys
from .errors import COUNT_FIELDS, RequestInputError, core_errors


def reply_size(body: FrequencyRequest, diagnostics: bool) -> int:
    """At most how many entries the reply lists: every cell of the table and, with the
    extended rules, the key marginals of each target, the target marginals and (for
    analysts) each level's area rows and area cells. From the wire sizes, in Python ints;
    names that are not dimensions are refused later."""
    sizes = [len(d.codes) for d in body.dimensions]
    n = table_size(sizes)
    if body.rules.extended is None:
        return n
    axis = {d.name: a for a, d in enumerate(body.dimensions)}
    key_axes = [axis[k] for k in body.keys if k in axis]
    target_axes = [axis[t] for t in body.targets if t in axis]
    total = (
        n + sum(n // sizes[j] for j in target_axes) + n // table_size(sizes[k] for k in key_axes)
    )
    if diagnostics:
        for a in key_axes:
            for level in body.dimensions[a].hierarchy or []:
                cells = n // sizes[a] * len(set(level.values()))
                total += sum(cells + cells // sizes[j] for j in target_axes)
    return total


def variable_axes(
    keys: list[str], targets: list[str], dims: list[str], prefix: str = ""
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The axes of the dimensions named as key variables and as target variables (seed
    001); errors name the field ``prefix + "keys"`` or ``prefix + "targets"``."""
    key_axes = _axes(keys, dims, prefix + "keys")
    target_axes = _axes(targets, dims, prefix + "targets")
    both = set(key_axes) & set(target_axes)
    if both:
        raise RequestInputError(
            f"dimension '{dims[min(both)]}' is both a key and a target", field=prefix + "targets"
        )
    return key_axes, target_axes


def _axes(names: list[str], dims: list[str], field: str) -> tuple[int, ...]:
    axes = []
    for i, name in enumerate(names):
        if name not in dims:
            raise RequestInputError(
                f"'{name}' is not the name of a dimension", field=f"{field}.{i}"
            )
        if dims.index(name) in axes:
            raise RequestInputError(f"'{name}' is named twice", field=f"{field}.{i}")
        axes.append(dims.index(name))
    return tuple(axes)


def _levels(dim: CountDimension, d: int) -> tuple[list[list[int]], list[list[str]]]:
    """Parent positions per level (for :class:`service.sdc.frequency.KeyHierarchy`) and the
    area codes of every level, numbered in order of first appearance."""
    parents, names = [], []
    below = dim.codes
    # Every name of the dimension and its level (0: leaf): one name, one code.
    level_of = dict.fromkeys(dim.codes, 0)
    for lvl, mapping in enumerate(dim.hierarchy or ()):
        field = f"dimensions.{d}.hierarchy.{lvl}"
        what = "leaf code" if lvl == 0 else f"level-{lvl} area"
        missing = [c for c in below if c not in mapping]
        if missing:
            raise RequestInputError(
                f"{what} '{missing[0]}' has no parent at level {lvl + 1}", field=field
            )
        if len(mapping) != len(below):
            known = set(below)
            extra = next(c for c in mapping if c not in known)
            raise RequestInputError(
                f"'{extra}' is not a {what} of dimension '{dim.name}'", field=field
            )
        areas: dict[str, int] = {}
        parents.append([areas.setdefault(mapping[c], len(areas)) for c in below])
        clash = next((a for a in areas if a in level_of), None)
        if clash is not None:
            other = "leaf code" if level_of[clash] == 0 else f"level-{level_of[clash]} area"
            raise RequestInputError(
                f"level-{lvl + 1} area '{clash}' has the name of a {other} "
                f"of dimension '{dim.name}'; each code may name one thing "
                "only",
                field=field,
            )
        level_of.update(dict.fromkeys(areas, lvl + 1))
        below = list(areas)
        names.append(below)
    return parents, names


def _table(body: FrequencyRequest):
    """Dense counts (cells not sent: 0), the axes of the key and target variables, key
    hierarchies by axis."""
    dims = [d.name for d in body.dimensions]
    if len(set(dims)) != len(dims):
        raise RequestInputError("two dimensions have the same name", field="dimensions")
    for d, dim in enumerate(body.dimensions):
        if len(set(dim.codes)) != len(dim.codes):
            raise RequestInputError(
                f"dimension '{dim.name}' lists a code twice", field=f"dimensions.{d}.codes"
            )
    key_axes, target_axes = variable_axes(body.keys, body.targets, dims)
    if body.rules.extended is not None and not (key_axes and target_axes):
        raise RequestInputError(
            "the extended rules need at least one key and one target variable",
            field="keys" if not key_axes else "targets",
        )
    hierarchies, area_codes = {}, {}
    for d, dim in enumerate(body.dimensions):
        if dim.hierarchy is None:
            continue
        if d not in key_axes:
            raise RequestInputError(
                f"dimension '{dim.name}' has a hierarchy but is not a key "
                "variable (only key hierarchies are supported)",
                field=f"dimensions.{d}.hierarchy",
            )
        parents, names = _levels(dim, d)
        hierarchies[d], area_codes[d] = fq.KeyHierarchy(parents), names

    index = [{c: i for i, c in enumerate(dim.codes)} for dim in body.dimensions]
    check_unique_cell_keys([c.key for c in body.cells])
    position = np.empty((len(body.cells), len(dims)), dtype=np.int64)
    for i, cell in enumerate(body.cells):
        if len(cell.key) != len(dims):
            raise RequestInputError(
                f"the key has {len(cell.key)} codes but the table has {len(dims)} dimensions",
                field="key",
                cell=i,
            )
        for d, code in enumerate(cell.key):
            p = index[d].get(code)
            if p is None:
                raise RequestInputError(
                    f"code {d + 1} of the key is not a code of dimension '{dims[d]}'",
                    field="key",
                    cell=i,
                )
            position[i, d] = p
    counts = np.zeros(tuple(len(dim.codes) for dim in body.dimensions), dtype=np.int64)
    counts[tuple(position.T)] = [c.count for c in body.cells]
    return counts, key_axes, target_axes, hierarchies, area_codes


def assess(body: FrequencyRequest, diagnostics: bool) -> tuple[dict, int]:
    """The reply (a :class:`~schemas.frequency.FrequencyReply`) and the number of unsafe
    cells; without ``diagnostics`` decisions only (cells' and marginals' keys, status and
    sensitive). Check the reply's size first (:func:`reply_size`)."""
    counts, key_axes, target_axes, hierarchies, area_codes = _table(body)
    labels: dict[str, np.ndarray] = {}
    inherited: dict[str, np.ndarray] = {}
    result = None
    if body.rules.extended is not None:
        cfg = fq.ExtendedThresholdConfig(**body.rules.extended.model_dump())
        with core_errors(COUNT_FIELDS):
            result = fq.extended_threshold_rules(counts, key_axes, target_axes, cfg, hierarchies)
        labels.update(result.flags)
        inherited = result.inherited
    if body.rules.threshold is not None:
        rule = body.rules.threshold
        with core_errors(COUNT_FIELDS):
            labels["threshold"] = fq.threshold_rule(counts, rule.t, zero_cells=rule.zero_cells)
    unsafe = np.logical_or.reduce([np.zeros(counts.shape, bool), *labels.values()])
    status = np.where(unsafe, "unsafe", np.where(counts == 0, "empty", "safe"))

    codes = [dim.codes for dim in body.dimensions]
    cell_keys = _cell_keys_without(codes, ())
    key_m, target_m = _marginals(
        result, codes, key_axes, target_axes, diagnostics, body.rules.threshold, area_codes
    )
    n_unsafe = int(unsafe.sum())
    summary = {
        "cells": int(counts.size),
        "unsafe": n_unsafe,
        "empty": int((status == "empty").sum()),
        "marginals_unsafe": sum(m["sensitive"] for m in key_m + target_m),
    }
    if not diagnostics:
        cells = [
            {"key": k, "status": st, "sensitive": se}
            for k, st, se in zip(
                cell_keys, status.reshape(-1).tolist(), unsafe.reshape(-1).tolist()
            )
        ]
        return {
            "cells": cells,
            "key_marginals": key_m,
            "target_marginals": target_m,
            "summary": summary,
        }, n_unsafe

    summary["by_rule"] = {r: int(f.sum()) for r, f in labels.items()}
    by_cell = _names_by_cell(labels, counts.size)
    inherited_by_cell = _names_by_cell(inherited, counts.size)
    cells = [
        {"key": k, "status": st, "sensitive": se, "count": n, "rules": r, "inherited": h}
        for k, st, se, n, r, h in zip(
            cell_keys,
            status.reshape(-1).tolist(),
            unsafe.reshape(-1).tolist(),
            counts.reshape(-1).tolist(),
            by_cell,
            inherited_by_cell,
        )
    ]
    levels = (
        []
        if result is None
        else [_level(lv, codes, area_codes, body.dimensions) for lv in result.levels]
    )
    return {
        "cells": cells,
        "key_marginals": key_m,
        "target_marginals": target_m,
        "levels": levels,
        "summary": summary,
    }, n_unsafe


def _names_by_cell(flags: dict[str, np.ndarray], n: int) -> list[list[str]]:
    """Per cell (row-major), the names of the flags set on it, in the flags' order."""
    out: list[list[str]] = [[] for _ in range(n)]
    for name, flag in flags.items():
        for i in np.flatnonzero(flag).tolist():
            out[i].append(name)
    return out


def _cell_keys_without(codes: list[list[str]], summed: tuple[int, ...]) -> list[list[str | None]]:
    """Row-major keys of an array summed over ``summed`` axes, ``None`` at those axes."""
    return [
        list(k)
        for k in itertools.product(*(c if d not in summed else [None] for d, c in enumerate(codes)))
    ]


def _marginal_list(
    cell_keys, count: np.ndarray, rule_3: np.ndarray, threshold, diagnostics: bool
) -> list[dict]:
    """The marginals with rule 3's flags and, when the request has it, the threshold
    rule's (``threshold``: its parameters, or ``None``)."""
    by_rule = {"3": rule_3.reshape(-1)}
    if threshold is not None:
        with core_errors(COUNT_FIELDS):
            by_rule["threshold"] = fq.threshold_rule(
                count, threshold.t, zero_cells=threshold.zero_cells
            ).reshape(-1)
    flag = np.logical_or.reduce(list(by_rule.values())).tolist()
    if not diagnostics:
        return [{"key": k, "sensitive": f} for k, f in zip(cell_keys, flag)]
    names = _names_by_cell(by_rule, len(flag))
    return [
        {"key": k, "sensitive": f, "count": n, "rules": r}
        for k, n, f, r in zip(cell_keys, count.reshape(-1).tolist(), flag, names)
    ]


def _marginals(
    result, codes, key_axes, target_axes, diagnostics, threshold=None, area_codes=None
) -> tuple[list[dict], list[dict]]:
    """Key marginals ``f_k`` per target axis (then the areas' of key hierarchies, their
    keys with the area codes) and target marginals ``f_y`` with rule 3's verdicts (seed
    001, "Threshold rules", rule 3; computed in service.sdc.frequency) and the threshold
    rule's, which marks every published cell, margins included, as ``/v1/suppress`` does
    (seed 003 section A; a campaign found a key marginal of 2 under a threshold of 3
    reported not sensitive, 2026-11-27; the areas' were not listed until the same day,
    while ``/v1/suppress`` flagged them)."""
    if result is None:
        return [], []
    key_m = []
    for j in target_axes:
        key_m += _marginal_list(
            _cell_keys_without(codes, (j,)),
            result.key_marginal_counts[j],
            result.key_marginal_flags[j],
            threshold,
            diagnostics,
        )
    for lv in result.levels:
        key_m += _marginal_list(
            _cell_keys_without(_level_codes(lv, codes, area_codes), (lv.target_axis,)),
            lv.key_marginal_counts,
            lv.key_marginal_flags,
            threshold,
            diagnostics,
        )
    target_m = _marginal_list(
        _cell_keys_without(codes, key_axes),
        result.target_marginal_counts,
        result.target_marginal_flags,
        threshold,
        diagnostics,
    )
    return key_m, target_m


def _level_codes(lv: fq.LevelFlags, codes, area_codes) -> list:
    """Each dimension's codes at ``lv``: the area codes of every key it coarsens."""
    level_codes = list(codes)
    for axis, level in lv.areas:  # several keys at once: each named
        level_codes[axis] = area_codes[axis][level - 1]
    return level_codes


def _level(lv: fq.LevelFlags, codes, area_codes, dimensions) -> dict:
    """One level of a key hierarchy: the area rows checked and the unsafe area cells."""
    level_codes = _level_codes(lv, codes, area_codes)
    checked = np.logical_or.reduce(
        [
            np.zeros(
                lv.counts.shape[: lv.target_axis] + (1,) + lv.counts.shape[lv.target_axis + 1 :],
                bool,
            ),
            *lv.checked.values(),
        ]
    )
    row_keys = _cell_keys_without(level_codes, (lv.target_axis,))
    cell_keys = _cell_keys_without(level_codes, ())
    by_cell = _names_by_cell(lv.flags, lv.counts.size)
    flat = lv.counts.reshape(-1).tolist()
    return {
        "dimension": dimensions[lv.key_axis].name,
        "target": dimensions[lv.target_axis].name,
        "level": lv.level,
        "checked": [k for k, c in zip(row_keys, checked.reshape(-1).tolist()) if c],
        "cells": [
            {"key": cell_keys[i], "count": flat[i], "rules": by_cell[i]}
            for i in range(lv.counts.size)
            if by_cell[i]
        ],
    }
