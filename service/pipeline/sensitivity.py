"""Primary sensitivity and protection levels of magnitude cells (``/v1/sensitivity``):
the rules are in :mod:`service.sdc.primary`."""

from __future__ import annotations

import numpy as np

from schemas.rules import RuleSet
from schemas.sensitivity import SensitivityRequest
from service.sdc import primary

from .cells import check_unique_cell_keys, magnitudes_of
from .rules import rule_labels, ruleset_from_wire


def assess(
    body: SensitivityRequest, spec: RuleSet, disclose: bool, diagnostics: bool
) -> tuple[dict, int]:
    """The reply (a :class:`~schemas.sensitivity.SensitivityReply`) and the number of
    sensitive cells. ``spec``, ``disclose``: the rule set and whether its measures may be
    shown (:func:`.rules.resolve_rules`); without ``diagnostics`` each cell's decision only."""
    check_unique_cell_keys([c.key for c in body.cells])
    ruleset = ruleset_from_wire(spec)
    m = magnitudes_of(body.cells, spec, ruleset)
    result = primary.assess(m, ruleset)
    labels = rule_labels(spec.rules, with_parameters=body.rules is not None)
    n_sensitive = int(result.sensitive.sum())
    return {
        "cells": (
            _verdicts(body, m, result, labels, spec, disclose)
            if diagnostics
            else _decisions(body, result)
        ),
        "summary": {
            "cells": m.n_cells,
            "sensitive": n_sensitive,
            "empty": int((result.status == primary.STATUS_EMPTY).sum()),
        },
        "profile": body.profile,
    }, n_sensitive


def _decisions(body, result) -> list[dict]:
    """The filter role's reply: publish or not, nothing from which rules could be inferred."""
    return [
        {"key": k, "status": st, "sensitive": se}
        for k, st, se in zip(
            [c.key for c in body.cells], result.status.tolist(), result.sensitive.tolist()
        )
    ]


def _verdicts(body, m, result, labels, spec, disclose) -> list[dict]:
    """Per-cell reply objects, built from columns (``tolist`` once per column)."""
    fired_by_cell: list[list[str]] = [[] for _ in range(m.n_cells)]
    for label, fired in zip(labels, result.fired):
        for i in np.flatnonzero(fired).tolist():
            fired_by_cell[i].append(label)
    policy = "empty_cells" if spec.empty_cells == "sensitive" else None
    for i in np.flatnonzero(result.zero_forced).tolist():
        fired_by_cell[i].append(policy if m.count[i] <= 0 and policy else "zero_cells")
    common = zip(
        [c.key for c in body.cells],
        result.status.tolist(),
        result.sensitive.tolist(),
        fired_by_cell,
        m.value.tolist(),
        m.count.tolist(),
    )
    if not disclose:
        return [
            {"key": k, "status": st, "sensitive": se, "fired": f, "total": x, "count": n}
            for k, st, se, f, x, n in common
        ]
    s_by_cell = result.sensitivity.T.tolist()
    return [
        {
            "key": k,
            "status": st,
            "sensitive": se,
            "fired": f,
            "total": x,
            "count": n,
            "measures": dict(zip(labels, svals)),
            "upper_protection": up,
            "lower_protection": lo,
        }
        for (k, st, se, f, x, n), svals, up, lo in zip(
            common, s_by_cell, result.upper_protection.tolist(), result.lower_protection.tolist()
        )
    ]
