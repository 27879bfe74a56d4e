"""Errors in the request's terms: core errors mapped to the wire once, and limits exceeded.

The core (:mod:`service.sdc`) names what is wrong in its own terms: a field of its
arguments (``lower_bounds``, ``forbidden``, ``enterprise_ids``) and a cell by its position
in the arrays it was given (a table cell, a cell of a subset, a contribution's row). A
caller knows its request: field paths of the wire (``lower_bound``, ``constraint``,
``contributions.holding``) and cells by their number in its ``cells`` list.
:func:`to_wire` translates one into the other; the maps below are every translation the
pipeline makes. What cannot be placed in the request (a computed margin, the dense
table's flat index) is named without a cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from service.sdc.errors import InputError


class RequestInputError(InputError):
    """An :class:`InputError` in the request's terms: ``field`` a wire path, ``cell`` the
    cell's number in the request (or ``None``). ``message_without_parameters``, when set,
    is the message for callers who may not learn the rule set's parameters (the core's
    message states one)."""

    message_without_parameters: str | None = None


class LimitError(Exception):
    """The request asks for more than the service's limits allow (cells, table size,
    entries of an intermediate array); ``field`` names what to make smaller."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message, self.field = message, field


#: A wire name, or a wire name and the message in the wire's words.
Wire = str | tuple[str, str]


class CellNumbers(Protocol):
    """The request's number of each core cell: a sequence, an array, or a lookup."""

    def __getitem__(self, core_cell: int, /) -> Any: ...


#: The table problem (:mod:`service.sdc.problem`, the audit, the suppression methods) and
#: the count rules on a table's cells in the fields of a structured table's request
#: (:mod:`schemas.tables`); their cells are the table's.
TABLE_FIELDS: Mapping[str, Wire] = {
    "values": "value",
    "counts": "value",
    "lower_bounds": "lower_bound",
    "upper_bounds": "upper_bound",
    "upper_protection": "protection.upper",
    "lower_protection": "protection.lower",
    "tolerance": "structure.tolerance",
    "relations": "structure",
    "sensitive": "cells",
    "forbidden": "constraint",
}
#: The noise of the online filter (:func:`service.sdc.query_filter.add_noise`) in the
#: fields of a contribution: its cells are contribution rows.
NOISE_FIELDS: Mapping[str, Wire] = {
    "enterprise_ids": ("contributions.holding", "a respondent is listed under two holdings"),
    "establishment_ids": "contributions.respondent",
    "values": "contributions.value",
    "multipliers": "contributions.value",
}
#: A dense count table (:mod:`service.sdc.frequency`): its cells are flat positions of the
#: table, not the request's, and what the core can still refuse after the wire's checks
#: is the counts' sum.
COUNT_FIELDS: Mapping[str, Wire] = {"counts": "cells"}

#: Core errors (by their ``code``) whose message states a parameter of the rule set, and
#: the message without it (seed 003 B.1.e: a profile's parameters stay in the service).
_WITHOUT_PARAMETERS = {
    "too_few_largest": "the summary gives fewer of the largest contributions than the "
    "rules need; send more of them (at most one per contributor), or "
    "the contributions",
}


def to_wire(
    error: InputError,
    fields: Mapping[str, Wire] | None = None,
    numbers: CellNumbers | None = None,
    cells: Sequence | None = None,
) -> RequestInputError:
    """``error`` in the request's terms.

    Parameters
    ----------
    error : InputError
        As the core raised it; a :class:`RequestInputError` is returned unchanged.
    fields : mapping, optional
        Core field -> wire field (or wire field and message); others are kept.
    numbers : sequence or array of int, optional
        The request's number of each core cell (negative: a cell the request did not
        send). Without it the core's cell numbers are not the request's: dropped.
    cells : sequence, optional
        The request's cells: a contribution field of a cell sent as ``microdata`` columns
        is named under ``microdata``.
    """
    if isinstance(error, RequestInputError):
        return error
    field, message = error.field, error.message
    wire = None if fields is None or field is None else fields.get(field)
    if isinstance(wire, tuple):
        field, message = wire
    elif wire is not None:
        field = wire
    cell = None
    if error.cell is not None and numbers is not None:
        cell = int(numbers[error.cell])
        cell = cell if cell >= 0 else None
    if cell is not None and cells is not None and field and field.startswith("contributions."):
        field = contribution_field(cells[cell], field.rpartition(".")[2])
    mapped = RequestInputError(message, field=field, cell=cell)
    code = getattr(error, "code", None)
    mapped.message_without_parameters = None if code is None else _WITHOUT_PARAMETERS.get(code)
    return mapped


def contribution_field(cell, name: str) -> str:
    """The path of a contribution field ``name`` of a request cell: under ``microdata``
    when the cell sent its contributions as columns."""
    if getattr(cell, "microdata", None) is not None:
        return "microdata." + name
    return "contributions." + name


class core_errors:
    """Context in which the core's :class:`InputError` is raised as :func:`to_wire` makes
    it (same arguments). A class, not a generator: it is entered on every filter request."""

    __slots__ = ("fields", "numbers", "cells")

    def __init__(
        self,
        fields: Mapping[str, Wire] | None = None,
        numbers: CellNumbers | None = None,
        cells: Sequence | None = None,
    ):
        self.fields, self.numbers, self.cells = fields, numbers, cells

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> None:
        if kind is not None and issubclass(kind, InputError):
            raise to_wire(error, self.fields, self.numbers, self.cells) from None
