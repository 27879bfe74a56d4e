"""POST /v1/noise: a whole magnitude table published with keyed multiplicative noise on its
microdata (seed 003 B.4), on the wire."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cells import STRICT, CellKey
from .rules import RuleSet
from .tables import Structure, TableCell

Name = Annotated[str, Field(min_length=1, max_length=200)]


class NoiseLevel(BaseModel):
    """The noise's parameters (seed 003 B.4: multipliers near ``1 + d`` or ``1 - d``)."""

    model_config = STRICT
    d: float = Field(gt=0, lt=0.5, description="noise level (seed 003 B.4: e.g. 0.1)")
    jitter: float = Field(0.0, ge=0, description="spread of multipliers around 1 +- d, < d")

    @model_validator(mode="after")
    def _jitter_below_d(self) -> NoiseLevel:
        if self.jitter >= self.d:
            raise ValueError("jitter must be less than d")
        return self


class NoiseCell(TableCell):
    """A cell of the table. Leaves need their contributions and, for each, the
    establishment it comes from (``respondents``; a contribution's ``holding`` is its
    enterprise, whose noise direction all its establishments share). Margins may be left
    out: their noisy value is the sum of their leaves' (the noise is added before
    tabulation)."""

    respondents: list[Name] | None = Field(
        None,
        max_length=100_000,
        description="establishment id of each contribution, in order; keys the noise "
        "multipliers (never echoed)",
    )


class NoiseRequest(BaseModel):
    """A magnitude table with its microdata, the rules that make cells sensitive (their
    protection levels) and the noise level."""

    model_config = ConfigDict(
        **STRICT,
        json_schema_extra={
            "examples": [
                {
                    "structure": {
                        "dimensions": [
                            {"name": "size", "leaves": ["A", "B"]},
                            {"name": "activity", "leaves": ["I", "II"]},
                        ]
                    },
                    "cells": [
                        {
                            "key": ["A", "I"],
                            "contributions": [{"value": 155}, {"value": 4}, {"value": 1}],
                            "respondents": ["e1", "e2", "e3"],
                        },
                        {
                            "key": ["A", "II"],
                            "contributions": [{"value": 200}, {"value": 100}, {"value": 80}],
                            "respondents": ["e4", "e5", "e6"],
                        },
                        {
                            "key": ["B", "I"],
                            "contributions": [{"value": 40}, {"value": 20, "holding": "g1"}],
                            "respondents": ["e7", "e8"],
                        },
                        {
                            "key": ["B", "II"],
                            "contributions": [
                                {"value": 300},
                                {"value": 250, "holding": "g1"},
                                {"value": 90},
                            ],
                            "respondents": ["e9", "e10", "e11"],
                        },
                    ],
                    "rules": {"rules": [{"type": "p_percent", "p": 10}]},
                    "noise": {"d": 0.1, "jitter": 0.02},
                }
            ]
        },
    )
    structure: Structure
    cells: list[NoiseCell] = Field(min_length=1)
    rules: RuleSet | None = None
    profile: str | None = Field(
        None, max_length=100, description="name of a configured rule profile"
    )
    noise: NoiseLevel | None = Field(
        None,
        description="the noise level (analysts only); omitted: the profile's filter "
        "policy's, which must use the noise approach",
    )
    flagged: Literal["flag", "suppress"] = Field(
        "flag",
        description="cells whose noise is smaller than their protection level: 'flag' "
        "publishes them flagged, 'suppress' leaves their value out",
    )

    @model_validator(mode="after")
    def _rules_or_profile(self) -> NoiseRequest:
        if self.rules is not None and self.profile is not None:
            raise ValueError("give at most one of 'rules' and 'profile'")
        return self


class NoisyCell(BaseModel):
    key: CellKey
    status: Literal["published", "flagged", "suppressed"] = Field(
        description="'flagged' / 'suppressed': a sensitive cell whose noise, less the part "
        "an intruder respondent knows (its own), is smaller than its protection level"
    )
    value: float | None = Field(
        description="the noisy value; null when suppressed (for the filter role also when flagged)"
    )
    relative_change: float | None = Field(
        None,
        description="analysts only: (noisy - true) / true; null for a true value of 0",
    )
    sensitive: bool | None = Field(None, description="analysts only")
    derivable: bool | None = Field(
        None,
        description="analysts only, suppressed cells: its noisy value follows exactly from "
        "the published noisy cells (a relation or a combination of relations); such a "
        "suppression protects nothing until complementary cells are suppressed",
    )


class NoiseSummary(BaseModel):
    cells: int
    sensitive: int
    flagged: int = Field(
        description="sensitive cells whose noise left to an intruder is below their protection"
    )
    max_relative_change: float | None = Field(None, description="analysts only")
    mean_relative_change: float | None = Field(
        None, description="analysts only: mean absolute relative change of published cells"
    )


class NoiseReply(BaseModel):
    cells: list[NoisyCell] = Field(description="every cell of the table, margins included")
    summary: NoiseSummary
