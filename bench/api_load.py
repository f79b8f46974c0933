"""The REST API under load: latency, throughput and errors per endpoint with many clients at once, signed writes
from many accounts (nonce races included) checked on chain afterwards, and many open event streams.

A fresh anvil on 127.0.0.1 with the contracts, one task completed through the contract (``--trees`` trees of depth
``--depth`` between two parties, ``ledger.wrappers.federation.run_level`` with synthetic rows) and one task left
open; the API served by ``fgbdt serve`` as its own process (its limits set by its flags); the load from this
process. Three phases, each bounded by ``--seconds`` and by ``--max-requests``:

* ``reads``: ``--clients`` readers, each reading in a loop (after ``--think`` seconds) one of: the completed task
  (``GET /v1/tasks/{id}``), the open task, the completed task's contributions and model, and predictions of 20 rows;
* ``writes``: the readers again, with ``--writers`` requesters that each create a task, have ``--parties`` accounts
  join it, approve them and cancel it, over and over, and ``--conflicts`` pairs of requests signed with the same
  forwarder nonce and sent at once. Every write is an EIP-712 ``ForwardRequest`` signed by its own account (none
  holds ether: the API's relayer pays), its nonce kept by the client as a wallet keeps it;
* ``streams``: ``--streams`` event streams held open (half of them every task's, ``GET /v1/events``, half the open
  task's), replaying from the phase's first block, while the readers read and one requester writes; then ten
  streams more than the server allows, each of which must be refused with 429.

Afterwards the chain is read: every accepted write's event must exist exactly once, in the transaction the API
answered with; every account's forwarder nonce must equal its accepted writes (no refused request used one, none was
used twice); of each conflicting pair exactly one must have landed; every stream of every task must have delivered
each task created during its phase exactly once.

Why an asyncio client (httpx, one connection per client) and not locust: the load mixes signed writes (the project's
own signing, ``ledger.wrappers.forwarder``), streams held open for a whole phase and a check of the chain afterwards,
which one asyncio process does with the project's code; every latency is kept exactly (locust reports percentiles
from rounded buckets) and the concurrency is the number of client tasks, which bounds it; locust would add gevent,
whose monkey-patched sockets the chain client (pycurl) does not go through.

    python -m bench.api_load [--clients 200] [--think 0] [--seconds 20]   # bench/results/api_load.json
    python -m bench.api_load --base REV --think 0     # the reads on the server of REV and on this code's
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from eth_account import Account
from eth_account.signers.local import LocalAccount

from bench.record import Run, parameters_of
from bench.trained_task import FEATURES, trained_task
from bench.worktree import ROOT, checkout, short_commit
from fgbdt_chain.api import models as m
from fgbdt_chain.api.service import create_call_args
from fgbdt_chain.ledger.devnet.anvil import Anvil, free_port, start_anvil, stop_process
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder, ForwardRequest, calldata, sign_request

HOST = "127.0.0.1"
READS = ("task", "task_open", "contributions", "model", "predictions")
"""The read endpoints, as named in the results."""
CREATE_PARAMETERS = {"trees": 2, "depth": 2, "bins": 4, "min_parties": 2, "max_parties": 8, "join_blocks": 10**6}
"""The writers' tasks: open for joining as long as the run lasts (every write mines a block)."""


# ------------------------------------------------------------------------------------------------ the devnet


@dataclass
class Devnet:
    """The chain, the contracts, the relayer's key file and the two tasks the readers read."""

    node: Anvil
    client: ChainClient
    task: TaskContract
    forwarder: Forwarder
    deployment: Path
    relayer_key: Path
    trained: int
    open_task: int


def devnet(folder: Path, trees: int, depth: int) -> Devnet:
    node = start_anvil()
    client = ChainClient.connect(node.url)
    task = TaskContract.deploy(client, client.new_account(10**22))
    relayer = client.new_account(10**23)
    trained = trained_task(client, task, trees, depth)
    open_task, _ = task.create_task(client.new_account(10**21), TaskConfig(), [0] * FEATURES, [ONE] * FEATURES)
    deployment = folder / "deployment.json"
    deployment.write_text(json.dumps({"rpc_url": node.url, "contracts": {"FGBDTChain": task.address}}))
    key = folder / "relayer.key"
    key.write_text("0x" + bytes(relayer.key).hex())
    return Devnet(node, client, task, Forwarder.of(task), deployment, key, trained, open_task)


