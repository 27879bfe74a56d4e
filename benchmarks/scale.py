"""How the fast suppression method's time and memory grow with the table (issue 16 part 3).

Run with ``scripts/bench scale`` (or ``python -m benchmarks.scale``)::

    python -m benchmarks.scale [--sizes 100 150 220 330] [--groups 10] [--dims 2]
        [--seed 0] [--time-limit 3600] [--trace] [--json FILE]

Per size ``N``: an ``N x ... x N`` table (``--dims`` dimensions, 2 by default) with a
2-level hierarchy on every dimension, the leaves in groups of ``--groups`` (so ``N / 10``
subtotals with the default: the 100x100 table is :data:`tests.generate.SIZES`' "100x100
hier"), contributions, primary cells, costs and union source as in
:func:`benchmarks.suppress.instance` (p% p = 15 plus minimum frequency 3, cost = value).
``fast`` runs in a fresh subprocess per size, so the peak resident set size (``ru_maxrss`` of
the child) is that size's alone, with the final audit of :func:`service.sdc.suppress.suppress`
(intervals, unions, aggregations). The seconds per phase come from the method's progress
lines (logger ``sdc.suppress``, INFO): set-up (the LP models), protection, clean-up,
protection of aggregations, and the audit; ``peak`` after each phase is ``ru_maxrss`` read at
the line that ends it, so a rise names the phase that set the peak. Instance building
(generating contributions, primary assessment) is timed apart and included in the peak.

``--trace``: tracemalloc in the child; at every line of the aggregation phase the largest
live Python/numpy allocations by source line are printed (HiGHS's own memory is not traced)
and the traced peak since the last line. Slower; for finding where memory goes, not timing.

The child's progress lines go to stderr as they come.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Phase name -> (first words of the line that starts it, of the line that ends it).
PHASES = {
    "setup": ("suppress (fast): start", "protection: start"),
    "protection": ("protection: start", "protection: end"),
    "clean-up": ("clean-up: start", "clean-up: end"),
    "aggregations": ("aggregations: start", "audit: start"),
    "audit": ("audit: start", "suppress (fast): end"),
}


def _rss_mib() -> float:
    """Current resident set size of this process, MiB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class _Recorder(logging.Handler):
    """Keeps (seconds, message, rss, peak, sampled) of every progress line and echoes it;
    ``sampled`` is the largest RSS a thread saw (every 20 ms) since the previous line, so
    the suppression's own peak is told apart from the instance's, which ``ru_maxrss``
    includes (spikes shorter than the interval can be missed)."""

    def __init__(self, trace: bool) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str, float, float, float]] = []
        self.trace = trace
        self.t0 = time.perf_counter()
        self.window = 0.0
        self.running = True
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()

    def _sample(self) -> None:
        while self.running:
            self.window = max(self.window, _rss_mib())
            time.sleep(0.02)

    def stop(self) -> None:
        self.running = False
        self.sampler.join()

    def emit(self, record: logging.LogRecord) -> None:
        t, msg = time.perf_counter(), record.getMessage()
        rss, peak = _rss_mib(), _peak_mib()
        sampled, self.window = max(self.window, rss), rss
        self.lines.append((t, msg, rss, peak, sampled))
        print(
            f"[{t - self.t0:8.1f} s rss {rss:7.0f} MiB peak {peak:7.0f} MiB] {msg}",
            file=sys.stderr,
            flush=True,
        )
        if self.trace and msg.startswith(("aggregations:", "audit: start")):
            current, traced_peak = tracemalloc.get_traced_memory()
            print(
                f"    traced now {current / 2**20:.0f} MiB, peak since last line "
                f"{traced_peak / 2**20:.0f} MiB",
                file=sys.stderr,
            )
            tracemalloc.reset_peak()
            for stat in tracemalloc.take_snapshot().statistics("lineno")[:8]:
                print(f"    {stat}", file=sys.stderr)

    def phases(self) -> dict[str, dict[str, float]]:
        """Per phase: seconds, ``ru_maxrss`` at its end (``peak_mib``) and the largest RSS
        sampled within it (``rss_mib``)."""
        out = {}
        for name, (begin, end) in PHASES.items():
            a = next((k for k, line in enumerate(self.lines) if line[1].startswith(begin)), None)
            b = next((k for k, line in enumerate(self.lines) if line[1].startswith(end)), None)
            if a is not None and b is not None:
                out[name] = {
                    "seconds": self.lines[b][0] - self.lines[a][0],
                    "peak_mib": self.lines[b][3],
                    "rss_mib": max(line[4] for line in self.lines[a + 1 : b + 1]),
                }
        return out

    def suppress_peak(self) -> float:
        """Largest RSS sampled while suppress() ran."""
        return max((line[4] for line in self.lines[1:]), default=0.0)


