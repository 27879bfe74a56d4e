"""POST /v1/audit: is a suppression pattern safe? Intervals, flags, unions, verdict."""

from __future__ import annotations

from fastapi import Request

from schemas.errors import ErrorReply
from schemas.tables import AuditReply, AuditRequest
from service.pipeline.audit import audit as audit_pattern
from service.pipeline.limits import check_cell_count
from service.pipeline.tables import resolve_table_request

from .body import openapi_body, validated
from .compute_pool import compute, compute_resolved
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/audit",
    tags=["audit"],
    openapi_extra=openapi_body(AuditRequest),
    response_model=AuditReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def audit(request: Request, caller: CallerDep, settings: SettingsDep):
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
    check_cell_count(len(body.cells), settings.max_cells)
    resolved, size = await compute_resolved(resolve_table_request, body, settings)
    reply, solve = await compute(
        rendered(audit_pattern), body, resolved, caller.sees_diagnostics, size=size
    )
    request.app.state.metrics.observe_solve("audit", *solve)
    return JSONBytes(reply)
