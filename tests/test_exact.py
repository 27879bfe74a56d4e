"""The exact method (issue 16 part 4): never worse than fast, never ``no_safe_pattern`` for a
table fast protects when a phase runs out of budget, and cuts that hold for every safe
pattern."""

from __future__ import annotations

import dataclasses
import itertools
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from benchmarks.suppress import instance
from service.sdc import highs
from service.sdc.audit import audit_pattern
from service.sdc.problem import TableProblem
from service.sdc.suppress import cell_costs, suppress
from service.sdc.suppress.exact import (
    FOLD_RTOL,
    _exposed_relation_pairs,
    _exposed_relations,
    _Master,
    _no_lonely_complements,
    _polished,
    strengthen,
)
from service.sdc.suppress.lps import Attacker, unprotected
from service.sdc.suppress.problem import prepare
from tests.test_suppress import random_instance


def test_strengthen_by_hand():
    # Cell 0 fixed at 1, cell 4 may not be a complement: b = 4 - 1 = 3; cell 2's 5 is
    # capped at 3; cell 3's 1e-9 is folded into b (b = 3 - 1e-9); divided by b.
    fixed = np.array([True, False, False, False, False])
    allowed = np.array([True, True, True, True, False])
    idx, coef, rhs = strengthen(np.array([1.0, 0.5, 5.0, 1e-9, 2.0]), 4.0, fixed, allowed)
    b = 3.0 - 1e-9
    np.testing.assert_array_equal(idx, [1, 2])
    np.testing.assert_allclose(coef, [0.5 / b, 1.0], rtol=1e-15)
    assert rhs == 1.0
    # The fixed cell alone meets a cut of level 1: nothing to add.
    assert strengthen(np.array([1.0, 0.5, 5.0, 1e-9, 2.0]), 1.0, fixed, allowed) is None


@example(
    [0.0, 0.0, 0.0, float(np.nextafter(10.0, 0.0)), 0.0, 0.0],
    10.0,
    ["free", "free", "free", "fixed", "free", "free"],
)
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 10), min_size=6, max_size=6),
    st.floats(0.1, 20),
    st.lists(st.sampled_from(["free", "fixed", "forbidden"]), min_size=6, max_size=6),
)
def test_strengthened_cut_keeps_every_pattern_the_cut_allows(coef, level, kinds):
    """Every 0/1 pattern (fixed cells 1, forbidden 0) that meets ``coef y >= level`` meets
    the strengthened cut (the strengthening removes no pattern), and every pattern the
    original cut cuts off by more than its tolerance the strengthened one cuts off too:
    a right-hand side left within FOLD_RTOL of the level by the fixed cells counts as met,
    and each folded coefficient weakens it by at most FOLD_RTOL of it (hypothesis found
    coef 9.99999999... against level 10 met by a fixed cell alone)."""
    coef = np.array(coef)
    kinds = np.array(kinds)
    fixed = kinds == "fixed"
    cut = strengthen(coef, level, fixed, kinds != "forbidden")
    free = np.flatnonzero(kinds == "free")
    for bits in itertools.product([0.0, 1.0], repeat=len(free)):
        y = fixed.astype(float)
        y[free] = bits
        if coef @ y >= level:
            if cut is not None:
                idx, a, rhs = cut
                assert a @ y[idx] >= rhs - 1e-9
        elif coef @ y < level * (1 - len(coef) * FOLD_RTOL):
            assert cut is not None
            idx, a, rhs = cut
            assert a @ y[idx] < rhs


@pytest.fixture(scope="module")
def table():
    return instance("30x30", 1)


def test_a_point_whose_cuts_count_as_met_gets_a_no_good(table, monkeypatch):
    """A 0/1 point that misses requirements whose every strengthened cut counts as met by
    the fixed cells (a shortfall the point check sees and ``strengthen``'s tolerance does
    not) is cut off by a no-good over the allowed cells it publishes; a point with a cut,
    or a fractional one, gets none."""
    exact_mod = sys.modules[_Master.__module__]  # the package's ``exact`` is the function
    p = prepare(table.problem, table.cost, None, None, highs.now() + 60)
    att = Attacker(p)
    y = p.forced.astype(float)  # the sensitive cells alone: every requirement missed
    missing, outcome = unprotected(att, p, y)
    assert outcome == "optimal" and missing
    master = _Master(p)
    assert master.cut(att, missing, y) == len(missing)  # capacity cuts, no no-good
    rows = len(master.lower)
    monkeypatch.setattr(exact_mod, "strengthen", lambda *args: None)
    assert master.cut(att, missing, y) == 1
    assert len(master.lower) == rows + 1 and master.lower[-1] == 1.0
    np.testing.assert_array_equal(master.index[-1], np.flatnonzero((y == 0) & p.allowed))
    np.testing.assert_array_equal(master.coef[-1], np.ones(len(master.index[-1])))
    assert master.cut(att, missing, np.where(p.forced, 1.0, 0.5)) == 0


