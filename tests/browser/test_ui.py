"""The analysts' page (``/ui``) in a real headless Chromium, driven by Playwright with the
system's browser (Debian's ``chromium``; ``scripts/browser-test`` installs both).

One hand-checked table: 3 x 3 with contributions, p% rule (p = 10) and minimum frequency 3.
Only ``A,I`` (contributions 100 and 5) is sensitive: p% protection
``p/100 x1 - (X - x1 - x2) = 10 - 0 = 10`` (seed 000, "Upper protection levels"), and it
has 2 < 3 contributors; every other leaf has three equal contributions (p% measure
``3 - 30 < 0``). With margins published, a primary in a 2-D table needs a rectangle of
complements; the four rectangles through ``A,I`` cost (by value)
``A,II + B,I + B,II = 60 + 45 + 30 = 135``, ``120 + 45 + 150 = 315``,
``60 + 180 + 210 = 450`` and ``120 + 180 + 240 = 540``, so the pattern is
``A,II``, ``B,I``, ``B,II`` (loss: 4 cells, value ``105 + 135 = 240``). ``A,I``'s
feasibility interval: it can rise until ``B,I`` (45) or ``A,II`` (60) reaches 0, by 45, to
150, and fall until ``B,II`` (30) reaches 0, by 30, to 75: ``[75, 150]``, wider than the
protection of 10 on either side, so the verdict is safe.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from service.app import create_app
from service.config import Settings
from tests.callers import ANALYST_KEY, write_keys
from tests.servers import served

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("SDC_CHROMIUM", "/usr/bin/chromium")
SCREENSHOT = Path(os.environ.get("SDC_UI_SCREENSHOT", "/tmp/sdc-ui.png"))
VIEWPORT = {"width": 1280, "height": 900}
#: The switches for a headless browser on a machine without internet or a display.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

LEAVES = {
    ("A", "I"): [100, 5],
    ("A", "II"): [20, 20, 20],
    ("A", "III"): [40, 40, 40],
    ("B", "I"): [15, 15, 15],
    ("B", "II"): [10, 10, 10],
    ("B", "III"): [50, 50, 50],
    ("C", "I"): [60, 60, 60],
    ("C", "II"): [70, 70, 70],
    ("C", "III"): [80, 80, 80],
}


def _csv(leaves=LEAVES) -> str:
    lines, n = ["region,activity,enterprise,turnover"], 0
    for (region, activity), values in leaves.items():
        for v in values:
            n += 1
            lines.append(f"{region},{activity},e{n},{v}")
    return "\n".join(lines) + "\n"


def _expected_values() -> dict[tuple[str, str], float]:
    """Every cell's value, margins (code 'Total') included, summed by hand here."""
    values: dict[tuple[str, str], float] = {}
    for (r, a), contributions in LEAVES.items():
        for key in ((r, a), (r, "Total"), ("Total", a), ("Total", "Total")):
            values[key] = values.get(key, 0) + sum(contributions)
    return values


