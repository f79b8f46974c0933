"""``fgbdt demo``: the whole story on one machine, through the REST API.

Starts a devnet (anvil from npm, or the embedded py-evm chain served over JSON-RPC when anvil is missing), deploys
the contracts, serves the API, and then plays a model requester who uses only the API: it creates an a9a task with a
signed request, deposits the reward, lets four party node processes (each given only its skewed shard) join,
approves them, starts training, follows it, and reads back the model, the contributions and rewards, and the audit
verdict. The test error is printed next to centralized LightGBM and to each party training alone on the same bins.
Everything it started is shut down at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from eth_account import Account
from rich.console import Console
from rich.table import Table

from fgbdt_chain.api.app import settings_app
from fgbdt_chain.api.client import auth_for, create_task_body
from fgbdt_chain.api.service import request_parameters
from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.cmd_simulate import TRAIN_DEPTH, TRAIN_TREES
from fgbdt_chain.deploy.cmd_train import on_chain_progress
from fgbdt_chain.deploy.requester import ETHER, BlockClock, ChainSetup, Requester
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import TaskParameters
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder
from fgbdt_chain.node.data.loaders import load_train_test
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, prepare, run

DATA = Path(__file__).resolve().parent / "data"
EMBEDDED_SHAPE: tuple[int, int] = (2, 3)
"""The demo's trees and depth on the embedded chain (no anvil): the whole demo took 89 s on the project's two cores
under a load of 8 (training 51 s), where fgbdt train's 20 trees of depth 5 took about 18 minutes."""
EMBEDDED_SLOWER = 15
"""How many times longer a task takes on the embedded chain than on anvil: 120 s against 8.2 s for 2 trees of depth
5 on a9a, four parties (``python -m bench.embedded_evm``)."""


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="devnet + API + 4 party nodes on a9a, end to end", description=__doc__)
    p.add_argument("--parties", type=int, default=4)
    p.add_argument("--theta", type=float, default=0.8)
    p.add_argument(
        "--trees",
        type=int,
        default=None,
        help=f"trees (default: fgbdt train's {TRAIN_TREES} on anvil, {EMBEDDED_SHAPE[0]} on the embedded chain)",
    )
    p.add_argument(
        "--depth",
        type=int,
        default=None,
        help=f"split levels per tree (default: fgbdt train's {TRAIN_DEPTH} on anvil, {EMBEDDED_SHAPE[1]} on the "
        "embedded chain)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-port", type=int, default=0, help="port of the API (default: a free one)")
    p.add_argument("--chain", choices=("auto", "anvil", "embedded"), default="auto")
    p.add_argument(
        "--stay",
        action="store_true",
        help="keep the chain, the API and the dashboard up once the task is done, until interrupted (Ctrl-C)",
    )
    p.set_defaults(func=demo)


def chain_kind(kind: str) -> tuple[str, str]:
    """("anvil" or "embedded", why not anvil): anvil when available (or asked for), else the embedded chain."""
    from fgbdt_chain.ledger.devnet.anvil import AnvilNotFound, anvil_binary
    from fgbdt_chain.ledger.devnet.embedded_rpc import missing_requirement

    why_not_anvil = ""
    if kind in ("auto", "anvil"):
        try:
            anvil_binary()
            return "anvil", ""
        except AnvilNotFound as exc:
            if kind == "anvil":
                raise UserError(str(exc)) from exc
            why_not_anvil = str(exc)
    missing = missing_requirement()
    if missing:
        raise UserError(f"no chain to run on: {why_not_anvil or 'anvil not wanted'}; and {missing}")
    return "embedded", why_not_anvil


def demo_shape(args: argparse.Namespace, kind: str) -> tuple[int, int]:
    """(trees, depth): as given, else fgbdt train's on anvil and ``EMBEDDED_SHAPE`` on the embedded chain."""
    trees, depth = (TRAIN_TREES, TRAIN_DEPTH) if kind == "anvil" else EMBEDDED_SHAPE
    return (args.trees if args.trees is not None else trees), (args.depth if args.depth is not None else depth)


