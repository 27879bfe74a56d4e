"""The pipeline without HTTP (service.pipeline): no web framework imported, schema objects
in and replies out, and core errors named in the request's terms in one place."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import time

import numpy as np
import pytest

import service.pipeline
from schemas.filter import FilterReply, FilterRequest
from schemas.sensitivity import SensitivityReply, SensitivityRequest
from schemas.tables import AuditReply, AuditRequest, SuppressReply, SuppressRequest
from service.config import Settings
from service.pipeline import audit, query_filter, sensitivity, suppress
from service.pipeline.errors import (
    NOISE_FIELDS,
    TABLE_FIELDS,
    LimitError,
    RequestInputError,
    core_errors,
    to_wire,
)
from service.pipeline.tables import resolve_table_request
from service.sdc import magnitudes
from service.sdc.errors import InputError
from tests.servers import ROOT

MODULES = sorted(
    f"service.pipeline.{m.name}" for m in pkgutil.iter_modules(service.pipeline.__path__)
)


def test_no_web_framework_is_imported():
    """Every pipeline module imported in a fresh interpreter leaves FastAPI and Starlette
    (and the service's HTTP layer) unimported."""
    code = (
        "import sys\n"
        f"for name in {MODULES!r}: __import__(name)\n"
        "web = {'fastapi', 'starlette', 'uvicorn', 'httpx'}\n"
        "print(sorted({m for m in sys.modules if m.split('.')[0] in web\n"
        "              or m == 'service.api' or m.startswith('service.api.')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert len(MODULES) >= 10 and out.strip() == "[]"


def _example(model, k=0) -> dict:
    return model.model_json_schema()["examples"][k]


def assert_conforms(model, reply: dict) -> None:
    assert model.model_validate(reply).model_dump(mode="json", exclude_unset=True) == reply


def test_sensitivity_from_schema_objects():
    body = SensitivityRequest.model_validate(_example(SensitivityRequest))
    reply, n_sensitive = sensitivity.assess(body, body.rules, True, diagnostics=True)
    assert_conforms(SensitivityReply, reply)
    assert n_sensitive == 1 and [c["sensitive"] for c in reply["cells"]] == [True, False]
    decisions, _ = sensitivity.assess(body, body.rules, True, diagnostics=False)
    assert decisions["cells"] == [
        {"key": c["key"], "status": c["status"], "sensitive": c["sensitive"]}
        for c in reply["cells"]
    ]


def test_audit_and_suppression_from_schema_objects():
    settings = Settings()
    body = AuditRequest.model_validate(_example(AuditRequest))
    reply, (status, seconds) = audit.audit(body, resolve_table_request(body, settings), True)
    assert_conforms(AuditReply, reply)
    assert status == "optimal" and seconds >= 0
    body = SuppressRequest.model_validate(_example(SuppressRequest))
    reply = suppress.protect(
        body, resolve_table_request(body, settings), time.perf_counter(), diagnostics=False
    )
    assert_conforms(SuppressReply, reply)
    assert reply["safe"] and reply["audit"] is None


def test_filter_from_schema_objects():
    body = FilterRequest.model_validate(_example(FilterRequest))
    rules, policy = query_filter.policy_of(body, Settings(), diagnostics=True)
    reply, stopped = query_filter.screen(body, rules, policy, None, diagnostics=True)
    assert_conforms(FilterReply, reply)
    assert reply["decision"] == "refuse" and stopped == 1  # e1 dominates its cell


def test_limits_and_profiles_are_request_errors():
    body = AuditRequest.model_validate(
        {**_example(AuditRequest), "rules": None, "profile": "nobody"}
    )
    with pytest.raises(RequestInputError) as unknown:
        resolve_table_request(body, Settings())
    assert (unknown.value.field, unknown.value.message) == ("profile", "unknown profile")
    with pytest.raises(LimitError) as too_large:
        resolve_table_request(body, Settings(max_cells=4))
    assert too_large.value.field == "structure.dimensions"


# --- core errors in the request's terms ----------------------------------------------------


def test_fields_and_cells_are_mapped_to_the_request():
    core = InputError("bounds of a cell are empty", field="lower_bounds", cell=2)
    wire = to_wire(core, TABLE_FIELDS, numbers=np.array([4, -1, 0]))
    assert (wire.field, wire.cell, wire.message) == ("lower_bound", 0, core.message)
    # A table cell the request did not send (a computed margin) is named by no number.
    margin = to_wire(
        InputError("x", field="forbidden", cell=1), TABLE_FIELDS, numbers=np.array([4, -1])
    )
    assert (margin.field, margin.cell, margin.message_without_parameters) == (
        "constraint",
        None,
        None,
    )
    # Without numbers the core's cells are not the request's: dropped, not passed on.
    assert to_wire(InputError("x", field="counts", cell=7)).cell is None
    assert to_wire(wire, TABLE_FIELDS, numbers=[9, 9, 9]) is wire  # mapped once only


def test_contribution_fields_follow_the_form_the_cell_was_sent_in():
    body = FilterRequest.model_validate(
        {
            "profile": "p",
            "query": {"variables": ["x"]},
            "cells": [
                {
                    "key": ["a"],
                    "microdata": {"value": [1.0], "respondent": ["e"], "holding": ["h"]},
                },
                {
                    "key": ["b"],
                    "contributions": [{"value": 1.0, "respondent": "e", "holding": "g"}],
                },
            ],
        }
    )
    clash = InputError(
        "an establishment is listed under two enterprises", field="enterprise_ids", cell=1
    )
    for rows, field in (([0, 1], "contributions.holding"), ([1, 0], "microdata.holding")):
        wire = to_wire(clash, NOISE_FIELDS, numbers=rows, cells=body.cells)
        assert (wire.field, wire.cell) == (field, rows[1])
        assert wire.message == "a respondent is listed under two holdings"


def test_a_message_that_states_a_parameter_has_one_without_it():
    with pytest.raises(RequestInputError) as caught, core_errors(numbers=[3]):
        magnitudes.from_summaries(
            np.array([100.0]), np.array([5.0]), np.array([[40.0, 30.0]]), depth=3
        )
    error = caught.value
    assert (error.field, error.cell) == ("summary.largest", 3)
    assert "3 largest" in error.message
    assert "3" not in error.message_without_parameters
    assert magnitudes.TooFewLargest.code == "too_few_largest"


def test_table_errors_name_the_request_cell_when_only_some_cells_have_contributions(client):
    """The contributions of a table request's cells are read for the cells that have them;
    an error in them names that cell's number in the request (it named its position among
    the cells with contributions before the mapping was made in one place)."""
    body = {
        "structure": {"dimensions": [{"name": "r", "leaves": ["a", "b"]}]},
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "cells": [
            {"key": ["a"], "value": 5},
            {"key": ["b"], "contributions": [{"value": -3}, {"value": 4}]},
        ],
    }
    for path in ("/v1/audit", "/v1/suppress"):
        detail = client.post(path, json=body).json()["detail"][0]
        assert (detail["field"], detail["cell"], detail["key"]) == ("contributions.value", 1, ["b"])