def serve(net: Devnet, port: int, flags: list[str], log: Path, tree: Path = ROOT) -> subprocess.Popen[bytes]:
    """``fgbdt serve`` of the checkout ``tree`` as its own process, up when ``/v1/health`` answers (started in
    ``tree``, whose ``fgbdt_chain`` comes first on the import path: ``bench.worktree``)."""
    cmd = [sys.executable, "-m", "fgbdt_chain.deploy.cli", "serve", "--deployment", str(net.deployment)]
    cmd += ["--relayer-key", str(net.relayer_key), "--host", HOST, "--port", str(port), "--log-level", "warning"]
    out = open(log, "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen([*cmd, *flags], stdout=out, stderr=subprocess.STDOUT, cwd=tree)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://{HOST}:{port}/v1/health", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            raise RuntimeError(f"fgbdt serve did not come up; its log: {log}")
        time.sleep(0.2)


# ------------------------------------------------------------------------------------------------ measuring


@dataclass
class Phase:
    """What one phase measured: every answer's latency and status, per endpoint."""

    name: str
    deadline: float
    budget: int
    warmup: float = 0.0
    """Seconds at the start whose requests count in the statuses but not in the latencies (``--warmup``)."""
    started: float = field(default_factory=time.monotonic)
    ended: float = 0.0
    sent: int = 0
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    status: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    warm: list[float] = field(default_factory=list)

    def more(self) -> bool:
        """Whether a client may send another request (the phase's time and count bounds)."""
        if time.monotonic() >= self.deadline or self.sent >= self.budget:
            return False
        self.sent += 1
        return True

    async def timed(self, endpoint: str, send: Awaitable[httpx.Response]) -> httpx.Response | None:
        start = time.perf_counter()
        warming = time.monotonic() < self.started + self.warmup
        try:
            r = await send
        except httpx.TimeoutException:
            self.status[endpoint]["timeout"] += 1
            return None
        except httpx.TransportError as exc:
            self.status[endpoint][type(exc).__name__] += 1
            return None
        (self.warm if warming else self.latency[endpoint]).append(time.perf_counter() - start)
        self.status[endpoint][str(r.status_code)] += 1
        return r

    def summary(self) -> dict[str, Any]:
        seconds = (self.ended or time.monotonic()) - self.started
        out: dict[str, Any] = {"seconds": round(seconds, 2), "endpoints": {}}
        if self.warmup:
            top = round(1000 * max(self.warm), 1) if self.warm else None
            out["warmup"] = {"seconds": self.warmup, "requests": len(self.warm), "max_ms": top}
        for name in sorted(set(self.latency) | set(self.status)):
            ms = np.array(self.latency[name]) * 1000
            statuses = dict(sorted(self.status[name].items()))
            out["endpoints"][name] = {
                "requests": int(sum(statuses.values())),
                "per_second": round(sum(statuses.values()) / seconds, 1),
                **{f"p{q}_ms": round(float(np.percentile(ms, q)), 1) if len(ms) else None for q in (50, 95, 99)},
                "max_ms": round(float(ms.max()), 1) if len(ms) else None,
                "status": statuses,
                "errors_5xx": sum(n for s, n in statuses.items() if s.startswith("5")),
                "transport_errors": sum(n for s, n in statuses.items() if not s.isdigit()),
            }
        return out


@dataclass
class Write:
    """A write the API accepted: who signed it with which nonce, what it did and the transaction it names."""

    kind: str
    signer: str
    nonce: int
    task_id: int
    party: str | None
    tx_hash: str


@dataclass
class Ledger:
    """Every write the API accepted and every signer's count of them, to hold against the chain afterwards."""

    accepted: list[Write] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    signers: set[str] = field(default_factory=set)


class Wallet:
    """An account that signs requests with the nonce it keeps itself, as a wallet does."""

    def __init__(self, account: LocalAccount) -> None:
        self.account = account
        self.nonce = 0

    @property
    def address(self) -> str:
        return str(self.account.address)


@dataclass
class Target:
    """What the load signs for and reads: the contract, its forwarder and the tasks."""

    base: str
    task: TaskContract
    forwarder: Forwarder
    chain_id: int
    trained: int
    open_task: int

    def auth(self, wallet: Wallet, function: str, *args: Any, nonce: int | None = None) -> dict[str, Any]:
        """``auth`` of ``function(args)`` signed by ``wallet`` (its own nonce unless ``nonce``)."""
        req = ForwardRequest(
            sender=wallet.address,
            to=self.task.address,
            value=0,
            gas=3_000_000,
            nonce=wallet.nonce if nonce is None else nonce,
            deadline=int(time.time()) + 600,
            data=calldata(self.task, function, *args),
        )
        sig = sign_request(wallet.account.key, req, self.chain_id, self.forwarder.address)
        return {"signer": req.sender, "nonce": req.nonce, "deadline": req.deadline, "gas": req.gas,
                "signature": "0x" + sig.hex()}  # fmt: skip

    def create_body(self, wallet: Wallet, salt: int, nonce: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "task_schema": {"feature_min": [0.0] * FEATURES, "feature_max": [1.0 + salt] * FEATURES},
            "parameters": CREATE_PARAMETERS,
        }
        args = create_call_args(m.CreateTaskRequest.model_validate(body))
        return {**body, "auth": self.auth(wallet, "createTask", *args, nonce=nonce)}


TLS = ssl.create_default_context()
"""One TLS context for every client: httpx builds one per client otherwise (tens of milliseconds each, with the
certificates loaded), which held this process's event loop for seconds while 200 clients started."""


def client(timeout: float = 60.0) -> httpx.AsyncClient:
    """One client's connection (its own pool of one: many clients, many connections, as many users would)."""
    # an idle connection is dropped by the client well before uvicorn closes it (5 s from its answer, which reaches a
    # busy client late): a request sent on a connection the server is closing fails with no answer
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=2.0)
    return httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False, verify=TLS)


