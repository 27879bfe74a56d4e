"""POST /v1/conversions: parameter conversions between rules (seeds 000, 003, 004)."""

from __future__ import annotations

from fastapi import Depends, Request

from schemas.conversions import ConversionReply, ConversionRequest
from schemas.errors import ErrorReply
from service.pipeline.rules import rule_equivalents

from .access import analyst_only
from .body import openapi_body, validated
from .routing import post


@post(
    "/conversions",
    tags=["sensitivity"],
    openapi_extra=openapi_body(ConversionRequest),
    response_model=ConversionReply,
    response_model_exclude_none=True,
    responses={422: {"model": ErrorReply}},
    dependencies=[Depends(analyst_only)],
)
async def convert_rule(request: Request) -> ConversionReply:
    """Rules the seeds relate to the given one, each with the direction of the relation.

    Analysts only: relations between parameters help whoever tries to infer a profile's."""
    return rule_equivalents(await validated(request, ConversionRequest))
