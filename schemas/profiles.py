"""Rule profiles held in the service's configuration (seed 000 and seed 003 B.1.e: rule
parameters are confidential, so callers can name a profile instead of sending them)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from .cells import STRICT
from .filter import FilterPolicy
from .rules import RuleSet


class Profile(BaseModel):
    model_config = STRICT
    rules: RuleSet
    disclose_measures: bool = Field(
        False,
        description="include S and protection levels in replies; from these and the "
        "contributions a caller can solve for the rule's parameters, so off by default",
    )
    filter: FilterPolicy | None = Field(
        None, description="the online query filter's policy (POST /v1/filter)"
    )


class ProfileFile(BaseModel):
    model_config = STRICT
    profiles: dict[str, Profile]