@contextlib.contextmanager
def devnet(kind: str, console: Console) -> Iterator[str]:
    """A fresh local chain for the demo: anvil when available, else the embedded chain over JSON-RPC."""
    from fgbdt_chain.ledger.devnet.anvil import start_anvil
    from fgbdt_chain.ledger.devnet.embedded_rpc import start_embedded_chain

    kind, why_not_anvil = chain_kind(kind)
    if kind == "anvil":
        node = start_anvil()
        console.print(f"devnet: anvil at {node.url}")
        try:
            yield node.url
        finally:
            node.stop()
        return
    try:
        chain = start_embedded_chain(process=True)
    except RuntimeError as exc:
        raise UserError(str(exc)) from exc
    notice = f"anvil not found: {why_not_anvil}" if why_not_anvil else "slower than anvil"
    console.print(f"devnet: embedded py-evm chain at {chain.url} ({notice})", soft_wrap=True)
    try:
        yield chain.url
    finally:
        chain.stop()


@contextlib.contextmanager
def api_server(rpc: str, contract: str, forwarder: str, relayer_key: str, port: int) -> Iterator[str]:
    app = settings_app(rpc, contract, forwarder, relayer_key)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise UserError("the API server did not start")
        time.sleep(0.05)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _ok(r: httpx.Response) -> dict[str, Any]:
    if r.status_code >= 400:
        raise UserError(f"API {r.request.method} {r.request.url.path} answered {r.status_code}: {r.text}")
    return dict(r.json())


def task_request(low: Any, high: Any, task: TaskParameters) -> dict[str, Any]:
    """The body the demo's requester posts to ``/v1/tasks``: the schema and the task's parameters in the API's own
    model (``api.service.request_parameters``: no privacy is null there, where ``TaskParameters`` holds inf)."""
    return {
        "task_schema": {"feature_min": [float(v) for v in low], "feature_max": [float(v) for v in high]},
        "parameters": request_parameters(task).model_dump(mode="json"),
    }


def demo(args: argparse.Namespace) -> int:
    console = Console()
    started = time.monotonic()
    kind, _ = chain_kind(args.chain)
    trees, depth = demo_shape(args, kind)
    if kind == "embedded" and (args.trees, args.depth) == (None, None):
        console.print(
            f"no anvil: a smaller task on the embedded chain, {trees} trees of depth {depth}, where anvil runs "
            f"{TRAIN_TREES} of depth {TRAIN_DEPTH} (a task takes about {EMBEDDED_SLOWER} times longer there; "
            "--trees and --depth choose; `npm ci` in a clone brings anvil)",
            soft_wrap=True,
        )
    params = TrainParams(trees=trees, depth=depth)  # every other parameter the table's default
    config = PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed)
    train, test = load_train_test(DATA / "a9a.gz", DATA / "a9a.t.gz", seed=args.seed)
    prep = prepare(train, test, params, config)
    console.print(
        f"data: a9a, {train.n_rows} training rows over {args.parties} parties (theta {args.theta}), "
        f"{test.n_rows} test rows; {trees} trees of depth {depth}, {params.bins} bins"
    )
    work = Path(tempfile.mkdtemp(prefix="fgbdt-demo-"))
    with devnet(kind, console) as rpc:
        client = ChainClient.connect(rpc)
        deployer = client.new_account(10**22)
        task = TaskContract.deploy(client, deployer)
        forwarder_address = task.trusted_forwarder()
        forwarder = Forwarder.at(client, forwarder_address)
        relayer = Account.create()
        client.fund(relayer.address, 10**21)
        requester = Account.create()
        client.fund(requester.address, 10**21)
        console.print(f"contracts: FGBDTChain {task.address}, forwarder {forwarder_address}")
        with api_server(rpc, task.address, forwarder_address, relayer.key.hex(), args.api_port) as api:
            console.print(f"API: {api}/docs")
            console.print(f"dashboard: {api}/", soft_wrap=True)
            http = httpx.Client(base_url=api, timeout=120)
            setup = ChainSetup(rpc=rpc, contract=task.address, requester=requester, workdir=work)
            low, high = prep.ranges
            body = task_request(
                low,
                high,
                params.task(
                    min_parties=args.parties,
                    max_parties=args.parties,
                    step_blocks=setup.step_blocks,
                    endorse=setup.endorse,
                    refusal_rate=setup.refusal_rate,
                    overlap_threshold=setup.overlap_threshold,
                    label_min=prep.label_range[0],
                    label_max=prep.label_range[1],
                ),
            )
            created = _ok(http.post("/v1/tasks", json=create_task_body(forwarder, task, requester, body)))
            tid = int(created["task_id"])
            task.fund(requester, tid, ETHER)
            console.print(f"task {tid} created through the API by requester {requester.address}; 1 ETH deposited")
            req = Requester(prep, setup)  # starts the process the parties are forked from: stopped in the finally
            req.task_id = tid
            try:
                with BlockClock(client, setup.clock_tick):
                    req.launch_parties()
                    payloads = req.wait_for_joins()
                    for acct in req.accounts:
                        auth = auth_for(forwarder, task, requester, "approve", tid, acct.address)
                        _ok(http.post(f"/v1/tasks/{tid}/join-requests/{acct.address}/approve", json={"auth": auth}))
                    edges = req.edges_for(payloads)
                    auth = auth_for(forwarder, task, requester, "start", tid, edges)
                    _ok(http.post(f"/v1/tasks/{tid}/start", json={"bin_edges": "0x" + edges.hex(), "auth": auth}))
                    console.print(f"{args.parties} parties approved and training started through the API")
                    _follow(req, params, console)
                req.wait_parties()
            finally:
                req.stop_parties()
            _results(http, tid, prep, console)
            if args.stay:
                _stay(api, console)
    console.print(f"demo finished in {time.monotonic() - started:.0f} s; everything it started is stopped")
    return 0


