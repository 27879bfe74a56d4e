"""The analysts' page is served as static files at ``/ui`` without a key (its API calls
carry one), with content types a browser accepts for an ES module, and a content security
policy that keeps it on its own origin. No browser needed: these run everywhere."""

from __future__ import annotations

import re

import pytest

from service.app import UI_DIR


@pytest.fixture
def secured(make_client, key_file):
    return make_client(api_keys_file=key_file)


def test_the_page_loads_without_a_key_and_the_api_still_needs_one(secured):
    r = secured.get("/ui", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"].endswith("/ui/")
    page = secured.get("/ui/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="app.js">' in page.text
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        r = secured.get(f"/ui/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind), name
        assert r.content == (UI_DIR / name).read_bytes()
    assert secured.get("/ui/missing.js").status_code == 404
    assert secured.post("/v1/suppress", json={}).status_code == 401


def test_the_page_fetches_nothing_from_elsewhere():
    html = (UI_DIR / "index.html").read_text()
    policy = re.search(r'http-equiv="Content-Security-Policy"\s+content="([^"]+)"', html)
    assert policy is not None
    directives = dict(d.strip().split(" ", 1) for d in policy.group(1).split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == directives["connect-src"] == "'self'"
    # No absolute URL anywhere: no CDN, no font or script from outside.
    for name in ("index.html", "app.js", "style.css"):
        assert not re.search(r"https?://", (UI_DIR / name).read_text()), name
