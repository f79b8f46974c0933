"""The dashboard in a real browser: Chromium (the Debian package, ``/usr/bin/chromium``) driven by Playwright against
``fgbdt demo --stay``, the whole system on one machine (devnet, API, party processes).

What is checked is what a consortium looks at: the demo's task watched live to its end, the contributions chart and
the audit's verdict, a prediction upload, and every signed action (create a task, deposit its reward, approve or
refuse a join, start, cancel, withdraw) with a key file picked in the page and with a browser wallet
(``window.ethereum`` backed by anvil's own ``eth_signTypedData_v4`` and ``eth_sendTransaction``, signers independent
of the page's). Each page is screenshotted into ``$DASHBOARD_SCREENSHOTS`` (``make screenshots`` points
it at ``docs/img/dashboard``, which ``docs/dashboard.md`` shows), else into the test's temporary folder.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lightgbm
import numpy as np
import pytest
from api_helpers import refused_level
from eth_account import Account
from eth_account.signers.local import LocalAccount

from fgbdt_chain.api.client import auth_for
from fgbdt_chain.ledger.devnet.anvil import Anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.wrappers.contracts import Membership, Status, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder
from fgbdt_chain.node.privacy.binning import local_sketch, sketch_rng
from fgbdt_chain.node.privacy.psd import build_psd
from fgbdt_chain.node.privacy.publish import encode_join

pytestmark = [pytest.mark.chain, pytest.mark.slow]

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAPTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
WATCH_TIMEOUT_MS = 600_000
ANVIL_DEV_ACCOUNT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
"""anvil's first unlocked development account: the wallet's account."""


class Demo:
    """``fgbdt demo --stay`` in a subprocess: its output read as it comes, the addresses it prints."""

    def __init__(self, workdir: Path) -> None:
        cmd = [sys.executable, "-m", "fgbdt_chain.deploy.cli", "demo", "--parties", "2", "--trees", "2"]
        cmd += ["--depth", "2", "--stay"]
        env = {**os.environ, "COLUMNS": "240", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 900) -> re.Match[str]:
        """The first line matching ``pattern``, once printed."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"the demo printed no {pattern!r}:\n" + "\n".join(self.lines[-40:]))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture(scope="module")
