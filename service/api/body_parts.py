"""Large JSON bodies validated a part at a time, with the event loop free in between.

Pydantic validates a body in one call that holds the interpreter lock (seconds for a
15 MiB ``/v1/sensitivity`` body of 900,000 short contributions; 1.8 s for an unknown field
of 1,000,000 ``{}``, 3 MiB), and a worker thread would hold it just the same: /healthz,
/metrics and every small request would wait. A body over ``PARTS_FROM`` (64 KiB,
:mod:`.body`) is instead

1. scanned (:func:`_scan`, numpy, ``SCAN_BYTES`` at a time): where each bracket, comma
   and colon outside strings is, and how deep;
2. cut (:class:`_Run`), looking at the structure a run or ``_WINDOW`` entries at a time,
   never the whole of it in one numpy call. An object validated as a model has its keys
   read (a run of them per parser call) and keeps, as Pydantic reads it, each field's
   last value and each unknown key's first, the first ``MAX_ERRORS`` + 1 unknown keys
   only (a 422 shows no more), their values written ``null`` (the error is the same
   whatever they hold); every other member is only checked as JSON. A field's value over
   ``PART_BYTES`` is cut by its type (:class:`_Kind`): an object of a model the same way;
   an array of a list, between items, into parts of at most ``PART_BYTES`` validated from
   their bytes as a list of the items (an item over ``PART_BYTES`` cut in turn); an
   object of a mapping (a hierarchy's parents) between members, each part validated as a
   mapping and merged; a list of more items than it may have gets one call's ``too_long``
   without its items validated; a container of a kind the type never takes (an array
   where an object belongs) is checked as JSON and validated as ``[]`` or ``{}``, whose
   error is the same;
3. assembled: a list's or mapping's own checks (its length, a validator of the whole:
   :meth:`_Kind.whole`) run on the merged value, and the rest of the object, each cut
   value written ``null``, is validated by a subclass of its model that takes the
   validated values from the validation context (:func:`_taking`), so that the model's
   own validators run on the whole, in the usual order of errors.

The answers are those of one call: every part is validated from its bytes in JSON mode,
an error carries its place in the body (the item's index, the member's key; a JSON
error's line and column, the first in the body whether it lies in a part or in what is
only checked, the parser's recursion limit included: :meth:`_Run._too_deep`), and a key
given twice is found by the count per part (:mod:`.repeated_keys`) and, for an object
or a mapping cut into parts, by its keys. Pydantic's parse tree is one part's, not the
body's. From ``HIDE_BYTES`` on, the parts' models are hidden from the cyclic garbage
collector as they are made (:mod:`service.collector`).

Still validated in one call: a body that is not a JSON object or whose strings or
brackets do not close (invalid JSON: one parse up to the error, nothing validated), and a
value over ``PART_BYTES`` that is none of the above (a union of models such as one rule
of a rule set, a tuple, one long string): ``benchmarks/stalls.py`` measures what each
kind of body holds the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import types
from functools import cache, cached_property
from typing import Annotated, Any, Literal, NamedTuple, TypeVar, Union, cast, get_args, get_origin

import numpy as np
import pydantic_core
from fastapi.exceptions import RequestValidationError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WrapValidator,
    create_model,
)
from pydantic_core import PydanticCustomError, PydanticKnownError

from .. import collector
from .errors import MAX_ERRORS
from .repeated_keys import first_repeat, keys_read, no_repeated_keys, refuse

M = TypeVar("M", bound=BaseModel)

#: Most bytes of JSON validated in one call (10-20 ms of short contributions).
PART_BYTES = 64 * 1024
#: Bytes scanned by one round of numpy calls (a few ms; up to 256 Ki entries).
SCAN_BYTES = 256 * 1024
#: Bodies from this size on keep their validated parts from the collector
#: (:func:`service.collector.hide`): below it, the collection after the reply (50 ms)
#: would cost more than the passes it saves.
HIDE_BYTES = 4 * 1024 * 1024

_OPEN, _CLOSE = {ord("{"), ord("[")}, {ord("}"), ord("]")}
_COMMA, _COLON, _BRACE, _BRACKET = ord(","), ord(":"), ord("{"), ord("[")
#: Per byte: 1 opens a container, -1 closes one, 2 separates (comma, colon), 0 neither.
_KIND = np.zeros(256, np.int8)
_KIND[list(_OPEN)], _KIND[list(_CLOSE)], _KIND[[_COMMA, _COLON]] = 1, -1, 2
_NOT_BACKSLASH = re.compile(rb"[^\\]")
_NOT_SPACE = re.compile(rb"[^ \t\n\r]")
_AT = re.compile(r" at line (\d+) column (\d+)$")
#: The error of a field whose parts had errors (replaced by them).
_PARTS_FAILED = "sdc_parts_failed"
_ABSENT = object()
#: Containers around a bracket from which the parser refuses to go deeper (its recursion
#: limit): the body is invalid JSON there.
_TOO_DEEP = 201
#: An object's keys read by one parser call.
_KEYS_PER_ROUND = 5_000
#: What a list's or mapping's core schema may hold besides its length for
#: :meth:`_Kind.whole` to check only that.
_PLAIN = {
    "type",
    "items_schema",
    "keys_schema",
    "values_schema",
    "min_length",
    "max_length",
    "strict",
}
#: Entries of the structure looked at by one round of numpy calls (a few ms).
_WINDOW = 1 << 20


async def validated(raw: bytes, model: type[M]) -> M | None:
    """``raw`` validated as ``model`` in parts, with the answers of one call (422s
    included); None when it has nothing to cut or is not JSON, for one call to answer."""
    structure = await _scan(raw)
    if structure is None or structure.char[0] not in _OPEN or raw[: structure.pos[0]].strip():
        return None
    try:
        if structure.left_open or structure.in_string or structure.stray is not None:
            await _broken(raw, structure)
        run = _Run(raw, structure)
        if run.too_deep is not None:  # invalid JSON: its first error
            await run.syntax(0, await run.close(0))
            raise run._too_deep_error()
        if structure.char[0] == _BRACKET:  # an array: the model's error whatever it holds
            await run.syntax(0, end := await run.close(0))
            run.stand_in(
                model, [(0, int(structure.pos[0]) + 1), (int(structure.pos[end]), len(raw))]
            )
        result = await run.object(model, 0, await run.close(0), 0, len(raw))
    except _Whole:
        return None
    except _JsonError as error:
        raise RequestValidationError([error.error]) from None
    if result is None:
        return None
    if result.errors:
        raise RequestValidationError(result.errors, body=await run.items_body(result.errors))
    if result.repeat is not None:
        refuse(result.repeat, await run.items_body([{"loc": result.repeat}]))
    return result.value


async def _broken(raw: bytes, structure: _Structure) -> None:
    """Raise one call's error for a body whose brackets or strings do not close: the
    first JSON error before that, found as in a body completed with the missing quote and
    brackets (at a bracket that closes nothing: cut before it), or what follows the body's
    value, or the parser's error at the end."""
    if structure.stray is None and not structure.left_open:  # a string after the value
        raise _Whole
    text = raw
    if structure.stray is None:
        text += (b' "' if structure.in_string else b"") + b"]" * structure.left_open
        completed = await _scan(text)
        if completed is None or completed.left_open or completed.in_string or completed.stray:
            raise _Whole
        structure = completed
    run = _Run(text, structure)
    end = await run.close(0)
    try:
        await run.syntax(0, end)
    except _JsonError as error:
        if error.at < len(raw):
            raise
    after = (
        int(structure.pos[end]) + 1,
        len(raw) if structure.stray is None else structure.stray + 1,
    )
    if raw[after[0] : after[1]].strip():  # what follows the value: "trailing characters"
        value, where = _joined(raw, [b"0", after])
        try:
            pydantic_core.from_json(value)
        except ValueError as error:
            raise run._parse_error(error, value, where) from None
    if structure.stray is not None:
        raise _Whole
    raise await run.eof_error(len(raw))


