"""create_app(): the routers, error handlers, middleware and metrics."""

from __future__ import annotations

import contextlib
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from . import collector
from .api import access, errors, health, lean, query_filter, v1
from .api.compute_pool import ComputePool
from .api_keys import ApiKeyStore
from .config import Settings
from .metrics import Metrics
from .middleware import (
    AdmissionMiddleware,
    BodyLimitMiddleware,
    CancelledMiddleware,
    RequestLogMiddleware,
)

#: Key of the lifespan state under which the app's ``state`` (settings, metrics, pool)
#: reaches the server's connection protocol (service.__main__.GuardedHttpProtocol).
SERVER_STATE = "sdc"

#: The analysts' page: plain HTML, CSS and one ES module, no build step.
UI_DIR = Path(__file__).with_name("ui")


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI):
    collector.tune()
    yield {SERVER_STATE: app.state}
    app.state.pool.shutdown()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = Settings.from_env() if settings is None else settings
    metrics = Metrics.create()
    app = FastAPI(
        lifespan=_lifespan,
        title="Statistical disclosure control service",
        version="0.1.0",
        description="Sensitivity of table cells, protection levels, and (as they land) "
        "audit and secondary suppression. Rule parameters of profiles never "
        "leave the service.",
    )
    app.state.settings = settings
    app.state.metrics = metrics
    errors.install(app)
    # First: routes are matched in order, and the filter (v1's first) is on the path of
    # every user query.
    app.include_router(v1.router)
    app.include_router(health.router)
    # The analysts' page (static files, README "A page for analysts"): open to load,
    # its calls to /v1 carry the key the user types.
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
    access.install(app, ApiKeyStore(settings.api_keys_file) if settings.api_keys_file else None)
    app.state.pool = ComputePool(settings.worker_threads, settings.queue_depth, metrics)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(
        AdmissionMiddleware,
        pool=app.state.pool,
        body_seconds=settings.body_seconds,
        min_rate=settings.min_bytes_per_second,
        grace=settings.rate_grace_seconds,
    )
    app.add_middleware(
        access.AuthMiddleware,
        store=app.state.api_keys,
        closed=frozenset() if settings.open_docs else access.docs_paths(app),
    )
    app.add_middleware(CancelledMiddleware)  # inside the metrics: its 503 is counted
    app.add_middleware(RequestLogMiddleware, metrics=metrics, pool=app.state.pool)
    # Last: the online filter's lean path, through the same middleware (api/lean.py).
    lean.install(app, {"/v1/filter": query_filter.answer})
    return app
