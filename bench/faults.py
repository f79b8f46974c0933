"""Faults played against one on-chain task, each timed to its recovery, with what the audit says afterwards.

    python -m bench.faults                                  # a9a, 4 parties, 3 trees of depth 3, blocks every 1 s
    python -m bench.faults --faults party-cut-off --cut-seconds 60

Each fault runs its own task on a fresh anvil mining a block every ``--block-time`` seconds (as a network mines), the
parties separate processes (``fgbdt node``, forked as ``fgbdt train`` forks them), the requester this process:

- ``party-killed``: a party's process killed (SIGKILL) once the task reaches the fault's level, and started again at
  once from its key and rows: it reads where the task is from the chain;
- ``party-cut-off``: every connection of a party (to the chain, and the others' to its endpoint) held for
  ``--cut-seconds``, as a partition does to TCP streams, through a proxy in this process; the step deadline
  (``--step-blocks`` blocks) outlasts it, so the party stays in the task;
- ``rpc-restarted``: the chain's node stopped (it writes its state) and started again ``--down-seconds`` later on the
  same port;
- ``requester-restarted``: the requester stops after approving half of the parties, and a new one takes the task up
  ``--down-seconds`` later from the chain and its working folder (``Requester.resume``);
- ``party-lost``: a party killed and never started again: the others go on without it once the step's deadline
  passes (the contract excludes a party that missed a step), and the lost party's share of the reward goes back to
  the requester.

Recorded per fault: how long it lasted, the stall (the longest the task stood still from the fault on: no level
started, nor training), the recovery (from the fault's end until the task next moved), the task's training time (from
its start to its completion) against a run without a fault, whether the task completed, the audit's verdict, whether
the model is ``simulate``'s (where every party took part to the end), who was excluded, and whether every wei of the
deposit is owed to someone and withdrawn.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from bench.datasets import load, objective
from bench.record import Run, parameters_of
from fgbdt_chain.deploy.party_forks import Party
from fgbdt_chain.deploy.requester import BlockClock, ChainSetup, Requester
from fgbdt_chain.deploy.tcp_proxies import HoldingProxies
from fgbdt_chain.ledger.audit.replay import audit_events, read_task
from fgbdt_chain.ledger.devnet.anvil import Anvil, free_port, start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskContract
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare, run

FAULTS = ("none", "party-killed", "party-cut-off", "rpc-restarted", "requester-restarted", "party-lost")
"""The faults a run plays, ``none`` the run without a fault the others' wall times are compared with."""


@dataclass(frozen=True)
class FaultPlan:
    """Which fault, whom it strikes, when and for how long."""

    fault: str
    party: int = 1
    """The party struck (by launch order, its party index)."""
    tree: int = 1
    level: int = 1
    """The fault strikes once the task reaches this tree and level (the requester's faults: during the joins)."""
    seconds: float = 5.0
    """How long it lasts: a cut-off, the chain's or the requester's time down."""

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; choose one of {', '.join(FAULTS)}")
        if self.seconds < 0:
            raise ValueError(f"a fault lasts a non-negative number of seconds, got {self.seconds}")


@dataclass(frozen=True)
class ChainPlan:
    """The chain the task runs on: anvil mining every ``block_time`` seconds (None: a block per transaction, with the
    requester's block clock), and the task's step deadline in blocks."""

    block_time: float | None = 1.0
    step_blocks: int = 120
    timeout_seconds: float = 900.0