class _Structure(NamedTuple):
    """The brackets, commas and colons of a body outside its strings; for a body whose
    brackets or strings do not close, up to where that is seen."""

    pos: np.ndarray  # byte offset
    depth: np.ndarray  # containers around it; a bracket's: around the container it opens
    char: np.ndarray
    left_open: int = 0  # containers open at the end
    in_string: bool = False  # a string open at the end
    stray: int | None = None  # the byte of a bracket that closes nothing (not scanned on)


async def _scan(raw: bytes) -> _Structure | None:
    """The structure of ``raw``; None when a string or a bracket does not close (then it
    is not JSON). A quote after an odd run of backslashes is escaped; a run and the byte
    it escapes stay in one piece."""
    data = np.frombuffer(raw, np.uint8)
    pos_type = np.int32 if len(raw) < 2**31 else np.int64
    # At most one entry a byte: written in place as found, no copy at the end (the pages
    # never written are never given memory).
    pos, depths, chars = (np.empty(len(raw), t) for t in (pos_type, np.int32, np.uint8))
    n = 0
    inside, depth, lo = False, 0, 0
    while lo < len(raw):
        hi = min(lo + SCAN_BYTES, len(raw))
        if data[hi - 1] == ord("\\"):
            escaped = _NOT_BACKSLASH.search(raw, hi)
            hi = escaped.end() if escaped else len(raw)
        piece = data[lo:hi]
        quote = piece == ord('"')
        if raw.find(b"\\", lo, hi) >= 0:
            edges = np.diff((piece == ord("\\")).view(np.int8), prepend=0, append=0)
            starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
            escaped = ends[(ends - starts) % 2 == 1]
            quote[escaped[escaped < len(piece)]] = False
        in_string = np.logical_xor.accumulate(quote)
        if inside:
            np.logical_not(in_string, out=in_string)
        inside = bool(in_string[-1])
        kind = _KIND[piece]
        kind[in_string] = 0
        at = np.flatnonzero(kind)
        kind = kind[at]
        after = np.cumsum(np.where(kind == 2, 0, kind), dtype=np.int64) + depth
        if len(after):
            if after.min() < 0:
                stray = int(np.argmax(after < 0))
                m = n + stray
                pos[n:m], depths[n:m], chars[n:m] = (
                    at[:stray] + lo,
                    after[:stray] - (kind[:stray] == 1),
                    piece[at[:stray]],
                )
                if not m:
                    return None
                return _Structure(pos[:m], depths[:m], chars[:m], stray=int(at[stray]) + lo)
            depth = int(after[-1])
        m = n + len(at)
        pos[n:m], depths[n:m], chars[n:m] = at + lo, after - (kind == 1), piece[at]
        n, lo = m, hi
        await asyncio.sleep(0)
    if not n:
        return None
    return _Structure(pos[:n], depths[:n], chars[:n], left_open=depth, in_string=inside)


class _Result(NamedTuple):
    value: Any  # None when there are errors
    errors: list[dict]  # places relative to the value
    repeat: tuple | None  # the first repeated key's place, when there are no errors


class _StandIn(NamedTuple):
    """A value whose JSON kind its type never takes (an array where an object belongs):
    its syntax checked, it is validated as ``text`` (``[]``, ``{}``), whose errors are its
    own whatever it holds."""

    text: bytes


class _Members(NamedTuple):
    """An object's members: each key, and indices (in the structure) of the ``{`` or
    ``,`` before it, of its colon and of the ``,`` or ``}`` after its value."""

    keys: list[str]
    starts: np.ndarray
    colons: np.ndarray
    ends: np.ndarray
    repeat: int | None  # the first member whose key an earlier one has


class _Whole(Exception):
    """The parts cannot give one call's answer: the body is validated whole."""


class _JsonError(Exception):
    """Invalid JSON at byte ``at`` of the body; ``error`` is one call's error for it."""

    def __init__(self, at: int, error: dict):
        self.at, self.error = at, error