SECONDARY = {("A", "II"), ("B", "I"), ("B", "II")}


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (scripts/browser-test)"
    )
    if not (os.access(CHROMIUM, os.X_OK) or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (scripts/browser-test installs it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page_url(tmp_path):
    keys = write_keys(tmp_path / "keys.json", (ANALYST_KEY, "analyst", "sha256"))
    app = create_app(Settings(api_keys_file=keys))
    with served(app, app.state.settings) as (_, port):
        yield f"http://127.0.0.1:{port}/ui/"


def _statuses(page) -> dict[tuple[str, ...], str]:
    return {
        tuple(json.loads(k)): s
        for k, s in page.eval_on_selector_all(
            "#result-table td[data-status]",
            "els => els.map(e => [e.dataset.key, e.dataset.status])",
        )
    }


def test_the_page_protects_a_pasted_table(browser, page_url, tmp_path):
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1, accept_downloads=True)
    page = context.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r))
    # Script errors, and console errors other than the browser's own note of the 401 and
    # 422 answers this test provokes.
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and not re.search(r"status of (401|422)\b", m.text)
            else None
        ),
    )

    # The page loads without a key.
    response = page.goto(page_url)
    assert response is not None and response.status == 200
    page.fill("#csv", _csv())
    assert page.inner_text("#parsed") == "26 rows, 4 columns"
    # The columns are guessed from the header: dimensions, holding, value.
    checked = page.eval_on_selector_all(
        "#dimensions input", "els => els.map(e => [e.parentElement.textContent.trim(), e.checked])"
    )
    assert checked == [
        ["region", True],
        ["activity", True],
        ["enterprise", False],
        ["turnover", False],
    ]
    assert page.eval_on_selector("#holding-col", "e => e.selectedOptions[0].textContent") == (
        "enterprise"
    )

    # Without a key the service answers 401, and the page says so readably.
    page.click("#run")
    page.wait_for_selector("#error:not([hidden])")
    error = page.inner_text("#error")
    assert "401" in error and "API key" in error

    # With the analyst's key: the protected table.
    page.fill("#api-key", ANALYST_KEY)
    assert page.evaluate("sessionStorage.getItem('sdc-api-key')") == ANALYST_KEY
    page.click("#run")
    page.wait_for_selector("#verdict")
    assert page.is_hidden("#error")
    statuses = _statuses(page)
    assert len(statuses) == 16  # 3 x 3 leaves, 3 + 3 margins, the grand total
    assert statuses[("A", "I")] == "primary"
    assert {k for k, s in statuses.items() if s == "secondary"} == SECONDARY
    assert all(
        s == "published" for k, s in statuses.items() if k != ("A", "I") and k not in SECONDARY
    )
    # Coloured: the stylesheet's primary red and secondary orange.
    colour = "e => getComputedStyle(e).backgroundColor"
    a_i = page.locator("""td[data-key='["A","I"]']""")
    assert a_i.evaluate(colour) == "rgb(198, 40, 40)"
    assert page.locator("""td[data-key='["B","II"]']""").evaluate(colour) == "rgb(255, 183, 77)"
    assert page.locator("""td[data-key='["C","III"]']""").evaluate(colour) == "rgb(255, 255, 255)"
    # The margins' values are shown: the grand total is the sum of all 26 contributions.
    assert page.locator("""td[data-key='["Total","Total"]']""").inner_text() == "1,140"
    # Hover: the feasibility interval from the reply's audit.
    a_i.hover()
    title = a_i.get_attribute("title")
    assert "feasibility interval [75, 150]" in title
    assert "protection −10 / +10" in title
    assert a_i.get_attribute("data-interval") == "[75,150]"
    summary = page.inner_text("#summary")
    assert "Verdict: safe (audit: safe)" in summary
    assert "4 cells suppressed (3 secondary), value 240" in summary

    # The key went in the header of the API call, never into a URL.
    calls = [r for r in requests if r.url.endswith("/v1/suppress")]
    assert calls[-1].headers.get("x-api-key") == ANALYST_KEY
    assert all(ANALYST_KEY not in r.url for r in requests)

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    data = SCREENSHOT.read_bytes()
    assert len(data) > 10_000  # a rendered page, not a blank one
    assert _png_size(data) == (VIEWPORT["width"], VIEWPORT["height"])

    # Download: every cell with its value, status and interval.
    with page.expect_download() as download:
        page.click("#download")
    assert download.value.suggested_filename == "protected-table.csv"
    saved = tmp_path / "result.csv"
    download.value.save_as(saved)
    rows = list(csv.DictReader(io.StringIO(saved.read_text())))
    expected = _expected_values()
    assert len(rows) == 16
    for row in rows:
        key = (row["region"], row["activity"])
        assert float(row["value"]) == expected[key]
        assert row["status"] == statuses[key]
    by_key = {(r["region"], r["activity"]): r for r in rows}
    assert (by_key["A", "I"]["interval_lower"], by_key["A", "I"]["interval_upper"]) == ("75", "150")
    assert by_key["C", "III"]["interval_lower"] == by_key["C", "III"]["interval_upper"] == ""

    # A refusal that names a cell: a negative contribution under the p% rule.
    page.fill("#csv", _csv({**LEAVES, ("B", "III"): [50, -50, 50]}))
    page.click("#run")
    page.wait_for_selector("#error:not([hidden])")
    error = page.inner_text("#error")
    assert "422" in error and "field contributions.value, cell (B, III): negative" in error
    assert page.locator("#result-table td").count() == 0
    assert errors == []
    context.close()


def test_a_count_table_of_one_dimension_as_a_flat_list(browser, page_url):
    """Rows are cells (a count table, threshold 3): ``A`` (1) is primary; its cheapest
    complement by value is ``B`` (5, against ``C``'s 7); with the total 13 and ``C``
    published, ``A + B = 6`` and ``A`` lies in ``[0, 6]``."""
    page = browser.new_page()
    page.goto(page_url)
    page.fill("#api-key", ANALYST_KEY)
    page.fill("#csv", "region;persons\nA;1\nB;5\nC;7\n")  # semicolons
    page.select_option("#row-kind", "cells")
    page.check("input[name=rule-kind][value=counts]")
    page.fill("#rule-threshold", "3")
    page.click("#run")
    page.wait_for_selector("#verdict")
    rows = page.eval_on_selector_all(
        "#result-table table.flat tbody tr",
        "trs => trs.map(tr => [...tr.children].map(c => c.textContent))",
    )
    assert sorted(rows) == [
        ["A", "1", "primary", "[0, 6]"],
        ["B", "5", "secondary", "[0, 6]"],
        ["C", "7", "published", ""],
        ["Total", "13", "published", ""],
    ]
    assert "Verdict: safe" in page.inner_text("#summary")
    page.close()
