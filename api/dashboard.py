"""The dashboard: a browser interface over the API, served at ``/`` with its assets under :data:`ASSETS_URL`.

Why plain files: the page is a few ES modules and a style sheet shipped in the package (``api/static``), with the one
library it needs (secp256k1 and keccak-256, to sign requests with a key file) bundled in ``static/vendor``; no build
step, nothing from another host, so it works offline and a ``pip install`` serves it. The page reads the same
``/v1`` resources as any client and signs its state changes as any client must (EIP-712 ``ForwardRequest``s).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The dashboard's files."""
ASSETS_URL = "/ui"
"""Where they are served (``/static`` holds the API docs' assets)."""


def install_dashboard(app: FastAPI) -> None:
    """Serve the page at ``/`` and its assets at :data:`ASSETS_URL` on ``app``."""
    app.mount(ASSETS_URL, StaticFiles(directory=STATIC_DIR), name="dashboard")

    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    app.add_api_route("/", index, include_in_schema=False)
