"""POST /v1/sensitivity: cells and a rule set (or a profile's name) in, verdicts out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cells import STRICT, CellKey, MagnitudeCell
from .rules import RuleSet


class SensitivityRequest(BaseModel):
    """Cells to assess, with the rule set or the name of a profile held by the service."""

    model_config = ConfigDict(
        **STRICT,
        json_schema_extra={
            "examples": [
                {
                    "cells": [
                        {
                            "key": ["Mining", "North"],
                            "contributions": [
                                {"value": 50000, "holding": "A"},
                                {"value": 49000, "holding": "B"},
                                {"value": 1000},
                            ],
                        },
                        {
                            "key": ["Mining", "South"],
                            "summary": {"total": 110000, "count": 3, "largest": [52000, 50000]},
                        },
                    ],
                    "rules": {
                        "rules": [{"type": "p_percent", "p": 10}, {"type": "frequency", "n": 3}]
                    },
                }
            ]
        },
    )
    cells: list[MagnitudeCell] = Field(min_length=1)
    rules: RuleSet | None = None
    profile: str | None = Field(
        None, max_length=100, description="name of a configured rule profile"
    )

    @model_validator(mode="after")
    def _rules_or_profile(self) -> SensitivityRequest:
        if (self.rules is None) == (self.profile is None):
            raise ValueError("give exactly one of 'rules' and 'profile'")
        return self


class CellVerdict(BaseModel):
    key: CellKey
    status: Literal["safe", "unsafe", "empty"]
    sensitive: bool
    fired: list[str] | None = Field(
        None,
        description="rules (or policies) that made the cell sensitive; omitted for "
        "the filter role, which receives decisions only",
    )
    total: float | None = Field(
        None, description="cell value X as published; omitted for the filter role"
    )
    count: float | None = Field(
        None,
        description="contributors N (holdings; sum of weights "
        "if weighted); omitted for the filter role",
    )
    measures: dict[str, float | None] | None = Field(
        None,
        description="each rule's linear sensitivity measure S (seed 003 B.1), by rule "
        "label; null where the rule does not apply (empty cell, every contributor waived); "
        "omitted for profiles that do not disclose measures",
    )
    upper_protection: float | None = None
    lower_protection: float | None = None


class SensitivitySummary(BaseModel):
    cells: int
    sensitive: int
    empty: int


class SensitivityReply(BaseModel):
    cells: list[CellVerdict]
    summary: SensitivitySummary
    profile: str | None = None
