"""Controlled tabular adjustment on the wire (``POST /v1/adjust``): the table request's
structure, cells, rule set or profile and time limit, and the adjusted table back."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.sdc.highs import Outcome

from .cells import STRICT as _STRICT
from .cells import CellKey
from .tables import TableCell, TableRequestBase


class AdjustCell(TableCell):
    fixed: bool = Field(
        False, description="the cell must keep its value (a key total, the grand total)"
    )
    max_change: float | None = Field(
        None, ge=0, le=1e6, description="the most the cell may move, in percent of its value"
    )


class AdjustRequest(TableRequestBase):
    """A table and what makes its cells sensitive; the closest additive table in which every
    sensitive cell moved at least its protection level comes back."""

    model_config = ConfigDict(
        **_STRICT,
        json_schema_extra={
            "examples": [
                {
                    "structure": {
                        "dimensions": [
                            {"name": "size", "leaves": ["A", "B", "C"]},
                            {"name": "activity", "leaves": ["I", "II", "III"]},
                        ]
                    },
                    "cells": [
                        {"key": ["A", "I"], "value": 20, "protection": {"upper": 6, "lower": 6}},
                        {"key": ["A", "II"], "value": 30},
                        {"key": ["A", "III"], "value": 50},
                        {"key": ["B", "I"], "value": 40},
                        {"key": ["B", "II"], "value": 60},
                        {"key": ["B", "III"], "value": 100},
                        {"key": ["C", "I"], "value": 140},
                        {"key": ["C", "II"], "value": 210},
                        {"key": ["C", "III"], "value": 350},
                        {"key": ["Total", "Total"], "fixed": True},
                    ],
                    "cost": "reciprocal",
                }
            ]
        },
    )
    cells: list[AdjustCell] = Field(min_length=1)
    method: Literal["lp", "simplified"] = Field(
        "lp",
        description="'lp': LP-based CTA, every cell carries the cost; 'simplified': "
        "only leaf cells carry it, margins absorb the changes (seed 003 B.3)",
    )
    cost: Literal["absolute", "reciprocal", "relative"] = Field(
        "reciprocal",
        description="'absolute': sum of |deviation|; 'reciprocal' (the original CTA): sum "
        "of |deviation| / value (a zero counts as the smallest nonzero value); 'relative': "
        "least largest relative change of the non-sensitive cells and of the sensitive "
        "cells' moves beyond their level, then 'reciprocal'",
    )
    directions: Literal["alternate", "optimal"] = Field(
        "alternate",
        description="'alternate': sensitive cells largest first, alternately down and up "
        "(seed 003 B.3); 'optimal': a MIP chooses them (two MIP stages with cost "
        "'relative')",
    )
    time_limit: float | None = Field(
        None,
        gt=0,
        description="the request's whole wall time in seconds (the solve gets what is left "
        "after reading the table); capped by the service",
    )


class AdjustedCell(BaseModel):
    key: CellKey
    value: float | None = Field(None, description="the original value (analysts only)")
    adjusted: float
    deviation: float | None = Field(None, description="adjusted - value (analysts only)")
    sensitive: bool | None = Field(None, description="analysts only")
    direction: Literal["up", "down"] | None = Field(
        None, description="a sensitive cell's direction (analysts only)"
    )
    protected: bool | None = Field(
        None, description="a sensitive cell moved at least its level (analysts only)"
    )


class AdjustLoss(BaseModel):
    total_absolute: float = Field(description="sum of |deviation| over every cell")
    total_relative: float = Field(description="sum of |deviation| / |value| over nonzero cells")
    largest_relative: float = Field(description="the largest |deviation| / |value|")
    largest_cell: CellKey | None = Field(None, description="its cell (analysts only)")
    cells_moved: int
    margins_moved: int
    zeros_moved: int


class AdjustCheck(BaseModel):
    protected: bool = Field(description="every sensitive cell is at its safe distance")
    unprotected: list[CellKey] = Field(description="sensitive cells that are not (analysts only)")
    adds_up: bool = Field(description="every relation holds on the adjusted values")
    largest_residual: float = Field(description="largest |total - sum of its parts|")


class AdjustSolver(BaseModel):
    method: Literal["lp", "simplified"]
    cost: Literal["absolute", "reciprocal", "relative"]
    directions: Literal["alternate", "optimal"]
    status: Literal[Outcome.OPTIMAL, Outcome.TIME_LIMIT, Outcome.ERROR] = Field(
        description="'error': the solver failed (its status in message); a table, if any, "
        "is an earlier stage's, additive and protected but not of least deviation"
    )
    message: str
    objective: float | None
    lower_bound: float | None = Field(None, description="the MIP's proven bound (optimal)")
    gap: float | None = Field(None, description="the MIP's relative gap (optimal)")
    minimax: float | None = Field(
        None,
        description="cost 'relative': the largest relative change of a non-sensitive cell, "
        "or of a sensitive cell's move beyond its level (the first stage's objective)",
    )
    minimax_gap: float | None = Field(
        None, description="cost 'relative' with 'optimal' directions: the first MIP's gap"
    )
    solves: int
    seconds: float
    time_limit: float


class AdjustReply(BaseModel):
    adjusted: bool = Field(
        description="a table was found; false only when the time ran out or the solver "
        "failed first (solver.status)"
    )
    cells: list[AdjustedCell] = Field(description="every cell of the table")
    loss: AdjustLoss | None = None
    check: AdjustCheck | None = None
    solver: AdjustSolver
