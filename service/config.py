"""Settings from the environment, and the rule profiles they point to.

Every setting has a built-in default so that ``sdc-service`` starts with no configuration
on a developer's machine, listening on loopback only.

========================  =====================  ==============================================
variable                  default                meaning
========================  =====================  ==============================================
SDC_HOST                  127.0.0.1              address to listen on
SDC_PORT                  8787                   port
SDC_WORKERS               1                      uvicorn worker processes
SDC_PROFILES              (none)                 path of a JSON file of named rule profiles
SDC_MAX_BODY_BYTES        33554432 (32 MiB)      larger request bodies get 413
SDC_MAX_CELLS             1000000                more cells in one request get 413
SDC_FILTER_MAX_CELLS      10000                  more cells in one request of a filter-role
                                                 key get 413 (any route)
SDC_FILTER_CELLS_PER_MINUTE
                          6000000                cells a filter-role key may send per minute
                                                 to this process (token bucket per key id;
                                                 bursts up to a minute's worth), else 429
SDC_MAX_SOLVER_SECONDS    60                     solver time per request (callers may ask less)
SDC_LOG_LEVEL             info                   log level (JSON lines on stdout)
SDC_API_KEYS_FILE         (none)                 JSON file of hashed API keys
                                                 (service.api_keys); without it every caller
                                                 is an analyst and the service refuses a
                                                 non-loopback host
SDC_WORKER_THREADS        cores - 1 (min 1)      threads of the compute pool (solvers, large
                                                 tables); one core is left to the event loop
SDC_QUEUE_DEPTH           2                      tasks waiting for a thread before 503
SDC_SHUTDOWN_SECONDS      75                     graceful shutdown: running requests finish
                                                 (work queued for the pool gets 503 at once)
SDC_BODY_SECONDS          30                     a request body must arrive within this
                                                 time, else 408 (and frees its pool place)
SDC_MIN_BYTES_PER_SECOND  32768                  slowest pace of a body being sent, and of a
                                                 reply being read, after the grace below:
                                                 a slower body gets 408, a slower reader's
                                                 connection is closed and its reply dropped
SDC_RATE_GRACE_SECONDS    5                      grace before that pace is required; also
                                                 how often a reader's progress is checked
SDC_HEADER_SECONDS        10                     a request line and headers must arrive
                                                 within this time, else 408 and the
                                                 connection is closed (an idle new
                                                 connection is closed after it)
SDC_MAX_HEADER_BYTES      65536                  longer request heads get 431
SDC_MAX_CONNECTIONS       1000                   open connections per worker process; more
                                                 are answered 503 and closed at once
SDC_NOISE_SECRET_FILE     (none)                 file holding the key of the noise multipliers
                                                 of the online filter's noise approach (16+
                                                 characters, no spaces; a mounted Secret)
SDC_NOISE_SECRET          (none)                 the same key given directly (developers)
SDC_OPEN_DOCS             true                   /docs, /redoc and /openapi.json without a key
                                                 (false: they need one, of any role)
SDC_METRICS_PORT          (none)                 serve /metrics on this port only, not on
                                                 SDC_PORT (needs SDC_WORKERS=1); without it
                                                 /metrics is open on SDC_PORT
========================  =====================  ==============================================
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from schemas.profiles import Profile, ProfileFile
from service.api_keys import ApiKeyFileError, load_api_key_file


class ConfigError(RuntimeError):
    """The service's own configuration is unusable; raised at start, never per request."""


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8787
    workers: int = 1
    profiles_path: Path | None = None
    max_body_bytes: int = 32 * 1024 * 1024
    max_cells: int = 1_000_000
    # Probing a profile's parameters takes many cells (README, "What callers can still
    # learn"): the filter role's cells are capped per request and budgeted per key.
    filter_max_cells: int = 10_000
    filter_cells_per_minute: int = 6_000_000
    max_solver_seconds: float = 60.0
    log_level: str = "info"
    api_keys_file: Path | None = None
    worker_threads: int = field(default_factory=lambda: default_threads())
    queue_depth: int = 2
    shutdown_seconds: float = 75.0
    body_seconds: float = 30.0
    min_bytes_per_second: float = 32768.0
    rate_grace_seconds: float = 5.0
    header_seconds: float = 10.0
    max_header_bytes: int = 65536
    max_connections: int = 1000
    profiles: dict[str, Profile] = field(default_factory=dict)
    # Never printed: a Settings repr may reach a log.
    noise_secret: bytes | None = field(default=None, repr=False)
    open_docs: bool = True
    metrics_port: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        try:
            path = Path(env["SDC_PROFILES"]) if env.get("SDC_PROFILES") else None
            return cls(
                host=env.get("SDC_HOST", cls.host),
                port=int(env.get("SDC_PORT", cls.port)),
                workers=int(env.get("SDC_WORKERS", cls.workers)),
                profiles_path=path,
                max_body_bytes=int(env.get("SDC_MAX_BODY_BYTES", cls.max_body_bytes)),
                max_cells=int(env.get("SDC_MAX_CELLS", cls.max_cells)),
                filter_max_cells=_at_least(
                    int(env.get("SDC_FILTER_MAX_CELLS", cls.filter_max_cells)),
                    1,
                    "SDC_FILTER_MAX_CELLS",
                ),
                filter_cells_per_minute=int(
                    env.get("SDC_FILTER_CELLS_PER_MINUTE", cls.filter_cells_per_minute)
                ),
                max_solver_seconds=_positive(
                    float(env.get("SDC_MAX_SOLVER_SECONDS", cls.max_solver_seconds)),
                    "SDC_MAX_SOLVER_SECONDS",
                ),
                log_level=env.get("SDC_LOG_LEVEL", cls.log_level),
                api_keys_file=_key_file(env.get("SDC_API_KEYS_FILE"), env.get("SDC_HOST")),
                worker_threads=_at_least(
                    int(env.get("SDC_WORKER_THREADS", default_threads())), 1, "SDC_WORKER_THREADS"
                ),
                queue_depth=_at_least(
                    int(env.get("SDC_QUEUE_DEPTH", cls.queue_depth)), 0, "SDC_QUEUE_DEPTH"
                ),
                shutdown_seconds=_positive(
                    float(env.get("SDC_SHUTDOWN_SECONDS", cls.shutdown_seconds)),
                    "SDC_SHUTDOWN_SECONDS",
                ),
                body_seconds=_positive(
                    float(env.get("SDC_BODY_SECONDS", cls.body_seconds)), "SDC_BODY_SECONDS"
                ),
                min_bytes_per_second=_positive(
                    float(env.get("SDC_MIN_BYTES_PER_SECOND", cls.min_bytes_per_second)),
                    "SDC_MIN_BYTES_PER_SECOND",
                    "bytes per second",
                ),
                rate_grace_seconds=_positive(
                    float(env.get("SDC_RATE_GRACE_SECONDS", cls.rate_grace_seconds)),
                    "SDC_RATE_GRACE_SECONDS",
                ),
                header_seconds=_positive(
                    float(env.get("SDC_HEADER_SECONDS", cls.header_seconds)), "SDC_HEADER_SECONDS"
                ),
                max_header_bytes=_at_least(
                    int(env.get("SDC_MAX_HEADER_BYTES", cls.max_header_bytes)),
                    1024,
                    "SDC_MAX_HEADER_BYTES",
                ),
                max_connections=_at_least(
                    int(env.get("SDC_MAX_CONNECTIONS", cls.max_connections)),
                    1,
                    "SDC_MAX_CONNECTIONS",
                ),
                profiles=load_profiles(path) if path else {},
                open_docs=_flag(env.get("SDC_OPEN_DOCS", "true"), "SDC_OPEN_DOCS"),
                metrics_port=_metrics_port(env.get("SDC_METRICS_PORT")),
                noise_secret=_noise_secret(
                    env.get("SDC_NOISE_SECRET"), env.get("SDC_NOISE_SECRET_FILE")
                ),
            )
        except ValueError as exc:
            raise ConfigError(f"bad setting: {exc}") from exc

    def __post_init__(self) -> None:
        if self.filter_cells_per_minute < self.filter_max_cells:
            # A request of the largest size allowed must fit in a full bucket.
            raise ConfigError("SDC_FILTER_CELLS_PER_MINUTE must be at least SDC_FILTER_MAX_CELLS")
        if self.metrics_port is not None:
            if self.metrics_port == self.port:
                raise ConfigError("SDC_METRICS_PORT must differ from SDC_PORT")
            if self.workers != 1:
                # Each worker process would bind the port, and each has its own metrics.
                raise ConfigError("SDC_METRICS_PORT needs SDC_WORKERS=1")
        if self.noise_secret is None:
            noisy = [
                name
                for name, p in self.profiles.items()
                if p.filter is not None and p.filter.statistical.approach == "noise"
            ]
            if noisy:
                raise ConfigError(
                    f"profiles {noisy} use the noise approach but SDC_NOISE_SECRET is not set"
                )


