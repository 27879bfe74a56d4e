"""POST /v1/filter: the online query filter (seed 003 section C) on the wire."""

from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter, is_not
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from .cells import STRICT, CellKey, Contribution, Summary, _code
from .frequency import MAX_COUNT
from .rules import MIN_PERCENT, RuleSet

Name = Annotated[str, Field(min_length=1, max_length=200)]


class QueryRules(BaseModel):
    """The query filter: rules on the query's definition, checked before any figure."""

    model_config = STRICT
    max_dimensions: int | None = Field(
        None, ge=1, le=20, description="most variables one query may cross"
    )
    min_population: float | None = Field(
        None,
        ge=0,
        description="least population of the query's universe ('population' of "
        "the query); a query that does not give it is refused",
    )
    min_area_population: dict[Name, float] = Field(
        default_factory=dict,
        max_length=100,
        description="per geographic variable, the least "
        "population of its smallest area in the query ('area_population' of the query)",
    )
    forbidden_combinations: list[list[Name]] = Field(
        default_factory=list,
        max_length=100,
        description="sets of variables that may not all appear in one query",
    )


class RefusePolicy(BaseModel):
    """The AQS approach: a table with any sensitive cell is refused whole."""

    model_config = STRICT
    approach: Literal["refuse"]
    count_threshold: int = Field(
        3,
        ge=1,
        le=1_000_000,
        description="count cells with 0 < count < threshold are sensitive (threshold rule)",
    )


class NoisePolicy(BaseModel):
    """The ARMS approach: noise on the microdata, then cells failing a criterion are
    suppressed, without complementary suppression."""

    model_config = STRICT
    approach: Literal["noise"]
    d: float = Field(gt=0, lt=0.5, description="noise level (seed 003 B.4: e.g. 0.1)")
    jitter: float = Field(0.0, ge=0, description="spread of multipliers around 1 +- d, < d")
    # Not strict itself (its numbers are): profiles built in Python code pass a list.
    ratio_range: tuple[float, float] = Field(
        strict=False,
        description="criterion 1: noisy/true ratio range within which a cell is published",
    )
    min_weighted_count: float = Field(ge=0, description="criterion 2")
    p: float = Field(ge=MIN_PERCENT, lt=100, description="criterion 3: the p%-rule's p")

    @model_validator(mode="after")
    def _ranges(self) -> NoisePolicy:
        # No values in the messages: in a profile file they are confidential.
        if self.jitter >= self.d:
            raise ValueError("jitter must be less than d")
        low, high = self.ratio_range
        if not 0 <= low <= 1 <= high:
            raise ValueError("ratio_range must be [low, high] with low <= 1 <= high")
        return self


class FilterPolicy(BaseModel):
    """The online filter's policy, held in a profile next to its sensitivity rules."""

    model_config = STRICT
    query: QueryRules = QueryRules()
    statistical: Annotated[RefusePolicy | NoisePolicy, Field(discriminator="approach")]


class InlinePolicy(BaseModel):
    """A filter policy sent with the request (developers, tests); production callers name a
    profile, whose parameters stay in the service."""

    model_config = STRICT
    rules: RuleSet | None = Field(
        None, description="sensitivity rules for magnitude cells under the refuse approach"
    )
    filter: FilterPolicy


class FilterContribution(Contribution):
    """A contribution with the respondent it comes from; ``holding`` is its enterprise."""

    respondent: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="establishment id; needed by the "
        "noise approach, whose multipliers are keyed by it (never echoed)",
    )


class Microdata(BaseModel):
    """A cell's contributions as columns (one entry per contribution): the compact form for
    online systems, validated and converted an order of magnitude faster than a list of
    contribution objects."""

    model_config = STRICT
    value: list[float] = Field(min_length=1, max_length=100_000)
    respondent: list[Name] | None = Field(
        None, description="establishment ids; needed by the noise approach (never echoed)"
    )
    holding: list[Name | None] | None = Field(
        None, description="enterprise of each; null: the respondent is its own enterprise"
    )
    weight: list[Annotated[float, Field(gt=0)]] | None = Field(None, description="sampling weights")
    # One entry per value in each column: checked for all the cells of a request at once
    # (FilterRequest.cells, _checked_cells), not by a validator per cell.


#: A cell's code. ``schemas.cells.Code`` without its validator in Python, which the request
#: runs over all the cells' codes at once (:func:`_checked_cells`): the same JSON schema.
FilterCode = Annotated[str, Field(max_length=200)]


class FilterCell(BaseModel):
    """One cell of a query's answer: a count, or a magnitude with its contributions (as
    objects or as ``microdata`` columns; or a summary, for the refuse approach). Exactly
    one of them, and codes and microdata columns as :func:`_checked_cells` checks them."""

    model_config = STRICT
    key: list[FilterCode] = Field(min_length=1, max_length=20)
    count: int | None = Field(None, ge=0, le=MAX_COUNT, description="a count cell: number of units")
    contributions: list[FilterContribution] | None = Field(None, max_length=100_000)
    microdata: Microdata | None = None
    summary: Summary | None = None


_SOURCES = attrgetter("count", "contributions", "microdata", "summary")
_KEY = attrgetter("key")
_MICRODATA = attrgetter("microdata")
_VALUE = attrgetter("value")
_COLUMNS = (
    ("respondent", attrgetter("respondent")),
    ("holding", attrgetter("holding")),
    ("weight", attrgetter("weight")),
)
_ONE_SOURCE = "give exactly one of 'count', 'contributions', 'microdata' and 'summary'"


