"""Instructions per request, counted by valgrind's callgrind: a figure that does not drift
with the machine. Run with ``scripts/bench instructions`` (not part of CI; needs valgrind,
about a minute per version).

The shared machines' speed moves by tens of per cent within minutes, so timings of two
versions differ by more than most changes do; instruction counts of the same requests do
not. The server (``python -m service``, API keys on) runs under callgrind with counting
off while it starts; a fixed sequence of requests is then counted in two parts, each
dumped on its own (``callgrind_control -i on``, ``-d``): 100 online filter answers of 50
cells (noise approach, ``microdata``) and 5 sensitivity tables of 4,000 cells with
contributions (a large body, the pool's path). ``PYTHONHASHSEED`` is fixed.

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

from benchmarks.filter import PROFILES
from benchmarks.load import (
    ANALYST_KEY,
    FILTER_KEY,
    _read_reply,
    _request,
    filter_body,
    sensitivity_body,
)
from tests.servers import ROOT

#: (label, number of requests) of the counted parts, in order.
PARTS = (("filter, 50 cells", 100), ("sensitivity, 4,000 cells", 5))


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
            "SDC_NOISE_SECRET": "load-test-noise-secret-0123456789",
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
                _request("/v1/filter", orjson.dumps(filter_body()), FILTER_KEY),
                _request("/v1/sensitivity", orjson.dumps(sensitivity_body(4000, 2)), ANALYST_KEY),
            ]
            asyncio.run(_send(port, [bodies[0]] * 5 + [bodies[1]]))  # warm-up, not counted
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
        return {
            label: _total(Path(f"{out}.{k}")) / n for k, (label, n) in enumerate(PARTS, start=1)
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="checkout of an earlier version")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (Debian: apt-get install valgrind)")
    versions = {"current": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    results = {name: count(root) for name, root in versions.items()}
    print(f"{'instructions per request (millions)':<40}" + "".join(f"{v:>12}" for v in results))
    for label, _ in PARTS:
        row = [results[v][label] / 1e6 for v in results]
        ratio = f"{row[0] / row[1]:>10.3f}x" if len(row) == 2 else ""
        print(f"  {label:<38}" + "".join(f"{x:>12.2f}" for x in row) + ratio)


if __name__ == "__main__":
    main()
