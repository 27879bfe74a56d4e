"""Schemas to core arrays and back. No mathematics here: see service/sdc."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from schemas import rules as wire
from schemas.cells import MagnitudeCell
from service.sdc import magnitudes, primary, rules
from service.sdc.errors import InputError


def rule_from_wire(rule: wire.Rule) -> rules.Rule:
    params = rule.model_dump(exclude={"type", "name"})
    return rules.RULES[rule.type](**params)


def rule_labels(specs: list[wire.Rule], *, with_parameters: bool) -> list[str]:
    """Names of the rules in replies: the caller's ``name``, else the type, with the
    parameters only when the caller sent them itself (profiles keep them confidential)."""
    labels = []
    for spec in specs:
        if spec.name:
            labels.append(spec.name)
        elif with_parameters:
            params = ",".join(f"{k}={v:g}" for k, v in spec.model_dump(
                exclude={"type", "name"}).items())
            labels.append(f"{spec.type}({params})")
        else:
            labels.append(spec.type)
    seen: Counter[str] = Counter()
    unique = []
    for label in labels:
        seen[label] += 1
        unique.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return unique


def ruleset_from_wire(spec: wire.RuleSet) -> primary.RuleSet:
    neg = spec.negative_values
    return primary.RuleSet(
        rules=tuple(rule_from_wire(r) for r in spec.rules),
        negative=magnitudes.NegativePolicy(neg.mode, neg.factor, neg.shift),
        zero_cells=spec.zero_cells,
        empty_cells=spec.empty_cells,
        frequency_range=spec.frequency_range,
    )


def check_unique_keys(keys: list[list[str]]) -> None:
    """Each cell once: a second cell with the same key is an error naming that cell."""
    seen: dict[tuple[str, ...], int] = {}
    for i, key in enumerate(keys):
        first = seen.setdefault(tuple(key), i)
        if first != i:
            raise InputError(f"duplicate cell key: the same key as cell {first}", field="key", cell=i)


def magnitudes_from_cells(cells: list[MagnitudeCell], spec: wire.RuleSet,
                          ruleset: primary.RuleSet) -> magnitudes.Magnitudes:
    """Flatten the cells into arrays and compute their ordered magnitudes.

    Cells with contributions and cells with summaries may be mixed; each group goes
    through its own constructor and the results are merged in request order.
    """
    with_contributions = [i for i, c in enumerate(cells) if c.summary is None]
    with_summary = [i for i, c in enumerate(cells) if c.summary is not None]
    parts = []
    if with_contributions:
        parts.append((with_contributions, _from_contributions(cells, with_contributions, spec, ruleset)))
    if with_summary:
        parts.append((with_summary, _from_summaries(cells, with_summary, ruleset)))
    return magnitudes.merge(len(cells), parts)


def renumbered(error: InputError, index: list[int]) -> InputError:
    if error.cell is not None:
        error.cell = index[error.cell]
    return error


#: A contribution object's fields, in the order of :func:`_contributions`' tuples.
_FIELDS = attrgetter("value", "holding", "weight", "waiver", "request")


def _contributions(cell) -> tuple[int, Iterable[tuple]]:
    """A cell's number of contributions and their (value, holding, weight, waiver, request)
    tuples, whether sent as objects or (the online filter's compact form) as ``microdata``
    columns, which have no waiver or request."""
    micro = getattr(cell, "microdata", None)
    if micro is None:
        return len(cell.contributions), map(_FIELDS, cell.contributions)
    n = len(micro.value)
    return n, zip(micro.value, micro.holding or repeat(None, n), micro.weight or repeat(None, n),
                  repeat(False, n), repeat(False, n))


def contributions_of(cells, index: list[int], weights_mode) -> magnitudes.Contributions:
    """The contributions of ``cells[i] for i in index`` as flat arrays; cell ``k`` of the
    result is ``index[k]``'s position in ``index``. A column nobody sent is ``None``."""
    sizes, rows = tuple(zip(*map(_contributions, map(cells.__getitem__, index)))) or ((), ())
    # One transposition for all cells: per-cell column building cost more than the rule.
    value, holding, weight, waiver, request = tuple(zip(*chain.from_iterable(rows))) or ((),) * 5
    n = len(value)
    cell = np.repeat(np.arange(len(index)), sizes)
    holding_codes = None
    if holding.count(None) < n:
        codes = {h: k for k, h in enumerate(h for h in dict.fromkeys(holding) if h is not None)}
        codes[None] = -1
        holding_codes = np.fromiter(map(codes.__getitem__, holding), np.int64, n)
    # A contribution without a weight in a weighted request counts once (weight 1).
    weights = (None if weight.count(None) == n else
               np.fromiter((1.0 if w is None else w for w in weight), np.float64, n))
    return magnitudes.Contributions(
        cell, np.array(value, np.float64), holding_codes, weights,
        np.array(waiver, bool) if any(waiver) else None,
        np.array(request, bool) if any(request) else None, weights_mode)


def _from_contributions(cells, index, spec, ruleset) -> magnitudes.Magnitudes:
    c = contributions_of(cells, index, spec.weights)
    try:
        return magnitudes.from_contributions(
            len(index), c.cell, c.value, holding=c.holding, weight=c.weight, waiver=c.waiver,
            request=c.request, weights_mode=c.weights_mode, depth=ruleset.depth,
            negative=ruleset.negative, refuse_negative=ruleset.has_concentration_rule)
    except InputError as error:
        raise renumbered(error, index) from None


def _from_summaries(cells, index, ruleset) -> magnitudes.Magnitudes:
    summaries = [cells[i].summary for i in index]
    width = max(1, max(len(s.largest) for s in summaries))
    largest = np.full((len(index), width), np.nan)
    for row, s in enumerate(summaries):
        largest[row, :len(s.largest)] = s.largest
    requested = np.fromiter((np.nan if s.requested is None else s.requested for s in summaries),
                            np.float64, len(summaries))
    try:
        return magnitudes.from_summaries(
            np.fromiter((s.total for s in summaries), np.float64, len(summaries)),
            np.fromiter((s.count for s in summaries), np.float64, len(summaries)),
            largest, requested=requested, depth=ruleset.depth, negative=ruleset.negative)
    except InputError as error:
        raise renumbered(error, index) from None


def _axes(names: list[str], dims: list[str], field: str) -> tuple[int, ...]:
    axes = []
    for i, name in enumerate(names):
        if name not in dims:
            raise InputError(f"'{name}' is not the name of a dimension", field=f"{field}.{i}")
        if dims.index(name) in axes:
            raise InputError(f"'{name}' is named twice", field=f"{field}.{i}")
        axes.append(dims.index(name))
    return tuple(axes)


def key_and_target_axes(keys: list[str], targets: list[str], dims: list[str], prefix: str = ""
                        ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The axes of the dimensions named as keys and as targets (seed 001); errors name the
    field ``prefix + "keys"`` or ``prefix + "targets"``."""
    key_axes = _axes(keys, dims, prefix + "keys")
    target_axes = _axes(targets, dims, prefix + "targets")
    both = set(key_axes) & set(target_axes)
    if both:
        raise InputError(f"dimension '{dims[min(both)]}' is both a key and a target",
                         field=prefix + "targets")
    return key_axes, target_axes
