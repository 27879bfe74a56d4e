"""POST /v1/filter: the online query filter (seed 003 section C) between a user's query and
its answer. The mathematics is in :mod:`service.sdc.query_filter`."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Depends, Request
from starlette.exceptions import HTTPException

from schemas.errors import ErrorReply
from schemas.filter import FilterPolicy, FilterReply, FilterRequest, NoisePolicy
from schemas.rules import RuleSet
from service.sdc import frequency, magnitudes, noise, primary
from service.sdc import query_filter as qf
from service.sdc.errors import InputError

from . import convert
from .access import Caller, current_caller
from .body import openapi_body, validated
from .deps import check_cell_count
from .errors import RequestError
from .responses import JSONBytes
from .work import compute

router = APIRouter(prefix="/v1", tags=["filter"])


@router.post("/filter", response_model=FilterReply, openapi_extra=openapi_body(FilterRequest),
             responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}})
async def filter_answer(request: Request, caller: Caller = Depends(current_caller)):
    """Publish a query's answer as is, with some cells suppressed, or refuse it.

    First the query filter on the query's definition (maximum variables, forbidden
    combinations, minimum populations), before any figure is looked at; then the
    statistical-results filter on the figures under the profile's approach: ``refuse``
    (AQS: any sensitive cell refuses the table) or ``noise`` (ARMS: noisy values are
    published, cells failing a criterion are suppressed, no complementary suppression).
    The filter role names a profile and receives decisions and noisy values only; analysts
    may also send a policy inline and receive the reasons per cell. Refusal messages tell
    the user what to change and name no parameter.
    """
    settings, metrics = request.app.state.settings, request.app.state.metrics
    body = await validated(request, FilterRequest)   # from the bytes: on every query's path
    check_cell_count(len(body.cells), settings)
    request.state.cell_keys = [c.key for c in body.cells]
    rules, policy = _policy(body, settings, caller)
    reply, stopped = await compute(screen, body, rules, policy, settings.noise_secret,
                                   caller.sees_diagnostics, size=len(body.cells))
    metrics.cells_evaluated.inc(len(body.cells))
    metrics.sensitive_cells.inc(stopped)
    metrics.filter_decisions.labels(reply["decision"]).inc()
    return JSONBytes(reply)


def _policy(body: FilterRequest, settings, caller: Caller) -> tuple[RuleSet | None, FilterPolicy]:
    if body.policy is not None:
        if not caller.sees_diagnostics:
            # A caller that sends the microdata and chooses the criteria could read the
            # noise of any respondent off the replies: the filter role names a profile.
            raise HTTPException(403, "the filter role names a profile; an inline policy "
                                "needs the analyst role")
        if body.policy.filter.statistical.approach == "noise" and settings.noise_secret is None:
            raise RequestError(422, "the noise approach needs a noise secret in the service's "
                               "configuration (SDC_NOISE_SECRET)", field="policy")
        return body.policy.rules, body.policy.filter
    profile = settings.profiles.get(body.profile)
    if profile is None or (profile.filter is None and not caller.sees_diagnostics):
        # To the filter role a profile it cannot use here is as unknown as a missing one.
        raise RequestError(422, "unknown profile", field="profile")
    if profile.filter is None:
        raise RequestError(422, "the profile has no filter policy", field="profile")
    return profile.rules, profile.filter


def _query_rules(wire) -> qf.QueryRules:
    return qf.QueryRules(
        max_dimensions=wire.max_dimensions, min_population=wire.min_population,
        min_area_population=wire.min_area_population,
        forbidden_combinations=tuple(frozenset(c) for c in wire.forbidden_combinations))


def screen(body: FilterRequest, rules: RuleSet | None, policy: FilterPolicy,
           secret: bytes | None, diagnostics: bool) -> tuple[dict, int]:
    """The route's work without HTTP: the reply (a dict) and the number of cells stopped.
    Both stages of :func:`filter_answer`; benchmarks call it to time the same work."""
    query = qf.Query(tuple(body.query.variables), body.query.population,
                     body.query.area_population)
    refusal = qf.check_query(query, _query_rules(policy.query))
    if refusal is not None:
        return _refused(refusal), 0
    try:
        return _statistical_filter(body, rules, policy, secret, diagnostics)
    except InputError as error:
        raise _named_for_microdata(body.cells, error) from None


def _named_for_microdata(cells, error: InputError) -> InputError:
    """The core names contribution fields; a cell sent as columns has them under
    ``microdata``."""
    if (error.cell is not None and error.field and error.field.startswith("contributions.")
            and cells[error.cell].microdata is not None):
        error.field = "microdata." + error.field.split(".")[-1]
    return error


def _statistical_filter(body: FilterRequest, rules: RuleSet | None, policy: FilterPolicy,
                        secret: bytes | None, diagnostics: bool) -> tuple[dict, int]:
    """The statistical-results filter on the figures (after the query filter passed)."""
    convert.check_unique_keys([c.key for c in body.cells])
    for i, cell in enumerate(body.cells):
        if len(cell.key) != len(body.query.variables):
            raise InputError(f"the key has {len(cell.key)} codes but the query "
                             f"{len(body.query.variables)} variables", field="key", cell=i)
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
        out = {"key": cell.key, "publish": not reasons[i],
               "value": None if values is None or reasons[i] else values[i]}
        if diagnostics:
            out["reasons"] = reasons[i]
        cells.append(out)
    return {"decision": decision, "refusal": None, "cells": cells}, int(stopped.sum())


def _refused(refusal: qf.Refusal) -> dict:
    return {"decision": "refuse", "cells": [], "refusal": {
        "code": refusal.code, "message": refusal.message, "stage": refusal.stage}}


def _refuse_screen(body, rules: RuleSet | None, threshold: int, counts: list[int],
                   others: list[int]) -> list[list[str]]:
    """AQS: which rules stop each cell (threshold rule on counts, the profile's rules on
    magnitudes)."""
    reasons: list[list[str]] = [[] for _ in body.cells]
    if counts:   # each count is at most 2**53 (schema), which is all the rule checks
        flagged = frequency.threshold_rule([body.cells[i].count for i in counts], threshold)
        for j in np.flatnonzero(flagged).tolist():
            reasons[counts[j]].append("threshold")
    if others:
        if rules is None:
            raise RequestError(422, "magnitude cells need sensitivity rules in the policy",
                               field="policy.rules")
        cells = [body.cells[i] for i in others]
        ruleset = convert.ruleset_from_wire(rules)
        try:
            result = primary.assess(convert.magnitudes_from_cells(cells, rules, ruleset), ruleset)
        except InputError as error:
            raise convert.renumbered(error, others) from None
        labels = convert.rule_labels(rules.rules, with_parameters=False)
        for label, fired in zip(labels, result.fired):
            for j in np.flatnonzero(fired).tolist():
                reasons[others[j]].append(label)
        for j in np.flatnonzero(result.zero_forced).tolist():
            reasons[others[j]].append("zero_cells")
    return reasons


def _noise_screen(body, stat: NoisePolicy, secret: bytes, counts: list[int],
                  others: list[int]) -> tuple[list[list[str]], list[float | None]]:
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
            raise InputError("the noise approach needs each magnitude cell's contributions "
                             "with respondent ids, not a summary", field="summary", cell=i)
    establishment, enterprise = _respondents(body.cells, others)
    c = convert.contributions_of(body.cells, others, "replicate")
    _check_one_row_per_respondent(c.cell, establishment, others)
    rules = qf.NoiseRules(stat.d, stat.jitter, stat.ratio_range[0], stat.ratio_range[1],
                          stat.min_weighted_count, stat.p)
    try:
        m = magnitudes.from_contributions(len(others), c.cell, c.value, holding=c.holding,
                                          weight=c.weight, depth=2)
    except InputError as error:
        raise convert.renumbered(error, others) from None
    try:
        noisy = qf.add_noise(len(others), c.cell, c.value, c.weight, enterprise,
                             establishment, secret, rules)
    except InputError as error:   # its cell is a contribution's row
        cell = None if error.cell is None else others[int(c.cell[error.cell])]
        if error.field == "enterprise_ids":
            raise InputError("a respondent is listed under two holdings",
                             field="contributions.holding", cell=cell) from None
        raise InputError(error.message, field="contributions.value", cell=cell) from None
    criteria = qf.noise_criteria(noisy, m, rules)
    for name in qf.CRITERIA:
        for j in np.flatnonzero(criteria[name]).tolist():
            reasons[others[j]].append(name)
    for j, v in enumerate(noisy.noisy_value.tolist()):
        values[others[j]] = v
    return reasons, values


def _check_one_row_per_respondent(cell: np.ndarray, establishment: list[str],
                                  others: list[int]) -> None:
    """A respondent listed twice in one cell would count as two contributors for the
    p%-rule and the weighted count, so that one establishment could pass both and have
    its noisy figure, and with it its multiplier, published: refused."""
    distinct, number = noise.factorize(establishment)
    ordered = np.sort(cell * len(distinct) + number)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
        raise InputError("a respondent is listed twice in the cell; send its contributions "
                         "summed", field="contributions.respondent",
                         cell=others[int(repeated[0] // len(distinct))])


def _respondents(cells, index: list[int]) -> tuple[list[str], list[str]]:
    """Establishment and enterprise id of every contribution of ``cells[i] for i in index``
    (in :func:`convert.contributions_of`'s order); a contribution's enterprise is its
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
            raise InputError("the noise approach needs the respondent of every contribution",
                             field="microdata.respondent" if micro is not None else
                             f"contributions.{ids.index(None)}.respondent", cell=i)
        establishment += ids
        enterprise += (ids if holdings is None else
                       [r if h is None else h for r, h in zip(ids, holdings)])
    return establishment, enterprise
