"""A key given twice in one JSON object, found by a count rather than a second parse.

Every key of a valid body was read by validation: into a model's set fields (extra keys
are refused) or a dict's entries. A key given twice was read once. So a body repeats no
key exactly when it has as many keys as validation read. Each key is followed by a colon,
so the colons of the bytes bound its keys from above: equal counts prove that no key is
repeated. That is one pass over the bytes at C speed and a walk over the models with
C-level maps, one field of all the cells at a time, visiting only the fields some model
was sent with (measured on a 50-cell filter body: README, "Errors"). Colons inside
strings ("12:30") break the tie; the keys are then counted exactly with the strings taken
out, and only a text that really repeats a key is parsed again, to name it. The text may
be a whole body or a part of one (:mod:`.body_parts`): the count holds for any run of
whole values, with the models validated from it.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable, Iterable
from functools import cache
from itertools import chain
from operator import attrgetter
from typing import Annotated, Literal, Union, get_args, get_origin

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel

_FIELDS_SET = attrgetter("__pydantic_fields_set__")
#: A JSON string, escapes included: what is left between them is structure.
STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def no_repeated_keys(text: bytes, read: int) -> bool:
    """True when no object of ``text`` (valid, and validated into models in which
    :func:`keys_read` counted ``read`` keys) repeats a key; False when one may (then
    :func:`first_repeat` says which)."""
    return text.count(b":") == read or STRING.sub(b"", text).count(b":") == read


def keys_read(values: list, of: object) -> int:
    """How many object keys validation read into ``values`` (of the type ``of``: a
    model, or any annotation :func:`_shape` places): each model's set fields and each
    dict's entries, at any depth. Breadth first, one field of all the models of a kind at
    a time (C-level maps), and only the fields some model of them was sent with."""
    n = 0
    shape = _shape(of)
    if shape is None or not values:
        return 0
    todo: list[tuple[list, tuple]] = [(values, shape)]
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


def first_repeat(text: bytes) -> tuple[object, tuple] | None:
    """``text`` parsed, and the path of the first key that an object of it repeats (in
    document order, outer objects first); None when none does (the count was then thrown
    off by something it does not model)."""
    try:
        document = json.loads(text, object_pairs_hook=_object)
        path = _repeated(document, ())
    except (ValueError, RecursionError):  # valid for Pydantic, so not expected
        return None, ()
    return None if path is None else (document, path)


def refuse(path: tuple, document: object) -> None:
    """Raise the 422 naming the key repeated at ``path`` of the body ``document``."""
    raise RequestValidationError(
        [
            {
                "type": "duplicate_key",
                "loc": ("body", *path),
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
