"""POST /v1/sensitivity: primary sensitivity and protection levels of magnitude cells."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Depends, Request
from .responses import JSONBytes

from schemas.errors import ErrorReply
from schemas.sensitivity import SensitivityReply, SensitivityRequest
from service.sdc import primary

from . import convert
from .access import Caller, current_caller
from .body import openapi_body, validated
from .deps import check_cell_count, resolve_rules
from .work import compute

router = APIRouter(prefix="/v1", tags=["sensitivity"])


@router.post("/sensitivity", openapi_extra=openapi_body(SensitivityRequest),
             response_model=SensitivityReply,
             responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}})
async def sensitivity(request: Request, caller: Caller = Depends(current_caller)):
    """Which cells are sensitive, by which rules, and the protection each needs.

    Every rule's linear sensitivity measure S (seed 003 B.1) is evaluated on every cell;
    a cell is sensitive when any rule fires. Protection levels follow seed 000's table
    "Upper protection levels", from the rule that demands the most.

    The filter role receives the decision per cell only (key, status, sensitive).
    """
    body = await validated(request, SensitivityRequest)
    settings, metrics = request.app.state.settings, request.app.state.metrics
    check_cell_count(len(body.cells), settings)
    request.state.cell_keys = [c.key for c in body.cells]
    spec, disclose = resolve_rules(body.rules, body.profile, settings)
    reply, n_sensitive = await compute(_assess, body, spec, disclose, caller.sees_diagnostics,
                                       size=len(body.cells))
    metrics.cells_evaluated.inc(len(body.cells))
    metrics.sensitive_cells.inc(n_sensitive)
    return JSONBytes(reply)


def _assess(body: SensitivityRequest, spec, disclose: bool,
            diagnostics: bool) -> tuple[dict, int]:
    convert.check_unique_keys([c.key for c in body.cells])
    ruleset = convert.ruleset_from_wire(spec)
    m = convert.magnitudes_from_cells(body.cells, spec, ruleset)
    result = primary.assess(m, ruleset)
    labels = convert.rule_labels(spec.rules, with_parameters=body.rules is not None)
    n_sensitive = int(result.sensitive.sum())
    return {
        "cells": (_verdicts(body, m, result, labels, spec, disclose) if diagnostics else
                  _decisions(body, result)),
        "summary": {"cells": m.n_cells, "sensitive": n_sensitive,
                    "empty": int((result.status == primary.STATUS_EMPTY).sum())},
        "profile": body.profile,
    }, n_sensitive


def _decisions(body, result) -> list[dict]:
    """The filter role's reply: publish or not, nothing from which rules could be inferred."""
    return [{"key": k, "status": st, "sensitive": se} for k, st, se in zip(
        [c.key for c in body.cells], result.status.tolist(), result.sensitive.tolist())]


def _verdicts(body, m, result, labels, spec, disclose) -> list[dict]:
    """Per-cell reply objects, built from columns (``tolist`` once per column)."""
    fired_by_cell = [[] for _ in range(m.n_cells)]
    for label, fired in zip(labels, result.fired):
        for i in np.flatnonzero(fired).tolist():
            fired_by_cell[i].append(label)
    policy = "empty_cells" if spec.empty_cells == "sensitive" else None
    for i in np.flatnonzero(result.zero_forced).tolist():
        fired_by_cell[i].append(policy if m.count[i] <= 0 and policy else "zero_cells")
    common = zip([c.key for c in body.cells], result.status.tolist(),
                 result.sensitive.tolist(), fired_by_cell, m.value.tolist(), m.count.tolist())
    if not disclose:
        return [{"key": k, "status": st, "sensitive": se, "fired": f, "total": x, "count": n}
                for k, st, se, f, x, n in common]
    s_by_cell = result.sensitivity.T.tolist()
    return [{"key": k, "status": st, "sensitive": se, "fired": f, "total": x, "count": n,
             "measures": dict(zip(labels, svals)), "upper_protection": up, "lower_protection": lo}
            for (k, st, se, f, x, n), svals, up, lo in zip(
                common, s_by_cell, result.upper_protection.tolist(),
                result.lower_protection.tolist())]
