"""Time limits (issue 20 part 3): a suppression's ``time_limit`` is its whole wall time.

When the time runs out the result carries the best audited pattern, or no pattern with the
sensitive cells left unprotected and status ``time_limit`` -- never ``no_safe_pattern``,
which says the table has no safe pattern within the caller's constraints.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from service.sdc import primary
from service.sdc.audit import audit_pattern
from service.sdc.problem import TableProblem
from service.sdc.rules import MinimumFrequency, PPercent
from service.sdc.suppress import cell_costs, suppress
from service.sdc.suppress import result as suppress_result
from service.sdc.unions import UnionSource
from tests import generate as gen
from tests.mips import integer_program

RULES = primary.RuleSet(rules=(PPercent(15), MinimumFrequency(3)))
#: What a reply may take beyond its limit (README: 0.5 s or 5%, whichever is less), plus
#: the granularity of one solver step on a loaded test machine.
SLACK = 0.5


def instance(name: str):
    """As benchmarks/suppress.py ``instance()``: p% 15 plus frequency 3, cost = value."""
    g = gen.preset(name, seed=0)
    m = g.magnitudes(RULES.depth)
    v = primary.assess(m, RULES)
    return (
        g,
        v.sensitive,
        v.upper_protection,
        v.lower_protection,
        UnionSource(m, RULES, contributions=g.contributions),
        cell_costs("value", g.values, g.counts),
    )


@pytest.fixture(scope="module")
def cube():
    """20x20x10 (4,851 cells, 431 primaries): the fast method needs about two minutes."""
    return instance("20x20x10")


@pytest.fixture(scope="module")
def square():
    """30x30 (961 cells, 97 primaries): fast about 0.5 s with its audit; exact longer."""
    return instance("30x30")


def run(inst, method, limit):
    g, sens, up, lo, unions, cost = inst
    start = time.perf_counter()
    r = suppress(
        TableProblem.of(g.table, g.values, sens, up, lo, unions=unions),
        cost=cost,
        method=method,
        time_limit=limit,
    )
    return r, time.perf_counter() - start


def check_returned(inst, r):
    """A returned pattern is a success only if it passes an independent audit."""
    g, sens, up, lo, unions, _ = inst
    assert r.safe and r.audit.verdict == "safe" and r.unprotected.size == 0
    assert r.suppressed[sens].all()
    assert audit_pattern(
        TableProblem.of(g.table, g.values, sens, up, lo, unions=unions), r.suppressed, time_limit=60
    ).safe


def check_unprotected(inst, r, limit="time limit"):
    """No pattern, and the sensitive cells left unprotected, named; ``limit``: the words
    the message gives the limit reached."""
    sens = inst[1]
    assert r.status == "time_limit" and not r.safe
    assert not r.suppressed.any() and not r.secondary.any()
    assert r.unprotected.size > 0 and sens[r.unprotected].all()
    assert np.all(np.diff(r.unprotected) > 0)
    assert limit in r.message


@pytest.mark.parametrize("method", ["fast", "exact"])
@pytest.mark.parametrize("limit", [0.5, 1.5])
def test_out_of_time_during_protection_names_the_unprotected_cells(cube, method, limit):
    r, wall = run(cube, method, limit)
    assert wall <= limit + SLACK, wall
    check_unprotected(cube, r)
    assert "sensitive cell" in r.message and "no pattern is returned" in r.message


@pytest.mark.parametrize("method", ["fast", "exact"])
def test_out_of_work_during_protection_names_only_the_cells_not_reached(cube, method):
    """The same stop in deterministic mode, where how far the protection got does not
    depend on the machine's load (on the wall clock a loaded machine may not reach one cell
    in 0.5 s): fewer than all are named, the pattern reached protects the cells it got to
    (checked on the wall clock once the work is spent, as the audit is)."""
    g, sens, up, lo, unions, cost = cube
    r = suppress(
        TableProblem.of(g.table, g.values, sens, up, lo, unions=unions),
        cost=cost,
        method=method,
        time_limit=600,
        work_limit=5_000,
    )
    check_unprotected(cube, r, "work limit")
    assert "sensitive cell" in r.message and "no pattern is returned" in r.message
    assert "could not be checked" not in r.message
    assert 0 < r.unprotected.size < sens.sum()


@pytest.mark.parametrize("limit", [0.5, 1.0, 2.0])
def test_exact_within_its_limit_returns_an_audited_pattern(square, limit):
    r, wall = run(square, "exact", limit)
    assert wall <= limit + SLACK, wall
    if r.safe:
        assert r.status in ("optimal", "time_limit", "feasible")
        check_returned(square, r)
    else:
        check_unprotected(square, r)


def test_fast_within_its_limit(square):
    r, wall = run(square, "fast", 2.0)
    assert wall <= 2.0 + SLACK, wall
    assert r.status == "feasible"
    check_returned(square, r)


def _starve_the_final_audit(monkeypatch) -> None:
    """The final audit with (almost) no time: the fast method's (``fast.audited``, whose
    audit the result reuses) and the result's own (exact's, or any other pattern)."""
    real = suppress_result.audit_pattern

    def starved(*args, **kw):
        kw["time_limit"] = 1e-9
        return real(*args, **kw)

    monkeypatch.setattr(suppress_result, "audit_pattern", starved)
    monkeypatch.setattr(sys.modules["service.sdc.suppress.fast"], "audit_pattern", starved)


def test_an_audit_out_of_time_is_uncertified_not_safe(square, monkeypatch):
    """The final audit gets (almost) no time: the verdict is uncertified, no pattern is
    returned as safe, the status is a time limit and the cells are named."""
    _starve_the_final_audit(monkeypatch)
    r, _ = run(square, "fast", 5.0)
    check_unprotected(square, r)
    assert r.audit is not None and r.audit.verdict == "uncertified"
    assert "uncertified" in r.message


def test_an_audit_out_of_time_under_a_work_limit_says_time(square, monkeypatch):
    """In deterministic mode the search's deadline is work, but the audit's is seconds: an
    audit out of time is not reported as a work limit (before, every "time limit" of the
    message, the audit's reasons included, was rewritten as "work limit")."""
    _starve_the_final_audit(monkeypatch)
    g, sens, up, lo, unions, cost = square
    problem = TableProblem.of(g.table, g.values, sens, up, lo, unions=unions)
    r = suppress(problem, cost=cost, method="fast", time_limit=10_000, work_limit=10**9)
    assert r.status == "time_limit" and not r.safe
    assert r.audit is not None and r.audit.verdict == "uncertified"
    assert r.message.startswith("the audit reached its time limit")
    assert "work limit" not in r.message
    assert "time limit of 1e-09 s reached" in r.message


def test_a_table_without_a_safe_pattern_is_not_a_time_limit():
    """The opposite case stays ``no_safe_pattern`` (tests/test_suppress.py has more)."""
    from service.sdc.table import Hierarchy, Table

    t = Table([Hierarchy.flat("r", ["A", "B"], "T"), Hierarchy.flat("c", ["I", "II"], "T")])
    x = t.fill_margins(np.where(t.is_leaf, 10.0, 0.0))
    sens = np.zeros(t.n_cells, bool)
    sens[t.cell_index(("A", "I"))] = True
    forbid = ~sens
    r = suppress(
        TableProblem.of(t, x, sens, 5.0 * sens, 5.0 * sens),
        cost=cell_costs("value", x),
        forbidden=forbid,
        time_limit=5,
    )
    assert r.status == "no_safe_pattern" and r.unprotected.size == 0


def api_body(inst, limit, method):
    """The 20x20x10 table as values with protection levels (no contributions)."""
    g, sens, up, lo, _, _ = inst
    keys = g.table.keys.tolist()
    dims = []
    for d, name in enumerate(g.table.names):
        leaves = list(dict.fromkeys(k[d] for k in keys if k[d] != "Total"))
        dims.append({"name": name, "leaves": leaves})
    cells = []
    for j, k in enumerate(keys):
        c = {"key": k, "value": float(g.values[j])}
        if sens[j]:
            c["protection"] = {"upper": float(up[j]), "lower": float(lo[j])}
        cells.append(c)
    return {
        "structure": {"dimensions": dims, "tolerance": 1e-6},
        "cells": cells,
        "method": method,
        "time_limit": limit,
    }


@pytest.mark.parametrize("method", ["fast", "exact"])
def test_api_reply_within_the_limit_names_unprotected_cells(client, cube, method):
    limit = 1.5
    body = api_body(cube, limit, method)
    start = time.perf_counter()
    r = client.post("/v1/suppress", json=body)
    wall = time.perf_counter() - start
    assert r.status_code == 200, r.text
    reply = r.json()
    solver = reply["solver"]
    assert wall <= limit + SLACK, wall
    assert solver["seconds"] <= limit
    assert reply["safe"] is False and reply["loss"] is None
    assert solver["status"] == "time_limit" and solver["time_limit"] == limit
    assert "time limit" in solver["message"]
    primaries = {tuple(c["key"]) for c in reply["cells"] if c["status"] == "primary"}
    unprotected = {tuple(k) for k in solver["unprotected"]}
    assert unprotected and unprotected <= primaries
    assert "secondary" not in {c["status"] for c in reply["cells"]}


def test_each_solver_stop_names_its_limit():
    """What stopped a run is read from HiGHS, not assumed (issue 16 part 4): an undecided
    verdict after a node limit used to read "time limit reached in the MIP"."""
    from service.sdc import highs

    h = integer_program()
    assert highs.run(h, time.perf_counter() + 60) is highs.Outcome.OPTIMAL
    assert highs.stopped_by(h) is None
    h = integer_program(time_limit=0.0)  # HiGHS's own options, run directly
    h.run()
    assert highs.outcome(h) is highs.Outcome.TIME_LIMIT and highs.stopped_by(h) == "time limit"
    h = integer_program(mip_max_nodes=3)
    h.run()
    assert highs.outcome(h) is highs.Outcome.TIME_LIMIT and highs.stopped_by(h) == "node limit"
    h = integer_program(mip_max_improving_sols=1)
    h.run()
    assert highs.outcome(h) is highs.Outcome.TIME_LIMIT
    assert highs.stopped_by(h) == "solution limit"
    clock = highs.WorkClock(wall_deadline=time.perf_counter() + 60)
    with highs.using(clock):
        h = integer_program()
        assert highs.run(h, 2_000) is highs.Outcome.TIME_LIMIT
        assert highs.stopped_by(h) == "work limit"
        # Past the budget nothing runs, and the run says why.
        h = integer_program()
        assert highs.run(h, clock.used) is highs.Outcome.TIME_LIMIT
        assert highs.stopped_by(h) == "work limit"
    # The wall clock's deadline on a work clock is a time limit again.
    clock = highs.WorkClock(wall_deadline=time.perf_counter() - 1)
    with highs.using(clock):
        h = integer_program()
        assert highs.run(h, 10**9) is highs.Outcome.TIME_LIMIT
        assert highs.stopped_by(h) == "time limit"


def test_no_attack_is_set_up_past_the_deadline(cube, monkeypatch):
    """Once the time is out, the check of which sensitive cells the partial pattern leaves
    unprotected names the rest 'not checked' without setting up their LPs: each attack
    HiGHS refuses still cost ~20 us of set-up, and a 36 KB request whose hierarchies are
    chains of single children (10^6 cells, all sensitive) answered its 1 s limit after
    33 s (a campaign, h51)."""
    from service.sdc import highs
    from service.sdc.suppress import lps

    late = []
    reach = lps.Attacker.reach

    def counted(self, i, sense):
        # A check of the clock that passes just before the deadline can set up one attack
        # just after it (failed once in five runs, a helper, h56): late means well past it.
        if highs.now() >= self.p.deadline + 0.05:
            late.append(i)
        return reach(self, i, sense)

    monkeypatch.setattr(lps.Attacker, "reach", counted)
    r, _ = run(cube, "fast", 0.5)
    check_unprotected(cube, r)
    assert late == []


@pytest.mark.parametrize("prepared", [0.3, 1.2], ids=["within", "spent"])
def test_adjust_time_limit_is_the_whole_request(client, monkeypatch, prepared):
    """/v1/adjust's ``time_limit`` is the request's whole wall time, as /v1/suppress's
    and /v1/round's: the solve gets what is left after the table is read (and a reply's
    share). Until 2026-11-27 it covered the solve alone (6.6 s for a limit of 2 on a
    table of 195k cells). The table is made slow to read here (``prepared`` seconds): the
    solve gets at most the limit less that; a table read past the limit gets the least
    time and the reply says ``time_limit``, within the limit plus the slack."""
    from schemas.adjust import AdjustRequest
    from service.pipeline import adjust as pipeline

    read, solve = pipeline.checked_table_inputs, pipeline.adjust
    given = []

    def slow_read(*args, **kwargs):
        time.sleep(prepared)
        return read(*args, **kwargs)

    def timed_solve(*args, time_limit, **kwargs):
        given.append(time_limit)
        return solve(*args, time_limit=time_limit, **kwargs)

    monkeypatch.setattr(pipeline, "checked_table_inputs", slow_read)
    monkeypatch.setattr(pipeline, "adjust", timed_solve)
    limit = 1.0
    body = {**AdjustRequest.model_config["json_schema_extra"]["examples"][0], "time_limit": limit}
    start = time.perf_counter()
    r = client.post("/v1/adjust", json=body)
    wall = time.perf_counter() - start
    assert r.status_code == 200, r.text
    solver = r.json()["solver"]
    assert solver["time_limit"] == limit
    (got,) = given
    assert wall <= limit + SLACK, wall
    if prepared < limit:
        # The limit less the reading (0.3 s and more) and the reply's share (0.05 s).
        assert 0.3 < got <= limit - prepared - 0.05
        assert solver["status"] == "optimal" and r.json()["adjusted"] is True
    else:
        assert got == 0.0
        assert solver["status"] == "time_limit" and r.json()["adjusted"] is False
        assert "time limit" in solver["message"]


@pytest.mark.parametrize(
    "route, request_class, solver",
    [("suppress", "SuppressRequest", "suppress"), ("audit", "AuditRequest", "audit_pattern")],
)
def test_the_making_of_the_problem_is_deducted_from_the_time_limit(
    client, monkeypatch, route, request_class, solver
):
    """/v1/suppress's search and /v1/audit's solve get the request's limit less what was
    spent before them, the making of the core's problem included (count tables'
    dominance conditions are pruned there): until 2026-11-27 that time came
    on top of the limit. The problem is made slow here (0.4 s of a limit of 2): the
    solver gets at most 2 - 0.4."""
    import importlib

    import schemas.tables

    pipeline = importlib.import_module(f"service.pipeline.{route}")
    make, solve = pipeline.table_problem, getattr(pipeline, solver)
    given = []

    def slow_make(*args, **kwargs):
        time.sleep(0.4)
        return make(*args, **kwargs)

    def timed_solve(*args, time_limit, **kwargs):
        given.append(time_limit)
        return solve(*args, time_limit=time_limit, **kwargs)

    monkeypatch.setattr(pipeline, "table_problem", slow_make)
    monkeypatch.setattr(pipeline, solver, timed_solve)
    limit = 2.0
    example = getattr(schemas.tables, request_class).model_config["json_schema_extra"]
    body = {**example["examples"][0], "time_limit": limit}
    r = client.post(f"/v1/{route}", json=body)
    assert r.status_code == 200, r.text
    (got,) = given
    # Less the reply's reserve too (min(0.5 s, 5%)): /v1/audit did not keep it until
    # 2026-11-27, and a 100,000-cell audit's reply (0.9 s) came after the limit.
    assert 0.0 < got <= limit - 0.4 - min(0.5, 0.05 * limit)


def hierarchical_count_body(limit: float) -> dict:
    """A 3-D count table, 4,805 cells: two dimensions of 3 x 3 x 2 leaves under three
    levels of subtotals, a target of 4 categories, counts from 0 to 30; seed 001's
    extended rules (70 dominance conditions) and the threshold rule; 60% of the leaves
    hidden (seed 5 of the generator the notes of h56 describe)."""
    import itertools
    import random

    rng = random.Random(5)

    def hierarchy(name):
        children, level = {}, ["Total"]
        for b in (3, 3, 2):
            below = []
            for p in level:
                kids = [f"{name if p == 'Total' else p}.{j}" for j in range(b)]
                children[p], below = kids, below + kids
            level = below
        return {"name": name, "children": children}, level

    (m, m_leaves), (a, a_leaves) = hierarchy("m"), hierarchy("a")
    targets = [f"y{i}" for i in range(4)]
    cells = []
    for key in itertools.product(m_leaves, a_leaves, targets):
        value = rng.choice([0, 1, 1, 2, 3, 5, 8, 13, 30])
        cells.append({"key": list(key), "value": value, "suppressed": rng.random() < 0.6})
    return {
        "structure": {"dimensions": [m, a, {"name": "y", "leaves": targets}]},
        "cells": cells,
        "counts": {"threshold": 3, "extended": {}, "keys": ["m"], "targets": ["y"]},
        "time_limit": limit,
    }


def test_count_table_conditions_are_pruned_within_the_time_limit(client):
    """The dominance conditions that hold on every table the relations allow are pruned
    before the audit, by one LP each: a model was built anew for each (HiGHS's presolve
    on a 4,805-cell table, 0.2 s), within 5 s of their own, which came on top of the
    request's limit: this /v1/audit with a limit of 2 answered after 6 s. The models are
    now kept per block of cells (0.02 s a condition) and the pruning gets at most half of
    the time left: within the limit and its slack, every interval certified."""
    start = time.perf_counter()
    r = client.post("/v1/audit", json=hierarchical_count_body(2.0))
    wall = time.perf_counter() - start
    assert r.status_code == 200, r.text
    assert wall <= 2.0 + SLACK, wall
    assert r.json()["solver"]["status"] == "optimal"
