"""Implicitly published unions (seed 002 sections 3-5): golden aggregations, the singleton
roll-up of Table 4, shared holdings, and the summary path."""

from __future__ import annotations

import numpy as np
import pytest

from service.sdc import magnitudes, primary, unions
from service.sdc.magnitudes import Contributions
from service.sdc.problem import TableProblem
from service.sdc.rules import PPercent, PriorPosterior
from service.sdc.table import Hierarchy, Table
from service.sdc.unions import check_unions, explicit_aggregations

from .golden import cases, golden_table


def one_column_table(codes):
    """Cells ``codes`` and their total in one dimension: a single relation."""
    return Table([Hierarchy.flat("c", codes, "T")])


def from_lists(t: Table, cells: dict, holdings: dict | None = None) -> Contributions:
    index, value, holding = [], [], []
    for key, amounts in cells.items():
        index += [t.cell_index((key,) if isinstance(key, str) else key)] * len(amounts)
        value += amounts
        holding += (holdings or {}).get(key, [-1] * len(amounts))
    return Contributions(np.array(index), np.array(value, float), np.array(holding))


def assess_all(t, contributions, ruleset):
    m = magnitudes.from_contributions(
        t.n_cells,
        contributions.cell,
        contributions.value,
        holding=contributions.holding,
        depth=ruleset.depth,
    )
    return m, primary.assess(m, ruleset)


@pytest.mark.parametrize("case", cases("aggregations.json"))
def test_golden_aggregations(case):
    rule = case["rule"]
    assert rule["type"] == "pq"
    ruleset = primary.RuleSet((PriorPosterior(rule["p"], rule["q"]),))
    codes = list(case["aggregation"])
    t = one_column_table(codes + ["other"])
    c = from_lists(
        t,
        {k: v["contributions"] for k, v in case["aggregation"].items()}
        | {"other": [1000.0, 900.0, 800.0]},
    )
    m, verdict = assess_all(t, c, ruleset)
    suppressed = np.isin(np.arange(t.n_cells), [t.cell_index((k,)) for k in codes])
    # The sensitive member makes the aggregation worth checking (seed 002 Theorem 2).
    assert verdict.sensitive[suppressed].any()
    for source in ({"contributions": c}, {}):  # exact path, then the summary path
        result = check_unions(t, m.value, suppressed, verdict.sensitive, m, ruleset, **source)
        assert result.checked.tolist() == [True]
        assert result.value.tolist() == [sum(v["value"] for v in case["aggregation"].values())]
        assert result.sensitive.tolist() == [case["expect"]["aggregation_sensitive"]]


def test_table_4_singleton_roll_up_is_unsafe():
    """Seed 002 Example 3: A,I and A,III are singletons; row A publishes their sum 250."""
    case = next(c for c in cases("intervals.json") if c.id == "daalmans-table-4").values[0]
    t, values, suppressed = golden_table(case)
    ruleset = primary.RuleSet((PPercent(20.0),))
    c = from_lists(t, {("A", "I"): [100.0], ("A", "III"): [150.0]})
    m, verdict = assess_all(t, c, ruleset)
    sensitive = verdict.sensitive
    assert sensitive.sum() == 2
    known = np.isin(np.arange(t.n_cells), c.cell)
    result = check_unions(
        t, values, suppressed, sensitive, m, ruleset, known=known, contributions=c
    )
    rows = {
        t.describe_relation(r): (ok, bad)
        for r, ok, bad in zip(result.relation, result.checked, result.sensitive)
    }
    # Row A: checked and sensitive. Columns I and III: B,I and B,III have no contributions.
    assert sum(bad for _, bad in rows.values()) == 1
    assert sum(ok for ok, _ in rows.values()) == 1
    assert not result.safe
    (row_a,) = [r for r, (_, bad) in rows.items() if bad]
    assert "A" in row_a
    assert result.value[result.sensitive].tolist() == [250.0]


def test_shared_holding_across_cells_is_one_respondent():
    """Two cells of 3 contributors each, p% = 10: separately safe-ish; when one holding
    owns the largest contribution of both, the union's largest respondent is their sum."""
    t = one_column_table(["a", "b", "c"])
    ruleset = primary.RuleSet((PPercent(10.0),))
    cells = {"a": [50.0, 30.0, 20.0], "b": [50.0, 30.0, 20.0], "c": [100.0, 100.0]}
    distinct = from_lists(t, cells)
    shared = from_lists(t, cells, holdings={"a": [7, -1, -1], "b": [7, -1, -1], "c": [-1, -1]})
    suppressed = np.isin(np.arange(t.n_cells), [t.cell_index(("a",)), t.cell_index(("b",))])
    sensitive = suppressed.copy()  # declared sensitive, to make the union worth checking
    m, _ = assess_all(t, distinct, ruleset)
    # Distinct: union 50,50,30,30,20,20 (X = 200): x1 - p/100 x1 ... remainder 100 > 5.
    assert not check_unions(
        t, m.value, suppressed, sensitive, m, ruleset, contributions=distinct
    ).sensitive.any()
    # Shared: holding 7 contributes 100; remainder after 100 and 30 is 70 > 10: still safe.
    # With p = 80 the shared case is sensitive (70 < 80) and the distinct one is not
    # (remainder 100 > 40).
    strict = primary.RuleSet((PPercent(80.0),))
    m_strict, _ = assess_all(t, distinct, strict)
    assert check_unions(
        t, m.value, suppressed, sensitive, m_strict, strict, contributions=shared
    ).sensitive.tolist() == [True]
    assert check_unions(
        t, m.value, suppressed, sensitive, m_strict, strict, contributions=distinct
    ).sensitive.tolist() == [False]


