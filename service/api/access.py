"""Who is calling: API keys, roles, and what each role may see.

Two roles. ``filter`` (an online query system) receives decisions only: which cells to
publish or suppress. ``analyst`` (the agency's methodologists) also receives sensitivity
measures, protection levels and intervals, from which with the contributions a caller could
solve for a profile's confidential parameters (seed 003 B.1.e).

Every ``/v1`` route needs a key when keys are configured (``SDC_API_KEYS_FILE``, see
``service.keys``): :class:`AuthMiddleware` answers 401 before the body is read, so an
unauthenticated caller costs no parsing. Endpoints take ``Depends(current_caller)`` to learn
the role, or ``Depends(analyst_only)`` to refuse the filter role with 403. Without keys
(a developer's machine, loopback only: see ``Settings.from_env``) every caller is an analyst.
Health, readiness and metrics stay open (scraped from inside the deployment's network).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import anyio
from fastapi import Depends, FastAPI, Request
from starlette.exceptions import HTTPException

from schemas.errors import ErrorReply
from service.keys import KeyStore
from service.middleware import send_error

from . import body

PROTECTED_PREFIX = "/v1/"
UNAUTHORIZED = "a valid API key is required (header 'X-API-Key' or 'Authorization: Bearer')"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="sdc"'}


@dataclass(frozen=True)
class Caller:
    role: Literal["filter", "analyst"]
    key_id: str          # the key's name, not secret: for logs

    @property
    def sees_diagnostics(self) -> bool:
        """Measures, protection levels, intervals, rule labels with parameters."""
        return self.role == "analyst"


#: The caller when no keys are configured (developer mode, loopback only).
DEVELOPER = Caller("analyst", "developer")

# One slow-hash verification at a time: a flood of wrong keys cannot take every thread.
_verify_limiter: anyio.CapacityLimiter | None = None


def _presented_key(headers) -> str | None:
    for name, value in headers:
        if name == b"x-api-key":
            return value.decode("latin-1").strip()
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return None


async def authenticate(store: KeyStore | None, headers) -> Caller | None:
    """The caller a request's headers prove, ``None`` for a missing or wrong key."""
    global _verify_limiter
    if store is None:
        return DEVELOPER
    key = _presented_key(headers)
    if not key:
        return None
    entry, tag = store.lookup(key)
    if entry is None:
        return None
    if tag is not None:
        if _verify_limiter is None:
            _verify_limiter = anyio.CapacityLimiter(1)
        ok = await anyio.to_thread.run_sync(store.confirm, key, entry, tag,
                                            limiter=_verify_limiter)
        if not ok:
            return None
    return Caller(entry.role, entry.id)


class AuthMiddleware:
    """401 for ``/v1`` requests without a valid key, before the body is read; the caller
    goes to ``request.state.caller`` for the endpoints and the request log."""

    def __init__(self, app, store: KeyStore | None):
        self.app = app
        self.store = store

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith(PROTECTED_PREFIX):
            caller = await authenticate(self.store, scope["headers"])
            if caller is None:
                await send_error(send, 401, UNAUTHORIZED, headers=_CHALLENGE)
                return
            scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)


async def current_caller(request: Request) -> Caller:
    """The authenticated caller (FastAPI dependency)."""
    caller = request.scope.get("state", {}).get("caller")
    if caller is None:   # a route outside /v1, or an app built without the middleware
        caller = await authenticate(request.app.state.keys, request.headers.raw)
        if caller is None:
            raise HTTPException(401, UNAUTHORIZED, headers=_CHALLENGE)
        request.scope.setdefault("state", {})["caller"] = caller
    return caller


async def analyst_only(caller: Caller = Depends(current_caller)) -> Caller:
    """403 for the filter role: the route's reply is diagnostics through and through."""
    if not caller.sees_diagnostics:
        raise HTTPException(403, "this route needs the analyst role")
    return caller


_ERROR_REF = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorReply"}}}
_DOCUMENTED = {
    "401": "no valid API key",
    "403": "the key's role may not use this route",
    "408": "a large body did not arrive within SDC_BODY_SECONDS",
    "503": "the compute pool is full; retry after the Retry-After header's seconds",
}


def install(app: FastAPI, store: KeyStore | None) -> None:
    """Keep the key store for :func:`current_caller`; document keys and 401/403/503 in the
    OpenAPI, with the schemas of the error reply and of the request bodies
    (:mod:`.body`). (``create_app`` adds :class:`AuthMiddleware` where it belongs in the
    stack.)"""
    app.state.keys = store

    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = generate()
            components = schema.setdefault("components", {})
            schemas = components.setdefault("schemas", {})
            for model in (ErrorReply, *body.DOCUMENTED.values()):
                body.add_components(schemas, model)
            components["securitySchemes"] = {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"}}
            for path, item in schema.get("paths", {}).items():
                if not path.startswith(PROTECTED_PREFIX):
                    continue
                for op in item.values():
                    op["security"] = [{"ApiKey": []}, {"Bearer": []}]
                    for status, text in _DOCUMENTED.items():
                        op.setdefault("responses", {}).setdefault(
                            status, {"description": text, "content": _ERROR_REF})
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
