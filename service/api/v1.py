"""The ``/v1`` API: one router holding every capability's route."""

from __future__ import annotations

from fastapi import APIRouter

from . import adjust as adjust_api
from . import audit, conversions, frequency, query_filter, sensitivity, suppress
from . import noisy_table as noisy_table_api
from . import rounding as rounding_api
from .routing import DECLARED

#: The endpoints (declared by :func:`.routing.post`) in the order routes are matched: the
#: filter first, as it is on the path of every user query.
ENDPOINTS = (
    query_filter.filter_answer,
    sensitivity.sensitivity,
    frequency.frequency_sensitivity,
    conversions.convert_rule,
    audit.audit,
    suppress.suppress_route,
    noisy_table_api.noise_route,
    rounding_api.round_route,
    adjust_api.adjust_route,
)

router = APIRouter(prefix="/v1")
for _endpoint in ENDPOINTS:
    _path, _options = DECLARED[_endpoint]
    router.add_api_route(_path, _endpoint, methods=["POST"], **_options)
