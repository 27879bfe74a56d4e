"""Shared fixtures: the real app behind a fastapi TestClient."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    # starlette's TestClient warns about httpx on import in some versions; not our concern.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from service.app import create_app
from service.config import Settings


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