def default_threads() -> int:
    """Compute threads: one core left to the event loop (measured: on 2 cores, 1 thread
    gave /healthz 4x faster under saturation than 2)."""
    return max(1, (os.cpu_count() or 2) - 1)


def _flag(value: str, name: str) -> bool:
    words = {
        "true": True,
        "1": True,
        "yes": True,
        "on": True,
        "false": False,
        "0": False,
        "no": False,
        "off": False,
    }
    try:
        return words[value.strip().lower()]
    except KeyError:
        raise ConfigError(f"{name} must be true or false") from None


def _metrics_port(value: str | None) -> int | None:
    if not value:
        return None
    port = int(value)
    if not 1 <= port <= 65535:
        raise ConfigError("SDC_METRICS_PORT must be a port number (1 to 65535)")
    return port


def _at_least(value: int, low: int, name: str) -> int:
    if value < low:
        raise ConfigError(f"{name} must be at least {low}")
    return value


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _key_file(path: str | None, host: str | None) -> Path | None:
    """The API key file, checked now so that a bad one stops the start; without one the
    service is open to anyone who can reach it, so only loopback is allowed."""
    if not path:
        if host is not None and not is_loopback(host):
            raise ConfigError(
                f"SDC_HOST={host} is not a loopback address and no API keys are "
                "configured: set SDC_API_KEYS_FILE (see python -m "
                "service.api_keys)"
            )
        return None
    try:
        load_api_key_file(Path(path))
    except ApiKeyFileError as exc:
        raise ConfigError(f"SDC_API_KEYS_FILE: {exc}") from None
    return Path(path)


