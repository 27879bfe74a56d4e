"""POST /v1/frequency/sensitivity: sensitive cells of count tables."""

from __future__ import annotations

from fastapi import Request

from schemas.errors import ErrorReply
from schemas.frequency import FrequencyReply, FrequencyRequest
from service.pipeline.frequency import assess, reply_size
from service.pipeline.limits import check_cell_count
from service.sdc.table import table_size

from .body import openapi_body, validated
from .compute_pool import compute
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/frequency/sensitivity",
    tags=["frequency"],
    openapi_extra=openapi_body(FrequencyRequest),
    response_model=FrequencyReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def frequency_sensitivity(request: Request, caller: CallerDep, settings: SettingsDep):
    """Which cells of a count table are sensitive, and by which rules.

    The threshold rule: ``0 < count < t`` (seed 003 section A). The extended threshold
    rules of seed 001 ("Threshold rules"): absolute (1a, 1b) and relative (2a, 2b)
    dominance of a cell in its key's row and its target's column, minimum frequency (3) of
    cells and marginals, repeated at every level of hierarchical keys ("Hierarchical
    variables"). Cells not sent count 0.

    The filter role receives decisions only: each cell's key, status and sensitive, and
    each marginal's key and sensitive.
    """
    body = await validated(request, FrequencyRequest)
    check_cell_count(len(body.cells), settings.max_cells)
    # The reply lists every cell of the table (and more): bound it before computing.
    check_cell_count(
        reply_size(body, caller.sees_diagnostics),
        settings.max_cells,
        what="cells, marginals and areas in the reply",
        field="dimensions",
    )
    n_table = table_size(len(d.codes) for d in body.dimensions)
    reply, n_unsafe = await compute(
        rendered(assess), body, caller.sees_diagnostics, size=max(n_table, len(body.cells))
    )
    metrics = request.app.state.metrics
    metrics.cells_evaluated.inc(n_table)
    metrics.sensitive_cells.inc(n_unsafe)
    return JSONBytes(reply)
