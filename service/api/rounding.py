"""POST /v1/round: controlled or random rounding of a table to a base, and its audit."""

from __future__ import annotations

import time

from fastapi import Request

from schemas.errors import ErrorReply
from schemas.rounding import RoundReply, RoundRequest
from service.pipeline.limits import check_cell_count
from service.pipeline.rounding import round_table, solve_outcome
from service.pipeline.tables import resolve_table_request

from .body import openapi_body, validated
from .compute_pool import compute, compute_resolved
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/round",
    tags=["rounding"],
    openapi_extra=openapi_body(RoundRequest),
    response_model=RoundReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def round_route(request: Request, caller: CallerDep, settings: SettingsDep):
    """Round every cell of a table to an adjacent multiple of ``base`` (seed 003 A, A.1).

    ``controlled``: the rounded table adds up and its total absolute deviation is least
    (exact by one LP for 2-D tables and 2-D tables hierarchical along one dimension, a
    MIP under the time limit otherwise); a table with no additive rounding to the base is
    a 422 naming ``base``. ``random``: unbiased, cell by cell, reproducible from ``seed``,
    in general not additive (the reply says so). Cells become sensitive as for
    ``/v1/suppress``; for each, the reply's audit gives the feasibility interval an
    intruder gets from the rounded table. The filter role receives the rounded values
    only; originals, deviations and the audit (which names the sensitive cells) go to
    analysts. ``time_limit`` is the request's whole wall time.
    """
    started = time.perf_counter()
    body = await validated(request, RoundRequest)
    check_cell_count(len(body.cells), settings.max_cells)
    resolved, size = await compute_resolved(resolve_table_request, body, settings)
    reply, solver, error = await compute(
        rendered(round_table, "solver"),
        body,
        resolved,
        started,
        caller.sees_diagnostics,
        size=size,
    )
    request.app.state.metrics.observe_solve(
        f"round_{solver['method']}", solve_outcome(solver["status"]), solver["seconds"]
    )
    if error is not None:
        raise error
    return JSONBytes(reply)
