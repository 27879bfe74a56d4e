"""Table structure: hierarchies, cell order, relations, margins, additivity, linked tables."""

from __future__ import annotations

import numpy as np
import pytest

from service.sdc.errors import InputError
from service.sdc.table import Hierarchy, LinkedTables, StructureError, Table


@pytest.fixture
def region() -> Hierarchy:
    # Total -> {A, B}, A -> {A1, A2}, B -> {B1}: two levels, one single child.
    return Hierarchy.from_children("region", {"Total": ["A", "B"], "A": ["A1", "A2"], "B": ["B1"]})


@pytest.fixture
def size() -> Hierarchy:
    return Hierarchy.flat("size", ["small", "large"])


# --- Hierarchy ---------------------------------------------------------------------------


def test_hierarchy_preorder_parents_and_leaves(region):
    assert region.codes == ("Total", "A", "A1", "A2", "B", "B1")
    assert region.root == "Total"
    assert region.parent.tolist() == [-1, 0, 1, 1, 0, 4]
    assert region.is_leaf.tolist() == [False, False, True, True, False, True]
    assert region.children("Total") == ("A", "B")
    assert region.children("B") == ("B1",)
    assert region.children("A1") == ()


def test_hierarchy_from_parents_equals_from_children(region):
    same = Hierarchy("region", {"A1": "A", "A2": "A", "B1": "B", "A": "Total", "B": "Total"})
    assert same == region
    assert same.codes == ("Total", "A", "A1", "A2", "B", "B1")
    explicit_root = Hierarchy(
        "region", {"Total": None, "A": "Total", "B": "Total", "A1": "A", "A2": "A", "B1": "B"}
    )
    assert explicit_root == region
    assert (
        Hierarchy("other", {"A": "Total", "B": "Total", "A1": "A", "A2": "A", "B1": "B"}) != region
    )


def test_hierarchy_deep_chain_of_single_children():
    h = Hierarchy("d", {"a": "T", "b": "a", "c": "b"})
    assert h.codes == ("T", "a", "b", "c")
    assert h.is_leaf.tolist() == [False, False, False, True]
    assert h.leaf_aggregation.toarray().ravel().tolist() == [1, 1, 1, 1]


def test_leaf_aggregation(region):
    # Rows: codes; columns: leaves A1, A2, B1.
    assert region.leaf_aggregation.toarray().tolist() == [
        [1, 1, 1],
        [1, 1, 0],
        [1, 0, 0],
        [0, 1, 0],
        [0, 0, 1],
        [0, 0, 1],
    ]


def test_positions_vectorised_and_unknown(region):
    assert region.positions(["B1", "Total", "A2"]).tolist() == [5, 0, 3]
    assert region.position("B") == 4
    with pytest.raises(StructureError, match="'region' has no code 'C9'") as e:
        region.positions(["A", "C9"])
    assert e.value.dimension == "region" and e.value.code == "C9"


@pytest.mark.parametrize(
    "parents, pattern, code",
    [
        ({"A": "Total", "B": "Grand"}, "several roots.*'Total'.*'Grand'", "A"),
        ({"Total": None, "A": "Total", "B": "X"}, "code 'B' has unknown parent 'X'", "B"),
        ({"Total": None, "A": None}, "several roots", "A"),
        ({"Total": None, "A": "B", "B": "A"}, "'A' -> 'B' -> 'A' form a cycle", "A"),
        ({"T": None, "A": "A"}, "'A' -> 'A' form a cycle", "A"),
        ({"A": "B", "B": "A"}, "has no root", "A"),
        ({"A": 3}, "code 3 is not a string", "3"),
    ],
)
def test_hierarchy_errors_name_dimension_and_code(parents, pattern, code):
    with pytest.raises(StructureError, match=pattern) as e:
        Hierarchy("sector", parents)
    assert "'sector'" in str(e.value)
    assert e.value.dimension == "sector" and e.value.code == code
    assert isinstance(e.value, ValueError)


def test_hierarchy_child_under_two_parents():
    with pytest.raises(StructureError, match="'x' is listed under both 'A' and 'B'"):
        Hierarchy.from_children("d", {"T": ["A", "B"], "A": ["x"], "B": ["x"]})