ROWS = [[round((i * 0.37 + j * 0.11) % 1, 3) for j in range(FEATURES)] for i in range(20)]


async def reader(target: Target, phase: Phase, think: float, seed: int) -> None:
    rng = random.Random(seed)
    base, t, o = target.base, target.trained, target.open_task
    requests: dict[str, Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]] = {
        "task": lambda c: c.get(f"{base}/v1/tasks/{t}"),
        "task_open": lambda c: c.get(f"{base}/v1/tasks/{o}"),
        "contributions": lambda c: c.get(f"{base}/v1/tasks/{t}/contributions"),
        "model": lambda c: c.get(f"{base}/v1/tasks/{t}/model"),
        "predictions": lambda c: c.post(f"{base}/v1/tasks/{t}/predictions", json={"rows": ROWS}),
    }
    async with client() as http:
        await asyncio.sleep(rng.random() * max(think, 0.05))  # clients do not start in lockstep
        while phase.more():
            name = rng.choice(READS)
            await phase.timed(name, requests[name](http))
            if think:
                await asyncio.sleep(rng.expovariate(1 / think))


async def write(
    http: httpx.AsyncClient, target: Target, phase: Phase, ledger: Ledger, endpoint: str, url: str,
    body: dict[str, Any], wallet: Wallet, kind: str, party: str | None = None,
) -> int | None:  # fmt: skip
    """Send one signed write; the task id it acted on when accepted (the wallet's nonce moves on), else None."""
    ledger.signers.add(wallet.address)
    r = await phase.timed(endpoint, http.post(url, json=body))
    if r is None or r.status_code >= 300:
        ledger.refused[f"{endpoint} {r.status_code if r is not None else 'no answer'}"] += 1
        if r is not None and r.status_code == 409:
            answer = await http.get(f"{target.base}/v1/nonces/{wallet.address}")
            wallet.nonce = int(answer.json()["nonce"])
        return None
    out = r.json()
    ledger.accepted.append(Write(kind, wallet.address, body["auth"]["nonce"], out["task_id"], party, out["tx_hash"]))
    wallet.nonce += 1
    return int(out["task_id"])


