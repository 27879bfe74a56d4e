"""Sensitivity, protection levels, secondary suppression and its audit (``/v1/suppress``).
The methods are in :mod:`service.sdc.suppress`."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import assert_never

import numpy as np

from schemas.tables import SolveStatus, SuppressRequest, SuppressStatus
from service.sdc.highs import Outcome
from service.sdc.problem import TableProblem
from service.sdc.suppress import PartialResult, SuppressionResult, cell_costs, suppress
from service.sdc.suppress.partial import pattern_intervals

from .audit import audit_reply
from .errors import TABLE_FIELDS, RequestInputError, core_errors
from .limits import REPLY_SECONDS, REPLY_SHARE
from .tables import (
    ResolvedTableRequest,
    TableInputs,
    checked_table_inputs,
    table_problem,
)


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
    if inputs.published is not None:
        # The cover table's cells outside the linked tables are never published: not as
        # an interval either, which partial suppression would publish for every
        # suppressed cell (and chooses narrow under method 'partial').
        if body.method == "partial" or body.publish == "intervals":
            raise RequestInputError(
                "cells in none of the linked tables are never published, and partial "
                "suppression publishes an interval for every suppressed cell: use "
                "method 'fast' or 'exact' with publish 'crosses' on a cover table",
                field="method" if body.method == "partial" else "publish",
            )
        conflict = np.flatnonzero(forbidden & ~inputs.published)
        if conflict.size:
            raise RequestInputError(
                "a cell in none of the linked tables is never published: it cannot be "
                "forbidden to suppress",
                field="constraint",
                cell=int(inputs.request_of_cell[conflict[0]]),
            )
        forced |= ~inputs.published
    conflict = np.flatnonzero(forbidden & inputs.sensitive)
    if conflict.size:
        raise RequestInputError(
            "a sensitive cell cannot be forbidden to suppress",
            field="constraint",
            cell=int(inputs.request_of_cell[conflict[0]]),
        )
    if (
        body.method == "partial"
        and body.publish == "crosses"
        and "publish" in body.model_fields_set
    ):
        raise RequestInputError(
            "method 'partial' publishes intervals: 'publish' must be 'intervals' or left out",
            field="publish",
        )
    time_limit = resolved.time_limit
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        cost = cell_costs(body.cost, inputs.values, inputs.n_contributors, weights)
    # After the problem is made (count tables' conditions are pruned there), so that
    # its time is deducted from the request's limit too.
    problem = table_problem(inputs, body.structure.tolerance, deadline=started + time_limit)
    left = (
        time_limit - (time.perf_counter() - started) - min(REPLY_SECONDS, REPLY_SHARE * time_limit)
    )
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
    partial = isinstance(result, PartialResult)
    if body.publish == "intervals" and result.safe and result.audit is not None and not partial:
        result = _partial(inputs, problem, result, started, time_limit)
    # The caller's scale: under the shift for negative values (seed 004 section 2.2) the
    # table was protected and audited in Y = X + N M; N M is a constant per cell, so the
    # interval of X is that of Y moved by it (TableInputs.offset).
    offset = inputs.scale_offset()
    reply = _reply(inputs, result, time_limit, resolved.disclose, offset)
    if isinstance(result, PartialResult):
        _publish_narrowest(reply, result, offset)
    elif body.publish == "intervals":
        _publish_intervals(reply)
    return reply if diagnostics else _decisions_only(reply)


def _partial(
    inputs: TableInputs,
    problem: TableProblem,
    r: SuppressionResult,
    started: float,
    time_limit: float,
) -> SuppressionResult:
    """Partial suppression of the safe pattern ``r``: each suppressed cell's certified
    feasibility interval published instead of a cross, its audit recomputed with them as
    the intruder's bounds (:func:`service.sdc.suppress.partial.pattern_intervals`, which
    says why that keeps it safe); ``no_safe_pattern`` if that audit is not safe."""
    assert r.audit is not None  # a safe result carries its audit (SuppressionResult.safe)
    left = time_limit - (time.perf_counter() - started)
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        _, _, again = pattern_intervals(problem, r.suppressed, r.audit, left)
    if again.verdict == "safe":
        return replace(r, audit=again)
    return replace(
        r,
        audit=again,
        status="no_safe_pattern",
        message="the pattern's published intervals failed the recomputed audit: "
        + "; ".join(again.reasons),
    )


def _publish_intervals(reply: dict) -> None:
    """Partial suppression's publication: each suppressed cell's interval (from the
    recomputed audit) as ``published``, for every role (it is published); a cross
    (``null``) where the interval was not certified."""
    for cell in reply["cells"]:
        if cell["status"] != "published":
            cell["published"] = cell.get("interval") if reply["safe"] else None


def _publish_narrowest(reply: dict, r: PartialResult, offset: np.ndarray) -> None:
    """Method ``partial`` (:mod:`service.sdc.suppress.partial`): every cell given an
    interval publishes it, on the caller's scale (``offset``), to every role; the reply's
    audit was run with these intervals as a-priori bounds. Nothing when not safe."""
    lower, upper = r.published_lower, r.published_upper
    assert lower is not None and upper is not None
    for j, cell in enumerate(reply["cells"]):
        if cell["status"] != "published":
            cell["published"] = (
                [_bound(lower[j] - offset[j]), _bound(upper[j] - offset[j])]
                if reply["safe"]
                else None
            )


def _reply(
    inputs: TableInputs,
    r: SuppressionResult,
    time_limit: float,
    disclose: bool,
    offset: np.ndarray,
) -> dict:
    """The reply; each cell with its value (on the caller's scale, ``offset``) and, when a
    safe pattern is returned, each suppressed cell's interval from the audit that certified
    the pattern (no second audit). :func:`_decisions_only` takes out what analysts only see."""
    safe = r.safe and r.status != "no_safe_pattern"
    status = np.where(
        inputs.sensitive,
        "primary",
        np.where(r.secondary if safe else False, "secondary", "published"),
    )
    cell_keys = inputs.space.keys.tolist()
    values = (inputs.values - offset).tolist()
    cells = [
        {"key": list(k), "status": s, "value": v}
        for k, s, v in zip(cell_keys, status.tolist(), values)
    ]
    if safe and r.audit is not None:
        iv = r.audit.intervals
        for j, lo, hi, ok in zip(
            iv.cells.tolist(), iv.lower.tolist(), iv.upper.tolist(), iv.certified.tolist()
        ):
            cells[j]["interval"] = [_bound(lo - offset[j]), _bound(hi - offset[j])] if ok else None
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
    published_scale = inputs.values - offset  # the caller's values (shift: y - N M)
    total = float(np.abs(published_scale).sum())
    value = float(np.abs(published_scale[r.suppressed]).sum())
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


def _bound(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def _decisions_only(reply: dict) -> dict:
    """A suppression reply for callers without diagnostics (the filter role): the audit and
    the solver's message (which can name protection levels) left out, and so are the
    values of suppressed cells and their intervals (an analyst's view of the pattern); a
    cell's value only where it is published in a safe reply. Partial suppression's
    ``published`` intervals stay: they are the publication."""
    solver = reply["solver"]
    reply["audit"] = None
    for cell in reply["cells"]:
        cell.pop("interval", None)
        if not reply["safe"] or cell["status"] != "published":
            cell["value"] = None
    solver["message"] = (
        "a safe pattern was found"
        if reply["safe"]
        else "the time limit was reached before a safe pattern was found and certified; "
        "'unprotected' lists the sensitive cells left unprotected"
        if solver["status"] == "time_limit"
        else "no safe pattern exists within the constraints"
    )
    return reply