def child(n: int, group: int, dims: int, seed: int, time_limit: float, trace: bool) -> dict:
    """One size in this process: the measurements as a dict."""
    import numpy as np

    from service.sdc import primary
    from service.sdc.problem import TableProblem
    from service.sdc.suppress import cell_costs, suppress
    from service.sdc.unions import UnionSource
    from tests import generate as gen

    from .suppress import RULES

    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    g = gen.generate(shape=(n,) * dims, groups=(max(1, n // group),) * dims, seed=seed)
    m = g.magnitudes(RULES.depth)
    v = primary.assess(m, RULES)
    problem = TableProblem.of(
        g.table,
        g.values,
        v.sensitive,
        v.upper_protection,
        v.lower_protection,
        unions=UnionSource(m, RULES, contributions=g.contributions),
    )
    cost = cell_costs("value", g.values, g.counts)
    built, built_peak = time.perf_counter() - start, _peak_mib()

    recorder = _Recorder(trace)
    logger = logging.getLogger("sdc.suppress")
    logger.setLevel(logging.INFO)
    logger.addHandler(recorder)
    r = suppress(problem, cost=cost, method="fast", time_limit=time_limit)
    logger.removeHandler(recorder)
    recorder.stop()
    return {
        "n": n,
        "dims": dims,
        "group": group,
        "cells": int(g.n_cells),
        "sensitive": int(v.sensitive.sum()),
        "contributions": int(len(g.contributions.cell)),
        "build_seconds": built,
        "build_peak_mib": built_peak,
        "phases": recorder.phases(),
        "seconds": r.seconds,
        "peak_mib": _peak_mib(),
        "suppress_rss_mib": recorder.suppress_peak(),
        "status": r.status,
        "verdict": "-" if r.audit is None else r.audit.verdict,
        "suppressed": int(np.asarray(r.suppressed).sum()),
        "secondary": int(np.asarray(r.secondary).sum()),
    }


def fmt(row: dict) -> str:
    def phase(name: str) -> str:
        p = row["phases"].get(name)
        return "-" if p is None else f"{p['seconds']:.1f}"

    peaks = "/".join(
        f"{row['phases'][k]['rss_mib']:.0f}" if k in row["phases"] else "-"
        for k in ("protection", "clean-up", "aggregations", "audit")
    )
    return (
        f"{row['n']:>5} {row['cells']:>9,} {row['sensitive']:>8,} {row['build_seconds']:>7.1f} "
        f"{phase('setup'):>6} {phase('protection'):>7} {phase('clean-up'):>7} "
        f"{phase('aggregations'):>7} {phase('audit'):>7} {row['seconds']:>8.1f} "
        f"{row['peak_mib']:>7.0f} {row['suppress_rss_mib']:>7.0f}  {peaks:<24} "
        f"{row['secondary']:>7,} {row['status']:<10} {row['verdict']}"
    )


HEADER = (
    f"{'N':>5} {'cells':>9} {'sensitive':>8} {'build':>7} {'setup':>6} {'protect':>7} "
    f"{'clean':>7} {'aggreg':>7} {'audit':>7} {'total s':>8} {'peak':>7} {'in supp':>7}  "
    f"{'in p/c/a/audit':<24} {'second.':>7} {'status':<10} verdict"
)


def fit(rows: list[dict], key) -> float | None:
    """Exponent ``b`` of ``y = a cells^b`` fitted by least squares on logs."""
    import numpy as np

    pts = [(r["cells"], key(r)) for r in rows if key(r) and key(r) > 0]
    if len(pts) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 150, 220, 330])
    parser.add_argument(
        "--groups", type=int, default=10, help="leaves per subtotal of each dimension (10)"
    )
    parser.add_argument("--dims", type=int, default=2, help="dimensions of the table (2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--time-limit", type=float, default=3600.0, help="time limit of fast, seconds (3600)"
    )
    parser.add_argument("--trace", action="store_true", help="tracemalloc in the child")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        row = child(args.child, args.groups, args.dims, args.seed, args.time_limit, args.trace)
        print(json.dumps(row), flush=True)
        return

    print(
        f"fast suppression at scale: {args.dims}-D, 2-level hierarchies with {args.groups} "
        f"leaves per subtotal, p% (p=15) + minimum frequency 3, cost = value, seed {args.seed}, "
        f"time limit {args.time_limit:g} s; one subprocess per size"
    )
    rows = []
    lines = [HEADER, "-" * len(HEADER)]
    print(HEADER, flush=True)
    for n in args.sizes:
        cmd = [sys.executable, "-m", "benchmarks.scale", "--child", str(n)]
        cmd += ["--groups", str(args.groups), "--dims", str(args.dims), "--seed", str(args.seed)]
        cmd += ["--time-limit", str(args.time_limit)] + (["--trace"] if args.trace else [])
        done = subprocess.run(
            cmd, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1]
        )
        if done.returncode != 0:
            lines.append(f"{n:>5} failed with exit code {done.returncode}")
            print(lines[-1], flush=True)
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        lines.append(fmt(rows[-1]))
        print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    for what, key in (
        ("total seconds", lambda r: r["seconds"]),
        ("peak RSS", lambda r: r["peak_mib"]),
        ("peak RSS within suppress()", lambda r: r["suppress_rss_mib"]),
    ):
        b = fit(rows, key)
        if b is not None:
            print(f"{what} grows as cells^{b:.2f} (least squares on logs)")
    print(
        "seconds: build = contributions and primary cells; setup..audit = the phases of "
        "suppress() from its progress lines; peak: ru_maxrss of the child (instance "
        "included), MiB; in supp: largest RSS sampled (20 ms) while suppress() ran, and "
        "within protection / clean-up / aggregations / audit; second.: secondary cells."
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