async def requester(target: Target, phase: Phase, ledger: Ledger, parties: int, salt: int, once: bool) -> None:
    """Create a task, have ``parties`` accounts join it, approve them and cancel it; again until the phase ends."""
    base = target.base
    owner = Wallet(Account.create())
    members = [Wallet(Account.create()) for _ in range(parties)]
    async with client() as http:
        while phase.more():
            salt += 1
            body = target.create_body(owner, salt)
            tid = await write(http, target, phase, ledger, "create_task", f"{base}/v1/tasks", body, owner, "create")
            if tid is None:
                continue
            for w in members:  # one after the other: a party's join, as it would come
                if not phase.more():
                    return
                psd = "0x" + bytes([salt % 256]).hex() * 8
                auth = target.auth(w, "join", tid, bytes.fromhex(psd[2:]), "http://party.example")
                url = f"{base}/v1/tasks/{tid}/join-requests"
                body = {"psd": psd, "endpoint": "http://party.example", "auth": auth}
                await write(http, target, phase, ledger, "join", url, body, w, "join", w.address)
            for w in members:
                if not phase.more():
                    return
                url = f"{base}/v1/tasks/{tid}/join-requests/{w.address}/approve"
                body = {"auth": target.auth(owner, "approve", tid, w.address)}
                await write(http, target, phase, ledger, "approve", url, body, owner, "approve", w.address)
            if not phase.more():
                return
            body = {"auth": target.auth(owner, "cancel", tid)}
            await write(http, target, phase, ledger, "cancel", f"{base}/v1/tasks/{tid}/cancel", body, owner, "cancel")
            if once:
                return


async def conflict(target: Target, phase: Phase, ledger: Ledger, salt: int) -> None:
    """Two different requests signed by one account with the same nonce, sent at once: one must land, the other be
    refused with the reason."""
    wallet = Wallet(Account.create())
    ledger.signers.add(wallet.address)
    bodies = [target.create_body(wallet, salt, nonce=0), target.create_body(wallet, salt + 1, nonce=0)]
    async with client() as a, client() as b:
        answers = await asyncio.gather(
            *(phase.timed("create_task_same_nonce", c.post(f"{target.base}/v1/tasks", json=body))
              for c, body in ((a, bodies[0]), (b, bodies[1])))
        )  # fmt: skip
    statuses = [r.status_code if r is not None else None for r in answers]
    losers = [r.json() for r in answers if r is not None and r.status_code >= 300]
    for r in answers:
        if r is not None and r.status_code == 201:
            out = r.json()
            ledger.accepted.append(Write("create", wallet.address, 0, out["task_id"], None, out["tx_hash"]))
    ledger.conflicts.append({"signer": wallet.address, "statuses": statuses, "refused": losers})


async def stream(url: str, phase: Phase, until: float, seen: list[Any]) -> None:
    """Hold one event stream open until ``until``, keeping each ``task`` event's task id and event name."""
    async with client(timeout=30.0) as http:
        start = time.perf_counter()
        try:
            async with http.stream("GET", url) as r:
                phase.status["stream_open"][str(r.status_code)] += 1
                if r.status_code != 200:
                    return
                phase.latency["stream_open"].append(time.perf_counter() - start)
                kind = None
                async for line in _lines_until(r, until):
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: ") and kind == "task":
                        data = json.loads(line[6:])
                        seen.append((data["task_id"], data["event"], data["block"]))
        except httpx.TransportError as exc:
            phase.status["stream_open"][type(exc).__name__] += 1


async def _lines_until(r: httpx.Response, until: float) -> Any:
    lines = r.aiter_lines()
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        try:
            yield await asyncio.wait_for(anext(lines), left)
        except (TimeoutError, StopAsyncIteration):
            return


# ------------------------------------------------------------------------------------------------ the phases


