"""JSON request bodies, validated straight from their bytes.

FastAPI parses a body with ``json.loads`` and then validates the Python objects; Pydantic's
``model_validate_json`` does both in one pass in Rust, without building the intermediate
dicts. For the online filter (a 50-cell answer on every user query) that was a tenth of
the request's CPU, and a large table is parsed in less time and memory. Every route with a
JSON body therefore declares ``request: Request``, calls :func:`validated`, and passes
:func:`openapi_body` as its ``openapi_extra`` so that the OpenAPI document still describes
the body. Errors keep the usual 422 shape: they are raised as FastAPI's own
:class:`RequestValidationError`.

A key given twice in one object is refused (422 naming it): Pydantic, like most parsers,
would keep the last value silently, and a proxy or a log reader that keeps the first would
see another request than the one served. Detecting it costs a count, not a second parse
(:func:`_no_repeated_keys`). Once the body is valid, :func:`validated` also keeps its cells
for error replies to name a cell's key, and charges them to a filter-role key's budget
(:func:`.cell_budget.charge_cells`): it is the one step every route with cells goes
through.
"""

from __future__ import annotations

import email.message
import json
import re
import types
from collections.abc import Callable, Iterable
from functools import cache
from itertools import chain
from operator import attrgetter
from typing import Annotated, Literal, TypeVar, Union, get_args, get_origin

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from .cell_budget import charge_cells

M = TypeVar("M", bound=BaseModel)

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
    try:
        body = model.model_validate_json(raw)
    except ValidationError as error:
        raise RequestValidationError(
            error.errors(include_input=False, include_url=False), body=_parsed_or_none(raw)
        ) from None
    if not _no_repeated_keys(raw, body):
        del body  # the models' memory back before the bytes are parsed again
        _refuse_repeated_key(raw)
        body = model.model_validate_json(raw)  # no key repeated after all: served
    cells = getattr(body, "cells", None)
    if cells is not None:
        request.state.cells = cells
        charge_cells(request, len(cells))
    return body


# --------------------------------------------------------------------------- repeated keys
#
# Every key of a valid body was read by validation: into a model's set fields (extra keys
# are refused) or a dict's entries. A key given twice was read once. So a body repeats no
# key exactly when it has as many keys as validation read. Each key is followed by a colon,
# so the colons of the bytes bound its keys from above: equal counts prove that no key is
# repeated. That is one pass over the bytes at C speed and a walk over the models with
# C-level maps, one field of all the cells at a time, visiting only the fields some model
# was sent with (measured on a 50-cell filter body: README, "Errors"). Colons inside
# strings ("12:30") break the tie; the keys are then counted exactly with the strings taken
# out, and only a body that really repeats a key is parsed again, to name it.

_FIELDS_SET = attrgetter("__pydantic_fields_set__")
#: A JSON string, escapes included: what is left between them is structure.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _no_repeated_keys(raw: bytes, body: BaseModel) -> bool:
    """True when no object of ``raw`` (valid, and validated into ``body``) repeats a key;
    False when one may (then :func:`_refuse_repeated_key` says which)."""
    read = _keys_read(body)
    return raw.count(b":") == read or _STRING.sub(b"", raw).count(b":") == read


def _keys_read(body: BaseModel) -> int:
    """How many object keys validation read into ``body``: each model's set fields and
    each dict's entries, at any depth. Breadth first, one field of all the models of a
    kind at a time (C-level maps), and only the fields some model of them was sent with."""
    n = 0
    todo: list[tuple[list, tuple]] = [([body], ("model", type(body)))]
    while todo:
        values, (kind, inner) = todo.pop()  # values: a non-empty list, no None in it
        if kind == "model":
            plan = _plan(inner)
            if not plan:
                n += sum(map(len, map(_FIELDS_SET, values)))
                continue
            if len(values) == 1:  # the request, its query, its policy
                sent = _FIELDS_SET(values[0])
                n += len(sent)
            else:
                sets = list(map(_FIELDS_SET, values))
                n += sum(map(len, sets))
                sent = set().union(*sets)
            for name, get, shape in plan:
                if name in sent:  # else a pass over every cell for a field none was sent
                    found = list(filter(None, map(get, values)))  # None, [], {}: no key
                    if found:
                        todo.append((found, shape))
        elif kind == "list":
            todo.append((list(chain.from_iterable(values)), inner))
        elif kind == "dict":
            n += sum(map(len, values))
            if inner is not None:
                found = list(chain.from_iterable(map(dict.values, values)))
                if found:
                    todo.append((found, inner))
        else:  # a union of models: each class with its own fields
            by_class: dict[type, list] = {}
            for value in values:
                by_class.setdefault(type(value), []).append(value)
            todo.extend((group, ("model", cls)) for cls, group in by_class.items())
    return n


