"""Hostile callers against a real server, one case at a time. Run with ``scripts/bench abuse``
(not part of CI; about five minutes).

Each case starts its own server on loopback (:func:`benchmarks.loadgen.server`) with API keys
and the Deployment's sizing (one compute thread, ``SDC_QUEUE_DEPTH=2``, 16 MiB bodies, the
other settings at their defaults), and prints the statuses seen, the time to answer, and the
server's peak RSS (``VmHWM``). A server whose RSS passes ``--memory-limit`` (3 GiB, the
pod's limit) is killed, as the kernel would kill the pod, and the case says so.

1. ``/v1/audit`` with two flat dimensions of 6,000 leaves and one cell (36 million cells
   implied by a 200 KB body).
2. ``/v1/frequency/sensitivity`` with 1,000 x 1,000 codes and one cell: once read, then by
   24 clients that never read their replies (does the server drop the replies, and when?).
3. An audit with 100,000 leaves whose last one repeats the first; an audit whose
   ``children`` hierarchy holds a cycle of 60,000 codes unreachable from the total.
4. Slow clients: 2,000 connections that send half a request head (with a legitimate
   request tried meanwhile); a body dripped at 1 byte/s; three large bodies dripped at
   1 KiB/s while a legitimate large request is tried every half second.
5. Keys: 400 requests with a known key id and a wrong secret at once while a valid key
   that was never used is tried (how long it waits); then the time of an unknown id
   against a known id with a wrong secret.
6. SIGTERM with one solve running and two queued: what each gets, with the production
   shutdown period (75 s) and with one shorter than the running solve (3 s).

Bounded by construction: every client has a timeout, every case a deadline, and each server
is stopped (killed if it does not stop) before the next case starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.load import ANALYST_KEY, FILTER_KEY, _read_reply, _request
from service import api_keys
from tests.servers import server

#: A valid key that no request uses before case 5 (nothing about it can be cached).
FRESH_KEY = "abuse-fresh.local-benchmark-key-0003"
WRONG_SECRET = "load-filter.not-the-secret-000000000000"
UNKNOWN_ID = "nobody-here.not-the-secret-000000000000"
#: The Deployment's sizing (deploy/k8s/deployment.yaml).
PRODUCTION = {
    "SDC_WORKER_THREADS": "1",
    "SDC_QUEUE_DEPTH": "2",
    "SDC_MAX_BODY_BYTES": str(16 * 2**20),
}
RULES = {"rules": [{"type": "p_percent", "p": 10}, {"type": "frequency", "n": 3}]}


# --- the server and its memory --------------------------------------------------------------


def _status_kb(pid: int, field_name: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


class Memory:
    """Samples the server's RSS every 50 ms; kills it past ``limit`` bytes."""

    def __init__(self, pid: int, limit: int):
        self.pid, self.limit = pid, limit
        self.sampled_kb = 0
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            rss = _status_kb(self.pid, "VmRSS")
            if rss is None:
                return
            self.sampled_kb = max(self.sampled_kb, rss)
            if rss * 1024 > self.limit and not self.killed:
                self.killed = True
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)

    def reset_peak(self) -> None:
        """Start a new peak (``VmHWM`` is reset by writing 5 to ``clear_refs``)."""
        with contextlib.suppress(OSError):
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        self.sampled_kb = _status_kb(self.pid, "VmRSS") or 0

    def rss_mib(self) -> float:
        return (_status_kb(self.pid, "VmRSS") or 0) / 1024

    def peak(self) -> str:
        peak = max(_status_kb(self.pid, "VmHWM") or 0, self.sampled_kb) / 1024
        text = f"peak RSS {peak:.0f} MiB"
        if self.killed:
            text += f" (KILLED: over the {self.limit / 2**30:g} GiB limit, as an OOM kill)"
        elif not alive(self.pid):
            text += " (the server died)"
        return text

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1)


@dataclass
class Case:
    url: str
    port: int
    pid: int
    memory: Memory