async def read_phase(target: Target, args: argparse.Namespace) -> Phase:
    phase = Phase("reads", time.monotonic() + args.seconds, args.max_requests, args.warmup)
    await asyncio.gather(*(reader(target, phase, args.think, i) for i in range(args.clients)))
    phase.ended = time.monotonic()
    return phase


async def write_phase(target: Target, args: argparse.Namespace, ledger: Ledger) -> Phase:
    phase = Phase("writes", time.monotonic() + args.seconds, args.max_requests, args.warmup)
    readers = [reader(target, phase, args.think, 1000 + i) for i in range(args.clients)]
    writers = [requester(target, phase, ledger, args.parties, 10_000 * i, False) for i in range(args.writers)]

    async def conflicts() -> None:
        for i in range(args.conflicts):
            await asyncio.sleep(args.seconds / (args.conflicts + 1))
            await conflict(target, phase, ledger, 1_000_000 + 10 * i)

    await asyncio.gather(*readers, *writers, conflicts())
    phase.ended = time.monotonic()
    return phase


async def stream_phase(target: Target, args: argparse.Namespace, ledger: Ledger, block: int) -> tuple[Phase, Any]:
    phase = Phase("streams", time.monotonic() + args.seconds, args.max_requests, args.warmup)
    until = phase.deadline + 3  # a poll or two after the last write: its event reaches every stream
    every = f"{target.base}/v1/events?from_block={block}&poll=1&timeout=600"
    one = f"{target.base}/v1/tasks/{target.open_task}/events?from_block={block}&poll=1&timeout=600"
    seen: list[list[Any]] = [[] for _ in range(args.streams)]
    streams = [
        asyncio.create_task(stream(every if i % 2 == 0 else one, phase, until, seen[i])) for i in range(args.streams)
    ]
    await asyncio.sleep(2)  # every stream open before the extra ones ask
    extra = Phase("streams_beyond_limit", until, 10**9)
    extra_seen: list[Any] = []
    await asyncio.gather(*(stream(every, extra, time.monotonic() + 2, extra_seen) for _ in range(10)))
    readers = [reader(target, phase, args.think, 2000 + i) for i in range(args.clients)]
    writers = [requester(target, phase, ledger, 1, 20_000_000, False)]
    await asyncio.gather(*readers, *writers)
    phase.ended = time.monotonic()
    await asyncio.gather(*streams)
    created = sorted({w.task_id for w in ledger.accepted if w.kind == "create"})
    every_seen = [seen[i] for i in range(0, args.streams, 2)]
    return phase, {"every": every_seen, "extra": extra.summary(), "created": created}


# ------------------------------------------------------------------------------------------------ the chain


def check_chain(net: Devnet, ledger: Ledger) -> dict[str, Any]:
    """Hold every accepted write against the chain (module docstring)."""
    task, fw = net.task, net.forwarder
    names = ["TaskCreated", "JoinRequested", "PartyApproved", "TaskCancelled"]
    events = net.client.logs(task.contract, names, None, from_block=0)
    found: Counter[tuple[str, int, str | None]] = Counter()
    tx_of: dict[tuple[str, int, str | None], set[str]] = defaultdict(set)
    signers = {s.lower() for s in ledger.signers}
    for ev in events:
        tid = int(ev.args["taskId"])
        key: tuple[str, int, str | None]
        if ev.name == "TaskCreated":
            if str(ev.args["requester"]).lower() not in signers:
                continue
            key = ("create", tid, None)
        elif ev.name == "JoinRequested":
            key = ("join", tid, str(ev.args["party"]))
        elif ev.name == "PartyApproved":
            key = ("approve", tid, str(ev.args["party"]))
        else:
            key = ("cancel", tid, None)
        found[key] += 1
        tx_of[key].add(ev.tx_hash.removeprefix("0x").lower())
    expected: Counter[tuple[str, int, str | None]] = Counter()
    lost = wrong_tx = 0
    for w in ledger.accepted:
        key = (w.kind, w.task_id, w.party)
        expected[key] += 1
        if found[key] == 0:
            lost += 1
        elif w.tx_hash.removeprefix("0x").lower() not in tx_of[key]:
            wrong_tx += 1
    ours = {k for k in found if k[0] == "create" or any(k[1] == w.task_id for w in ledger.accepted)}
    duplicated = sum(1 for k in ours if found[k] > 1 or (expected[k] == 1 and found[k] > 1))
    unaccounted = sum(found[k] for k in ours if expected[k] == 0)
    per_signer = Counter(w.signer for w in ledger.accepted)
    nonce_mismatch = [s for s in ledger.signers if fw.nonce(s) != per_signer[s]]
    pairs = ledger.conflicts
    one_won = sum(1 for c in pairs if sorted(s or 0 for s in c["statuses"])[0] == 201 and len(c["refused"]) == 1)
    loser_status = Counter(str(s) for c in pairs for s in c["statuses"] if s != 201)  # the refused halves of the pairs
    return {
        "accepted_writes": len(ledger.accepted),
        "accepted_by_kind": dict(Counter(w.kind for w in ledger.accepted)),
        "refused_writes": dict(sorted(ledger.refused.items())),
        "signers": len(ledger.signers),
        "lost": lost,
        "in_another_transaction": wrong_tx,
        "duplicated": duplicated,
        "on_chain_without_acceptance": unaccounted,
        "nonce_mismatches": len(nonce_mismatch),
        "conflict_pairs": len(pairs),
        "conflict_one_landed": one_won,
        "conflict_refused_status": dict(loser_status),
        "conflict_refusals": [c["refused"][0] for c in pairs[:3] if c["refused"]],
    }


