"""POST /v1/filter: the online query filter (seed 003 section C) between a user's query and
its answer. The work is in :mod:`service.pipeline.query_filter`, the mathematics in
:mod:`service.sdc.query_filter`.

Requests are served by :func:`answer` on the app's lean path (:mod:`.lean`: the app's
middleware without Starlette's router and FastAPI's request handling); the route declared
here documents it in the OpenAPI and calls the same function.
"""

from __future__ import annotations

import functools

from fastapi import Request
from starlette.exceptions import HTTPException

from schemas.errors import ErrorReply
from schemas.filter import FilterReply, FilterRequest
from service.config import Settings
from service.pipeline.limits import check_cell_count
from service.pipeline.query_filter import policy_of, screen

from .access import Caller
from .body import openapi_body, validated
from .compute_pool import compute
from .deps import CallerDep
from .responses import JSONBytes, rendered
from .routing import post


@post(
    "/filter",
    tags=["filter"],
    response_model=FilterReply,
    openapi_extra=openapi_body(FilterRequest),
    responses={413: {"model": ErrorReply}, 422: {"model": ErrorReply}},
)
async def filter_answer(request: Request, caller: CallerDep):
    """Publish a query's answer as is, with some cells suppressed, or refuse it.

    First the query filter on the query's definition (maximum variables, forbidden
    combinations, minimum populations), before any figure is looked at; then the
    statistical-results filter on the figures under the profile's approach: ``refuse``
    (AQS: any sensitive cell refuses the table) or ``noise`` (ARMS: noisy values are
    published, cells failing a criterion are suppressed, no complementary suppression).
    The filter role names a profile and receives decisions and noisy values only; analysts
    may also send a policy inline and receive the reasons per cell. Refusal messages tell
    the user what to change and name no parameter.
    """
    return await answer(request, caller)


async def answer(request: Request, caller: Caller) -> JSONBytes:
    """The filter's reply to ``request`` from ``caller`` (errors are raised, for the app's
    handlers): :func:`filter_answer`'s work, on the lean path and off it."""
    settings: Settings = request.app.state.settings
    body = await validated(request, FilterRequest)  # from the bytes: on every query's path
    check_cell_count(len(body.cells), settings.max_cells)
    diagnostics = caller.sees_diagnostics
    if body.policy is not None and not diagnostics:
        # A caller that sends the microdata and chooses the criteria could read the noise
        # of any respondent off the replies: the filter role names a profile.
        raise HTTPException(
            403, "the filter role names a profile; an inline policy needs the analyst role"
        )
    rules, policy = policy_of(body, settings, diagnostics)
    reply, decision, stopped = await compute(
        rendered(screen, "decision"),
        body,
        rules,
        policy,
        settings.noise_secret,
        diagnostics,
        size=len(body.cells),
    )
    metrics = request.app.state.metrics
    metrics.cells_evaluated.inc(len(body.cells))
    metrics.sensitive_cells.inc(stopped)
    _decision_counter(metrics.filter_decisions, decision).inc()
    return JSONBytes(reply)


@functools.lru_cache(maxsize=16)
def _decision_counter(counter, decision: str):
    """The counter of one decision: a metric's ``labels()`` costs microseconds on every
    answer (an app has three decisions; tests make many apps, hence the bound)."""
    return counter.labels(decision)
