"""The Python client (client/sdc_client): routes over HTTP against a real server, retries,
errors with field and cell, and the pandas helpers on a hand-checked table."""

from __future__ import annotations

import httpx
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sdc_client import Client, LocalService, ServiceError
from sdc_client import frames as sdc_frames
from sdc_client.client import retry_after_seconds

from service.app import create_app
from service.config import Settings
from tests.servers import served

P20 = {"rules": [{"type": "p_percent", "p": 20}]}


def turnover() -> pd.DataFrame:
    """A 3x3 table of microdata. A,I holds 100 and 5: under the p%-rule with p = 20 its
    protection level is 20/100 * 100 - (105 - 100 - 5) = 20 (seed 000, upper protection
    levels), so it is the one primary; every other cell has 4 equal contributions (safe).
    The cheapest complements are A,II (100), B,I (100) and B,II (80), the rectangle that
    costs 280 against 320 or more for any other; in it A,I can rise until A,II and B,I
    reach 0 (105 + 100 = 205) and fall until B,II reaches 0 (105 - 80 = 25)."""
    values = {("A", "I"): [100, 5], ("A", "II"): [25] * 4, ("B", "I"): [25] * 4}
    values[("B", "II")] = [20] * 4
    rows = []
    for size in "ABC":
        for act in ("I", "II", "III"):
            for v in values.get((size, act), [40] * 4):
                rows.append({"size": size, "activity": act, "ent": f"e{len(rows)}", "turnover": v})
    return pd.DataFrame(rows)


EXPECTED_STATUS = {("A", "I"): "primary"} | dict.fromkeys(
    [("A", "II"), ("B", "I"), ("B", "II")], "secondary"
)


