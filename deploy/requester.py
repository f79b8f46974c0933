"""The model requester's side of an on-chain task, and the local launcher of its parties.

``fgbdt train`` (and the demo) act as the requester: open the task with its schema and reward, start one party node
process per shard (each process is given only its own rows), approve them in party order, fix the common bin edges
from the sketches the parties published when joining, start training, and follow it to the end. The requester never
sees a party's rows here either: it writes the shards only because it plays every party on one machine.

On a local devnet nothing mines blocks while every party waits, so a block clock mines an empty block every
``tick`` seconds: deadlines then pass in wall time, as on a real chain, and one silent party cannot stall the rest.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from eth_account import Account
from eth_account.signers.local import LocalAccount

from fgbdt_chain.deploy.deployment import ETHER as ETHER
from fgbdt_chain.deploy.deployment import read_key, write_key
from fgbdt_chain.deploy.party_forks import Party, PartyForks, PartyForksError, fork_available, start_party
from fgbdt_chain.ledger.rpc.client import ChainClient, Event
from fgbdt_chain.ledger.rpc.heads import NewHeads
from fgbdt_chain.ledger.rpc.usage import ChainUsage
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import encode_edges
from fgbdt_chain.ledger.spec.parameters import default
from fgbdt_chain.ledger.spec.train_params import task_voted_trees
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import Membership, Sent, Status, TaskConfig, TaskContract
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels.frozen_heap import frozen_heap
from fgbdt_chain.node.privacy.binning import edges_from_sketch, snap_integer_edges
from fgbdt_chain.node.privacy.publish import decode_join
from fgbdt_chain.node.sim.experiment import Prepared, evaluate

Progress = Callable[[dict[str, Any]], None]

END_EVENTS = ("TaskCompleted", "TaskCancelled")
"""What ends a task: the follower wakes at a block that may hold one, instead of at its next poll (up to
``FOLLOW_POLL_SECONDS`` late, 0.1 s on average, at the end of every run)."""

JOIN_POLL_SECONDS = 0.01
"""How often the requester looks for the parties' joins: every party's start waits for the last approval."""

FOLLOW_POLL_SECONDS = 0.2
"""How often the follower reads the task's state for its progress reports (and where no subscription is up, for
the end)."""

TASK_RECORD = "task.json"
"""The working folder's record of the task its requester opened (``TaskRecord``): what a restarted requester
(``fgbdt train --resume``) needs besides the chain and the party keys beside it."""

REQUESTER_KEY = "requester.key"
"""Where ``fgbdt train`` keeps the fresh key it made for the requester (none given): the task's deposit and
approvals are that key's, so a restarted requester must sign with it again."""


class ResumeError(RuntimeError):
    """A working folder whose task cannot be taken up here: none recorded, on another chain, or finished."""


@dataclass(frozen=True)
class TaskRecord:
    """Which task a working folder's requester opened, and where: written as soon as the task exists, before any
    party starts, so that a requester killed at any later point can be started again on it."""

    task: int
    contract: str
    chain_id: int
    requester: str
    start_block: int

    def write(self, workdir: Path) -> None:
        tmp = workdir / (TASK_RECORD + ".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")
        tmp.replace(workdir / TASK_RECORD)  # whole or absent: a kill while writing leaves no half a record

    @classmethod
    def read(cls, workdir: Path) -> TaskRecord:
        path = workdir / TASK_RECORD
        if not path.is_file():
            raise ResumeError(
                f"no task to resume in {workdir}: {TASK_RECORD} is missing (the working folder of an `fgbdt train` "
                "that opened a task holds it)"
            )
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise ResumeError(f"{path} is not a task record: {exc}") from exc


@dataclass
class ChainSetup:
    """Where and how the task runs on chain."""

    rpc: str
    contract: str
    requester: LocalAccount
    workdir: Path
    algo: str = "fvtree"
    """What the parties run: ``fvtree`` (votes for ``voted_trees`` trees, then drawn candidates) or ``drawn``."""
    reward_wei: int = ETHER
    step_blocks: int = default("step_blocks")
    tick_seconds: float = 0.25
    block_time: float | None = None
    """The chain's block interval when it mines on a clock (``fgbdt devnet up --block-time``); None: a block per
    transaction."""
    endorse: ref.EndorseRuleName = default("endorse")  # noqa: RUF009 (a str)
    refusal_rate: float = default("refusal_rate")
    overlap_threshold: float = default("overlap_threshold")
    greedy: int | None = None
    attack: Attack | None = None
    party_fund_wei: int = 10**20
    funder: LocalAccount | None = None
    """The key that funds the parties (``fgbdt train --funder-key``); None: the node's first unlocked account, as a
    devnet has."""
    timeout_seconds: float = 3600.0
    node_args: list[str] = field(default_factory=list)

    @property
    def clock_tick(self) -> float:
        """How long the requester's block clock waits for a block before mining an empty one: ``tick_seconds``, and
        under interval mining at least two block intervals, so that the chain's own blocks set the pace."""
        return self.tick_seconds if self.block_time is None else max(self.tick_seconds, 2 * self.block_time)


