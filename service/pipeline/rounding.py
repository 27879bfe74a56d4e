"""Rounding of a structured table to a base (``/v1/round``) and what an intruder learns
from the rounded table. The methods are in :mod:`service.sdc.rounding`."""

from __future__ import annotations

import secrets
import time
from typing import assert_never

import numpy as np

from schemas.rounding import RoundingStatus, RoundRequest
from schemas.tables import SolveStatus
from service.sdc.highs import Outcome
from service.sdc.rounding import (
    Rounding,
    RoundingAudit,
    audit_rounding,
    broken_relations,
    controlled_rounding,
    random_rounding,
)

from .errors import TABLE_FIELDS, RequestInputError, core_errors
from .tables import (
    ResolvedTableRequest,
    TableInputs,
    cell_error,
    checked_table_inputs,
    on_published_scale,
    table_problem,
)

#: Values from here on are not all whole in double precision (2**53): a table's sums then
#: no longer add up exactly, and a rounding to multiples of a base cannot be checked.
EXACT_MAGNITUDE = 2.0**53


#: Rounding statuses as solver outcomes of the metrics.
def solve_outcome(status: RoundingStatus) -> SolveStatus:
    """A rounding's status as the solver outcome of the metrics."""
    match status:
        case "optimal" | "feasible":
            return Outcome.OPTIMAL
        case "infeasible":
            return Outcome.INFEASIBLE
        case "time_limit":
            return Outcome.TIME_LIMIT
        case "error":
            return Outcome.ERROR
        case _:
            assert_never(status)


#: Share of the time left that the rounding may take; the rest is the intruder audit's
#: (the 2-D LP takes a fraction of it; a 3-D MIP may need most of it).
ROUNDING_SHARE = 0.7

#: The core's field of the base, on the wire.
FIELDS = {**TABLE_FIELDS, "base": "base"}


def round_table(
    body: RoundRequest, resolved: ResolvedTableRequest, started: float, diagnostics: bool
) -> tuple[dict, RequestInputError | None]:
    """The reply (a :class:`~schemas.rounding.RoundReply`) and, when no additive rounding
    exists, the 422 error to raise instead (after the metrics saw the outcome).

    ``started``: when the request began (its time limit is the request's whole wall
    time). Without ``diagnostics`` (the filter role) the rounded values only: original
    values, deviations and the intruder's intervals would give the true values away.
    """
    inputs = on_published_scale(checked_table_inputs(body, resolved))
    too_large = np.abs(inputs.values) >= EXACT_MAGNITUDE
    if too_large.any():
        # Values of 1e19 were refused as "no controlled rounding to this base exists".
        raise cell_error(
            inputs.space,
            inputs.request_of_cell,
            too_large,
            "value",
            f"is {EXACT_MAGNITUDE:.0f} (2**53) or more in magnitude, beyond which numbers "
            "are not all whole in double precision: the table's sums no longer add up "
            "exactly and cannot be rounded",
        )
    with np.errstate(over="ignore"):
        too_fine = ~(np.abs(inputs.values) / body.base < EXACT_MAGNITUDE)
    if too_fine.any():
        # A base of 5e-324 ended the LP with HiGHS's "model refused", and 1e-300 was
        # refused as "no controlled rounding to this base exists" (2026-11-27): the
        # multiples of so fine a base are not exact numbers.
        raise cell_error(
            inputs.space,
            inputs.request_of_cell,
            too_fine,
            "base",
            f"is {EXACT_MAGNITUDE:.0f} (2**53) or more times the base: so fine a base "
            "has no exact multiples near the cell's value in double precision; choose a "
            "larger base",
        )
    problem = table_problem(inputs, body.structure.tolerance, conditions=False)
    time_limit = resolved.time_limit
    left = lambda: max(time_limit - (time.perf_counter() - started), 1e-3)
    seed = None
    with core_errors(FIELDS, inputs.request_of_cell):
        if body.method == "random":
            seed = body.seed if body.seed is not None else secrets.randbits(63)
            result = random_rounding(inputs.values, body.base, seed)
        else:
            result = controlled_rounding(
                problem.relations,
                inputs.values,
                body.base,
                time_limit=ROUNDING_SHARE * left(),
                tolerance=problem.tolerance,
            )
    solver = {
        "method": body.method,
        "status": result.status,
        "solved_by": result.solved_by,
        "message": result.message,
        "gap": None if np.isnan(result.gap) else result.gap,
        "seconds": round(result.seconds, 6),
        "time_limit": time_limit,
    }
    reply: dict = {
        "rounded": result.found,
        "base": body.base,
        "additive": None,
        "broken_relations": None,
        "seed": seed,
        "cells": [],
        "loss": None,
        "solver": solver,
        "audit": None,
    }
    if not result.found:
        error = None
        if result.status == "infeasible":
            error = RequestInputError(
                "no controlled rounding to this base exists: "
                + result.message
                + "; try another base or method 'random'",
                field="base",
            )
        return reply, error
    broken = broken_relations(problem.relations, result.rounded, problem.tolerance)
    reply["additive"] = broken.size == 0
    reply["broken_relations"] = int(broken.size)
    with core_errors(FIELDS, inputs.request_of_cell):
        # A controlled rounding proven least tells an intruder who knows the method more
        # than the box (service.sdc.rounding.audit_rounding).
        least = body.method == "controlled" and result.status == "optimal"
        audit = audit_rounding(problem, result.rounded, body.base, time_limit=left(), least=least)
    reply["cells"] = _cells(inputs, result, diagnostics)
    # The audit is a diagnostic, as on /v1/suppress: the filter role gets the rounded
    # values only (which cells are sensitive, and how well, is for analysts).
    reply["audit"] = _audit(inputs, audit, resolved.disclose) if diagnostics else None
    if diagnostics:
        deviation = np.abs(result.rounded - inputs.values)
        reply["loss"] = {
            "total_absolute": float(deviation.sum()),
            "largest": float(deviation.max(initial=0.0)),
            "changed": int((deviation > 0).sum()),
        }
    return reply, None


def _cells(inputs: TableInputs, result: Rounding, diagnostics: bool) -> list[dict]:
    keys = inputs.space.keys.tolist()
    rounded = result.rounded.tolist()
    if not diagnostics:
        return [{"key": list(k), "rounded": r} for k, r in zip(keys, rounded)]
    original = inputs.values.tolist()
    return [
        {"key": list(k), "rounded": r, "original": x, "deviation": r - x}
        for k, r, x in zip(keys, rounded, original)
    ]


def _bound(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def _audit(inputs: TableInputs, a: RoundingAudit, levels: bool) -> dict:
    """The intruder's view of the sensitive cells, for analysts; protection levels only
    where the profile discloses its measures (they reveal its parameters)."""
    upper_level, lower_level = inputs.reachable_levels()  # as judged
    cells = []
    for k, c in enumerate(a.cells.tolist()):
        entry: dict = {
            "key": list(inputs.space.key(c)),
            "protected": bool(a.protection.protected[k]) if a.certified[k] else None,
        }
        if a.certified[k]:
            entry["interval"] = [_bound(a.lower[k]), _bound(a.upper[k])]
        if levels:
            entry["upper_protection"] = float(upper_level[c])
            entry["lower_protection"] = float(lower_level[c])
        cells.append(entry)
    return {"status": a.status, "message": a.message, "cells": cells}
