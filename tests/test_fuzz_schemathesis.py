"""API fuzzing from the OpenAPI schema against a real server on loopback (schemathesis).

Every operation gets a bounded number of generated requests (valid and invalid by the
schema): no reply may be a 5xx, every reply must be a documented status with the
documented content type and schema, and no error message may repeat a confidential value
the request carried (contributions, respondent ids, bounds). Runs in developer mode
(analyst replies, the widest)
and with a filter-role key (decision-only replies, and 403 where the role may not go).
Derandomised, so CI failures reproduce. ``SDC_FUZZ_EXAMPLES`` (default 50 per operation
and mode) runs more locally.
"""

from __future__ import annotations

import itertools
import json
import os
import re

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service import api_keys
from tests.servers import server

pytestmark = pytest.mark.long  # about 35 s: left out of the quick loop (README)
EXAMPLES = int(os.environ.get("SDC_FUZZ_EXAMPLES", "50"))
#: Pydantic's wording of a schema constraint, with the schema's constant.
_SCHEMA_LIMIT = re.compile(
    r"(?:less|greater) than(?: or equal to)? -?[\d.e+]+"
    r"|at (?:most|least) \d+ (?:items?|characters?)"
)

#: Request fields whose values are confidential (contributions, respondents, bounds).
CONFIDENTIAL = {
    "value",
    "total",
    "largest",
    "weight",
    "requested",
    "holding",
    "lower_bound",
    "upper_bound",
    "upper",
    "lower",
}


def _confidential_values(body, under: str | None = None):
    if isinstance(body, dict):
        for k, v in body.items():
            yield from _confidential_values(v, k)
    elif isinstance(body, list):
        for v in body:
            yield from _confidential_values(v, under)
    elif under in CONFIDENTIAL:
        # Long and not a plain word, so that it cannot be part of a message by chance.
        if isinstance(body, str) and len(body) >= 8 and not body.replace(" ", "").isalpha():
            yield body
        elif isinstance(body, (int, float)) and not isinstance(body, bool) and abs(body) >= 1000:
            yield from {
                repr(body),
                f"{body:g}",
                str(int(body)) if body == int(body) else repr(body),
            }


def errors_echo_no_values(ctx, response, case):
    """Error messages name fields and cells, never a confidential value the caller sent."""
    if not 400 <= response.status_code < 500 or not isinstance(case.body, (dict, list)):
        return None
    text = " ".join(d.get("message", "") for d in response.json().get("detail", []))
    # The schema's own limits ("less than or equal to 10000") are constants, not values the
    # caller sent, even when a confidential field happens to carry the same number.
    text = _SCHEMA_LIMIT.sub("", text)
    leaked = [v for v in _confidential_values(case.body) if v in text]
    assert not leaked, f"error message repeats a confidential value: {text!r}"
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    errors_echo_no_values,
]
FILTER_KEY = "fuzz-filter.not-a-real-secret-0123456789"


@pytest.fixture(scope="module", params=["developer", "filter"])
def live(request, tmp_path_factory):
    """A real server (one per mode) and the headers its callers send."""
    # With a noise secret, so that the online filter's noise approach is fuzzed too.
    env = {
        "SDC_MAX_SOLVER_SECONDS": "2",
        "SDC_MAX_CELLS": "5000",
        "SDC_NOISE_SECRET": "fuzz-noise-not-a-real-secret-0123",
    }
    headers = {}
    if request.param == "filter":
        path = tmp_path_factory.mktemp("keys") / "keys.json"
        path.write_text(
            json.dumps(
                {
                    "keys": [
                        {
                            "id": "fuzz-filter",
                            "role": "filter",
                            "hash": api_keys.hash_key(FILTER_KEY, method="sha256"),
                        }
                    ]
                }
            )
        )
        env["SDC_API_KEYS_FILE"] = str(path)
        headers = {"X-API-Key": FILTER_KEY}
    with server(env) as srv:
        yield srv.url, headers


def test_api_conforms_and_never_fails(live):
    url, headers = live
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {"/v1/sensitivity", "/v1/conversions"} <= {op.path for op in operations}
    failures = []
    for operation, mode in itertools.product(operations, GenerationMode):

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case):
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            fuzz()
        except Unsatisfiable:  # nothing to get wrong (no body or parameters): no negative case
            assert mode == GenerationMode.NEGATIVE and operation.method == "get"
        except Exception as exc:  # collect every operation's failure, then report all
            failures.append(f"{operation.method.upper()} {operation.path} ({mode}): {exc}")
    assert not failures, "\n\n".join(failures)
