"""Swagger UI (``/docs``) and ReDoc (``/redoc``) served with their JavaScript and CSS from the API itself.

Why: FastAPI's default pages load Swagger UI and ReDoc from a CDN, so behind a firewall or offline ``/docs`` is a
blank page. The assets come from the pip package ``fastapi-offline``, which ships the built files (Swagger UI's
``swagger-ui-bundle.js`` and ``swagger-ui.css``, ReDoc's ``redoc.standalone.js``, a favicon) under
``fastapi_offline/static``; they are served at :data:`STATIC_URL` and the pages are FastAPI's own
(``get_swagger_ui_html``, ``get_redoc_html``) pointed at them. The pages name no other host: no Google fonts for
ReDoc, and no online validator badge for Swagger UI (which would send the schema's URL to swagger.io).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_URL = "/static"
"""Where the docs' assets are served."""
ASSETS_PACKAGE = ("fastapi_offline", "static")
"""The (package, folder) that holds the assets."""
SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
FAVICON = "favicon.png"
SWAGGER_UI_PARAMETERS: dict[str, object] = {"validatorUrl": None}
"""Swagger UI options besides FastAPI's defaults: no online validator (a request to another host)."""


def install_docs(app: FastAPI) -> None:
    """Serve the assets and the two pages (and Swagger UI's OAuth2 redirect page) on ``app``, created with
    ``docs_url=None, redoc_url=None``; same paths, methods and route names as FastAPI's own pages."""
    app.mount(STATIC_URL, StaticFiles(packages=[ASSETS_PACKAGE]), name="static")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    async def swagger_ui_html(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root + redirect_url,
            swagger_js_url=f"{root}{STATIC_URL}/{SWAGGER_JS}",
            swagger_css_url=f"{root}{STATIC_URL}/{SWAGGER_CSS}",
            swagger_favicon_url=f"{root}{STATIC_URL}/{FAVICON}",
            swagger_ui_parameters={**SWAGGER_UI_PARAMETERS, **(app.swagger_ui_parameters or {})},
        )

    async def swagger_ui_redirect(_: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc_html(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{STATIC_URL}/{REDOC_JS}",
            redoc_favicon_url=f"{root}{STATIC_URL}/{FAVICON}",
            with_google_fonts=False,
        )

    app.add_route("/docs", swagger_ui_html, include_in_schema=False)
    app.add_route(redirect_url, swagger_ui_redirect, include_in_schema=False)
    app.add_route("/redoc", redoc_html, include_in_schema=False)


def _root(request: Request) -> str:
    """The prefix a reverse proxy mounts the API under (``root_path``), as FastAPI's own pages use it."""
    return str(request.scope.get("root_path", "")).rstrip("/")