def test_flat_duplicates_and_total_as_leaf():
    with pytest.raises(StructureError, match="'a' is listed twice"):
        Hierarchy.flat("d", ["a", "b", "a"])
    with pytest.raises(StructureError, match="total 'Total' is also a leaf"):
        Hierarchy.flat("d", ["a", "Total"])


# --- Table -------------------------------------------------------------------------------


def test_cell_order_is_row_major(region, size):
    t = Table([region, size])
    assert t.shape == (6, 3) and t.n_cells == 18
    assert t.cell_index(("Total", "Total")) == 0
    assert t.cell_index(("Total", "large")) == 2
    assert t.cell_index(("A1", "small")) == 2 * 3 + 1
    assert t.cell_index({"size": "large", "region": "B1"}) == 17
    assert t.key(7) == ("A1", "small")
    assert t.keys[7].tolist() == ["A1", "small"]
    for i in range(t.n_cells):
        assert t.cell_index(t.key(i)) == i


def test_cell_indices_vectorised(region, size):
    t = Table([region, size])
    got = t.cell_indices([["B1", "A", "Total"], ["small", "Total", "large"]])
    assert got.tolist() == [16, 3, 2]
    got = t.cell_indices({"region": np.array([["A1", "A2"]]), "size": "Total"})
    assert got.tolist() == [[6, 9]]
    with pytest.raises(StructureError, match="'size' has no code 'huge'"):
        t.cell_indices([["A1"], ["huge"]])
    with pytest.raises(StructureError, match="needs 2 codes"):
        t.cell_index(("A1",))
    with pytest.raises(StructureError, match="no codes given for dimension 'size'"):
        t.cell_indices({"region": ["A1"]})


def test_duplicate_dimension_rejected(size):
    with pytest.raises(StructureError, match="'size' appears twice"):
        Table([size, size])


def test_relations_of_flat_two_way_table():
    t = Table([Hierarchy.flat("r", ["1", "2", "3"]), Hierarchy.flat("c", ["1", "2"])])
    # Cells (r, c) row-major over r in (T, 1, 2, 3), c in (T, 1, 2).
    expected = [
        [1, 0, 0, -1, 0, 0, -1, 0, 0, -1, 0, 0],  # r: T = 1 + 2 + 3 at c=T
        [0, 1, 0, 0, -1, 0, 0, -1, 0, 0, -1, 0],  # at c=1
        [0, 0, 1, 0, 0, -1, 0, 0, -1, 0, 0, -1],  # at c=2
        [1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # c: T = 1 + 2 at r=T
        [0, 0, 0, 1, -1, -1, 0, 0, 0, 0, 0, 0],  # at r=1
        [0, 0, 0, 0, 0, 0, 1, -1, -1, 0, 0, 0],  # at r=2
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1, -1],  # at r=3
    ]
    assert t.relations.toarray().tolist() == expected
    assert t.relation_dimension.tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert t.relation_parent.tolist() == [0, 1, 2, 0, 3, 6, 9]
    assert t.describe_relation(1) == "dimension 'r': 'Total' = sum of its 3 children at c='1'"
    assert t.describe_relation(6) == "dimension 'c': 'Total' = sum of its 2 children at r='3'"


def test_relations_of_hierarchical_three_way_table(region, size):
    sector = Hierarchy.flat("sector", ["x", "y", "z"])
    t = Table([region, size, sector])
    # Per dimension: non-leaf codes x codes of the other dimensions.
    assert t.n_relations == 3 * 3 * 4 + 1 * 6 * 4 + 1 * 6 * 3
    a = t.relations.tocsr()
    keys = [t.key(i) for i in range(t.n_cells)]
    for r in range(t.n_relations):
        d = t.relation_dimension[r]
        parent = keys[t.relation_parent[r]]
        row = a.getrow(r)
        plus = {keys[i] for i, v in zip(row.indices, row.data) if v == 1}
        minus = {keys[i] for i, v in zip(row.indices, row.data) if v == -1}
        kids = t.dimensions[d].children(parent[d])
        assert plus == {parent}
        assert minus == {parent[:d] + (k,) + parent[d + 1 :] for k in kids}
    assert (
        t.describe_relation(
            int(
                np.flatnonzero(
                    (t.relation_dimension == 0)
                    & (t.relation_parent == t.cell_index(("B", "small", "y")))
                )[0]
            )
        )
        == "dimension 'region': 'B' = sum of its 1 child at size='small', sector='y'"
    )


