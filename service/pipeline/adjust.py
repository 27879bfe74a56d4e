"""Controlled tabular adjustment (``/v1/adjust``): the table request's inputs to
:func:`service.sdc.cta.adjust` and its result to an :class:`~schemas.adjust.AdjustReply`."""

from __future__ import annotations

import time

import numpy as np

from schemas.adjust import AdjustRequest
from service.config import Settings
from service.sdc.cta import Adjustment, adjust
from service.sdc.errors import InputError
from service.sdc.highs import INFINITE_BOUND

from .errors import TABLE_FIELDS, RequestInputError, core_errors
from .limits import REPLY_SECONDS, REPLY_SHARE
from .tables import (
    ResolvedTableRequest,
    TableInputs,
    cell_error,
    checked_table_inputs,
    computed_margin,
    on_published_scale,
    resolve_table_request,
    table_problem,
)

#: The core's fields of :func:`service.sdc.cta.adjust` on the wire.
ADJUST_FIELDS = {
    **TABLE_FIELDS,
    "protection": "protection",
    "fixed": "fixed",
    "max_change": "max_change",
    "directions": "directions",
    "cost": "cost",
}


def resolve_adjust_request(body: AdjustRequest, settings: Settings) -> ResolvedTableRequest:
    """Limits, rule set or profile and time limit, as for the other table requests (the
    request has the same pieces: structure, cells, rules, profile, counts, time_limit)."""
    return resolve_table_request(body, settings)


def adjust_table(
    body: AdjustRequest, resolved: ResolvedTableRequest, started: float, diagnostics: bool
) -> dict:
    """The reply (an :class:`~schemas.adjust.AdjustReply`). ``started``: when the request
    began (``time.perf_counter()``): its time limit is the request's whole wall time, as
    for /v1/suppress and /v1/round, and the solve gets what is left less the reply's share
    (until 2026-11-27 it got the whole limit, after reading the table: 6.6 s for a limit
    of 2 on a table of 195k cells). Without ``diagnostics`` (the filter role) each cell's
    adjusted value only: its original value, its deviation (which gives the original
    away) and which cells were sensitive are left out."""
    inputs = on_published_scale(checked_table_inputs(body, resolved))
    _check_solver_range(inputs)
    n = inputs.space.n_cells
    fixed, max_change = np.zeros(n, bool), np.full(n, np.nan)
    for i, c in enumerate(body.cells):
        j = inputs.cell_of_request[i]
        fixed[j] = c.fixed
        if c.max_change is not None:
            max_change[j] = c.max_change
    # A cell must move by its level (not capped: a direction that cannot is not taken).
    problem = table_problem(inputs, body.structure.tolerance, reachable=False, conditions=False)
    time_limit = resolved.time_limit
    left = (
        time_limit - (time.perf_counter() - started) - min(REPLY_SECONDS, REPLY_SHARE * time_limit)
    )
    with core_errors(ADJUST_FIELDS, inputs.request_of_cell):
        try:
            result = adjust(
                problem,
                cost=body.cost,
                method=body.method,
                directions=body.directions,
                fixed=fixed,
                max_change=max_change,
                # No time left: no solve is started (a count table's MIP, unlike an LP,
                # can finish a small table within a millisecond's limit, and the reply
                # would not say that the request's time had run out).
                time_limit=max(left, 0.0),
            )
        except InputError as exc:
            _name_computed_cell(exc, inputs)
            raise
    return _reply(body, inputs, result, time_limit, diagnostics)


def _check_solver_range(inputs: TableInputs) -> None:
    """Values and protection levels below HiGHS's infinity (:data:`INFINITE_BOUND`): the LP
    takes them into its bounds, right-hand sides and (cost ``relative``) coefficients,
    where a number that large reads as infinite (a level of 1e20 ended the LP with status
    "error": a 500). An a-priori bound that large is no bound, as the LP reads it."""
    for field, what, numbers in (
        ("value", "value", inputs.values),
        ("protection.upper", "upper protection level", inputs.upper_protection),
        ("protection.lower", "lower protection level", inputs.lower_protection),
    ):
        bad = np.abs(numbers) >= INFINITE_BOUND
        if bad.any():
            raise cell_error(
                inputs.space,
                inputs.request_of_cell,
                bad,
                field,
                f"is {INFINITE_BOUND:g} or more in magnitude, which the solver (HiGHS) "
                "reads as infinite",
                what,
            )


def _name_computed_cell(exc: InputError, inputs: TableInputs) -> None:
    """A core error about a cell the request did not send (a computed margin) names the
    cell's key in its message: the wire's ``cell`` can only number sent cells."""
    cell = exc.cell
    if (
        cell is not None
        and not isinstance(exc, RequestInputError)
        and inputs.request_of_cell[cell] < 0
    ):
        exc.message = f"{exc.message} ({computed_margin(inputs.space, int(cell))})"
        exc.args = (exc.message,)


def _num(v: float) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def _reply(
    body: AdjustRequest,
    inputs: TableInputs,
    r: Adjustment,
    time_limit: float,
    diagnostics: bool,
) -> dict:
    keys = inputs.space.keys.tolist()
    solver = {
        "method": body.method,
        "cost": body.cost,
        "directions": body.directions,
        "status": r.status,
        "message": r.message,
        "objective": _num(r.objective),
        "lower_bound": _num(r.lower_bound),
        "gap": _num(r.gap),
        "minimax": _num(r.minimax),
        "minimax_gap": _num(r.minimax_gap),
        "solves": r.solves,
        "seconds": round(r.seconds, 6),
        "time_limit": time_limit,
    }
    if r.adjusted is None or r.deviation is None or r.protected is None or r.loss is None:
        return {"adjusted": False, "cells": [], "loss": None, "check": None, "solver": solver}
    sens = inputs.sensitive
    cells: list[dict] = []
    for j, (key, adj) in enumerate(zip(keys, r.adjusted.tolist())):
        cell: dict = {
            "key": list(key),
            "value": None,
            "adjusted": adj,
            "deviation": None,
            "sensitive": None,
            "direction": None,
            "protected": None,
        }
        if diagnostics:
            cell["value"] = float(inputs.values[j])
            cell["deviation"] = float(r.deviation[j])
            cell["sensitive"] = bool(sens[j])
            if sens[j]:
                cell["direction"] = "up" if r.direction[j] > 0 else "down"
                cell["protected"] = bool(r.protected[j])
        cells.append(cell)
    loss = r.loss
    unprotected = np.flatnonzero(sens & ~r.protected)
    return {
        "adjusted": True,
        "cells": cells,
        "loss": {
            "total_absolute": loss.total_absolute,
            "total_relative": loss.total_relative,
            "largest_relative": loss.largest_relative,
            "largest_cell": list(keys[loss.largest_cell])
            if diagnostics and loss.largest_cell >= 0
            else None,
            "cells_moved": loss.cells_moved,
            "margins_moved": loss.margins_moved,
            "zeros_moved": loss.zeros_moved,
        },
        "check": {
            "protected": not unprotected.size,
            "unprotected": [list(keys[j]) for j in unprotected] if diagnostics else [],
            "adds_up": r.adds_up,
            "largest_residual": r.residual,
        },
        "solver": solver,
    }
