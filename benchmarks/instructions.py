"""Instructions per request, counted by valgrind's callgrind: a figure that does not drift
with the machine. Run with ``scripts/bench instructions`` (not part of CI; needs valgrind,
about a minute per version).

The shared machines' speed moves by tens of per cent within minutes, so timings of two
versions differ by more than most changes do; instruction counts of the same requests do
not. The server (``python -m service``, API keys on) runs under callgrind with counting
off while it starts; a fixed sequence of requests is then counted in parts, each dumped
on its own (``callgrind_control -i on``, ``-d``): 100 online filter answers of 50 cells in
each scenario of ``benchmarks.filter`` (noise and refuse, ``microdata`` columns and
contribution objects, and count cells) and 5 sensitivity tables of 4,000 cells with
contributions (a large body, the pool's path). ``PYTHONHASHSEED`` is fixed.

For each filter scenario the filter's own work is counted too, in a process of its own
without HTTP (``FilterRequest.model_validate_json`` and ``screen``, as
``benchmarks.filter.work_probe`` times it): the difference of two runs of 10 and 110
iterations, so that start-up cancels out. Server minus own work is what the request costs
outside the filter (HTTP, ASGI, middleware, routing, the reply): the "overhead" column,
as a multiple of the own work.

``--before PATH`` counts an earlier checkout (``git worktree add /tmp/before REV``) the
same way and prints the ratios. Measured so: the hardening (issue 14) had made the large
request 25% dearer (574 against 459 million instructions), which timings on this machine
could not tell from drift; see ``service/pipeline/cells.py:microdata_of``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.filter import NOISE_SECRET, PROFILES, SCENARIOS
from benchmarks.load import (
    ANALYST_KEY,
    FILTER_KEY,
    _read_reply,
    _request,
    sensitivity_body,
)
from tests.generate import FILTER_QUERY, filter_answer
from tests.servers import ROOT

#: Filter scenarios counted (``benchmarks.filter.SCENARIOS``), 100 answers each.
FILTER_SCENARIOS = (
    "noise, microdata",
    "noise, objects",
    "refuse, microdata",
    "refuse, objects",
    "refuse, counts",
)
#: (label, number of requests) of the counted parts, in order.
PARTS = (
    *((f"filter {name}", 100) for name in FILTER_SCENARIOS),
    ("sensitivity, 4,000 cells", 5),
)
#: Iterations of the in-process work: (fewer, more); their difference is counted.
WORK_ITERATIONS = (10, 110)


def _filter_bodies() -> list[dict]:
    return [
        {"profile": profile, "query": FILTER_QUERY, "cells": filter_answer(50, seed, form)}
        for profile, form, seed in (SCENARIOS[name] for name in FILTER_SCENARIOS)
    ]


#: Run in the checkout under callgrind: validate and screen one body ``n`` times.
_WORK = """
import json, sys
from schemas.filter import FilterRequest
from schemas.profiles import Profile
from service.pipeline.query_filter import screen
raw = open(sys.argv[1], "rb").read()
profile = Profile.model_validate(json.loads(open(sys.argv[2]).read()))
secret = sys.argv[3].encode()
for _ in range(int(sys.argv[4])):
    screen(FilterRequest.model_validate_json(raw), profile.rules, profile.filter, secret, False)
"""


def own_work(root: Path, body: dict, tmp: Path) -> float:
    """Instructions of validating and screening ``body`` once in a process of ``root``'s
    code, without HTTP (see the module docstring)."""
    raw, profile = tmp / "body.json", tmp / "profile.json"
    raw.write_bytes(orjson.dumps(body))
    profile.write_text(json.dumps(PROFILES["profiles"][body["profile"]]))
    totals = []
    for n in WORK_ITERATIONS:
        out = tmp / f"work.{n}.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                _WORK,
                str(raw),
                str(profile),
                NOISE_SECRET,
                str(n),
            ],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)},
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        totals.append(_total(out))
    return (totals[1] - totals[0]) / (WORK_ITERATIONS[1] - WORK_ITERATIONS[0])


def _key_hash(root: Path, key: str) -> str:
    """A hash of ``key`` by ``root``'s own code (sha256: every version reads it)."""
    module = "service.api_keys" if (root / "service/api_keys.py").exists() else "service.keys"
    code = f"import {module} as m; print(m.hash_key({key!r}, method='sha256'))"
    return subprocess.check_output([sys.executable, "-c", code], cwd=root, text=True).strip()