def test_is_leaf(region, size):
    t = Table([region, size])
    leaves = {t.key(i) for i in np.flatnonzero(t.is_leaf)}
    assert leaves == {(r, s) for r in ("A1", "A2", "B1") for s in ("small", "large")}


def test_fill_margins(region, size):
    t = Table([region, size])
    leaf = {
        ("A1", "small"): 3,
        ("A1", "large"): 5,
        ("A2", "small"): 0,
        ("A2", "large"): 7,
        ("B1", "small"): 11,
        ("B1", "large"): 2,
    }
    given = np.full(t.n_cells, np.nan)
    for key, v in leaf.items():
        given[t.cell_index(key)] = v
    filled = t.fill_margins(given)
    expect = {
        ("A", "small"): 3,
        ("A", "large"): 12,
        ("A", "Total"): 15,
        ("B", "small"): 11,
        ("B", "large"): 2,
        ("B", "Total"): 13,
        ("B1", "Total"): 13,
        ("A2", "Total"): 7,
        ("Total", "small"): 14,
        ("Total", "large"): 14,
        ("Total", "Total"): 28,
    }
    for key, v in {**leaf, **expect}.items():
        assert filled[t.cell_index(key)] == v, key
    np.testing.assert_array_equal(t.relations @ filled, 0)


def test_fill_margins_needs_finite_leaves(region, size):
    t = Table([region, size])
    with pytest.raises(InputError, match=r"\('A2', 'large'\) is not finite"):
        given = np.zeros(t.n_cells)
        given[t.cell_index(("A2", "large"))] = np.inf
        t.fill_margins(given)


def test_check_additivity_reports_wrong_margin():
    t = Table([Hierarchy.flat("r", ["1", "2"]), Hierarchy.flat("c", ["1", "2", "3"])])
    leaves = np.where(t.is_leaf, np.arange(t.n_cells), 0.0)
    values = t.fill_margins(leaves)
    assert t.check_additivity(values) == []
    wrong = t.cell_index(("2", "Total"))
    values[wrong] += 0.5
    found = t.check_additivity(values)
    assert [v.index for v in found] == [0, 6]
    assert found[0].description == "dimension 'r': 'Total' = sum of its 2 children at c='Total'"
    assert found[0].residual == pytest.approx(-0.5)
    assert found[1].description == "dimension 'c': 'Total' = sum of its 3 children at r='2'"
    assert found[1].residual == pytest.approx(0.5)
    assert t.check_additivity(values, tolerance=0.5) == []
    assert len(t.check_additivity(values, tolerance=0.49)) == 2


def test_check_additivity_ignores_rounding_of_decimals():
    t = Table([Hierarchy.flat("r", ["1", "2", "3"])])
    assert t.check_additivity([0.6, 0.1, 0.2, 0.3]) == []
    with pytest.raises(InputError, match="one entry per cell"):
        t.check_additivity([0.6, 0.1])


# --- Linked tables -----------------------------------------------------------------------


@pytest.fixture
def linked(region, size):
    industry = Hierarchy.flat("industry", ["x", "y"])
    return LinkedTables([Table([region, size]), Table([industry, region])])


def test_linked_cells_are_shared_on_common_dimension(linked, region):
    t1, t2 = linked.tables
    assert linked.names == ("region", "size", "industry")
    # Cells (region code, Total, Total) are in both tables.
    assert linked.n_cells == t1.n_cells + t2.n_cells - region.n_codes
    for table, cells in zip(linked.tables, linked.table_cells):
        for i, c in enumerate(cells):
            key = dict(zip(table.names, table.key(i)))
            full = tuple(key.get(n, "Total") for n in linked.names)
            assert linked.key(c) == full
    both = np.intersect1d(*linked.table_cells)
    assert sorted(linked.key(c)[0] for c in both) == sorted(region.codes)
    assert linked.cell_index({"region": "A"}) == linked.cell_index(("A", "Total", "Total"))


