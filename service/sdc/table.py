"""Table structure: code hierarchies, cells, and the linear relations between cells.

A table has ``n`` dimensions; each dimension is a code hierarchy with one root (the total),
subtotals and leaves. The cells are every combination of codes, and each parent code gives
one linear relation per combination of the other dimensions' codes:
``parent cell - sum(child cells) = 0`` (seed 000, "Secondary tabular data protection
methods": "there is always a linear relationship between cells of a table",
``X_T = X_1 + X_2 + X_3``). The relations of a table form one sparse matrix ``A`` with
``A @ x = 0`` for every additive table ``x``; the audit (:mod:`service.sdc.audit`) reads
nothing else of the structure.

Linked tables (DESIGN.md, capability 5) share cells: a cell is named by its codes on the
union of all dimensions, with the total code on the dimensions a table does not have, so
the cell "region R, all industries" of a region x industry table and the cell "region R,
all sizes" of a region x size table are one variable.

Cell order (used by every array over cells) is row-major over the dimensions in the order
given, each dimension's codes in the order of :attr:`Hierarchy.codes` (pre-order: the
total, then each child followed by its own descendants). The last dimension varies
fastest, as in ``numpy.ravel_multi_index``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .errors import NAMED_CODES, InputError, some

# Relative rounding slack of check_additivity on top of the caller's absolute tolerance:
# a bound on the floating-point error of summing the terms of one relation.
_ROUNDING_RTOL = 1e-12
# Cells are numbered by int64 row-major indices over all dimensions' codes.
_MAX_INDEX = 2**63 - 1


def table_size(sizes: Iterable[int]) -> int:
    """Cells of the cross-classification of dimensions with ``sizes`` codes each (margins
    included), in Python ints: exact however large, so callers can refuse a table before
    anything of its size is allocated."""
    return math.prod(int(n) for n in sizes)


class StructureError(InputError):
    """A table structure that cannot be built as sent.

    A :class:`ValueError` (through :class:`~service.sdc.errors.InputError`), so the API
    layer answers it with a 4xx. The message names the dimension and the code.

    Parameters
    ----------
    message : str
        What is wrong.
    dimension : str, optional
        Name of the offending dimension.
    code : str, optional
        The offending code.
    index : int, optional
        Where the offending key is among those looked up (flat position in the arrays
        given to :meth:`Hierarchy.positions` or :meth:`Table.cell_indices`), so a caller
        names the very cell the message is about without looking each one up again.
    """

    def __init__(
        self,
        message: str,
        *,
        dimension: str | None = None,
        code: str | None = None,
        index: int | None = None,
    ):
        super().__init__(message)
        self.dimension = dimension
        self.code = code
        self.index = index


class Hierarchy:
    """One dimension's code hierarchy: a tree with the total as its root.

    Parameters
    ----------
    name : str
        Name of the dimension.
    parents : mapping of str to str or None
        ``child -> parent``. The root is either mapped to ``None`` or, when no code is,
        the one parent that is not itself a key. Any depth is allowed, and a code may have
        a single child.

    Raises
    ------
    StructureError
        No root or several roots, a parent that is not a code, a cycle, or a code that is
        not a string; the message names the dimension and the code.

    See Also
    --------
    Hierarchy.from_children, Hierarchy.flat

    Notes
    -----
    Codes are kept in pre-order: the root first, then each child (in the order the codes
    first appear in ``parents``) followed by its descendants. That order is the order of
    the dimension's axis in :class:`Table`.
    """

    def __init__(self, name: str, parents: Mapping[str, str | None]):
        if not isinstance(name, str) or not name:
            raise StructureError(f"dimension name must be a non-empty string, got {name!r}")
        self.name = name
        parent_of = dict(parents)
        for child, parent in parent_of.items():
            for code in (child, parent):
                if code is not None and not isinstance(code, str):
                    raise StructureError(
                        f"dimension {name!r}: code {code!r} is not a string",
                        dimension=name,
                        code=str(code),
                    )
        root = self._find_root(name, parent_of)
        parent_of.setdefault(root, None)

        children: dict[str, list[str]] = {code: [] for code in parent_of}
        for child, parent in parent_of.items():
            if parent is not None:
                children[parent].append(child)

        # Pre-order walk from the root; codes it never reaches hang on a cycle.
        order: list[str] = []
        stack = [root]
        while stack:
            code = stack.pop()
            order.append(code)
            stack.extend(reversed(children[code]))
        if len(order) < len(parent_of):
            reached = set(order)
            code = next(c for c in parent_of if c not in reached)
            # Climb from a code the walk missed until a code repeats: it lies on a cycle
            # (every code but the root has a known parent). A dict keeps this linear.
            seen: dict[str, int] = {}
            while code not in seen:
                seen[code] = len(seen)
                parent = parent_of[code]
                assert parent is not None  # only the root has none, and it was reached
                code = parent
            cycle = list(seen)[seen[code] :]
            path = (
                " -> ".join(map(repr, cycle + [code]))
                if len(cycle) <= NAMED_CODES
                else some(cycle, " -> ")
            )
            raise StructureError(
                f"dimension {name!r}: codes {path} form a cycle, so {cycle[0]!r} does not "
                f"roll up to the total {root!r}",
                dimension=name,
                code=cycle[0],
            )

        self.codes: tuple[str, ...] = tuple(order)
        position = {code: i for i, code in enumerate(order)}
        self._position = position
        self.parent = np.array(
            [-1 if (p := parent_of[c]) is None else position[p] for c in order], dtype=np.int64
        )
        n_children = np.bincount(self.parent[1:], minlength=len(order))
        self.is_leaf = n_children == 0
        # Children of every code in CSR form; pre-order keeps each code's children in order.
        child_rows = np.argsort(self.parent[1:], kind="stable") + 1
        self.children_ptr = np.concatenate(([0], np.cumsum(n_children)))
        self.children_idx = child_rows
        self._code_array = np.array(order, dtype=str)
        self._sorted = np.argsort(self._code_array, kind="stable")
        self._sorted_codes = self._code_array[self._sorted]

    @staticmethod
    def _find_root(name: str, parent_of: dict[str, str | None]) -> str:
        if not parent_of:
            raise StructureError(f"dimension {name!r} has no codes", dimension=name)
        explicit = [c for c, p in parent_of.items() if p is None]
        unknown: dict[str, str] = {}
        for child, parent in parent_of.items():
            if parent is not None and parent not in parent_of:
                unknown.setdefault(parent, child)
        if len(explicit) > 1:
            raise StructureError(
                f"dimension {name!r} has several roots ({some(explicit)}); exactly one code "
                "(the total) may have no parent",
                dimension=name,
                code=explicit[1],
            )
        if explicit:
            if unknown:
                parent, child = next(iter(unknown.items()))
                raise StructureError(
                    f"dimension {name!r}: code {child!r} has unknown parent {parent!r}",
                    dimension=name,
                    code=child,
                )
            return explicit[0]
        if len(unknown) == 1:
            return next(iter(unknown))
        if not unknown:
            code = next(iter(parent_of))
            raise StructureError(
                f"dimension {name!r} has no root: every code, e.g. {code!r}, has a parent, "
                "so the codes form a cycle",
                dimension=name,
                code=code,
            )
        parent, child = next(iter(unknown.items()))
        raise StructureError(
            f"dimension {name!r} has several roots: {some(list(unknown))} are parents but "
            f"not codes; exactly one total is allowed, so code {child!r} has an unknown "
            f"parent {parent!r}",
            dimension=name,
            code=child,
        )

    @classmethod
    def from_children(cls, name: str, children: Mapping[str, Iterable[str]]) -> Hierarchy:
        """Build a hierarchy from ``parent -> children``.

        The root is the one parent that is nobody's child. A code listed under two parents
        raises :class:`StructureError`.
        """
        parent_of: dict[str, str | None] = {}
        for parent in children:
            parent_of.setdefault(parent, None)
        for parent, kids in children.items():
            for child in kids:
                if (known := parent_of.get(child)) is not None:
                    where = (
                        f"twice under {parent!r}"
                        if known == parent
                        else f"under both {known!r} and {parent!r}"
                    )
                    raise StructureError(
                        f"dimension {name!r}: code {child!r} is listed {where}",
                        dimension=name,
                        code=child,
                    )
                parent_of[child] = parent
        return cls(name, parent_of)

    @classmethod
    def flat(cls, name: str, leaves: Sequence[str], total: str = "Total") -> Hierarchy:
        """A one-level hierarchy: ``total`` with ``leaves`` as its children."""
        if total in leaves:
            raise StructureError(
                f"dimension {name!r}: the total {total!r} is also a leaf",
                dimension=name,
                code=total,
            )
        seen: set[str] = set()
        for code in leaves:  # one pass with a set: linear in the leaves
            if code in seen:
                raise StructureError(
                    f"dimension {name!r}: code {code!r} is listed twice", dimension=name, code=code
                )
            seen.add(code)
        return cls(name, {leaf: total for leaf in leaves})

    @property
    def root(self) -> str:
        """The total code."""
        return self.codes[0]

    @property
    def n_codes(self) -> int:
        return len(self.codes)

    @property
    def code_array(self) -> np.ndarray:
        """The codes as a numpy string array, in axis order."""
        return self._code_array

    @cached_property
    def depth(self) -> np.ndarray:
        """Each code's number of ancestors (the total 0), in axis order.

        One pass in pre-order, where a parent comes before its children: linear however
        deep the tree (a chain of 100,000 codes), with no recursion.
        """
        depth = [0] * self.n_codes
        for i, p in enumerate(self.parent[1:].tolist(), start=1):
            depth[i] = depth[p] + 1
        return np.array(depth, dtype=np.int64)

    @cached_property
    def leaf_interval(self) -> tuple[np.ndarray, np.ndarray]:
        """Each code as the interval ``[first, end)`` of its leaves, numbered depth first
        (so that every code's leaves are consecutive): two codes have a leaf in common
        when their intervals overlap."""
        first = np.zeros(self.n_codes, np.int64)
        end = np.zeros(self.n_codes, np.int64)
        count = 0
        stack = [(int(r), False) for r in np.flatnonzero(np.asarray(self.parent) < 0)[::-1]]
        while stack:
            code, closing = stack.pop()
            if closing:
                end[code] = count
                continue
            first[code] = count
            kids = self.children_idx[self.children_ptr[code] : self.children_ptr[code + 1]]
            if not kids.size:
                count += 1
                end[code] = count
                continue
            stack.append((code, True))
            stack.extend((int(k), False) for k in kids[::-1])
        return first, end

    @cached_property
    def by_depth(self) -> tuple[np.ndarray, np.ndarray]:
        """Code positions sorted by :attr:`depth` (pre-order within a depth), and where
        each depth starts among them: depth ``d`` is ``order[start[d]:start[d + 1]]``.

        Grouped once, so that a loop over the depths costs each depth's own codes only.
        """
        order = np.argsort(self.depth, kind="stable")
        start = np.searchsorted(self.depth[order], np.arange(int(self.depth.max()) + 2))
        return order, start

    @cached_property
    def _roll_up(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per depth, deepest first: the parents at that depth, all their children (each
        parent's together) and where each parent's children start among them."""
        order, _ = self.by_depth
        n_children = np.diff(self.children_ptr)
        deepest_first = order[::-1]
        parents = deepest_first[n_children[deepest_first] > 0]
        if not parents.size:  # the total alone: nothing to add up
            return []
        counts = n_children[parents]
        first = np.cumsum(counts) - counts
        kids = self.children_idx[
            np.repeat(self.children_ptr[parents] - first, counts) + np.arange(counts.sum())
        ]
        # Built for all depths at once; the loop below only slices (a chain is deep).
        bounds = [0, *(np.flatnonzero(np.diff(self.depth[parents])) + 1).tolist(), len(parents)]
        ends = [*first[bounds[1:-1]].tolist(), len(kids)]
        return [
            (parents[p0:p1], kids[first[p0] : k1], first[p0:p1] - first[p0])
            for p0, p1, k1 in zip(bounds[:-1], bounds[1:], ends)
        ]

    def roll_up(self, a: np.ndarray) -> None:
        """Set every non-leaf code's entries along axis 0 of ``a`` (in place) to the sum of
        its children's, deepest codes first, so each holds the sum of its leaves.

        As many vectorised steps as the tree is deep, without the codes x leaves matrix
        :attr:`leaf_aggregation` (quadratic for a deep tree with many leaves).
        """
        for parents, kids, starts in self._roll_up:
            a[parents] = np.add.reduceat(a[kids], starts, axis=0)

    def position(self, code: str) -> int:
        """Position of ``code`` on this dimension's axis."""
        try:
            return self._position[code]
        except (KeyError, TypeError):
            raise StructureError(
                f"dimension {self.name!r} has no code {code!r}", dimension=self.name, code=str(code)
            ) from None

    def positions(self, codes) -> np.ndarray:
        """Vectorised :meth:`position` for an array of codes."""
        codes = np.asarray(codes, dtype=str)
        sorted_codes = self._sorted_codes
        at = np.searchsorted(sorted_codes, codes)
        at_clipped = np.minimum(at, len(sorted_codes) - 1)
        found = sorted_codes[at_clipped] == codes
        if not found.all():
            index = int(np.flatnonzero(~found.reshape(-1))[0])
            bad = str(codes.reshape(-1)[index])
            raise StructureError(
                f"dimension {self.name!r} has no code {bad!r}",
                dimension=self.name,
                code=bad,
                index=index,
            )
        return self._sorted[at_clipped]

    def children(self, code: str) -> tuple[str, ...]:
        """The children of ``code`` in axis order."""
        i = self.position(code)
        kids = self.children_idx[self.children_ptr[i] : self.children_ptr[i + 1]]
        return tuple(self.codes[k] for k in kids)

    @cached_property
    def leaf_aggregation(self) -> sp.csr_matrix:
        """``D`` with ``D[c, j] = 1`` when the ``j``-th leaf is ``c`` or descends from ``c``.

        Shape ``(n_codes, n_leaves)``; leaves in axis order.
        """
        n = self.n_codes
        leaves = np.flatnonzero(self.is_leaf)
        rows, cols = [leaves], [np.arange(len(leaves))]
        ancestor = self.parent[leaves]
        col = np.arange(len(leaves))
        while (alive := ancestor >= 0).any():
            ancestor, col = ancestor[alive], col[alive]
            rows.append(ancestor)
            cols.append(col)
            ancestor = self.parent[ancestor]
        i, j = np.concatenate(rows), np.concatenate(cols)
        return sp.csr_matrix((np.ones(len(i)), (i, j)), shape=(n, len(leaves)))

    def _pairs(self) -> frozenset[tuple[str, str | None]]:
        return frozenset(
            (c, self.codes[p] if p >= 0 else None) for c, p in zip(self.codes, self.parent)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hierarchy):
            return NotImplemented
        if self is other:  # linked tables share one object per dimension: no pairs built
            return True
        return self.name == other.name and self._pairs() == other._pairs()

    def __hash__(self) -> int:
        return hash((self.name, self._pairs()))

    def __repr__(self) -> str:
        return (
            f"Hierarchy({self.name!r}, {self.n_codes} codes, "
            f"{int(self.is_leaf.sum())} leaves, total {self.root!r})"
        )


class AdditivityViolation(NamedTuple):
    """A relation that the values do not satisfy: ``residual = parent - sum(children)``."""

    # mypy reads a NamedTuple field named ``index`` as overriding tuple.index; the name is
    # the public one (service.api, tests), and the field shadows the method at runtime.
    index: int  # type: ignore[assignment]
    description: str
    residual: float


class _CellSpace:
    """What :class:`Table` and :class:`LinkedTables` share: keys, lookup, relations.

    Subclasses set ``dimensions``, ``shape`` and ``_flat`` (each cell's row-major index in
    the full cross-classification of ``dimensions``, increasing) and the cached property
    ``_relation_parts``: the relation matrix, each row's dimension and each row's parent.
    """

    dimensions: tuple[Hierarchy, ...]
    shape: tuple[int, ...]
    _flat: np.ndarray

    @property
    def _relation_parts(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        raise NotImplementedError  # a cached property of each subclass

    @property
    def names(self) -> tuple[str, ...]:
        """Dimension names in axis order."""
        return tuple(h.name for h in self.dimensions)

    @property
    def relations(self) -> sp.csr_matrix:
        return self._relation_parts[0]

    @property
    def relation_dimension(self) -> np.ndarray:
        return self._relation_parts[1]

    @property
    def relation_parent(self) -> np.ndarray:
        return self._relation_parts[2]

    @property
    def n_cells(self) -> int:
        return len(self._flat)

    @property
    def n_relations(self) -> int:
        return self.relations.shape[0]

    @cached_property
    def key_positions(self) -> np.ndarray:
        """Code positions of every cell, shape ``(n_cells, n_dims)``."""
        return np.stack(np.unravel_index(self._flat, self.shape), axis=1)

    @cached_property
    def keys(self) -> np.ndarray:
        """Codes of every cell, an array of ``str`` of shape ``(n_cells, n_dims)``.

        Of dtype object, pointing at each dimension's code strings: a fixed-width string
        array would take every cell's key at the longest code's width (GBs for a million
        cells with long codes), and ``tolist`` would copy each string again.
        """
        pos = self.key_positions
        out = np.empty((self.n_cells, len(self.dimensions)), dtype=object)
        for d, h in enumerate(self.dimensions):
            out[:, d] = np.array(h.codes, dtype=object)[pos[:, d]]
        return out

    def key(self, cell: int) -> tuple[str, ...]:
        """The codes of one cell, in dimension order."""
        pos = self.key_positions[cell]
        return tuple(h.codes[p] for h, p in zip(self.dimensions, pos))

    def _default_code(self, dim: Hierarchy) -> str | None:
        return None

    def cell_indices(self, codes) -> np.ndarray:
        """Vectorised cell lookup.

        Parameters
        ----------
        codes : mapping of dimension name to array of codes, or sequence of arrays
            One array per dimension (in dimension order when a sequence), all of one
            shape. :class:`LinkedTables` fills dimensions missing from a mapping with
            their total.

        Returns
        -------
        numpy.ndarray of int
            Cell indices, the shape of the code arrays.

        Raises
        ------
        StructureError
            An unknown code (naming the dimension and code), a missing dimension, or a
            combination that is not a cell.
        """
        if isinstance(codes, Mapping):
            extra = set(codes) - set(self.names)
            if extra:
                name = sorted(extra)[0]
                raise StructureError(f"unknown dimension {name!r}", dimension=name)
            arrays = []
            for h in self.dimensions:
                if h.name in codes:
                    arrays.append(codes[h.name])
                elif (default := self._default_code(h)) is not None:
                    arrays.append(default)
                else:
                    raise StructureError(
                        f"no codes given for dimension {h.name!r}", dimension=h.name
                    )
        else:
            arrays = list(codes)
            if len(arrays) != len(self.dimensions):
                raise StructureError(
                    f"a cell key needs {len(self.dimensions)} codes "
                    f"({', '.join(self.names)}), got {len(arrays)}"
                )
        grids = np.broadcast_arrays(*[np.asarray(a, dtype=str) for a in arrays])
        pos = [h.positions(a) for h, a in zip(self.dimensions, grids)]
        flat = np.ravel_multi_index(pos, self.shape)
        at = np.minimum(np.searchsorted(self._flat, flat), self.n_cells - 1)
        found = self._flat[at] == flat
        if not found.all():
            i = int(np.flatnonzero(~found.reshape(-1))[0])
            key = tuple(str(a.reshape(-1)[i]) for a in grids)
            raise StructureError(
                f"{dict(zip(self.names, key))} is not a cell of any table", index=i
            )
        return at

    def cell_index(self, key: Sequence[str] | Mapping[str, str]) -> int:
        """Index of the cell with codes ``key`` (a tuple in dimension order, or a mapping)."""
        if isinstance(key, Mapping):
            return int(self.cell_indices({k: [v] for k, v in key.items()})[0])
        return int(self.cell_indices([[c] for c in key])[0])

    @cached_property
    def is_leaf(self) -> np.ndarray:
        """Cells that are no relation's parent, i.e. not defined as a sum of other cells."""
        mask = np.ones(self.n_cells, dtype=bool)
        mask[self.relation_parent] = False
        return mask

    def describe_relation(self, r: int) -> str:
        """Human-readable statement of relation ``r`` for error messages."""
        d = int(self.relation_dimension[r])
        key = self.key(int(self.relation_parent[r]))
        dim = self.dimensions[d]
        n_kids = len(dim.children(key[d]))
        fixed = ", ".join(f"{n}={c!r}" for i, (n, c) in enumerate(zip(self.names, key)) if i != d)
        where = f" at {fixed}" if fixed else ""
        return (
            f"dimension {dim.name!r}: {key[d]!r} = sum of its {n_kids} "
            f"child{'ren' if n_kids != 1 else ''}{where}"
        )

    def check_additivity(self, values, tolerance: float = 0.0) -> list[AdditivityViolation]:
        """The relations that ``values`` violate by more than ``tolerance``.

        Parameters
        ----------
        values : array_like, shape (n_cells,)
            Every cell's value, finite.
        tolerance : float
            Absolute tolerance on ``|parent - sum(children)|``.

        Returns
        -------
        list of AdditivityViolation
            ``(index, description, residual)`` per violated relation, in relation order.

        Notes
        -----
        A relation is violated when ``|A x| > tolerance + 1e-12 (|A| |x|)``; the second term
        absorbs floating-point rounding of the sum and is negligible for any real tolerance.
        The relations are those of seed 000, "Secondary tabular data protection methods"
        (``X_T = X_1 + X_2 + X_3``).
        """
        x = _cell_vector(values, self.n_cells, "values")
        if tolerance < 0 or not np.isfinite(tolerance):
            raise InputError("tolerance must be a finite number >= 0", field="tolerance")
        residual = self.relations @ x
        slack = _ROUNDING_RTOL * (abs(self.relations) @ np.abs(x))
        bad = np.flatnonzero(np.abs(residual) > tolerance + slack)
        return [
            AdditivityViolation(int(r), self.describe_relation(int(r)), float(residual[r]))
            for r in bad
        ]


def _cell_vector(values, n_cells: int, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.shape != (n_cells,):
        raise InputError(
            f"{name} must have one entry per cell ({n_cells}), got shape {x.shape}", field=name
        )
    if not np.isfinite(x).all():
        cell = int(np.flatnonzero(~np.isfinite(x))[0])
        raise InputError(f"{name} of cell {cell} is not finite", field=name, cell=cell)
    return x


class Table(_CellSpace):
    """A table: every combination of the codes of ``n`` dimensions.

    Parameters
    ----------
    dimensions : sequence of Hierarchy
        One hierarchy per dimension, names distinct.

    Attributes
    ----------
    shape : tuple of int
        Number of codes per dimension; ``n_cells = prod(shape)``.
    relations : scipy.sparse.csr_matrix, shape (n_relations, n_cells)
        ``A`` with ``A @ x = 0`` for every additive table.
    relation_dimension, relation_parent : numpy.ndarray of int
        For relation ``r``: the dimension whose hierarchy it expands, and the parent cell.

    Notes
    -----
    Cell ``i`` has code positions ``numpy.unravel_index(i, shape)`` (row-major, the last
    dimension fastest). Relations come dimension by dimension, and within a dimension in
    the order of their parent cell. For dimension ``d``, non-leaf code ``c`` and codes
    ``k`` of the other dimensions the row is ``x[c, k] - sum_{child e of c} x[e, k] = 0``
    (seed 000, "Secondary tabular data protection methods").
    """

    def __init__(self, dimensions: Sequence[Hierarchy]):
        dims = tuple(dimensions)
        if not dims:
            raise StructureError("a table needs at least one dimension")
        for i, h in enumerate(dims):
            if not isinstance(h, Hierarchy):
                raise StructureError(f"dimension {i} is not a Hierarchy")
            if h.name in (g.name for g in dims[:i]):
                raise StructureError(f"dimension {h.name!r} appears twice", dimension=h.name)
        self.dimensions = dims
        self.shape = tuple(h.n_codes for h in dims)
        n = table_size(self.shape)
        if n > _MAX_INDEX:
            raise StructureError(
                f"a table of {' x '.join(map(str, self.shape))} codes has too many cells to number"
            )
        self._flat = np.arange(n, dtype=np.int64)

    def __repr__(self) -> str:
        return f"Table({' x '.join(f'{h.name}[{h.n_codes}]' for h in self.dimensions)})"

    @cached_property
    def _relation_parts(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        pos = self.key_positions
        strides = np.array(
            [table_size(self.shape[d + 1 :]) for d in range(len(self.shape))], dtype=np.int64
        )
        rows, cols, vals, dim_of, parent_of = [], [], [], [], []
        n_rows = 0
        for d, h in enumerate(self.dimensions):
            code = pos[:, d]
            parents = np.flatnonzero(~h.is_leaf[code])
            pcode = code[parents]
            counts = np.diff(h.children_ptr)[pcode]
            row = n_rows + np.arange(len(parents))
            # Ragged gather: for each parent cell, the cells of its children on axis d.
            kid_row = np.repeat(row, counts)
            offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            kid_code = h.children_idx[np.repeat(h.children_ptr[pcode], counts) + offset]
            shift = (kid_code - np.repeat(pcode, counts)) * strides[d]
            kid_cell = np.repeat(parents, counts) + shift
            rows += [row, kid_row]
            cols += [parents, kid_cell]
            vals += [np.ones(len(parents)), -np.ones(len(kid_cell))]
            dim_of.append(np.full(len(parents), d, dtype=np.int64))
            parent_of.append(parents)
            n_rows += len(parents)
        a = sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(n_rows, self.n_cells),
        )
        return a, np.concatenate(dim_of), np.concatenate(parent_of)

    @cached_property
    def is_leaf(self) -> np.ndarray:
        """Cells whose codes are leaves on every dimension."""
        pos = self.key_positions
        mask = np.ones(self.n_cells, dtype=bool)
        for d, h in enumerate(self.dimensions):
            mask &= h.is_leaf[pos[:, d]]
        return mask

    @cached_property
    def aggregation(self) -> sp.csr_matrix:
        """``M`` of shape ``(n_cells, n_leaf_cells)``: each cell as the sum of its leaf cells.

        The Kronecker product of the dimensions' :attr:`Hierarchy.leaf_aggregation`;
        leaf cells in cell order.
        """
        m = self.dimensions[0].leaf_aggregation
        for h in self.dimensions[1:]:
            m = sp.kron(m, h.leaf_aggregation, format="csr")
        return sp.csr_matrix(m)

    def fill_margins(self, leaf_values) -> np.ndarray:
        """Every cell's value from the leaf cells' values.

        Parameters
        ----------
        leaf_values : array_like, shape (n_cells,)
            Read only where :attr:`is_leaf`; other entries are ignored (may be nan).

        Returns
        -------
        numpy.ndarray, shape (n_cells,)
            Leaves as given, every other cell the sum of the leaves below it, so that
            ``relations @ result = 0`` (seed 000, "Secondary tabular data protection
            methods").
        """
        x = np.asarray(leaf_values, dtype=float)
        if x.shape != (self.n_cells,):
            raise InputError(
                f"leaf_values must have one entry per cell ({self.n_cells}), got shape {x.shape}",
                field="leaf_values",
            )
        leaves = x[self.is_leaf]
        if not np.isfinite(leaves).all():
            cell = int(np.flatnonzero(self.is_leaf)[np.flatnonzero(~np.isfinite(leaves))[0]])
            raise InputError(
                f"leaf value of cell {self.key(cell)} is not finite", field="leaf_values", cell=cell
            )
        # Dimension by dimension: a cell at a non-leaf code of the dimension being summed is
        # still 0 (its leaves lie below on that dimension), so each pass adds leaves only.
        grid = np.where(self.is_leaf, x, 0.0).reshape(self.shape)
        with np.errstate(over="ignore"):  # a sum too large is inf; callers refuse it
            for d, h in enumerate(self.dimensions):
                h.roll_up(np.moveaxis(grid, d, 0))
        return grid.reshape(-1)


class LinkedTables(_CellSpace):
    """Several tables that share cells, as one set of cells and one relation matrix.

    Parameters
    ----------
    tables : sequence of Table
        Tables whose dimensions of the same name have the same hierarchy.
    order : sequence of str, optional
        The names of all the tables' dimensions in the order of :attr:`dimensions`;
        default: their order of first appearance in ``tables``.

    Attributes
    ----------
    dimensions : tuple of Hierarchy
        The union of the tables' dimensions, in ``order`` (default: of first appearance).
    table_cells : list of numpy.ndarray
        For each table, the linked index of each of its cells (in that table's order).
    relations : scipy.sparse.csr_matrix
        The relations of all tables over the linked cells, each relation once.

    Raises
    ------
    StructureError
        Two tables give one dimension name different hierarchies.

    Notes
    -----
    A cell is identified by its codes on all dimensions, with the total on the dimensions
    its table does not have; linked cells are sorted by their row-major index in the full
    cross-classification of :attr:`dimensions` (:attr:`union_index`). A relation that two
    tables share (same dimension, same parent cell) is kept once, so relations come ordered
    by dimension and then parent cell. :attr:`is_leaf` marks cells that are no relation's
    parent. Values for linked tables are best made from the full cross-classification
    (:attr:`union_table`): ``union_table.fill_margins(v)[union_index]``.
    """

    def __init__(self, tables: Sequence[Table], order: Sequence[str] | None = None):
        tables = tuple(tables)
        if not tables:
            raise StructureError("linked tables need at least one table")
        dims: dict[str, Hierarchy] = {}
        for t, table in enumerate(tables):
            for h in table.dimensions:
                known = dims.setdefault(h.name, h)
                if known != h:
                    raise StructureError(
                        f"dimension {h.name!r} of table {t} differs from the same dimension of "
                        f"an earlier table ({_first_difference(known, h)})",
                        dimension=h.name,
                    )
        if order is not None:
            if sorted(order) != sorted(dims):
                raise StructureError(
                    f"the order {list(order)} does not name the tables' dimensions {list(dims)}"
                )
            dims = {n: dims[n] for n in order}
        self.tables = tables
        self.dimensions = tuple(dims.values())
        self.shape = tuple(h.n_codes for h in self.dimensions)
        if table_size(self.shape) > _MAX_INDEX:
            # Linked cells are numbered in the cross-classification of all dimensions.
            raise StructureError(
                "the linked tables' dimensions together have too many "
                "combinations of codes to number (more than 2**63); link "
                "fewer or smaller dimensions"
            )
        index = {h.name: d for d, h in enumerate(self.dimensions)}

        flats = []
        for table in tables:
            pos = table.key_positions
            union_pos = [np.full(table.n_cells, h.position(h.root)) for h in self.dimensions]
            for d, h in enumerate(table.dimensions):
                u = self.dimensions[index[h.name]]
                # Same tree, possibly listed in another order: map by code.
                union_pos[index[h.name]] = u.positions(h.code_array)[pos[:, d]]
            flats.append(np.ravel_multi_index(union_pos, self.shape))
        self._flat = np.unique(np.concatenate(flats))
        self.table_cells = [np.searchsorted(self._flat, f) for f in flats]
        self._table_dim_index = [np.array([index[h.name] for h in t.dimensions]) for t in tables]

    def __repr__(self) -> str:
        return f"LinkedTables({len(self.tables)} tables, {self.n_cells} cells)"

    def _default_code(self, dim: Hierarchy) -> str:
        return dim.root

    @cached_property
    def acyclic(self) -> bool:
        """Whether the tables, as sets of dimensions, form an acyclic hypergraph (GYO
        reduction: drop dimensions in one table only and tables within another, until
        none is left).

        Then every set of linked tables that are non-negative and agree on their shared
        cells is the margins of some non-negative cover table (Vorob'ev 1962: consistent
        marginals on a decomposable set of margins extend to a joint; for two tables it is
        the transportation problem), whole-numbered where they are, so the linked tables'
        own relations and bounds already say all that the cover table's non-negative parts
        tell an intruder. Not so for a cycle such as ``a x b``, ``b x c``, ``a x c``: the
        two-way margins of a three-way table of non-negative parts restrict one another."""
        edges = [{h.name for h in t.dimensions} for t in self.tables]
        while edges:
            seen: dict[str, int] = {}
            for e in edges:
                for name in e:
                    seen[name] = seen.get(name, 0) + 1
            reduced = [{name for name in e if seen[name] > 1} for e in edges]
            kept = [
                e
                for i, e in enumerate(reduced)
                if e
                and not any(e <= f and (e != f or j < i) for j, f in enumerate(reduced) if j != i)
            ]
            if kept == edges:
                return False
            edges = kept
        return True

    @property
    def union_index(self) -> np.ndarray:
        """Each linked cell's index in :attr:`union_table`."""
        return self._flat

    @cached_property
    def union_table(self) -> Table:
        """The full cross-classification of all dimensions (may be large)."""
        return Table(self.dimensions)

    @cached_property
    def _relation_parts(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        blocks, dim_of, parent_of = [], [], []
        for table, cells, dmap in zip(self.tables, self.table_cells, self._table_dim_index):
            a = table.relations.tocoo()
            blocks.append(
                sp.csr_matrix((a.data, (a.row, cells[a.col])), shape=(a.shape[0], self.n_cells))
            )
            dim_of.append(dmap[table.relation_dimension])
            parent_of.append(cells[table.relation_parent])
        stacked = sp.vstack(blocks, format="csr")
        dims, parents = np.concatenate(dim_of), np.concatenate(parent_of)
        # A relation is fixed by its dimension and parent cell; tables sharing it keep one.
        _, first = np.unique(dims * self.n_cells + parents, return_index=True)
        return stacked[first], dims[first], parents[first]


def _first_difference(a: Hierarchy, b: Hierarchy) -> str:
    pa = dict(a._pairs())
    pb = dict(b._pairs())
    for code in list(pa) + list(pb):
        if code not in pa:
            return f"code {code!r} is missing from the earlier one"
        if code not in pb:
            return f"code {code!r} is missing"
        if pa[code] != pb[code]:
            return f"code {code!r} has parent {pb[code]!r}, not {pa[code]!r}"
    return "same codes"
