"""Error replies: 4xx with the field and the cell named; never a 500 for caller input.

The pipeline names errors in the request's terms (:mod:`service.pipeline.errors`); here
they become HTTP: 422 for input that cannot be served as sent, 413 for limits, and a
message without rule parameters for callers who may not learn them.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from service.pipeline.errors import LimitError
from service.sdc.errors import InputError

from .responses import JSONBytes

log = logging.getLogger("sdc.errors")

#: The short reason of each status in error replies (``error``).
REASONS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    431: "request_header_fields_too_large",
    503: "unavailable",
}


class RequestError(Exception):
    """A request that is well-formed but cannot be served for a reason of HTTP (a key's
    cell budget spent); ``headers`` go into the reply (``Retry-After``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        self.status, self.message, self.field, self.headers = status, message, field, headers


def error_reply(status: int, detail: list[dict], headers: dict | None = None) -> JSONBytes:
    return JSONBytes(
        {"error": REASONS.get(status, "error"), "detail": detail},
        status_code=status,
        headers=headers,
    )


#: Validation errors listed in a 422, in the body's order; past them one entry says that
#: more were found. A 10 MiB body of 600,000 bad values took 29 s to answer (the
#: conversion of each error on the event loop) with a 61 MiB reply, 2026-11-27.
MAX_ERRORS = 100
MORE_ERRORS = f"more than {MAX_ERRORS} errors: the first {MAX_ERRORS} are listed"


def _cell_key(body, index):
    """The key of cell ``index`` in the raw body, if the body has one there."""
    try:
        key = body["cells"][index]["key"]
    except (TypeError, KeyError, IndexError):
        return None
    if not (isinstance(key, list) and all(isinstance(k, str) for k in key)):
        return None
    try:
        "".join(key).encode("utf-8")  # a lone surrogate could not be written in the reply
    except UnicodeEncodeError:
        return None
    return key


def _for_caller(error: InputError, request: Request) -> str:
    """``error``'s message as the request's caller may read it: without rule-set
    parameters unless the caller sees diagnostics."""
    hidden = getattr(error, "message_without_parameters", None)
    if hidden is None:
        return error.message
    caller = request.scope.get("state", {}).get("caller")
    return error.message if getattr(caller, "sees_diagnostics", True) else hidden


def _validation_detail(error: dict, body) -> dict:
    if error["type"] == "json_invalid":
        return {
            "field": None,
            "cell": None,
            "key": None,
            "message": f"body is not valid JSON ({error['ctx'].get('error', 'decode error')})"
            if error.get("ctx")
            else "body is not valid JSON",
        }
    loc = [part for part in error["loc"] if part != "body"]
    cell = None
    field: str | None
    if len(loc) >= 2 and loc[0] == "cells" and isinstance(loc[1], int):
        cell, loc = loc[1], loc[2:]
        field = ".".join(str(p) for p in loc) or "cells"
    else:
        field = ".".join(str(p) for p in loc) or None
    # Messages only, never the offending input: it may be a confidential contribution.
    return {
        "field": field,
        "cell": cell,
        "key": _cell_key(body, cell) if cell is not None else None,
        "message": error["msg"],
    }


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        body = getattr(exc, "body", None)
        errors = exc.errors()
        detail = [_validation_detail(e, body) for e in errors[:MAX_ERRORS]]
        if len(errors) > MAX_ERRORS:
            detail.append({"field": None, "cell": None, "key": None, "message": MORE_ERRORS})
        return error_reply(422, detail)

    @app.exception_handler(InputError)
    async def _input(request: Request, exc: InputError):
        # The validated body's cells (service.api.body.validated): the reply names the key.
        cells = getattr(request.state, "cells", None)
        cell = exc.cell
        if cells is not None and cell is not None and not 0 <= cell < len(cells):
            # A core cell number that was not mapped back to the request: a bug of ours,
            # but the caller's error is still a 422, without a number it cannot place.
            log.error("unmapped cell number in an InputError")
            cell = None
        cell_key = cells[cell].key if cells is not None and cell is not None else None
        return error_reply(
            422,
            [
                {
                    "field": exc.field,
                    "cell": cell,
                    "key": cell_key,
                    "message": _for_caller(exc, request),
                }
            ],
        )

    @app.exception_handler(LimitError)
    async def _limit(request: Request, exc: LimitError):
        return error_reply(
            413, [{"field": exc.field, "cell": None, "key": None, "message": exc.message}]
        )

    @app.exception_handler(RequestError)
    async def _request(request: Request, exc: RequestError):
        return error_reply(
            exc.status,
            [{"field": exc.field, "cell": None, "key": None, "message": exc.message}],
            headers=exc.headers,
        )

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException):
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI's answer to a body that is not UTF-8: the same 422 as any invalid JSON.
            return error_reply(
                422,
                [
                    {
                        "field": None,
                        "cell": None,
                        "key": None,
                        "message": "body is not valid JSON (it must be UTF-8 text)",
                    }
                ],
            )
        return error_reply(
            exc.status_code,
            [{"field": None, "cell": None, "key": None, "message": str(exc.detail)}],
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s", request.url.path)
        return error_reply(
            500,
            [
                {
                    "field": None,
                    "cell": None,
                    "key": None,
                    "message": "internal error; it has been logged",
                }
            ],
        )
