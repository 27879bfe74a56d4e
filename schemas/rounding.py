"""Rounding of a structured table to a base (``/v1/round``): controlled rounding (additive,
least deviation) and unbiased random rounding, for count and magnitude tables (seed 003
sections A and A.1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cells import STRICT as _STRICT
from .cells import CellKey
from .tables import SolveStatus, TableCell, TableRequestBase

#: How a rounding ended: an outcome of the solver, or ``feasible`` (a MIP stopped by the
#: time limit with a rounding, gap reported).
RoundingStatus = Literal["optimal", "feasible", "infeasible", "time_limit", "error"]

_EXAMPLE: Any = {
    "structure": {
        "dimensions": [
            {"name": "region", "leaves": ["a", "b", "c"]},
            {"name": "age", "leaves": ["x", "y", "z"]},
        ]
    },
    "cells": [
        {"key": ["a", "x"], "value": 3},
        {"key": ["a", "y"], "value": 7},
        {"key": ["a", "z"], "value": 12},
        {"key": ["b", "x"], "value": 8},
        {"key": ["b", "y"], "value": 4},
        {"key": ["b", "z"], "value": 1},
        {"key": ["c", "x"], "value": 6},
        {"key": ["c", "y"], "value": 9},
        {"key": ["c", "z"], "value": 14},
    ],
    "counts": {"threshold": 5},
    "base": 5,
}


class RoundRequest(TableRequestBase):
    """A table (leaves; margins computed or sent and checked), what makes cells sensitive
    (as for ``/v1/suppress``: rules, a profile, count rules or protection levels), and
    the rounding."""

    model_config = ConfigDict(**_STRICT, json_schema_extra={"examples": [_EXAMPLE]})
    cells: list[TableCell] = Field(min_length=1)
    base: float = Field(gt=0, description="the rounding base b: cells go to multiples of b")
    method: Literal["controlled", "random"] = Field(
        "controlled",
        description="'controlled': every cell to an adjacent multiple of b, the table stays "
        "additive, total absolute deviation least (seed 003 A.1); 'random': cell by cell, "
        "up with probability (x mod b)/b, unbiased but the table is in general not additive",
    )
    seed: int | None = Field(
        None,
        ge=0,
        lt=2**63,
        description="random rounding: the seed of the draws (same seed, same table); "
        "omitted: one is drawn and returned in the reply",
    )
    time_limit: float | None = Field(
        None, gt=0, description="solver seconds for the rounding and its audit; capped"
    )

    @model_validator(mode="after")
    def _checks(self) -> RoundRequest:
        if self.seed is not None and self.method != "random":
            raise ValueError("'seed' is for method 'random'")
        return self


class RoundedCell(BaseModel):
    key: CellKey
    rounded: float
    original: float | None = Field(None, description="analysts only")
    deviation: float | None = Field(None, description="rounded - original; analysts only")


class RoundingLoss(BaseModel):
    total_absolute: float = Field(description="sum of |rounded - original| over all cells")
    largest: float = Field(description="the largest |rounded - original|, below the base")
    changed: int = Field(description="cells whose value changed")


class IntruderInterval(BaseModel):
    key: CellKey
    protected: bool | None = Field(
        description="the interval reaches both protection levels; null: not certified"
    )
    interval: tuple[float | None, float | None] | None = Field(
        None, description="what an intruder can infer from the rounded table; analysts only"
    )
    upper_protection: float | None = None
    lower_protection: float | None = None


class RoundingSolver(BaseModel):
    method: Literal["controlled", "random"]
    status: RoundingStatus
    solved_by: Literal["none", "lp", "mip", "random"]
    message: str
    gap: float | None = None
    seconds: float
    time_limit: float


class RoundingAuditReply(BaseModel):
    status: SolveStatus
    message: str
    cells: list[IntruderInterval] = Field(description="the sensitive cells")


class RoundReply(BaseModel):
    rounded: bool = Field(description="a rounding is returned; false: see solver.message")
    base: float
    additive: bool | None = Field(
        description="the rounded table adds up (always for controlled rounding; random "
        "rounding in general does not); null when no rounding was found"
    )
    broken_relations: int | None = Field(
        None, description="relations the rounded table breaks (random rounding)"
    )
    seed: int | None = Field(None, description="random rounding: the seed used")
    cells: list[RoundedCell] = Field(description="every cell of the table; empty if not rounded")
    loss: RoundingLoss | None = Field(None, description="analysts only")
    solver: RoundingSolver
    audit: RoundingAuditReply | None = Field(
        None, description="the intruder's view of the sensitive cells (analysts only)"
    )
