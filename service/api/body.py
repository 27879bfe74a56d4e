"""JSON request bodies, validated straight from their bytes.

FastAPI parses a body with ``json.loads`` and then validates the Python objects; Pydantic's
``model_validate_json`` does both in one pass in Rust, without building the intermediate
dicts. For the online filter (a 50-cell answer on every user query) that was a tenth of
the request's CPU, and a large table is parsed in less time and memory. Every route with a
JSON body therefore declares ``request: Request``, calls :func:`validated`, and passes
:func:`openapi_body` as its ``openapi_extra`` so that the OpenAPI document still describes
the body. Errors keep the usual 422 shape: they are raised as FastAPI's own
:class:`RequestValidationError`.
"""

from __future__ import annotations

import email.message
import json
from typing import TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

M = TypeVar("M", bound=BaseModel)

#: Models documented by :func:`openapi_body`, to be added to the OpenAPI components.
DOCUMENTED: dict[str, type[BaseModel]] = {}
_REF = "#/components/schemas/{model}"


def openapi_body(model: type[BaseModel]) -> dict:
    """The route's ``openapi_extra``: a required JSON body of ``model``."""
    DOCUMENTED[model.__name__] = model
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": _REF.format(model=model.__name__)}}}}}


def add_components(schemas: dict, model: type[BaseModel]) -> None:
    """Put ``model``'s JSON schema and the models it uses into the OpenAPI components
    (``schemas``); a name FastAPI has already generated is kept."""
    schema = model.model_json_schema(ref_template=_REF)
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    schemas.setdefault(model.__name__, schema)


def _is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/*+json``, as FastAPI accepts."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json"))


async def validated(request: Request, model: type[M]) -> M:
    """The request's body as ``model``; 422 (the usual validation reply) when it is not
    JSON, not UTF-8, or not a valid ``model``."""
    if not _is_json(request.headers.get("content-type")):   # before reading any of it
        raise RequestValidationError([{
            "type": "model_attributes_type", "loc": ("body",), "ctx": None,
            "msg": "the body must be JSON, sent with Content-Type: application/json"}])
    try:
        raw = await request.body()
    except ClientDisconnect:
        raise HTTPException(400, "the client closed the connection before the body "
                                 "arrived") from None
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        raise RequestValidationError(error.errors(include_input=False, include_url=False),
                                     body=_parsed_or_none(raw)) from None


def _parsed_or_none(raw: bytes):
    """The body as Python objects, for the error reply to name a cell's key. The standard
    library's parser, because it reads the NaN and Infinity that the error is about."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None
