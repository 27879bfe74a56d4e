"""Request logs: one JSON line per request with id, route template, status, duration and
sizes; never the body, query values or exception messages (they can quote the input)."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from pathlib import Path

import pytest

from service import logs
from service.api import sensitivity

ROOT = Path(__file__).resolve().parents[1]
SECRET_VALUE = 98765.4321
SECRET_HOLDING = "RESPONDENT-7781"
BODY = {
    "cells": [
        {
            "key": ["Mining", "North"],
            "contributions": [
                {"value": SECRET_VALUE, "holding": SECRET_HOLDING},
                {"value": 49000},
                {"value": 1000},
            ],
        }
    ],
    "rules": {"rules": [{"type": "p_percent", "p": 10}]},
}


@pytest.fixture
def log_lines():
    """The JSON lines the service's loggers write while the test runs."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JSONFormatter())
    logger = logging.getLogger("sdc")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def lines() -> list[dict]:
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def _assert_no_data(lines):
    text = json.dumps(lines)
    for secret in ("98765", SECRET_HOLDING, "Mining", "North", "p_percent", "49000"):
        assert secret not in text


def test_one_access_line_per_request(client, log_lines):
    r = client.post("/v1/sensitivity", json=BODY)
    assert r.status_code == 200
    [line] = [x for x in log_lines() if x["logger"] == "sdc.access"]
    assert line["method"] == "POST" and line["route"] == "/v1/sensitivity"
    assert line["status"] == 200 and line["level"] == "info"
    assert line["request_id"] == r.headers["x-request-id"]
    assert len(line["request_id"]) == 24
    assert line["request_bytes"] == len(r.request.content) > 100
    assert line["reply_bytes"] == len(r.content)
    assert line["duration_ms"] > 0
    assert line["key_id"] == "developer" and line["role"] == "analyst"
    assert line["ts"].endswith("Z")
    _assert_no_data(log_lines())


def test_no_body_in_logs_of_refused_requests(make_client, log_lines):
    client = make_client(raise_server_exceptions=False)
    bad = {
        **BODY,
        "cells": [
            {
                **BODY["cells"][0],
                "contributions": [{"value": -SECRET_VALUE, "holding": SECRET_HOLDING}],
            }
        ],
    }
    assert client.post("/v1/sensitivity", json=bad).status_code == 422
    assert (
        client.post(
            "/v1/sensitivity",
            content=b'{"cells": [' + SECRET_HOLDING.encode(),
            headers={"content-type": "application/json"},
        ).status_code
        == 422
    )
    statuses = [x["status"] for x in log_lines() if x["logger"] == "sdc.access"]
    assert statuses == [422, 422]
    _assert_no_data(log_lines())


def test_query_values_and_raw_paths_are_not_logged(client, log_lines):
    client.post(f"/v1/sensitivity?respondent={SECRET_HOLDING}", json=BODY)
    client.get(f"/nothing/{SECRET_HOLDING}")
    routes = [x["route"] for x in log_lines() if x["logger"] == "sdc.access"]
    assert routes == ["/v1/sensitivity", "unmatched"]
    _assert_no_data(log_lines())


def test_crash_is_logged_by_type_and_frames_not_message(make_client, log_lines, monkeypatch):
    def explode(*args):
        raise ValueError(f"could not use contribution {SECRET_VALUE} of {SECRET_HOLDING}")

    monkeypatch.setattr(sensitivity, "assess", explode)
    client = make_client(raise_server_exceptions=False)
    r = client.post("/v1/sensitivity", json=BODY, headers={"X-Request-ID": "trace-42"})
    assert r.status_code == 500 and SECRET_HOLDING not in r.text
    lines = log_lines()
    [crash] = [x for x in lines if x["logger"] == "sdc.errors"]
    assert crash["exc_type"] == "ValueError" and crash["request_id"] == "trace-42"
    assert any("explode" in frame for frame in crash["stack"])
    [access] = [x for x in lines if x["logger"] == "sdc.access"]
    assert access["status"] == 500 and access["level"] == "error"
    _assert_no_data(lines)


@pytest.mark.parametrize(
    "sent, echoed",
    [
        ("abc-123_X.y:z", True),
        ("has space", False),
        ("x" * 129, False),
        ("<script>", False),
    ],
)
def test_request_id_echoed_only_when_sane(client, log_lines, sent, echoed):
    r = client.get("/healthz", headers={"X-Request-ID": sent})
    rid = r.headers["x-request-id"]
    assert (rid == sent) is echoed
    if not echoed:
        assert len(rid) == 24 and int(rid, 16) >= 0
    assert log_lines()[-1]["request_id"] == rid


