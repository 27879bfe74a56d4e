"""POST /v1/conversions: a rule in, the rules the seeds relate it to out."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .cells import STRICT
from .rules import DominanceRule, PPercentRule, PQRule, Rule

Convertible = Annotated[DominanceRule | PPercentRule | PQRule, Field(discriminator="type")]


class ConversionRequest(BaseModel):
    model_config = ConfigDict(
        **STRICT,
        json_schema_extra={
            "examples": [
                {"rule": {"type": "dominance", "n": 2, "k": 80}},
                {"rule": {"type": "p_percent", "p": 10}, "negative_factor": 4},
            ]
        },
    )
    rule: Convertible
    negative_factor: float | None = Field(
        None, gt=1, le=1e6, description="f > 1: relax the rule for negative values (seed 004)"
    )


class Equivalent(BaseModel):
    rule: Rule
    relation: Literal[
        "equivalent", "more_protective", "less_protective", "relaxed_for_negative_values"
    ]
    source: str = Field(description="seed and section of the formula")


class ConversionReply(BaseModel):
    equivalents: list[Equivalent]
