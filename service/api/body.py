"""JSON request bodies, validated straight from their bytes.

FastAPI parses a body with ``json.loads`` and then validates the Python objects; Pydantic's
``model_validate_json`` does both in one pass in Rust, without building the intermediate
dicts. For the online filter (a 50-cell answer on every user query) that was a tenth of
the request's CPU, and a large table is parsed in less time and memory. Every route with a
JSON body therefore declares ``request: Request``, calls :func:`validated`, and passes
:func:`openapi_body` as its ``openapi_extra`` so that the OpenAPI document still describes
the body. Errors keep the usual 422 shape: they are raised as FastAPI's own
:class:`RequestValidationError`. One call holds the interpreter for the whole body (seconds
for 15 MiB: README, "Deployment"), so a body over ``LARGE_BODY_BYTES`` is validated a part
at a time with the event loop free in between (:mod:`.body_parts`), to the same answers.

A key given twice in one object is refused (422 naming it): Pydantic, like most parsers,
would keep the last value silently, and a proxy or a log reader that keeps the first would
see another request than the one served. Detecting it costs a count, not a second parse
(:mod:`.repeated_keys`). Once the body is valid, :func:`validated` also keeps its cells
for error replies to name a cell's key, and charges them to a filter-role key's budget
(:func:`.cell_budget.charge_cells`): it is the one step every route with cells goes
through.
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

from . import body_parts
from .cell_budget import charge_cells
from .compute_pool import LARGE_BODY_BYTES
from .errors import MAX_ERRORS
from .repeated_keys import first_repeat, keys_read, no_repeated_keys, refuse

M = TypeVar("M", bound=BaseModel)

#: A body over this many bytes that one call finds more than ``MAX_ERRORS`` errors in is
#: validated again in parts, which list the first ones only: Pydantic's list of all of
#: them is made in Python (a 256 KiB list of numbers where codes belong, 128,000 errors,
#: held the event loop 0.4 s; validating it, 0.1 s). In parts from the start, a valid
#: body under ``LARGE_BODY_BYTES`` took a third longer.
PARTS_FROM = 64 * 1024

#: Models documented by :func:`openapi_body`, to be added to the OpenAPI components.
DOCUMENTED: dict[str, type[BaseModel]] = {}
_REF = "#/components/schemas/{model}"


def openapi_body(model: type[BaseModel]) -> dict:
    """The route's ``openapi_extra``: a required JSON body of ``model``."""
    DOCUMENTED[model.__name__] = model
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}
            },
        }
    }


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
        subtype == "json" or subtype.endswith("+json")
    )


async def validated(request: Request, model: type[M]) -> M:
    """The request's body as ``model``; 422 (the usual validation reply) when it is not
    JSON, not UTF-8, not a valid ``model``, or repeats a key in an object. Its cells (if it
    has any) go to ``request.state.cells``, where error replies find a cell's key, and a
    filter-role caller's cells are charged to its key (413 or 429:
    :func:`.cell_budget.charge_cells`)."""
    if not _is_json(request.headers.get("content-type")):  # before reading any of it
        raise RequestValidationError(
            [
                {
                    "type": "model_attributes_type",
                    "loc": ("body",),
                    "ctx": None,
                    "msg": "the body must be JSON, sent with Content-Type: application/json",
                }
            ]
        )
    try:
        raw = await request.body()
    except ClientDisconnect:
        raise HTTPException(
            400, "the client closed the connection before the body arrived"
        ) from None
    body = await body_parts.validated(raw, model) if len(raw) > LARGE_BODY_BYTES else None
    if body is None:
        try:
            body = _validated_at_once(raw, model)
        except _ManyErrors as many:
            await body_parts.validated(raw, model)  # raises the 422 of the first ones
            raise _invalid(many.error, raw) from None  # (not cut: all of them)
    if len(raw) > LARGE_BODY_BYTES:
        request.state.body = body  # freed in pieces after the reply (AdmissionMiddleware)
    cells = getattr(body, "cells", None)
    if cells is not None:
        request.state.cells = cells
        charge_cells(request, len(cells))
    return body


class _ManyErrors(Exception):
    """More than ``MAX_ERRORS`` errors (``error``) in a body over ``PARTS_FROM``."""

    def __init__(self, error: ValidationError):
        self.error = error


def _invalid(error: ValidationError, raw: bytes) -> RequestValidationError:
    """The 422 of ``error`` (every error of it)."""
    return RequestValidationError(
        error.errors(include_input=False, include_url=False), body=_parsed_or_none(raw)
    )


def _validated_at_once(raw: bytes, model: type[M]) -> M:
    """``raw`` validated as ``model`` in one call (Pydantic in Rust), and checked for a
    repeated key."""
    try:
        body = model.model_validate_json(raw)
    except ValidationError as error:
        if error.error_count() > MAX_ERRORS and len(raw) > PARTS_FROM:
            raise _ManyErrors(error) from None
        raise _invalid(error, raw) from None
    if not no_repeated_keys(raw, keys_read([body], model)):
        del body  # the models' memory back before the bytes are parsed again
        found = first_repeat(raw)
        if found is not None:
            refuse(found[1], found[0])
        body = model.model_validate_json(raw)  # no key repeated after all: served
    return body


def _parsed_or_none(raw: bytes):
    """The body as Python objects, for the error reply to name a cell's key. The standard
    library's parser, because it reads the NaN and Infinity that the error is about."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None
