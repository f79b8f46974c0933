"""The dashboard at scale: time to first render and browser memory with 1,000 tasks and a task of 500 trees.

A fresh anvil with the contracts; ``--tasks`` tasks created directly on the contract, and one task of ``--trees``
trees (depth 2, two parties of 50 rows) trained through the contract by the in-process federation driver
(``bench.trained_task``, synthetic rows: the chain records what real parties would send). The API
(with the dashboard) is served by uvicorn; headless Chromium (``/usr/bin/chromium``, driven by Playwright) opens:

* the task list's first page, a page in the middle and the last page (20 tasks a page), and a page of 100;
* the 500-tree task's page, until its contributions chart (one stacked bar a tree), its timeline window and its
  model (the importance chart and the first tree drawn) are on screen.

Each is measured from the navigation's start to the element's appearance (``performance.now()`` in the page, after
a fresh load) with the page's JavaScript heap and DOM node count from the Chrome DevTools protocol
(``Performance.getMetrics``: ``JSHeapUsedSize``, ``Nodes``), and the API's answer time of each read the page makes.

    python -m bench.dashboard [--tasks 1000] [--trees 500]   # bench/results/dashboard.json (bench.record)
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from bench.record import Run, parameters_of
from bench.trained_task import FEATURES, trained_task
from fgbdt_chain.api.app import create_app
from fgbdt_chain.api.service import Backend, Settings
from fgbdt_chain.ledger.devnet.anvil import start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def serve(backend: Backend) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(create_app(backend), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _every_50_trees(tree: int, seconds: float) -> None:
    if tree % 50 == 0:
        print(f"  tree {tree} ({seconds:.0f} s)", flush=True)


def measure(page: Any, cdp: Any, url: str, selector: str, timeout: float = 600_000) -> dict[str, Any]:
    """Milliseconds from the navigation's start to ``selector``'s appearance, then the heap and DOM size."""
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector(selector, timeout=timeout)
    first = page.evaluate("performance.now()")
    page.wait_for_load_state("networkidle")
    settled = page.evaluate("performance.now()")
    cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {
        "url": url.split("/", 3)[-1],
        "first_render_ms": round(first),
        "settled_ms": round(settled),
        "js_heap_mb": round(metrics["JSHeapUsedSize"] / 2**20, 1),
        "dom_nodes": int(metrics["Nodes"]),
    }


def api_times(api: str, paths: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for path in paths:
        start = time.perf_counter()
        r = httpx.get(api + path, timeout=600)
        r.raise_for_status()
        out[path] = round(1000 * (time.perf_counter() - start))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--out", help="results file (default bench/results/dashboard.json, bench.record)")
    args = ap.parse_args()
    record = Run("dashboard", parameters_of(args, drop=("chromium",)), args.out)
    from playwright.sync_api import sync_playwright

    node = start_anvil()
    try:
        client = ChainClient.connect(node.url)
        task = TaskContract.deploy(client, client.new_account(10**22))
        relayer = client.new_account(10**21)
        started = time.monotonic()
        big = trained_task(client, task, args.trees, depth=2, rows=50, progress=_every_50_trees)
        train_s = time.monotonic() - started
        print(f"task {big}: {args.trees} trees trained in {train_s:.0f} s", flush=True)
        requester = client.new_account(10**22)
        cfg = TaskConfig(trees=10, depth=3, min_parties=2, max_parties=4)
        started = time.monotonic()
        while task.task_count() < args.tasks:
            task.create_task(requester, cfg, [0] * FEATURES, [ONE] * FEATURES)
        print(f"{args.tasks} tasks on chain ({time.monotonic() - started:.0f} s to create)", flush=True)
        backend = Backend(Settings(node.url, task.address, relayer_key="0x" + bytes(relayer.key).hex()))
        with serve(backend) as api, sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=args.chromium, args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 860}
            )
            page = ctx.new_page()
            cdp = ctx.new_cdp_session(page)
            cdp.send("Performance.enable")
            pages = max(1, -(-args.tasks // 20))
            rows = "table.tasks tbody tr"
            results = {
                "list_first_page": measure(page, cdp, f"{api}/#/", rows),
                "list_middle_page": measure(page, cdp, f"{api}/#/?page={pages // 2}&size=20", rows),
                "list_last_page": measure(page, cdp, f"{api}/#/?page={pages}&size=20", rows),
                "list_page_of_100": measure(page, cdp, f"{api}/#/?page=1&size=100", rows),
                "task_500_trees_chart": measure(page, cdp, f"{api}/#/tasks/{big}", "#sec-contrib svg.stacked rect"),
                "task_500_trees_timeline": measure(page, cdp, f"{api}/#/tasks/{big}", "table.timeline tbody tr"),
                "task_500_trees_model": measure(page, cdp, f"{api}/#/tasks/{big}", "#sec-model figure.tree svg"),
            }
            page.goto(f"{api}/#/tasks/{big}")
            page.wait_for_selector("#sec-model figure.tree svg", timeout=600_000)
            page.fill("#tree-pick", str(args.trees - 1))
            page.press("#tree-pick", "Enter")
            page.wait_for_selector(f"figure.tree svg[aria-label^='tree {args.trees - 1}:']")
            ctx.close()
            reads = api_times(
                api,
                [
                    "/v1/tasks?offset=0&limit=20",
                    f"/v1/tasks/{big}",
                    f"/v1/tasks/{big}/contributions",
                    f"/v1/tasks/{big}/timeline?from_tree={max(0, args.trees - 5)}&trees=5",
                    f"/v1/tasks/{big}/model",
                ],
            )
        out = {"train_seconds": round(train_s), "pages": results, "api_ms": reads}
        record.save(out)  # the command, commit, machine and load with it (bench.provenance)
        print(tables([{"parameters": record.parameters, "results": out}]))
    finally:
        node.stop()


def tables(runs: list[dict[str, Any]]) -> str:
    """The last recorded run: each page's time to first render and to settle, heap and DOM size; the API's reads."""
    p, r = runs[-1]["parameters"], runs[-1]["results"]
    lines = [
        f"{p['tasks']:,} tasks on chain, one of {p['trees']} trees (trained through the contract in "
        f"{r['train_seconds']} s).",
        "",
        "| page | first render ms | settled ms | JS heap MB | DOM nodes |",
        "|---|---|---|---|---|",
        *(
            f"| {name.replace('_', ' ')} | {m.get('first_render_ms', '-')} | {m.get('settled_ms', '-')} "
            f"| {m.get('js_heap_mb', '-')} | {m.get('dom_nodes', '-')} |"
            for name, m in r["pages"].items()
        ),
        "",
        "| API read | ms |",
        "|---|---|",
        *(f"| `{path}` | {ms} |" for path, ms in r["api_ms"].items()),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
