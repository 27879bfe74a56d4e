"""One set of solver outcomes (issue 15): the HiGHS :class:`Outcome` enum is what the audit's
solver report, the suppression's metrics outcome and the metrics labels are built from, and
the wire values stay the ones the OpenAPI document has always listed."""

from __future__ import annotations

from typing import get_args

import numpy as np
import scipy.sparse as sp
from prometheus_client import generate_latest

from schemas.tables import SolverReport, SolveStatus, SuppressSolver, SuppressStatus
from service.metrics import SOLVER_STATUSES, Metrics
from service.pipeline.suppress import solve_outcome
from service.sdc import highs
from service.sdc.highs import Outcome


def test_reported_statuses_are_every_outcome_but_unbounded():
    # A new Outcome must be added to SolveStatus (or left out here on purpose).
    assert set(get_args(SolveStatus)) == set(Outcome) - {Outcome.UNBOUNDED}


def test_metrics_labels_are_the_reported_outcomes():
    assert SOLVER_STATUSES == ("optimal", "time_limit", "infeasible", "error")
    assert all(type(s) is str for s in SOLVER_STATUSES)
    text = generate_latest(Metrics.create().registry).decode()
    assert (
        "# HELP sdc_solver_outcomes_total Solver runs by method and how they ended "
        "(optimal, time_limit, infeasible, error)\n" in text
    )


def test_every_suppression_status_has_a_solver_outcome():
    assert {s: solve_outcome(s) for s in get_args(SuppressStatus)} == {
        "optimal": "optimal",
        "feasible": "optimal",
        "time_limit": "time_limit",
        "no_safe_pattern": "infeasible",
    }
    assert all(solve_outcome(s) in get_args(SolveStatus) for s in get_args(SuppressStatus))


def test_observe_solve_counts_an_outcome_under_its_value():
    m = Metrics.create()
    m.observe_solve("suppress_fast", solve_outcome("no_safe_pattern"), 0.5)
    m.observe_solve("audit", "unbounded", 0.1)  # not a reported outcome: counted as error
    sample = m.registry.get_sample_value
    assert sample("sdc_solver_outcomes_total", {"method": "suppress_fast", "status": "infeasible"})
    assert sample("sdc_solver_outcomes_total", {"method": "audit", "status": "error"}) == 1


def test_wire_enums_are_unchanged():
    def enum(model, field):
        return model.model_json_schema()["properties"][field]

    assert enum(SolverReport, "status") == {
        "enum": ["optimal", "time_limit", "infeasible", "error"],
        "title": "Status",
        "type": "string",
    }
    assert enum(SuppressSolver, "status") == {
        "enum": ["optimal", "feasible", "time_limit", "no_safe_pattern"],
        "title": "Status",
        "type": "string",
    }
    parsed = SolverReport.model_validate(
        {
            "status": "time_limit",
            "message": "",
            "lp_solves": 0,
            "components": 0,
            "seconds": 0.0,
            "time_limit": 1.0,
        }
    )
    assert parsed.model_dump(mode="json")["status"] == "time_limit"


def test_infinite_bound_is_highs_infinity_and_a_refused_model_says_so():
    """:data:`highs.INFINITE_BOUND` is HiGHS's own infinity (what /v1/adjust refuses
    values and levels from); a model HiGHS refuses to load (a matrix entry of 1e15 or more)
    ends in ``ERROR`` and is described as refused, not as HiGHS's "Empty"."""
    h = highs.model([1.0], [0.0], [1.0], sp.csc_matrix((0, 1)), [], [])
    assert highs._option(h, "infinite_bound") == highs.INFINITE_BOUND
    assert highs._option(h, "infinite_cost") == highs.INFINITE_BOUND
    refused = highs.model(
        [1.0, 1.0], [0.0, 0.0], [np.inf, np.inf], sp.csc_matrix([[1.0, -1e15]]), [-np.inf], [0.0]
    )
    assert highs.run(refused, highs.now() + 10) is Outcome.ERROR
    assert highs.describe(refused) == "model refused (a number out of range)"
