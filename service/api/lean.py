"""The online filter's lean path: ``POST /v1/filter`` without the framework's routing.

The filter answers every user query of an online system, and its own work on a 50-cell
answer is a few tenths of a millisecond; Starlette's router, FastAPI's request handling
(dependency injection, the endpoint's wrapping) and the exception middleware cost as much
again on every request (README, "Issue 19, second step"). :class:`LeanRoutes`, the
outermost of the app's middleware, hands exactly ``POST /v1/filter`` to a chain built from
the app's own middleware list (:func:`install`: the same classes with the same arguments,
in the same order: request id, access log and metrics, the 503 on cancellation, API keys,
admission and pace of bodies, the size limit) around a plain ASGI endpoint that calls the
route's own function (:func:`service.api.query_filter.answer`: the same body validation,
budget, limits and reply) and answers its errors with the app's own exception handlers.
Every other request, including other methods on the same path, goes through the stack as
before; the FastAPI route stays declared, for the OpenAPI document and as the same
function's other caller. Starlette's outermost error middleware still wraps both paths
(the last-resort 500 and its log line).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from .access import current_caller

#: A route function of the lean path: the request and its caller to the reply.
Answer = Callable[[Request, Any], Awaitable[Response]]
Handler = Callable[[Request, Any], Response | Awaitable[Response]]


class LeanRoutes:
    """Outermost middleware: ``POST`` requests for a path of ``routes`` go to its ASGI
    app (:func:`install` builds them), everything else to the app's stack."""

    def __init__(self, app: ASGIApp, routes: Mapping[str, ASGIApp]):
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            lean = self.routes.get(scope["path"])
            if lean is not None:
                await lean(scope, receive, send)
                return
        await self.app(scope, receive, send)


class LeanEndpoint:
    """The innermost app of a lean route: ``answer`` for the request and its caller, the
    app's exception handlers for its errors (found as Starlette's exception middleware
    finds them: a handler of the HTTP status first, then of the exception's classes); an
    error no handler takes propagates, as it does from the stack, to the outermost error
    middleware. ``route`` goes to the scope, where the access log and the metrics read
    its path template."""

    def __init__(self, app: FastAPI, route: BaseRoute, answer: Answer):
        self.route = route
        self.answer = answer
        self.status_handlers: dict[int, Handler] = {}
        self.class_handlers: dict[type, Handler] = {}
        for key, handler in app.exception_handlers.items():
            if key in (500, Exception):  # the outermost error middleware's, as in Starlette
                continue
            if isinstance(key, int):
                self.status_handlers[key] = handler
            else:
                self.class_handlers[key] = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self.route
        request = Request(scope, receive, send)
        try:
            response = await self.answer(request, await current_caller(request))
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise
            reply = handler(request, exc)  # the app's handlers are coroutines
            response = await reply if isinstance(reply, Awaitable) else reply
            exc.__traceback__ = None  # as Starlette: a reused instance keeps no frames
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Handler | None:
        if isinstance(exc, HTTPException):
            handler = self.status_handlers.get(exc.status_code)
            if handler is not None:
                return handler
        for cls in type(exc).__mro__:
            handler = self.class_handlers.get(cls)
            if handler is not None:
                return handler
        return None


def install(app: FastAPI, answers: Mapping[str, Answer]) -> None:
    """Serve ``POST`` for each path of ``answers`` on the lean path: its function wrapped
    in the app's middleware as added so far (call it after the last ``add_middleware``).
    Each path must be a declared route, whose object the access log names."""
    routes = _routes(app.routes)
    lean: dict[str, ASGIApp] = {}
    for path, answer in answers.items():
        chain: ASGIApp = LeanEndpoint(app, routes[path], answer)
        # Starlette's order (build_middleware_stack): the list is outermost first.
        for cls, args, kwargs in reversed(app.user_middleware):
            chain = cls(chain, *args, **kwargs)
        lean[path] = chain
    app.add_middleware(LeanRoutes, routes=lean)


def _routes(routes) -> dict[str, BaseRoute]:
    """The routes by path, those of included routers too (FastAPI 0.165 keeps an included
    router as a route of its own that holds the original router)."""
    found: dict[str, BaseRoute] = {}
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found.update(_routes(inner.routes))
        elif isinstance(getattr(route, "path", None), str):
            found.setdefault(route.path, route)
    return found
