"""Magnitude cells on the wire (contributions, ``microdata`` columns, summaries) to the
core's contributions and ordered magnitudes (:mod:`service.sdc.magnitudes`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from operator import attrgetter, is_not
from typing import cast

import numpy as np

from schemas import rules as wire
from service.sdc import magnitudes, primary
from service.sdc.errors import InputError

from .errors import RequestInputError, to_wire


def check_unique_cell_keys(cell_keys: list[list[str]]) -> None:
    """Each cell once: a second cell with the same key is an error naming that cell."""
    # A comprehension, not set(map(tuple, ...)): one such call over 200,000 keys held the
    # interpreter, and so the event loop, 0.15-0.19 s from a pool thread (a campaign, h68).
    if len({tuple(key) for key in cell_keys}) == len(cell_keys):  # the usual case
        return
    seen: dict[tuple[str, ...], int] = {}
    for i, key in enumerate(cell_keys):
        first = seen.setdefault(tuple(key), i)
        if first != i:
            raise RequestInputError(
                f"duplicate cell key: the same key as cell {first}", field="key", cell=i
            )


def magnitudes_of(
    cells: Sequence,
    spec: wire.RuleSet,
    ruleset: primary.RuleSet,
    index: Sequence[int] | None = None,
) -> magnitudes.Magnitudes:
    """The ordered magnitudes of ``cells[i] for i in index`` (every cell when ``index`` is
    ``None``), in that order; errors name the request's cell numbers.

    Cells with contributions and cells with summaries may be mixed; each group goes
    through its own constructor and the results are merged in order.
    """
    if index is None:
        with_contributions = [i for i, c in enumerate(cells) if c.summary is None]
        with_summary = [i for i, c in enumerate(cells) if c.summary is not None]
        n, numbers = len(cells), None
    else:
        with_contributions = [k for k, i in enumerate(index) if cells[i].summary is None]
        with_summary = [k for k, i in enumerate(index) if cells[i].summary is not None]
        n, numbers = len(index), index
    parts: list[tuple[list[int] | np.ndarray, magnitudes.Magnitudes]] = []
    if with_contributions:
        parts.append(
            (
                with_contributions,
                _from_contributions(cells, _numbers(with_contributions, numbers), spec, ruleset),
            )
        )
    if with_summary:
        parts.append(
            (with_summary, _from_summaries(cells, _numbers(with_summary, numbers), ruleset))
        )
    return magnitudes.merge(n, parts)


def _numbers(positions: list[int], index: Sequence[int] | None) -> Sequence[int]:
    """The request's numbers of ``positions`` in ``index`` (the request's own when none)."""
    if index is None:
        return positions
    return index if len(positions) == len(index) else [index[k] for k in positions]


#: A contribution object's fields, in the order of :func:`_contributions`' tuples.
_FIELDS = attrgetter("value", "holding", "weight", "waiver", "request")


def microdata_of(cells: Sequence) -> list | None:
    """Each cell's ``microdata`` columns (``None`` for a cell sent otherwise), or ``None``
    when the cells' model has no such field. Asked of the model once, not of each cell with
    ``getattr(cell, "microdata", None)``: a missing attribute of a Pydantic model goes
    through ``BaseModel.__getattr__`` and an exception, 3 us a cell (instruction counts
    under callgrind: a quarter more work on a 4,000-cell sensitivity request)."""
    if not cells or "microdata" not in type(cells[0]).model_fields:
        return None
    return [c.microdata for c in cells]


def _contributions(cell, micro) -> tuple[int, Iterable[tuple]]:
    """A cell's number of contributions and their (value, holding, weight, waiver, request)
    tuples, whether sent as objects or (the online filter's compact form) as ``microdata``
    columns (``micro``), which have no waiver or request."""
    if micro is None:
        return len(cell.contributions), map(_FIELDS, cell.contributions)
    n = len(micro.value)
    return n, zip(
        micro.value,
        micro.holding or repeat(None, n),
        micro.weight or repeat(None, n),
        repeat(False, n),
        repeat(False, n),
    )


def contributions_of(
    cells: Sequence, index: Sequence[int], weights_mode, *, holdings: bool = True
) -> magnitudes.Contributions:
    """The contributions of ``cells[i] for i in index`` as flat arrays; cell ``k`` of the
    result is ``index[k]``'s position in ``index``. A column nobody sent is ``None``; so is
    the holding column without ``holdings`` (for a caller that codes it itself, with
    :func:`holding_codes`). A holding's request holds for all its contributions
    (:class:`service.sdc.magnitudes.Contributions` spreads it)."""
    selected = [cells[i] for i in index]
    columns = microdata_of(selected)
    # By identity: `None in columns` would call each model's __eq__ (Python).
    if columns and all(map(is_not, columns, repeat(None))):
        return _from_columns(columns, weights_mode, holdings)
    if columns is None or not any(map(is_not, columns, repeat(None))):
        return _from_objects(selected, weights_mode, holdings)
    # Both forms in one request: row by row.
    micro = columns
    sizes, rows = tuple(zip(*map(_contributions, selected, micro))) or ((), ())
    # One transposition for all cells: per-cell column building cost more than the rule.
    value, holding, weight, waiver, request = tuple(zip(*chain.from_iterable(rows))) or ((),) * 5
    return magnitudes.Contributions(
        np.repeat(np.arange(len(index)), sizes),
        np.array(value, np.float64),
        _holding_column(holding) if holdings else None,
        _weights(weight),
        np.array(waiver, bool) if any(waiver) else None,
        np.array(request, bool) if any(request) else None,
        weights_mode,
    )


_CONTRIBUTIONS = attrgetter("contributions")
_VALUE = attrgetter("value")
_HOLDING = attrgetter("holding")
_WEIGHT = attrgetter("weight")
_WAIVER = attrgetter("waiver")
_REQUEST = attrgetter("request")


def _from_objects(selected: list, weights_mode, holdings: bool) -> magnitudes.Contributions:
    """:func:`contributions_of` for cells that all came with contribution objects: one
    C-level pass over all the contributions per field, no tuple per contribution."""
    rows = list(map(_CONTRIBUTIONS, selected))
    flat = list(chain.from_iterable(rows))
    n = len(flat)
    weight = list(map(_WEIGHT, flat))
    waiver = list(map(_WAIVER, flat))
    request = list(map(_REQUEST, flat))
    return magnitudes.Contributions(
        np.repeat(np.arange(len(rows)), list(map(len, rows))),
        np.fromiter(map(_VALUE, flat), np.float64, n),
        _holding_column(list(map(_HOLDING, flat))) if holdings else None,
        _weights(weight),
        np.array(waiver, bool) if any(waiver) else None,
        np.array(request, bool) if any(request) else None,
        weights_mode,
    )


def _weights(weight: Sequence[float | None]) -> np.ndarray | None:
    """The weights as an array, ``None`` when no contribution has one; a contribution
    without a weight in a weighted request counts once (weight 1)."""
    n = len(weight)
    if weight.count(None) == n:
        return None
    return np.fromiter((1.0 if w is None else w for w in weight), np.float64, n)


def _from_columns(columns: list, weights_mode, holdings: bool) -> magnitudes.Contributions:
    """:func:`contributions_of` for cells that all came as ``microdata`` columns (the online
    filter's form): each column is joined once across the cells, with no tuple per
    contribution (a third of the filter's own work when built row by row)."""
    values = list(map(_VALUE, columns))
    sizes = list(map(len, values))
    n = sum(sizes)
    weights = None
    weight = list(map(_WEIGHT, columns))
    if weight.count(None) < len(weight):  # lists and None: compared in C
        weights = np.fromiter(joined_column(weight, sizes, 1.0), np.float64, n)
    holding = None
    if holdings:
        holding_lists = list(map(_HOLDING, columns))
        if holding_lists.count(None) < len(holding_lists):
            holding = _holding_column(list(joined_column(holding_lists, sizes, None)))
    return magnitudes.Contributions(
        np.repeat(np.arange(len(columns)), sizes),
        np.fromiter(chain.from_iterable(values), np.float64, n),
        holding,
        weights,
        None,
        None,
        weights_mode,
    )


def joined_column(column: list, sizes: list[int], fill) -> Iterable:
    """One ``microdata`` column across the cells, ``fill`` for a cell that did not send it
    (``sizes``: each cell's number of contributions); at C speed when every cell sent it."""
    if None not in column:
        return chain.from_iterable(column)
    return chain.from_iterable(repeat(fill, k) if c is None else c for c, k in zip(column, sizes))


def holding_codes(holding: Sequence[str | None]) -> tuple[list[str], np.ndarray] | None:
    """The distinct holdings in order of first appearance, and each contribution's as its
    position among them (``-1``: none, its own enterprise); ``None`` when no contribution
    names one."""
    n = len(holding)
    if holding.count(None) == n:
        return None
    distinct = dict.fromkeys(holding)
    distinct.pop(None, None)
    names = cast(list[str], list(distinct))  # None was taken out
    codes: dict[str | None, int] = dict(zip(names, range(len(names))))  # at C speed
    codes[None] = -1
    return names, np.fromiter(map(codes.__getitem__, holding), np.int64, n)


def _holding_column(holding: Sequence[str | None]) -> np.ndarray | None:
    coded = holding_codes(holding)
    return None if coded is None else coded[1]


def ruled_magnitudes(n_cells: int, c: magnitudes.Contributions, ruleset) -> magnitudes.Magnitudes:
    """Ordered magnitudes of ``c`` as ``ruleset`` reads them (its depth, negative-value
    policy and whether a concentration rule refuses negative contributions)."""
    return magnitudes.from_contributions(
        n_cells,
        c.cell,
        c.value,
        holding=c.holding,
        weight=c.weight,
        waiver=c.waiver,
        request=c.request,
        weights_mode=c.weights_mode,
        depth=ruleset.depth,
        negative=ruleset.negative,
        refuse_negative=ruleset.has_concentration_rule,
    )


def _from_contributions(cells, index, spec, ruleset) -> magnitudes.Magnitudes:
    c = contributions_of(cells, index, spec.weights)
    try:
        return ruled_magnitudes(len(index), c, ruleset)
    except InputError as error:
        raise to_wire(error, numbers=index, cells=cells) from None


def _from_summaries(cells, index, ruleset) -> magnitudes.Magnitudes:
    summaries = [cells[i].summary for i in index]
    width = max(1, max(len(s.largest) for s in summaries))
    largest = np.full((len(index), width), np.nan)
    for row, s in enumerate(summaries):
        largest[row, : len(s.largest)] = s.largest
    requested = np.fromiter(
        (np.nan if s.requested is None else s.requested for s in summaries),
        np.float64,
        len(summaries),
    )
    try:
        return magnitudes.from_summaries(
            np.fromiter((s.total for s in summaries), np.float64, len(summaries)),
            np.fromiter((s.count for s in summaries), np.float64, len(summaries)),
            largest,
            requested=requested,
            depth=ruleset.depth,
            negative=ruleset.negative,
        )
    except InputError as error:
        raise to_wire(error, numbers=index, cells=cells) from None


class ContributionRows:
    """The request's cell number of each contribution row, for :class:`.errors.core_errors`
    when the core names a row (looked up on an error only). ``cells[k]`` is the request
    number of the ``k``-th cell the rows were built from; ``cell_of_row`` each row's ``k``."""

    __slots__ = ("cells", "cell_of_row")

    def __init__(self, cells: Sequence[int] | np.ndarray, cell_of_row: np.ndarray):
        self.cells, self.cell_of_row = cells, cell_of_row

    def __getitem__(self, row: int) -> int:
        return int(self.cells[int(self.cell_of_row[row])])
