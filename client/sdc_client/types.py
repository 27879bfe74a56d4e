"""The service's requests and replies as typed dictionaries.

The client installs without the server (no Pydantic, no ``schemas``), so the wire types
are written out again here as :class:`~typing.TypedDict`: a reply is the decoded JSON
itself, typed for editors and mypy, with nothing converted. They follow ``schemas/`` (the
server's models are the authority: ``schemas/tables.py``, ``schemas/sensitivity.py``,
``schemas/frequency.py``, ``schemas/conversions.py``, ``schemas/filter.py``); fields the
service leaves out for the filter role, or for profiles that do not disclose measures, are
``NotRequired`` or ``None``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Key = list[str]
#: A request body or one of its parts, as sent (JSON-compatible).
JSON = dict[str, Any]


# Requests: the parts a caller most often builds; the rest stays a JSON object.


class Contribution(TypedDict, total=False):
    value: float
    holding: str | None
    weight: float | None
    waiver: bool
    request: bool


class Dimension(TypedDict, total=False):
    name: str
    total: str
    leaves: list[str]
    children: dict[str, list[str]]


class Structure(TypedDict, total=False):
    dimensions: list[Dimension]
    tables: list[list[str]]
    tolerance: float


class TableCell(TypedDict, total=False):
    key: Key
    value: float
    contributions: list[Contribution]
    summary: JSON
    protection: JSON
    lower_bound: float
    upper_bound: float
    suppressed: bool  # audit
    cost: float  # suppress, cost "weights"
    constraint: Literal["forbid", "force"]  # suppress


# Replies.


class CellVerdict(TypedDict):
    key: Key
    status: Literal["safe", "unsafe", "empty"]
    sensitive: bool
    fired: NotRequired[list[str] | None]
    total: NotRequired[float | None]
    count: NotRequired[float | None]
    measures: NotRequired[dict[str, float | None] | None]
    upper_protection: NotRequired[float | None]
    lower_protection: NotRequired[float | None]


class SensitivitySummary(TypedDict):
    cells: int
    sensitive: int
    empty: int


class SensitivityReply(TypedDict):
    cells: list[CellVerdict]
    summary: SensitivitySummary
    profile: str | None


class CountVerdict(TypedDict):
    key: Key
    status: Literal["safe", "unsafe", "empty"]
    sensitive: bool
    count: NotRequired[int | None]
    rules: NotRequired[list[str] | None]
    inherited: NotRequired[list[str] | None]


class FrequencyReply(TypedDict):
    cells: list[CountVerdict]
    key_marginals: list[JSON]
    target_marginals: list[JSON]
    levels: NotRequired[list[JSON] | None]
    summary: JSON


class Equivalent(TypedDict):
    rule: JSON
    relation: Literal[
        "equivalent", "more_protective", "less_protective", "relaxed_for_negative_values"
    ]
    source: str


class ConversionReply(TypedDict):
    equivalents: list[Equivalent]


class FilterCellDecision(TypedDict):
    key: Key
    publish: bool
    value: float | None
    reasons: NotRequired[list[str] | None]


class FilterReply(TypedDict):
    decision: Literal["publish", "suppress", "refuse"]
    refusal: JSON | None
    cells: list[FilterCellDecision]


class Flags(TypedDict):
    exact: bool
    upper_too_close: bool
    lower_too_close: bool
    too_narrow: bool


class AuditedCell(TypedDict):
    key: Key
    suppressed: bool
    sensitive: bool
    protected: bool | None
    interval: NotRequired[list[float | None] | None]
    certified: NotRequired[bool | None]
    flags: NotRequired[Flags | None]
    missing_upper: NotRequired[float | None]
    missing_lower: NotRequired[float | None]
    upper_protection: NotRequired[float | None]
    lower_protection: NotRequired[float | None]
    derived: NotRequired[bool | None]


class AuditReply(TypedDict):
    verdict: Literal["safe", "unsafe", "uncertified", "infeasible"]
    reasons: list[str]
    unions_checked: bool
    cells: list[AuditedCell]
    unions: NotRequired[list[JSON] | None]
    aggregations: NotRequired[JSON | None]
    solver: NotRequired[JSON | None]


class CellStatus(TypedDict):
    key: Key
    status: Literal["primary", "secondary", "published"]
    value: NotRequired[float | None]  # replies that carry each cell's value


class Loss(TypedDict):
    cells: int
    secondary: int
    value: float
    value_share: float
    cost: float


class SuppressSolver(TypedDict):
    method: Literal["fast", "exact"]
    status: Literal["optimal", "feasible", "time_limit", "no_safe_pattern"]
    message: str
    lower_bound: float | None
    gap: float | None
    seconds: float
    iterations: int
    time_limit: float
    verdict: NotRequired[Literal["safe", "unsafe", "uncertified", "infeasible"] | None]
    unprotected: NotRequired[list[Key]]


class SuppressReply(TypedDict):
    safe: bool
    cells: list[CellStatus]
    loss: Loss | None
    solver: SuppressSolver
    audit: AuditReply | None