def write_shard(path: Path, data: Dataset) -> None:
    """A party's rows: an ``.npz`` archive (``X``, ``y``, ``feature_names``) where ``path`` ends so, else CSV, label
    first, values in shortest round-trip form (exact), missing values empty. Both load as the same data set
    (``node.data.loaders``); the requester writes the archive, which a party reads in milliseconds where the CSV of
    10,000 a9a rows took it 0.12 s (four parties starting at once on two cores: 0.25 s before the first could join)."""
    if path.suffix.lower() == ".npz":
        with open(path, "wb") as f:  # np.savez given a name would add ".npz" to one without it
            np.savez(f, X=data.X, y=data.y, feature_names=np.array(data.feature_names, dtype=str))
        return
    # Each distinct value (by its bits: -0.0 stays "-0.0") is formatted once, then looked up for every cell: the
    # per-cell repr took 5 s per bench run (four a9a shards) before any party could start.
    table = np.column_stack([np.asarray(data.y, dtype=np.float64), np.asarray(data.X, dtype=np.float64)])
    bits, inverse = np.unique(np.ascontiguousarray(table).view(np.uint64), return_inverse=True)
    text = np.array(["" if np.isnan(v) else repr(float(v)) for v in bits.view(np.float64)], dtype=object)
    cells = text[inverse.reshape(table.shape)]
    with open(path, "w") as f:
        f.write(",".join(["label", *data.feature_names]) + "\n")
        f.writelines(",".join(row) + "\n" for row in cells.tolist())


def task_config(prep: Prepared, setup: ChainSetup) -> TaskConfig:
    """The task parameters as the contract takes them (fixed point where real): the simulator's, the join window
    ``ledger.spec.parameters``'s."""
    m = prep.config.parties
    params = dataclasses.replace(prep.params, voted_trees=task_voted_trees(setup.algo, prep.params))
    return params.task(
        endorse=setup.endorse,
        quorum_num=prep.config.quorum_num,
        quorum_den=prep.config.quorum_den,
        min_parties=m,
        max_parties=m,
        step_blocks=setup.step_blocks,
        refusal_rate=setup.refusal_rate,
        overlap_threshold=setup.overlap_threshold,
        epsilon=prep.config.epsilon,
        delta=prep.config.dp_delta,
        label_min=prep.label_range[0],
        label_max=prep.label_range[1],
    ).config()


class BlockClock:
    """Mines an empty block when no block arrived for ``tick`` seconds, so that deadlines pass while everybody
    waits. Only then: anvil's cost per block grows with the chain's length (measured: 7 ms per empty block at
    block 500, 18 ms at 2,000), and while parties transact their transactions' blocks keep the clock going. On a
    chain that mines on its own clock (a network: no method mines on request) it stops at once."""

    def __init__(self, client: ChainClient, tick: float) -> None:
        self.client, self.tick = client, tick
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="block-clock", daemon=True)

    def _run(self) -> None:
        last = -1
        try:
            if not self.client.can_mine():
                return
        except Exception:  # the chain may be restarting: the clock tries as it goes
            pass
        while not self.stop_event.wait(self.tick):
            try:
                now = self.client.block_number
                if now == last:
                    self.client.mine(1)
                    now += 1
                last = now
            except Exception:  # the chain may be restarting; the clock just tries again
                continue

    def __enter__(self) -> BlockClock:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)