def _value_error(loc: tuple, message: str) -> InitErrorDetails:
    """The error a ``ValueError(message)`` raised by a validator at ``loc`` gives."""
    return InitErrorDetails(
        type=PydanticCustomError("value_error", "Value error, {error}", {"error": message}),
        loc=loc,
        input=None,
    )


def _checked_cells(cells: list[FilterCell]) -> list[FilterCell]:
    """The checks of a cell that no JSON-schema constraint states, for all the cells at
    once (a Python validator per cell was a tenth of the filter's work on a 50-cell
    answer): each code is UTF-8 text without NUL (:func:`schemas.cells._code`), each
    ``microdata`` column has one entry per value, and each cell gives exactly one of
    ``count``, ``contributions``, ``microdata`` and ``summary``. Errors are those of the
    validators per cell they replace, at the same places (``cells.3.microdata``) and in the
    same order; they are raised only when every cell is otherwise valid."""
    keys = list(map(_KEY, cells))
    codes = "".join(chain.from_iterable(keys))
    bad_codes = "\x00" in codes or not codes.isascii() and not _encodes(codes)
    micro = list(map(_MICRODATA, cells))
    n_micro = sum(map(is_not, micro, repeat(None)))  # not micro.count(None): model __eq__
    bad_micro = False
    if n_micro:
        with_micro = [m for m in micro if m is not None] if n_micro < len(micro) else micro
        lengths = list(map(len, map(_VALUE, with_micro)))
        for _, column in _COLUMNS:
            given = list(map(column, with_micro))
            missing = given.count(None)  # lists and None: compared in C
            if missing == n_micro:
                continue
            if missing == 0:  # every cell sent the column: its lengths at C speed
                bad_micro = list(map(len, given)) != lengths
            else:
                bad_micro = any(c is not None and len(c) != n for c, n in zip(given, lengths))
            if bad_micro:
                break
    # Exactly three of each cell's four sources None (by identity: tuple.count(None) would
    # call the models' __eq__).
    bad_source = any(
        (a is None) + (b is None) + (c is None) + (d is None) != 3
        for a, b, c, d in map(_SOURCES, cells)
    )
    if bad_codes or bad_micro or bad_source:
        raise ValidationError.from_exception_data("FilterCell", list(_cell_errors(cells)))
    return cells


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _cell_errors(cells: list[FilterCell]):
    """The errors of :func:`_checked_cells`, found cell by cell (only for a request that
    has one): as the validators per cell gave them."""
    for i, cell in enumerate(cells):
        failed = False
        for j, code in enumerate(cell.key):
            try:
                _code(code)
            except ValueError as error:
                failed = True
                yield _value_error((i, "key", j), str(error))
        micro = cell.microdata
        if micro is not None:
            for name, column in _COLUMNS:
                given = column(micro)
                if given is not None and len(given) != len(micro.value):
                    failed = True
                    yield _value_error((i, "microdata"), f"'{name}' must have one entry per value")
                    break
        if not failed and sum(map(is_not, _SOURCES(cell), repeat(None))) != 1:
            yield _value_error((i,), _ONE_SOURCE)


class QueryDefinition(BaseModel):
    model_config = STRICT
    variables: list[Name] = Field(
        min_length=1, max_length=20, description="the variables the answer crosses"
    )
    population: float | None = Field(None, ge=0, description="population of the universe")
    area_population: dict[Name, float] = Field(
        default_factory=dict,
        max_length=100,
        description="per geographic variable, population of its smallest area in the answer",
    )


class FilterRequest(BaseModel):
    """One query's definition and its answer, with a profile's name (or, for testing a
    policy, the policy itself)."""

    model_config = ConfigDict(
        **STRICT,
        json_schema_extra={
            "examples": [
                {
                    "policy": {
                        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
                        "filter": {
                            "query": {"max_dimensions": 3},
                            "statistical": {"approach": "refuse"},
                        },
                    },
                    "query": {
                        "variables": ["industry", "county"],
                        "population": 250000,
                        "area_population": {"county": 40000},
                    },
                    "cells": [
                        {
                            "key": ["Mining", "Adams"],
                            "contributions": [
                                {"value": 900, "respondent": "e1", "holding": "A"},
                                {"value": 80, "respondent": "e2"},
                                {"value": 20, "respondent": "e3"},
                            ],
                        },
                        {"key": ["Retail", "Adams"], "count": 12},
                    ],
                }
            ]
        },
    )
    query: QueryDefinition
    cells: Annotated[list[FilterCell], AfterValidator(_checked_cells)] = Field(min_length=1)
    profile: str | None = Field(None, max_length=100)
    policy: InlinePolicy | None = Field(
        None, description="a profile sent with the request instead of a configured one"
    )

    @model_validator(mode="after")
    def _profile_or_policy(self) -> FilterRequest:
        if (self.profile is None) == (self.policy is None):
            raise ValueError("give exactly one of 'profile' and 'policy'")
        return self


class FilterCellDecision(BaseModel):
    key: CellKey
    publish: bool
    value: float | None = Field(
        None,
        description="the value to publish: the noisy value under the noise approach "
        "(null for count cells and under the refuse approach, where the caller's own figures "
        "are published)",
    )
    reasons: list[str] | None = Field(
        None, description="why the cell is stopped (rules, criteria); analysts only"
    )


class FilterRefusal(BaseModel):
    code: Literal[
        "too_many_variables",
        "forbidden_combination",
        "population_too_small",
        "area_too_small",
        "sensitive_cells",
    ]
    message: str
    stage: Literal["query", "statistical"]


class FilterReply(BaseModel):
    decision: Literal["publish", "suppress", "refuse"]
    refusal: FilterRefusal | None = None
    cells: list[FilterCellDecision] = Field(
        description="every cell's decision; empty when the table is refused"
    )
