"""Progress lines of the fast suppression method (issue 16 part 3): logger ``sdc.suppress``,
INFO, with the real counts of the run, throttled by time and silent above INFO."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from service.sdc import magnitudes, primary
from service.sdc.problem import TableProblem
from service.sdc.rules import PPercent
from service.sdc.suppress import cell_costs, fast, suppress
from service.sdc.unions import UnionSource

from .test_suppress import TABLE_3, TABLE_6, seed_table


def lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sdc.suppress"]


def args(record: logging.LogRecord) -> tuple:
    """The lazy %-arguments of a line (the numbers, unformatted)."""
    assert isinstance(record.args, tuple)
    return record.args


def table_3_problem():
    """Seed 002 Table 3: A,I (100) and A,III (150) are singletons under p% = 20, with their
    contributions, so the aggregation rounds run (row A may not publish their sum)."""
    t, x = seed_table(TABLE_3)
    ruleset = primary.RuleSet((PPercent(20.0),))
    a1, a3 = t.cell_index(("A", "I")), t.cell_index(("A", "III"))
    c = magnitudes.Contributions(np.array([a1, a3]), np.array([100.0, 150.0]))
    m = magnitudes.from_contributions(t.n_cells, c.cell, c.value, depth=ruleset.depth)
    known = np.isin(np.arange(t.n_cells), [a1, a3])
    sens = primary.assess(m, ruleset).sensitive & known
    unions = UnionSource(m, ruleset, known=known, contributions=c)
    return t, x, TableProblem.of(t, x, sens, 0.5 * x * sens, 0.5 * x * sens, unions=unions)


def test_a_run_logs_its_start_progress_phases_and_end(caplog, monkeypatch):
    """Every requirement gets a progress line when the interval is 0; the counts are the
    run's: 16 cells (3x3 with margins), 2 sensitive cells with an upper and a lower level
    each (4 requirements), and the end line's counts are the result's."""
    monkeypatch.setattr(fast, "PROGRESS_SECONDS", 0.0)
    caplog.set_level(logging.INFO, logger="sdc.suppress")
    t, x, problem = table_3_problem()
    assert int(problem.sensitive.sum()) == 2
    r = suppress(problem, cost=cell_costs("value", x), method="fast")
    assert r.safe, r.message
    records = lines(caplog)
    messages = [rec.getMessage() for rec in records]

    assert messages[0] == "suppress (fast): start, 16 cells, 2 sensitive cells, 8 relations"
    assert messages[1] == (
        "protection: start, 2 sensitive cells, 4 requirements, 2 forced suppressions"
    )
    # One progress line per requirement (interval 0), before it is met: k of 4, and the
    # sensitive cells done only once both of a cell's requirements are.
    progress = [rec for rec in records if rec.msg.startswith("protection: %d of")]
    assert [args(rec)[2] for rec in progress] == [0, 1, 2, 3]
    assert [args(rec)[3] for rec in progress] == [4, 4, 4, 4]
    assert [args(rec)[1] for rec in progress] == [2, 2, 2, 2]
    assert [args(rec)[0] for rec in progress] == [0, 0, 1, 1]
    # Suppressions never shrink during protection, and start from the 2 sensitive cells.
    suppressed = [args(rec)[5] for rec in progress]
    assert suppressed[0] == 2 and suppressed == sorted(suppressed)
    (end,) = [rec for rec in records if rec.msg.startswith("protection: end")]
    assert args(end)[0] == 2 and args(end)[2] >= suppressed[-1]

    # Phases in order: protection, clean-up, aggregation rounds, audit, end.
    order = [
        "suppress (fast): start",
        "protection: start",
        "protection: end",
        "clean-up: start",
        "clean-up: end",
        "aggregations: start",
        "aggregations: round 1",
        "aggregations: end",
        "audit: start",
        "suppress (fast): end",
    ]
    at = [next(k for k, m in enumerate(messages) if m.startswith(o)) for o in order]
    assert at == sorted(at)
    # The last round finds nothing left to protect; the pattern then has a third cell in
    # row A (the singletons' sum), so the aggregation phase added at least one cell.
    rounds = [rec for rec in records if rec.msg.startswith("aggregations: round %d, %d groups")]
    assert args(rounds[-1])[5] == 0 and args(rounds[0])[5] > 0
    row_a = [t.cell_index(("A", k)) for k in ("I", "II", "III")]
    assert r.suppressed[row_a].all()
    n_suppressed = int(r.suppressed.sum())
    assert messages[-1] == (
        f"suppress (fast): end, status feasible, audit safe, {n_suppressed} cells suppressed, "
        f"{r.seconds:.1f} s"
    )
    assert messages[-2] == f"audit: start, {n_suppressed} cells suppressed"


def test_progress_is_throttled_by_time(caplog, monkeypatch):
    """With the default interval a run of well under a second logs no progress line, only
    its phases: seed 002 Table 6, A,I protected by A,III + B,I + B,III (4 suppressed). One
    protection LP: the upward deviation, negated, stays within every cell's room and
    proves the downward requirement without a second LP."""
    assert fast.PROGRESS_SECONDS >= 1.0
    caplog.set_level(logging.INFO, logger="sdc.suppress")
    t, x = seed_table(TABLE_6)
    sens = np.zeros(t.n_cells, bool)
    sens[t.cell_index(("A", "I"))] = True
    r = suppress(TableProblem.of(t, x, sens, 30.0 * sens, 30.0 * sens), cost=cell_costs("value", x))
    messages = [rec.getMessage() for rec in lines(caplog)]
    assert not [m for m in messages if " of " in m and m.startswith("protection")]
    assert (
        messages[1] == "protection: start, 1 sensitive cells, 2 requirements, 1 forced suppressions"
    )
    assert (
        messages[2]
        == "protection: end, 1 sensitive cells protected, 1 protection LPs, 4 cells suppressed"
    )
    assert int(r.suppressed.sum()) == 4
    # No contributions: no aggregation phase.
    assert not [m for m in messages if m.startswith("aggregations")]
    assert messages[-1].startswith("suppress (fast): end, status feasible, audit safe, 4 cells")


@pytest.mark.parametrize("level", [logging.WARNING, logging.ERROR])
def test_silent_above_info(caplog, monkeypatch, level):
    """Above INFO nothing is emitted, even with progress due at every requirement."""
    monkeypatch.setattr(fast, "PROGRESS_SECONDS", 0.0)
    caplog.set_level(level, logger="sdc.suppress")
    _, x, problem = table_3_problem()
    r = suppress(problem, cost=cell_costs("value", x), method="fast")
    assert r.safe
    assert lines(caplog) == []
