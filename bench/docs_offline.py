"""``/docs`` and ``/redoc`` render in a real browser with no host but the API reachable.

The test suite checks the pages' HTML and assets without a browser (``tests/api/test_docs_offline.py``); this runs
the pages in headless Chromium, which executes Swagger UI and ReDoc for real:

* the API app (``api.app.create_app``) is served by uvicorn on a free port of 127.0.0.1. Its backend names a chain
  that is not running: the pages and ``/openapi.json`` never read the chain (the API tests' anvil is not needed);
* Chromium loads ``/docs`` and ``/redoc`` with every other host unreachable: names resolve to nothing
  (``--host-resolver-rules``) and everything not on loopback goes to a proxy port where nothing listens;
* the rendered DOM (``--dump-dom`` after ``--virtual-time-budget``) must hold Swagger UI's operation blocks
  (``opblock``, one per operation of the OpenAPI document, by tag and operationId) and ReDoc's operation sections
  and title; every request the browser made to the API must have been answered 200;
* control: FastAPI's default pages (assets from a CDN) for the same OpenAPI document, in the same browser setup,
  must render no operation, which shows the setup really cuts the browser off from other hosts.

Needs Chromium (``apt-get install chromium`` on Debian). Prints the result and writes it to ``--out``.

    python -m bench.docs_offline [--chromium PATH]   # bench/results/docs_offline.json (bench.record)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.resources
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from bench.record import Run, parameters_of
from fgbdt_chain.api import docs
from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.ledger.devnet.anvil import free_port

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--virtual-time-budget=10000",
    # no other host: names resolve to nothing, and whatever is not loopback goes to a closed proxy port
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:{closed_port}",
]


class RequestLog:
    """ASGI wrapper recording every request the browser makes to an app, with the status it got."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.requests: list[tuple[str, str, int]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.requests.append((scope["method"], scope["path"], int(message["status"])))
            await send(message)

        await self.app(scope, receive, record)


@contextmanager
def serving(app: RequestLog) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port, in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def browser_command(chromium: str, url: str, profile: str) -> list[str]:
    """The Chromium command that renders ``url`` offline and prints its DOM."""
    flags = [f.format(closed_port=free_port()) for f in BROWSER_FLAGS]
    return [chromium, *flags, f"--user-data-dir={profile}", "--dump-dom", url]


def render(chromium: str, url: str) -> tuple[str, float]:
    """The DOM of ``url`` after Chromium ran its scripts, and the seconds it took."""
    with tempfile.TemporaryDirectory() as profile:
        t0 = time.monotonic()
        out = subprocess.run(browser_command(chromium, url, profile), capture_output=True, text=True, timeout=180)
        if out.returncode != 0:
            raise RuntimeError(f"chromium exited with {out.returncode}: {out.stderr[-2000:]}")
        return out.stdout, time.monotonic() - t0


@dataclass
class PageResult:
    """What one page rendered, and whether that is what it must render."""

    page: str
    seconds: float
    rendered: int
    expected: int
    missing: list[str]
    requests: list[tuple[str, str, int]]
    extra: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            not self.missing
            and self.rendered == self.expected
            and all(s == 200 for _, _, s in self.requests)
            and all(self.extra.values())
        )


