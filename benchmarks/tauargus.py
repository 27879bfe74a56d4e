"""The tau-ARGUS engine (PyPI ``pytauargus``, optional extra ``tauargus``) on our instances.

Used by :mod:`benchmarks.suppress`. A generated table (:mod:`tests.generate`) is written
as tau-ARGUS microdata (fixed-width ``.asc`` with its ``.rda`` metadata, one record per
respondent and leaf cell; a ``.hrc`` file for each 2-level dimension), with a batch ``.arb``
that applies ``P(15,1)|FREQ(3,0)`` (the p%-rule with one intruder and minimum frequency 3,
frequency protection range 0: the same rules as ours) and suppresses by ``OPT`` (optimal,
Fischetti-Salazar, HiGHS inside) or ``MOD`` (modular, HiTaS) and writes the table as an
intermediate ``.tab`` (``code;...;value;freq;cost;status;lower;upper``). The engine runs in
a child process (pytauargus does not validate concurrent engine calls in one process, and
a child can be stopped at the time limit); its statuses ``U`` (primary) and ``M``
(secondary) are read back as the pattern, which our audit then judges.

Run alone (``python -m benchmarks.tauargus``) it prints whether the engine can run here.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.generate import GeneratedTable

SAFETY_RULES = "P(15,1)|FREQ(3,0)"
RESPONSE = "turnover"


def availability() -> tuple[bool, str]:
    """Whether the engine can run here, and a sentence saying so (or precisely why not)."""
    try:
        version = importlib.metadata.version("pytauargus")
    except importlib.metadata.PackageNotFoundError:
        return False, ("pytauargus is not installed (optional extra: pip install -e '.[tauargus]')")
    probe = "import pytauargus._tauargus, pytauargus.engine as e; e.Engine(); print('ok')"
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return False, f"pytauargus {version} installed but its engine did not start in 60 s"
    if done.returncode != 0 or "ok" not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return False, f"pytauargus {version} installed but its native engine fails: {last}"
    return True, f"pytauargus {version} (native tau-ARGUS engine with HiGHS, in-wheel)"


@dataclass
class TauResult:
    method: str
    status: str  # "ok", "time_limit", "error"
    message: str
    seconds: float
    suppressed: np.ndarray | None = None  # bool per cell of our table
    primary: np.ndarray | None = None  # tau-ARGUS's own primary (U) cells


def tau_codes(g: GeneratedTable, d: int) -> list[str]:
    """Codes of dimension ``d`` as written for tau-ARGUS: the total as ``Total``, every other
    code as its position, zero-padded to one width. tau-ARGUS right-aligns microdata codes
    in their fixed-width field but matches them against a hierarchy file as written, so
    codes of different lengths ("a9", "a10") are not found ("code not in code list")."""
    h = g.table.dimensions[d]
    width = len(str(h.n_codes - 1))
    return ["Total"] + [f"{i:0{width}d}" for i in range(1, h.n_codes)]


def _hrc(path: Path, g: GeneratedTable, d: int, codes: list[str]) -> str:
    """tau-ARGUS hierarchy file: one code a line, ``@`` per level below the first."""
    h = g.table.dimensions[d]
    depth = np.zeros(h.n_codes, dtype=int)
    for i in range(1, h.n_codes):  # pre-order: a parent comes before its children
        depth[i] = depth[h.parent[i]] + 1
    lines = ["@" * (depth[i] - 1) + codes[i] for i in range(1, h.n_codes)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def write_inputs(g: GeneratedTable, method: str, workdir: Path, minutes: int) -> dict:
    """Microdata, metadata, hierarchies and the batch; returns pytauargus' file map."""
    from pytauargus import protect

    t = g.table
    names = list(t.names)
    pos = t.key_positions[g.leaf_cell]
    codes = [tau_codes(g, d) for d in range(len(names))]
    micro = {
        name: np.asarray(codes[d], dtype=object)[pos[:, d]].tolist() for d, name in enumerate(names)
    }
    micro[RESPONSE] = g.leaf_value.astype(np.int64).tolist()
    hrc = {
        name: _hrc(workdir / f"{name}.hrc", g, d, codes[d])
        for d, (name, h) in enumerate(zip(names, t.dimensions))
        if not h.is_leaf[1:].all()
    }
    suppress = (
        f"OPT(1,{minutes})" if method == "OPT" else f"MOD(1,{minutes},1,1,1)"
    )  # singleton and min-frequency protection on
    res = protect(
        micro,
        names,
        response=RESPONSE,
        safety_rules=SAFETY_RULES,
        suppress=suppress,
        hrc=hrc or None,
        totcode="Total",
        decimals=0,
        workdir=str(workdir),
        run=False,
    )
    return res.files


def read_pattern(g: GeneratedTable, tab: Path) -> tuple[np.ndarray, np.ndarray]:
    """Suppressed (``U`` or ``M``) and primary (``U``) cells of our table from a ``.tab``."""
    n_dims = len(g.table.dimensions)
    ours = [dict(zip(tau_codes(g, d), g.table.dimensions[d].codes)) for d in range(n_dims)]
    rows = [line.split(";") for line in tab.read_text(encoding="utf-8").splitlines() if line]
    codes = np.array(
        [[ours[d][c.strip().strip('"').strip()] for d, c in enumerate(r[:n_dims])] for r in rows],
        dtype=object,
    )
    status = np.array([r[n_dims + 3] for r in rows])
    cells = np.asarray(g.table.cell_indices(codes.T))
    suppressed = np.zeros(g.n_cells, bool)
    primary = np.zeros(g.n_cells, bool)
    suppressed[cells[np.isin(status, ("U", "M"))]] = True
    primary[cells[status == "U"]] = True
    return suppressed, primary


def run(g: GeneratedTable, method: str, time_limit: float, workdir: str | None = None) -> TauResult:
    """Run tau-ARGUS ``method`` ("OPT" or "MOD") on ``g``; stop it after ``time_limit`` s.

    The engine's own limit is given in whole minutes (legacy batch syntax), at least 1; the
    child process is killed at ``time_limit`` plus a minute whatever the engine does.
    """
    wd = Path(workdir or tempfile.mkdtemp(prefix=f"tauargus_{method}_"))
    wd.mkdir(parents=True, exist_ok=True)
    minutes = max(1, int(time_limit // 60))
    files = write_inputs(g, method, wd, minutes)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pytauargus.engine import run_batch; run_batch(sys.argv[1])",
                files["arb"],
            ],
            capture_output=True,
            text=True,
            timeout=time_limit + 60,
            cwd=wd,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        return TauResult(
            method,
            "time_limit",
            f"killed after {time_limit + 60:.0f} s",
            time.perf_counter() - start,
        )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return TauResult(method, "error", last, seconds)
    suppressed, primary = read_pattern(g, Path(files["tab1"]))
    return TauResult(method, "ok", "", seconds, suppressed, primary)


def main() -> None:
    ok, why = availability()
    print(("available: " if ok else "not available: ") + why)


if __name__ == "__main__":
    main()
