"""POST /v1/noise: a whole magnitude table published with keyed multiplicative noise."""

from __future__ import annotations

from fastapi import Request
from starlette.exceptions import HTTPException

from schemas.errors import ErrorReply
from schemas.noise import NoiseReply, NoiseRequest
from service.pipeline.limits import check_cell_count
from service.pipeline.noisy_table import noisy_table, resolve

from .body import openapi_body, validated
from .compute_pool import compute, compute_resolved
from .deps import CallerDep, SettingsDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/noise",
    tags=["noise"],
    openapi_extra=openapi_body(NoiseRequest),
    response_model=NoiseReply,
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def noise_route(request: Request, caller: CallerDep, settings: SettingsDep):
    """The table with the service's keyed multiplicative noise on its microdata (seed 003
    B.4; the same multipliers as the filter's noise approach), margins the sums of their
    leaves, and the sensitive cells whose noise is smaller than their protection level
    flagged or suppressed (see :func:`service.pipeline.noisy_table.noisy_table`).
    Analysts also receive each cell's relative change; the filter role the noisy values
    of published cells only, and names a profile for the noise level (an inline ``noise``
    needs the analyst role). Needs the service's noise secret (``SDC_NOISE_SECRET``).
    """
    body = await validated(request, NoiseRequest)
    check_cell_count(len(body.cells), settings.max_cells)
    diagnostics = caller.sees_diagnostics
    if body.noise is not None and not diagnostics:
        # A caller that sends the microdata and chooses the level could read any
        # respondent's multiplier off the replies: the filter role names a profile.
        raise HTTPException(403, "the filter role names a profile; 'noise' needs the analyst role")
    setup, size = await compute_resolved(resolve, body, settings)
    (reply,) = await compute(rendered(noisy_table), body, setup, settings, diagnostics, size=size)
    return JSONBytes(reply)