async def _send(port: int, requests: list[bytes]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for raw in requests:
            writer.write(raw)
            status, _ = await _read_reply(reader)
            if status != 200:
                raise RuntimeError(f"status {status}")
    finally:
        writer.close()


def _total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {path}")


def count(root: Path) -> dict[str, float]:
    """Instructions per request of each part of :data:`PARTS`, for the checkout ``root``."""
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys.json"
        keys.write_text(
            json.dumps(
                {
                    "keys": [
                        {
                            "id": "load-filter",
                            "role": "filter",
                            "hash": _key_hash(root, FILTER_KEY),
                        },
                        {
                            "id": "load-analyst",
                            "role": "analyst",
                            "hash": _key_hash(root, ANALYST_KEY),
                        },
                    ]
                }
            )
        )
        profiles = Path(tmp) / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {
            **os.environ,
            "SDC_HOST": "127.0.0.1",
            "SDC_PORT": str(port),
            "SDC_WORKERS": "1",
            "SDC_LOG_LEVEL": "warning",
            "SDC_API_KEYS_FILE": str(keys),
            "SDC_PROFILES": str(profiles),
            "SDC_NOISE_SECRET": NOISE_SECRET,
            "PYTHONHASHSEED": "0",
        }
        out = Path(tmp) / "callgrind.out"
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "service",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 600
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("the server did not start under valgrind") from None
                    time.sleep(0.5)
            bodies = [
                *(_request("/v1/filter", orjson.dumps(b), FILTER_KEY) for b in _filter_bodies()),
                _request("/v1/sensitivity", orjson.dumps(sensitivity_body(4000, 2)), ANALYST_KEY),
            ]
            warm_up = [raw for raw in bodies[:-1] for _ in range(5)] + bodies[-1:]
            asyncio.run(_send(port, warm_up))  # not counted
            control = ["callgrind_control"]
            subprocess.run([*control, "-i", "on", str(proc.pid)], check=True, capture_output=True)
            for k, ((_, n), raw) in enumerate(zip(PARTS, bodies, strict=True), start=1):
                asyncio.run(_send(port, [raw] * n))
                subprocess.run(
                    [*control, "-d", f"part{k}", str(proc.pid)], check=True, capture_output=True
                )
        finally:
            proc.terminate()
            proc.wait(120)
        # The dumps are complete once valgrind has exited.
        counts = {
            label: _total(Path(f"{out}.{k}")) / n for k, (label, n) in enumerate(PARTS, start=1)
        }
        for name, body in zip(FILTER_SCENARIOS, _filter_bodies(), strict=True):
            counts[f"own work {name}"] = own_work(root, body, Path(tmp))
        return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="checkout of an earlier version")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (Debian: apt-get install valgrind)")
    versions = {"current": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    results = {name: count(root) for name, root in versions.items()}
    labels = [label for label, _ in PARTS] + [f"own work {name}" for name in FILTER_SCENARIOS]
    print(f"{'instructions per request (millions)':<40}" + "".join(f"{v:>12}" for v in results))
    for label in labels:
        row = [results[v][label] / 1e6 for v in results]
        ratio = f"{row[0] / row[1]:>10.3f}x" if len(row) == 2 else ""
        print(f"  {label:<38}" + "".join(f"{x:>12.2f}" for x in row) + ratio)
    print("overhead outside the filter's own work (server - own work), times the own work")
    for name in FILTER_SCENARIOS:
        row = [results[v][f"filter {name}"] / results[v][f"own work {name}"] - 1 for v in results]
        print(f"  {name:<38}" + "".join(f"{x:>11.2f}x" for x in row))


if __name__ == "__main__":
    main()
