"""The online query filter (seed 003 section C, ``/v1/filter``) between a user's query and
its answer: the policy to apply, and both stages on the request. The mathematics is in
:mod:`service.sdc.query_filter`.

On the path of every user query (about a millisecond of CPU for 50 cells): the reply is a
dict, not a model, and nothing is built that a refused or plain answer does not need.
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter, is_not

import numpy as np

from schemas.filter import FilterPolicy, FilterRequest, NoisePolicy
from schemas.rules import RuleSet
from service.config import Settings
from service.sdc import frequency, magnitudes, noise, primary
from service.sdc import query_filter as qf
from service.sdc.errors import InputError

from .cells import (
    ContributionRows,
    check_unique_cell_keys,
    contributions_of,
    holding_codes,
    joined_column,
    magnitudes_of,
    microdata_of,
)
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


_KEY = attrgetter("key")
_COUNT = attrgetter("count")
_SUMMARY = attrgetter("summary")
_CONTRIBUTIONS = attrgetter("contributions")
_RESPONDENT = attrgetter("respondent")
_HOLDING = attrgetter("holding")


def _given(values: list) -> int:
    """How many of ``values`` are not None, by identity: ``list.count(None)`` would call a
    Pydantic model's ``__eq__`` (Python) for every model in the list."""
    return sum(map(is_not, values, repeat(None)))


def _statistical_filter(
    body: FilterRequest,
    rules: RuleSet | None,
    policy: FilterPolicy,
    secret: bytes | None,
    diagnostics: bool,
) -> tuple[dict, int]:
    """The statistical-results filter on the figures (after the query filter passed).

    Column-wise over the cells (one C-level pass per field, no Python loop per cell on a
    plain answer); the screens return the reasons of the stopped cells only, by cell."""
    cells = body.cells
    n = len(cells)
    keys = list(map(_KEY, cells))
    check_unique_cell_keys(keys)
    n_variables = len(body.query.variables)
    lengths = list(map(len, keys))
    if lengths.count(n_variables) != n:
        i = next(i for i, k in enumerate(lengths) if k != n_variables)
        raise RequestInputError(
            f"the key has {lengths[i]} codes but the query {n_variables} variables",
            field="key",
            cell=i,
        )
    count_of = list(map(_COUNT, cells))
    n_counts = n - count_of.count(None)  # ints and None: compared in C
    if n_counts == 0:
        counts, others = [], list(range(n))
    elif n_counts == n:
        counts, others = list(range(n)), []
    else:
        counts = [i for i, c in enumerate(count_of) if c is not None]
        others = [i for i, c in enumerate(count_of) if c is None]
    stat = policy.statistical
    values: list[float | None] | None
    if stat.approach == "refuse":
        reasons = _refuse_screen(cells, rules, stat.count_threshold, count_of, counts, others)
        values = None
    else:
        reasons, values = _noise_screen(
            cells, stat, _coalition(rules), secret, count_of, counts, others
        )
    stopped = len(reasons)
    decision, refusal = qf.decide(np.array(stopped > 0), stat.approach)
    if refusal is not None:
        return _refused(refusal), stopped
    out = [
        {"key": key, "publish": True, "value": value}
        for key, value in zip(keys, repeat(None) if values is None else values)
    ]
    for i in reasons:
        out[i]["publish"] = False
        out[i]["value"] = None
    if diagnostics:
        for i, cell_out in enumerate(out):
            cell_out["reasons"] = reasons.get(i, [])
    return {"decision": decision, "refusal": None, "cells": out}, stopped


def _refused(refusal: qf.Refusal) -> dict:
    return {
        "decision": "refuse",
        "cells": [],
        "refusal": {"code": refusal.code, "message": refusal.message, "stage": refusal.stage},
    }


def _refuse_screen(
    cells, rules: RuleSet | None, threshold: int, count_of: list, counts: list, others: list
) -> dict[int, list[str]]:
    """AQS: which rules stop each stopped cell (threshold rule on counts, the profile's
    rules on magnitudes)."""
    reasons: dict[int, list[str]] = {}
    if counts:  # each count is at most 2**53 (schema), which is all the rule checks
        flagged = frequency.threshold_rule([count_of[i] for i in counts], threshold)
        for j in np.flatnonzero(flagged).tolist():
            reasons[counts[j]] = ["threshold"]
    if others:
        if rules is None:
            raise RequestInputError(
                "magnitude cells need sensitivity rules in the policy", field="policy.rules"
            )
        ruleset, labels = _core_rules(rules)
        result = primary.assess(magnitudes_of(cells, rules, ruleset, index=others), ruleset)
        for label, fired in zip(labels, result.fired):
            for j in np.flatnonzero(fired).tolist():
                reasons.setdefault(others[j], []).append(label)
        for j in np.flatnonzero(result.zero_forced).tolist():
            reasons.setdefault(others[j], []).append("zero_cells")
    return reasons


