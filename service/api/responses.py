"""JSON response serialised by orjson (numbers as the core computed them, NaN as null,
negative zero as 0.0)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from starlette.responses import Response

from service import collector

#: The text "-0.0" not followed by more of a number: orjson writes negative zero so.
_NEGATIVE_ZERO = re.compile(rb"-0\.0(?![0-9eE])")


#: Items of a reply's list serialised by one call: a reply of 10^6 cells in one call held
#: the interpreter, and so the event loop, 0.25 s even from a pool thread (a campaign, h68).
DUMP_ITEMS = 20_000


def dumps(content) -> bytes:
    """``content`` as JSON, every reply's serialisation (:class:`JSONBytes`,
    :func:`rendered`): numpy arrays and scalars as numbers, NaN as null, and negative
    zero as 0.0. Floats reach replies from many places (LP bounds, ``value - offset``,
    rounding, noise) and any of them can be -0.0, which replies showed as such until
    2026-11-27 (an interval [-0.0, 0.0]); cleaned here, in the one place every reply
    passes, and only when the bytes hold "-0.0" at all (a search at C speed). Strings
    (a cell's code, a message) that hold that text are kept (:func:`_in_strings`)."""
    raw = _serialised(content)
    if b"-0.0" not in raw:
        return raw
    at = np.array([m.start() for m in _NEGATIVE_ZERO.finditer(raw)], np.int64)
    at = at[~_in_strings(raw, at)]
    if not at.size:
        return raw
    # Each "-0.0" outside strings loses its sign: the bytes between them, joined by "".
    starts = np.concatenate([[0], at + 1])
    ends = np.concatenate([at, [len(raw)]])
    return b"".join(raw[a:b] for a, b in zip(starts.tolist(), ends.tolist()))


def _serialised(content) -> bytes:
    """``content`` as orjson writes it (numpy included), its lists of more than
    :data:`DUMP_ITEMS` items (at the top or in dicts) a slice at a time, joined once."""
    pieces: list[bytes | memoryview] = []
    _write(content, pieces)
    return b"".join(pieces)  # one piece: itself, not a copy


def _write(content, pieces: list[bytes | memoryview]) -> None:
    if isinstance(content, list) and len(content) > DUMP_ITEMS:
        pieces.append(b"[")
        for i in range(0, len(content), DUMP_ITEMS):
            part = orjson.dumps(content[i : i + DUMP_ITEMS], option=orjson.OPT_SERIALIZE_NUMPY)
            pieces += (b",", memoryview(part)[1:-1]) if i else (memoryview(part)[1:-1],)
        pieces.append(b"]")
    elif isinstance(content, dict) and all(isinstance(k, str) for k in content):
        pieces.append(b"{")
        for n, (key, value) in enumerate(content.items()):
            pieces += (b",", orjson.dumps(key), b":") if n else (orjson.dumps(key), b":")
            _write(value, pieces)
        pieces.append(b"}")
    else:
        pieces.append(orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY))


def _in_strings(raw: bytes, at: np.ndarray) -> np.ndarray:
    """Whether each position ``at`` of JSON text ``raw`` lies within a string: after an
    odd number of unescaped quotes (a quote after an odd run of backslashes is escaped).
    numpy over the bytes: a 80 MB reply in well under a second, where a regular
    expression matching every string took 20 s."""
    a = np.frombuffer(raw, np.uint8)
    quotes = np.flatnonzero(a == ord('"'))
    after = np.flatnonzero((quotes > 0) & (a[quotes - 1] == ord("\\")))
    unescaped = np.ones(len(quotes), bool)
    for i, q in zip(after.tolist(), quotes[after].tolist()):  # rare, within strings
        run = 1
        while run < q and raw[q - run - 1] == ord("\\"):
            run += 1
        unescaped[i] = run % 2 == 0
    quotes = quotes[unescaped]
    return np.searchsorted(quotes, at) % 2 == 1


class JSONBytes(Response):
    media_type = "application/json"

    def render(self, content) -> bytes:
        if isinstance(content, Rendered):
            return content.raw
        return dumps(content)


class Rendered:
    """A reply already serialised (by :func:`rendered`, where it was computed)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


def rendered(fn: Callable[..., Any], *keep: str) -> Callable[..., tuple]:
    """``fn`` with its reply serialised and freed where it runs: in a pool thread, not on
    the event loop. ``fn`` returns a reply or ``(reply, *rest)``; the wrapper returns
    ``(Rendered, *[reply[k] for k in keep], *rest)``, the items ``keep`` names being what
    the route still reads (its metrics). A frequency reply of 10^6 cells (a 16 KB request)
    took the loop 0.4-1 s to serialise and as long again to free, while health checks
    waited (a campaign, h51); every route's reply goes this way since 2026-11-27 (a
    suppression reply of 195,000 cells held the loop about 0.2 s)."""

    @functools.wraps(fn)
    def run(*args):
        out = fn(*args)
        reply, *rest = out if isinstance(out, tuple) else (out,)
        raw = Rendered(dumps(reply))
        kept = [reply.pop(k) for k in keep]
        del out
        collector.free_in_pieces(reply)  # at once, a large reply held the event loop
        return (raw, *kept, *rest)

    return run
