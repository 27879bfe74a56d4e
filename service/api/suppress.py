"""POST /v1/suppress: sensitivity, protection levels, secondary suppression and its audit."""

from __future__ import annotations

import time

from fastapi import Request

from schemas.errors import ErrorReply
from schemas.tables import SuppressReply, SuppressRequest
from service.pipeline.limits import check_cell_count
from service.pipeline.suppress import protect, solve_outcome
from service.pipeline.tables import resolve_table_request

from .body import openapi_body, validated
from .compute_pool import compute, compute_resolved
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/suppress",
    tags=["suppression"],
    openapi_extra=openapi_body(SuppressRequest),
    response_model=SuppressReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def suppress_route(request: Request, caller: CallerDep, settings: SettingsDep):
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
    started = time.perf_counter()  # the time limit is the request's whole wall time
    body = await validated(request, SuppressRequest)
    check_cell_count(len(body.cells), settings.max_cells)
    resolved, size = await compute_resolved(resolve_table_request, body, settings)
    reply, solver = await compute(
        rendered(protect, "solver"),
        body,
        resolved,
        started,
        caller.sees_diagnostics,
        size=size,
    )
    request.app.state.metrics.observe_solve(
        f"suppress_{solver['method']}", solve_outcome(solver["status"]), solver["seconds"]
    )
    return JSONBytes(reply)
