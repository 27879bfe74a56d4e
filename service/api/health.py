"""Liveness, readiness and the Prometheus scrape endpoint.

``/metrics`` is answered on the service port unless ``SDC_METRICS_PORT`` is set; then it is
served on that port only (started and stopped with the app, :func:`_lifespan`) and the
service port answers 404, so that a network policy can admit Prometheus to the metrics and
callers to the API, each to its own port.
"""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException

from .deps import SettingsDep


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI):
    settings = app.state.settings
    if settings.metrics_port is None:
        yield
        return
    stop = app.state.metrics.serve(settings.host, settings.metrics_port)
    try:
        yield
    finally:
        stop()


# The router's lifespan is merged into the app's by ``include_router``.
router = APIRouter(tags=["operations"], lifespan=_lifespan)


@router.get("/healthz")
async def healthz() -> dict:
    """The process is alive and serving."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(settings: SettingsDep) -> dict:
    """Configuration is loaded (profiles validated at start) and the app accepts work."""
    return {"status": "ready", "profiles": len(settings.profiles)}


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, settings: SettingsDep) -> Response:
    """The Prometheus exposition, when it is not on a port of its own."""
    if settings.metrics_port is not None:
        raise HTTPException(404, "metrics are served on SDC_METRICS_PORT")
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
