"""Error replies: every 4xx names the field and, where there is one, the cell."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    field: str | None = Field(None, description="dotted path of the offending field")
    cell: int | None = Field(None, description="index of the offending cell in the request")
    key: list[str] | None = Field(None, description="key of the offending cell")
    message: str


class ErrorReply(BaseModel):
    error: str = Field(description="short reason: invalid_request, payload_too_large, ...")
    detail: list[ErrorDetail] = Field(default_factory=list)