class Requester:
    """One task from creation to payout, with its party processes."""

    def __init__(
        self,
        prep: Prepared,
        setup: ChainSetup,
        progress: Progress | None = None,
        forks: PartyForks | None = None,
        *,
        launches: bool = True,
    ) -> None:
        """``launches``: this requester starts the party processes (a fork server is started for them unless
        ``forks`` is given); a resumed requester (``resume_task``) does not, the parties run on without it."""
        self.prep, self.setup = prep, setup
        self.progress = progress or (lambda info: None)
        self.client = ChainClient.connect(setup.rpc)
        self.client.funder = setup.funder
        self.task = TaskContract.at(self.client, setup.contract)
        self.task_id = -1
        self.accounts: list[LocalAccount] = []
        self.procs: list[Party] = []
        self.commands: list[list[str]] = []
        """Each party's ``fgbdt`` arguments, kept to restart it."""
        setup.workdir.mkdir(parents=True, exist_ok=True)
        if forks is None and launches and fork_available():
            forks = PartyForks(setup.workdir / "fork-server.log")
        self.forks = forks
        """Where the parties are forked from: the caller's, started earlier, or started now so that it loads a node
        while the task is opened; closed with the parties."""
        self.start_block = 0
        self.usage = ChainUsage(0)
        self.log_paths: list[Path] = []

    # ------------------------------------------------------------------ set-up

    def open_task(self) -> int:
        low, high = self.prep.ranges
        cfg = task_config(self.prep, self.setup)
        self.start_block = self.client.block_number
        self.usage = ChainUsage(self.start_block)
        self.task_id, _ = self.task.create_task(
            self.setup.requester,
            cfg,
            [ref.to_fixed(float(v)) for v in low],
            [ref.to_fixed(float(v)) for v in high],
            reward=self.setup.reward_wei,
        )
        TaskRecord(
            self.task_id, self.task.address, self.client.chain_id, self.setup.requester.address, self.start_block
        ).write(self.setup.workdir)
        return self.task_id

    def launch_parties(self) -> None:
        """One node process per party, each given only its shard and its key: every shard is written and every
        account funded first, while the fork server is still loading."""
        c = self.prep.config
        work = self.setup.workdir  # made when the requester was (the fork server's log is there)
        for i, idx in enumerate(self.prep.parts):
            acct = Account.create()
            self.client.fund(acct.address, self.setup.party_fund_wei)
            self.accounts.append(acct)
            key_path = work / f"party-{i}.key"
            write_key(key_path, acct)
            shard = work / f"party-{i}.npz"
            write_shard(shard, self.prep.train.subset(idx))
            cmd = [
                "node",
                "--rpc",
                self.setup.rpc,
                "--task",
                str(self.task_id),
                "--key",
                str(key_path),
                "--data",
                str(shard),
                "--contract",
                self.setup.contract,
                "--listen",
                "127.0.0.1:0",
                "--plain-http",  # every party on this machine: loopback only
                "--delta",
                repr(self.prep.params.delta),
                "--psd-depth",
                str(c.psd_depth),
                "--psd-max-rows",
                str(c.psd_max_rows),
                "--psd-epsilon",
                repr(c.psd_epsilon),
                "--psd-label-first" if c.psd_label_first else "--no-psd-label-first",
                "--binning-epsilon",
                repr(c.binning_epsilon),
                "--binning-resolution",
                str(c.binning_resolution),
                "--seed",
                str(c.seed),
                "--party-index",
                str(i),
                *self.setup.node_args,
            ]
            if self.setup.block_time is not None:  # the relay's time to live from the interval, not a measure
                cmd += ["--block-time", repr(self.setup.block_time)]
            attack = self.setup.attack
            if self.setup.greedy == i and attack is not None:
                cmd += ["--attack", attack.kind, "--inflate", repr(attack.factor)]
                cmd += ["--attack-from-tree", str(attack.start_tree)]
            log_path = work / f"party-{i}.log"
            self.log_paths.append(log_path)
            self.commands.append(cmd)
        for cmd, log_path in zip(self.commands, self.log_paths, strict=True):
            self.procs.append(self.spawn(cmd, log_path))

    def restart_party(self, i: int) -> None:
        """Start party ``i`` again with the same key and shard (after it was killed)."""
        self.procs[i] = self.spawn(self.commands[i], self.log_paths[i])

    def spawn(self, args: list[str], log_path: Path) -> Party:
        return start_party(self.forks, args, log_path)

    def _check_parties_alive(self) -> None:
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code not in (None, 0):
                tail = self.log_paths[i].read_text().strip().splitlines()[-3:]
                raise RuntimeError(f"party {i} exited with code {code}: " + " | ".join(tail))

    def wait_for_joins(
        self, timeout: float = 300.0, on_join: Callable[[str], object] | None = None
    ) -> dict[str, bytes]:
        """Every launched party's join payload, once all asked to join; ``on_join(address)`` as each one's is seen,
        in launch order (a party whose join is seen before an earlier one's waits for it)."""
        wanted = [a.address for a in self.accounts]
        deadline = time.monotonic() + timeout
        payloads: dict[str, bytes] = {}
        announced = 0
        while announced < len(wanted):
            self._check_parties_alive()
            if time.monotonic() > deadline:
                late = wanted[announced]
                raise RuntimeError(
                    f"only {len(payloads)} of {len(wanted)} parties joined within {timeout:.0f} s: party {announced} "
                    f"({late}) did not, and the parties after it wait for its approval (party order)"
                )
            # from the task's creation on, not from genesis: read every 10 ms (0 where this requester did not open it)
            for ev in self.client.logs(self.task.contract, ["JoinRequested"], self.task_id, self.start_block):
                if str(ev.args["party"]) in wanted:
                    payloads[str(ev.args["party"])] = bytes(ev.args["psd"])
            while announced < len(wanted) and wanted[announced] in payloads:
                if on_join is not None:
                    on_join(wanted[announced])
                announced += 1
            if announced < len(wanted):
                time.sleep(JOIN_POLL_SECONDS)
        return payloads

    def edges_for(self, payloads: dict[str, bytes]) -> bytes:
        """The encoded common bin edges from the parties' published sketches, merged in party order as the
        simulator merges them (``node.privacy.binning.edges_from_sketch``)."""
        low, high = self.prep.ranges
        sketches = [decode_join(payloads[acct.address]).sketch for acct in self.accounts]
        edges = snap_integer_edges(edges_from_sketch(sketches, low, high, self.prep.params.bins), self.prep.integers)
        return encode_edges([e.tolist() for e in edges])

    def approve_and_start(self, timeout: float = 300.0) -> bytes:
        """Approve the parties in party order, each as its join is seen; fix the edges from their sketches; start."""
        payloads = self.wait_for_joins(timeout, self._approve)
        edges = self.edges_for(payloads)
        self.task.start(self.setup.requester, self.task_id, edges)
        return edges

    def _approve(self, party: str) -> None:
        """Approve ``party`` unless it is approved already (by this requester before it restarted)."""
        if self.task.member(self.task_id, party)[0] != Membership.APPROVED:
            self.task.approve(self.setup.requester, self.task_id, party)

    def resume(self, task_id: int, timeout: float = 300.0) -> None:
        """Take up task ``task_id``, which a requester with this set-up opened before it stopped: the parties are
        those whose keys are in the working folder (``party-<i>.key``, in party order), the task's first block its
        creation's; a task still open has the parties not approved yet approved and is started, as
        ``approve_and_start`` would have. Then ``follow`` as usual; the party processes are not this requester's."""
        self.task_id = task_id
        created = self.client.logs(self.task.contract, ["TaskCreated"], task_id, 0)
        if not created:
            raise RuntimeError(f"task {task_id} was not created on the contract at {self.setup.contract}")
        self.start_block = created[0].block_number
        self.usage = ChainUsage(self.start_block)
        work = self.setup.workdir
        self.accounts = [read_key(work / f"party-{i}.key", f"party {i}'s key") for i in range(len(self.prep.parts))]
        self.log_paths = [work / f"party-{i}.log" for i in range(len(self.prep.parts))]
        if self.task.state(task_id).status == Status.OPEN:
            self.approve_and_start(timeout)

    # ------------------------------------------------------------------ following

    def follow(self) -> None:
        """Until the task completes, reporting (tree, level, transactions, gas) as it goes."""
        ends = self._end_watch()
        try:
            self._follow(ends)
        finally:
            if ends is not None:
                ends.close()

    def _end_watch(self) -> NewHeads | None:
        """A subscription that wakes the follower at a block that may end the task (``END_EVENTS``), or None for a
        node not served over HTTP; one that serves no WebSocket leaves it down, and the follower polls."""
        if not self.setup.rpc.startswith("http"):
            return None
        narrow = self.task.event_watch(END_EVENTS)
        if len(narrow) != len(END_EVENTS):  # an empty watch would wake it at every block: polling, as before
            return None
        return NewHeads(self.setup.rpc, narrow=narrow)

    def _follow(self, ends: NewHeads | None) -> None:
        deadline = time.monotonic() + self.setup.timeout_seconds
        last: tuple[int, int] = (-1, -1)
        seen = -1
        while True:
            self._check_parties_alive()
            try:
                st = self.task.state(self.task_id)
                latest = self.client.block_number
            except (OSError, TimeoutError):  # the chain may be restarting: parties ride it out, so does the requester
                time.sleep(1.0)
                continue
            self.usage.scan(self.client, latest)
            txs, gas = self.usage.txs, self.usage.gas
            if (st.tree, st.level) != last or st.status != Status.TRAINING:
                last = (st.tree, st.level)
                self.progress({"tree": st.tree, "level": st.level, "txs": txs, "gas": gas, "status": st.status.name})
            if st.status == Status.COMPLETED:
                return
            if st.status != Status.TRAINING:
                raise RuntimeError(f"task {self.task_id} is {st.status.name.lower()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"training did not finish within {self.setup.timeout_seconds:.0f} s")
            if ends is not None and ends.live:
                found = ends.wait(seen, FOLLOW_POLL_SECONDS, narrow=True)
                seen = seen if found is None else found
            else:
                time.sleep(FOLLOW_POLL_SECONDS)

    def wait_parties(self, timeout: float = 60.0) -> list[int]:
        end = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=max(0.1, end - time.monotonic())))
            except subprocess.TimeoutExpired:
                proc.terminate()
                codes.append(proc.wait())
        return codes

    def stop_parties(self) -> None:
        """Stop every party still running, then the fork server (so the parties' CPU time is counted by now)."""
        try:
            for proc in self.procs:
                proc.terminate()  # a no-op for a party that ended
            for proc in self.procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    with suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=10)
                except PartyForksError:
                    pass  # it ended after the fork server did: nothing left to stop
        finally:
            if self.forks is not None:
                self.forks.close()

    # ------------------------------------------------------------------ results

    def report(self, wall_seconds: float) -> dict[str, Any]:
        """The task's results as the chain records them, evaluated on the test set."""
        prep = self.prep
        model = model_from_chain(self.task, self.task_id, feature_names=prep.train.feature_names)
        pred = model.predict(prep.test.X)  # probabilities for a binary task, values for regression
        parties = self.task.parties(self.task_id)
        order = {a: i for i, a in enumerate(parties)}
        phi = [0] * len(parties)
        kappa = [0] * len(parties)
        events: list[Event | Sent] = [
            *self.client.logs(
                self.task.contract, ["ContributionsAdded", "LevelStarted"], self.task_id, self.start_block
            ),
            *self.task.sent(self.task_id, ["VotesSubmitted", "HistogramsSubmitted"], self.start_block),
        ]
        events.sort(key=lambda e: (e.block_number, e.log_index))
        voted_trees = self.task.config(self.task_id).voted_trees
        expected: set[tuple[int, int, str]] = set()
        sent: set[tuple[int, int, str]] = set()
        taking_part = set(parties)
        previous = (0, 0)
        for ev in events:
            if isinstance(ev, Sent):
                (expected if ev.name == "VotesSubmitted" else sent).add((ev.tree, ev.level, ev.party))
                continue
            a = ev.args
            if ev.name == "ContributionsAdded":
                for who, ph, ka in zip(a["parties"], a["phi"], a["kappa"], strict=True):
                    phi[order[str(who)]] += int(ph)
                    kappa[order[str(who)]] += int(ka)
            else:  # LevelStarted
                key = (int(a["tree"]), int(a["level"]))
                if ref.draws(key[0], voted_trees):  # no votes: who sent at the previous step owes this one
                    if key != (0, 0):
                        taking_part = {p for t, lv, p in sent if (t, lv) == previous}
                    expected |= {(*key, p) for p in taking_part}
                previous = key
        rejected = [sum(1 for k in expected - sent if k[2] == p) for p in parties]
        totals = [self.task.contribution(self.task_id, p) for p in parties]
        finished = [(*previous, p) in sent for p in parties]  # took part in the last step: paid (RewardForfeited)
        shares = ref.reward_shares(totals, finished)
        self.usage.scan(self.client, self.client.block_number)
        return {
            "task": self.task_id,
            "contract": self.task.address,
            "rpc": self.setup.rpc,
            "dataset": prep.train.name,
            "algo": self.setup.algo,
            "parties": prep.config.parties,
            "theta": prep.config.theta,
            "trees": prep.params.trees,
            "depth": prep.params.depth,
            "bins": prep.params.bins,
            "seed": prep.config.seed,
            **evaluate(prep.params, prep.test.y, pred),
            "contributions": [
                {
                    "party": i,
                    "address": p,
                    "phi": ref.from_fixed(phi[i]),
                    "kappa": ref.from_fixed(kappa[i]),
                    "total": ref.from_fixed(totals[i]),
                    "share": shares[i],
                    "finished": finished[i],
                    "total_fixed": str(totals[i]),
                    "owed_wei": str(self.task.owed(self.task_id, p)),
                }
                for i, p in enumerate(parties)
            ],
            "rejected_histograms": rejected,
            "privacy": prep.config.privacy(prep.params).report(),
            **self.usage.report(self.client),
            "wall_seconds": wall_seconds,
            "greedy": self.setup.greedy,
            "attack": (
                {"kind": self.setup.attack.kind, "factor": self.setup.attack.factor}
                if self.setup.attack is not None
                else None
            ),
            "model": model.to_json_dict(),
        }


