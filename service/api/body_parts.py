"""Large JSON bodies validated a part at a time, with the event loop free in between.

Pydantic validates a body in one call that holds the interpreter lock (seconds for a
15 MiB ``/v1/sensitivity`` body of 900,000 short contributions), and a worker thread would
hold it just the same: /healthz, /metrics and every small request would wait. A body over
``LARGE_BODY_BYTES`` is instead

1. scanned (:func:`_scan`, numpy, ``SCAN_BYTES`` at a time): where each bracket, comma
   and colon outside strings is, and how deep;
2. cut (:class:`_Run`): an object's field that is a list of models (``cells``, a cell's
   ``contributions``) with more than ``PART_BYTES`` of JSON is cut between items into parts
   of at most ``PART_BYTES``, each validated from its bytes as a list of the items; an item
   over ``PART_BYTES`` is cut the same way, as an object;
3. assembled: the rest of the object, the list written ``[]``, is validated by a subclass
   of its model that takes the validated list from the validation context
   (:func:`_taking`), so that the field's constraints and validators and the model's own
   run on the whole list, in the usual order of errors.

The answers are those of one call: every part is validated from its bytes in JSON mode,
an error carries its place in the body (the item's index; a JSON error's line and column),
and a key given twice is found by the count per part (:mod:`.repeated_keys`). Pydantic's
parse tree is one part's, not the body's. From ``HIDE_BYTES`` on, the parts' models are
hidden from the cyclic garbage collector as they are made (:mod:`service.collector`).

Not cut, and validated in one call as before: a body that is not a JSON object or whose
strings or brackets do not close (invalid JSON: one parse, nothing validated), a body
without a list of models over ``PART_BYTES``, and values other than lists of models (a
dimension's codes, a hierarchy).
"""

from __future__ import annotations

import asyncio
import json
import re
import types
from functools import cache
from typing import Annotated, Any, NamedTuple, TypeVar, Union, cast, get_args, get_origin

import numpy as np
import pydantic_core
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, WrapValidator, create_model
from pydantic_core import PydanticCustomError

from .. import collector
from .errors import MAX_ERRORS
from .repeated_keys import first_repeat, keys_read, no_repeated_keys, refuse

M = TypeVar("M", bound=BaseModel)

#: Most bytes of JSON validated in one call (10-20 ms of short contributions).
PART_BYTES = 64 * 1024
#: Bytes scanned by one round of numpy calls (a few ms).
SCAN_BYTES = 1024 * 1024
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
_AT = re.compile(r" at line (\d+) column (\d+)$")
#: The error of a field whose parts had errors (replaced by them).
_PARTS_FAILED = "sdc_parts_failed"


async def validated(raw: bytes, model: type[M]) -> M | None:
    """``raw`` validated as ``model`` in parts, with the answers of one call (422s
    included); None when it has nothing to cut or is not JSON, for one call to answer."""
    structure = await _scan(raw)
    if structure is None or structure.char[0] != _BRACE or raw[: structure.pos[0]].strip():
        return None
    run = _Run(raw, structure)
    try:
        result = await run.object(model, 0, run.close(0), 0, len(raw))
    except _Whole:
        return None
    except _JsonError as error:
        raise RequestValidationError([error.error]) from None
    if result is None:
        return None
    if result.errors:
        raise RequestValidationError(result.errors, body=run.items_body())
    if result.repeat is not None:
        refuse(result.repeat, run.items_body())
    return result.value


class _Structure(NamedTuple):
    """The brackets, commas and colons of a body outside its strings."""

    pos: np.ndarray  # byte offset
    depth: np.ndarray  # containers around it; a bracket's: around the container it opens
    char: np.ndarray


async def _scan(raw: bytes) -> _Structure | None:
    """The structure of ``raw``; None when a string or a bracket does not close (then it
    is not JSON). A quote after an odd run of backslashes is escaped; a run and the byte
    it escapes stay in one piece."""
    data = np.frombuffer(raw, np.uint8)
    pos_type = np.int32 if len(raw) < 2**31 else np.int64
    pieces = []
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
                return None
            depth = int(after[-1])
        pieces.append(
            ((at + lo).astype(pos_type), (after - (kind == 1)).astype(np.int32), piece[at])
        )
        lo = hi
        await asyncio.sleep(0)
    if inside or depth or not pieces:
        return None
    pos, depths, chars = (np.concatenate(column) for column in zip(*pieces, strict=True))
    return _Structure(pos, depths, chars) if len(pos) else None


class _Result(NamedTuple):
    value: Any  # None when there are errors
    errors: list[dict]  # places relative to the value
    repeat: tuple | None  # the first repeated key's place, when there are no errors