#: The core rule set and reply labels of a wire rule set, by identity: a profile's rule
#: set is the same object on every request (an inline one is new each time). The entry
#: holds the wire object, so that its id is not reused while it is cached.
_CORE_RULES: dict[int, tuple[RuleSet, primary.RuleSet, list[str]]] = {}
_CORE_RULES_SIZE = 64


def _core_rules(rules: RuleSet) -> tuple[primary.RuleSet, list[str]]:
    found = _CORE_RULES.get(id(rules))
    if found is not None and found[0] is rules:
        return found[1], found[2]
    ruleset = ruleset_from_wire(rules)
    labels = rule_labels(rules.rules, with_parameters=False)
    if len(_CORE_RULES) >= _CORE_RULES_SIZE:
        _CORE_RULES.clear()
    _CORE_RULES[id(rules)] = (rules, ruleset, labels)
    return ruleset, labels


def _coalition(rules: RuleSet | None) -> int:
    """The profile's p%-rule coalition ``c`` (the largest if several; 1 without one): the
    intruders criterion 3 protects against (:func:`service.sdc.noise.noise_left`)."""
    if rules is None:
        return 1
    return max([int(getattr(r, "c", 1)) for r in rules.rules if r.type == "p_percent"] + [1])


def _noise_screen(
    cells,
    stat: NoisePolicy,
    coalition: int,
    secret: bytes | None,
    count_of: list,
    counts: list,
    others: list,
) -> tuple[dict[int, list[str]], list[float | None]]:
    """ARMS: the three criteria of seed 003 C on the noisy magnitudes; counts by the
    weighted-count criterion only (they carry no noise). The ids are factorized once, for
    the check of one row per respondent, for the multipliers and for the units (holdings,
    as the p%-rule counts them) of the noise left to an intruder."""
    reasons: dict[int, list[str]] = {}
    for i in counts:
        if count_of[i] < stat.min_weighted_count:
            reasons[i] = ["weighted_count"]
    if not others:
        return reasons, [None] * len(cells)
    selected = cells if len(others) == len(cells) else [cells[i] for i in others]
    summaries = list(map(_SUMMARY, selected))
    if _given(summaries):
        k = next(k for k, s in enumerate(summaries) if s is not None)
        raise RequestInputError(
            "the noise approach needs each magnitude cell's "
            "contributions with respondent ids, not a summary",
            field="summary",
            cell=others[k],
        )
    establishment, holding = _respondents(selected, others)
    est_ids, est_row = noise.factorize(establishment)
    coded = None if holding is None else holding_codes(holding)
    if coded is None:  # each respondent is its own enterprise
        ent_ids, ent_row, holding_row = est_ids, est_row, None
    else:
        # Enterprise: the holding, else the respondent itself (ids after the holdings'),
        # so holding and respondent ids are never taken for one another.
        hold_ids, holding_row = coded
        ent_ids = hold_ids + est_ids
        ent_row = np.where(holding_row >= 0, holding_row, len(hold_ids) + est_row)
    c = contributions_of(cells, others, "replicate", holdings=False)
    _check_one_row_per_respondent(cells, c.cell, est_row, len(est_ids), others)
    rules = qf.NoiseRules(
        stat.d,
        stat.jitter,
        stat.ratio_range[0],
        stat.ratio_range[1],
        stat.min_weighted_count,
        stat.p,
        coalition,
    )
    with core_errors(numbers=others, cells=cells):
        negative = np.asarray(c.value) < 0
        if negative.any():
            # The policy's negative_values is for the rules of the refuse approach; the
            # noise criteria read x1, x2 and X as they are. Until 2026-11-27 this was the
            # rules' refusal, which advises a negative_values mode the noise ignores.
            raise InputError(
                "negative contribution: the noise approach's p%-rule criterion is "
                "meaningless for negative values (seed 000) and takes no negative_values "
                "mode; use the refuse approach with one",
                field="contributions.value",
                cell=int(c.cell[int(np.flatnonzero(negative)[0])]),
            )
        m = magnitudes.from_contributions(
            len(others),
            c.cell,
            c.value,
            holding=holding_row,
            weight=c.weight,
            depth=coalition + 1,
        )
    # The noise's cells are contribution rows.
    with core_errors(NOISE_FIELDS, numbers=ContributionRows(others, c.cell), cells=cells):
        key, d, jitter = noise.checked_params(noise_key(secret), rules.d, rules.jitter)
        multipliers = noise.factorized_multipliers(
            ent_ids, ent_row, est_ids, est_row, key, d, jitter
        )
        noisy = qf.noisy_cells(
            len(others), c.cell, c.value, c.weight, multipliers, ent_row, coalition
        )
    criteria = qf.noise_criteria(noisy, m, rules)
    for name in qf.CRITERIA:
        for j in np.flatnonzero(criteria[name]).tolist():
            reasons.setdefault(others[j], []).append(name)
    noisy_values = noisy.noisy_value.tolist()
    if len(others) == len(cells):
        return reasons, noisy_values
    values: list[float | None] = [None] * len(cells)
    for i, v in zip(others, noisy_values):
        values[i] = v
    return reasons, values


