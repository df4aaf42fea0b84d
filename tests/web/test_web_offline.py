"""The web app works offline and serves only files of the package (issue 29): no external URL in
any page, script or style it ships, every local reference it makes resolves on the app itself,
and FastAPI's interactive docs (``/docs``, ``/redoc``, whose pages load scripts and styles from a
CDN) are off; the schema ``/api/openapi.json`` stays."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from plena_opt.web.app import STATIC, create_app  # noqa: E402

# Anything that would make the browser reach beyond the app: an absolute URL, a
# protocol-relative one (//cdn.example/x.js) in an attribute, import or CSS url().
EXTERNAL = re.compile(
    r"""(?ix)
    (?:https?|wss?|ftp)://                      # absolute URL
    | (?:src|href|action)\s*=\s*["']?\s*//      # protocol-relative attribute
    | (?:from|import)\s*\(?\s*["']//            # protocol-relative module import
    | url\(\s*["']?\s*//                        # protocol-relative CSS url()
    | @import\s+(?:url\()?\s*["']?(?!\.?/)[a-z]  # CSS @import of anything not local
    """
)
REFERENCE = re.compile(r"""(?:src|href)="([^"#][^"]*)"|from\s+"([^"]+)"|import\s*\(\s*"([^"]+)""")
DOCS_ROUTES = ["/docs", "/redoc", "/docs/oauth2-redirect", "/api/docs", "/api/redoc"]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(storage=None), base_url="http://127.0.0.1")


def _shipped() -> list[Path]:
    return sorted(p for p in Path(STATIC).rglob("*") if p.is_file())


def test_the_pattern_finds_external_urls() -> None:
    for bad in (
        '<script src="https://cdn.jsdelivr.net/npm/x.js"></script>',
        '<link href="//cdn.example.com/a.css">',
        'import x from "//esm.sh/x";',
        "a { background: url(//cdn.example.com/bg.png) }",
        '@import "fonts.googleapis.com/css";',
        "fetch('http://example.com/api')",
    ):
        assert EXTERNAL.search(bad), bad
    for good in ('<script src="/static/app.js">', 'import { a } from "./api.js";', "a // b"):
        assert not EXTERNAL.search(good), good


def test_no_shipped_file_names_an_external_url() -> None:
    files = _shipped()
    assert {p.suffix for p in files} <= {".html", ".js", ".css"}
    assert {"index.html", "app.js", "style.css"} <= {p.name for p in files}
    for path in files:
        text = path.read_text(encoding="utf-8")
        hit = EXTERNAL.search(text)
        assert hit is None, f"{path.name}: {text[max(hit.start() - 40, 0) : hit.end() + 40]!r}"


def test_every_served_page_and_file_is_local(client) -> None:
    """What the app serves is the package's files, byte for byte, and every reference they make
    is a path on the app that answers 200."""
    page = client.get("/")
    assert page.status_code == 200
    assert page.content == (Path(STATIC) / "index.html").read_bytes()
    seen: set[str] = set()
    todo = ["/"]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        r = client.get(url)
        assert r.status_code == 200, url
        assert not EXTERNAL.search(r.text), url
        base = url.rsplit("/", 1)[0] + "/"
        for groups in REFERENCE.findall(r.text):
            ref = next(g for g in groups if g)
            if ref.startswith("data:"):
                continue
            assert not ref.startswith("//") and "://" not in ref, (url, ref)
            todo.append(ref if ref.startswith("/") else base + ref.removeprefix("./"))
    assert {f"/static/{p.name}" for p in _shipped() if p.suffix == ".js"} <= seen


def test_docs_pages_that_load_a_cdn_are_off(client) -> None:
    for route in DOCS_ROUTES:
        assert client.get(route).status_code == 404, route
    schema = client.get("/api/openapi.json")
    assert schema.status_code == 200 and "/api/simulate" in schema.json()["paths"]
    app = create_app(storage=None)
    assert app.docs_url is None and app.redoc_url is None


def test_static_serves_nothing_outside_the_package(client) -> None:
    for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py"):
        r = client.get(path)
        assert r.status_code == 404 or "create_app" not in r.text, path