class _Member(NamedTuple):
    key: str
    start: int  # index (in the structure) of the "{" or "," before the key
    colon: int
    end: int  # index of the "," or "}" after the value


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
        self.items: dict[str, np.ndarray] = {}  # the top object's cut lists: their bounds

    def close(self, i: int) -> int:
        """The index of the bracket that closes the one at ``i``."""
        depth = self.s.depth
        j = i + 1 + int(np.argmax(depth[i + 1 :] == depth[i]))
        if j >= len(depth) or depth[j] != depth[i] or self.s.char[j] not in _CLOSE:
            raise _Whole
        return j

    def _spans(self, i: int, j: int) -> bool:
        """Whether the brackets at ``i`` and ``j`` open and close one container with only
        whitespace around it, up to the neighbouring separators."""
        s, raw = self.s, self.raw
        return (
            i < j
            and s.char[i] in _OPEN
            and s.char[j] == s.char[i] + 2  # "[" 91 "]" 93, "{" 123 "}" 125
            and bool((s.depth[i + 1 : j] > s.depth[i]).all())
            and not raw[s.pos[i - 1] + 1 : s.pos[i]].strip()
            and not raw[s.pos[j] + 1 : s.pos[j + 1]].strip()
        )

    def _separators(self, i: int, j: int, colons: bool) -> np.ndarray:
        """The indices of the commas (and the ``colons``) of the container opened at
        ``i`` and closed at ``j``."""
        depth, char = self.s.depth[i + 1 : j], self.s.char[i + 1 : j]
        found = char == _COMMA
        if colons:
            found |= char == _COLON
        return np.flatnonzero(found & (depth == self.s.depth[i] + 1)) + i + 1

    def members(self, i: int, j: int) -> list[_Member] | None:
        """The members of the object at ``i``..``j``; None when they are not key: value."""
        separators = self._separators(i, j, colons=True)
        chars = self.s.char[separators]
        if len(separators) % 2 == 0 or (chars[0::2] != _COLON).any():
            return None
        if (chars[1::2] != _COMMA).any():
            return None
        colons, commas = separators[0::2].tolist(), separators[1::2].tolist()
        members = []
        for start, colon, end in zip([i, *commas], colons, [*commas, j], strict=True):
            try:
                key = json.loads(self.raw[self.s.pos[start] + 1 : self.s.pos[colon]])
            except (ValueError, RecursionError):
                return None
            if not isinstance(key, str):
                return None
            members.append(_Member(key, start, colon, end))
        return members

    async def object(
        self, model: type[BaseModel], i: int, j: int, lo: int, hi: int
    ) -> _Result | None:
        """The object at ``i``..``j`` (bytes ``lo``..``hi`` with the whitespace around it)
        as ``model``, its long lists of models validated in parts; None when it has none."""
        pos, listed = self.s.pos, _listed(model)
        members = self.members(i, j) if listed else None
        cut = {
            member.key: member
            for member in members or ()
            if member.key in listed
            and self.s.char[member.colon + 1] == _BRACKET
            and self._spans(member.colon + 1, member.end - 1)
            and pos[member.end - 1] - pos[member.colon + 1] > PART_BYTES
        }
        if not cut:
            return None
        context: dict[str, Any] = {}
        errors: dict[str, list[dict]] = {}
        repeats: dict[str, tuple] = {}
        json_error = None
        for name, member in sorted(cut.items(), key=lambda item: item[1].start):
            context[name] = _PARTS_FAILED
            if json_error is not None:
                continue
            try:
                result = await self._list(
                    listed[name], member.colon + 1, member.end - 1, name if i == 0 else None
                )
            except _JsonError as error:
                json_error = error
                continue
            if result.errors:
                errors[name] = [dict(e, loc=(name, *e["loc"])) for e in result.errors]
            else:
                context[name] = result.value
                if result.repeat is not None:
                    repeats[name] = (name, *result.repeat)
        # The rest, each cut list (and any earlier value of its key, which Pydantic would
        # ignore) written "[]".
        pieces: list[tuple[int, int] | bytes] = []
        at = lo
        for member in members or ():
            if member is cut.get(member.key) or (
                member.key in cut
                and self.s.char[member.colon + 1] == _BRACKET
                and self._spans(member.colon + 1, member.end - 1)
            ):
                pieces += [(at, int(pos[member.colon + 1])), b"[]"]
                at = int(pos[member.end - 1]) + 1
        pieces.append((at, hi))
        text, where = _joined(self.raw, pieces)
        taking = _taking(model)
        try:
            value = taking.model_validate_json(text, context=context)
        except ValidationError as error:
            found = _errors(error)
            if found[0]["type"] == "json_invalid":
                mine = self._json_error(found[0], text, where)
                first = mine if json_error is None or mine.at < json_error.at else json_error
                raise first from None
            if json_error is not None:
                raise json_error from None
            return _Result(
                None,
                [x for e in found for x in (errors[e["loc"][0]] if _failed(e) else [e])],
                None,
            )
        value = model.model_construct(_fields_set=value.model_fields_set, **value.__dict__)
        rest = value.model_copy(update=dict.fromkeys(cut, []))
        repeat = None
        if not no_repeated_keys(text, keys_read([rest], model)):
            found_repeat = first_repeat(text)
            repeat = found_repeat[1] if found_repeat else None
        if repeat is None or len(repeat) > 1:  # else this object repeats a key: first
            order = {m.key: n for n, m in reversed(list(enumerate(members or ())))}
            firsts = [p for p in (repeat, *repeats.values()) if p is not None]
            repeat = min(firsts, key=lambda p: order.get(p[0], -1), default=None)
        return _Result(value, [], repeat)

    async def _list(self, item: type[BaseModel], i: int, j: int, name: str | None) -> _Result:
        """The array at ``i``..``j`` as a list of ``item``, in runs of at most
        ``PART_BYTES``; an item over ``PART_BYTES`` alone, cut as an object if it can be.
        A top-level list (``name``) is kept for error replies to find an item's key."""
        pos = self.s.pos
        bounds = np.concatenate(([i], self._separators(i, j, colons=False), [j]))
        if name is not None:
            self.items[name] = bounds
        starts, ends = pos[bounds[:-1]] + 1, pos[bounds[1:]]
        large = np.flatnonzero(ends - starts > PART_BYTES)
        values: list = []
        errors: list[dict] = []
        first: tuple | None = None
        k, n = 0, len(starts)
        capped = False
        while k < n:
            at = int(np.searchsorted(large, k))
            next_large = int(large[at]) if at < len(large) else n
            if capped:
                # Past MAX_ERRORS a 422 lists no more, but one call would report a syntax
                # error anywhere instead: the rest is only parsed.
                m = k + 1 if next_large == k else self._run_end(starts, ends, k, next_large)
                part = self._part(item, int(starts[k]), int(ends[m - 1]), m == n, True)
            elif next_large == k:
                cut = None
                if self._spans(int(bounds[k]) + 1, int(bounds[k + 1]) - 1):
                    cut = await self.object(
                        item,
                        int(bounds[k]) + 1,
                        int(bounds[k + 1]) - 1,
                        int(starts[k]),
                        int(ends[k]),
                    )
                m = k + 1
                if cut is None:
                    part = self._part(item, int(starts[k]), int(ends[k]), k == n - 1)
                else:  # as a part of one item
                    part = _Result(
                        None if cut.errors else [cut.value],
                        [dict(e, loc=(0, *e["loc"])) for e in cut.errors],
                        None if cut.repeat is None else (0, *cut.repeat),
                    )
            else:
                m = self._run_end(starts, ends, k, next_large)
                part = self._part(item, int(starts[k]), int(ends[m - 1]), m == n)
            errors += [dict(e, loc=(e["loc"][0] + k, *e["loc"][1:])) for e in part.errors]
            capped = len(errors) > MAX_ERRORS
            if not errors:
                values += part.value
                if first is None and part.repeat is not None:
                    first = (part.repeat[0] + k, *part.repeat[1:])
            k = m
            if len(self.raw) >= HIDE_BYTES:
                collector.hide()
            await asyncio.sleep(0)
        return _Result(None if errors else values, errors, first)

    def _run_end(self, starts: np.ndarray, ends: np.ndarray, k: int, stop: int) -> int:
        """The end of the run of items from ``k`` that fits in ``PART_BYTES`` (one item at
        least), before ``stop``."""
        m = int(np.searchsorted(ends, starts[k] + PART_BYTES, side="right"))
        return min(max(m, k + 1), stop)

    def _part(
        self, item: type[BaseModel], lo: int, hi: int, last: bool, syntax_only: bool = False
    ) -> _Result:
        """Bytes ``lo``..``hi`` (whole items and the commas between them) as a list of
        ``item``; ``last``: the list's closing bracket follows. ``syntax_only``: parsed
        by the same parser, not validated (nothing returned; a JSON error raised)."""
        # A last item of whitespace after a comma: a trailing comma, shown to Pydantic after
        # a stand-in item (alone, "[ ]" would be an empty list).
        trailing = last and self.raw[lo - 1] == _COMMA and not self.raw[lo:hi].strip()
        pieces: list[tuple[int, int] | bytes] = [
            b"[0," if trailing else b"[",
            (lo, hi + 1) if last else (lo, hi),
        ]
        if not last:
            pieces.append(b"]")
        text, where = _joined(self.raw, pieces)
        if syntax_only:
            try:
                pydantic_core.from_json(text)
            except ValueError as error:
                said = str(error)  # the words validation would say (its ctx "error")
                invalid = {"type": "json_invalid", "loc": (), "msg": f"Invalid JSON: {said}"}
                raise self._json_error(dict(invalid, ctx={"error": said}), text, where) from None
            return _Result([], [], None)
        try:
            values = _list_of(item).validate_json(text)
        except ValidationError as error:
            found = _errors(error)
            if found[0]["type"] == "json_invalid":
                raise self._json_error(found[0], text, where) from None
            return _Result(None, found, None)
        repeat = None
        if not no_repeated_keys(text, keys_read(values, item)):
            found_repeat = first_repeat(text)
            repeat = found_repeat[1] if found_repeat else None
        return _Result(values, [], repeat)

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
        # As the parser counts: the bytes read up to and including the one at fault, so
        # a newline it stopped at is column 0 of the next line.
        body_line = self.raw.count(b"\n", 0, body_at + 1) + 1
        body_column = body_at - self.raw.rfind(b"\n", 0, body_at + 1)
        said = f"{message[: at.start()]} at line {body_line} column {body_column}"
        return _JsonError(
            body_at,
            dict(error, msg=error["msg"].replace(message, said), ctx={"error": said}),
        )

    def items_body(self) -> dict:
        """The body as error replies read it (``cells``: a cell's ``key``), parsed only
        where they look."""
        return {name: _Items(self, bounds) for name, bounds in self.items.items()}


