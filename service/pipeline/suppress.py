"""Sensitivity, protection levels, secondary suppression and its audit (``/v1/suppress``).
The methods are in :mod:`service.sdc.suppress`."""

from __future__ import annotations

import time
from typing import assert_never

import numpy as np

from schemas.tables import SolveStatus, SuppressRequest, SuppressStatus
from service.sdc.highs import Outcome
from service.sdc.suppress import SuppressionResult, cell_costs, suppress

from .audit import audit_reply
from .errors import TABLE_FIELDS, RequestInputError, core_errors
from .tables import ResolvedTableRequest, TableInputs, checked_table_inputs, table_problem

#: What building the reply may take beyond the suppression: the suppression gets the time
#: limit less the time already spent on the request and this reserve.
REPLY_SECONDS, REPLY_SHARE = 0.5, 0.05


def solve_outcome(status: SuppressStatus) -> SolveStatus:
    """A suppression status as the solver outcome of the metrics (a status without one
    fails the type check)."""
    match status:
        case "optimal" | "feasible":
            return Outcome.OPTIMAL
        case "time_limit":
            return Outcome.TIME_LIMIT
        case "no_safe_pattern":
            return Outcome.INFEASIBLE
        case _:
            assert_never(status)


def protect(
    body: SuppressRequest, resolved: ResolvedTableRequest, started: float, diagnostics: bool
) -> dict:
    """The reply (a :class:`~schemas.tables.SuppressReply`). ``started``: when the request
    began (``time.perf_counter``), since its time limit is the request's whole wall time.
    Without ``diagnostics`` the cells' statuses and the loss: no audit, and a solver
    message that names no protection level."""
    inputs = checked_table_inputs(body, resolved)
    n = inputs.space.n_cells
    forbidden, forced = np.zeros(n, bool), np.zeros(n, bool)
    weights = np.zeros(n)
    for i, c in enumerate(body.cells):
        j = inputs.cell_of_request[i]
        forbidden[j] = c.constraint == "forbid"
        forced[j] = c.constraint == "force"
        weights[j] = c.cost if c.cost is not None else 0.0
    if body.cost == "weights":
        unweighted = [i for i, c in enumerate(body.cells) if c.cost is None]
        if unweighted:
            raise RequestInputError(
                "cost 'weights' needs a cost on every cell", field="cost", cell=unweighted[0]
            )
    conflict = np.flatnonzero(forbidden & inputs.sensitive)
    if conflict.size:
        raise RequestInputError(
            "a sensitive cell cannot be forbidden to suppress",
            field="constraint",
            cell=int(inputs.request_of_cell[conflict[0]]),
        )
    time_limit = resolved.time_limit
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        cost = cell_costs(body.cost, inputs.values, inputs.n_contributors, weights)
    left = (
        time_limit - (time.perf_counter() - started) - min(REPLY_SECONDS, REPLY_SHARE * time_limit)
    )
    problem = table_problem(inputs, body.structure.tolerance)
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        result = suppress(
            problem,
            cost=cost,
            forbidden=forbidden,
            forced=forced,
            method=body.method,
            time_limit=max(left, 1e-3),
            work_limit=body.work_limit,
        )
    reply = _reply(inputs, result, time_limit, resolved.disclose)
    return reply if diagnostics else _decisions_only(reply)


def _reply(inputs: TableInputs, r: SuppressionResult, time_limit: float, disclose: bool) -> dict:
    safe = r.safe and r.status != "no_safe_pattern"
    status = np.where(
        inputs.sensitive,
        "primary",
        np.where(r.secondary if safe else False, "secondary", "published"),
    )
    cell_keys = inputs.space.keys.tolist()
    cells = [{"key": list(k), "status": s} for k, s in zip(cell_keys, status.tolist())]
    solver = {
        "method": r.method,
        "status": r.status,
        "message": r.message,
        "lower_bound": None if np.isnan(r.lower_bound) else r.lower_bound,
        "gap": None if np.isnan(r.gap) else r.gap,
        "seconds": round(r.seconds, 6),
        "iterations": r.iterations,
        "work": r.work,
        "time_limit": time_limit,
        "verdict": None if r.audit is None else r.audit.verdict,
        "unprotected": [list(cell_keys[j]) for j in _unprotected(r)],
    }
    if not safe or r.audit is None:  # safe implies an audit (SuppressionResult.safe)
        return {"safe": False, "cells": cells, "loss": None, "solver": solver, "audit": None}
    total = float(np.abs(inputs.values).sum())
    value = float(np.abs(inputs.values[r.suppressed]).sum())
    return {
        "safe": True,
        "cells": cells,
        "solver": solver,
        "loss": {
            "cells": int(r.suppressed.sum()),
            "secondary": int(r.secondary.sum()),
            "value": value,
            "value_share": value / total if total else 0.0,
            "cost": r.objective,
        },
        "audit": audit_reply(inputs, r.suppressed, r.audit, time_limit, disclose=disclose),
    }


def _unprotected(r: SuppressionResult) -> list[int]:
    """The sensitive cells left unprotected (``SuppressionResult`` stores an array, empty
    when none, whatever it was given)."""
    return [] if r.unprotected is None else r.unprotected.tolist()


def _decisions_only(reply: dict) -> dict:
    """A suppression reply for callers without diagnostics (the filter role): the audit and
    the solver's message (which can name protection levels) left out."""
    solver = reply["solver"]
    reply["audit"] = None
    solver["message"] = (
        "a safe pattern was found"
        if reply["safe"]
        else "the time limit was reached before a safe pattern was found and certified; "
        "'unprotected' lists the sensitive cells left unprotected"
        if solver["status"] == "time_limit"
        else "no safe pattern exists within the constraints"
    )
    return reply
