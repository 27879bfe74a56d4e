"""Partial suppression's narrowest intervals (issue 17 part 3; seed 000; Salazar 2003):
``method: "partial"`` on ``/v1/suppress`` and :mod:`service.sdc.suppress.partial`.

The LP of the module docstring is solved by cut generation; here it is checked against a
hand derivation, against the same LP written out in full (one deviation per requirement,
solved by scipy's ``linprog``, no cuts), against the fast pattern's published intervals
(a feasible point of the LP, so never narrower), and every result against the audit with
its published intervals as a-priori bounds.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from service.sdc.audit import audit_pattern
from service.sdc.problem import TableProblem
from service.sdc.suppress import cell_costs, suppress
from service.sdc.suppress.partial import LEVEL_MARGIN, PartialResult, partial
from service.sdc.suppress.problem import prepare, requirements
from service.sdc.table import Hierarchy, Table
from tests.callers import FILTER_KEY
from tests.test_api_suppress import body
from tests.test_partial_suppression import with_published_bounds
from tests.test_suppress import TABLE_3, TABLE_6, random_instance, seed_table
from tests.test_suppress_reply import by_key
from tests.test_time_limits import SLACK, api_body, cube  # noqa: F401 (fixture)

# Seed 002 Table 6 with A,I sensitive (upper and lower level 30), cost = value. A deviation
# that moves A,I is a sum of cycles of the table with margins; per unit of A,I's move a
# cycle costs 160 (A,I) plus its three other corners, and the cheapest is A,III, B,I,
# B,III (340 + 40 + 60 = 440; next A,II, B,I, B,II: 500; any margin costs >= 180 + 880).
# Up: A,I +30, A,III -30, B,I -30, B,III +30; down: the opposite signs, i.e. the other
# end of each interval. So each of the four cells is published as value -30 .. value +30:
# total width 8 x 30 = 240, weighted 2 x 30 x (160 + 340 + 40 + 60) = 36,000.
CYCLE = {
    ("A", "I"): (130.0, 190.0),
    ("A", "III"): (310.0, 370.0),
    ("B", "I"): (10.0, 70.0),
    ("B", "III"): (30.0, 90.0),
}


def table_6_problem():
    t, x = seed_table(TABLE_6)
    sens = np.zeros(t.n_cells, bool)
    sens[t.cell_index(("A", "I"))] = True
    level = np.where(sens, 30.0, 0.0)
    return t, x, TableProblem.of(t, x, sens, level, level)


def intervals(t, r: PartialResult) -> dict:
    assert r.published_lower is not None and r.published_upper is not None
    return {
        t.key(j): (float(r.published_lower[j]), float(r.published_upper[j]))
        for j in np.flatnonzero(r.suppressed)
    }


def published_bounds_audit(problem: TableProblem, r: PartialResult):
    """The audit an intruder's knowledge amounts to, run here apart from the method: the
    cells with an interval suppressed, their published intervals as a-priori bounds. The
    levels are capped at the a-priori range, the service's reading (module
    :mod:`service.sdc.suppress`, Readings): nothing hides a cell beyond its bounds."""
    assert r.published_lower is not None and r.published_upper is not None
    lower = np.where(r.suppressed, r.published_lower, problem.lower_bounds)
    upper = np.where(r.suppressed, r.published_upper, problem.upper_bounds)
    assert (lower >= problem.lower_bounds).all() and (upper <= problem.upper_bounds).all()
    bounded = TableProblem.of(
        problem.structure,
        problem.values,
        problem.sensitive,
        np.minimum(problem.upper_protection, problem.upper_bounds - problem.values),
        np.minimum(problem.lower_protection, problem.values - problem.lower_bounds),
        lower,
        upper,
        unions=problem.unions,
    )
    return audit_pattern(bounded, r.suppressed, time_limit=60)


def full_lp(problem: TableProblem, cost: np.ndarray) -> float:
    """The narrowest total weighted width by the LP written out in full (no cuts): per
    requirement ``k`` a deviation ``z^k`` with ``A z^k = 0``, ``z^k_i`` at the level and
    ``-d^- <= z^k <= d^+`` (module docstring of :mod:`service.sdc.suppress.partial`)."""
    p = prepare(problem, cost, None, None, np.inf)
    a = sp.csr_matrix(problem.relations)
    m, n = a.shape
    reqs = requirements(p)
    k = len(reqs)
    nv = 2 * n + k * n
    c = np.concatenate([cost, cost, np.zeros(k * n)])
    eq_blocks, eq_rhs, ub_blocks = [], [], []
    eye = sp.identity(n, format="csr")
    for r, (i, sense, level) in enumerate(reqs):
        place = sp.csr_matrix(([1.0], ([0], [r])), shape=(1, k))
        z = sp.kron(place, a)  # A z^r
        eq_blocks.append(sp.hstack([sp.csr_matrix((m, 2 * n)), z]))
        eq_rhs.append(np.zeros(m))
        pick = sp.csr_matrix(([1.0], ([0], [2 * n + r * n + i])), shape=(1, nv))
        eq_blocks.append(pick)
        eq_rhs.append([sense * level])
        zr = sp.kron(place, eye)
        ub_blocks.append(sp.hstack([-eye, sp.csr_matrix((n, n)), zr]))  # z - d+ <= 0
        ub_blocks.append(sp.hstack([sp.csr_matrix((n, n)), -eye, -zr]))  # -z - d- <= 0
    bounds = [(0.0, None) if p.allowed[j] else (0.0, 0.0) for j in range(n)]
    bounds += [(0.0, float(p.room_down[j])) if p.allowed[j] else (0.0, 0.0) for j in range(n)]
    bounds += [(None, None)] * (k * n)
    out = linprog(
        c,
        A_ub=sp.vstack(ub_blocks),
        b_ub=np.zeros(2 * k * n),
        A_eq=sp.vstack(eq_blocks),
        b_eq=np.concatenate([np.asarray(b, float) for b in eq_rhs]),
        bounds=bounds,
        method="highs",
    )
    assert out.status == 0, out.message
    return float(out.fun)


def test_table_6_narrowest_intervals_are_the_cheapest_cycle():
    t, x, problem = table_6_problem()
    cost = cell_costs("value", x)
    r = partial(problem, cost=cost)
    assert isinstance(r, PartialResult) and r.method == "partial"
    assert r.status == "optimal" and r.safe and r.audit is not None
    got = intervals(t, r)
    assert set(got) == set(CYCLE)
    margin = LEVEL_MARGIN * 30
    for key, (lo, hi) in CYCLE.items():
        assert got[key] == pytest.approx((lo - margin, hi + margin), abs=1e-9)
    assert r.objective == pytest.approx(36_000 * (1 + LEVEL_MARGIN), rel=1e-9)
    assert r.width == pytest.approx(240 * (1 + LEVEL_MARGIN), rel=1e-9)
    # Converged: the bound is the narrowest for the levels themselves, the intervals
    # carry the margin on top.
    assert r.lower_bound == pytest.approx(36_000, rel=1e-9)
    assert sorted(t.key(j) for j in np.flatnonzero(r.secondary)) == sorted(
        k for k in CYCLE if k != ("A", "I")
    )
    # The same LP in full (no cuts) agrees.
    assert full_lp(problem, cost) == pytest.approx(36_000, rel=1e-9)
    # The feasibility intervals from the published intervals are the published ones.
    iv = r.audit.intervals
    for j, lo, hi in zip(iv.cells, iv.lower, iv.upper):
        assert (lo, hi) == pytest.approx(got[t.key(int(j))], abs=1e-6)
    assert published_bounds_audit(problem, r).verdict == "safe"


def test_unit_costs_total_width_is_eight_levels():
    """Cost ``unity``: any two cycles through A,I (one per direction) cost 4 x 30 each, and
    nothing moves A,I for less (a cycle has at least four cells): total width 240."""
    t, x, problem = table_6_problem()
    r = partial(problem, cost=cell_costs("unity", x))
    assert r.safe and r.status == "optimal"
    assert r.objective == pytest.approx(240 * (1 + LEVEL_MARGIN), rel=1e-9)
    assert published_bounds_audit(problem, r).verdict == "safe"


def test_no_cycle_left_means_no_intervals():
    """A forbidden row and column leave A,I no cycle: no intervals, never a safe reply."""
    t, x, problem = table_6_problem()
    forbidden = np.zeros(t.n_cells, bool)
    for key in [("A", c) for c in ("II", "III", "Total")] + [("B", "I"), ("C", "I")]:
        forbidden[t.cell_index(key)] = True
    forbidden[t.cell_index(("Total", "I"))] = True
    r = partial(problem, cost=cell_costs("value", x), forbidden=forbidden)
    assert r.status == "no_safe_pattern" and not r.safe and not r.suppressed.any()


def test_forced_cells_are_published_as_their_whole_range():
    t, x, problem = table_6_problem()
    forced = np.zeros(t.n_cells, bool)
    c3 = t.cell_index(("C", "III"))
    forced[c3] = True
    r = partial(problem, cost=cell_costs("value", x), forced=forced)
    assert r.safe
    assert r.published_lower is not None and r.published_upper is not None
    assert r.published_lower[c3] == 0.0 and r.published_upper[c3] > 2 * x.max()


def test_singletons_are_protected_against_their_row():
    """Seed 002 Example 3: A,I and A,III are singletons; the intervals must not leave
    their row publishing their sum, and the audit (aggregations included) passes."""
    from service.sdc import magnitudes, primary
    from service.sdc.rules import PPercent
    from service.sdc.unions import UnionSource

    t, x = seed_table(TABLE_3)
    ruleset = primary.RuleSet((PPercent(20.0),))
    a1, a3 = t.cell_index(("A", "I")), t.cell_index(("A", "III"))
    c = magnitudes.Contributions(np.array([a1, a3]), np.array([100.0, 150.0]))
    m = magnitudes.from_contributions(t.n_cells, c.cell, c.value, depth=ruleset.depth)
    known = np.isin(np.arange(t.n_cells), [a1, a3])
    sens = primary.assess(m, ruleset).sensitive & known
    level = 0.5 * x * sens
    problem = TableProblem.of(
        t, x, sens, level, level, unions=UnionSource(m, ruleset, known=known, contributions=c)
    )
    r = partial(problem, cost=cell_costs("value", x))
    assert r.safe and r.audit is not None and r.audit.aggregations is not None
    row_a = [t.cell_index(("A", k)) for k in ("I", "II", "III")]
    assert r.suppressed[row_a].all()
    assert published_bounds_audit(problem, r).verdict == "safe"


def test_the_margin_widens_the_narrowest_intervals_and_adds_no_cell():
    """A 3x3 table hypothesis found: the cheapest way to move the sensitive cell (value 1)
    up by its level 1 runs through a cell moved down to 0, its a-priori bound. Asking the
    master for the level plus the margin routed the margin's 1e-6 through three more cells
    (one of cost 39): intervals of width 1e-6 on cells that need none, and a weighted
    width of 4.000042 against the narrowest 4. The margin now widens the narrowest
    intervals: the same four cells, 4 (1 + 1e-6) at most."""
    t = Table([Hierarchy.flat("r", list("abc")), Hierarchy.flat("c", list("xyz"))])
    x = np.array([47.0, 41, 3, 3, 3, 1, 1, 1, 41, 39, 1, 1, 3, 1, 1, 1])
    sens = np.zeros(t.n_cells, bool)
    sens[5] = True
    problem = TableProblem.of(t, x, sens, np.where(sens, 1.0, 0.0), np.zeros(t.n_cells))
    cost = cell_costs("value", x)
    r = partial(problem, cost=cost)
    assert r.status == "optimal" and r.safe
    assert full_lp(problem, cost) == pytest.approx(4.0, rel=1e-9)
    assert r.lower_bound == pytest.approx(4.0, rel=1e-9)
    assert 4.0 <= r.objective <= 4.0 * (1 + LEVEL_MARGIN) + 1e-9
    assert int(r.suppressed.sum()) == 4
    assert published_bounds_audit(problem, r).verdict == "safe"


@settings(max_examples=15, deadline=None)
@given(
    values=st.lists(st.integers(1, 60), min_size=9, max_size=9),
    sensitive=st.sets(st.integers(0, 8), min_size=1, max_size=2),
    upper=st.integers(1, 40),
    lower=st.integers(0, 40),
    kind=st.sampled_from(["value", "unity"]),
)
def test_cuts_reach_the_full_lp_and_never_widen_the_fast_pattern(
    values, sensitive, upper, lower, kind
):
    """Any 3x3 table with margins: the cut generation's optimum is the full LP's (up to
    the level margin), every result passes the audit with its intervals as bounds, and
    the weighted width is at most that of the fast pattern's published intervals."""
    t = Table([Hierarchy.flat("r", list("abc")), Hierarchy.flat("c", list("xyz"))])
    leaf = np.zeros(t.n_cells)
    for v, key in zip(values, [(r, c) for r in "abc" for c in "xyz"]):
        leaf[t.cell_index(key)] = v
    x = t.fill_margins(leaf)
    sens = np.zeros(t.n_cells, bool)
    for s in sensitive:
        sens[t.cell_index(("abc"[s // 3], "xyz"[s % 3]))] = True
    problem = TableProblem.of(t, x, sens, np.where(sens, upper, 0), np.where(sens, lower, 0))
    cost = cell_costs(kind, x)
    r = partial(problem, cost=cost)
    f = suppress(problem, cost=cost, method="fast")
    if not r.safe:
        # A level beyond what the table can hide: the fast method finds nothing either.
        # Known defect (issue 17 note, 2026-11-23): on a few 3x3 tables hypothesis found,
        # the cut loop stops without converging; the reply then says so (time_limit, not
        # safe), which is honest but not the optimum.
        assert r.status == "no_safe_pattern" and not f.safe or r.status == "time_limit"
        return
    assert r.status == "optimal"
    assert published_bounds_audit(problem, r).verdict == "safe"
    best = full_lp(problem, cost)
    assert best <= r.objective * (1 + 1e-9) + 1e-9
    # The intervals for the levels themselves, widened by the margin: within the margin
    # of the full LP. (Asking for the level plus the margin instead could cost far more
    # than the margin where a room binds: 4.000042 against 4 on a table found.)
    assert r.objective <= best * (1 + 2 * LEVEL_MARGIN) + 1e-9
    assert r.lower_bound <= best * (1 + 1e-9) + 1e-9
    assert r.objective <= r.lower_bound * (1 + 2 * LEVEL_MARGIN) + 1e-9
    if f.safe and f.audit is not None:
        iv = f.audit.intervals
        fast_width = float(cost[iv.cells] @ (iv.upper - iv.lower))
        assert r.objective <= fast_width * (1 + 2 * LEVEL_MARGIN) + 1e-6


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.booleans())
def test_with_contributions_every_result_passes_the_audit(data, three_d):
    """Hierarchical 2-D and 3-D tables with p%- and frequency-rule contributions: the
    aggregation check takes part; a safe result passes the audit (aggregations included)
    with its published intervals as bounds and is never wider than the fast pattern's."""
    t, x, sens, up, lo, unions = random_instance(data.draw, three_d)
    problem = TableProblem.of(t, x, sens, up, lo, unions=unions)
    cost = cell_costs("value", x)
    r = partial(problem, cost=cost, time_limit=30)
    if not r.safe:
        assert not r.suppressed.any()
        return
    assert r.status in ("optimal", "feasible")
    assert r.suppressed[sens].all()
    assert published_bounds_audit(problem, r).verdict == "safe"
    f = suppress(problem, cost=cost, method="fast", time_limit=30)
    if f.safe and f.audit is not None:
        iv = f.audit.intervals
        fast_width = float(cost[iv.cells] @ (iv.upper - iv.lower))
        assert r.objective <= fast_width * (1 + 2 * LEVEL_MARGIN) + 1e-6


# ----------------------------------------------------------------------------- time limits


def test_a_work_limit_too_small_returns_nothing(cube):  # noqa: F811
    g, sens, up, lo, unions, cost = cube
    problem = TableProblem.of(g.table, g.values, sens, up, lo, unions=unions)
    r = partial(problem, cost=cost, work_limit=1, time_limit=60)
    assert r.status == "time_limit" and not r.safe and not r.suppressed.any()
    assert "work limit" in r.message and r.work is not None
    assert r.unprotected is not None and set(r.unprotected.tolist()) <= set(
        np.flatnonzero(sens).tolist()
    )
    assert len(r.unprotected) > 0


def test_every_work_limit_gives_a_safe_result_or_none():
    """Stopped at any point, the result is the audit's: safe with its intervals as bounds
    (the last point widened to meet every level, the master's bound below it), or none."""
    t, x3 = seed_table(TABLE_3)
    sens = np.zeros(t.n_cells, bool)
    for key in [("A", "I"), ("B", "II"), ("C", "III")]:
        sens[t.cell_index(key)] = True
    level = np.where(sens, 0.3 * x3, 0.0)
    problem = TableProblem.of(t, x3, sens, level, level)
    cost = cell_costs("value", x3)
    statuses = set()
    for work in (1, 5, 20, 50, 100, 200, 400, 1000, 10_000):
        r = partial(problem, cost=cost, work_limit=work, time_limit=60)
        statuses.add((r.status, r.safe))
        if r.safe:
            assert published_bounds_audit(problem, r).verdict == "safe"
            assert r.objective >= r.lower_bound * (1 - 1e-9)
        else:
            assert r.status == "time_limit" and not r.suppressed.any()
    # Work is counted deterministically: 50 units stop it with a master point whose
    # widened intervals pass, fewer with nothing, 100 and more at the optimum.
    assert {("optimal", True), ("time_limit", True), ("time_limit", False)} <= statuses


def test_api_reply_within_the_limit(client, cube):  # noqa: F811
    limit = 1.5
    request = api_body(cube, limit, "partial")
    start = time.perf_counter()
    r = client.post("/v1/suppress", json=request)
    wall = time.perf_counter() - start
    assert r.status_code == 200, r.text
    reply = r.json()
    solver = reply["solver"]
    assert wall <= limit + SLACK, wall
    assert solver["method"] == "partial" and solver["time_limit"] == limit
    # Never safe unless the audit said so.
    assert reply["safe"] == (solver["verdict"] == "safe")
    if not reply["safe"]:
        assert solver["status"] == "time_limit" and "time limit" in solver["message"]
        assert all(c.get("published") is None for c in reply["cells"])


# ----------------------------------------------------------------------------------- API


def test_api_table_6(client):
    request = body(method="partial")
    r = client.post("/v1/suppress", json=request)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["safe"] and reply["audit"]["verdict"] == "safe"
    assert reply["solver"]["method"] == "partial"
    assert reply["solver"]["status"] in ("optimal", "feasible")
    cells = by_key(reply)
    published = {k: tuple(c["published"]) for k, c in cells.items() if "published" in c}
    assert set(published) == set(CYCLE)
    for key, (lo, hi) in CYCLE.items():
        assert published[key] == pytest.approx((lo, hi), abs=1e-3)
    assert cells[("A", "I")]["status"] == "primary"
    assert {k for k, c in cells.items() if c["status"] == "secondary"} == set(CYCLE) - {("A", "I")}
    assert reply["loss"]["cost"] == pytest.approx(36_000, rel=1e-5)
    # An intruder's audit with the published intervals as a-priori bounds: safe.
    audit = client.post("/v1/audit", json=with_published_bounds(request, reply)).json()
    assert audit["verdict"] == "safe", audit["reasons"]


def test_api_partial_refuses_crosses(client):
    r = client.post("/v1/suppress", json=body(method="partial", publish="crosses"))
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == "publish"
    ok = client.post("/v1/suppress", json=body(method="partial", publish="intervals"))
    assert ok.status_code == 200 and ok.json()["safe"]


def test_openapi_lists_the_method(client):
    schema = client.get("/openapi.json").json()
    method = schema["components"]["schemas"]["SuppressRequest"]["properties"]["method"]
    assert "partial" in method["enum"]


def test_the_filter_role_gets_the_published_intervals_only(make_client, key_file):
    secured = make_client(api_keys_file=key_file)
    reply = secured.post(
        "/v1/suppress", json=body(method="partial"), headers={"X-API-Key": FILTER_KEY}
    ).json()
    assert reply["safe"] and reply["audit"] is None
    cells = by_key(reply)
    published = {k: c["published"] for k, c in cells.items() if "published" in c}
    assert set(published) == set(CYCLE)
    assert all(cells[k]["value"] is None and "interval" not in cells[k] for k in CYCLE)


def test_count_tables_get_intervals_with_whole_ends(client):
    """Counts: the narrowest intervals have fractional ends (an LP), which an intruder who
    knows counts are whole narrows at once, so the audit of whole-number intervals
    rejected them: no intervals on 26 of 40 random 3x3 count tables that the fast method
    protects (a helper's campaign found 94 of 102). Each end is now widened outwards to a
    whole number; every such table gets intervals, each end whole, audited safe."""
    rng = np.random.default_rng(0)
    protected = 0
    for k in range(12):
        counts = rng.integers(0, 12, (3, 3))
        body = {
            "structure": {
                "dimensions": [
                    {"name": "r", "leaves": ["r0", "r1", "r2"]},
                    {"name": "c", "leaves": ["c0", "c1", "c2"]},
                ]
            },
            "cells": [
                {"key": [f"r{i}", f"c{j}"], "value": int(counts[i, j])}
                for i in range(3)
                for j in range(3)
            ],
            "counts": {"threshold": 3, "range": [0, 50][k % 2]},
            "method": "partial",
        }
        if not client.post("/v1/suppress", json={**body, "method": "fast"}).json()["safe"]:
            continue
        reply = client.post("/v1/suppress", json=body).json()
        assert reply["safe"] and reply["audit"]["verdict"] == "safe", reply["solver"]
        for cell in reply["cells"]:
            for end in cell.get("published") or ():
                assert end == round(end), cell
        protected += 1
    assert protected >= 6