def check_streams(seen: dict[str, Any]) -> dict[str, Any]:
    """Whether every stream of every task delivered each task created during its phase, once."""
    created = set(seen["created"])
    complete = duplicated = 0
    for events in seen["every"]:
        ids = [tid for tid, name, _ in events if name == "TaskCreated"]
        duplicated += len(ids) != len(set(ids))
        complete += created <= set(ids)
    return {
        "streams_of_every_task": len(seen["every"]),
        "delivered_every_created_task": complete,
        "with_duplicates": duplicated,
        "beyond_limit": seen["extra"]["endpoints"].get("stream_open", {}).get("status", {}),
    }


# ------------------------------------------------------------------------------------------------ the run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=200, help="concurrent readers (default 200)")
    ap.add_argument("--think", type=float, default=0.0, help="mean pause between a reader's requests, seconds")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each phase (default 20)")
    ap.add_argument("--max-requests", type=int, default=200_000, help="most requests of a phase")
    ap.add_argument(
        "--warmup", type=float, default=2.0, help="first seconds of a phase left out of the latencies (default 2)"
    )
    ap.add_argument("--writers", type=int, default=20, help="concurrent requesters writing (default 20)")
    ap.add_argument("--parties", type=int, default=3, help="accounts joining each writer's task (default 3)")
    ap.add_argument("--conflicts", type=int, default=20, help="pairs of requests with one nonce (default 20)")
    ap.add_argument("--streams", type=int, default=200, help="event streams held open (default 200)")
    ap.add_argument("--trees", type=int, default=5, help="trees of the completed task (default 5)")
    ap.add_argument("--depth", type=int, default=3, help="its depth (default 3)")
    ap.add_argument("--serve", default="", help="more flags for fgbdt serve, one string")
    ap.add_argument("--phases", default="reads,writes,streams", help="which phases to run")
    ap.add_argument(
        "--base",
        help="a commit whose server is measured too, its reads phase and this code's interleaved --rounds times "
        "on one chain (the other phases are not run)",
    )
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the comparison with --base (default 2)")
    ap.add_argument("--out", help="results file (default bench/results/api_load.json, bench.record)")
    args = ap.parse_args(argv)
    record = Run("api_load", parameters_of(args), args.out, argv)
    with tempfile.TemporaryDirectory(prefix="fgbdt-api-load-") as tmp:
        folder = Path(tmp)
        started = time.monotonic()
        net = devnet(folder, args.trees, args.depth)
        setup_s = time.monotonic() - started
        # every client here is 127.0.0.1: one address holds all the streams, so its limit is the total's
        flags = ["--max-streams", str(args.streams), "--max-streams-per-client", str(args.streams)]
        try:
            if args.base:
                results = compare(net, args, [*flags, *args.serve.split()], folder)
            else:
                port = free_port()
                server = serve(net, port, [*flags, *args.serve.split()], folder / "serve.log")
                try:
                    target = Target(
                        f"http://{HOST}:{port}",
                        net.task,
                        net.forwarder,
                        net.client.chain_id,
                        net.trained,
                        net.open_task,
                    )
                    results = asyncio.run(run(net, target, args, server.pid))
                finally:
                    stop_process(server)
        finally:
            log = (folder / "serve.log").read_text(errors="replace")
            net.node.stop()
    results["setup_seconds"] = round(setup_s, 1)
    results["server_log_errors"] = sum("Traceback" in line or "ERROR" in line for line in log.splitlines())
    record.save(results)
    print(tables([{"parameters": record.parameters, "results": results}]))
    return 0


