"""Who is calling: API keys, roles, and what each role may see.

Two roles. ``filter`` (an online query system) receives decisions only: which cells to
publish or suppress. ``analyst`` (the agency's methodologists) also receives sensitivity
measures, protection levels and intervals, from which with the contributions a caller could
solve for a profile's confidential parameters (seed 003 B.1.e).

Every ``/v1`` route needs an API key when keys are configured (``SDC_API_KEYS_FILE``, see
``service.api_keys``): :class:`AuthMiddleware` answers 401 before the body is read, so an
unauthenticated caller costs no parsing. Verification is inline and takes microseconds
(``service.api_keys``): there is no queue for wrong keys to fill. With
``SDC_OPEN_DOCS=false`` the interactive documentation and ``/openapi.json`` need a key too
(any role). Endpoints take ``Depends(current_caller)`` (``.deps.CallerDep``) to learn the
role, or ``Depends(analyst_only)`` to refuse the filter role with 403. Without keys (a
developer's machine, loopback only: see ``Settings.from_env``) every caller is an analyst.
Health and readiness stay open (probes); ``/metrics`` is open on the service port unless
``SDC_METRICS_PORT`` moves it to a port of its own (``service.api.health``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Depends, FastAPI, Request
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from schemas.errors import ErrorReply
from service.api_keys import ApiKeyStore, Role, presented_id
from service.middleware import send_error

from . import body

PROTECTED_PREFIX = "/v1/"
UNAUTHORIZED = "a valid API key is required (header 'X-API-Key' or 'Authorization: Bearer')"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="sdc"'}


@dataclass(frozen=True)
class Caller:
    role: Role
    key_id: str  # the key's name, not secret: for logs

    @property
    def sees_diagnostics(self) -> bool:
        """Measures, protection levels, intervals, rule labels with parameters."""
        return self.role == "analyst"


@dataclass(frozen=True)
class Refused:
    """A request refused with 401, as the access log sees it: the key id it presented
    (``service.api_keys.presented_id``: only a well-formed id, never a secret) and no
    role."""

    key_id: str | None
    role: None = None


#: The caller when no keys are configured (developer mode, loopback only).
DEVELOPER = Caller("analyst", "developer")


def _presented_api_key(headers) -> str | None:
    for name, value in headers:
        if name == b"x-api-key":
            return value.decode("latin-1").strip()
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return None


def authenticate(store: ApiKeyStore | None, key: str | None) -> Caller | None:
    """The caller a presented API key proves, ``None`` for a missing or wrong key."""
    if store is None:
        return DEVELOPER
    entry = store.verify(key) if key else None
    return Caller(entry.role, entry.id) if entry is not None else None


def docs_paths(app: FastAPI) -> frozenset[str]:
    """The paths of the OpenAPI document and the interactive documentation."""
    return frozenset(
        p
        for p in (app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url)
        if p
    )


class AuthMiddleware:
    """401 for ``/v1`` requests (and requests for ``closed`` paths) without a valid key,
    before the body is read. The caller goes to ``request.state.caller`` for the endpoints
    and the request log; on a 401 a :class:`Refused` goes there for the log instead."""

    def __init__(self, app, store: ApiKeyStore | None, closed: frozenset[str] = frozenset()):
        self.app = app
        self.store = store
        self.closed = closed

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and (
            scope["path"].startswith(PROTECTED_PREFIX) or scope["path"] in self.closed
        ):
            key = _presented_api_key(scope["headers"])
            caller = authenticate(self.store, key)
            state = scope.setdefault("state", {})
            if caller is None:
                state["caller"] = Refused(presented_id(key) if key else None)
                await send_error(send, 401, UNAUTHORIZED, headers=_CHALLENGE)
                return
            state["caller"] = caller
        await self.app(scope, receive, send)


async def current_caller(request: Request) -> Caller:
    """The authenticated caller (FastAPI dependency)."""
    caller = request.scope.get("state", {}).get("caller")
    if not isinstance(caller, Caller):  # outside /v1, or an app without the middleware
        caller = authenticate(request.app.state.api_keys, _presented_api_key(request.headers.raw))
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
    "429": "the filter role's key has sent its cells per minute "
    "(SDC_FILTER_CELLS_PER_MINUTE); retry after the Retry-After header's seconds",
    "431": "the request line and headers exceed SDC_MAX_HEADER_BYTES",
    "503": "the compute pool is full; retry after the Retry-After header's seconds",
}
#: Statuses only requests with cells can get (their cells are charged to the key's budget).
_WITH_CELLS = frozenset({"429"})


def install(app: FastAPI, store: ApiKeyStore | None) -> None:
    """Keep the API key store for :func:`current_caller`; document keys and the statuses
    of :data:`_DOCUMENTED` in the OpenAPI, with the schemas of the error reply and of the
    request bodies (:mod:`.body`). (``create_app`` adds :class:`AuthMiddleware` where it
    belongs in the stack.)"""
    app.state.api_keys = store

    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = generate()
            components = schema.setdefault("components", {})
            schemas = components.setdefault("schemas", {})
            models: list[type[BaseModel]] = [ErrorReply, *body.DOCUMENTED.values()]
            for model in models:
                body.add_components(schemas, model)
            components["securitySchemes"] = {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
            }
            for path, item in schema.get("paths", {}).items():
                if not path.startswith(PROTECTED_PREFIX):
                    continue
                for op in item.values():
                    op["security"] = [{"ApiKey": []}, {"Bearer": []}]
                    with_cells = _has_cells(op)
                    for status, text in _DOCUMENTED.items():
                        if status in _WITH_CELLS and not with_cells:
                            continue
                        op.setdefault("responses", {}).setdefault(
                            status, {"description": text, "content": _ERROR_REF}
                        )
            app.openapi_schema = schema
        return app.openapi_schema

    # FastAPI's documented way to extend its OpenAPI document (how-to "Extending OpenAPI"),
    # which mypy reads as replacing a method.
    app.openapi = openapi  # type: ignore[method-assign]


def _has_cells(operation: dict) -> bool:
    """Whether the operation's request body (documented by :func:`.body.openapi_body`)
    has cells."""
    try:
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    except KeyError:
        return False
    model = body.DOCUMENTED.get(ref.rpartition("/")[2])
    return model is not None and "cells" in model.model_fields
