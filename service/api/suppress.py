"""POST /v1/suppress: sensitivity, protection levels, secondary suppression and its audit."""

from __future__ import annotations

import time

import numpy as np
from fastapi import APIRouter, Depends, Request

from schemas.errors import ErrorReply
from schemas.tables import SuppressReply, SuppressRequest
from service.sdc.errors import InputError
from service.sdc.suppress import SuppressionResult, cell_costs, suppress

from . import tables
from .access import Caller, current_caller
from .body import openapi_body, validated
from .audit import audit_reply, table_problem
from .responses import JSONBytes
from .work import compute

router = APIRouter(prefix="/v1", tags=["suppression"])


@router.post("/suppress", openapi_extra=openapi_body(SuppressRequest),
             response_model=SuppressReply,
             responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}})
async def suppress_route(request: Request, caller: Caller = Depends(current_caller)):
    """The whole pipeline in one call.

    Primary sensitivity by the rule set or profile (cells may also carry protection levels),
    then secondary suppression by the chosen method and cost (see
    :mod:`service.sdc.suppress`), then the audit of the pattern (intervals and implicitly
    published unions). A pattern is returned only if it passed the audit; otherwise
    ``safe`` is false and ``solver.message`` says why (status ``time_limit``: the time ran
    out, and ``solver.unprotected`` names the sensitive cells left unprotected).
    ``time_limit`` is the request's whole wall time: the suppression gets it less the
    time already spent and ``min(REPLY_SECONDS, REPLY_SHARE * time_limit)`` for the reply.
    Under ``negative_values.mode = "shift"`` the table is protected in the transformed
    values (seed 004 section 2.2).
    The filter role receives the cells' statuses and the loss; the audit and the solver's
    message (which can name protection levels) go to analysts only.
    """
    started = time.perf_counter()    # the time limit is the request's whole wall time
    body = await validated(request, SuppressRequest)
    spec, disclose, time_limit, max_entries = tables.admit(body, request)
    reply = await compute(_suppress, body, spec, disclose, time_limit, started, max_entries,
                          size=len(body.cells))
    solver = reply["solver"]
    request.app.state.metrics.observe_solve(f"suppress_{solver['method']}",
                                            _OUTCOME[solver["status"]], solver["seconds"])
    if not caller.sees_diagnostics:
        reply["audit"] = None
        solver["message"] = (
            "a safe pattern was found" if reply["safe"] else
            "the time limit was reached before a safe pattern was found and certified; "
            "'unprotected' lists the sensitive cells left unprotected"
            if solver["status"] == "time_limit" else
            "no safe pattern exists within the constraints")
    return JSONBytes(reply)


#: Suppression statuses as solver outcomes of the metrics.
_OUTCOME = {"optimal": "optimal", "feasible": "optimal", "time_limit": "time_limit",
            "no_safe_pattern": "infeasible"}


#: What building the reply may take beyond the suppression: the suppression gets the time
#: limit less the time already spent on the request and this reserve.
REPLY_SECONDS, REPLY_SHARE = 0.5, 0.05


def _suppress(body: SuppressRequest, spec, disclose: bool, time_limit: float,
              started: float, max_entries: int) -> dict:
    inputs = tables.table_inputs(body.structure, body.cells, spec,
                                 labels_with_parameters=body.rules is not None,
                                 counts=body.counts, max_entries=max_entries)
    tables.check_additivity(inputs, body.structure.tolerance)
    n = inputs.space.n_cells
    forbidden, forced = np.zeros(n, bool), np.zeros(n, bool)
    weights = np.zeros(n)
    for i, c in enumerate(body.cells):
        j = inputs.cell_of_request[i]
        forbidden[j] = c.constraint == "forbid"
        forced[j] = c.constraint == "force"
        weights[j] = c.cost if c.cost is not None else 0.0
    if body.cost == "weights":
        unweighted = [i for i, c in enumerate(body.cells) if c.cost is None]
        if unweighted:
            raise InputError("cost 'weights' needs a cost on every cell", field="cost",
                             cell=unweighted[0])
    conflict = np.flatnonzero(forbidden & inputs.sensitive)
    if conflict.size:
        raise InputError("a sensitive cell cannot be forbidden to suppress",
                         field="constraint", cell=int(inputs.request_of_cell[conflict[0]]))
    cost = cell_costs(body.cost, inputs.values, inputs.n_contributors, weights)
    left = time_limit - (time.perf_counter() - started) \
        - min(REPLY_SECONDS, REPLY_SHARE * time_limit)
    result = suppress(table_problem(inputs, body.structure.tolerance), cost=cost,
                      forbidden=forbidden, forced=forced, method=body.method,
                      time_limit=max(left, 1e-3))
    return _reply(inputs, result, time_limit, disclose)


def _reply(inputs: tables.TableInputs, r: SuppressionResult, time_limit: float,
           disclose: bool) -> dict:
    safe = r.safe and r.status != "no_safe_pattern"
    status = np.where(inputs.sensitive, "primary",
                      np.where(r.secondary if safe else False, "secondary", "published"))
    keys = inputs.space.keys.tolist()
    cells = [{"key": list(k), "status": s} for k, s in zip(keys, status.tolist())]
    solver = {"method": r.method, "status": r.status, "message": r.message,
              "lower_bound": None if np.isnan(r.lower_bound) else r.lower_bound,
              "gap": None if np.isnan(r.gap) else r.gap, "seconds": round(r.seconds, 6),
              "iterations": r.iterations, "time_limit": time_limit,
              "verdict": None if r.audit is None else r.audit.verdict,
              "unprotected": [list(keys[j]) for j in r.unprotected.tolist()]}
    if not safe:
        return {"safe": False, "cells": cells, "loss": None, "solver": solver, "audit": None}
    total = float(np.abs(inputs.values).sum())
    value = float(np.abs(inputs.values[r.suppressed]).sum())
    return {
        "safe": True, "cells": cells, "solver": solver,
        "loss": {"cells": int(r.suppressed.sum()), "secondary": int(r.secondary.sum()),
                 "value": value, "value_share": value / total if total else 0.0,
                 "cost": r.objective},
        "audit": audit_reply(inputs, r.suppressed, r.audit, time_limit, disclose=disclose),
    }
