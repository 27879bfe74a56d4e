"""The machine under a latency benchmark: is it stalling, and how does the service fare
when a neighbour is busy?

:func:`watch` runs a separate process that sleeps 1 ms at a time and records every wake-up
late by more than ``threshold_ms``. It holds no lock and shares no event loop with the
server or the load generator, so a late wake-up is the machine not running anything (the
hypervisor, or every core busy), not a slow server.

:func:`busy_neighbours` keeps ``n`` processes spinning on the CPU for the length of a
``with`` block: a noisy neighbour on purpose, to see how much headroom is left.

Run ``python -m benchmarks.machine --seconds 10`` to watch the machine alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = 0.001


@dataclass
class Stalls:
    """Late wake-ups of the watcher: how many, the longest and their sum (milliseconds)."""

    count: int = 0
    longest_ms: float = 0.0
    total_ms: float = 0.0

    def line(self) -> str:
        return (
            f"machine stalls {self.count} (longest {self.longest_ms:.1f} ms, "
            f"{self.total_ms:.0f} ms in all)"
        )


def _record(threshold_ms: float, until: float, stop: threading.Event) -> Stalls:
    """Sleep a tick at a time until ``until`` (or ``stop``), keeping the late wake-ups."""
    stalls = Stalls()
    while time.perf_counter() < until and not stop.is_set():
        start = time.perf_counter()
        time.sleep(TICK)
        late = (time.perf_counter() - start - TICK) * 1000
        if late > threshold_ms:
            stalls.count += 1
            stalls.longest_ms = max(stalls.longest_ms, late)
            stalls.total_ms += late
    return stalls


@contextlib.contextmanager
def watch(threshold_ms: float = 5.0, max_seconds: float = 3600):
    """Watch for stalls while the ``with`` block runs; the yielded :class:`Stalls` is
    filled in when it ends."""
    result = Stalls()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.machine",
            "--seconds",
            str(max_seconds),
            "--threshold-ms",
            str(threshold_ms),
            "--stop-on-input",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield result
    finally:
        out, _ = proc.communicate("stop\n", timeout=30)
        if out.strip():
            result.__dict__.update(json.loads(out.strip().splitlines()[-1]))


@contextlib.contextmanager
def busy_neighbours(n: int):
    """``n`` processes that spin on the CPU until the block ends."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--threshold-ms", type=float, default=5.0)
    parser.add_argument(
        "--stop-on-input",
        action="store_true",
        help="stop early when a line arrives on stdin (used by watch())",
    )
    args = parser.parse_args()
    until = time.perf_counter() + args.seconds
    stop = threading.Event()
    if args.stop_on_input:
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print(json.dumps(asdict(_record(args.threshold_ms, until, stop))), flush=True)


if __name__ == "__main__":
    main()
