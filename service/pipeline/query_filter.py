"""The online query filter (seed 003 section C, ``/v1/filter``) between a user's query and
its answer: the policy to apply, and both stages on the request. The mathematics is in
:mod:`service.sdc.query_filter`.

On the path of every user query (about a millisecond of CPU for 50 cells): the reply is a
dict, not a model, and nothing is built that a refused or plain answer does not need.
"""

from __future__ import annotations

import numpy as np

from schemas.filter import FilterPolicy, FilterRequest, NoisePolicy
from schemas.rules import RuleSet
from service.config import Settings
from service.sdc import frequency, magnitudes, noise, primary
from service.sdc import query_filter as qf

from .cells import ContributionRows, check_unique_cell_keys, contributions_of, magnitudes_of
from .errors import NOISE_FIELDS, RequestInputError, contribution_field, core_errors
from .rules import rule_labels, ruleset_from_wire


def policy_of(
    body: FilterRequest, settings: Settings, diagnostics: bool
) -> tuple[RuleSet | None, FilterPolicy]:
    """The sensitivity rules and the filter policy the request names: its inline policy
    (which only callers with diagnostics may send: the caller checks that) or a profile's.
    To a caller without diagnostics, a profile without a filter policy is as unknown as a
    missing one."""
    if body.policy is not None:
        if body.policy.filter.statistical.approach == "noise":
            noise_key(settings.noise_secret)
        return body.policy.rules, body.policy.filter
    profile = None if body.profile is None else settings.profiles.get(body.profile)
    if profile is None or (profile.filter is None and not diagnostics):
        raise RequestInputError("unknown profile", field="profile")
    if profile.filter is None:
        raise RequestInputError("the profile has no filter policy", field="profile")
    return profile.rules, profile.filter


def noise_key(secret: bytes | None) -> bytes:
    """The key of the noise multipliers, without which the noise approach cannot run."""
    if secret is None:
        raise RequestInputError(
            "the noise approach needs a noise secret in the service's "
            "configuration (SDC_NOISE_SECRET)",
            field="policy",
        )
    return secret


def _query_rules(wire) -> qf.QueryRules:
    return qf.QueryRules(
        max_dimensions=wire.max_dimensions,
        min_population=wire.min_population,
        min_area_population=wire.min_area_population,
        forbidden_combinations=tuple(frozenset(c) for c in wire.forbidden_combinations),
    )


def screen(
    body: FilterRequest,
    rules: RuleSet | None,
    policy: FilterPolicy,
    secret: bytes | None,
    diagnostics: bool,
) -> tuple[dict, int]:
    """Both stages on the request: the reply (a :class:`~schemas.filter.FilterReply`;
    without ``diagnostics`` no reasons per cell) and the number of cells stopped. First
    the query filter on the query's definition (maximum variables, forbidden
    combinations, minimum populations), before any figure is looked at; then the
    statistical-results filter on the figures under the policy's approach."""
    query = qf.Query(tuple(body.query.variables), body.query.population, body.query.area_population)
    refusal = qf.check_query(query, _query_rules(policy.query))
    if refusal is not None:
        return _refused(refusal), 0
    return _statistical_filter(body, rules, policy, secret, diagnostics)


def _statistical_filter(
    body: FilterRequest,
    rules: RuleSet | None,
    policy: FilterPolicy,
    secret: bytes | None,
    diagnostics: bool,
) -> tuple[dict, int]:
    """The statistical-results filter on the figures (after the query filter passed)."""
    check_unique_cell_keys([c.key for c in body.cells])
    for i, cell in enumerate(body.cells):
        if len(cell.key) != len(body.query.variables):
            raise RequestInputError(
                f"the key has {len(cell.key)} codes but the query "
                f"{len(body.query.variables)} variables",
                field="key",
                cell=i,
            )
    counts = [i for i, c in enumerate(body.cells) if c.count is not None]
    others = [i for i, c in enumerate(body.cells) if c.count is None]
    stat = policy.statistical
    if stat.approach == "refuse":
        reasons = _refuse_screen(body, rules, stat.count_threshold, counts, others)
        values = None
    else:
        reasons, values = _noise_screen(body, stat, secret, counts, others)
    stopped = np.array([bool(r) for r in reasons])
    decision, refusal = qf.decide(stopped, stat.approach)
    if refusal is not None:
        return _refused(refusal), int(stopped.sum())
    cells = []
    for i, cell in enumerate(body.cells):
        out = {
            "key": cell.key,
            "publish": not reasons[i],
            "value": None if values is None or reasons[i] else values[i],
        }
        if diagnostics:
            out["reasons"] = reasons[i]
        cells.append(out)
    return {"decision": decision, "refusal": None, "cells": cells}, int(stopped.sum())


def _refused(refusal: qf.Refusal) -> dict:
    return {
        "decision": "refuse",
        "cells": [],
        "refusal": {"code": refusal.code, "message": refusal.message, "stage": refusal.stage},
    }


