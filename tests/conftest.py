"""Shared fixtures: the real app behind a fastapi TestClient, and an API key file."""

from __future__ import annotations

import gc
import warnings

import pytest

with warnings.catch_warnings():
    # starlette's TestClient warns about httpx on import in some versions; not our concern.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from service import collector
from service.app import create_app
from service.config import Settings
from tests.callers import ANALYST_KEY, FILTER_KEY, write_keys


@pytest.fixture
def served_collector():
    """The collector as served (:func:`service.collector.tune`), the test session's own
    thresholds and unfrozen objects back afterwards."""
    thresholds = gc.get_threshold()
    collector.tune()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.fixture
def make_client():
    """Factory: ``make_client(**settings_overrides)`` -> TestClient on a fresh app.

    ``raise_server_exceptions`` is a client option, not a setting; it is passed through
    to the TestClient (default True) and removed from the overrides.
    """

    def _make(*, raise_server_exceptions: bool = True, **settings_overrides) -> TestClient:
        app = create_app(Settings(**settings_overrides))
        return TestClient(app, raise_server_exceptions=raise_server_exceptions)

    return _make


@pytest.fixture
def client(make_client) -> TestClient:
    """A client on an app with the default settings."""
    return make_client()


@pytest.fixture
def key_file(tmp_path):
    """An API key file with ``FILTER_KEY`` and ``ANALYST_KEY`` (:mod:`tests.callers`), one
    entry in each hash format in force: both verify."""
    return write_keys(
        tmp_path / "keys.json",
        (FILTER_KEY, "filter", "hmac-sha256"),
        (ANALYST_KEY, "analyst", "sha256"),
    )