def _run(inst, method, **kw):
    return suppress(inst.problem, cost=inst.cost, method=method, time_limit=10_000, **kw)


# Hand-read on the 30x30 preset, seed 1 (the work-limit clock makes them the same on any
# machine): 1,000 units stop the warm start's protection, 3,000 its protection of the
# aggregations (there fast has no pattern either), 6,000 the MIP's first point check,
# 20,000 the MIP; fast needs about 4,500 in all and finds a pattern of cost 498,636.
@pytest.mark.parametrize("work_limit", [1_000, 3_000, 6_000, 20_000])
def test_exact_out_of_budget_returns_what_fast_would(table, work_limit):
    fast = _run(table, "fast", work_limit=work_limit)
    exact = _run(table, "exact", work_limit=work_limit)
    assert exact.status != "no_safe_pattern", exact.message
    if fast.safe:
        assert exact.safe
        assert exact.objective <= fast.objective + 1e-6
        assert exact.lower_bound <= exact.objective
        assert exact.status in ("time_limit", "optimal")
    else:
        # Neither method reached a pattern in the budget: a time limit, not a verdict on
        # the table, and the cells left unprotected are named.
        assert exact.status == fast.status == "time_limit"
        assert exact.message.startswith("work limit reached")
        assert exact.unprotected.size > 0
    if work_limit >= 6_000:
        assert fast.objective == pytest.approx(481_697)
        assert exact.status == "time_limit" and exact.message.startswith("work limit reached")
        assert 0 < exact.gap < 1


def test_exact_with_a_generous_budget_is_no_worse_than_fast():
    inst = instance("10x10", 1)
    fast = _run(inst, "fast", work_limit=10**9)
    exact = _run(inst, "exact", work_limit=10**9)
    assert fast.safe and exact.safe
    assert exact.objective <= fast.objective + 1e-6
    assert exact.lower_bound <= exact.objective + 1e-6


def test_exact_keeps_a_twentieth_of_the_time_limit_for_its_final_audit(monkeypatch):
    """The MIP searches until EXACT_AUDIT_SHARE of the time limit is left (twice the first
    audit's time if longer: a 10x10 table's audit takes milliseconds), not the quarter
    that the fast method keeps; its final audit re-proves little."""
    import service.sdc.suppress as suppression

    deadlines = []
    search = suppression.exact

    def recording(p, *args, **kw):
        deadlines.append(p.deadline)
        return search(p, *args, **kw)

    monkeypatch.setattr(suppression, "exact", recording)
    inst = instance("10x10", 1)
    begun = highs.clock().now()
    r = suppress(inst.problem, cost=inst.cost, method="exact", time_limit=20.0)
    assert r.safe and len(deadlines) == 1
    assert begun + 20.0 - deadlines[0] == pytest.approx(
        20.0 * suppression.EXACT_AUDIT_SHARE, abs=0.2
    )


def test_exposed_relations_hold_for_the_audited_patterns(table):
    """The rows of :func:`_exposed_relations` are valid: the audited patterns of both
    methods suppress another cell in each such relation."""
    p = prepare(table.problem, table.cost, None, None, highs.now() + 60)
    rows = _exposed_relations(p)
    assert rows  # the preset has sensitive unions of primaries within one relation
    for method in ("fast", "exact"):
        r = _run(table, method, work_limit=20_000)
        assert r.safe
        for idx in rows:
            assert r.suppressed[idx].any()


