"""POST /v1/sensitivity: primary sensitivity and protection levels of magnitude cells."""

from __future__ import annotations

from fastapi import Request

from schemas.errors import ErrorReply
from schemas.sensitivity import SensitivityReply, SensitivityRequest
from service.pipeline.limits import check_cell_count
from service.pipeline.rules import resolve_rules
from service.pipeline.sensitivity import assess

from .body import openapi_body, validated
from .compute_pool import compute
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/sensitivity",
    tags=["sensitivity"],
    openapi_extra=openapi_body(SensitivityRequest),
    response_model=SensitivityReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def sensitivity(request: Request, caller: CallerDep, settings: SettingsDep):
    """Which cells are sensitive, by which rules, and the protection each needs.

    Every rule's linear sensitivity measure S (seed 003 B.1) is evaluated on every cell;
    a cell is sensitive when any rule fires. Protection levels follow seed 000's table
    "Upper protection levels", from the rule that demands the most.

    The filter role receives the decision per cell only (key, status, sensitive).
    """
    body = await validated(request, SensitivityRequest)
    check_cell_count(len(body.cells), settings.max_cells)
    spec, disclose = resolve_rules(body.rules, body.profile, settings)
    reply, n_sensitive = await compute(
        rendered(assess), body, spec, disclose, caller.sees_diagnostics, size=len(body.cells)
    )
    metrics = request.app.state.metrics
    metrics.cells_evaluated.inc(len(body.cells))
    metrics.sensitive_cells.inc(n_sensitive)
    return JSONBytes(reply)
