"""POST /v1/frequency/sensitivity: a count table (dimensions, cells with counts) and the
threshold rule and/or seed 001's extended threshold rules in, verdicts out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cells import STRICT as _STRICT
from .cells import CellKey, Code

#: Counts above this are refused: float64, in which the relative rules compare, is exact
#: for integers only up to 2**53 (service.sdc.frequency).
MAX_COUNT = 2**53


class CountDimension(BaseModel):
    """One spanning variable of the count table: its leaf codes and, for a key variable,
    optionally a hierarchy of areas above them (seed 001, "Hierarchical variables")."""

    model_config = _STRICT
    name: Code
    codes: list[Code] = Field(
        min_length=1, max_length=100_000, description="leaf codes, in the order of the reply"
    )
    hierarchy: list[dict[Code, Code]] | None = Field(
        None,
        min_length=1,
        max_length=10,
        description="key variables only: level 1 maps every leaf code to its area, level 2 "
        "every level-1 area to its area, and so on; rules 1a and 2a are repeated at every "
        "level",
    )


class CountCell(BaseModel):
    """A cell of the count table; cells not sent count 0."""

    model_config = _STRICT
    key: CellKey = Field(min_length=1, max_length=8, description="one code per dimension")
    count: int = Field(ge=0, le=MAX_COUNT, description="respondents in the cell")


class ThresholdRule(BaseModel):
    """The usual threshold rule (seed 003 section A): ``0 < count < t`` is sensitive."""

    model_config = _STRICT
    t: float = Field(ge=0, description="counts >= t are safe")
    zero_cells: Literal["safe", "sensitive"] = Field(
        "safe",
        description="'sensitive' flags empty cells too (structural zeros whose "
        "emptiness is itself confidential)",
    )


class ExtendedRules(BaseModel):
    """Seed 001's extended threshold rules: switches and thresholds. Defaults are the
    values of seed 001's "Example revisited" with every rule on."""

    model_config = _STRICT
    rule_1a: bool = Field(
        True, description="absolute dominance in the key's row: f_yk >= f_k - t_key_abs"
    )
    rule_1b: bool = Field(
        True, description="absolute dominance in the target's column: f_yk >= f_y - t_target_abs"
    )
    rule_2a: bool = Field(True, description="relative dominance: 100 f_yk / f_k >= t_key_rel")
    rule_2b: bool = Field(True, description="relative dominance: 100 f_yk / f_y >= t_target_rel")
    rule_3: bool = Field(True, description="minimum frequency of cells and of both marginals")
    t_key_abs: float = Field(3.0, ge=0)
    t_target_abs: float = Field(3.0, ge=0)
    t_key_rel: float = Field(99.0, gt=0, le=100, description="percent")
    t_target_rel: float = Field(99.0, gt=0, le=100, description="percent")
    t_min_cell: float = Field(2.0, ge=0)
    t_min_key: float = Field(2.0, ge=0)
    t_min_target: float = Field(2.0, ge=0)
    zero_cells: Literal["dominant", "informative"] = Field(
        "dominant",
        description="'dominant': rules 1-2 flag the dominating cell only; "
        "'informative': also the zero cells of its row (1a, 2a) or column (1b, 2b)",
    )


class CountRules(BaseModel):
    """One or both rule sets; a cell is sensitive when any rule flags it."""

    model_config = _STRICT
    threshold: ThresholdRule | None = None
    extended: ExtendedRules | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> CountRules:
        if self.threshold is None and self.extended is None:
            raise ValueError("give 'threshold', 'extended' or both")
        return self


class FrequencyRequest(BaseModel):
    """A count table spanned by key and target variables, and the rules to apply."""

    model_config = ConfigDict(
        **_STRICT,
        json_schema_extra={
            "examples": [
                {
                    "dimensions": [
                        {"name": "municipality", "codes": ["m1", "m2", "m3"]},
                        {"name": "Y", "codes": ["A", "B"]},
                    ],
                    "keys": ["municipality"],
                    "targets": ["Y"],
                    "cells": [
                        {"key": ["m1", "A"], "count": 19},
                        {"key": ["m1", "B"], "count": 1},
                        {"key": ["m2", "A"], "count": 7},
                        {"key": ["m2", "B"], "count": 6},
                        {"key": ["m3", "A"], "count": 2},
                    ],
                    "rules": {"extended": {"t_key_abs": 1, "rule_1b": False, "rule_2b": False}},
                }
            ]
        },
    )
    dimensions: list[CountDimension] = Field(min_length=1, max_length=8)
    keys: list[Code] = Field(
        default_factory=list,
        max_length=8,
        description="names of the key variables (known to an intruder); "
        "required by the extended rules",
    )
    targets: list[Code] = Field(
        default_factory=list,
        max_length=8,
        description="names of the target variables; required by the extended rules",
    )
    cells: list[CountCell] = Field(min_length=1)
    rules: CountRules


MarginalKey = list[Code | None]
RuleName = Literal["1a", "1b", "2a", "2b", "3", "threshold"]


class CountVerdict(BaseModel):
    key: CellKey
    status: Literal["safe", "unsafe", "empty"]
    sensitive: bool
    count: int | None = Field(None, description="omitted for the filter role")
    rules: list[RuleName] | None = Field(
        None, description="rules that flag the cell; omitted for the filter role"
    )
    inherited: list[Literal["1a", "2a"]] | None = Field(
        None,
        description="of those, the rules that flag it through an unsafe area at a "
        "higher level of a key hierarchy; omitted for the filter role",
    )


class MarginalVerdict(BaseModel):
    key: MarginalKey = Field(description="one code per dimension, null where summed over")
    sensitive: bool
    count: int | None = Field(None, description="omitted for the filter role")
    rules: list[Literal["3"]] | None = Field(None, description="omitted for the filter role")


class AreaVerdict(BaseModel):
    key: MarginalKey = Field(description="the area's code in the hierarchical dimension")
    count: int
    rules: list[Literal["1a", "2a"]]


class LevelReport(BaseModel):
    """Rules 1a and 2a at one level of a key hierarchy, for one target variable."""

    dimension: str
    target: str
    level: int = Field(description="1: the areas just above the leaves")
    checked: list[MarginalKey] = Field(
        description="area rows checked (some part unsafe at the level below); the others "
        "are entirely safe and skipped (seed 001)"
    )
    cells: list[AreaVerdict] = Field(description="unsafe area cells")


class FrequencySummary(BaseModel):
    cells: int = Field(description="cells of the table, sent or not")
    unsafe: int
    empty: int
    marginals_unsafe: int
    by_rule: dict[str, int] | None = Field(
        None, description="cells flagged per rule; omitted for the filter role"
    )


class FrequencyReply(BaseModel):
    cells: list[CountVerdict] = Field(
        description="every cell of the table, in row-major order of the dimensions' codes"
    )
    key_marginals: list[MarginalVerdict] = Field(
        description="per target variable, the counts summed over it (f_k); empty without "
        "extended rules"
    )
    target_marginals: list[MarginalVerdict] = Field(
        description="the counts summed over the key variables (f_y); empty without extended rules"
    )
    levels: list[LevelReport] | None = Field(
        None, description="key hierarchies' higher levels; omitted for the filter role"
    )
    summary: FrequencySummary