@contextlib.contextmanager
def case_server(tmp: Path, limit: int, env: dict | None = None):
    """A server with the benchmark's keys and the production sizing (plus ``env``), its
    memory watched; stopped with SIGTERM, killed after 15 s if it has not stopped."""
    full = {"SDC_API_KEYS_FILE": str(tmp / "keys.json"), **PRODUCTION, **(env or {})}
    with server(full) as srv:
        memory = Memory(srv.pid, limit)
        try:
            yield Case(srv.url, srv.port, srv.pid, memory)
        finally:
            memory.stop()
            with contextlib.suppress(OSError):
                os.kill(srv.pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while alive(srv.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(OSError):
                os.kill(srv.pid, signal.SIGKILL)


def write_keys(tmp: Path) -> None:
    (tmp / "keys.json").write_text(
        json.dumps(
            {
                "keys": [
                    {"id": "load-filter", "role": "filter", "hash": api_keys.hash_key(FILTER_KEY)},
                    {
                        "id": "load-analyst",
                        "role": "analyst",
                        "hash": api_keys.hash_key(ANALYST_KEY),
                    },
                    {"id": "abuse-fresh", "role": "analyst", "hash": api_keys.hash_key(FRESH_KEY)},
                ]
            }
        )
    )


# --- clients ---------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int | str  # a status, or "timeout", "closed" (no reply), "refused"
    seconds: float
    retry_after: bool = False


async def call(port: int, raw: bytes, timeout: float = 120.0) -> Reply:
    """Send ``raw`` on a new connection and read one reply; never raises."""
    start = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        writer.write(raw)
        status, retry_after = await asyncio.wait_for(_read_reply(reader), timeout)
        return Reply(status, time.perf_counter() - start, retry_after)
    except TimeoutError:
        return Reply("timeout", time.perf_counter() - start)
    except ConnectionRefusedError:
        return Reply("refused", time.perf_counter() - start)
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        return Reply("closed", time.perf_counter() - start)
    finally:
        if writer is not None:
            writer.close()


def post(path: str, body: dict | bytes, key: str = ANALYST_KEY) -> bytes:
    return _request(path, body if isinstance(body, bytes) else orjson.dumps(body), key)


GET_HEALTH = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def tally(replies: list[Reply]) -> str:
    """Statuses with counts, and the time to answer (median and slowest)."""
    if not replies:
        return "no replies"
    counts: dict = {}
    for r in replies:
        counts[r.status] = counts.get(r.status, 0) + 1
    statuses = ", ".join(
        f"{s} x{n}" if n > 1 else str(s)
        for s, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
    )
    seconds = np.array([r.seconds for r in replies])
    if len(replies) == 1:
        return f"{statuses} in {seconds[0]:.2f} s"
    return (
        f"{statuses}; answered in median {np.median(seconds):.2f} s, slowest {seconds.max():.2f} s"
    )


def say(text: str) -> None:
    print("  " + text, flush=True)


# --- the cases -------------------------------------------------------------------------------


def flat(name: str, n: int) -> dict:
    return {"name": name, "leaves": [f"{name}{i}" for i in range(n)]}


async def case_wide_audit(c: Case) -> None:
    body = {
        "structure": {"dimensions": [flat("r", 6000), flat("c", 6000)]},
        "cells": [
            {
                "key": ["r0", "c0"],
                "value": 5.0,
                "suppressed": True,
                "protection": {"upper": 1, "lower": 1},
            }
        ],
    }
    raw = post("/v1/audit", body)
    reply = await call(c.port, raw, timeout=180)
    say(f"{len(raw) / 1024:.0f} KiB body: {tally([reply])}; {c.memory.peak()}")


def frequency_body() -> dict:
    return {
        "dimensions": [
            {"name": "a", "codes": [f"a{i}" for i in range(1000)]},
            {"name": "b", "codes": [f"b{i}" for i in range(1000)]},
        ],
        "keys": ["a"],
        "targets": ["b"],
        "cells": [{"key": ["a0", "b0"], "count": 1}],
        "rules": {"threshold": {"t": 3}},
    }


def client_sockets(pid: int) -> int:
    """Sockets the server process holds open."""
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


async def case_unread_replies(c: Case, readers: int = 24) -> None:
    raw = post("/v1/frequency/sensitivity", frequency_body())
    start = time.perf_counter()
    first = await call(c.port, raw, timeout=120)
    say(f"read normally: {tally([first])}; {c.memory.peak()}")
    if not alive(c.pid):
        return
    c.memory.reset_peak()
    baseline = client_sockets(c.pid)
    socks = []
    for _ in range(readers):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel keeps little
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", c.port))
            s.sendall(raw)
            socks.append(s)
        except OSError:
            s.close()
    start = time.perf_counter()
    held, last_change, dropped_at = None, start, None
    while time.perf_counter() - start < 150 and alive(c.pid):
        now = client_sockets(c.pid) - baseline
        if now != held:
            held, last_change = now, time.perf_counter()
        if now <= 0:
            dropped_at = time.perf_counter() - start
            break
        await asyncio.sleep(0.25)
    statuses: dict = {}
    for s in socks:
        s.settimeout(0.5)
        got = b""
        ended = "open"
        try:
            while len(got) < 64:
                chunk = s.recv(4096)
                if not chunk:
                    ended = "closed"
                    break
                got += chunk
            while s.recv(1 << 20):
                pass
            ended = "closed"
        except TimeoutError:
            pass
        except OSError:
            ended = "reset"
        status = got[9:12].decode(errors="replace") if got.startswith(b"HTTP/1.1") else "none"
        statuses[(status, ended)] = statuses.get((status, ended), 0) + 1
        s.close()
    summary = ", ".join(f"{s} then {e} x{n}" for (s, e), n in sorted(statuses.items()))
    when = (
        f"the server held none of them {dropped_at:.1f} s after they were sent"
        if dropped_at is not None
        else f"the server still held {held} of them after {time.perf_counter() - start:.0f} s "
        f"(last change at {last_change - start:.1f} s)"
    )
    say(
        f"{len(socks)} clients that never read: {summary}; {when}; {c.memory.peak()}, "
        f"RSS now {c.memory.rss_mib():.0f} MiB"
    )


async def case_degenerate_dimensions(c: Case) -> None:
    leaves = [f"l{i}" for i in range(99_999)] + ["l0"]
    dup = {
        "structure": {"dimensions": [{"name": "r", "leaves": leaves}]},
        "cells": [{"key": ["l1"], "value": 1.0, "suppressed": False}],
    }
    reply = await call(c.port, post("/v1/audit", dup), timeout=120)
    say(f"100,000 leaves, the last a duplicate: {tally([reply])}; {c.memory.peak()}")
    if not alive(c.pid):
        return
    c.memory.reset_peak()
    n = 60_000
    children = {"Total": ["a", "b"], **{f"x{i}": [f"x{(i + 1) % n}"] for i in range(n)}}
    cycle = {
        "structure": {"dimensions": [{"name": "r", "children": children}]},
        "cells": [{"key": ["a"], "value": 1.0, "suppressed": False}],
    }
    reply = await call(c.port, post("/v1/audit", cycle), timeout=120)
    say(f"children with an unreachable cycle of {n:,} codes: {tally([reply])}; {c.memory.peak()}")


async def _half_head(port: int, sem: asyncio.Semaphore, out: list, timeout: float) -> None:
    start = time.perf_counter()
    writer = None
    try:
        async with sem:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        writer.write(b"POST /v1/sensitivity HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        data = await asyncio.wait_for(reader.read(4096), timeout)
        status = int(data[9:12]) if data.startswith(b"HTTP/1.1") else "closed"
        out.append(Reply(status, time.perf_counter() - start))
    except TimeoutError:
        out.append(Reply("timeout", time.perf_counter() - start))
    except OSError:
        out.append(Reply("closed", time.perf_counter() - start))
    finally:
        if writer is not None:
            writer.close()


async def _drip(
    port: int, head: bytes, first: bytes, chunk: bytes, every: float, limit: float
) -> Reply:
    """Send ``head`` and ``first``, then ``chunk`` every ``every`` seconds until a reply
    (or ``limit`` seconds)."""
    start = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        writer.write(head + first)
        reply = asyncio.ensure_future(_read_reply(reader))
        while not reply.done() and time.perf_counter() - start < limit:
            await asyncio.wait([reply], timeout=every)
            if not reply.done():
                writer.write(chunk)
        if not reply.done():
            reply.cancel()
            return Reply("timeout", time.perf_counter() - start)
        status, retry_after = reply.result()
        return Reply(status, time.perf_counter() - start, retry_after)
    except (OSError, asyncio.IncompleteReadError, TimeoutError):
        return Reply("closed", time.perf_counter() - start)
    finally:
        if writer is not None:
            writer.close()


def _head(path: str, length: int, key: str = ANALYST_KEY) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"X-API-Key: {key}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def sensitivity_body(n_cells: int) -> bytes:
    cells = [
        {
            "key": [f"k{i}"],
            "contributions": [{"value": 100.0 + i % 7}, {"value": 50.0}, {"value": 3.0}],
        }
        for i in range(n_cells)
    ]
    return orjson.dumps({"cells": cells, "rules": RULES})


async def case_slow_clients(c: Case, connections: int = 2000) -> None:
    out: list[Reply] = []
    sem = asyncio.Semaphore(200)
    attack = [asyncio.ensure_future(_half_head(c.port, sem, out, 60)) for _ in range(connections)]
    small = post("/v1/sensitivity", sensitivity_body(10))
    legit: list[tuple[float, Reply, Reply]] = []
    start = time.perf_counter()
    while not all(t.done() for t in attack) and time.perf_counter() - start < 70:
        await asyncio.sleep(1)
        at = time.perf_counter() - start
        legit.append((at, await call(c.port, GET_HEALTH, 10), await call(c.port, small, 10)))
    await asyncio.gather(*attack)
    say(f"{connections} connections sending half a request head: {tally(out)}")
    ok = [at for at, h, s in legit if h.status == 200 and s.status == 200]
    health = tally([h for _, h, _ in legit])
    say(
        f"  meanwhile, once a second, /healthz: {health}; a small /v1/sensitivity: "
        f"{tally([s for _, _, s in legit])}; first time both answered 200: "
        f"{f'{ok[0]:.1f} s' if ok else 'never'}; {c.memory.peak()}"
    )

    drip = await _drip(c.port, _head("/v1/sensitivity", 1000), b"", b" ", 1.0, 60)
    say(f"a 1,000-byte body dripped at 1 byte/s: {tally([drip])}")

    large = sensitivity_body(6000)  # over 256 KiB: needs one of the 3 admission slots
    slow = [
        asyncio.ensure_future(
            _drip(c.port, _head("/v1/sensitivity", 2**20), b" " * 10240, b" " * 1024, 1.0, 60)
        )
        for _ in range(3)
    ]
    await asyncio.sleep(0.5)
    tries: list[Reply] = []
    start = time.perf_counter()
    first_ok = None
    while time.perf_counter() - start < 45:
        reply = await call(c.port, _request("/v1/sensitivity", large, ANALYST_KEY), 30)
        tries.append(reply)
        if reply.status == 200:
            first_ok = time.perf_counter() - start
            break
        await asyncio.sleep(0.5)
    slow_replies = await asyncio.gather(*slow)
    say(f"3 bodies of 1 MiB dripped at 1 KiB/s: {tally(slow_replies)}")
    say(
        f"  a legitimate {len(large) / 1024:.0f} KiB request every 0.5 s meanwhile: "
        f"{tally(tries)}; first 200 after "
        f"{f'{first_ok:.1f} s' if first_ok is not None else 'never (45 s)'}; {c.memory.peak()}"
    )


async def case_wrong_keys(c: Case, flood: int = 400, rounds: int = 100) -> None:
    body = sensitivity_body(3)
    wrong = _request("/v1/sensitivity", body, WRONG_SECRET)
    flood_tasks = [asyncio.ensure_future(call(c.port, wrong, 120)) for _ in range(flood)]
    await asyncio.sleep(0.05)
    fresh = await call(c.port, _request("/v1/sensitivity", body, FRESH_KEY), 120)
    flooded = await asyncio.gather(*flood_tasks)
    say(f"{flood} requests with a known id and a wrong secret: {tally(flooded)}")
    say(f"  a valid key never used before, sent meanwhile: {tally([fresh])}")
    unknown = _request("/v1/sensitivity", body, UNKNOWN_ID)
    times: dict[str, list[float]] = {"unknown id": [], "known id, wrong secret": []}
    for _ in range(rounds):
        for label, raw in (("unknown id", unknown), ("known id, wrong secret", wrong)):
            r = await call(c.port, raw, 10)
            if r.status == 401:
                times[label].append(r.seconds * 1000)
    parts = [
        f"{label}: median {np.median(ms):.2f} ms, p90 {np.percentile(ms, 90):.2f} ms "
        f"({len(ms)} x 401)"
        for label, ms in times.items()
        if ms
    ]
    say(
        f"timing over {rounds} alternating requests each: "
        + "; ".join(parts)
        + f"; {c.memory.peak()}"
    )


def suppress_body(n: int, seconds: float) -> bytes:
    """An n x n table whose exact suppression runs until its time limit."""
    rng = np.random.default_rng(n)
    cells = [
        {
            "key": [f"r{i}", f"c{j}"],
            "contributions": [
                {"value": float(v)} for v in rng.integers(1, 1000, int(rng.integers(1, 6)))
            ],
        }
        for i in range(n)
        for j in range(n)
    ]
    return orjson.dumps(
        {
            "structure": {"dimensions": [flat("r", n), flat("c", n)]},
            "cells": cells,
            "rules": RULES,
            "method": "exact",
            "time_limit": seconds,
        }
    )


async def _answered(port: int, raw: bytes) -> tuple[Reply, float]:
    reply = await call(port, raw, 120)
    return reply, time.perf_counter()


async def case_sigterm(c: Case, label: str) -> None:
    raw = _request("/v1/suppress", suppress_body(60, 8), ANALYST_KEY)
    running = asyncio.ensure_future(_answered(c.port, raw))
    await asyncio.sleep(1.0)
    queued = [asyncio.ensure_future(_answered(c.port, raw)) for _ in range(2)]
    await asyncio.sleep(1.0)
    peak = c.memory.peak()  # before the process ends
    signalled = time.perf_counter()
    os.kill(c.pid, signal.SIGTERM)
    answered = await asyncio.gather(running, *queued)
    exited = None
    while time.perf_counter() - signalled < 120:
        if not alive(c.pid):
            exited = time.perf_counter() - signalled
            break
        await asyncio.sleep(0.1)
    replies = [r for r, _ in answered]
    after = [f"{r.status} {at - signalled:.1f} s after SIGTERM" for r, at in answered]
    say(
        f"{label}: running solve (8 s): {after[0]}; queued: {after[1]}, {after[2]}; "
        f"Retry-After on the 503s: {all(r.retry_after for r in replies if r.status == 503)}; "
        f"process gone {f'{exited:.1f} s' if exited is not None else 'NOT within 120 s'} "
        f"after SIGTERM; {peak}"
    )


CASES = {
    "1": ("(1) /v1/audit, two flat dimensions of 6,000 leaves, one cell", [({}, case_wide_audit)]),
    "2": (
        "(2) /v1/frequency/sensitivity, 1,000 x 1,000 codes, one cell",
        [({}, case_unread_replies)],
    ),
    "3": ("(3) degenerate dimensions (/v1/audit)", [({}, case_degenerate_dimensions)]),
    "4": ("(4) slow clients", [({}, case_slow_clients)]),
    "5": ("(5) wrong keys", [({}, case_wrong_keys)]),
    "6": (
        "(6) SIGTERM with one solve running and two queued (1 thread + 2 queued)",
        [
            ({"SDC_SHUTDOWN_SECONDS": "75"}, lambda c: case_sigterm(c, "SDC_SHUTDOWN_SECONDS=75")),
            ({"SDC_SHUTDOWN_SECONDS": "3"}, lambda c: case_sigterm(c, "SDC_SHUTDOWN_SECONDS=3")),
        ],
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--memory-limit", type=float, default=3.0, help="GiB (the pod's)")
    parser.add_argument("--case-seconds", type=float, default=300, help="deadline of each case")
    args = parser.parse_args()
    # 2,000 client connections in this process, besides the server's own.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 8192:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(8192, hard), hard))
    limit = int(args.memory_limit * 2**30)
    with tempfile.TemporaryDirectory() as tmp:
        write_keys(Path(tmp))
        for name in args.cases:
            title, runs = CASES[name]
            print(title, flush=True)
            for env, run in runs:
                try:
                    with case_server(Path(tmp), limit, env) as c:
                        c.memory.reset_peak()
                        asyncio.run(asyncio.wait_for(run(c), args.case_seconds))
                except TimeoutError:
                    say(f"case not finished within {args.case_seconds:g} s: stopped")
                except Exception as exc:  # report and go on with the next case
                    say(f"case failed: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