def test_linked_relations_once_each(linked, region):
    t1, t2 = linked.tables
    shared = int((~region.is_leaf).sum())  # region relations at size=Total, industry=Total
    assert linked.n_relations == t1.n_relations + t2.n_relations - shared
    pairs = set(zip(linked.relation_dimension.tolist(), linked.relation_parent.tolist()))
    assert len(pairs) == linked.n_relations
    union = linked.union_table
    rng = np.random.default_rng(3)
    values = union.fill_margins(np.where(union.is_leaf, rng.integers(0, 9, union.n_cells), 0))
    np.testing.assert_array_equal(linked.relations @ values[linked.union_index], 0)
    # Table 2's relation "industry Total = x + y at region B1" in linked cell numbering.
    r = int(
        np.flatnonzero(
            (linked.relation_dimension == 2)
            & (linked.relation_parent == linked.cell_index(("B1", "Total", "Total")))
        )[0]
    )
    row = linked.relations.getrow(r)
    assert {linked.key(i): v for i, v in zip(row.indices, row.data)} == {
        ("B1", "Total", "Total"): 1,
        ("B1", "Total", "x"): -1,
        ("B1", "Total", "y"): -1,
    }
    assert (
        linked.describe_relation(r)
        == "dimension 'industry': 'Total' = sum of its 2 children at region='B1', size='Total'"
    )


def test_linked_leaves_and_lookup_errors(linked):
    leaves = {linked.key(c) for c in np.flatnonzero(linked.is_leaf)}
    assert leaves == {(r, s, "Total") for r in ("A1", "A2", "B1") for s in ("small", "large")} | {
        (r, "Total", i) for r in ("A1", "A2", "B1") for i in ("x", "y")
    }
    with pytest.raises(StructureError, match="is not a cell of any table"):
        linked.cell_index({"size": "small", "industry": "x"})
    with pytest.raises(StructureError, match="unknown dimension 'colour'"):
        linked.cell_indices({"colour": ["red"]})


def test_linked_tables_need_same_hierarchy(region, size):
    other = Hierarchy.from_children("region", {"Total": ["A", "B"], "A": ["A1"], "B": ["B1", "A2"]})
    with pytest.raises(StructureError, match="dimension 'region' of table 1 differs.*'A2'") as e:
        LinkedTables([Table([region, size]), Table([other])])
    assert e.value.dimension == "region"
    # Same tree with children listed in another order is the same dimension.
    reordered = Hierarchy.from_children(
        "region", {"Total": ["B", "A"], "B": ["B1"], "A": ["A2", "A1"]}
    )
    lt = LinkedTables([Table([region, size]), Table([reordered])])
    assert lt.n_cells == Table([region, size]).n_cells
    assert lt.n_relations == Table([region, size]).n_relations


def test_margins_of_linked_tables_one_within_another(region, size):
    """Linked tables one within another (region, region x size): the smaller table's
    leaves are margins of the larger one, computed from its leaves before the smaller
    table's margins are. Until 2026-11-27 they were read first, as nan: "leaf value of
    cell ('A1',) is not finite", numbered in the smaller table."""
    from service.pipeline.tables import filled_margins

    for tables in (
        [Table([region]), Table([region, size])],
        [Table([region, size]), Table([region])],
    ):
        lt = LinkedTables(tables)
        union = lt.union_table
        rng = np.random.default_rng(5)
        full = union.fill_margins(np.where(union.is_leaf, rng.integers(1, 9, union.n_cells), 0))
        x = full[lt.union_index]
        got = filled_margins(lt, np.where(lt.is_leaf, x, np.nan))
        np.testing.assert_array_equal(got, x)
        assert got[lt.cell_index(("Total", "Total"))] == x[lt.is_leaf].sum() > 0
