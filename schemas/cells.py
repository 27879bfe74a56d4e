"""Magnitude cells on the wire: a key and either the contributions or a summary."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

#: The configuration of every request model (and of the profile file): unknown fields are
#: refused, and values must have their JSON type (strict mode): a number is a JSON number,
#: not ``"50"`` or ``true``; an integer is written without a fraction (``12``, not ``12.0``);
#: a boolean is ``true`` or ``false``. An integer is still a number (``"value": 5``), and a
#: number must be finite.
STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


def _code(code: str) -> str:
    # JSON can carry lone surrogates ("\ud800") that no UTF-8 reply could repeat.
    try:
        code.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("code is not valid Unicode text (lone surrogate)") from None
    # Tables hold codes in numpy string arrays, which drop trailing NULs: "A\x00" and "A"
    # would be one cell.
    if "\x00" in code:
        raise ValueError("code contains a NUL character")
    return code


Code = Annotated[str, Field(max_length=200), AfterValidator(_code)]
CellKey = list[Code]


class Contribution(BaseModel):
    """One respondent's contribution to a cell."""

    model_config = STRICT
    value: float
    holding: str | None = Field(
        None, max_length=200, description="enterprise group; one holding's contributions are summed"
    )
    weight: float | None = Field(None, gt=0, description="sampling weight")
    waiver: bool = Field(False, description="the respondent authorised publication")
    request: bool = Field(False, description="the respondent asked for protection (request rule)")


class Summary(BaseModel):
    """A cell summarised by the caller: total, number of contributors, largest contributions."""

    model_config = STRICT
    total: float
    count: float = Field(ge=0, description="number of contributors (holdings)")
    largest: list[float] = Field(
        default_factory=list,
        max_length=100,
        description="largest holding-level contributions, decreasing",
    )
    requested: float | None = Field(
        None, description="largest contribution of a respondent that asked for protection"
    )


class MagnitudeCell(BaseModel):
    """A cell of a magnitude table, with either ``contributions`` or ``summary``."""

    model_config = STRICT
    key: CellKey = Field(min_length=1, max_length=20, description="one code per dimension")
    contributions: list[Contribution] | None = None
    summary: Summary | None = None

    @model_validator(mode="after")
    def _one_source(self) -> MagnitudeCell:
        if (self.contributions is None) == (self.summary is None):
            raise ValueError("give exactly one of 'contributions' and 'summary'")
        return self