def demo(anvil_node: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The demo, up until the module's tests are done (``anvil_node`` only makes sure anvil is installed)."""
    running = Demo(tmp_path_factory.mktemp("demo"))
    try:
        yield running
    finally:
        # stopped as a user stops it, once it says so: its report printed (a Ctrl-C before is an interrupted demo)
        running.wait_for(r"stay up; Ctrl-C stops them")
        code = running.stop()
        text = "\n".join(running.lines)
        assert code == 0, text[-3000:]
        assert "everything it started is stopped" in text


@pytest.fixture(scope="module")
def dashboard(demo: Demo) -> str:
    """The dashboard's address, as the demo prints it."""
    return demo.wait_for(r"dashboard: (http://\S+?)/?$").group(1)


@pytest.fixture(scope="module")
def rpc(demo: Demo) -> str:
    return demo.wait_for(r"devnet: anvil at (http://\S+)").group(1)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go."""
    where = os.environ.get("DASHBOARD_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system (Playwright's own browser downloads are not used) with a fresh profile."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install the Debian package (apt-get install -y chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="fgbdt-chromium-") as profile:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, viewport=LAPTOP
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A tab whose script errors fail the test."""
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield tab
    finally:
        tab.close()
    assert not errors, errors


def wait_completed(api: str, task_id: int, timeout: float = 900) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        detail = httpx.get(f"{api}/v1/tasks/{task_id}", timeout=30).json()
        if detail["status"] == "completed":
            return dict(detail)
        time.sleep(1)
    raise AssertionError(f"task {task_id} did not complete")


def labelled(page: Any) -> list[str]:
    """Form controls without an accessible name (a label, aria-label or aria-labelledby)."""
    names: list[str] = page.evaluate(
        """() => [...document.querySelectorAll('input, select, button')].filter((el) => !el.hidden &&
            !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')
            && !(el.tagName === 'BUTTON' && el.textContent.trim())).map((el) => el.outerHTML)"""
    )
    return names


CONTRAST = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const linear = (v) => (v / 255 <= 0.03928 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
  const lum = ([r, g, b]) => 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const style = getComputedStyle(el);
    const shown = style.visibility !== "hidden" && el.getClientRects().length;
    if (!own || !shown || el.disabled || el.closest("svg")) continue;
    const [a, b] = [lum(rgb(style.color)), lum(background(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    const text = el.textContent.trim().slice(0, 30);
    if (ratio < (large ? 3 : 4.5)) out.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)} "${text}"`);
  }
  return out;
}"""
"""Text whose contrast with its background is under WCAG AA (4.5:1, 3:1 for large text); disabled controls,
which WCAG exempts, and the charts' SVG text, whose figures are also in tables, are skipped."""


def test_the_demo_task_is_watched_live_to_its_end(page: Any, dashboard: str, shots: Path) -> None:
    """The list shows the demo's task as soon as it exists; its page follows the training (tree, level, phase) from
    the event stream, without a reload, until it reads completed with every tree done and every level timed."""
    page.goto(f"{dashboard}/")
    page.wait_for_selector("table.tasks a[href='#/tasks/1']", timeout=WATCH_TIMEOUT_MS)
    page.screenshot(path=str(shots / "tasks.png"))
    page.click("table.tasks a[href='#/tasks/1']")
    page.wait_for_selector("#task-status")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    seen: set[str] = set()
    end = time.monotonic() + WATCH_TIMEOUT_MS / 1000
    while time.monotonic() < end:
        status = page.text_content("#task-status")
        seen.add(str(status))
        if status == "completed":
            break
        page.wait_for_timeout(300)
    assert page.text_content("#task-status") == "completed", seen
    assert page.evaluate("window.__sameDocument") is True
    assert page.text_content("#trees-done") == " 2 of 2 trees done"
    page.wait_for_selector("table.timeline tbody tr")
    rows = page.locator("table.timeline tbody tr")
    assert rows.count() == 4  # 2 trees x 2 levels
    assert "1.1" in rows.nth(3).text_content()
    assert "P0" in rows.first.text_content() and "P1" in rows.first.text_content()
    assert int(page.text_content("#progress-txs").replace(",", "")) > 0
    assert not labelled(page)
    assert not page.evaluate(CONTRAST)
    page.screenshot(path=str(shots / "task.png"), full_page=True)
    page.goto(f"{dashboard}/#/")
    page.wait_for_selector("table.tasks progress[value='2']")
    assert not page.evaluate(CONTRAST)
    page.reload()
    page.wait_for_selector("table.tasks tbody tr")
    page.keyboard.press("Tab")  # the keyboard's first stop is the skip link, which moves the focus to the content
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main" and page.url.endswith("#/")


def test_the_contributions_chart_and_the_audit(page: Any, dashboard: str, shots: Path) -> None:
    """One stacked bar segment per party and tree, matching the API's per-tree contributions, and the audit run
    from its button reports that replaying the task reproduces the record."""
    wait_completed(dashboard, 1)
    contrib = httpx.get(f"{dashboard}/v1/tasks/1/contributions", timeout=30).json()
    page.goto(f"{dashboard}/#/tasks/1")
    page.wait_for_selector("#sec-contrib svg.stacked rect")
    segments = sum(1 for p in contrib["parties"] for v in p["per_tree"] if int(v) != 0)
    assert page.locator("#sec-contrib svg.stacked rect").count() == segments > 0
    titles = page.locator("#sec-contrib svg.stacked rect title").all_text_contents()
    assert any(t.startswith("tree 1, party 0") for t in titles)
    assert page.locator("#sec-contrib .legend li").count() == len(contrib["parties"]) == 2
    page.focus("#run-audit")  # run from the keyboard
    page.keyboard.press("Enter")
    page.wait_for_selector("#audit-verdict .verdict", timeout=300_000)
    assert "The audit passed" in page.text_content("#audit-verdict")
    page.locator("#sec-contrib").screenshot(path=str(shots / "contributions.png"))
    page.locator("#sec-audit").screenshot(path=str(shots / "audit.png"))
    page.wait_for_selector("#sec-model svg")
    page.locator("#sec-model").screenshot(path=str(shots / "model.png"))
    with page.expect_download() as got:
        page.get_by_role("link", name="Download LightGBM text").click()
    booster = lightgbm.Booster(model_str=Path(got.value.path()).read_text())
    assert booster.num_trees() == 2  # LightGBM reads the file the page offers
    with page.expect_download() as got:
        page.get_by_role("link", name="Download JSON").click()
    assert len(json.loads(Path(got.value.path()).read_text())["trees"]) == 2
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(shots / "task-phone.png"))
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, f"the page is {width} px wide on a {PHONE['width']} px screen"
    page.set_viewport_size(LAPTOP)


def test_a_prediction_upload(page: Any, dashboard: str, shots: Path, tmp_path: Path) -> None:
    """A CSV with a header of the model's features is scored through the API; the page shows the scores and offers
    them as a CSV download, the same numbers the API gives for those rows."""
    wait_completed(dashboard, 1)
    model = httpx.get(f"{dashboard}/v1/tasks/1/model", timeout=30).json()
    names = model["feature_names"]
    rows = [[float((i + j) % 2) for j in range(len(names))] for i in range(5)]
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", *names])
        w.writerows([[0, *r] for r in rows])
    expected = httpx.post(f"{dashboard}/v1/tasks/1/predictions", json={"rows": rows}, timeout=30).json()
    page.goto(f"{dashboard}/#/tasks/1")
    page.wait_for_selector("#predict-file")
    page.set_input_files("#predict-file", str(path))
    page.click("#predict-run")
    page.wait_for_selector("table.scores tbody tr")
    assert page.locator("table.scores tbody tr").count() == 5
    with page.expect_download() as got:
        page.click("#predict-download")
    text = Path(got.value.path()).read_text()
    table = list(csv.DictReader(io.StringIO(text)))
    assert [float(r["probability"]) for r in table] == pytest.approx(expected["probabilities"], abs=1e-12)
    page.locator("#sec-predict").screenshot(path=str(shots / "predictions.png"))


def test_the_timeline_shows_each_refusal_with_its_reason(page: Any, dashboard: str, rpc: str, shots: Path) -> None:
    """A level whose four parties were refused four ways (``api_helpers.refused_level``): the timeline names the
    contract's error for the two whose calls reverted, the verifiers' quorum for the one that declined, and the
    silent one."""
    task = _contract(rpc, dashboard)
    tid, _, _, error = refused_level(task.client, task)
    page.goto(f"{dashboard}/#/tasks/{tid}")
    page.wait_for_selector("table.timeline li.refusal")
    items = page.locator("table.timeline li.refusal").all_text_contents()
    assert len(items) == 4, items
    assert sum("declined (the contract)" in t and f"submitHistograms reverted: {error}" in t for t in items) == 2, items
    assert any("declined (the verifiers)" in t and "2 of the 3 other parties" in t for t in items), items
    assert any("silent" in t and "sent no histograms" in t for t in items), items
    page.locator("#sec-timeline").screenshot(path=str(shots / "refusals.png"))


def _join(rpc: str, dashboard: str, task_id: int, payload: bytes = b"psd") -> LocalAccount:
    """A party that asks to join ``task_id`` through the API, its request signed in Python (``api.client``)."""
    task = _contract(rpc, dashboard)
    party = Account.create()
    auth = auth_for(Forwarder.of(task), task, party, "join", task_id, payload, "http://party.example:9000")
    r = httpx.post(
        f"{dashboard}/v1/tasks/{task_id}/join-requests",
        json={"psd": "0x" + payload.hex(), "endpoint": "http://party.example:9000", "auth": auth},
        timeout=60,
    )
    assert r.status_code == 201, r.text
    return party


def _membership(rpc: str, dashboard: str, task_id: int, party: str) -> Membership:
    return _contract(rpc, dashboard).member(task_id, party)[0]


def _contract(rpc: str, dashboard: str) -> TaskContract:
    client = ChainClient.connect(rpc)
    return TaskContract.at(client, httpx.get(f"{dashboard}/v1/health", timeout=30).json()["contract"])


def _sent_from_the_page(page: Any, dashboard: str) -> list[str]:
    """Every request body the page sends to the API from now on (``_no_key_in``: none holds the key)."""
    bodies: list[str] = []
    page.on("request", lambda r: bodies.append(r.post_data or "") if r.url.startswith(dashboard) else None)
    return bodies


def test_every_signed_action_with_a_key_file(page: Any, dashboard: str, rpc: str, shots: Path, tmp_path: Path) -> None:
    """The key file stays in the page: a task created with a reward deposit (a transaction signed here and
    broadcast by the API), a join approved, more reward deposited from the task's page, the task cancelled and the
    refund withdrawn, each shown in the page (live, from the event stream) and on chain; no request carries the key."""
    requester = Account.create()
    task = _contract(rpc, dashboard)
    task.client.fund(requester.address, 10**18)  # from anvil's unlocked account: the deposit is the requester's ether
    key_file = tmp_path / "requester.key"
    key_file.write_text("0x" + bytes(requester.key).hex() + "\n")
    sent = _sent_from_the_page(page, dashboard)
    page.goto(f"{dashboard}/#/new")
    page.set_input_files("#key-file", str(key_file))
    page.wait_for_selector(f"#signer-address[title='{requester.address}']")
    page.wait_for_selector("#param-trees")
    assert not labelled(page)
    page.fill("#feature-min", "0, 0, 0")
    page.fill("#feature-max", "1, 1, 1")
    page.fill("#param-trees", "0")  # out of range: the API's reason is shown
    page.click("#create-submit")
    page.wait_for_selector(".msg.error")
    assert "trees" in page.text_content(".msg.error") and "422" in page.text_content(".msg.error")
    page.fill("#param-trees", "2")
    page.fill("#param-depth", "2")
    page.fill("#param-min_parties", "1")
    page.fill("#reward", "0.25")
    page.screenshot(path=str(shots / "new-task.png"), full_page=True)
    page.click("#create-submit")
    page.wait_for_url(re.compile(r"#/tasks/\d+$"), timeout=120_000)
    task_id = int(page.url.rsplit("/", 1)[1])
    assert httpx.get(f"{dashboard}/v1/tasks/{task_id}", timeout=30).json()["requester"] == requester.address
    assert task.state(task_id).reward == 25 * 10**16
    page.wait_for_selector("#task-reward:has-text('0.25 ETH')")
    party = _join(rpc, dashboard, task_id)
    approve = page.get_by_role("button", name=f"Approve {party.address}")
    approve.wait_for(timeout=60_000)  # the join arrives by the event stream
    page.locator("#sec-members").screenshot(path=str(shots / "join-request.png"))
    approve.click()
    page.wait_for_selector("#sec-members .badge.approved", timeout=120_000)
    assert _membership(rpc, dashboard, task_id, party.address) == Membership.APPROVED
    page.locator("#sec-members").screenshot(path=str(shots / "approved.png"))
    page.fill("#deposit-amount", "2")  # more than the key holds: the API's reason is shown, nothing is sent
    page.click("#deposit-run")
    page.wait_for_selector(".msg.error:has-text('InsufficientFunds')")
    page.fill("#deposit-amount", "0.05")
    page.click("#deposit-run")
    page.wait_for_selector("#task-reward:has-text('0.3 ETH')", timeout=120_000)
    assert task.state(task_id).reward == 30 * 10**16
    page.evaluate("window.scrollTo(0, 0)")
    actions = page.locator(".actions").bounding_box()
    assert actions is not None
    page.screenshot(
        path=str(shots / "deposit.png"),
        clip={"x": 0, "y": 0, "width": LAPTOP["width"], "height": actions["y"] + actions["height"] + 12},
    )
    page.click("#cancel-task")
    page.wait_for_selector("#task-status:has-text('cancelled')", timeout=120_000)
    before = task.client.balance(requester.address)
    page.click("#withdraw", timeout=60_000)
    page.wait_for_selector("#sec-contrib:has-text('withdrew 0.3 ETH')", timeout=120_000)
    assert task.owed(task_id, requester.address) == 0 and task.client.balance(requester.address) == before + 3 * 10**17
    assert not page.locator("#withdraw").count()
    key = bytes(requester.key).hex()
    assert sent and not any(key in body.lower() for body in sent), "a request carried the key"


WALLET = """
window.ethereum = {
  async request({ method, params }) {
    if (method === "eth_requestAccounts") return [%(account)r];
    const res = await fetch(%(rpc)r, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
    const body = await res.json();
    if (body.error) throw new Error(body.error.message);
    return body.result;
  },
};
"""


def _sketched_payload(features: int, seed: int) -> bytes:
    """A real join payload (PSD and binning sketch) of rows in [0, 1], from which the API merges start's edges."""
    rng = np.random.default_rng(seed)
    X, y = rng.random((400, features)), (rng.random(400) < 0.5).astype(float)
    low, high = np.zeros(features), np.ones(features)
    sketch = local_sketch(X, low, high, resolution=64, epsilon=1.0, rng=sketch_rng(seed, 0))
    psd = build_psd(X, y, np.append(low, 0.0), np.append(high, 1.0), depth=2, rng=rng)
    return encode_join(psd, 1.0, sketch)


def test_every_signed_action_with_a_browser_wallet(browser: Any, dashboard: str, rpc: str) -> None:
    """With ``window.ethereum`` present the page signs through it (``eth_signTypedData_v4``, here anvil's own for
    its unlocked account) and the wallet sends the deposit itself: a task created with a reward, one join refused
    and one approved, and training started with the edges merged from the approved party's sketch."""
    tab = browser.new_page()
    tab.add_init_script(WALLET % {"account": ANVIL_DEV_ACCOUNT.lower(), "rpc": rpc})
    task = _contract(rpc, dashboard)
    try:
        tab.goto(f"{dashboard}/#/new")
        tab.click("#wallet-connect")
        tab.wait_for_selector(f"#signer-address[title='{ANVIL_DEV_ACCOUNT}']")
        tab.wait_for_selector("#param-trees")
        tab.fill("#feature-min", "0")
        tab.fill("#feature-max", "1")
        tab.fill("#param-min_parties", "1")
        tab.fill("#reward", "0.1")
        tab.click("#create-submit")
        tab.wait_for_url(re.compile(r"#/tasks/\d+$"), timeout=120_000)
        task_id = int(tab.url.rsplit("/", 1)[1])
        tab.wait_for_selector("#task-reward:has-text('0.1 ETH')", timeout=120_000)
        assert task.state(task_id).reward == 10**17
        party = _join(rpc, dashboard, task_id)
        refuse = tab.get_by_role("button", name=f"Refuse {party.address}")
        refuse.wait_for(timeout=60_000)
        refuse.click()
        tab.wait_for_selector("#sec-members .badge.refused", timeout=120_000)
        assert _membership(rpc, dashboard, task_id, party.address) == Membership.REFUSED
        member = _join(rpc, dashboard, task_id, _sketched_payload(1, seed=3))
        approve = tab.get_by_role("button", name=f"Approve {member.address}")
        approve.wait_for(timeout=60_000)
        approve.click()
        tab.wait_for_selector("#sec-members .badge.approved", timeout=120_000)
        tab.click("#start-training")
        tab.wait_for_selector("#task-status:has-text('training')", timeout=120_000)
        assert task.state(task_id).status == Status.TRAINING
    finally:
        tab.close()