class _Run:
    """One body's validation in parts."""

    def __init__(self, raw: bytes, structure: _Structure):
        self.raw, self.s = raw, structure
        self.items: dict[str, tuple[int, int]] = {}  # the top object's cut lists: brackets
        #: Where the parser meets its recursion limit, if it does: the body is invalid.
        self.too_deep = self._too_deep()

    def _too_deep(self) -> int | None:
        """The byte of the first value inside a container nested ``_TOO_DEEP`` deep
        (what the parser refuses): an array's first item, an object's first value."""
        s = self.s
        if int(s.depth.max()) < _TOO_DEEP - 1:
            return None
        for lo in range(0, len(s.depth), _WINDOW):
            window = slice(lo, lo + _WINDOW)
            opening = np.isin(s.char[window], list(_OPEN)) & (s.depth[window] >= _TOO_DEEP - 1)
            deep = np.flatnonzero(opening) + lo
            # Not an empty container ("[]"; with whitespace inside, looked at below).
            nxt = deep + 1
            deep = deep[(s.char[nxt] != s.char[deep] + 2) | (s.pos[nxt] - s.pos[deep] > 1)]
            for c in deep.tolist():
                at, nxt = int(s.pos[c]) + 1, c + 1
                if s.char[c] == _BRACE:
                    if s.char[nxt] != _COLON:
                        continue  # "{ }", or invalid before any value
                    at, nxt = int(s.pos[nxt]) + 1, nxt + 1
                found = _NOT_SPACE.search(self.raw, at, int(s.pos[nxt]) + 1)
                if found is not None and (found.start() < s.pos[nxt] or s.char[nxt] in _OPEN):
                    return found.start()
        return None

    async def close(self, i: int) -> int:
        """The index of the bracket that closes the one at ``i``: looked for in windows
        that grow, so that the work is that of the container."""
        depth, at, size = self.s.depth, i + 1, 1024
        while at < len(depth):
            hit = np.flatnonzero(depth[at : at + size] == depth[i])
            if len(hit):
                j = at + int(hit[0])
                if self.s.char[j] not in _CLOSE:
                    raise _Whole
                return j
            at, size = at + size, min(2 * size, _WINDOW)
            if size >= _WINDOW // 16:
                await asyncio.sleep(0)
        raise _Whole

    async def _bounds(
        self, i: int, j: int, colons: bool = False, depth: int | None = None
    ) -> np.ndarray:
        """``i``, the indices of the commas (and the ``colons``) of the container opened
        at ``i`` and closed at ``j`` (or those at ``depth`` between separators ``i`` and
        ``j``), and ``j``: found ``_WINDOW`` entries of the structure at a time."""
        s = self.s
        if depth is None:
            depth = int(s.depth[i]) + 1
        found = [np.array([i], np.int64)]
        for lo in range(i + 1, j, _WINDOW):
            hi = min(lo + _WINDOW, j)
            char = s.char[lo:hi]
            hit = char == _COMMA
            if colons:
                hit |= char == _COLON
            found.append(np.flatnonzero(hit & (s.depth[lo:hi] == depth)) + lo)
            if j - i > _WINDOW:
                await asyncio.sleep(0)
        found.append(np.array([j], np.int64))
        return np.concatenate(found)

    async def _at(self, indices: np.ndarray) -> np.ndarray:
        """The byte offsets of the structure's ``indices``, ``_WINDOW`` at a time."""
        pos, found = self.s.pos, []
        for lo in range(0, len(indices), _WINDOW):
            found.append(pos[indices[lo : lo + _WINDOW]].astype(np.int64))
            if len(indices) > _WINDOW:
                await asyncio.sleep(0)
        return np.concatenate(found) if found else np.zeros(0, np.int64)

    async def _spans(self, i: int, j: int) -> bool:
        """Whether the brackets at ``i`` and ``j`` open and close one container with only
        whitespace around it, up to the neighbouring separators."""
        s, raw = self.s, self.raw
        if not (i < j and s.char[i] in _OPEN and s.char[j] == s.char[i] + 2):
            return False  # "[" 91 "]" 93, "{" 123 "}" 125
        if raw[s.pos[i - 1] + 1 : s.pos[i]].strip() or raw[s.pos[j] + 1 : s.pos[j + 1]].strip():
            return False
        try:
            return await self.close(i) == j
        except _Whole:
            return False

    def _size(self, a: int, b: int) -> int:
        """Bytes between the structure's indices ``a`` and ``b``."""
        return int(self.s.pos[b] - self.s.pos[a])

    async def members(self, i: int, j: int) -> _Members | None:
        """The members of the object at ``i``..``j``, keys read a run at a time; None
        when they are not ``key: value`` (invalid JSON)."""
        pos, raw = self.s.pos, self.raw
        bounds = await self._bounds(i, j, colons=True)
        await asyncio.sleep(0)
        if len(bounds) == 2:
            if raw[pos[i] + 1 : pos[j]].strip():
                return None
            empty = np.zeros(0, np.int64)
            return _Members([], empty, empty, empty, None)
        chars = self.s.char[bounds[1:-1]]
        if len(bounds) % 2 == 0 or (chars[0::2] != _COLON).any():
            return None
        if (chars[1::2] != _COMMA).any():
            return None
        starts, colons, ends = bounds[0:-1:2], bounds[1::2], bounds[2::2]
        keys: list[str] = []
        seen: set[str] = set()
        repeat = None
        for lo in range(0, len(colons), _KEYS_PER_ROUND):
            hi = min(lo + _KEYS_PER_ROUND, len(colons))
            key_from, key_to = (pos[starts[lo:hi]] + 1).tolist(), pos[colons[lo:hi]].tolist()
            text = b"[" + b",".join(raw[a:b] for a, b in zip(key_from, key_to)) + b"]"
            try:
                read = pydantic_core.from_json(text)
            except ValueError:
                return None
            if len(read) != hi - lo or not all(isinstance(key, str) for key in read):
                return None
            keys += read
            if repeat is None:
                for n, key in enumerate(read):
                    if key in seen:
                        repeat = lo + n
                        break
                    seen.add(key)
            await asyncio.sleep(0)
        return _Members(keys, starts, colons, ends, repeat)

    async def value(self, kind: _Kind, i: int, j: int, lo: int, hi: int):
        """The container at ``i``..``j`` (bytes ``lo``..``hi`` with the whitespace around
        it) as ``kind``: a :class:`_Result` validated in parts, a :class:`_StandIn`, or
        None when it is to be validated in one call."""
        char = self.s.char[i]
        if kind.model is not None and char == _BRACE:
            return await self.object(kind.model, i, j, lo, hi)
        if kind.form == "list" and char == _BRACKET:
            return await self._list(kind, i, j)
        if kind.form == "dict" and char == _BRACE:
            return await self._dict(kind, i, j)
        if char not in kind.accepts:
            await self.syntax(i, j)
            return _StandIn(b"[]" if char == _BRACKET else b"{}")
        return None

    async def object(
        self, model: type[BaseModel], i: int, j: int, lo: int, hi: int
    ) -> _Result | None:
        """The object at ``i``..``j`` (bytes ``lo``..``hi`` with the whitespace around it)
        as ``model``: each field's last value (as Pydantic reads it), a large one
        validated in parts, an unknown key's value written ``null`` (its error is the
        same whatever it is: only the first ``MAX_ERRORS`` + 1 of them are shown), the
        rest checked as JSON only; None when it has nothing to cut."""
        kinds = _field_kinds(model)
        if kinds is None:
            return None
        members = await self.members(i, j)
        if members is None:
            await self.syntax(i, j)
            raise _Whole
        pos = self.s.pos
        keys = members.keys
        last: dict[str, int] = {}
        unknown: dict[str, int] = {}
        for at in range(0, len(keys), _KEYS_PER_ROUND):
            for n in range(at, min(at + _KEYS_PER_ROUND, len(keys))):
                key = keys[n]
                if key in kinds:
                    last[key] = n
                elif len(unknown) <= MAX_ERRORS and key not in unknown:
                    unknown[key] = n
            await asyncio.sleep(0)
        kept = sorted([*last.values(), *unknown.values()])
        context: dict[str, Any] = {}
        errors: dict[str, list[dict]] = {}
        repeats: dict[str, tuple] = {}
        pieces: list[tuple[int, int] | bytes] = [(lo, int(pos[i]) + 1)]
        json_error = None
        changed = len(kept) < len(keys)
        dropped_from = 0  # the first member not yet kept nor checked
        for n in kept:
            start, colon, end = (int(x[n]) for x in members[1:4])
            if json_error is None and dropped_from < n:
                json_error = await self._checked(members, dropped_from, n)
            dropped_from = n + 1
            key = keys[n]
            found: Any = None
            if (
                i == 0
                and self.s.char[colon + 1] == _BRACKET
                and await self._spans(colon + 1, end - 1)
            ):
                self.items[key] = (colon + 1, end - 1)  # for error replies to read
            if key not in kinds:
                found = _StandIn(b"null")
                if json_error is None:
                    json_error = await self._checked_value(colon, end)
            elif self._size(colon + 1, end - 1) > PART_BYTES and await self._spans(
                colon + 1, end - 1
            ):
                if json_error is None:
                    try:
                        found = await self.value(
                            kinds[key],
                            colon + 1,
                            end - 1,
                            int(pos[colon]) + 1,
                            int(pos[end]),
                        )
                    except _JsonError as error:
                        json_error = error
                        found = _StandIn(b"null")
                else:
                    found = _StandIn(b"null")
            if len(pieces) > 1:
                pieces.append(b",")
            if found is None:
                pieces.append((int(pos[start]) + 1, int(pos[end])))
                continue
            changed = True
            pieces.append((int(pos[start]) + 1, int(pos[colon]) + 1))
            if isinstance(found, _StandIn):
                pieces.append(found.text)
            else:
                pieces.append(b"null")
                if found.errors:
                    context[key] = _PARTS_FAILED
                    errors[key] = [dict(e, loc=(key, *e["loc"])) for e in found.errors]
                else:
                    context[key] = found.value
                    if found.repeat is not None:
                        repeats[key] = (key, *found.repeat)
        if json_error is None and dropped_from < len(keys):
            json_error = await self._checked(members, dropped_from, len(keys))
        if not changed:
            return None
        pieces.append((int(pos[j]), hi))
        text, where = _joined(self.raw, pieces)
        try:
            value = _taking(model).model_validate_json(text, context=context)
        except ValidationError as error:
            # The members validated in parts go with the 422: in pieces (a freed list of
            # 90,000 cells held the loop 0.3-0.6 s).
            await collector.take_apart(context)
            found_errors = _errors(error)
            if found_errors[0]["type"] == "json_invalid":
                mine = self._json_error(found_errors[0], text, where)
                raise min(mine, json_error or mine, key=lambda e: e.at) from None
            if json_error is not None:
                raise json_error from None
            return _Result(
                None,
                [x for e in found_errors for x in (errors[e["loc"][0]] if _failed(e) else [e])],
                None,
            )
        if json_error is not None:
            await collector.take_apart(value)
            raise json_error
        value = model.model_construct(_fields_set=value.model_fields_set, **value.__dict__)
        if members.repeat is not None:  # this object repeats a key: outer objects first
            return _Result(value, [], (keys[members.repeat],))
        rest = value.model_copy(update=dict.fromkeys(context, None))
        repeat = None
        if not no_repeated_keys(text, keys_read([rest], model)):
            found_repeat = first_repeat(text)
            repeat = found_repeat[1] if found_repeat else None
        order = {key: n for n, key in enumerate(keys)}
        firsts = [p for p in (repeat, *repeats.values()) if p is not None]
        repeat = min(firsts, key=lambda p: order.get(p[0], -1), default=None)
        return _Result(value, [], repeat)

    async def _checked(self, members: _Members, a: int, b: int) -> _JsonError | None:
        """The first JSON error of members ``a``..``b`` (their keys are strings)."""
        try:
            await self._syntax(int(members.starts[a]), int(members.ends[b - 1]), array=False)
        except _JsonError as error:
            return error
        return None

    async def _checked_value(self, colon: int, end: int) -> _JsonError | None:
        try:
            await self._syntax(colon, end, array=False)
        except _JsonError as error:
            return error
        return None

    async def _list(self, kind: _Kind, i: int, j: int) -> _Result:
        """The array at ``i``..``j`` as a list of ``kind.item``, in runs of at most
        ``PART_BYTES``; an item over ``PART_BYTES`` alone, cut if it can be."""
        pos = self.s.pos
        most = kind.most
        if most is not None:
            n = await self._count(i, j)
            if n > most:  # one call answers that alone
                await self.syntax(i, j)
                return _Result(None, [_too_long("List", most, n)], None)
        values: list = []
        errors: list[dict] = []
        first: tuple | None = None
        depth = int(self.s.depth[i]) + 1
        u, k = i, 0
        while u != j:
            v, count = await self._run_stop(u, j, depth, kind.part_bytes)
            lo, hi, last = int(pos[u]) + 1, int(pos[v]), v == j
            if len(errors) > MAX_ERRORS:
                # Past MAX_ERRORS a 422 lists no more, but one call would report a syntax
                # error anywhere instead: the rest is only parsed.
                await self._syntax(u, v, array=True)
                part = _Result([], [], None)
            elif count == 1 and hi - lo > PART_BYTES:
                found = None
                if await self._spans(u + 1, v - 1):
                    found = await self.value(kind.items, u + 1, v - 1, lo, hi)
                if found is None:
                    part = self._part(kind, [(lo, hi)], last)
                elif isinstance(found, _StandIn):
                    part = self._part(kind, [found.text], last)
                else:  # as a part of one item
                    part = _Result(
                        None if found.errors else [found.value],
                        [dict(e, loc=(0, *e["loc"])) for e in found.errors],
                        None if found.repeat is None else (0, *found.repeat),
                    )
            else:
                part = self._part(kind, [(lo, hi)], last)
            errors += [dict(e, loc=(e["loc"][0] + k, *e["loc"][1:])) for e in part.errors]
            if not errors:
                values += part.value
                if first is None and part.repeat is not None:
                    first = (part.repeat[0] + k, *part.repeat[1:])
            u, k = v, k + count
            if len(self.raw) >= HIDE_BYTES:
                collector.hide()
            await asyncio.sleep(0)
        if errors:
            await collector.take_apart(values)  # the parts before the errors, in pieces
            return _Result(None, errors, None)
        return kind.whole(values, first)

    def _run_end(self, starts: np.ndarray, ends: np.ndarray, k: int, stop: int, size: int) -> int:
        """The end of the run of members from ``k`` that fits in ``size`` bytes (one at
        least), before ``stop``."""
        m = int(np.searchsorted(ends, starts[k] + size, side="right"))
        return min(max(m, k + 1), stop)

    async def _run_stop(
        self, u: int, b: int, depth: int, size: int | None = None
    ) -> tuple[int, int]:
        """The comma (at ``depth``) or ``b`` that ends the run of items from the
        separator ``u`` that fits in ``size`` bytes (``PART_BYTES``; one item at least),
        and how many items the run has. Only the structure within the run is looked at."""
        s = self.s
        limit = int(s.pos[u]) + (size or PART_BYTES)
        if s.pos[b] <= limit:
            hi = b
        else:
            # (A bound of the array's own type: a Python int would copy the array.)
            hi = min(int(np.searchsorted(s.pos, s.pos.dtype.type(limit), side="right")), b)
        hits = np.flatnonzero((s.char[u + 1 : hi] == _COMMA) & (s.depth[u + 1 : hi] == depth))
        if hi == b:
            return b, len(hits) + 1
        if len(hits):
            return u + 1 + int(hits[-1]), len(hits)
        at, size = hi, 1024  # one item over PART_BYTES: up to the next comma
        while at < b:
            window = slice(at, min(at + size, b))
            hits = np.flatnonzero((s.char[window] == _COMMA) & (s.depth[window] == depth))
            if len(hits):
                return at + int(hits[0]), 1
            at, size = at + size, min(2 * size, _WINDOW)
            if size >= _WINDOW // 16:
                await asyncio.sleep(0)
        return b, 1

    async def _count(self, i: int, j: int) -> int:
        """How many items the array at ``i``..``j`` has, ``_WINDOW`` entries at a time."""
        s, depth, n = self.s, self.s.depth[i] + 1, 1
        for lo in range(i + 1, j, _WINDOW):
            hi = min(lo + _WINDOW, j)
            n += int(np.count_nonzero((s.char[lo:hi] == _COMMA) & (s.depth[lo:hi] == depth)))
            if j - i > _WINDOW:
                await asyncio.sleep(0)
        if n == 1 and not self.raw[s.pos[i] + 1 : s.pos[j]].strip():
            return 0  # "[ ]"
        return n

    def _part(self, kind: _Kind, items: list[tuple[int, int] | bytes], last: bool) -> _Result:
        """``items`` (spans of whole items and the commas between them, or a stand-in)
        as a list of ``kind.item``; ``last``: the list's closing bracket follows."""
        span = items[-1]
        pieces: list[tuple[int, int] | bytes] = [b"["]
        if isinstance(span, bytes):
            pieces += [span, b"]"]
        else:
            lo, hi = span
            # A last item of whitespace after a comma: a trailing comma, shown to Pydantic
            # after a stand-in item (alone, "[ ]" would be an empty list).
            if last and self.raw[lo - 1] == _COMMA and not self.raw[lo:hi].strip():
                pieces = [b"[0,"]
            pieces += [(lo, hi + 1)] if last else [(lo, hi), b"]"]
        text, where = _joined(self.raw, pieces)
        values, failed = self._validated(kind.parts, text, where)
        if failed is not None:
            return failed
        repeat = None
        if not no_repeated_keys(text, keys_read(values, kind.item)):
            found_repeat = first_repeat(text)
            repeat = found_repeat[1] if found_repeat else None
        return _Result(values, [], repeat)

    async def _dict(self, kind: _Kind, i: int, j: int) -> _Result:
        """The object at ``i``..``j`` as a mapping of ``kind.key`` to ``kind.item``, in
        runs of members of at most ``PART_BYTES``; a member over ``PART_BYTES`` alone,
        its value cut if it can be."""
        members = await self.members(i, j)
        if members is None:
            await self.syntax(i, j)
            raise _Whole
        n = len(members.keys)
        most = kind.most
        if most is not None and n > most:  # one call answers that alone
            await self.syntax(i, j)
            return _Result(None, [_too_long("Dictionary", most, None)], None)
        starts, ends = await self._at(members.starts) + 1, await self._at(members.ends)
        large = np.flatnonzero(ends - starts > PART_BYTES)
        size = kind.part_bytes
        value: dict = {}
        errors: list[dict] = []
        first: tuple | None = None
        k = 0
        while k < n:
            at = int(np.searchsorted(large, k))
            next_large = int(large[at]) if at < len(large) else n
            if len(errors) > MAX_ERRORS:
                m = k + 1 if next_large == k else self._run_end(starts, ends, k, next_large, size)
                await self._syntax(int(members.starts[k]), int(members.ends[m - 1]), array=False)
                part = _Result({}, [], None)
            elif next_large == k:
                m = k + 1
                part = await self._member(kind, members, k)
            else:
                m = self._run_end(starts, ends, k, next_large, size)
                span = (int(starts[k]), int(ends[m - 1]))
                part = self._dict_part(kind, [b"{", span, b"}"], kind.parts)
            errors += part.errors
            if not errors:
                value.update(part.value)
                if first is None and part.repeat is not None:
                    first = part.repeat
            k = m
            if len(self.raw) >= HIDE_BYTES:
                collector.hide()
            await asyncio.sleep(0)
        if errors:
            await collector.take_apart(value)  # the parts before the errors, in pieces
            return _Result(None, errors, None)
        if members.repeat is not None:  # this object repeats a key: outer objects first
            first = (members.keys[members.repeat],)
        return kind.whole(value, first)

    async def _member(self, kind: _Kind, members: _Members, k: int) -> _Result:
        """Member ``k`` (over ``PART_BYTES``) of a mapping: its key, then its value."""
        pos = self.s.pos
        start, colon, end = (int(x[k]) for x in members[1:4])
        key_span = (int(pos[start]) + 1, int(pos[colon]) + 1)
        found = None
        if await self._spans(colon + 1, end - 1):
            found = await self.value(
                kind.items, colon + 1, end - 1, int(pos[colon]) + 1, int(pos[end])
            )
        if found is None:
            return self._dict_part(kind, [b"{", (key_span[0], int(pos[end])), b"}"], kind.parts)
        if isinstance(found, _StandIn):
            return self._dict_part(kind, [b"{", key_span, found.text, b"}"], kind.parts)
        key = members.keys[k]
        checked = self._dict_part(kind, [b"{", key_span, b"null}"], kind.keys)
        errors = checked.errors + [dict(e, loc=(key, *e["loc"])) for e in found.errors]
        if errors:
            return _Result(None, errors, None)
        return _Result(
            {key: found.value}, [], None if found.repeat is None else (key, *found.repeat)
        )

    def _validated(self, adapter: TypeAdapter, text: bytes, where) -> tuple[Any, _Result | None]:
        """``(value, None)`` of ``adapter`` on a part's ``text``, or ``(None, its errors)``;
        a JSON error is raised as the body's (placed by ``where``)."""
        try:
            return adapter.validate_json(text), None
        except ValidationError as error:
            found = _errors(error)
            if found[0]["type"] == "json_invalid":
                raise self._json_error(found[0], text, where) from None
            return None, _Result(None, found, None)

    def _dict_part(
        self, kind: _Kind, pieces: list[tuple[int, int] | bytes], adapter: TypeAdapter
    ) -> _Result:
        text, where = _joined(self.raw, pieces)
        value, failed = self._validated(adapter, text, where)
        if failed is not None:
            return failed
        repeat = None
        if adapter is kind.parts and not no_repeated_keys(
            text, keys_read([value], kind.annotation)
        ):
            found_repeat = first_repeat(text)
            repeat = found_repeat[1] if found_repeat else None
        return _Result(value, [], repeat)

    async def syntax(self, i: int, j: int) -> None:
        """Raise the first JSON error of the container at ``i``..``j``; return when it has
        none."""
        await self._syntax(i, j, array=self.s.char[i] == _BRACKET)

    async def _syntax(self, a: int, b: int, array: bool) -> None:
        """Raise the first JSON error between the separators (or brackets) ``a`` and
        ``b`` of an array or object, a run of at most ``PART_BYTES`` at a time; a
        container in a value over ``PART_BYTES`` is checked on its own, in its place."""
        s = self.s
        deep = self.too_deep
        if (
            s.char[a] in _OPEN
            and s.depth[a] >= _TOO_DEEP - 1
            and deep
            and s.pos[a] < deep < s.pos[b]
        ):
            raise self._too_deep_error()
        depth = int(s.depth[a]) + (1 if s.char[a] in _OPEN else 0)
        u = a
        while u != b:
            v, count = await self._run_stop(u, b, depth)
            if count > 1 or self._size(u, v) <= PART_BYTES:
                self._parse(u, v, array, [(int(s.pos[u]) + 1, int(s.pos[v]) + 1)])
            else:  # one value over PART_BYTES: its container stands as "[]" or "{}"
                # Found by skipping from one to the next; a second one makes it invalid,
                # where it opens at the latest.
                opens: list[tuple[int, int]] = []
                idx = u + 1
                while idx < v and len(opens) < 2:
                    if s.char[idx] in _OPEN:
                        opens.append((idx, await self.close(idx)))
                        idx = opens[-1][1]
                    idx += 1
                pieces: list[tuple[int, int] | bytes] = [(int(s.pos[u]) + 1, int(s.pos[v]) + 1)]
                if opens:
                    (o, c), end = opens[0], int(s.pos[v]) + 1
                    if len(opens) > 1:
                        end = int(s.pos[opens[1][0]]) + 1
                    shut = b"]" if s.char[o] == _BRACKET else b"}"
                    pieces = [
                        (int(s.pos[u]) + 1, int(s.pos[o]) + 1),
                        shut,
                        (int(s.pos[c]) + 1, end),
                    ]
                outside = None
                try:
                    self._parse(u, v, array, pieces)
                except _JsonError as error:
                    outside = error
                if opens and (outside is None or outside.at > s.pos[opens[0][0]]):
                    o, c = opens[0]
                    await self._syntax(o, c, array=s.char[o] == _BRACKET)
                if outside is not None:
                    raise outside
            u = v
            await asyncio.sleep(0)

    def _parse(self, a: int, b: int, array: bool, pieces: list[tuple[int, int] | bytes]) -> None:
        """Parse ``pieces`` (what lies between the separators ``a`` and ``b``, ``b``
        included) in their place: after a stand-in member or item when ``a`` is a comma,
        before one when ``b`` is."""
        s = self.s
        if s.char[a] in _OPEN:
            head = b"[" if array else b"{"
        elif s.char[a] == _COLON:
            head = b'{"":'
        else:
            head = b"[0," if array else b'{"":0,'
        tail = (b"0]" if array else b'"":0}') if s.char[b] == _COMMA else b""
        text, where = _joined(self.raw, [head, *pieces, tail])
        try:
            pydantic_core.from_json(text)
        except ValueError as error:
            raise self._parse_error(error, text, where) from None
        if self.too_deep is not None and s.pos[a] < self.too_deep < s.pos[b]:
            raise self._too_deep_error()  # deeper in the body than in the text

    def _parse_error(self, error: ValueError, text: bytes, where) -> _JsonError:
        """One call's error for the parser's ``error`` in ``text``."""
        said = str(error)  # the words validation would say (its ctx "error")
        invalid = {"type": "json_invalid", "loc": (), "msg": f"Invalid JSON: {said}"}
        return self._json_error(dict(invalid, ctx={"error": said}), text, where)

    async def eof_error(self, end: int) -> _JsonError:
        """The parser's error at byte ``end`` (the end of the body, this run's text
        completed after it): what it says of the innermost container still open there,
        found by parsing that container's last member or item alone."""
        s = self.s
        closer = int(np.searchsorted(s.pos, s.pos.dtype.type(end)))
        if closer >= len(s.pos):
            raise _Whole
        opener = await self._back(closer, lambda char, depth: depth == s.depth[closer])
        inner = int(s.depth[closer]) + 1
        after = await self._back(
            closer, lambda char, depth: (depth == inner) & ((char == _COMMA) | (char == _COLON))
        )
        u = max(opener, after)
        array = s.char[opener] == _BRACKET
        heads = {_COLON: b'{""', _COMMA: b"[0" if array else b'{"":0'}
        pieces: list[tuple[int, int] | bytes] = [heads.get(int(s.char[u]), b"")]
        at = int(s.pos[u])
        if u + 1 < closer and s.char[u + 1] in _OPEN:  # a value that closed: "[]" or "{}"
            shut = await self.close(u + 1)
            pieces.append((at, int(s.pos[u + 1]) + 1))
            at = int(s.pos[shut])
        text, where = _joined(self.raw, [*pieces, (at, end)])
        try:
            pydantic_core.from_json(text)
        except ValueError as error:
            return self._parse_error(error, text, where)
        raise _Whole

    async def _back(self, i: int, test) -> int:
        """The last index before ``i`` whose character and depth pass ``test``, looked
        for backwards ``_WINDOW`` entries at a time."""
        s = self.s
        for hi in range(i, 0, -_WINDOW):
            lo = max(hi - _WINDOW, 0)
            hits = np.flatnonzero(test(s.char[lo:hi], s.depth[lo:hi]))
            if len(hits):
                return lo + int(hits[-1])
            await asyncio.sleep(0)
        return -1

    def stand_in(self, model: type[BaseModel], pieces: list[tuple[int, int]]) -> None:
        """Raise the errors of the text of ``pieces`` (the body with a stand-in value)
        as ``model``."""
        text, where = _joined(self.raw, list(pieces))
        try:
            model.model_validate_json(text)
        except ValidationError as error:
            found = _errors(error)
            if found[0]["type"] == "json_invalid":
                raise self._json_error(found[0], text, where) from None
            raise RequestValidationError(found) from None
        raise _Whole

    def _too_deep_error(self) -> _JsonError:
        """The parser's error at the first bracket nested too deep."""
        assert self.too_deep is not None
        at = self.too_deep
        line, column = self._place(at)
        said = f"recursion limit exceeded at line {line} column {column}"
        error = {"type": "json_invalid", "loc": (), "msg": f"Invalid JSON: {said}"}
        return _JsonError(at, dict(error, ctx={"error": said}))

    def _place(self, at: int) -> tuple[int, int]:
        """Line and column of byte ``at``, as the parser counts: the bytes read up to and
        including the one at fault, so a newline it stopped at is column 0 of the next
        line."""
        line = self.raw.count(b"\n", 0, at + 1) + 1
        return line, at - self.raw.rfind(b"\n", 0, at + 1)

    def _json_error(self, error: dict, text: bytes, where) -> _JsonError:
        """One call's error for the JSON error ``error`` of ``text`` (a part of the body)."""
        message = (error.get("ctx") or {}).get("error", "")
        at = _AT.search(message)
        if at is None:
            raise _Whole
        line, column = int(at[1]), int(at[2])
        offset = column - 1
        if line > 1:
            offset += int(np.flatnonzero(np.frombuffer(text, np.uint8) == ord("\n"))[line - 2]) + 1
        body_at = where(offset)
        if self.too_deep is not None and body_at >= self.too_deep:
            return self._too_deep_error()
        body_line, body_column = self._place(body_at)
        said = f"{message[: at.start()]} at line {body_line} column {body_column}"
        return _JsonError(
            body_at,
            dict(error, msg=error["msg"].replace(message, said), ctx={"error": said}),
        )

    async def items_body(self, errors: list[dict]) -> dict:
        """The body as error replies read it: of each top-level list (``cells``), the
        items that the first ``MAX_ERRORS`` ``errors`` are in, by index (a large one: its
        ``key`` only), found a window of the scan at a time. The standard library's
        parser, as for the whole body: it reads the NaN and Infinity that an error is
        about."""
        wanted: dict[str, set[int]] = {}
        for error in errors[:MAX_ERRORS]:
            loc = error["loc"]
            if len(loc) > 1 and loc[0] in self.items and isinstance(loc[1], int):
                wanted.setdefault(loc[0], set()).add(loc[1])
        body: dict[str, dict[int, Any]] = {}
        for name, indices in wanted.items():
            body[name] = {}
            for k, (a, b) in (await self._items_at(*self.items[name], indices)).items():
                with contextlib.suppress(ValueError, RecursionError, KeyError):
                    body[name][k] = await self._item(a, b)
        return body

    async def _items_at(self, i: int, j: int, indices: set[int]) -> dict[int, tuple[int, int]]:
        """The separators around each item of ``indices`` of the array at ``i``..``j``."""
        s, depth, found = self.s, self.s.depth[i] + 1, {}
        wanted, before, last = sorted(indices), 0, i  # commas before the window; the last
        for lo in range(i + 1, j + 1, _WINDOW):
            hi = min(lo + _WINDOW, j + 1)
            commas = np.flatnonzero((s.char[lo:hi] == _COMMA) & (s.depth[lo:hi] == depth)) + lo
            edges = np.concatenate(([last], commas, [j] if hi == j + 1 else []))
            while wanted and wanted[0] - before + 1 < len(edges):
                k = wanted.pop(0)
                found[k] = (int(edges[k - before]), int(edges[k - before + 1]))
            before, last = before + len(commas), int(commas[-1]) if len(commas) else last
            if not wanted:
                break
            await asyncio.sleep(0)
        return found

    async def _item(self, a: int, b: int) -> Any:
        """The item between the separators ``a`` and ``b``: parsed, or over
        ``PART_BYTES`` its ``key`` only (Pydantic reads a key's last value)."""
        pos, raw = self.s.pos, self.raw
        if pos[b] - pos[a] <= PART_BYTES:
            return json.loads(raw[pos[a] + 1 : pos[b]])
        i, j = a + 1, b - 1
        if self.s.char[i] != _BRACE:
            raise KeyError(a)
        separators = (await self._bounds(i, j, colons=True)).tolist()
        for n in range(len(separators) - 2, 0, -1):
            colon = separators[n]
            key = raw[pos[separators[n - 1]] + 1 : pos[colon]].strip()
            if self.s.char[colon] == _COLON and (
                key == b'"key"' or b"\\" in key and json.loads(key) == "key"
            ):
                return {"key": json.loads(raw[pos[colon] + 1 : pos[separators[n + 1]]])}
        raise KeyError(a)


