"""The API keys of the tests' callers, one of each role, and writing them to a key file
(the ``key_file`` fixture of ``conftest.py`` holds both)."""

from __future__ import annotations

import json

from service import api_keys

FILTER_KEY = "portal.filter-secret-0123456789"
ANALYST_KEY = "methods.analyst-secret-9876543210"


def write_keys(path, *entries):
    """Write an API key file at ``path`` of ``(key, role, hash method)`` entries."""
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {
                        "id": key.partition(".")[0],
                        "role": role,
                        "hash": api_keys.hash_key(key, method=method),
                    }
                    for key, role, method in entries
                ]
            }
        )
    )
    return path
