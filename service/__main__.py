"""``sdc-service`` / ``python -m service``: start the HTTP service on its settings."""

from __future__ import annotations

import logging
import sys

import uvicorn

from . import logs
from .config import ConfigError, Settings


def main() -> None:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        sys.exit(f"sdc-service: {exc}")
    logs.setup(settings.log_level)
    log = logging.getLogger("sdc.start")
    if settings.api_keys_file is None:
        log.warning("no API keys configured (SDC_API_KEYS_FILE): every caller is treated as an "
                    "analyst and sees diagnostics; this is for a developer's machine, so the "
                    "service listens on loopback only")
    log.info("listening on http://%s:%d (%d rule profiles, %s, %d compute threads + %d queued)",
             settings.host, settings.port, len(settings.profiles),
             "API keys required" if settings.api_keys_file else "no API keys",
             settings.worker_threads, settings.queue_depth)
    uvicorn.run("service.app:create_app", factory=True, host=settings.host, port=settings.port,
                workers=settings.workers, log_config=logs.config(settings.log_level),
                access_log=False, timeout_graceful_shutdown=settings.shutdown_seconds)


if __name__ == "__main__":
    main()