@cache
def _plan(model: type[BaseModel]) -> tuple[tuple[str, Callable, tuple], ...]:
    """The fields of ``model`` that can hold JSON objects: name, getter, :func:`_shape`."""
    shapes = ((name, _shape(field.annotation)) for name, field in model.model_fields.items())
    return tuple((name, attrgetter(name), shape) for name, shape in shapes if shape is not None)


_SCALARS = (str, int, float, bool, type(None))


def _shape(annotation) -> tuple | None:
    """Where a field's value can hold JSON objects: ``None`` (nowhere: numbers, strings,
    lists of them), ``("model", cls)``, ``("union", None)`` (one of several models),
    ``("list", shape)``, ``("dict", shape of its values or None)``. A type it cannot place
    is an error at the first request, so that a new schema cannot slip past the count."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _shape(args[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ("model", annotation)
    if annotation in _SCALARS or origin is Literal:
        return None
    if origin in (Union, types.UnionType):
        shapes = [s for s in map(_shape, args) if s is not None]
        if len(shapes) <= 1:
            return shapes[0] if shapes else None
        if all(s[0] in ("model", "union") for s in shapes):
            return ("union", None)
    elif origin in (list, tuple):
        items = [a for a in args if a is not Ellipsis]
        item_shapes = {_shape(a) for a in items} - {None}
        if not item_shapes:
            return None
        if len(item_shapes) == 1 and not any(map(_nullable, items)):
            return ("list", item_shapes.pop())
    elif origin is dict:
        shape = _shape(args[1])
        if shape is None or not _nullable(args[1]):
            return ("dict", shape)
    # (Objects in a list or dict are never null: the counters skip no None there.)
    raise TypeError(f"cannot count the JSON keys of a field of type {annotation!r}")


def _nullable(annotation) -> bool:
    if get_origin(annotation) is Annotated:
        return _nullable(get_args(annotation)[0])
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _refuse_repeated_key(raw: bytes) -> None:
    """Raise the 422 naming the first key that an object of ``raw`` repeats (in document
    order, outer objects first). Returns when none does: the count was then thrown off by
    something it does not model, and the body is served."""
    try:
        document = json.loads(raw, object_pairs_hook=_object)
        loc = _repeated(document, ())
    except (ValueError, RecursionError):  # valid for Pydantic, so not expected
        document, loc = None, ("body",)
    if loc is None:
        return
    raise RequestValidationError(
        [
            {
                "type": "duplicate_key",
                "loc": ("body", *loc),
                "ctx": None,
                "msg": "the field is given twice in one JSON object; give it once",
            }
        ],
        body=document,
    )


class _Repeating(dict):
    """A parsed object that repeated a key (:attr:`key`, its first repeated one)."""

    key: str


def _object(pairs: list[tuple]) -> dict:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    repeating = _Repeating(obj)
    seen: set[str] = set()
    for key, _ in pairs:  # the first key seen a second time
        if key in seen:
            repeating.key = key
            break
        seen.add(key)
    return repeating


def _repeated(node, path: tuple) -> tuple | None:
    """The path of the first repeated key under ``node``, depth first."""
    if isinstance(node, _Repeating):
        return (*path, node.key)
    items: Iterable[tuple[str | int, object]]
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return None
    for key, child in items:
        found = _repeated(child, (*path, key))
        if found is not None:
            return found
    return None


def _parsed_or_none(raw: bytes):
    """The body as Python objects, for the error reply to name a cell's key. The standard
    library's parser, because it reads the NaN and Infinity that the error is about."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None
