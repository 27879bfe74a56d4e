"""The cyclic garbage collector's view of the process.

At start the app's objects leave it (frozen) and young objects are collected less often
(:func:`tune`): a request allocates thousands of short-lived validation objects, and
frequent full collections over the long-lived ones were the tail of the latency
distribution. A large body validated in parts (:mod:`service.api.body_parts`) allocates
millions of objects that live until the reply; the collector would pass over them again
and again, each pass holding the interpreter (about 0.15 s per pass over the 400,000 young
objects the thresholds allow, more for a full one). :func:`hide` freezes them part by
part; once the request is answered, :func:`look_again` collects whatever was frozen
meanwhile (cycles that became garbage) and freezes the rest, as at start.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import typing

from pydantic import BaseModel

_hidden = False

#: Lists and dicts up to this many items are freed with what holds them (:func:`_pieces`).
SMALL = 64
#: Items looked at, or freed, by one piece of :func:`_pieces`.
PIECE = 512


def tune() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def hide() -> None:
    """Take every object alive now out of the collector's view."""
    global _hidden
    gc.freeze()
    _hidden = True


def look_again() -> None:
    """After :func:`hide`: one full collection of everything alive, then freeze it (45 ms
    for an idle app)."""
    global _hidden
    if _hidden:
        _hidden = False
        gc.unfreeze()
        tune()


async def take_apart(body: BaseModel | list | dict) -> None:
    """Free a large request body a piece at a time (:func:`_pieces`), the event loop
    turning in between. Its last reference dropped at once, the whole of it is freed in
    one call that holds the interpreter: 90,000 cells of 10 contributions took 0.8 s, and
    so held every other request (a campaign, h68). Whoever still holds the body
    afterwards holds its emptied shell. Also for the parts of a body validated before an
    error (:mod:`service.api.body_parts`)."""
    for _ in _pieces(body):
        await asyncio.sleep(0)


def free_in_pieces(content: BaseModel | list | dict) -> None:
    """:func:`take_apart` in a pool thread, for a reply once serialised: between pieces
    the interpreter may go to the event loop (a reply of 10^6 cells freed at once held it
    0.2 s)."""
    for _ in _pieces(content):
        pass


def _pieces(body: BaseModel | list | dict) -> typing.Iterator[None]:
    """Take ``body`` apart, yielding between pieces: every model that can hold
    containers or models, and every container in one, is looked at on its own,
    :data:`PIECE` items a piece, and lists and dicts of more than :data:`SMALL` items are
    emptied from the end, :data:`PIECE` items a piece, so that a piece frees at most a
    few small containers per item."""
    todo: list[BaseModel | list | dict] = [body]
    looked = 0
    while todo:
        obj = todo.pop()
        model = isinstance(obj, BaseModel)
        items: typing.Iterable
        if isinstance(obj, BaseModel):
            items, look = obj.__dict__.values(), True
        else:
            items = obj.values() if isinstance(obj, dict) else obj
            look = len(obj) <= SMALL or _composite_items(obj)
        if look:
            for item in items:
                if isinstance(item, BaseModel):
                    if _nested(type(item)):
                        todo.append(item)
                elif isinstance(item, (list, dict)) and (
                    len(item) > SMALL or (model and _composite_items(item))
                ):
                    todo.append(item)
                looked += 1
                if looked % PIECE == 0:
                    yield
        if isinstance(obj, (list, dict)) and len(obj) > SMALL:
            while obj:
                if isinstance(obj, list):
                    del obj[-PIECE:]
                else:
                    for _ in range(min(PIECE, len(obj))):
                        obj.popitem()
                yield


def _composite_items(obj: list | dict) -> bool:
    """Whether a list's or dict's items are models that can hold containers, or
    containers: the body's are typed, so its first one says."""
    first = next(iter(obj.values() if isinstance(obj, dict) else obj), None)
    if isinstance(first, BaseModel):
        return _nested(type(first))
    return isinstance(first, (list, dict))


@functools.cache
def _nested(cls: type[BaseModel]) -> bool:
    """Whether a model of class ``cls`` can hold containers or models."""
    return any(_composite(field.annotation) for field in cls.model_fields.values())


def _composite(annotation: object) -> bool:
    if typing.get_origin(annotation) in (list, dict, tuple, set, frozenset):
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_composite(arg) for arg in typing.get_args(annotation))