def _refuse_screen(
    body, rules: RuleSet | None, threshold: int, counts: list[int], others: list[int]
) -> list[list[str]]:
    """AQS: which rules stop each cell (threshold rule on counts, the profile's rules on
    magnitudes)."""
    reasons: list[list[str]] = [[] for _ in body.cells]
    if counts:  # each count is at most 2**53 (schema), which is all the rule checks
        flagged = frequency.threshold_rule([body.cells[i].count for i in counts], threshold)
        for j in np.flatnonzero(flagged).tolist():
            reasons[counts[j]].append("threshold")
    if others:
        if rules is None:
            raise RequestInputError(
                "magnitude cells need sensitivity rules in the policy", field="policy.rules"
            )
        ruleset = ruleset_from_wire(rules)
        result = primary.assess(magnitudes_of(body.cells, rules, ruleset, index=others), ruleset)
        labels = rule_labels(rules.rules, with_parameters=False)
        for label, fired in zip(labels, result.fired):
            for j in np.flatnonzero(fired).tolist():
                reasons[others[j]].append(label)
        for j in np.flatnonzero(result.zero_forced).tolist():
            reasons[others[j]].append("zero_cells")
    return reasons


def _noise_screen(
    body, stat: NoisePolicy, secret: bytes | None, counts: list[int], others: list[int]
) -> tuple[list[list[str]], list[float | None]]:
    """ARMS: the three criteria of seed 003 C on the noisy magnitudes; counts by the
    weighted-count criterion only (they carry no noise)."""
    reasons: list[list[str]] = [[] for _ in body.cells]
    values: list[float | None] = [None] * len(body.cells)
    for i in counts:
        if body.cells[i].count < stat.min_weighted_count:
            reasons[i].append("weighted_count")
    if not others:
        return reasons, values
    for i in others:
        if body.cells[i].summary is not None:
            raise RequestInputError(
                "the noise approach needs each magnitude cell's "
                "contributions with respondent ids, not a summary",
                field="summary",
                cell=i,
            )
    establishment, enterprise = _respondents(body.cells, others)
    c = contributions_of(body.cells, others, "replicate")
    _check_one_row_per_respondent(body.cells, c.cell, establishment, others)
    rules = qf.NoiseRules(
        stat.d,
        stat.jitter,
        stat.ratio_range[0],
        stat.ratio_range[1],
        stat.min_weighted_count,
        stat.p,
    )
    with core_errors(numbers=others, cells=body.cells):
        m = magnitudes.from_contributions(
            len(others), c.cell, c.value, holding=c.holding, weight=c.weight, depth=2
        )
    # The noise's cells are contribution rows.
    with core_errors(NOISE_FIELDS, numbers=ContributionRows(others, c.cell), cells=body.cells):
        noisy = qf.add_noise(
            len(others),
            c.cell,
            c.value,
            c.weight,
            enterprise,
            establishment,
            noise_key(secret),
            rules,
        )
    criteria = qf.noise_criteria(noisy, m, rules)
    for name in qf.CRITERIA:
        for j in np.flatnonzero(criteria[name]).tolist():
            reasons[others[j]].append(name)
    for j, v in enumerate(noisy.noisy_value.tolist()):
        values[others[j]] = v
    return reasons, values


def _check_one_row_per_respondent(
    cells, cell: np.ndarray, establishment: list[str], others: list[int]
) -> None:
    """A respondent listed twice in one cell would count as two contributors for the
    p%-rule and the weighted count, so that one establishment could pass both and have
    its noisy figure, and with it its multiplier, published: refused."""
    distinct, number = noise.factorize(establishment)
    ordered = np.sort(cell * len(distinct) + number)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
        i = others[int(repeated[0] // len(distinct))]
        raise RequestInputError(
            "a respondent is listed twice in the cell; send its contributions summed",
            field=contribution_field(cells[i], "respondent"),
            cell=i,
        )


def _missing_respondent(cell) -> str:
    """The path of the first respondent the cell's contributions leave out."""
    if cell.microdata is not None:
        return "microdata.respondent"
    return f"contributions.{[x.respondent for x in cell.contributions].index(None)}.respondent"


def _respondents(cells, index: list[int]) -> tuple[list[str], list[str]]:
    """Establishment and enterprise id of every contribution of ``cells[i] for i in index``
    (in :func:`.cells.contributions_of`'s order); a contribution's enterprise is its
    holding, or itself."""
    establishment: list[str] = []
    enterprise: list[str] = []
    for i in index:
        micro = cells[i].microdata
        if micro is not None:
            ids, holdings = micro.respondent, micro.holding
        else:
            ids = [x.respondent for x in cells[i].contributions]
            holdings = [x.holding for x in cells[i].contributions]
        if ids is None or None in ids:
            raise RequestInputError(
                "the noise approach needs the respondent of every contribution",
                field=_missing_respondent(cells[i]),
                cell=i,
            )
        establishment += ids
        enterprise += (
            ids if holdings is None else [r if h is None else h for r, h in zip(ids, holdings)]
        )
    return establishment, enterprise