class _Items:
    """A top-level list of the body: item ``k`` parsed when asked for (its ``key`` only,
    for an item over ``PART_BYTES``). The standard library's parser, as for the whole
    body: it reads the NaN and Infinity that an error is about."""

    def __init__(self, run: _Run, bounds: np.ndarray):
        self.run, self.bounds = run, bounds

    def __getitem__(self, k: int) -> Any:
        run, bounds, pos = self.run, self.bounds, self.run.s.pos
        if not 0 <= k < len(bounds) - 1:
            raise IndexError(k)
        lo, hi = int(pos[bounds[k]]) + 1, int(pos[bounds[k + 1]])
        try:
            if hi - lo <= PART_BYTES:
                return json.loads(run.raw[lo:hi])
            i, j = int(bounds[k]) + 1, int(bounds[k + 1]) - 1
            members = run.members(i, j) if run.s.char[i] == _BRACE else None
            key = next((m for m in members or () if m.key == "key"), None)
            if key is None:
                raise KeyError(k)
            return {"key": json.loads(run.raw[pos[key.colon] + 1 : pos[key.end]])}
        except (ValueError, RecursionError):
            raise KeyError(k) from None


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


@cache
def _listed(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of ``model`` that are lists of models (or None): name and item model."""
    found = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        options = [annotation]
        if get_origin(annotation) in (Union, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) != 1 or get_origin(options[0]) is not list:
            continue
        (item,) = get_args(options[0])
        if isinstance(item, type) and issubclass(item, BaseModel) and field.alias is None:
            found[name] = item
    return found


@cache
def _list_of(item: type[BaseModel]) -> TypeAdapter:
    return TypeAdapter(list[item])  # type: ignore[valid-type]  # a class known at run time


def _take(value: Any, handler, info) -> Any:
    """A cut list's field: the list validated in parts (from the context) in place of the
    ``[]`` the text has there, through the field's own validation (its items are
    instances: taken as they are)."""
    taken = (info.context or {}).get(info.field_name, value)
    if taken is _PARTS_FAILED:
        raise PydanticCustomError(_PARTS_FAILED, "validated in parts, with errors")
    return handler(taken)


@cache
def _taking(model: type[M]) -> type[M]:
    """A subclass of ``model`` whose lists of models take their value from the context."""
    fields: dict[str, Any] = {}
    for name in _listed(model):
        field = model.model_fields[name]
        if field.default_factory is not None:
            default: Any = Field(default_factory=field.default_factory)
        else:
            default = ... if field.is_required() else field.default
        fields[name] = (Annotated[field.rebuild_annotation(), WrapValidator(_take)], default)
    return create_model(model.__name__, __base__=model, **fields)
