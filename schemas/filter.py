"""POST /v1/filter: the online query filter (seed 003 section C) on the wire."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cells import STRICT, CellKey, Contribution, Summary
from .frequency import MAX_COUNT
from .rules import RuleSet

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
    p: float = Field(gt=0, lt=100, description="criterion 3: the p%-rule's p")

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

    @model_validator(mode="after")
    def _same_lengths(self) -> Microdata:
        # Attributes read directly, not by getattr: it runs for every cell of every query.
        n = len(self.value)
        for name, column in (
            ("respondent", self.respondent),
            ("holding", self.holding),
            ("weight", self.weight),
        ):
            if column is not None and len(column) != n:
                raise ValueError(f"'{name}' must have one entry per value")
        return self


class FilterCell(BaseModel):
    """One cell of a query's answer: a count, or a magnitude with its contributions (as
    objects or as ``microdata`` columns; or a summary, for the refuse approach)."""

    model_config = STRICT
    key: CellKey = Field(min_length=1, max_length=20)
    count: int | None = Field(None, ge=0, le=MAX_COUNT, description="a count cell: number of units")
    contributions: list[FilterContribution] | None = Field(None, max_length=100_000)
    microdata: Microdata | None = None
    summary: Summary | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FilterCell:
        given = (
            (self.count is not None)
            + (self.contributions is not None)
            + (self.microdata is not None)
            + (self.summary is not None)
        )
        if given != 1:
            raise ValueError(
                "give exactly one of 'count', 'contributions', 'microdata' and 'summary'"
            )
        return self


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
    cells: list[FilterCell] = Field(min_length=1)
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