def run_task(
    prep: Prepared,
    setup: ChainSetup,
    progress: Progress | None = None,
    forks: PartyForks | None = None,
) -> dict[str, Any]:
    """Open, run and report one task; the party processes (and ``forks``, a fork server the caller started early,
    see ``PartyForks``) are always stopped at the end."""
    req = Requester(prep, setup, progress, forks)
    start = time.monotonic()
    # the caller's objects (the data, a simulator's model) are not scanned by the collections that decoding a whole
    # task's events triggers: 0.18 s of a 50-tree report was the collector
    with frozen_heap():
        try:
            req.open_task()
            with BlockClock(req.client, setup.clock_tick):
                req.launch_parties()
                req.approve_and_start()
                req.follow()
            codes = req.wait_parties()
            if any(codes):
                raise RuntimeError(f"party exit codes {codes}; see {setup.workdir}/party-*.log")
        finally:
            req.stop_parties()
        report = req.report(time.monotonic() - start)
    (setup.workdir / "report.json").write_text(json.dumps({k: v for k, v in report.items() if k != "model"}, indent=2))
    return report


def resume_task(prep: Prepared, setup: ChainSetup, progress: Progress | None = None) -> dict[str, Any]:
    """Take up the task ``setup.workdir`` records (``TaskRecord``) after its requester's process ended (killed,
    crashed, its machine restarted) while the parties ran on: the parties not approved yet approved, training started
    if it was not, followed to the end and reported as ``run_task`` reports a fresh run. ``prep`` and ``setup`` must
    be the ones the task was opened with (the same data and training arguments): the task's parameters on chain are
    checked against them. ResumeError for a folder without a task, a task on another chain or contract, another
    requester's, a cancelled one or one whose run already wrote its report."""
    record = TaskRecord.read(setup.workdir)
    req = Requester(prep, setup, progress, launches=False)
    here = f"contract {req.task.address} on chain {req.client.chain_id}"
    if record.chain_id != req.client.chain_id or record.contract.lower() != req.task.address.lower():
        raise ResumeError(
            f"the task in {setup.workdir} is task {record.task} of contract {record.contract} on chain "
            f"{record.chain_id}, not of {here}: give the chain it was opened on (its --deployment, or --rpc and "
            "--contract)"
        )
    if record.requester.lower() != setup.requester.address.lower():
        raise ResumeError(
            f"task {record.task} was opened by {record.requester}, not by {setup.requester.address}: resume with the "
            "key that opened it (--key, or the working folder's own)"
        )
    status = req.task.state(record.task).status
    if status == Status.NONE:
        raise ResumeError(
            f"task {record.task} does not exist on {here}: the chain it was opened on is gone (a devnet started "
            "afresh has the same chain id and contract address)"
        )
    if status == Status.CANCELLED or (status == Status.COMPLETED and (setup.workdir / "report.json").exists()):
        raise ResumeError(
            f"task {record.task} of {here} is {status.name.lower()}: nothing to resume"
            + (f" (its report: {setup.workdir / 'report.json'})" if status == Status.COMPLETED else "")
        )
    if req.task.config(record.task) != task_config(prep, setup):
        raise ResumeError(
            f"task {record.task} was opened with other task parameters than these arguments give: resume with the "
            "data and training arguments of the run that opened it"
        )
    start = time.monotonic()
    with frozen_heap():
        with BlockClock(req.client, setup.clock_tick):
            req.resume(record.task)
            req.follow()
        report = req.report(time.monotonic() - start)
    (setup.workdir / "report.json").write_text(json.dumps({k: v for k, v in report.items() if k != "model"}, indent=2))
    return report