def test_only_relations_with_two_suppressed_cells_and_a_sensitive_one():
    t = Table([Hierarchy.flat("r", ["1", "2"], "T"), Hierarchy.flat("c", ["1", "2"], "T")])
    idx = {k: t.cell_index(k) for k in [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]}
    suppressed = np.zeros(t.n_cells, bool)
    suppressed[list(idx.values())] = True
    sensitive = np.zeros(t.n_cells, bool)
    sensitive[idx[("1", "1")]] = True
    rows, lam = explicit_aggregations(t, suppressed, sensitive)
    # Row 1 and column 1 hold the sensitive cell with another suppressed one.
    assert len(rows) == 2
    assert sorted(lam.getnnz(axis=1).tolist()) == [2, 2]
    assert set(lam.indices.tolist()) == {idx[("1", "1")], idx[("1", "2")], idx[("2", "1")]}


def test_audit_pattern_verdicts_on_table_4():
    """Table 4 passes the interval criterion (50% of the value each way) but the singleton
    roll-up of row A makes it unsafe; with the unions left out the verdict is safe."""
    from service.sdc.audit import audit_pattern
    from service.sdc.unions import UnionSource

    case = next(c for c in cases("intervals.json") if c.id == "daalmans-table-4").values[0]
    t, values, suppressed = golden_table(case)
    ruleset = primary.RuleSet((PPercent(20.0),))
    c = from_lists(t, {("A", "I"): [100.0], ("A", "III"): [150.0]})
    m, verdict = assess_all(t, c, ruleset)
    protection = 0.5 * values * verdict.sensitive
    known = np.isin(np.arange(t.n_cells), c.cell)
    source = UnionSource(m, ruleset, known=known, contributions=c)
    with_unions = audit_pattern(
        TableProblem.of(t, values, verdict.sensitive, protection, protection, unions=source),
        suppressed,
    )
    intervals_only = audit_pattern(
        TableProblem.of(t, values, verdict.sensitive, protection, protection), suppressed
    )
    # Safe by the intervals alone, and the reply says the aggregations were not checked.
    assert intervals_only.verdict == "safe"
    assert "not checked" in intervals_only.reasons[0]
    assert with_unions.verdict == "unsafe"
    assert "sensitive aggregation" in with_unions.reasons[0]
    worst = with_unions.aggregations.worst
    assert sorted(t.key(int(c)) for c in worst.cells) == [("A", "I"), ("A", "III")]
    assert worst.value == 250.0
    assert with_unions.protection.protected[with_unions.protection.sensitive].all()
    # Publishing a sensitive cell is unsafe whatever the intervals say.
    leaked = suppressed.copy()
    leaked[t.cell_index(("A", "I"))] = False
    assert (
        audit_pattern(
            TableProblem.of(t, values, verdict.sensitive, protection, protection), leaked
        ).verdict
        == "unsafe"
    )


def test_audit_pattern_never_calls_uncertified_safe():
    from service.sdc.audit import audit_pattern

    case = next(c for c in cases("intervals.json") if c.id == "daalmans-table-7").values[0]
    t, values, suppressed = golden_table(case)
    sensitive = np.zeros(t.n_cells, bool)
    sensitive[t.cell_index(("A", "I"))] = True
    # Seed 002 Example 2: upper protection 30 (190 - 160) is met by the interval [80, 200].
    ok = audit_pattern(TableProblem.of(t, values, sensitive, 30.0, 0.0), suppressed)
    assert ok.verdict == "safe"
    too_much = audit_pattern(TableProblem.of(t, values, sensitive, 41.0, 0.0), suppressed)
    assert too_much.verdict == "unsafe"
    i = list(too_much.intervals.cells).index(t.cell_index(("A", "I")))
    assert too_much.protection.missing_upper[i] == pytest.approx(1.0)
    rushed = audit_pattern(
        TableProblem.of(t, values, sensitive, 30.0, 0.0), suppressed, time_limit=1e-9
    )
    assert rushed.verdict == "uncertified"


@pytest.mark.parametrize("lean", [unions.RANGES_LEAN, 0])
def test_ranges_are_the_runs_of_indices_either_way(monkeypatch, lean):
    """unions.ranges, built the quick way or the lean one (large results), is every
    ``starts[k] .. starts[k] + sizes[k] - 1`` in order, empty runs included."""
    monkeypatch.setattr(unions, "RANGES_LEAN", lean)
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 7, 60):
        for _ in range(50):
            starts, sizes = rng.integers(0, 1_000, n), rng.integers(0, 5, n)
            expected = [i for s, k in zip(starts, sizes) for i in range(s, s + k)]
            np.testing.assert_array_equal(unions.ranges(starts, sizes), expected)
