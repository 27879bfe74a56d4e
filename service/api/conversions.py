"""POST /v1/conversions: parameter conversions between rules (seeds 000, 003, 004)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from schemas.conversions import ConversionReply, ConversionRequest
from schemas.errors import ErrorReply
from service.sdc import conversions

from .access import analyst_only
from .body import openapi_body, validated

router = APIRouter(prefix="/v1", tags=["sensitivity"])


@router.post("/conversions", openapi_extra=openapi_body(ConversionRequest),
             response_model=ConversionReply, response_model_exclude_none=True,
             responses={422: {"model": ErrorReply}}, dependencies=[Depends(analyst_only)])
async def convert_rule(request: Request) -> ConversionReply:
    """Rules the seeds relate to the given one, each with the direction of the relation.

    Analysts only: relations between parameters help whoever tries to infer a profile's."""
    body = await validated(request, ConversionRequest)
    params = body.rule.model_dump(exclude={"type", "name"})
    found = conversions.equivalents(body.rule.type, params, body.negative_factor)
    return ConversionReply.model_validate({"equivalents": [
        {"rule": {"type": e.kind, **e.params}, "relation": e.relation, "source": e.source}
        for e in found]})