def _too_long(field_type: str, most: int, actual: int | None) -> dict:
    """Pydantic's error for a list or mapping of more than ``most`` items."""
    ctx = {"field_type": field_type, "max_length": most, "actual_length": actual}
    message = PydanticKnownError("too_long", ctx).message()
    return {"type": "too_long", "loc": (), "msg": message, "ctx": ctx}


def _joined(raw: bytes, pieces: list[tuple[int, int] | bytes]):
    """The text of ``pieces`` (spans of ``raw`` and literal bytes) and a function from its
    offsets to those of ``raw`` (:class:`_Whole` for an offset in a literal)."""
    text = b"".join(
        piece if isinstance(piece, bytes) else raw[piece[0] : piece[1]] for piece in pieces
    )
    starts, spans, at = [], [], 0
    for piece in pieces:
        length = len(piece) if isinstance(piece, bytes) else piece[1] - piece[0]
        starts.append(at)
        spans.append(None if isinstance(piece, bytes) else piece[0])
        at += length

    def where(offset: int) -> int:
        k = int(np.searchsorted(starts, offset, side="right")) - 1
        if spans[k] is None or offset >= at:
            raise _Whole
        return spans[k] + offset - starts[k]  # type: ignore[operator]

    return text, where


def _errors(error: ValidationError) -> list[dict]:
    return cast(list[dict], error.errors(include_input=False, include_url=False))