def _stay(api: str, console: Console) -> None:
    """Until interrupted (Ctrl-C, or a SIGTERM taken as one): the dashboard stays up to look at the finished task."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    # SIGINT too: a process started in the background of a non-interactive shell (``fgbdt demo &`` in a script,
    # a CI job) inherits SIGINT ignored, and Python then leaves it ignored, so Ctrl-C would not stop the demo
    signal.signal(signal.SIGINT, interrupt)
    console.print(f"the chain, the API and the dashboard ({api}/) stay up; Ctrl-C stops them", soft_wrap=True)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping")


def _follow(req: Requester, params: TrainParams, console: Console) -> None:
    with on_chain_progress(console, params) as progress:
        req.progress = progress
        req.follow()


def _results(http: httpx.Client, tid: int, prep: Any, console: Console) -> None:
    model = Model.from_json_dict(_ok(http.get(f"/v1/tasks/{tid}/model")))
    ours = evaluate(prep.params, prep.test.y, model.predict_proba(prep.test.X))
    central, _, _ = run(prep, "centralized")
    alone, _, _ = run(prep, "standalone")
    table = Table(title="test error on a9a.t (same bins, same parameters)")
    for col in ("model", "test error", "AUC"):
        table.add_column(col, justify="right" if col != "model" else "left")
    table.add_row("FV-tree, trained on chain", f"{ours['test_error']:.4f}", f"{ours['test_auc']:.4f}")
    table.add_row("centralized LightGBM (all rows)", f"{central['test_error']:.4f}", f"{central['test_auc']:.4f}")
    for pp in alone["per_party"]:
        table.add_row(
            f"party {pp['party']} alone ({pp['rows']} rows)",
            f"{pp['standalone_test_error']:.4f}",
            f"{pp['standalone_test_auc']:.4f}",
        )
    console.print(table)
    contrib = _ok(http.get(f"/v1/tasks/{tid}/contributions"))
    ct = Table(title="contributions and rewards (from the chain, via the API)")
    for col in ("party", "address", "contribution", "share", "reward (ETH)"):
        ct.add_column(col, justify="right")
    for i, p in enumerate(contrib["parties"]):
        ct.add_row(
            str(i),
            p["party"][:10] + "...",
            f"{ref.from_fixed(int(p['total'])):.3f}",
            f"{p['share']:.3f}",
            f"{int(p['reward_assigned_wei']) / ETHER:.6f}",
        )
    console.print(ct)
    audit = _ok(http.get(f"/v1/tasks/{tid}/audit"))
    verdict = "OK" if audit["ok"] else f"MISMATCH: {audit['first_mismatch']}"
    console.print(
        f"audit of task {tid} (replayed from the chain with the Python reference): {verdict}"
        + (f" ({audit['summary']})" if audit.get("summary") else "")
    )