def test_exposed_relation_pairs_hold_for_the_audited_patterns(table):
    """The rows of :func:`_exposed_relation_pairs` are valid: the audited patterns of both
    methods suppress another cell of each such pair's combination. On the preset (seed 1)
    33 pairs of relations are exposed by their sensitive cells alone."""
    p = prepare(table.problem, table.cost, None, None, highs.now() + 60)
    rows = _exposed_relation_pairs(p)
    assert len(rows) == 33
    assert all(not p.forced[idx].any() and p.allowed[idx].all() for idx in rows)
    for method in ("fast", "exact"):
        r = _run(table, method, work_limit=20_000)
        assert r.safe
        for idx in rows:
            assert r.suppressed[idx].any()


@pytest.mark.parametrize(("name", "rows"), [("10x10x5", 129), ("60x60 hier", 327)])
def test_exposed_relation_pairs_hold_for_fast_patterns_of_other_tables(name, rows):
    """The same rows on a 3-D and a hierarchical table (seed 1): each is met by the fast
    method's audited pattern, which knows nothing of them."""
    inst = instance(name, 1)
    p = prepare(inst.problem, inst.cost, None, None, highs.now() + 60)
    found = _exposed_relation_pairs(p)
    assert len(found) == rows
    r = _run(inst, "fast", work_limit=10**9)
    assert r.safe
    assert all(r.suppressed[idx].any() for idx in found)


# Work limits at which exact overran before (HiGHS's MIPs had no iteration limit: a node
# limit let the master MIP's root and the aggregation check's MIP run on): 30x30 used
# 50,182 units of 40,000, 10x10x5 40,089 of 40,000, and the message did not say so. Each
# stops within its limit now, unless a MIP's first unchecked stretch (a root heuristic:
# 5,100 iterations of RENS in the aggregation check's MIP of 30x30) cannot be stopped:
# then the message gives the overrun.
@pytest.mark.parametrize(("name", "work_limit"), [("30x30", 40_000), ("10x10x5", 40_000)])
def test_exact_stays_within_its_work_limit(table, name, work_limit):
    inst = table if name == "30x30" else instance(name, 1)
    r = _run(inst, "exact", work_limit=work_limit)
    over = r.work - work_limit
    assert over <= 0 or (
        over <= 0.1 * work_limit and f"passed the work limit by {over:g} units" in r.message
    )
    assert r.safe and r.status == "time_limit"
    assert r.message.startswith("work limit reached")
    assert 0 < r.gap < 1


def test_an_undecided_aggregation_check_is_not_called_a_limit(table, monkeypatch):
    """A MIP point whose aggregations the check leaves undecided for a reason other than a
    limit (here every full check, as for MIP points the rule does not confirm) is set
    aside, not reported as the end of the budget. Before, exact stopped at the first such
    point with "work limit reached checking the aggregations of a pattern", about 19,000
    of its 40,000 units unused."""
    exact_module = sys.modules["service.sdc.suppress.exact"]
    real = exact_module.check_pattern
    costs = []

    def undecided(p, y, screen_only=False, proven=None, until=None):
        check = real(p, y, screen_only=screen_only, proven=proven, until=until)
        if check is None or (screen_only and check.status != "safe"):
            return check
        if screen_only:
            # What the screen proves goes to the full check as if it had not.
            return dataclasses.replace(check, status="undecided")
        costs.append(float(p.cost @ y))
        return dataclasses.replace(
            check,
            status="undecided",
            found=(),
            message="not every group of suppressed cells was decided: MIP ended with "
            "'Solution limit reached' at a point the rule does not confirm",
        )

    monkeypatch.setattr(exact_module, "check_pattern", undecided)
    fast = _run(table, "fast", work_limit=40_000)
    r = _run(table, "exact", work_limit=40_000)
    assert costs  # a point was set aside; that the search went on, below
    assert "aggregations" not in r.message
    assert r.safe and r.objective <= fast.objective + 1e-6
    assert r.status in ("time_limit", "feasible")
    if r.status == "time_limit":
        assert r.message.startswith("work limit reached")
        # Went on past the first point set aside, until the next MIP no longer fitted
        # (the budget used up; the old stop came near 21,000 units).
        assert 0.8 * 40_000 < r.work <= 40_000
    assert r.lower_bound <= r.objective