#: Shortest noise secret accepted: 128 bits of a random key written as text.
MIN_NOISE_SECRET = 16


def _noise_secret(value: str | None, path: str | None) -> bytes | None:
    """The key of the noise multipliers (seed 003 B.4, "the exact percent to remain
    confidential"): the same key gives every respondent the same multiplier in every
    process and after every restart, so it must come from configuration. A value with
    white space is refused: it is the Secret template's sentence or prose, not a
    generated key."""
    if value and path:
        raise ConfigError("set SDC_NOISE_SECRET or SDC_NOISE_SECRET_FILE, not both")
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read SDC_NOISE_SECRET_FILE {path}: {exc}") from None
    if not value:
        return None
    if len(value) < MIN_NOISE_SECRET or any(ch.isspace() for ch in value):
        raise ConfigError(
            f"the noise secret must have at least {MIN_NOISE_SECRET} characters "
            "and no white space (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return value.encode("utf-8")


def _positive(value: float, name: str, unit: str = "seconds") -> float:
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{name} must be a positive number of {unit}")
    return value


def load_profiles(path: Path) -> dict[str, Profile]:
    """Read and validate the profile file; a bad file stops the service at start."""
    try:
        return ProfileFile.model_validate_json(path.read_bytes()).profiles
    except OSError as exc:
        raise ConfigError(f"cannot read SDC_PROFILES file {path}: {exc.strerror}") from exc
    except ValidationError as exc:
        # Name the fields only: the values are confidential rule parameters.
        where = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
        raise ConfigError(f"invalid SDC_PROFILES file {path}: {where}") from None