def _failed(error: dict) -> bool:
    return error["type"] == _PARTS_FAILED


class _Kind:
    """What a value's type takes from JSON, and how a large one is cut: ``form`` "model"
    (an object as ``model``), "list" (an array of ``item``), "dict" (an object of
    ``key`` to ``item``) or "other" (validated in one call); ``accepts``: the brackets
    that open a container it can take (for another, the error does not depend on what
    the container holds). Pydantic's validators are made when first used."""

    def __init__(self, annotation: Any, config: ConfigDict):
        self.annotation, self.config = annotation, config
        inner = _bare(annotation)
        self.form, self.model, self.item, self.key = "other", None, None, None
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            self.form, self.model = "model", inner
        elif get_origin(inner) is list:
            self.form, (self.item,) = "list", get_args(inner)
        elif get_origin(inner) is dict:
            self.form, (self.key, self.item) = "dict", get_args(inner)
        self.accepts = _accepts(annotation)

    @cached_property
    def items(self) -> _Kind:
        return _Kind(self.item, self.config)

    @property
    def part_bytes(self) -> int:
        """Bytes of JSON validated in one call: a quarter of ``PART_BYTES`` for plain
        values (a part of them may be as many errors, each slow to list)."""
        return PART_BYTES if self.items.accepts else PART_BYTES // 4

    @cached_property
    def parts(self) -> TypeAdapter:
        """A run of items: a list of them, or a mapping of some members."""
        if self.form == "list":
            return TypeAdapter(list[self.item], config=self.config)  # type: ignore[name-defined]
        return TypeAdapter(dict[self.key, self.item], config=self.config)  # type: ignore[name-defined]

    @cached_property
    def keys(self) -> TypeAdapter:
        """A mapping's keys (with any values)."""
        return TypeAdapter(dict[self.key, Any], config=self.config)  # type: ignore[name-defined]

    @cached_property
    def loose(self) -> TypeAdapter:
        """The container's own checks (its length, validators of the whole), the items
        taken as they are."""
        return TypeAdapter(_loosened(self.annotation), config=self.config)

    @cached_property
    def most(self) -> int | None:
        """The most items the container may have."""
        schema: Any = self.loose.core_schema
        while schema["type"] not in ("list", "dict") and "schema" in schema:
            schema = schema["schema"]  # nullable, function-after, ...
        return schema.get("max_length")

    @cached_property
    def lengths(self) -> tuple[int, int | None] | None:
        """The least and most items, when they are the container's only checks."""
        schema: Any = self.loose.core_schema
        if schema["type"] == "nullable":
            schema = schema["schema"]
        if schema["type"] not in ("list", "dict") or set(schema) - _PLAIN:
            return None
        return schema.get("min_length", 0), schema.get("max_length")

    def whole(self, value: Any, repeat: tuple | None) -> _Result:
        """``value`` (its items validated) through the container's own checks (not
        copied again when they are on its length only and it has a right one)."""
        lengths = self.lengths
        if lengths is not None and lengths[0] <= len(value) <= (lengths[1] or len(value)):
            return _Result(value, [], repeat)
        try:
            value = self.loose.validate_python(value)
        except ValidationError as error:
            return _Result(None, _errors(error), None)
        return _Result(value, [], repeat)


