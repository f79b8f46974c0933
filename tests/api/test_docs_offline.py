"""``/docs`` and ``/redoc`` work offline: every asset they load is served by the API itself.

No browser here (CI cannot assume one): the pages' HTML is parsed for every URL it loads, each must be same-origin
and served with 200 and a fitting content type. ``bench/docs_offline.py`` renders the pages in headless Chromium
with other hosts unreachable. No chain either: the pages and the OpenAPI document do not read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.core.result import Err, Ok

from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.ledger.devnet.anvil import free_port

CONTENT_TYPES = {".js": ("text/javascript", "application/javascript"), ".css": ("text/css",), ".png": ("image/png",)}
"""What each kind of asset must be served as (a browser refuses a script or a style sheet of another type)."""


class _Urls(HTMLParser):
    """Every URL an HTML page makes the browser load: ``src``, ``href`` and ReDoc's ``spec-url`` attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href", "spec-url") and v]


def _loaded_urls(html: str) -> list[str]:
    parser = _Urls()
    parser.feed(html)
    # Swagger UI's script names the OpenAPI document and the OAuth2 redirect in its configuration
    return parser.urls + re.findall(r"url: '([^']*)'", html) + re.findall(r"origin \+ '([^']*)'", html)


@pytest.fixture(scope="module")
def docs_client() -> Iterator[TestClient]:
    """The app with a backend whose chain is not running: nothing here may need it."""
    backend = Backend(Settings(f"http://127.0.0.1:{free_port()}", "0x" + "00" * 20))
    with TestClient(create_app(backend), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(
    ("page", "must_load"),
    [
        ("/docs", {"/static/swagger-ui-bundle.js", "/static/swagger-ui.css", "/openapi.json"}),
        ("/redoc", {"/static/redoc.standalone.js", "/openapi.json"}),
    ],
)
def test_docs_pages_load_only_same_origin_assets(docs_client: TestClient, page: str, must_load: set[str]) -> None:
    r = docs_client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "http://" not in r.text and "https://" not in r.text, "the page names another host"
    urls = _loaded_urls(r.text)
    assert must_load <= set(urls), urls
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{url} is not same-origin"
        asset = docs_client.get(url)
        assert asset.status_code == 200, url
        suffix = url[url.rfind(".") :]
        if suffix in CONTENT_TYPES:
            assert asset.headers["content-type"].startswith(CONTENT_TYPES[suffix]), (url, asset.headers)
            assert len(asset.content) > 1000, url  # the asset itself, not an error page


def test_assets_are_the_libraries(docs_client: TestClient) -> None:
    """The served files are Swagger UI's and ReDoc's builds (what the pages call), not placeholders."""
    assert "SwaggerUIBundle" in docs_client.get("/static/swagger-ui-bundle.js").text
    assert ".swagger-ui" in docs_client.get("/static/swagger-ui.css").text
    assert "Redoc" in docs_client.get("/static/redoc.standalone.js").text
    assert docs_client.get("/static/favicon.png").content.startswith(b"\x89PNG")
    assert docs_client.get("/static/nothing.js").status_code == 404


def test_swagger_ui_calls_no_online_validator(docs_client: TestClient) -> None:
    """Swagger UI's validator badge would send the schema's URL to swagger.io: it is switched off."""
    assert "validatorUrl: null" in docs_client.get("/docs").text.replace('"validatorUrl"', "validatorUrl")


def test_oauth2_redirect_page_is_self_contained(docs_client: TestClient) -> None:
    r = docs_client.get("/docs/oauth2-redirect")
    assert r.status_code == 200 and "http://" not in r.text and "https://" not in r.text
    assert not [u for u in _loaded_urls(r.text) if not u.startswith("/")]


def test_docs_behind_a_proxy_prefix() -> None:
    """Mounted under a reverse proxy's prefix (``root_path``), the pages name their assets under that prefix."""
    backend = Backend(Settings(f"http://127.0.0.1:{free_port()}", "0x" + "00" * 20))
    with TestClient(create_app(backend), root_path="/api") as client:
        docs, redoc = client.get("/docs").text, client.get("/redoc").text
    assert "/api/static/swagger-ui-bundle.js" in docs and "url: '/api/openapi.json'" in docs
    assert 'spec-url="/api/openapi.json"' in redoc and "/api/static/redoc.standalone.js" in redoc


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_openapi_document_is_still_valid(docs_client: TestClient) -> None:
    """The document the pages render: OpenAPI 3.1, every reference resolves, every operation loads."""
    r = docs_client.get("/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["openapi"].startswith("3.1") and doc["info"]["title"] == "FGBDT-Chain API"
    schemas = doc["components"]["schemas"]
    for ref in set(_refs(doc)):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    assert not any(p in doc["paths"] for p in ("/", "/docs", "/redoc", "/static", "/ui", "/docs/oauth2-redirect"))
    loaded = list(schemathesis.openapi.from_dict(doc).get_all_operations())
    operations = [result.ok() for result in loaded if isinstance(result, Ok)]
    assert len(operations) == len(loaded) == 24, [r.err() for r in loaded if isinstance(r, Err)]
    assert all(op.path.startswith("/v1/") for op in operations)