def compare(net: Devnet, args: argparse.Namespace, flags: list[str], folder: Path) -> dict[str, Any]:
    """The reads phase on the server of ``--base`` and on this code's, interleaved ``--rounds`` times on one chain
    (the machine's speed drifts within minutes here: ``bench.worktree``)."""
    base = short_commit(args.base)
    phases: dict[str, Any] = {}
    with checkout(args.base) as tree:
        for round_ in range(1, args.rounds + 1):
            for label, where, its_flags in ((f"base {base}", tree, []), ("this code", ROOT, flags)):
                port = free_port()
                server = serve(net, port, its_flags, folder / "serve.log", where)
                try:
                    target = Target(
                        f"http://{HOST}:{port}",
                        net.task,
                        net.forwarder,
                        net.client.chain_id,
                        net.trained,
                        net.open_task,
                    )
                    meter = Meter({"server": server.pid, "anvil": net.node.process.pid, "load": os.getpid()})
                    phase = asyncio.run(read_phase(target, args))
                    out = phase.summary()
                    phases[f"reads {round_}, {label}"] = {
                        **out,
                        **meter.summary(sum(e["requests"] for e in out["endpoints"].values())),
                    }
                    print(f"reads {round_}, {label} done", flush=True)
                finally:
                    stop_process(server)
    return {"base": base, "phases": phases}


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """The cores each process used during a phase, and the machine's load around it: on two cores shared with other
    work, a latency is only read with how much of the machine the server had."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.load = os.getloadavg()[0]
        self.began = time.monotonic()

    def summary(self, requests: int) -> dict[str, Any]:
        seconds = time.monotonic() - self.began
        used = {name: cpu_seconds(pid) - self.start[name] for name, pid in self.pids.items()}
        return {
            "cores_used": {name: round(u / seconds, 2) for name, u in used.items()},
            "server_cpu_ms_per_request": round(1000 * used["server"] / requests, 2) if requests else None,
            "load_average": [round(self.load, 2), round(os.getloadavg()[0], 2)],
        }


async def run(net: Devnet, target: Target, args: argparse.Namespace, server: int) -> dict[str, Any]:
    ledger = Ledger()
    phases: dict[str, Any] = {}
    streams: dict[str, Any] | None = None
    wanted = args.phases.split(",")
    pids = {"server": server, "anvil": net.node.process.pid, "load": os.getpid()}

    def measured(phase: Phase, meter: Meter) -> dict[str, Any]:
        out = phase.summary()
        return {**out, **meter.summary(sum(e["requests"] for e in out["endpoints"].values()))}

    if "reads" in wanted:
        meter = Meter(pids)
        phases["reads"] = measured(await read_phase(target, args), meter)
        print("reads done", flush=True)
    if "writes" in wanted:
        meter = Meter(pids)
        phases["writes"] = measured(await write_phase(target, args, ledger), meter)
        print("writes done", flush=True)
    if "streams" in wanted:
        block = net.client.block_number + 1
        mark = len(ledger.accepted)
        meter = Meter(pids)
        phase, seen = await stream_phase(target, args, ledger, block)
        seen["created"] = sorted({w.task_id for w in ledger.accepted[mark:] if w.kind == "create"})
        phases["streams"] = measured(phase, meter)
        streams = check_streams(seen)
        print("streams done", flush=True)
    out: dict[str, Any] = {"phases": phases, "chain": check_chain(net, ledger)}
    if streams is not None:
        out["streams"] = streams
    return out


def tables(runs: list[dict[str, Any]]) -> str:
    """Each run of a setting: per phase and endpoint, requests per second, p50/p95/p99 and the statuses; the cores
    each process used; the chain's and streams' checks. Runs are shown one by one, not averaged: the machine's load,
    which they record, moves their tails more than anything else."""
    p, r = runs[-1]["parameters"], runs[-1]["results"]
    who = (
        f"the reads phase on the server of commit `{r['base']}` and on this code's, interleaved {p['rounds']} times "
        "on one chain"
        if "base" in r
        else f"{p['writers']} writers of {p['parties']} parties each, {p['conflicts']} same-nonce pairs, "
        f"{p['streams']} event streams"
    )
    lines = [
        f"{p['clients']} readers (pause {p['think']} s between requests); {who}; {p['seconds']:g} s a phase, whose "
        f"first {p.get('warmup', 0):g} s (every client connecting, the first reads of each kind) count in the statuses "
        "and not in the latencies.",
    ]
    for i, run in enumerate(runs, 1):
        if len(runs) > 1:
            date = run.get("provenance", {}).get("date", "?").replace("T", " ").replace("Z", " UTC")
            lines += ["", f"Run {i} of {len(runs)} ({date}):"]
        lines += run_tables(run["results"])
    return "\n".join(lines)


def run_tables(r: dict[str, Any]) -> list[str]:
    """One run's tables and checks (``tables``)."""
    lines = [
        "",
        "| phase | endpoint | requests | per s | p50 ms | p95 ms | p99 ms | max ms | statuses |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for phase, data in r["phases"].items():
        for name, e in data["endpoints"].items():
            statuses = ", ".join(f"{k}: {v}" for k, v in e["status"].items())
            lines.append(
                f"| {phase} | {name} | {e['requests']} | {e['per_second']} | {e['p50_ms']} | {e['p95_ms']} "
                f"| {e['p99_ms']} | {e['max_ms']} | {statuses} |"
            )
    lines += [
        "",
        "| phase | seconds | cores used: server, anvil, load generator | server CPU ms a request | load average "
        "| warm-up requests, slowest ms |",
        "|---|---|---|---|---|---|",
    ]
    for phase, data in r["phases"].items():
        if "cores_used" in data:
            cores = ", ".join(str(v) for v in data["cores_used"].values())
            load = " to ".join(str(v) for v in data["load_average"])
            warm = data.get("warmup", {})
            lines.append(
                f"| {phase} | {data['seconds']} | {cores} | {data['server_cpu_ms_per_request']} | {load} "
                f"| {warm.get('requests', '-')}, {warm.get('max_ms', '-')} |"
            )
    if "chain" not in r:  # a comparison with --base: reads only
        return lines
    c = r["chain"]
    lines += [
        "",
        f"On chain afterwards: {c['accepted_writes']} accepted writes from {c['signers']} accounts; lost "
        f"{c['lost']}, in another transaction {c['in_another_transaction']}, duplicated {c['duplicated']}, on chain "
        f"without acceptance {c['on_chain_without_acceptance']}, forwarder nonces not equal to the accepted writes "
        f"{c['nonce_mismatches']}. Same-nonce pairs: {c['conflict_one_landed']} of {c['conflict_pairs']} with "
        f"exactly one landed; the others answered {c['conflict_refused_status']}.",
    ]
    if "streams" in r:
        s = r["streams"]
        lines += [
            "",
            f"Streams: {s['delivered_every_created_task']} of {s['streams_of_every_task']} streams of every task "
            f"delivered every task created during the phase ({s['with_duplicates']} with a duplicate); ten streams "
            f"beyond the limit answered {s['beyond_limit']}.",
        ]
    return lines


if __name__ == "__main__":
    sys.exit(main())