def _check_one_row_per_respondent(
    cells, cell: np.ndarray, establishment: np.ndarray, n_establishments: int, others: list[int]
) -> None:
    """A respondent listed twice in one cell would count as two contributors for the
    p%-rule and the weighted count, so that one establishment could pass both and have
    its noisy figure, and with it its multiplier, published: refused. ``establishment``
    is each row's number among the ``n_establishments`` distinct ids."""
    ordered = np.sort(cell * n_establishments + establishment)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
        i = others[int(repeated[0] // n_establishments)]
        raise RequestInputError(
            "a respondent is listed twice in the cell; send its contributions summed",
            field=contribution_field(cells[i], "respondent"),
            cell=i,
        )


def _no_respondent(i: int, path: str) -> RequestInputError:
    return RequestInputError(
        "the noise approach needs the respondent of every contribution", field=path, cell=i
    )


def _respondents(selected: list, index: list[int]) -> tuple[list[str], list[str | None] | None]:
    """Establishment id and holding of every contribution of the ``selected`` cells
    (request numbers ``index``), in :func:`.cells.contributions_of`'s order; the holdings
    are ``None`` when no contribution names one. Whole columns at once when every cell came
    in one form."""
    micro = microdata_of(selected)
    if micro is not None and _given(micro) == len(micro):  # the online systems' form
        ids = list(map(_RESPONDENT, micro))
        if None in ids:  # lists and None: compared in C
            raise _no_respondent(index[ids.index(None)], "microdata.respondent")
        establishment = list(chain.from_iterable(ids))
        holdings = list(map(_HOLDING, micro))
        if holdings.count(None) == len(holdings):
            return establishment, None
        return establishment, list(joined_column(holdings, list(map(len, ids)), None))
    if micro is None or not _given(micro):  # contribution objects only
        rows = list(map(_CONTRIBUTIONS, selected))
        flat = list(chain.from_iterable(rows))
        establishment = list(map(_RESPONDENT, flat))
        if None in establishment:
            first = establishment.index(None)
            sizes = np.cumsum(list(map(len, rows)))
            k = int(np.searchsorted(sizes, first, side="right"))
            j = first - (int(sizes[k - 1]) if k else 0)
            raise _no_respondent(index[k], f"contributions.{j}.respondent")
        holding = list(map(_HOLDING, flat))
        return establishment, None if holding.count(None) == len(holding) else holding
    establishment = []
    mixed: list[str | None] = []
    for k, cell in enumerate(selected):  # both forms in one answer: cell by cell
        if cell.microdata is not None:
            ids, holdings = cell.microdata.respondent, cell.microdata.holding
            if ids is None:
                raise _no_respondent(index[k], "microdata.respondent")
            mixed += [None] * len(ids) if holdings is None else holdings
        else:
            ids = list(map(_RESPONDENT, cell.contributions))
            if None in ids:
                raise _no_respondent(index[k], f"contributions.{ids.index(None)}.respondent")
            mixed += map(_HOLDING, cell.contributions)
        establishment += ids
    return establishment, None if mixed.count(None) == len(mixed) else mixed