@pytest.fixture(scope="module")
def url():
    app = create_app(Settings())
    with served(app, app.state.settings) as (_, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def client(url):
    with Client(url) as c:
        yield c


def check_protected_table(result: pd.DataFrame) -> None:
    assert len(result) == 16  # 3x3 leaves, 3 + 3 margins and the grand total
    by_key = result.set_index(["size", "activity"])
    for key, row in by_key.iterrows():
        assert row["status"] == EXPECTED_STATUS.get(key, "published"), key
    assert by_key.loc[("Total", "Total"), "value"] == 1185.0
    assert by_key.loc[("A", "Total"), "value"] == 365.0
    assert by_key.loc[("Total", "II"), "value"] == 340.0
    primary = by_key.loc[("A", "I")]
    assert primary["value"] == 105.0
    assert (primary["interval_lower"], primary["interval_upper"]) == (25.0, 205.0)
    assert primary["sensitive"] and primary["protected"] and primary["certified"]
    assert not primary["exact"] and not primary["too_narrow"]
    assert (primary["upper_protection"], primary["lower_protection"]) == (20.0, 20.0)
    assert by_key.loc[("B", "II"), "interval_lower"] == 0.0


@pytest.mark.parametrize("method", ["fast", "exact"])
def test_suppress_frame_over_http(client, method):
    result = sdc_frames.suppress(
        turnover(),
        ["size", "activity"],
        "turnover",
        holding="ent",
        rules=P20,
        method=method,
        client=client,
    )
    check_protected_table(result)
    reply = result.attrs["reply"]
    assert reply["safe"] and reply["audit"]["verdict"] == "safe"
    assert reply["loss"]["value"] == 105 + 100 + 100 + 80


def test_suppress_frame_in_process_is_the_same(client):
    args = (turnover(), ["size", "activity"], "turnover")
    remote = sdc_frames.suppress(*args, holding="ent", rules=P20, client=client)
    local = sdc_frames.suppress(*args, holding="ent", rules=P20, client=LocalService())
    check_protected_table(local)
    pd.testing.assert_frame_equal(local, remote)


def test_audit_frame_reads_the_suppressed_column(client):
    frame = turnover()
    frame["cross"] = [
        (s, a) in EXPECTED_STATUS for s, a in zip(frame["size"], frame["activity"], strict=True)
    ]
    result = sdc_frames.audit(
        frame, ["size", "activity"], "turnover", suppressed="cross", rules=P20, client=client
    )
    assert result.attrs["reply"]["verdict"] == "safe"
    check_protected_table(result)
    # Without B,II the rectangle opens: A,I is then read off its row and column.
    frame["cross"] &= ~((frame["size"] == "B") & (frame["activity"] == "II"))
    result = sdc_frames.audit(
        frame, ["size", "activity"], "turnover", suppressed="cross", rules=P20, client=client
    )
    assert result.attrs["reply"]["verdict"] == "unsafe"
    row = result.set_index(["size", "activity"]).loc[("A", "I")]
    assert row["exact"] and not row["protected"]
    assert (row["interval_lower"], row["interval_upper"]) == (105.0, 105.0)


def test_frames_show_the_weighted_values_the_service_publishes(client):
    """With sampling weights a cell's published value is ``sum w x`` (seed 000, Sampling
    weights). The audit frame, whose reply carries no values, showed the unweighted sums:
    A,1 (100 x 2 + 20) as 120 where the suppression frame, from the reply, showed 220."""
    frame = pd.DataFrame(
        {
            "r": ["A", "A", "B", "B", "A", "B"],
            "c": ["1", "2", "1", "2", "1", "2"],
            "v": [100.0, 50, 30, 40, 20, 10],
            "w": [2.0, 1, 1, 3, 1, 1],
            "s": [True, True, True, True, False, False],
        }
    )
    rules = {"rules": [{"type": "p_percent", "p": 10}], "weights": "sample"}
    args = (frame, ["r", "c"], "v")
    audited = sdc_frames.audit(*args, suppressed="s", weight="w", rules=rules, client=client)
    protected = sdc_frames.suppress(*args, weight="w", rules=rules, client=client)
    values = protected.set_index(["r", "c"])["value"]
    assert values[("A", "1")] == 220.0 and values[("Total", "Total")] == 430.0
    pd.testing.assert_series_equal(audited.set_index(["r", "c"])["value"].loc[values.index], values)


def test_hierarchy_from_children_and_holdings_pooled(client):
    """Two leaves of one region each hold part of enterprise X: judged per leaf the
    region's margin has 3 contributors, but X counts once (README: one holding across
    several leaves counted once), so the margin N is 90 + 10 + ... with X = 90."""
    rows = [
        ("n1", "X", 45),
        ("n1", "a", 5),
        ("n2", "X", 45),
        ("n2", "b", 5),
        ("s1", "c", 50),
        ("s1", "d", 50),
        ("s1", "e", 50),
    ]
    frame = pd.DataFrame(rows, columns=["region", "ent", "v"])
    frame["k"] = "all"
    hierarchy = {"Total": ["N", "S"], "N": ["n1", "n2"], "S": ["s1"]}
    result = sdc_frames.suppress(
        frame,
        ["region", "k"],
        "v",
        holding="ent",
        hierarchies={"region": hierarchy},
        rules=P20,
        client=client,
    )
    by_key = result.set_index(["region", "k"])
    # N: X = 90, next 5, rest 5: 18 - 5 > 0 sensitive; n1, n2: 9 - 0 > 0 each.
    assert by_key.loc[("N", "all"), "value"] == 100.0
    assert by_key.loc[("N", "all"), "status"] == "primary"
    assert by_key.loc[("n1", "all"), "status"] == "primary"
    assert by_key.loc[("Total", "Total"), "value"] == 250.0


def test_sensitivity_method_and_frame(client):
    reply = client.sensitivity(
        cells=[{"key": ["x"], "contributions": [{"value": 100}, {"value": 5}]}], rules=P20
    )
    assert reply["cells"][0]["sensitive"] and reply["cells"][0]["upper_protection"] == 20.0
    result = sdc_frames.sensitivity(
        turnover(), ["size", "activity"], "turnover", holding="ent", rules=P20, client=client
    )
    assert result["sensitive"].tolist() == [True] + [False] * 8
    assert result.loc[0, "fired"] == "p_percent(p=20,c=1)"


def test_conversions_and_frequency_routes(client):
    reply = client.conversions(rule={"type": "dominance", "n": 2, "k": 80})
    assert [e["rule"]["p"] for e in reply["equivalents"]] == [25.0, 50.0]
    count = client.frequency_sensitivity(
        {
            "dimensions": [{"name": "m", "codes": ["a", "b"]}, {"name": "y", "codes": ["A"]}],
            "keys": ["m"],
            "targets": ["y"],
            "cells": [{"key": ["a", "A"], "count": 2}, {"key": ["b", "A"], "count": 7}],
            "rules": {"threshold": {"t": 3}},
        }
    )
    assert [c["sensitive"] for c in count["cells"]] == [True, False]


def test_error_names_field_and_cell(client):
    with pytest.raises(ServiceError) as info:
        client.sensitivity(
            cells=[
                {"key": ["ok"], "contributions": [{"value": 1}]},
                {"key": ["Energy", "North"], "contributions": [{"value": -5}]},
            ],
            rules=P20,
        )
    error = info.value
    assert error.status == 422 and error.error == "invalid_request"
    assert (error.field, error.cell) == ("contributions.value", 1)
    assert error.detail[0].key == ["Energy", "North"]
    assert "negative" in error.detail[0].message


def test_validation_error_in_process_is_the_servers(client):
    body = {"cells": [{"key": ["a"], "contributions": [{"value": "5"}]}], "rules": P20}
    errors = []
    for service in (client, LocalService()):
        with pytest.raises(ServiceError) as info:
            service.sensitivity(body)
        errors.append(info.value)
    assert errors[0] == errors[1]
    assert (errors[0].field, errors[0].cell) == ("contributions.0.value", 0)


def test_frame_errors_name_the_row_and_column():
    frame = turnover()
    frame.loc[3, "turnover"] = float("nan")
    with pytest.raises(ValueError, match="value column 'turnover': row 3 is not a finite"):
        sdc_frames.table_request(frame, ["size", "activity"], "turnover")
    with pytest.raises(ValueError, match="column 'region' is not in the frame"):
        sdc_frames.table_request(turnover(), ["region"], "turnover")
    frame = turnover()
    frame["s"] = "False"
    frame.loc[0, "s"] = "maybe"
    with pytest.raises(ValueError, match="row 0 is 'maybe'"):
        sdc_frames.table_request(frame, ["size"], "turnover", suppressed="s")


# Retries, with a transport that plays a script of replies.


def scripted(*replies: httpx.Response | Exception):
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        reply = replies[min(len(calls), len(replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply

    return httpx.MockTransport(handler), calls


BUSY = httpx.Response(
    503,
    headers={"Retry-After": "3"},
    json={"error": "unavailable", "detail": [{"message": "the service is at capacity"}]},
)
OK = httpx.Response(200, json={"equivalents": []})


def test_503_with_retry_after_is_retried_after_the_wait():
    transport, calls = scripted(BUSY, BUSY, OK)
    waits: list[float] = []
    with Client("http://sdc", "k.secret", transport=transport, sleep=waits.append) as c:
        assert c.conversions(rule={"type": "p_percent", "p": 10}) == {"equivalents": []}
    assert len(calls) == 3
    assert waits == [3.0, 3.0]  # Retry-After beats the backoff 0.5, 1.0
    assert calls[0].headers["x-api-key"] == "k.secret"
    assert calls[0].url.path == "/v1/conversions"
    assert calls[2].content == calls[0].content


def test_gives_up_after_the_retries_with_the_services_error():
    transport, calls = scripted(BUSY)
    waits: list[float] = []
    client = Client("http://sdc", transport=transport, retries=2, max_backoff=2, sleep=waits.append)
    with pytest.raises(ServiceError) as info:
        client.audit({"structure": {}, "cells": []})
    assert len(calls) == 3 and waits == [2.0, 2.0]  # capped at max_backoff
    assert info.value.status == 503 and info.value.retry_after == 3.0
    assert info.value.detail[0].message == "the service is at capacity"


def test_backoff_grows_without_retry_after_and_connection_errors_are_retried():
    refused = httpx.ConnectError("connection refused")
    transport, calls = scripted(refused, httpx.Response(503), refused, OK)
    waits: list[float] = []
    client = Client("http://sdc", transport=transport, backoff=0.25, sleep=waits.append)
    assert client.conversions(rule={"type": "p_percent", "p": 10}) == {"equivalents": []}
    assert waits == [0.25, 0.5, 1.0]
    transport, calls = scripted(refused)
    client = Client("http://sdc", transport=transport, retries=1, sleep=waits.append)
    with pytest.raises(ServiceError, match="ConnectError"):
        client.conversions(rule={})
    assert len(calls) == 2


def test_no_retry_on_422_and_a_proxy_page_becomes_a_detail():
    transport, calls = scripted(httpx.Response(422, json={"error": "invalid_request"}))
    with pytest.raises(ServiceError):
        Client("http://sdc", transport=transport, sleep=lambda s: None).suppress({})
    assert len(calls) == 1
    transport, _ = scripted(httpx.Response(502, text="<html>Bad gateway</html>"))
    with pytest.raises(ServiceError) as info:
        Client("http://sdc", transport=transport).suppress({})
    assert info.value.status == 502 and info.value.error == "Bad Gateway"
    assert info.value.detail[0].message == "<html>Bad gateway</html>"


def test_nan_is_refused_before_sending():
    transport, calls = scripted(OK)
    with pytest.raises(ValueError):
        Client("http://sdc", transport=transport).sensitivity(cells=[{"value": float("nan")}])
    assert calls == []


def test_retry_after_as_an_http_date():
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("Thu, 01 Jan 2026 12:00:07 GMT", now) == 7.0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("-4", now) == 0.0


@settings(max_examples=40, deadline=None)
@given(
    retry_after=st.lists(st.one_of(st.none(), st.integers(0, 100)), min_size=1, max_size=6),
    retries=st.integers(0, 6),
    cap=st.floats(0.1, 50),
)
def test_waits_are_capped_never_shorter_than_asked_and_bounded_in_number(retry_after, retries, cap):
    replies = [
        httpx.Response(503, headers={} if r is None else {"Retry-After": str(r)})
        for r in retry_after
    ]
    transport, calls = scripted(*replies, OK)
    waits: list[float] = []
    client = Client("http://sdc", transport=transport, retries=retries, max_backoff=cap)
    client._sleep = waits.append
    try:
        client.conversions(rule={})
        assert len(calls) == len(retry_after) + 1 <= retries + 1
    except ServiceError as e:
        assert e.status == 503 and len(calls) == retries + 1 <= len(retry_after)
    assert len(waits) == len(calls) - 1
    for k, (wait, r) in enumerate(zip(waits, retry_after, strict=False)):
        assert wait <= cap
        assert wait == min(cap, max(0.5 * 2**k, r or 0))
