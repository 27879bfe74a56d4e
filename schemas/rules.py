"""Rule sets on the wire: the rules, their parameters and the policies that go with them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.sdc.conversions import MIN_PERCENT

from .cells import STRICT

Percent = Annotated[float, Field(ge=MIN_PERCENT, lt=100)]


class FrequencyRule(BaseModel):
    """Minimum frequency: unsafe when fewer than ``n`` contributors (seed 000)."""

    model_config = STRICT
    type: Literal["frequency"]
    n: int = Field(ge=1, le=1_000_000, description="minimum number of contributors")
    name: str | None = Field(None, max_length=100, description="label used in replies")


class DominanceRule(BaseModel):
    """(n,k)-dominance: unsafe when the n largest exceed k% of the total (seed 000, 003 B.1.c)."""

    model_config = STRICT
    type: Literal["dominance"]
    n: int = Field(ge=1, le=100)
    k: Percent = Field(description="0 < k < 100; k = 100 is meaningless (seed 000)")
    name: str | None = Field(None, max_length=100)


class PPercentRule(BaseModel):
    """p%-rule with coalition size c (seed 000; seed 003 B.1.a)."""

    model_config = STRICT
    type: Literal["p_percent"]
    p: Percent
    c: int = Field(1, ge=1, le=100, description="coalition size")
    name: str | None = Field(None, max_length=100)


class PQRule(BaseModel):
    """(p,q) prior-posterior rule (seed 002 section 2; seed 003 B.1.b); requires q > p."""

    model_config = STRICT
    type: Literal["pq"]
    p: Percent
    q: float = Field(gt=0, le=10_000, description="a-priori accuracy in percent, q > p")
    c: int = Field(1, ge=1, le=100)
    name: str | None = Field(None, max_length=100)

    @model_validator(mode="after")
    def _q_above_p(self) -> PQRule:
        if self.q <= self.p:
            # No values in the message: in a profile file they are confidential.
            raise ValueError("q must be greater than p (seed 002, Rule 1)")
        return self


class RequestRule(BaseModel):
    """Request rule of foreign-trade statistics (seed 000): a respondent that asked for
    protection contributes over k% of the total."""

    model_config = STRICT
    type: Literal["request"]
    k: Percent
    name: str | None = Field(None, max_length=100)


Rule = Annotated[
    FrequencyRule | DominanceRule | PPercentRule | PQRule | RequestRule, Field(discriminator="type")
]


class NegativeValues(BaseModel):
    """Treatment of negative contributions (seed 000 "Negative contributions", seed 002
    section 5, seed 004). ``refuse`` (default) rejects negative values for concentration
    rules; ``absolute`` applies the rules to absolute contributions; ``relaxed`` does too
    with ``p/f`` and ``k_f``; ``shift`` applies them to ``y = x + M``."""

    model_config = STRICT
    mode: Literal["refuse", "absolute", "relaxed", "shift"] = "refuse"
    factor: float | None = Field(None, gt=1, le=1e6, description="f > 1, for mode 'relaxed'")
    shift: float | None = Field(
        None, gt=0, description="M > 0 with every x >= -M, for mode 'shift'"
    )

    @model_validator(mode="after")
    def _parameters_present(self) -> NegativeValues:
        if self.mode == "relaxed" and self.factor is None:
            raise ValueError("mode 'relaxed' needs factor (f > 1)")
        if self.mode == "shift" and self.shift is None:
            raise ValueError("mode 'shift' needs shift (M > 0)")
        return self


class RuleSet(BaseModel):
    """Rules evaluated together: a cell is sensitive when any of them fires."""

    model_config = STRICT
    rules: list[Rule] = Field(min_length=1, max_length=20)
    weights: Literal["replicate", "sample", "sample_public_weights"] = Field(
        "replicate",
        description="formulation for weighted contributions (seed 000, Sampling weights)",
    )
    negative_values: NegativeValues = NegativeValues()
    zero_cells: Literal["rules", "sensitive", "safe"] = Field(
        "rules", description="cells whose contributions are all zero"
    )
    empty_cells: Literal["safe", "sensitive"] = Field(
        "safe", description="cells without contributors"
    )
    frequency_range: float = Field(
        0.0,
        ge=0,
        le=100,
        description="protection level, percent of the cell value, for "
        "cells only frequency rules flag (seed 000 recommends 0)",
    )

    model_config = ConfigDict(
        **STRICT,
        json_schema_extra={
            "examples": [
                {
                    "rules": [
                        {"type": "p_percent", "p": 10},
                        {"type": "dominance", "n": 1, "k": 85},
                        {"type": "frequency", "n": 3},
                    ]
                }
            ]
        },
    )