def operations(openapi: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(tag, operationId, method) of every operation of the document."""
    return [
        (op["tags"][0], op["operationId"], method) for ops in openapi["paths"].values() for method, op in ops.items()
    ]


def check_swagger(dom: str, ops: list[tuple[str, str, str]]) -> tuple[int, list[str]]:
    """Swagger UI's rendered operation blocks, and the operations without one."""
    blocks = re.findall(r'class="opblock opblock-(\w+)[^"]*" id="operations-([^"]+)"', dom)
    found = {(method, ident) for method, ident in blocks}
    missing = [f"{m.upper()} {oid}" for tag, oid, m in ops if (m, f"{tag}-{oid}") not in found]
    return len(blocks), missing


def check_redoc(dom: str, ops: list[tuple[str, str, str]]) -> tuple[int, list[str]]:
    """ReDoc's rendered operation sections, and the operations without one."""
    sections = set(re.findall(r'data-section-id="tag/[^/"]+/operation/([^"]+)"', dom))
    missing = [f"{m.upper()} {oid}" for tag, oid, m in ops if oid not in sections]
    return len(sections), missing


def asset_versions() -> dict[str, str]:
    """Versions of what renders the pages: the package shipping the assets, Swagger UI and ReDoc themselves."""
    static = Path(str(importlib.resources.files(docs.ASSETS_PACKAGE[0]) / docs.ASSETS_PACKAGE[1]))
    swagger = re.search(r'PACKAGE_VERSION:"([^"]+)"', (static / docs.SWAGGER_JS).read_text(encoding="utf-8"))
    redoc = re.search(r'" ReDoc Version: ","([^"]+)"', (static / docs.REDOC_JS).read_text(encoding="utf-8"))
    return {
        "fastapi-offline": importlib.metadata.version("fastapi-offline"),
        "Swagger UI": swagger.group(1) if swagger else "?",
        "ReDoc": redoc.group(1) if redoc else "?",
        "FastAPI": importlib.metadata.version("fastapi"),
    }


def chromium_version(chromium: str) -> str:
    out = subprocess.run([chromium, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def run(chromium: str) -> tuple[list[PageResult], PageResult, list[str]]:
    """Render both pages of the API, and the control, and check them."""
    backend = Backend(Settings(f"http://127.0.0.1:{free_port()}", "0x" + "00" * 20))  # no chain behind it
    api = create_app(backend)
    openapi = api.openapi()
    ops = operations(openapi)
    commands: list[str] = []
    results: list[PageResult] = []
    log = RequestLog(api)
    with serving(log) as base:
        for page, check in (("/docs", check_swagger), ("/redoc", check_redoc)):
            log.requests.clear()
            commands.append(shlex.join(browser_command(chromium, base + page, "PROFILE")))
            dom, seconds = render(chromium, base + page)
            rendered, missing = check(dom, ops)
            extra = {"title rendered": "FGBDT-Chain API" in dom}
            if page == "/docs":
                extra["no online validator badge"] = "validator.swagger.io" not in dom
            results.append(PageResult(page, seconds, rendered, len(ops), missing, list(log.requests), extra))

    control_app = FastAPI(title="FGBDT-Chain API")  # FastAPI's default pages: Swagger UI from a CDN
    control_app.openapi = lambda: openapi  # type: ignore[method-assign]
    control_log = RequestLog(control_app)
    with serving(control_log) as base:
        commands.append(shlex.join(browser_command(chromium, base + "/docs", "PROFILE")))
        dom, seconds = render(chromium, base + "/docs")
        rendered, _ = check_swagger(dom, ops)
    # expected: nothing rendered
    control = PageResult("/docs (FastAPI default, CDN)", seconds, rendered, 0, [], list(control_log.requests))
    return results, control, commands


def report(results: list[PageResult], control: PageResult, commands: list[str], chromium: str) -> str:
    """The Markdown result."""
    versions = asset_versions()
    lines = [
        "# command: python -m bench.docs_offline",
        "",
        f"{chromium_version(chromium)}; " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".",
        "",
        "The API app (`create_app`, its backend pointing at a chain that is not running) served by uvicorn on "
        "127.0.0.1; headless Chromium with every other host unreachable renders each page, and its DOM is checked "
        "for every operation of the OpenAPI document.",
        "",
        "| page | operations rendered | expected | missing | requests to the API (status) | checks | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in [*results, control]:
        reqs = ", ".join(f"{m} {p} ({s})" for m, p, s in r.requests) or "none"
        checks = ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in r.extra.items()) or "-"
        verdict = "OK" if r.ok else "FAILED"
        lines.append(
            f"| {r.page} | {r.rendered} | {r.expected} | {', '.join(r.missing) or '-'} | {reqs} | {checks} | "
            f"{verdict} ({r.seconds:.1f} s) |"
        )
    lines += [
        "",
        "Control: FastAPI's default `/docs` (same OpenAPI document) loads Swagger UI from a CDN; in the same browser "
        "setup its script never arrives and nothing renders, so the browser reached no host but the API, and the "
        "pages above rendered from the API's own assets alone.",
        "",
        "Browser commands, the API's pages then the control (PROFILE: a fresh temporary profile; the proxy port is a "
        "free port nothing listens on):",
        "",
        *[f"    {c}" for c in commands],
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--chromium", default=None, help="Chromium binary (default: chromium or chromium-browser)")
    parser.add_argument("--out", help="results file (default bench/results/docs_offline.json, bench.record)")
    args = parser.parse_args(argv)
    record = Run("docs_offline", parameters_of(args, drop=("chromium",)), args.out, argv=argv)
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("docs_offline: Chromium not found; install it (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    results, control, commands = run(chromium)
    text = report(results, control, commands, chromium)
    print(text)
    ok = all(r.ok for r in [*results, control])
    record.save({"ok": ok, "report": text})
    print("docs_offline:", "OK" if ok else "FAILED", file=sys.stderr)
    return 0 if ok else 1


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run's report."""
    return str(runs[-1]["results"]["report"]).strip()


if __name__ == "__main__":
    sys.exit(main())
