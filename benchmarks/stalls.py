"""How long a hostile body holds the event loop: ``/healthz`` polled every 10 ms while
each of the worst bodies within the body limit is posted. Run with ``scripts/bench
stalls`` (not part of CI; a few minutes); ``--root PATH`` serves another checkout (an
earlier version, to compare), ``--only NAME ...`` some bodies.

Every body is one that Pydantic would validate in one call holding the interpreter lock
(``service/api/body_parts.py`` validates them in parts): lists of models, of codes and of
numbers, a hierarchy's mapping, unknown fields and many unknown keys, values of the wrong
type, deep nesting, long strings, huge numbers, bodies of many errors, a key given twice
in a large mapping, codes with colons, a JSON error at the end. For each it prints the
status and the time to answer, the longest ``/healthz`` wait meanwhile (from its
sending to its reply; a poll is sent 10 ms after the previous reply), and the server's
peak resident memory while it was answered (Linux ``/proc``: reset before each body). One server on
loopback with the default settings (32 MiB bodies) serves them all, one at a time; each
request and poll has a timeout, so the run stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.servers import ROOT, server

RULES = b'"rules":{"rules":[{"type":"p_percent","p":10}]}'
ONE_CELL = b'"cells":[{"key":["a"],"contributions":[{"value":1}]}]'
GET_HEALTH = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
TIMEOUT = 120.0


def _list(items: list) -> bytes:
    return orjson.dumps(items)


def _join(*pieces: bytes) -> bytes:
    return b"{" + b",".join(pieces) + b"}"


def _audit(dimension: bytes, *more: bytes) -> bytes:
    """An audit of one cell whose first dimension is ``dimension`` (JSON members)."""
    structure = b'"structure":{"dimensions":[{"name":"x",' + dimension + b'},{"name":"y",'
    structure += b'"leaves":["A"]}]}'
    cell = b'"cells":[{"key":["l0","A"],"value":1}]'
    return _join(structure, cell, RULES, *more)


def _sensitivity(*more: bytes) -> bytes:
    return _join(RULES, ONE_CELL, *more)


def small() -> tuple[str, bytes]:
    """A small valid request: how long /healthz waits anyway (the machine's noise)."""
    return "/v1/sensitivity", _sensitivity()


def contributions() -> tuple[str, bytes]:
    cells = [
        {"key": [f"a{i}"], "contributions": [{"value": v + 0.5} for v in range(10)]}
        for i in range(90_000)
    ]
    return "/v1/sensitivity", _join(RULES, b'"cells":' + orjson.dumps(cells))


def children() -> tuple[str, bytes]:
    n = 800_000
    mapping = {"Total": [f"p{i}" for i in range(n)]} | {f"p{i}": [f"l{i}"] for i in range(n)}
    return "/v1/audit", _audit(b'"children":' + orjson.dumps(mapping))


def children_repeat() -> tuple[str, bytes]:
    """A valid hierarchy whose last parent is given twice."""
    n = 600_000
    mapping = {"Total": [f"p{i}" for i in range(n)]} | {f"p{i}": [f"l{i}"] for i in range(n)}
    raw = orjson.dumps(mapping)
    return "/v1/audit", _audit(b'"children":' + raw[:-1] + b',"p0":["l0"]}')


def children_colons() -> tuple[str, bytes]:
    """Codes with colons: the count of keys falls back to an exact count."""
    n = 700_000
    mapping = {"Total": [f"p:{i}" for i in range(n)]} | {f"p:{i}": [f"l{i}"] for i in range(n)}
    mapping["p:0"] = ["l0"]
    return "/v1/audit", _audit(b'"children":' + orjson.dumps(mapping))


def children_errors() -> tuple[str, bytes]:
    """1,000,000 numbers where codes belong: as many errors."""
    return "/v1/audit", _audit(b'"children":{"Total":' + _list([1] * 1_000_000) + b"}")


def leaves_too_many() -> tuple[str, bytes]:
    return "/v1/audit", _audit(b'"leaves":' + _list([f"l{i}" for i in range(2_500_000)]))


def leaves_errors() -> tuple[str, bytes]:
    return "/v1/audit", _audit(b'"leaves":' + _list([1] * 100_000))


def tables_long() -> tuple[str, bytes]:
    """4,000,000 linked tables (at most 50)."""
    tables = b'"tables":[' + b",".join([b'["x"]'] * 4_000_000) + b"]"
    raw = _audit(b'"leaves":["l0"]')
    return "/v1/audit", raw.replace(b'"leaves":["A"]}]', b'"leaves":["A"]}],' + tables, 1)


def frequency(dimension: bytes) -> bytes:
    return _join(
        b'"dimensions":[{"name":"x",' + dimension + b'},{"name":"y","codes":["A"]}]',
        b'"cells":[{"key":["c0","A"],"count":1}]',
        b'"rules":{"threshold":{"t":3}}',
    )


def codes_too_many() -> tuple[str, bytes]:
    return "/v1/frequency/sensitivity", frequency(
        b'"codes":' + _list([f"c{i}" for i in range(2_500_000)])
    )


def hierarchy() -> tuple[str, bytes]:
    n = 1_000_000
    level = orjson.dumps({f"c{i}": f"a{i // 10}" for i in range(n)})
    codes = _list([f"c{i}" for i in range(100_000)])
    return "/v1/frequency/sensitivity", frequency(
        b'"codes":' + codes + b',"hierarchy":[' + level + b"]"
    )


def unknown_objects() -> tuple[str, bytes]:
    return "/v1/sensitivity", _sensitivity(b'"extra":[' + b",".join([b"{}"] * 10_000_000) + b"]")


def unknown_zeros() -> tuple[str, bytes]:
    return "/v1/sensitivity", _sensitivity(b'"extra":' + _list([0] * 15_000_000))


def unknown_in_cell() -> tuple[str, bytes]:
    cell = b'{"key":["a"],"contributions":[{"value":1}],"zz":['
    cell += b",".join([b"{}"] * 10_000_000) + b"]}"
    return "/v1/sensitivity", _join(RULES, b'"cells":[' + cell + b"]")


def unknown_keys() -> tuple[str, bytes]:
    keys = b",".join(b'"k%d":0' % i for i in range(2_300_000))
    return "/v1/sensitivity", _sensitivity(keys)


def wrong_type() -> tuple[str, bytes]:
    return "/v1/sensitivity", _join(ONE_CELL, b'"rules":' + _list([0] * 15_000_000))


def wrong_type_object() -> tuple[str, bytes]:
    mapping = orjson.dumps({f"k{i}": 0 for i in range(2_300_000)})
    return "/v1/sensitivity", _sensitivity(b'"profile":' + mapping)


def deep() -> tuple[str, bytes]:
    n = 15_000_000
    return "/v1/sensitivity", _sensitivity(b'"extra":' + b"[" * n + b"]" * n)


def long_string() -> tuple[str, bytes]:
    return "/v1/sensitivity", _join(ONE_CELL, b'"profile":"' + b"a" * 30_000_000 + b'"')


def escapes() -> tuple[str, bytes]:
    return "/v1/audit", _audit(b'"leaves":["' + b"\\u00e9" * 5_000_000 + b'"]')


def huge_number() -> tuple[str, bytes]:
    return "/v1/suppress", _audit(b'"leaves":["l0"]', b'"time_limit":1e' + b"9" * 30_000_000)


def microdata_errors() -> tuple[str, bytes]:
    cell = {"key": ["a"], "microdata": {"value": ["x"] * 100_000}}
    body = {
        "policy": {
            "rules": {"rules": [{"type": "p_percent", "p": 10}]},
            "filter": {"statistical": {"approach": "refuse"}},
        },
        "query": {"variables": ["a"]},
        "cells": [cell],
    }
    return "/v1/filter", orjson.dumps(body)


def area_population() -> tuple[str, bytes]:
    mapping = {f"v{i}": 1.0 for i in range(1_500_000)}
    body = {
        "policy": {
            "rules": {"rules": [{"type": "p_percent", "p": 10}]},
            "filter": {"statistical": {"approach": "refuse"}},
        },
        "query": {"variables": ["a"], "area_population": mapping},
        "cells": [{"key": ["a"], "count": 5}],
    }
    return "/v1/filter", orjson.dumps(body)


def respondents() -> tuple[str, bytes]:
    cell = {"key": ["l0", "A"], "contributions": [{"value": 1}], "respondents": ["r"] * 5_000_000}
    body = {
        "structure": {
            "dimensions": [{"name": "x", "leaves": ["l0"]}, {"name": "y", "leaves": ["A"]}]
        },
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "noise": {"d": 0.1},
        "cells": [cell],
    }
    return "/v1/noise", orjson.dumps(body)


def trailing_comma() -> tuple[str, bytes]:
    """Invalid JSON at the very end of a large body."""
    return "/v1/sensitivity", _sensitivity(b'"extra":' + _list([0] * 15_000_000))[:-1] + b",}"


def unclosed() -> tuple[str, bytes]:
    """10,000,000 unknown objects and the body's closing brace missing."""
    return "/v1/sensitivity", unknown_objects()[1][:-1]


def _table(dimensions: list, cells: list, *more: bytes, tables: list | None = None) -> bytes:
    """A table request (/v1/audit, /v1/suppress, /v1/round, /v1/adjust) of these parts."""
    structure: dict = {"dimensions": dimensions}
    if tables is not None:
        structure["tables"] = tables
    return _join(b'"structure":' + orjson.dumps(structure), b'"cells":' + _list(cells), *more)


def _leaf_cells(leaves: list[list[str]]) -> list[dict]:
    """Every leaf cell of flat dimensions, with two contributions (some sensitive)."""
    keys: list[list[str]] = [[]]
    for codes in leaves:
        keys = [k + [c] for k in keys for c in codes]
    return [
        {"key": k, "contributions": [{"value": 10 + i % 7}, {"value": 1 + i % 3}]}
        for i, k in enumerate(keys)
    ]


def chain_suppress() -> tuple[str, bytes]:
    """A chain of 49,000 codes over one leaf (just under the margins' limit, 98,002 cells)."""
    n = 49_000
    children = {"Total": ["c0"]} | {f"c{i}": [f"c{i + 1}"] for i in range(n - 1)}
    dims = [{"name": "x", "children": children}, {"name": "y", "leaves": ["A"]}]
    cells = [{"key": [f"c{n - 1}", "A"], "contributions": [{"value": 10}, {"value": 1}]}]
    return "/v1/suppress", _table(dims, cells, RULES, b'"time_limit":5')


def dimensions_8() -> tuple[str, bytes]:
    """8 dimensions of 3 leaves: 6,561 leaf cells, 65,536 cells, time limit 5 s."""
    leaves = [[f"d{d}l{i}" for i in range(3)] for d in range(8)]
    dims = [{"name": f"d{d}", "leaves": codes} for d, codes in enumerate(leaves)]
    return "/v1/suppress", _table(dims, _leaf_cells(leaves), RULES, b'"time_limit":5')


def linked_50() -> tuple[str, bytes]:
    """50 linked tables, three of 8 dimensions each, of 4 leaves (3,200 cells): values of
    one table of all 8 (leaf ``i`` of each dimension a factor ``i + 1``, so that the
    tables' common margins agree), one cell in 7 with protection levels; time limit 5 s."""
    leaves = [[f"d{d}l{i}" for i in range(4)] for d in range(8)]
    dims = [{"name": f"d{d}", "leaves": codes} for d, codes in enumerate(leaves)]
    tables = list(itertools.combinations(range(8), 3))[:50]
    cells = []
    for t in tables:
        for at in itertools.product(range(4), repeat=3):
            key = ["Total"] * 8
            value = 10 ** (8 - 3)  # the other dimensions' totals: 1 + 2 + 3 + 4 each
            for d, i in zip(t, at):
                key[d] = leaves[d][i]
                value *= i + 1
            cell: dict = {"key": key, "value": value}
            if len(cells) % 7 == 0:
                cell["protection"] = {"upper": value / 10, "lower": value / 10}
            cells.append(cell)
    names = [[f"d{d}" for d in t] for t in tables]
    return "/v1/suppress", _table(dims, cells, b'"time_limit":5', tables=names)


def time_limit_huge() -> tuple[str, bytes]:
    """A 20 x 20 table and a time limit of 1e308 seconds (the service caps it)."""
    leaves = [[f"a{i}" for i in range(20)], [f"b{i}" for i in range(20)]]
    dims = [{"name": "a", "leaves": leaves[0]}, {"name": "b", "leaves": leaves[1]}]
    return "/v1/suppress", _table(dims, _leaf_cells(leaves), RULES, b'"time_limit":1e308')


def wide_parent() -> tuple[str, bytes]:
    """One parent of 450,000 children, one cell sent (900,002 cells)."""
    n = 450_000
    dims = [{"name": "x", "children": {"Total": [f"c{i}" for i in range(n)]}}]
    dims.append({"name": "y", "leaves": ["A"]})
    cells = [{"key": ["c0", "A"], "value": 5, "protection": {"upper": 1, "lower": 1}}]
    return "/v1/audit", _table(dims, cells)


def round_many() -> tuple[str, bytes]:
    """/v1/round of 300 x 300 leaf cells (91,000 cells), time limit 5 s."""
    leaves = [[f"a{i}" for i in range(300)], [f"b{i}" for i in range(300)]]
    dims = [{"name": "a", "leaves": leaves[0]}, {"name": "b", "leaves": leaves[1]}]
    cells = [
        {"key": [a, b], "value": (i * 7) % 13}
        for i, (a, b) in enumerate(itertools.product(*leaves))
    ]
    return "/v1/round", _table(dims, cells, b'"base":5,"time_limit":5')


def adjust_many() -> tuple[str, bytes]:
    """/v1/adjust of 300 x 300 leaf cells with contributions, time limit 5 s."""
    leaves = [[f"a{i}" for i in range(300)], [f"b{i}" for i in range(300)]]
    dims = [{"name": "a", "leaves": leaves[0]}, {"name": "b", "leaves": leaves[1]}]
    return "/v1/adjust", _table(dims, _leaf_cells(leaves), RULES, b'"time_limit":5')


def frequency_million() -> tuple[str, bytes]:
    """A count table of 10^6 cells (6 dimensions of 9 codes and their totals) from one
    cell: a reply of every cell."""
    dims = [{"name": f"d{d}", "codes": [f"c{i}" for i in range(9)]} for d in range(6)]
    return "/v1/frequency/sensitivity", _join(
        b'"dimensions":' + orjson.dumps(dims),
        b'"cells":[{"key":["c0","c0","c0","c0","c0","c0"],"count":1}]',
        b'"rules":{"threshold":{"t":3}}',
    )


def filter_many() -> tuple[str, bytes]:
    """/v1/filter (analyst, inline policy) of 200,000 count cells."""
    cells = [{"key": [f"k{i}"], "count": i % 9} for i in range(200_000)]
    policy = {
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "filter": {"statistical": {"approach": "refuse"}},
    }
    return "/v1/filter", _join(
        b'"policy":' + orjson.dumps(policy),
        b'"query":{"variables":["a"]}',
        b'"cells":' + _list(cells),
    )


def contributions_invalid_last() -> tuple[str, bytes]:
    """90,000 cells of 10 contributions whose very last value is a string (422)."""
    raw = contributions()[1]
    return "/v1/sensitivity", raw[: raw.rindex(b"9.5")] + b'"9.5"' + raw[raw.rindex(b"9.5") + 3 :]


BODIES: dict[str, Callable[[], tuple[str, bytes]]] = {
    f.__name__.replace("_", "-"): f
    for f in (
        small,
        contributions,
        children,
        children_repeat,
        children_colons,
        children_errors,
        leaves_too_many,
        leaves_errors,
        tables_long,
        codes_too_many,
        hierarchy,
        unknown_objects,
        unknown_zeros,
        unknown_in_cell,
        unknown_keys,
        wrong_type,
        wrong_type_object,
        deep,
        long_string,
        escapes,
        huge_number,
        microdata_errors,
        area_population,
        respondents,
        trailing_comma,
        unclosed,
        contributions_invalid_last,
        chain_suppress,
        dimensions_8,
        linked_50,
        time_limit_huge,
        wide_parent,
        round_many,
        adjust_many,
        frequency_million,
        filter_many,
    )
}


async def _reply(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return int(head[9:12]), await reader.readexactly(length)


async def _poll(port: int, stop: asyncio.Event, waits: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while not stop.is_set():
            start = time.perf_counter()
            writer.write(GET_HEALTH)
            await asyncio.wait_for(_reply(reader), TIMEOUT)
            waits.append(time.perf_counter() - start)
            await asyncio.sleep(0.01)
    finally:
        writer.close()


async def measure(port: int, path: str, raw: bytes) -> tuple[int, float, float, bytes]:
    """Status, seconds to answer, longest ``/healthz`` wait meanwhile, reply head."""
    stop, waits = asyncio.Event(), []
    polling = asyncio.create_task(_poll(port, stop, waits))
    await asyncio.sleep(0.1)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    writer.write(head + raw)
    status, reply = await asyncio.wait_for(_reply(reader), TIMEOUT)
    seconds = time.perf_counter() - start
    writer.close()
    await asyncio.sleep(0.1)  # what the reply left to do (the collector) is waited for too
    stop.set()
    await polling
    return status, seconds, max(waits), reply[:160]


def _reset_peak(pid: int) -> None:
    """Start the server's peak resident memory afresh (Linux: ``clear_refs`` 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _peak_mib(pid: int) -> float:
    """The server's peak resident memory since :func:`_reset_peak` (``VmHWM``), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve")
    parser.add_argument("--only", nargs="*", choices=sorted(BODIES), help="these bodies only")
    parser.add_argument("--replies", action="store_true", help="print each reply's start")
    args = parser.parse_args()
    with server(root=args.root) as served:
        print(
            f"{'body':<18} {'MiB':>5} {'status':>6} {'seconds':>8} {'longest /healthz':>17}"
            f" {'peak RSS MiB':>13}"
        )
        for name, make in BODIES.items():
            if args.only and name not in args.only:
                continue
            path, raw = make()
            mib = len(raw) / 2**20
            _reset_peak(served.pid)
            try:
                status, seconds, longest, reply = asyncio.run(measure(served.port, path, raw))
            except TimeoutError:
                print(f"{name:<18} {mib:>5.1f} no reply in {TIMEOUT:.0f} s: stopped")
                break
            del raw
            print(
                f"{name:<18} {mib:>5.1f} {status:>6} {seconds:>8.2f} {longest:>16.3f}s"
                f" {_peak_mib(served.pid):>13.0f}",
                flush=True,
            )
            if args.replies:
                print("   ", reply.decode(errors="replace"))


if __name__ == "__main__":
    main()