def test_formatter_keeps_exception_messages_out():
    try:
        raise KeyError(SECRET_HOLDING)
    except KeyError:
        record = logging.LogRecord(
            "sdc.x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    line = json.loads(logs.JSONFormatter().format(record))
    assert line["exc_type"] == "KeyError" and line["msg"] == "failed"
    assert SECRET_HOLDING not in json.dumps(line)


def test_uvicorn_access_log_is_off_and_all_json():
    cfg = logs.config("warning")
    assert cfg["loggers"]["uvicorn.access"]["handlers"] == []
    assert cfg["loggers"]["uvicorn.access"]["propagate"] is False
    assert cfg["formatters"]["json"]["()"] == "service.logs.JSONFormatter"
    assert cfg["loggers"]["sdc"]["level"] == "WARNING"


def test_a_401_line_names_the_presented_key_id_never_the_secret(make_client, log_lines, tmp_path):
    """The SDCUnauthorizedRequests alert sends the operator to the access log for the key
    id of refused requests: a 401 line carries the id presented when it is a well-formed
    id of a ``<id>.<secret>`` key (known or not), no role, and never the secret."""
    import yaml

    from service import api_keys

    path = tmp_path / "keys.json"
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {
                        "id": "portal",
                        "role": "filter",
                        "hash": api_keys.hash_key("portal.right-secret-0123456789"),
                    }
                ]
            }
        )
    )
    client = make_client(api_keys_file=path)
    sent = {
        "portal.WRONG-SECRET-0000000000": "portal",  # known id, wrong secret
        "someone-else.WRONG-SECRET-1111": "someone-else",  # unknown id
        "WRONGSECRETWITHOUTANID2222": None,  # a bare secret: no id to name
        "bad id!.WRONG-SECRET-3333": None,  # not a well-formed id
        "": None,
    }  # no key at all
    for key in sent:
        headers = {"X-API-Key": key} if key else {}
        assert client.post("/v1/sensitivity", json=BODY, headers=headers).status_code == 401
    assert (
        client.post(
            "/v1/sensitivity",
            json=BODY,
            headers={"Authorization": "Bearer portal.right-secret-0123456789"},
        ).status_code
        == 200
    )
    lines = [x for x in log_lines() if x["logger"] == "sdc.access"]
    assert [x["status"] for x in lines] == [401] * len(sent) + [200]
    assert [x.get("key_id") for x in lines] == [*sent.values(), "portal"]
    assert [x.get("role") for x in lines] == [None] * len(sent) + ["filter"]
    text = json.dumps(log_lines())
    assert "WRONG" not in text and "right-secret" not in text
    _assert_no_data(log_lines())
    rules = [
        r
        for g in yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())[
            "groups"
        ]
        for r in g["rules"]
    ]
    (alert,) = [r for r in rules if r["alert"] == "SDCUnauthorizedRequests"]
    assert "key id" in alert["annotations"]["description"]


@pytest.mark.parametrize(
    "port,said",
    [
        (None, "/metrics on the same port"),
        ("9464", "/metrics on port 9464 only (SDC_METRICS_PORT)"),
    ],
)
def test_the_start_line_says_where_the_metrics_are(monkeypatch, port, said):
    """``sdc-service`` logs where it listens, and where Prometheus scrapes."""
    import service.__main__ as entry

    for name in [n for n in os.environ if n.startswith("SDC_")]:
        monkeypatch.delenv(name)
    if port is not None:
        monkeypatch.setenv("SDC_METRICS_PORT", port)
    monkeypatch.setattr(entry.logs, "setup", lambda level: None)  # this process's logging
    monkeypatch.setattr(entry.uvicorn, "run", lambda *args, **kwargs: None)
    records: list[logging.LogRecord] = []
    start = logging.getLogger("sdc.start")
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    start.addHandler(handler)
    monkeypatch.setattr(start, "level", logging.INFO)
    try:
        entry.main()
    finally:
        start.removeHandler(handler)
    [line] = [r.getMessage() for r in records if r.getMessage().startswith("listening")]
    assert line.startswith("listening on http://127.0.0.1:8787 (0 rule profiles, no API keys")
    assert line.endswith(said)
