"""POST /v1/audit: is a suppression pattern safe? Intervals, flags, unions, verdict."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Depends, Request

from schemas.errors import ErrorReply
from schemas.tables import AuditReply, AuditRequest
from service.sdc.audit import PatternAudit, audit_pattern
from service.sdc.problem import TableProblem

from . import tables
from .access import Caller, current_caller
from .body import openapi_body, validated
from .responses import JSONBytes
from .work import compute

router = APIRouter(prefix="/v1", tags=["audit"])


@router.post("/audit", openapi_extra=openapi_body(AuditRequest),
             response_model=AuditReply,
             responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}})
async def audit(request: Request, caller: Caller = Depends(current_caller)):
    """Audit a suppression pattern of a structured table.

    For every suppressed cell its feasibility interval under the published cells and the
    a-priori bounds (seed 000 "Secondary tabular data protection methods"; seed 002
    section 3); each sensitive cell's interval against its protection levels, flagging
    exact disclosure, bounds too close and too-narrow intervals (seed 003 B.2.a.iii); and
    the unions of suppressed cells that one relation publishes, judged by the same rules
    (seed 002 sections 3-5, seed 003 B.2.a.i). Cells become sensitive by the rule set (or
    profile) applied to their contributions or summaries, or by protection levels sent
    with them. The verdict is never ``safe`` for a cell whose interval was not certified
    within the time limit. The filter role receives the verdict and, per cell, whether it
    is protected; intervals, protection levels and unions go to analysts only.
    """
    body = await validated(request, AuditRequest)
    spec, disclose, time_limit, max_entries = tables.admit(body, request)
    reply, solve = await compute(_audit, body, spec, disclose, time_limit, max_entries,
                                 size=len(body.cells))
    request.app.state.metrics.observe_solve("audit", *solve)
    return JSONBytes(reply if caller.sees_diagnostics else decisions_only(reply))


def _audit(body: AuditRequest, spec, disclose: bool, time_limit: float, max_entries: int):
    inputs = tables.table_inputs(body.structure, body.cells, spec,
                                 labels_with_parameters=body.rules is not None,
                                 counts=body.counts, max_entries=max_entries)
    tables.check_additivity(inputs, body.structure.tolerance)
    suppressed = np.zeros(inputs.space.n_cells, bool)
    suppressed[inputs.cell_of_request[[i for i, c in enumerate(body.cells) if c.suppressed]]] = True
    result = audit_pattern(table_problem(inputs, body.structure.tolerance), suppressed,
                           time_limit=time_limit)
    return (audit_reply(inputs, suppressed, result, time_limit, disclose=disclose),
            (result.intervals.status, result.intervals.seconds))


def table_problem(inputs: tables.TableInputs, tolerance: float) -> TableProblem:
    """The core's problem of a request's table (audit and suppression)."""
    return TableProblem.of(inputs.space, inputs.values, inputs.sensitive,
                           inputs.upper_protection, inputs.lower_protection,
                           inputs.lower_bounds, inputs.upper_bounds, unions=inputs.unions,
                           tolerance=tolerance)


def decisions_only(reply: dict) -> dict:
    """An audit reply for the filter role: the verdict and which cells are protected (the
    reasons of a verdict that is not safe; notes on a safe one are for analysts)."""
    reasons = reply["reasons"] if reply["verdict"] != "safe" else []
    return {"verdict": reply["verdict"], "reasons": reasons,
            "unions_checked": reply["unions_checked"], "unions": None, "aggregations": None,
            "solver": None,
            "cells": [{k: c[k] for k in ("key", "suppressed", "sensitive", "protected")}
                      for c in reply["cells"]]}


def _bound(v: float) -> float | None:
    return None if not np.isfinite(v) else v


def audit_reply(inputs: tables.TableInputs, suppressed: np.ndarray, result: PatternAudit,
                time_limit: float, *, disclose: bool) -> dict:
    """The reply object of an audit (also used by the suppression route).

    Protection levels and missing amounts are left out when the profile does not disclose
    measures: with the contributions they reveal the rule's parameters.
    """
    iv, check = result.intervals, result.protection
    at = {int(c): k for k, c in enumerate(iv.cells)}
    derived = set(result.derived.tolist())
    shown = np.flatnonzero(suppressed | inputs.sensitive)
    cells = []
    for c in shown.tolist():
        entry = {"key": list(inputs.space.key(c)), "suppressed": bool(suppressed[c]),
                 "sensitive": bool(inputs.sensitive[c])}
        k = at.get(c)
        if k is None:   # a sensitive cell left published
            entry["protected"] = False
        else:
            certified = bool(iv.certified[k])
            entry.update(
                protected=bool(check.protected[k]) if inputs.sensitive[c] else None,
                interval=[_bound(iv.lower[k]), _bound(iv.upper[k])] if certified else None,
                certified=certified)
            if inputs.sensitive[c] and certified:
                entry["flags"] = {"exact": bool(check.exact[k]),
                                  "upper_too_close": bool(check.upper_too_close[k]),
                                  "lower_too_close": bool(check.lower_too_close[k]),
                                  "too_narrow": bool(check.too_narrow[k])}
                if disclose:
                    entry["missing_upper"] = float(check.missing_upper[k])
                    entry["missing_lower"] = float(check.missing_lower[k])
        if disclose and inputs.sensitive[c]:
            entry["upper_protection"] = float(inputs.upper_protection[c])
            entry["lower_protection"] = float(inputs.lower_protection[c])
        if suppressed[c] and result.aggregations is not None:
            entry["derived"] = c in derived
        cells.append(entry)
    agg = result.aggregations
    return {
        "verdict": result.verdict,
        "reasons": list(result.reasons),
        "unions_checked": agg is not None and agg.status in ("safe", "sensitive"),
        "cells": cells,
        "unions": _unions(inputs, result.unions) if result.unions is not None else None,
        "aggregations": _aggregations(inputs, agg, disclose) if agg is not None else None,
        "solver": {"status": iv.status, "message": iv.message, "lp_solves": iv.n_lp_solves,
                   "components": iv.n_components, "seconds": round(iv.seconds, 6),
                   "time_limit": time_limit},
    }


def _unions(inputs: tables.TableInputs, u) -> list[dict]:
    out = []
    members = u.members.tocsr()
    for k in range(len(u.relation)):
        row = slice(members.indptr[k], members.indptr[k + 1])
        fired = [label for label, f in zip(inputs.rule_labels, u.fired[:, k]) if f]
        out.append({"relation": inputs.space.describe_relation(int(u.relation[k])),
                    "cells": inputs.keys(members.indices[row]),
                    "coefficients": members.data[row].tolist(),
                    "value": float(u.value[k]), "checked": bool(u.checked[k]),
                    "sensitive": bool(u.sensitive[k]), "fired": fired})
    return out


def _aggregations(inputs: tables.TableInputs, agg, disclose: bool) -> dict:
    worst = agg.worst
    if worst is not None:
        worst = {"cells": inputs.keys(worst.cells),
                 "coefficients": [float(v) for v in worst.coefficients],
                 "value": worst.value, "rule": inputs.rule_labels[worst.rule],
                 "measure": worst.measure if disclose else None, "found_by": worst.found_by}
    return {"status": agg.status, "message": agg.message, "derived": inputs.keys(agg.derived),
            "sensitive_groups": len(agg.found), "worst": worst, "groups": agg.groups,
            "screened": agg.screened, "mip_solves": agg.mip_solves,
            "seconds": round(agg.seconds, 6)}