class Progress:
    """Watches the task from its own connection: when each change of (status, tree, level) was seen (monotonic
    seconds), every 50 ms; a chain that does not answer is looked at again."""

    def __init__(self, url: str, contract: str, task_id: int) -> None:
        self.task = TaskContract.at(ChainClient.connect(url), contract)
        self.task_id = task_id
        self.changes: list[tuple[float, tuple[int, int, int]]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fault-progress", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        last: tuple[int, int, int] | None = None
        while not self.stop_event.wait(0.05):
            try:
                st = self.task.state(self.task_id)
            except Exception:  # the chain restarting: looked at again
                continue
            now = (int(st.status), st.tree, st.level)
            if now != last:
                self.changes.append((time.monotonic(), now))
                last = now

    def current(self) -> tuple[int, int, int] | None:
        return self.changes[-1][1] if self.changes else None

    def wait_for(self, tree: int, level: int, timeout: float) -> None:
        """Until the task trains at (``tree``, ``level``) or later."""
        end = time.monotonic() + timeout
        while True:
            now = self.current()
            if now is not None and now[0] == int(Status.TRAINING) and now[1:] >= (tree, level):
                return
            if now is not None and now[0] in (int(Status.COMPLETED), int(Status.CANCELLED)):
                raise RuntimeError(f"the task ended before tree {tree} level {level} was seen: give it more trees")
            if time.monotonic() > end:
                raise TimeoutError(f"the task did not reach tree {tree} level {level} within {timeout:.0f} s")
            time.sleep(0.02)

    def longest_stall(self, since: float) -> float:
        """The longest the task stood still from ``since`` (monotonic) on: between two changes, or from ``since`` to
        the first after it."""
        times = [since, *(t for t, _ in self.changes if t > since)]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def training_seconds(self) -> float | None:
        """From the first look that saw the task training to the first that saw it completed."""
        started = next((t for t, (status, _, _) in self.changes if status == int(Status.TRAINING)), None)
        ended = next((t for t, (status, _, _) in self.changes if status == int(Status.COMPLETED)), None)
        return None if started is None or ended is None else ended - started

    def next_change(self, after: float) -> float | None:
        """When the task was first seen to move after ``after`` (monotonic), None if it did not."""
        return next((t for t, _ in self.changes if t > after), None)

    def close(self) -> None:
        self.stop_event.set()
        self.thread.join(5)


class FaultyRequester(Requester):
    """The requester of ``deploy.requester`` whose struck party, for a cut-off, reaches the chain and is reached
    through a holding proxy."""

    def __init__(self, *args: Any, proxy: HoldingProxies | None = None, struck: int = -1, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.proxy, self.struck = proxy, struck

    def spawn(self, args: list[str], log_path: Path) -> Party:
        if self.proxy is not None and int(args[args.index("--party-index") + 1]) == self.struck:
            args = list(args)
            rpc_port = int(self.setup.rpc.rsplit(":", 1)[1])
            args[args.index("--rpc") + 1] = f"http://127.0.0.1:{self._proxied(rpc_port)}"
            listen = free_port()
            args[args.index("--listen") + 1] = f"127.0.0.1:{listen}"
            args += ["--public-url", f"http://127.0.0.1:{self._proxied(listen)}"]
        return super().spawn(args, log_path)

    def _proxied(self, target_port: int) -> int:
        """A proxy on a free loopback port to ``127.0.0.1:target_port``; its port."""
        assert self.proxy is not None
        port = free_port()
        self.proxy.add(("127.0.0.1", port), ("127.0.0.1", target_port))
        return port


def play(prep: Prepared, plan: FaultPlan, chain: ChainPlan, workdir: Path, sim_model: Model | None) -> dict[str, Any]:
    """One task on a fresh anvil with ``plan``'s fault: its timings and outcome (module docstring)."""
    workdir.mkdir(parents=True, exist_ok=True)
    state = workdir / "anvil-state.json"
    anvil = start_anvil(state=state, block_time=chain.block_time)
    port = anvil.port
    proxy = HoldingProxies() if plan.fault == "party-cut-off" else None
    req: Requester | None = None
    first: Requester | None = None
    progress: Progress | None = None
    fault: dict[str, float] = {}
    try:
        client = ChainClient.connect(anvil.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        requester = Account.create()
        client.fund(requester.address, 10**21)
        setup = ChainSetup(
            rpc=anvil.url,
            contract=contract,
            requester=requester,
            workdir=workdir / "work",
            block_time=chain.block_time,
            step_blocks=chain.step_blocks,
            timeout_seconds=chain.timeout_seconds,
        )
        req = first = FaultyRequester(prep, setup, proxy=proxy, struck=plan.party)
        started = time.monotonic()
        req.open_task()
        progress = Progress(anvil.url, contract, req.task_id)
        clock = BlockClock(req.client, setup.clock_tick).__enter__()
        try:
            req.launch_parties()
            if plan.fault == "requester-restarted":
                req, clock = _restart_requester(req, clock, plan, setup, fault)
            else:
                req.approve_and_start()
                progress.wait_for(plan.tree, plan.level, chain.timeout_seconds)
                anvil = _strike(req, plan, anvil, port, state, chain, proxy, fault)
            req.follow()
            codes = first.wait_parties(timeout=120)
        finally:
            clock.__exit__(None, None, None)
            first.stop_parties()
        wall = time.monotonic() - started
        progress.close()
        client = ChainClient.connect(anvil.url)
        task = TaskContract.at(client, contract)
        report = req.report(wall)
        audit = audit_events(read_task(client, contract, req.task_id))
        chain_model = model_from_chain(task, req.task_id)
        moved = progress.next_change(fault["end"]) if fault else None
        row: dict[str, Any] = {
            "fault": plan.fault,
            "party": plan.party,
            "at": [plan.tree, plan.level] if plan.fault != "requester-restarted" else "joining",
            "fault_seconds": fault["end"] - fault["start"] if fault and plan.fault != "party-lost" else None,
            "stall_seconds": progress.longest_stall(fault["start"]) if fault else None,
            "recovery_seconds": None if moved is None else moved - fault["end"],
            "wall_seconds": wall,
            "training_seconds": progress.training_seconds(),
            "exit_codes": codes,
            "completed": task.state(req.task_id).status == Status.COMPLETED,
            "audit_ok": audit.ok,
            "audit_completed": audit.completed,
            "audit_mismatch": None if audit.ok else str(audit.first_mismatch),
            "model_equals_simulate": sim_model is not None
            and chain_model.edges == sim_model.edges
            and chain_model.trees == sim_model.trees,
            "trees_equal_simulate": _leading_equal(chain_model, sim_model),
            "excluded": [c["party"] for c in report["contributions"] if not c["finished"]],
            "test_error": report.get("test_error"),
            "tx_count": report["tx_count"],
            **_withdraw_all(task, req.task_id, [*first.accounts, setup.requester], setup.reward_wei),
        }
        return row
    finally:
        if progress is not None:
            progress.close()
        if proxy is not None:
            proxy.close()
        anvil.stop()


def _strike(
    req: Requester,
    plan: FaultPlan,
    anvil: Anvil,
    port: int,
    state: Path,
    chain: ChainPlan,
    proxy: HoldingProxies | None,
    fault: dict[str, float],
) -> Anvil:
    """Play a training-time fault now; the chain's node, started again where the fault restarts it."""
    if plan.fault == "none":
        return anvil
    fault["start"] = time.monotonic()
    if plan.fault == "party-killed":
        req.procs[plan.party].send_signal(signal.SIGKILL)
        req.procs[plan.party].wait()
        req.restart_party(plan.party)
    elif plan.fault == "party-lost":
        req.procs[plan.party].send_signal(signal.SIGKILL)
        req.procs[plan.party].wait()
        req.procs[plan.party] = _Lost()  # type: ignore[call-overload]
        fault["end"] = fault["start"]  # for good: the recovery is the others' going on without it
    elif plan.fault == "party-cut-off":
        assert proxy is not None
        proxy.hold()
        time.sleep(plan.seconds)
        proxy.release()
    elif plan.fault == "rpc-restarted":
        anvil.stop()  # it writes its state
        time.sleep(plan.seconds)
        anvil = start_anvil(port=port, state=state, block_time=chain.block_time)
    fault.setdefault("end", time.monotonic())
    return anvil


def _restart_requester(
    req: Requester, clock: BlockClock, plan: FaultPlan, setup: ChainSetup, fault: dict[str, float]
) -> tuple[Requester, BlockClock]:
    """Approve half of the parties, stop the requester (its clock too; the parties run on), and after
    ``plan.seconds`` take the task up with a new requester that knows only the chain and the working folder."""
    half = len(req.accounts) // 2
    approved: list[str] = []

    def approve_half(party: str) -> None:
        if len(approved) < half:
            req.task.approve(setup.requester, req.task_id, party)
            approved.append(party)

    req.wait_for_joins(on_join=approve_half)
    fault["start"] = time.monotonic()
    clock.__exit__(None, None, None)
    time.sleep(plan.seconds)
    again = Requester(req.prep, setup, forks=req.forks)
    fault["end"] = time.monotonic()
    again.resume(req.task_id)
    return again, BlockClock(again.client, setup.clock_tick).__enter__()


class _Lost:
    """A party process killed and not started again, as the requester sees a party on another host: not known to
    have ended while the task runs (a party's exit is no reason to stop it), its exit code afterwards (SIGKILL's)."""

    returncode = -int(signal.SIGKILL)

    def poll(self) -> None:
        return None

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        pass

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass


def _leading_equal(chain: Model, sim: Model | None) -> int:
    """How many trees from the first the chain's model shares with the simulator's (its edges equal)."""
    if sim is None or chain.edges != sim.edges:
        return 0
    n = 0
    for a, b in zip(chain.trees, sim.trees, strict=False):
        if a != b:
            break
        n += 1
    return n


def _withdraw_all(task: TaskContract, task_id: int, accounts: list[LocalAccount], deposit: int) -> dict[str, Any]:
    """What the task owes each account, whether it adds up to the deposit, and every owed amount withdrawn."""
    owed = [task.owed(task_id, a.address) for a in accounts]
    withdrawn = 0
    for account, amount in zip(accounts, owed, strict=True):
        if amount > 0:
            task.client.fund(account.address, 10**17)  # a lost party's key may hold no gas money any more
            task.withdraw(account, task_id)
            withdrawn += amount - task.owed(task_id, account.address)
    return {
        "owed_wei": [str(o) for o in owed],
        "deposit_owed": sum(owed) == deposit,
        "withdrawn_all": withdrawn == deposit,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--parties", type=int, default=4)
    ap.add_argument("--theta", type=float, default=0.8)
    ap.add_argument("--trees", type=int, default=3)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block-time", type=float, default=1.0, help="seconds between blocks (0: a block per transaction)")
    ap.add_argument("--step-blocks", type=int, default=120, help="blocks a step stays open (outlasting the cut-off)")
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated, of: " + ", ".join(FAULTS))
    ap.add_argument("--party", type=int, default=1, help="the party struck")
    ap.add_argument("--tree", type=int, default=1, help="the tree at which a training-time fault strikes")
    ap.add_argument("--level", type=int, default=1, help="the level at which it strikes")
    ap.add_argument("--cut-seconds", type=float, default=60.0)
    ap.add_argument("--down-seconds", type=float, default=5.0, help="the chain's and the requester's time down")
    ap.add_argument("--workdir", help="keep each fault's logs and keys under this folder (default: a temporary one)")
    ap.add_argument("--out", help="results file (default bench/results/faults.json, bench.record)")
    args = ap.parse_args()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    for f in faults:
        FaultPlan(f)  # an unknown name is refused before anything runs
    record = Run("faults", parameters_of(args, drop=("workdir",)), args.out)
    train, test = load(args.data, args.seed)
    params = TrainParams(
        trees=args.trees,
        depth=args.depth,
        bins=args.bins,
        objective=objective(args.data),  # type: ignore[arg-type]
    )
    prep = prepare(train, test, params, PrepConfig(parties=args.parties, theta=args.theta, seed=args.seed))
    _, sim_model, _ = run(prep, "fvtree")
    chain = ChainPlan(block_time=args.block_time or None, step_blocks=args.step_blocks)
    rows: list[dict[str, Any]] = []
    for f in faults:
        seconds = args.cut_seconds if f == "party-cut-off" else args.down_seconds
        plan = FaultPlan(f, party=args.party, tree=args.tree, level=args.level, seconds=seconds)
        if args.workdir:
            rows.append(play(prep, plan, chain, Path(args.workdir) / f, sim_model))
        else:
            with tempfile.TemporaryDirectory(prefix=f"fgbdt-bench-{f}-") as tmp:
                rows.append(play(prep, plan, chain, Path(tmp), sim_model))
        record.save({"faults": rows}, complete=False)
        print(row_text(rows[-1]), flush=True)
    record.save({"faults": rows})
    print(tables([{"parameters": record.parameters, "results": {"faults": rows}}]))
    return 0


def _s(value: float | None, missing: str = "-") -> str:
    return missing if value is None else f"{value:.1f}"


def row_text(row: dict[str, Any]) -> str:
    return (
        f"{row['fault']}: {_s(row['fault_seconds'])} s down, stalled {_s(row['stall_seconds'])} s, recovered "
        f"{_s(row['recovery_seconds'])} s after; {row['wall_seconds']:.0f} s wall; completed {row['completed']}, "
        f"audit {'OK' if row['audit_ok'] else row['audit_mismatch']}, simulate's model {row['model_equals_simulate']}, "
        f"excluded {row['excluded']}, deposit withdrawn {row['withdrawn_all']}"
    )


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of the recorded runs: per fault, how long it lasted, the stall and the recovery, the task's training
    time (from the start to the completion as the chain showed them) and what the fault added to the run without one,
    and what the audit and the model say."""
    lines = [
        "| setting | fault | down s | stall s | recovery s | training s | extra s | completed | audit "
        "| simulate's model | excluded | deposit withdrawn |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        p = r["parameters"]
        name = (
            f"{p['data']} M={p['parties']}, {p['trees']} trees depth {p['depth']}, blocks every {p['block_time']:g} s"
        )
        rows = r["results"]["faults"]
        base = next((x["training_seconds"] for x in rows if x["fault"] == "none"), None)
        for x in rows:
            took = x["training_seconds"]
            extra = "-" if base is None or took is None or x["fault"] == "none" else f"{took - base:+.0f}"
            done = "yes" if x["completed"] else "no"
            down = "for good" if x["fault"] == "party-lost" else "-"
            lines.append(
                f"| {name} | {x['fault']} | {_s(x['fault_seconds'], down)} | {_s(x['stall_seconds'])} "
                f"| {_s(x['recovery_seconds'])} | {_s(took)} | {extra} | {done} "
                f"| {'OK' if x['audit_ok'] else 'mismatch'} | {'equal' if x['model_equals_simulate'] else 'differs'} "
                f"| {', '.join(map(str, x['excluded'])) or 'none'} | {'yes' if x['withdrawn_all'] else 'no'} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