def _bare(annotation: Any) -> Any:
    """``annotation`` without ``Annotated`` and an ``| None``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _bare(args[0])
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _bare(options[0])
    return annotation


def _accepts(annotation: Any) -> frozenset[int]:
    """The brackets opening the JSON containers that ``annotation`` can take (strict)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _accepts(args[0])
    if origin in (Union, types.UnionType):
        return frozenset().union(*map(_accepts, args))
    if annotation in (str, int, float, bool, type(None)) or origin is Literal:
        return frozenset()
    if origin is dict or isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return frozenset({_BRACE})
    if origin in (list, tuple):
        return frozenset({_BRACKET})
    return frozenset({_BRACE, _BRACKET})


def _loosened(annotation: Any) -> Any:
    """``annotation`` with its outer list's or mapping's items of any type."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return Annotated[(_loosened(args[0]), *annotation.__metadata__)]
    if origin in (Union, types.UnionType):
        return Union[tuple(map(_loosened, args))]  # noqa: UP007  # built at run time
    if origin is list:
        return list[Any]
    if origin is dict:
        return dict[Any, Any]
    return annotation


@cache
def _field_kinds(model: type[BaseModel]) -> dict[str, _Kind] | None:
    """Each field's :class:`_Kind`; None when ``model`` cannot be cut (aliases, extra
    fields allowed)."""
    fields = model.model_fields
    if model.model_config.get("extra") == "allow" or any(
        f.alias is not None or f.validation_alias is not None for f in fields.values()
    ):
        return None
    config = ConfigDict(
        strict=model.model_config.get("strict", False),
        allow_inf_nan=model.model_config.get("allow_inf_nan", True),
    )
    return {name: _Kind(field.rebuild_annotation(), config) for name, field in fields.items()}


def _take(value: Any, handler, info) -> Any:
    """A field validated in parts: its value (from the context) in place of the ``null``
    the text has there; the field's own validation for any other."""
    taken = (info.context or {}).get(info.field_name, _ABSENT)
    if taken is _ABSENT:
        return handler(value)
    if taken is _PARTS_FAILED:
        raise PydanticCustomError(_PARTS_FAILED, "validated in parts, with errors")
    return taken


@cache
def _taking(model: type[M]) -> type[M]:
    """A subclass of ``model`` whose fields take their value from the context, where
    there is one."""
    fields: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.default_factory is not None:
            default: Any = Field(default_factory=field.default_factory)
        else:
            default = ... if field.is_required() else field.default
        fields[name] = (Annotated[field.rebuild_annotation(), WrapValidator(_take)], default)
    return create_model(model.__name__, __base__=model, **fields)
