"""POST /v1/adjust: controlled tabular adjustment (seed 000, seed 003 B.3)."""

from __future__ import annotations

import time

from fastapi import Request

from schemas.adjust import AdjustReply, AdjustRequest
from schemas.errors import ErrorReply
from service.pipeline.adjust import adjust_table, resolve_adjust_request
from service.pipeline.limits import check_cell_count

from .body import openapi_body, validated
from .compute_pool import compute, compute_resolved
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/adjust",
    tags=["adjustment"],
    openapi_extra=openapi_body(AdjustRequest),
    response_model=AdjustReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def adjust_route(request: Request, caller: CallerDep, settings: SettingsDep):
    """The closest additive table in which every sensitive cell moved at least its upper
    protection level up or its lower level down, within the a-priori bounds (see
    :mod:`service.sdc.cta`). Sensitivity comes from the rule set, profile or count rules,
    or from the cells' own protection levels. A sensitive cell that cannot move its level,
    or a table with no such adjustment, is a 422 naming the cell; a time limit reached is
    said in ``solver.status``. The filter role receives the adjusted values and the
    aggregate loss only (original values and deviations go to analysts). ``time_limit``
    is the request's whole wall time, as for /v1/suppress: the solve gets it less the
    time already spent and ``min(REPLY_SECONDS, REPLY_SHARE * time_limit)`` for the reply.
    """
    started = time.perf_counter()  # the time limit is the request's whole wall time
    body = await validated(request, AdjustRequest)
    check_cell_count(len(body.cells), settings.max_cells)
    resolved, size = await compute_resolved(resolve_adjust_request, body, settings)
    reply, solver = await compute(
        rendered(adjust_table, "solver"),
        body,
        resolved,
        started,
        caller.sees_diagnostics,
        size=size,
    )
    request.app.state.metrics.observe_solve(
        f"adjust_{solver['method']}", solver["status"], solver["seconds"]
    )
    return JSONBytes(reply)
