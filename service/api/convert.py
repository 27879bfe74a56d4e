"""Schemas to core arrays and back. No mathematics here: see service/sdc."""

from __future__ import annotations

from collections import Counter

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
    with_contributions = [i for i, c in enumerate(cells) if c.contributions is not None]
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


def contributions_of(cells, index: list[int], weights_mode) -> magnitudes.Contributions:
    """The contributions of ``cells[i] for i in index`` as flat arrays; cell ``k`` of the
    result is ``index[k]``'s position in ``index``."""
    contributions = [cells[i].contributions for i in index]
    sizes = np.fromiter((len(c) for c in contributions), np.int64, len(contributions))
    flat = [x for c in contributions for x in c]
    cell = np.repeat(np.arange(len(index)), sizes)
    value = np.fromiter((x.value for x in flat), np.float64, len(flat))
    holding = weight = waiver = request = None
    if any(x.holding is not None for x in flat):
        codes: dict[str, int] = {}
        holding = np.fromiter((-1 if x.holding is None else codes.setdefault(x.holding, len(codes))
                               for x in flat), np.int64, len(flat))
    if any(x.weight is not None for x in flat):
        # A contribution without a weight in a weighted request counts once (weight 1).
        weight = np.fromiter((1.0 if x.weight is None else x.weight for x in flat),
                             np.float64, len(flat))
    if any(x.waiver for x in flat):
        waiver = np.fromiter((x.waiver for x in flat), bool, len(flat))
    if any(x.request for x in flat):
        request = np.fromiter((x.request for x in flat), bool, len(flat))
    return magnitudes.Contributions(cell, value, holding, weight, waiver, request, weights_mode)


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