def _publish_lonely_complements(a, y: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """``y`` with every suppressed cell outside ``fixed`` that is alone among the suppressed
    cells of one of its relations published, until none is."""
    a = a.tocsr()
    y = y.copy()
    while True:
        hidden = sp.csr_matrix(a.multiply(y[None, :].astype(float)))
        hidden.eliminate_zeros()
        hidden.data[:] = 1.0
        alone = np.flatnonzero(np.asarray(hidden.sum(axis=1)).ravel() == 1)
        cells = np.unique(hidden[alone].indices)
        cells = cells[~fixed[cells]]
        if len(cells) == 0:
            return y
        y[cells[0]] = False


@settings(max_examples=25, deadline=None)
@given(st.data(), st.booleans())
def test_publishing_a_complement_alone_in_a_relation_changes_no_verdict(data, three_d):
    """What makes the rows of :func:`_no_lonely_complements` keep the master's bound: a
    complement alone among the suppressed cells of a relation, published, leaves every
    sensitive cell's interval as it was and a safe pattern safe (random dense patterns of
    random tables, judged by the audit with intervals and aggregations)."""
    t, x, sens, up, lo, unions = random_instance(data.draw, three_d)
    problem = TableProblem.of(t, x, sens, up, lo, unions=unions)
    extra = np.array(data.draw(st.lists(st.booleans(), min_size=t.n_cells, max_size=t.n_cells)))
    y = sens | (extra & (x != 0))
    z = _publish_lonely_complements(problem.relations, y, sens)
    before, after = audit_pattern(problem, y), audit_pattern(problem, z)
    if before.safe:
        assert after.safe, after.reasons
    at = {c: k for k, c in enumerate(after.intervals.cells.tolist())}
    for k, c in enumerate(before.intervals.cells.tolist()):
        if sens[c]:
            assert before.intervals.lower[k] == pytest.approx(after.intervals.lower[at[c]])
            assert before.intervals.upper[k] == pytest.approx(after.intervals.upper[at[c]])
    # Every row holds for the reduced pattern.
    p = prepare(problem, cell_costs("value", x), None, None, highs.now() + 60)
    rows = _no_lonely_complements(p)
    assert (rows @ z.astype(float) >= -1e-9).all()


def test_no_lonely_complement_rows_by_hand():
    """A 2x2 table with margins (9 cells, 6 relations), cell (0,0) sensitive: one row per
    relation without a sensitive cell and free cell in it, -1 on that cell, 1 on the
    relation's other cells that may be complements."""
    from service.sdc.table import Hierarchy, Table

    t = Table([Hierarchy.flat("r", ["a", "b"], "T"), Hierarchy.flat("c", ["x", "y"], "T")])
    x = t.fill_margins(np.where(t.is_leaf, 10.0, 0.0))
    sens = np.zeros(t.n_cells, bool)
    sens[t.cell_index(("a", "x"))] = True
    problem = TableProblem.of(t, x, sens, sens * 5.0, sens * 5.0)
    p = prepare(problem, x, None, None, highs.now() + 60)
    rows = _no_lonely_complements(p).toarray()
    a = problem.relations.toarray() != 0
    open_relations = [r for r in range(a.shape[0]) if not a[r, sens].any()]
    assert len(open_relations) == 4  # of 6: two relations hold (a, x)
    assert rows.shape[0] == sum(int(a[r].sum()) for r in open_relations)
    assert set(np.unique(rows)) == {-1.0, 0.0, 1.0}
    assert (
        rows.sum(axis=1) == [a[r].sum() - 2 for r in open_relations for _ in range(a[r].sum())]
    ).all()


def test_no_lonely_complement_rows_stay_within_their_budget(monkeypatch):
    """The rows of the shortest relations first, up to ``LONELY_MAX_NONZEROS`` entries. A
    3x2 table with margins, (a, x) sensitive: the open relations are rows b, c and T (3
    cells: 3 rows of 3 entries each) and columns y and T (4 cells: 16 entries); a budget
    of 30 keeps the three rows (27 entries)."""
    from service.sdc.table import Hierarchy, Table

    exact_module = sys.modules["service.sdc.suppress.exact"]
    t = Table([Hierarchy.flat("r", ["a", "b", "c"], "T"), Hierarchy.flat("c", ["x", "y"], "T")])
    x = t.fill_margins(np.where(t.is_leaf, 10.0, 0.0))
    sens = np.zeros(t.n_cells, bool)
    sens[t.cell_index(("a", "x"))] = True
    p = prepare(TableProblem.of(t, x, sens, sens * 5.0, sens * 5.0), x, None, None, 1e18)
    full = _no_lonely_complements(p)
    monkeypatch.setattr(exact_module, "LONELY_MAX_NONZEROS", 30)
    capped = _no_lonely_complements(p)
    assert full.nnz == 3 * 9 + 2 * 16
    assert capped.shape[0] == 9 and capped.nnz == 27


def _tiny_table(seed: int):
    """A 3x3 table with margins (16 cells), 0-3 random contributions per leaf, p% (p = 20)
    and minimum frequency 3 on the leaves, unions judged on the contributions."""
    from service.sdc import magnitudes, primary
    from service.sdc.rules import MinimumFrequency, PPercent
    from service.sdc.table import Hierarchy, Table
    from service.sdc.unions import UnionSource

    rng = np.random.default_rng(seed)
    t = Table(
        [Hierarchy.flat("r", ["a", "b", "c"], "T"), Hierarchy.flat("c", ["x", "y", "z"], "T")]
    )
    leaves = np.flatnonzero(t.is_leaf)
    cell = np.repeat(leaves, rng.integers(0, 4, len(leaves)))
    value = rng.integers(1, 100, len(cell)).astype(float)
    leaf_x = np.zeros(t.n_cells)
    np.add.at(leaf_x, cell, value)
    x = t.fill_margins(leaf_x)
    rules = primary.RuleSet((PPercent(20.0), MinimumFrequency(3)))
    m = magnitudes.from_contributions(t.n_cells, cell, value, depth=rules.depth)
    v = primary.assess(m, rules)
    sens = v.sensitive & t.is_leaf & (x > 0)
    unions = UnionSource(
        m, rules, known=t.is_leaf.copy(), contributions=magnitudes.Contributions(cell, value)
    )
    problem = TableProblem.of(
        t, x, sens, v.upper_protection * sens, v.lower_protection * sens, unions=unions
    )
    return problem, sens, cell_costs("value", x)


# Seed 39 is the table on which exact called a pattern of cost 1,283 optimal while one of
# 1,106 passes the audit: HiGHS, given the incumbent as a start, reported the better
# objective but returned the start as its solution (service.sdc.suppress.exact._Master.mip).
@pytest.mark.parametrize("seed", [0, 1, 3, 4, 5, 39])
def test_an_optimal_pattern_is_the_cheapest_safe_one(seed):
    """Exact's ``optimal`` against brute force: every pattern of the free cells of a
    3x3 table, cheapest first by pruning, judged by the full audit; and the lower bound
    of a run cut short never above that optimum."""
    problem, sens, cost = _tiny_table(seed)
    free = np.flatnonzero(~sens & (problem.values != 0))
    best = np.inf
    for bits in itertools.product([False, True], repeat=len(free)):
        y = sens.copy()
        y[free[list(bits)]] = True
        c = float(cost[y].sum())
        if c < best and audit_pattern(problem, y).safe:
            best = c
    r = suppress(problem, cost=cost, method="exact", time_limit=30)
    assert r.status == "optimal" and r.audit.safe
    assert r.objective == pytest.approx(best)
    # Cut short by a work limit, the bound it proves is still below the optimum.
    short = suppress(problem, cost=cost, method="exact", time_limit=30, work_limit=300)
    assert short.lower_bound <= best + 1e-6 <= short.objective + 2e-6


@settings(max_examples=25, deadline=None)
@given(st.data(), st.booleans())
def test_a_polished_pattern_lies_within_the_incumbent_and_passes_the_audit(data, three_d):
    """Exact's polish (intervals alone) searches the incumbent's own cells: its pattern
    is a subset of the fast method's, no dearer, and passes the interval audit."""
    from service.sdc.suppress.fast import protect, remove_superfluous
    from service.sdc.suppress.lps import Attacker, Cheapest

    t, x, sens, up, lo, _ = random_instance(data.draw, three_d)
    problem = TableProblem.of(t, x, sens, up, lo)
    p = prepare(problem, cell_costs("value", x), None, None, highs.now() + 20)
    att, cheapest = Attacker(p), Cheapest(p)
    y, status, *_, witness, _ = protect(p, att, cheapest)
    if y is None:
        return
    y = remove_superfluous(p, att, cheapest, y, witness, highs.now() + 2)
    polished = _polished(p, y, highs.now() + 8)
    assert not (polished & ~y).any()
    assert p.cost @ polished <= p.cost @ y + 1e-9
    assert polished[sens].all()
    assert audit_pattern(problem, polished).verdict == "safe"
