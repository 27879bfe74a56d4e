"""JSON response serialised by orjson (numbers as the core computed them, NaN as null)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import orjson
from starlette.responses import Response


class JSONBytes(Response):
    media_type = "application/json"

    def render(self, content) -> bytes:
        if isinstance(content, Rendered):
            return content.raw
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


class Rendered:
    """A reply already serialised (by :func:`rendered`, where it was computed)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


def rendered(fn: Callable[..., tuple]) -> Callable[..., tuple]:
    """``fn`` (returning ``(reply, *rest)``) with its reply serialised and freed where it
    runs: in a pool thread, not on the event loop. A frequency reply of 10^6 cells (a
    16 KB request) took the loop 0.4-1 s to serialise and as long again to free, while
    health checks waited (a campaign, h51)."""

    @functools.wraps(fn)
    def run(*args):
        reply, *rest = fn(*args)
        raw = Rendered(orjson.dumps(reply, option=orjson.OPT_SERIALIZE_NUMPY))
        del reply
        return (raw, *rest)

    return run
