"""``sdc-service`` / ``python -m service``: start the HTTP service on its settings."""

from __future__ import annotations

import sys

import uvicorn

from .config import ConfigError, Settings


def main() -> None:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        sys.exit(f"sdc-service: {exc}")
    print(f"sdc-service: listening on http://{settings.host}:{settings.port} "
          f"({len(settings.profiles)} rule profiles)", flush=True)
    uvicorn.run("service.app:create_app", factory=True, host=settings.host, port=settings.port,
                workers=settings.workers, log_level=settings.log_level, access_log=False)


if __name__ == "__main__":
    main()
