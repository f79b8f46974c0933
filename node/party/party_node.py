"""A party's node: joins a task, follows it on chain level by level, and endorses the other parties' histograms.

The node holds only its own rows. Everything else it needs it reads from the chain: the task's parameters and
schema, the common bin edges (``BinEdgesFixed``), the other parties' PSDs (``JoinRequested``), the candidates of
every open node, the recorded splits and leaves. Its own progress is derived from chain state at every step, never
kept only in memory, so a node killed mid-level and restarted with the same key resumes where the chain is and never
submits twice (it checks the chain first; the contract would refuse a second vote or histogram anyway).

Numerically it runs :class:`node.sim.fvtree.LocalParty`, the code the simulator runs for each party, on the same rows,
edges, PSDs and seeds, so a task trained on chain records exactly the model ``fgbdt simulate`` computes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from functools import partial
from itertools import takewhile
from typing import Any

import numpy as np
from eth_account.signers.local import LocalAccount
from web3.exceptions import Web3RPCError

from fgbdt_chain.ledger.rpc.client import ChainClient, Event, TxResult
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.rpc.heads import NewHeads
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import EdgesFormatError
from fgbdt_chain.ledger.spec.encoding import (
    block_histograms,
    endorsement_digest,
    merkle_root,
    node_block,
    node_hash,
    sign_endorsement,
)
from fgbdt_chain.ledger.spec.histogram_rules import HistogramRuleError, Sides, bounds_of, candidate_totals, check_node
from fgbdt_chain.ledger.spec.parameters import default
from fgbdt_chain.ledger.spec.task_params import TaskParameters
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tree_carry import Carry, CarryError, ScoreBounds, applies, leaf_sums
from fgbdt_chain.ledger.spec.tx_size import BLOCK_GAS_LIMIT, histogram_parts, resolution_batches
from fgbdt_chain.ledger.wrappers.chain_model import ModelNotReady, task_edges
from fgbdt_chain.ledger.wrappers.contracts import (
    HISTOGRAM_EVENTS,
    Endorsement,
    Membership,
    Phase,
    Status,
    TaskContract,
    TaskState,
    resolve_nodes_args,
    submit_histograms_args,
    submitted_words,
)
from fgbdt_chain.ledger.wrappers.forwarder import histogram_request_gas, vote_request_gas
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels.histogram import FixedRows
from fgbdt_chain.node.model.trees import bin_matrix, slot_widths
from fgbdt_chain.node.party.endorse_client import EndorseClient, NoEndorsementStream, VerifierUnreachable
from fgbdt_chain.node.party.relay import RELAY_TTL_SECONDS, RelayChannel, RelayedRequest, relayer_index
from fgbdt_chain.node.privacy.accountant import plan, secret_noise_seed
from fgbdt_chain.node.privacy.binning import fixed_round, local_sketch, sketch_rng
from fgbdt_chain.node.privacy.psd import build_psd, label_levels_for, psd_budget, psd_rng
from fgbdt_chain.node.privacy.publish import decode_join, encode_join
from fgbdt_chain.node.privacy.weights import distribution_weights
from fgbdt_chain.node.protocol.endorsement import EndorsementRule, choose, decide, estimators_for, quorum, reads_claims
from fgbdt_chain.node.protocol.resolve import level_splits, tree_end
from fgbdt_chain.node.protocol.verify import Claims, PartyEstimator, Verdict
from fgbdt_chain.node.sim.fvtree import LocalParty, open_positions, route
from fgbdt_chain.node.sim.warmup import warm_up

CHAIN_DOWN: tuple[type[BaseException], ...] = (OSError, TimeoutError)
"""Transport failures of the JSON-RPC client (requests' ConnectionError and Timeout are OSErrors)."""


class NodeError(RuntimeError):
    """An unrecoverable condition: the node logs it and exits non-zero."""


class ChainLag(RuntimeError):
    """The chain's state is ahead of the logs its node serves (a new block's logs not yet indexed): look again."""


@dataclass(frozen=True)
class NodeSettings:
    """A party's own choices, not on chain: privacy budgets, the refit degree and how it polls."""

    delta: float = default("refit_delta")
    psd_depth: int = 8
    psd_max_rows: int = 500
    psd_epsilon: float = 1.0
    psd_label_first: bool = True
    binning_epsilon: float = 1.0
    binning_resolution: int = 64
    seed: int | None = None
    """None: the DP noise (sketch, PSD, votes, histograms) is seeded from the party's key for the task
    (``privacy.secret_noise_seed``: a real deployment; a restart draws the same noise). Set, with ``party_index``,
    only to reproduce the simulator's noise in experiments and tests: a known seed makes the noise predictable."""
    party_index: int = 0
    attack: Attack | None = None
    """Greedy-party experiments: what this node does to the histograms it sends (``node.attacks.histograms``)."""
    poll_seconds: float = 0.05
    start_poll_seconds: float = 0.01
    """How often a party that joined looks for its approval and the start during its first second of waiting (then
    every ``poll_seconds``): every party's first step waits for the last to see the start, and a poll of
    ``poll_seconds`` made that 25 ms on average, twice (approval, start), where a requester that approves by program
    takes a fraction of a second; one that approves by hand is not asked 200 times a second meanwhile."""
    subscribe: bool = True
    """Wake on the node's new-head notifications (WebSocket ``eth_subscribe``) instead of polling for blocks; a node
    without WebSocket is polled every ``poll_seconds`` either way."""
    endorse_timeout: float = 30.0
    endorse_patience_seconds: float = 10.0
    """How long to keep asking an unreachable verifier once a quorum of signatures is in."""
    resolve_grace_seconds: float = 2.0
    relay: bool = True
    """Hand this party's histograms and the votes it sends ahead to the level's relayer, who sends every party's in
    one transaction (``node.party.relay``), instead of a transaction per party."""
    relay_wait_seconds: float = 0.25
    """How long a relayer waits for the requests of the parties taking part before it sends those it holds. The
    parties compute them from the same chain state at the same time, so they come within milliseconds; one later
    than this is the party's to send (its own transaction, or its vote in the level's round), which costs that party
    a round, where waiting longer would cost every party the wait at every level a party is slow."""
    relay_patience_seconds: float = RELAY_TTL_SECONDS + 1.5
    """How long a party waits for the histograms it handed over to land before it submits them as its own transaction
    (the relayer failed, or held them back): past the request's deadline (``node.party.relay.RELAY_TTL_SECONDS``, and a
    second of rounding), so that the relayer can no longer land it too; under a step's deadline."""
    resolve_batch: int = 16
    """Nodes per ``resolveNodes`` transaction: about 0.85M gas per node at M=4 (bench/gas.py), so 16 stay under
    half of a 30M block; a devnet with a large gas limit may take a whole level at once."""
    chain_outage_seconds: float = 300.0


@dataclass
class LevelContext:
    """What this party knows about one level: where its rows are, its gradients, the open nodes and candidates."""

    tree: int
    level: int
    open_nodes: list[int]
    k_of_row: np.ndarray
    g: np.ndarray
    h: np.ndarray
    h_vote: np.ndarray
    candidates: list[tuple[int, int]] = field(default_factory=list)
    histograms: list[ref.NodeHistograms] | None = None
    """This party's histograms of the level, computed once: a private party's noise is drawn once per level (a
    second draw would be a second release), and every endorsement request and submission sends the same ones."""
    refused: bool = False
    """The verifiers refused this party's histograms at this level: it waits for the deadline instead of retrying."""
    from_events: bool = False
    """Resolve with the submissions read from the chain's events, not with the histograms this party endorsed (set
    once a resolution from those failed: a party submitted other histograms, or fewer parties submitted)."""
    fixed_block: int | None = None
    """The block whose transaction fixed the level's candidates, once known (``candidates_block``)."""


def candidates_block(st: TaskState, step_blocks: int) -> int | None:
    """The block where the current level's candidates were fixed, from the task state alone; None before they are.

    Why it is exact: the transaction that fixes them (the vote that completes the ballots, the resolution that opens
    a level whose every ballot came ahead, ``closeStep``, or, in a drawn tree, the one that opens the level) also sets
    the histogram step's deadline to its block plus ``stepBlocks``. So the candidates' events are read from that one
    block, where finding it took a block-number request and a scan of the level's ``LevelStarted`` events on every
    party's path into the histogram step."""
    if st.status != Status.TRAINING or st.phase != Phase.HISTOGRAMS:
        return None
    return st.step_deadline - step_blocks


RULE_ERRORS = frozenset(
    {
        "CandidateTotalsMismatch",
        "CountOutOfRange",
        "GradientOutOfRange",
        "HessianOutOfRange",
        "LogisticBound",
        "FirstTreeLabels",
        "InheritedTotalsMismatch",
    }
)
"""The contract's refusals of histograms that break an exact rule (``ledger.spec.histogram_rules``)."""

RESCAN_BLOCKS = 2
"""Blocks read again by every incremental event scan (see :meth:`TreeLog.refresh`): the newest ones a node may have
announced before serving their logs, a race of a block. It was 8 while a level took nine blocks; with a level in one
block (``node.party.relay``) eight re-read eight levels' events at every read, which the node serialised and each party
parsed again."""

FIRST_NODE_GAS_PER_PARTY = 500_000
"""Gas per resolved node and submitting party assumed until this party has resolved a node (measured: about 0.85M
per node at M=4, ``bench/gas.py``): about twice that, so that a first share is one transaction, not one per node."""

STEP_EVENTS = (
    "LevelStarted",
    "VotingClosed",
    "HistogramsClosed",
    "CandidatesFixed",
    "NodeSplit",
    "LeafSet",
    "TaskCompleted",
    "TaskCancelled",
)
"""Events of the transactions that change what a party does next: a step opened or closed, a node resolved (the
resolution grace looks at which are left), the task ended. A block without any (another party's vote or submission
that leaves its step open) is not stepped at."""

OPENING_EVENTS = ("LevelStarted", "TaskCompleted", "TaskCancelled")
"""What a party that handed everything it owes a level to the relayer waits for (``PartyNode._quiet``): the level's
close and resolution are the relayer's."""

HISTOGRAM_LAG_SECONDS = 60.0
"""How long a party waits for its node to serve a histogram event the chain already counts before it gives up: a
lagging log index catches up within a block or two; a lost event never does."""


def read_bound(announced: int, client: ChainClient) -> tuple[int | str, int]:
    """(the block an incremental event read goes up to, the block it counts as read up to). Subscribed
    (``announced`` >= 0): the node's latest, counted up to the announced block, so no request for the number; a block
    served before it was announced is read again next time. Else the number the node gives, both."""
    if announced >= 0:
        return "latest", announced
    latest = int(client.block_number)
    return latest, latest


LIGHT_EVENTS = ("NodeSplit", "LeafSet", "LevelStarted", "CandidatesFixed", "HistogramsClosed", "VotingClosed")
"""The small events a party reads at every level, in one incremental query (:meth:`TreeLog.refresh`): the resolution
that closes a level records its splits and leaves, opens the next level and, its ballots sent ahead, fixes that
level's candidates, all in one transaction (and ``VotingClosed``, when every ballot came ahead); ``HistogramsClosed``
ends the next step. Read by their own consumers,
they were 4.3 ``eth_getLogs`` per level and party (the splits, the candidates, the level's start, the closed step);
shared, about one per step a party acts in."""


class TreeLog:
    """The recorded splits and leaves of every tree, with the levels' starts, candidates and closed histogram steps,
    fetched incrementally from the task's events (``LIGHT_EVENTS``)."""

    def __init__(self, task: TaskContract, task_id: int, announced: Callable[[], int] = lambda: -1) -> None:
        self.task, self.task_id = task, task_id
        self.announced = announced
        """The latest block a live subscription announced, -1 without one."""
        self.splits: dict[int, dict[int, tuple[int, int]]] = {}
        self.leaves: dict[int, dict[int, int]] = {}
        self.totals: dict[int, dict[int, ref.Totals]] = {}
        """Each split's children's totals (the chain's record of them), by tree and child id."""
        self.level_starts: dict[tuple[int, int], tuple[int, int]] = {}
        """Where each level's ``LevelStarted`` is: (block, log index), by (tree, level)."""
        self.candidates: dict[int, dict[int, tuple[int, int]]] = {}
        """The candidates ``CandidatesFixed`` fixed, by tree and node (of the newest tree read and the one before)."""
        self.closed: dict[tuple[int, int], int] = {}
        """Each level's ``HistogramsClosed`` submitter mask, by (tree, level) (of the newest tree read and the one
        before). Each is emitted once per tree and node, or tree and level, so a record read stays true unless the
        node loses blocks: an outage (``forget_recent``) forgets them."""
        self.voting_closed: dict[tuple[int, int], int] = {}
        """The block of each level's ``VotingClosed`` (by (tree, level), as ``closed``): in the block of its
        ``LevelStarted``, the resolution that opened it took every ballot sent ahead."""
        self.next_block = 0
        self._decoded: dict[tuple[bytes, int], int] = {}
        """The logs of the blocks read again that are already recorded (block hash and log index: block number)."""

    def forget_recent(self) -> None:
        """After an outage: a node restarted from a saved state may have lost blocks, so the level starts, candidates
        and closed steps noted from them are read again, from the start (the splits and leaves are keyed records
        that a re-read overwrites)."""
        self.level_starts.clear()
        self.candidates.clear()
        self.closed.clear()
        self.voting_closed.clear()
        self._decoded.clear()
        self.next_block = 0

    def refresh(self, since: int | None = None) -> bool:
        """Read the records added since the last refresh, or again from block ``since`` (the start of a tree whose
        records look short: bounded by one tree, where reading again from genesis grew with the chain); whether it
        read (False: no block announced since the last read).

        Subscribed, the announced block bounds what counts as read, and the node's latest is read up to without
        asking its number first (one request per refresh where there were two: the number was 5% of a party's
        CPU). A block the node served but had not announced yet is read again next time; a state that is ahead of
        the announcements reads as lag (``ChainLag``), and the announcement that follows within a millisecond steps
        the party again."""
        latest, counted = read_bound(self.announced(), self.task.client)
        if since is None and counted < self.next_block:
            return False
        # A node may report a new block number before it serves that block's logs (a known race of anvil and
        # geth alike), so the last few blocks are read again each time: the records are keyed, re-reading is
        # idempotent, and a missed log cannot leave a node without its split or leaf.
        start = max(0, self.next_block - RESCAN_BLOCKS) if since is None else since
        if since is not None:
            self._decoded.clear()  # a tree read again is read whole
        self._decoded = {k: b for k, b in self._decoded.items() if b >= start}
        client = self.task.client
        events = client.fresh_logs(self.task.contract, list(LIGHT_EVENTS), self.task_id, start, latest, self._decoded)
        newest = -1
        for ev in events:
            a = ev.args
            t = int(a["tree"])
            newest = max(newest, t)
            if ev.name == "NodeSplit":
                node = int(a["node"])
                self.splits.setdefault(t, {})[node] = (int(a["feature"]), int(a["threshold"]))
                g_l, h_l, n_l, g_r, h_r, n_r = (int(v) for v in a["sides"])
                children = self.totals.setdefault(t, {})
                children[2 * node], children[2 * node + 1] = ref.Totals(g_l, h_l, n_l), ref.Totals(g_r, h_r, n_r)
            elif ev.name == "LeafSet":
                self.leaves.setdefault(t, {})[int(a["node"])] = int(a["value"])
            elif ev.name == "LevelStarted":
                self.level_starts[(t, int(a["level"]))] = (ev.block_number, ev.log_index)
            elif ev.name == "CandidatesFixed":
                self.candidates.setdefault(t, {})[int(a["node"])] = (int(a["first"]), int(a["second"]))
            elif ev.name == "VotingClosed":
                self.voting_closed[(t, int(a["level"]))] = ev.block_number
            else:
                self.closed[(t, int(a["level"]))] = int(a["submitterMask"])
        if newest >= 0:  # what a party asks of these is about its current tree and the one before
            self.candidates = {k: v for k, v in self.candidates.items() if k >= newest - 1}
            self.closed = {k: v for k, v in self.closed.items() if k[0] >= newest - 1}
            self.voting_closed = {k: v for k, v in self.voting_closed.items() if k[0] >= newest - 1}
        self.next_block = counted + 1
        return True


class PartyNode:
    """One party of one task."""

    def __init__(
        self,
        task: TaskContract,
        task_id: int,
        account: LocalAccount,
        data: Dataset,
        endpoint: str,
        settings: NodeSettings = NodeSettings(),
        log: Callable[[str], None] = print,
    ) -> None:
        self.task, self.task_id, self.account = task, task_id, account
        self.data, self.endpoint, self.settings, self.log = data, endpoint, settings, log
        self.address = account.address
        self.lock = threading.RLock()
        self.cfg = task.config(task_id)
        created = task.client.logs(task.contract, ["TaskCreated"], task_id)
        if not created:
            raise NodeError(f"task {task_id} does not exist on contract {task.address}")
        args = created[0].args
        self.low = fixed_round(np.array([ref.from_fixed(int(v)) for v in args["featureMin"]]))
        self.high = fixed_round(np.array([ref.from_fixed(int(v)) for v in args["featureMax"]]))
        if len(self.low) != data.n_features:
            raise NodeError(f"task {task_id} has {len(self.low)} features but {data.name} has {data.n_features}")
        task_params = TaskParameters.of(self.cfg)
        if task_params.objective == "binary" and not set(np.unique(data.y).tolist()) <= {0.0, 1.0}:
            raise NodeError("the task trains a binary classifier: labels must be 0/1")
        self.label_range = task_params.label_range()
        """The label's range in the task's schema: this party's PSD splits the label over it, as every other's."""
        low, high = self.label_range
        outside = np.flatnonzero(~((data.y >= low) & (data.y <= high)))  # binary labels, 0/1, are always inside
        if outside.size:
            raise NodeError(
                f"{outside.size} of {data.name}'s labels lie outside the task's label range [{low:g}, {high:g}] (the "
                f"first: {data.y[outside[0]]:g} in row {outside[0] + 1}): the task divides its labels by "
                f"{task_params.label_scale:g} from that range, so labels in other units would not train"
            )
        self.params = TrainParams.of_task(task_params, settings.delta)
        self.privacy = plan(task_params.epsilon, task_params.delta, self.params.trees, self.params.depth)
        """The task's differential privacy for everything this party releases (``node.privacy.accountant``)."""
        self.rule = EndorsementRule.of(
            ref.ENDORSE_RULES[task_params.endorse],
            task_params.refusal_rate,
            task_params.overlap_threshold,
            self.privacy,
        )
        self.trees = TreeLog(task, task_id, self._announced_latest)
        self._heads: NewHeads | None = None
        """The node's new-head subscription while following (None: polling)."""
        self._state: tuple[int, TaskState] | None = None
        """The task state the main loop read last, with the latest block announced before it was read that may hold a
        step-changing event: while no newer such block is announced, its status, tree, level and phase are the
        chain's, and a verifier answering in the meantime need not read them again (its masks may be older)."""
        self._again = False
        """The last step has to look again at the next block (the node lagged, a resolution failed)."""
        self._fresh_from: tuple[int, int] | None = None
        """The first (tree, level) this process followed from its start, without an outage since: its own votes and
        submissions of those levels are all in ``_seen``, so the restart check needs no event read."""
        self.party: LocalParty | None = None
        self.parties: list[str] = []
        self.index = -1
        self.W = np.zeros((0, 0))
        self.estimators: list[PartyEstimator] = []
        self.excluded = False
        """This party no longer takes part (refused, declined or silent once): it only verifies and resolves."""
        self._fixed: FixedRows | None = None
        self.endpoints: dict[str, str] = {}
        self.applied_trees = 0
        self._grad_tree = -1
        self._grads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._contexts: dict[tuple[int, int], LevelContext] = {}
        self._seen: set[tuple[str, int, int]] = set()
        self._resolve_failures: dict[int, int] = {}
        self._node_gas = 0
        """The most gas one node of a resolveNodes call cost this party (0 until it resolved one)."""
        self._histogram_lag_since: dict[tuple[int, int], float] = {}
        self._leaf_lag_since: dict[int, float] = {}
        self._level_scan = 0
        self._verifiers = EndorseClient(settings.endorse_timeout)
        self._asking: ThreadPoolExecutor | None = None
        """The threads that ask the verifiers at once, one per other party, kept from level to level."""
        self._last_attempt = 0.0
        self._resolving_since: dict[tuple[int, int], float] = {}
        self._step_since: dict[tuple[int, int, int], float] = {}
        """When this party first saw each (tree, level, phase): the grace before it tries closing a step early."""
        self._closes_tried: set[tuple[int, int, int]] = set()
        self._carries: dict[tuple[str, int], Carry] = {}
        self._prefetched: set[tuple[str, int]] = set()
        self._early_roots: set[int] = set()
        """Trees whose root ballot this party sent ahead where it computed that the tree before stopped short of its
        depth: counted only if the chain stopped it there too, so whether it voted is read from the chain (``_has``:
        the ballot is counted exactly when it was sent after the start of that tree's last level)."""
        self._endorsed: dict[tuple[int, int], dict[str, list[ref.NodeHistograms]]] = {}
        """Per (tree, level), the histograms this party endorsed, by party: what each will submit, so a resolution
        need not read the level's submissions back from the events (megabytes per level at depth 6)."""
        self._endorsed_roots: dict[tuple[int, int], dict[str, bytes]] = {}
        """The commitment root of each submission in ``_endorsed``, as this party signed it: a tree's carry check
        compares it with the root submitted, where computing it again was a third of the check at a tree's root."""
        self._endorsed_changed = threading.Condition(self.lock)
        """Notified when this party endorses a submission (``_vote_ahead_early`` waits for the whole level)."""
        self._ahead: set[tuple[int, int]] = set()
        """The (tree, level)s this party sent its votes ahead for, or tried to (once per level)."""
        self.relay: RelayChannel | None = None
        """This party's side of the relay (``node.party.relay``; None until training starts, or with ``relay`` off)."""
        self._relayed: set[tuple[int, int]] = set()
        """The (tree, level)s whose ballot this party handed to a relayer: whether it landed is read from the chain."""
        self._handed: dict[tuple[int, int], float] = {}
        """When this party handed each level's histograms to a relayer (by (tree, level)): past the patience and not
        on chain, it sends them itself."""
        self._own_submission: set[tuple[int, int]] = set()
        """Levels whose histograms this party handed over and did not see land: it submits them itself."""
        self._quiet = False
        """This party handed the relayer everything it owes the level (its histograms and ballot) and resolves none
        of it: it steps again when the next level opens (``OPENING_EVENTS``), not at the level's close, or once a
        second (a relayer that failed: the patience, the resolution grace)."""
        self._relayed_levels: set[tuple[str, int, int]] = set()
        """The (kind, tree, level)s this party relayed the requests of."""
        self._no_ballots: set[tuple[int, int]] = set()
        """Resolving (tree, level)s after which nothing votes ahead (no split, and the next tree draws)."""
        self._pending_ahead: tuple[int, int, int, Callable[[], TxResult], bool] | None = None
        """(tree, level, nodes, its result, whether it is a root ballot sent where the tree before stopped short
        (``_early_roots``)) of the votes sent ahead and not waited for yet."""
        self._routed: tuple[int, int, tuple[int, ...], dict[int, tuple[int, int]], np.ndarray] | None = None
        """(tree, level, open nodes, the splits that opened them, each row's node, 0 for a row in a leaf) of the level
        the votes sent ahead routed the rows to: only the rows' places among the open nodes are read from it."""
        self._roots: dict[int, dict[tuple[str, int], bytes]] = {}
        """Per finished tree, every submission's root by (party, level), read once from the events' heads."""
        self._submitted: dict[int, dict[tuple[str, int], list[int]]] = {}
        """Per finished tree, every party's submitted histogram words by (party, level): one event read serves the
        carries of all the parties this node endorses."""
        self._candidates: dict[int, dict[int, tuple[int, int]]] = {}
        """Per tree (the current one and the one before), its nodes' candidates as the contract records them."""
        self._score_bounds = ScoreBounds(lambda t: self.trees.leaves.get(t, {}).values())
        self.seconds: dict[str, float] = {}
        """Where this node's time went (for the chain benchmark): compute, chain reads, transactions, endorsements."""

    @contextmanager
    def timed(self, category: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[category] = self.seconds.get(category, 0.0) + time.perf_counter() - start

    def time_split(self) -> str:
        total = sum(self.seconds.values()) or 1.0
        parts = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{k} {v:.1f} s ({100 * v / total:.0f}%)" for k, v in parts)

    # ------------------------------------------------------------------ joining

    def _rngs(self) -> tuple[np.random.Generator, np.random.Generator]:
        """The noise streams of the bin sketch and the PSD sent with the join: from the same seed as the training
        noise (``_noise_seed``), so that a node restarted before its join was mined sends the same payload again
        (with fresh noise, a second PSD could land on chain, in a reverted transaction's public calldata)."""
        seed, index = self._noise_seed(), self.settings.party_index
        return sketch_rng(seed, index), psd_rng(seed, index)

    def _noise_seed(self) -> int:
        """The seed of the DP noise this party adds: the experiment's, or else one derived from its key for this task
        (``secret_noise_seed``: a restart draws the same noise, so nothing is released twice)."""
        s = self.settings
        if s.seed is not None:
            return s.seed
        return secret_noise_seed(bytes(self.account.key), self.task.client.chain_id, self.task.address, self.task_id)

    def registered_endpoint(self) -> str | None:
        """The endorsement endpoint this party joined the task with (its ``JoinRequested``), None before it joined."""
        for ev in self.task.client.logs(self.task.contract, ["JoinRequested"], self.task_id):
            if str(ev.args["party"]) == self.address:
                return str(ev.args["endpoint"])
        return None

    def join(self) -> None:
        """Ask to join with the PSD and binning sketch, unless this key already did (a restart)."""
        status = self.task.member(self.task_id, self.address)[0]
        if status != Membership.NONE:
            self.log(f"already joined (status {status.name.lower()})")
            return
        s = self.settings
        sketch_noise, psd_noise = self._rngs()
        sketch = local_sketch(
            self.data.X,
            self.low,
            self.high,
            resolution=s.binning_resolution,
            epsilon=self.privacy.sketch_epsilon if self.privacy.private else s.binning_epsilon,
            rng=sketch_noise,
        )
        lows, highs = np.append(self.low, self.label_range[0]), np.append(self.high, self.label_range[1])
        levels = label_levels_for(self.params.objective, self.params.bins) if s.psd_label_first else 0
        psd_epsilon = self.privacy.psd_epsilon if self.privacy.private else s.psd_epsilon
        scale = psd_budget(psd_epsilon, s.psd_depth, self.data.n_features + 1, label_levels=levels).leaf_scale
        psd = build_psd(
            self.data.X,
            self.data.y,
            lows,
            highs,
            depth=s.psd_depth,
            max_rows=s.psd_max_rows,
            epsilon=psd_epsilon,
            rng=psd_noise,
            label_levels=levels,
        )
        payload = encode_join(psd, scale, sketch)
        self.task.join(self.account, self.task_id, payload, self.endpoint)
        self.log(f"joined task {self.task_id}: PSD with {psd.num_leaves} leaves, {len(payload)} bytes published")

    def wait_for_start(self) -> None:
        """Until the requester approved this party and started training; refusal or cancellation is fatal."""
        announced = False
        since = time.monotonic()
        while True:
            status = self.task.member(self.task_id, self.address)[0]
            if status == Membership.REFUSED:
                raise NodeError(f"the requester refused this party ({self.address})")
            st = self.task.state(self.task_id)
            if st.status == Status.CANCELLED:
                raise NodeError(f"task {self.task_id} was cancelled")
            if status == Membership.APPROVED and not announced:
                self.log("approved")
                announced = True
            if st.status in (Status.TRAINING, Status.COMPLETED):
                if status != Membership.APPROVED:
                    raise NodeError("training started without this party")
                break
            quick = time.monotonic() - since < 1.0
            time.sleep(self.settings.start_poll_seconds if quick else self.settings.poll_seconds)
        # the start's logs (the bin edges) may be served a moment after the state that says training started
        for attempt in range(200):
            try:
                self._prepare()
                return
            except ModelNotReady:
                if attempt == 199:
                    raise
                time.sleep(self.settings.poll_seconds * 4)

    def _prepare(self) -> None:
        """Bin with the published edges and build the distribution weights from every party's PSD."""
        try:
            edges = task_edges(self.task, self.task_id)
        except EdgesFormatError as exc:
            raise NodeError(
                f"task {self.task_id}'s published bin edges are not readable ({exc}): not training"
            ) from exc
        self.params = self.params.fitted(edges)  # histograms as wide as the edges need, as the contract takes them
        self.parties = self.task.parties(self.task_id)
        self.index = self.parties.index(self.address)
        payloads: dict[str, Event] = {}
        for ev in self.task.client.logs(self.task.contract, ["JoinRequested"], self.task_id):
            payloads[str(ev.args["party"])] = ev
        published = []
        for p in self.parties:
            published.append(decode_join(bytes(payloads[p].args["psd"])))
            self.endpoints[p] = str(payloads[p].args["endpoint"])
        psds = [pub.psd for pub in published]
        self.W, w_star = distribution_weights(self.data.X, self.data.y, psds, self.settings.delta)
        self.estimators = estimators_for(self.data.X, self.data.y, self.W, psds, [pub.psd_scale for pub in published])
        slots = bin_matrix(self.data.X, edges)
        with self.lock:
            self.party = LocalParty(
                slots,
                self.data.y,
                self.params,
                w_star,
                privacy=self.privacy,
                noise_seed=self._noise_seed(),
                index=self.settings.party_index,
                widths=slot_widths(edges),
            )
            self.party.attack = self.settings.attack
        if self.settings.relay:
            self.relay = RelayChannel(
                self.task, self.task_id, self.account, self.parties, self.endpoints, self._verifiers
            )
        self.log(f"training started: party {self.index} of {len(self.parties)}, {self.data.n_rows} rows")

    # ------------------------------------------------------------------ per-level state

    def _apply_completed_trees(self, current_tree: int) -> None:
        """Add every finished tree's leaf values to this party's scores, in tree order (as the simulator does)."""
        assert self.party is not None
        while self.applied_trees < current_tree:
            t = self.applied_trees
            self.trees.refresh()
            ids = self._route(t, self.params.depth + 1)
            leaves = self.trees.leaves.get(t, {})
            missing = set(np.unique(ids).tolist()) - set(leaves)
            if missing:  # read the tree's records again before calling the chain inconsistent
                self.trees.refresh(since=self._level_block(t, 0))
                ids = self._route(t, self.params.depth + 1)
                leaves = self.trees.leaves.get(t, {})
                missing = set(np.unique(ids).tolist()) - set(leaves)
            if missing:
                # the state may be ahead of the logs the node serves (the race TreeLog rescans for): without a vote
                # round the next level starts in the very block that finished the tree, so give the node time
                since = self._leaf_lag_since.setdefault(t, time.monotonic())
                if time.monotonic() - since > self.settings.chain_outage_seconds:
                    raise NodeError(f"tree {t} is finished on chain but nodes {sorted(missing)[:5]} have no leaf value")
                raise ChainLag(
                    f"tree {t} is finished on chain but the leaves of nodes {sorted(missing)[:5]} are not served yet"
                )
            values = np.zeros(1 << (self.params.depth + 1))
            for nid, v in leaves.items():
                values[nid] = v / ref.ONE
            self.party.score += values[ids]
            self.applied_trees += 1

    def _routed_ahead(self, tree: int, level: int, open_nodes: Sequence[int]) -> np.ndarray | None:
        """Each row's node at the level, as the votes sent ahead routed them, where the chain made the same splits
        (else None: routed again from the chain's records)."""
        if self._routed is None:
            return None
        t, lv, nodes, local, ids = self._routed
        chain = self.trees.splits.get(tree, {})
        if (t, lv, nodes) != (tree, level, tuple(open_nodes)) or any(chain.get(n) != s for n, s in local.items()):
            return None
        return ids

    def _knows_level(self, tree: int, level: int, open_nodes: Sequence[int]) -> bool:
        return splits_open(self.trees.splits.get(tree, {}), level, open_nodes)

    def _route(self, tree: int, levels: int) -> np.ndarray:
        assert self.party is not None
        ids = np.ones(self.party.n_rows, dtype=np.int64)
        splits = self.trees.splits.get(tree, {})
        for _ in range(levels):
            ids = route(self.party.rows.slots, ids, splits)
        return ids

    def context(self, tree: int, level: int, open_nodes: Sequence[int]) -> LevelContext:
        """This party's view of a level (cached; shared with the endorsement server)."""
        with self.lock:
            key = (tree, level)
            if key in self._contexts:
                return self._contexts[key]
            assert self.party is not None
            self._apply_completed_trees(tree)
            if self._grad_tree != tree:
                self._grads = self.party.gradients()
                self._fixed = None
                self._grad_tree = tree
            assert self._grads is not None
            self.trees.refresh()
            if not self._knows_level(tree, level, open_nodes):
                self.trees.refresh(since=self._level_block(tree, 0))  # the tree again; then give the node time
                if not self._knows_level(tree, level, open_nodes):
                    raise ChainLag(f"tree {tree} level {level}: the splits that opened it are not served yet")
            ids = self._routed_ahead(tree, level, open_nodes)
            if ids is None:
                ids = self._route(tree, level)
            k_of_row = open_positions(ids, open_nodes, self.params.depth)
            g, h, h_vote = self._grads
            ctx = LevelContext(tree, level, list(open_nodes), k_of_row, g, h, h_vote)
            self._contexts = {k: v for k, v in self._contexts.items() if k[0] >= tree - 1}
            self._contexts[key] = ctx
            return ctx

    @property
    def _level_starts(self) -> dict[tuple[int, int], tuple[int, int]]:
        """Where each level's ``LevelStarted`` is: (block, log index); the tree records' reads fill it too."""
        return self.trees.level_starts

    @_level_starts.setter
    def _level_starts(self, starts: dict[tuple[int, int], tuple[int, int]]) -> None:
        self.trees.level_starts = starts

    def candidates(self, ctx: LevelContext) -> list[tuple[int, int]]:
        """The level's candidates as fixed by the closing of its vote (drawn candidates: as the level opened): as the
        tree records' reads found their ``CandidatesFixed`` events (usually the read that brought the level's start),
        else from their block (one log query), else from the node records (a node that does not serve the level's
        logs yet)."""
        if not ctx.candidates:
            with self.timed("chain reads"):
                found = self._fixed_candidates(ctx)
                if not all(n in found for n in ctx.open_nodes):
                    for ev in self._candidate_events(ctx):
                        if int(ev.args["tree"]) == ctx.tree:
                            found[int(ev.args["node"])] = (int(ev.args["first"]), int(ev.args["second"]))
                if all(n in found for n in ctx.open_nodes):
                    ctx.candidates = [found[n] for n in ctx.open_nodes]
                else:
                    recs = self.task.client.call_many(
                        self.task.contract, "getNode", [(self.task_id, ctx.tree, n) for n in ctx.open_nodes]
                    )
                    ctx.candidates = [(int(r[1]), int(r[2])) for r in recs]
            with self.lock:  # kept for the carry checks of the next tree (``_tree_candidates``)
                self._candidates = {t: c for t, c in self._candidates.items() if t >= ctx.tree - 1}
                self._candidates.setdefault(ctx.tree, {}).update(zip(ctx.open_nodes, ctx.candidates, strict=True))
        return ctx.candidates

    def _fixed_candidates(self, ctx: LevelContext) -> dict[int, tuple[int, int]]:
        """The tree's candidates as the tree records' reads found them (``LIGHT_EVENTS``), read once more if the
        level's are not all there: usually the read that brought the splits opening the level brought them too."""
        with self.lock:
            found = dict(self.trees.candidates.get(ctx.tree, {}))
            if not all(n in found for n in ctx.open_nodes) and self.trees.refresh():
                found = dict(self.trees.candidates.get(ctx.tree, {}))
        return found

    def _candidate_events(self, ctx: LevelContext) -> list[Event]:
        """The level's ``CandidatesFixed`` events: from the one block the task state names where it is known
        (``candidates_block``), else from the level's start. The state can be ahead of the node's log index (anvil
        answered a query of the block its state had just mined with "block height is N but requested was N + 1"):
        then none, and the caller reads the node records instead."""
        if ctx.fixed_block is None:
            start = self._level_block(ctx.tree, ctx.level)
            return self.task.client.logs(self.task.contract, ["CandidatesFixed"], self.task_id, start)
        try:
            return self.task.client.logs(
                self.task.contract, ["CandidatesFixed"], self.task_id, ctx.fixed_block, ctx.fixed_block
            )
        except Web3RPCError:
            return []

    def my_histograms(self, ctx: LevelContext) -> list[ref.NodeHistograms]:
        """This party's histograms of the level's open nodes: exact sums of its rows' fixed-point values, with its
        privacy noise in a private task (projected onto the totals it released at the parents)."""
        assert self.party is not None
        cands = self.candidates(ctx)
        with self.lock:
            if ctx.histograms is None:
                if self._fixed is None or self._grad_tree != ctx.tree:
                    self._fixed = self.party.fixed_rows(ctx.g, ctx.h, ctx.tree)
                totals = self._released_totals(ctx) if self.party.privacy.private else None
                ctx.histograms = self.party.histograms(ctx.k_of_row, cands, self._fixed, ctx.tree, ctx.level, totals)
            return ctx.histograms

    def _released_totals(self, ctx: LevelContext) -> list[tuple[int, int, int]] | None:
        """This party's totals of the level's open nodes as it released them at their parents' splits."""
        if ctx.level == 0:
            return None
        prev = self._contexts.get((ctx.tree, ctx.level - 1))
        if prev is None or prev.histograms is None:
            raise NodeError(
                f"tree {ctx.tree} level {ctx.level}: this private party no longer holds the histograms it released "
                "at the previous level (a restart mid-tree), so its totals cannot be tied to them"
            )
        released = dict(zip(prev.open_nodes, prev.histograms, strict=True))
        splits = self.trees.splits.get(ctx.tree, {})
        out = []
        for nid in ctx.open_nodes:
            feature, threshold = splits[nid // 2]
            hist = released[nid // 2]
            sides = Sides.of(hist, hist.features.index(feature), threshold)
            t = sides.left if nid % 2 == 0 else sides.right
            out.append((t.g, t.h, t.n))
        return out

    # ------------------------------------------------------------------ the training loop

    def run(self) -> None:
        """Join, wait for the start, then follow the task until it completes, riding out chain outages."""
        # The compiled kernels load (numba's target context and its cache, about a second of CPU) on a thread while
        # this party joins and waits for the requester's approval and start, instead of on the first level, where
        # every party waits for the slowest; a kernel called before they are in waits on numba's compile lock.
        threading.Thread(target=warm_up, args=(False,), name="kernel warm-up", daemon=True).start()
        self._survive(self.join)
        self._survive(self.wait_for_start)
        try:
            self._follow()
        finally:  # also when stopped (SIGTERM): the time split of a partial run is a measurement too
            if self._asking is not None:
                self._asking.shutdown(wait=False, cancel_futures=True)
            self._verifiers.close()
            self.log(f"time split: {self.time_split()}")
            sent = sorted(self.task.client.outcomes().items())
            self.log(
                "transactions (ok/failed/out of gas): "
                + ", ".join(f"{f} {ok}/{bad}/{short}" for f, (ok, bad, short) in sent)
            )

    def _follow(self) -> None:
        """Step whenever a new block arrives (and at least once a second) until the task completes."""
        url = getattr(self.task.client.w3.provider, "endpoint_uri", None)
        watch, narrow = self.task.event_watch(STEP_EVENTS), self.task.event_watch(OPENING_EVENTS)
        subscribed = self.settings.subscribe and str(url).startswith("http")
        heads = NewHeads(str(url), watch=watch, narrow=narrow) if subscribed else None
        self._heads = heads
        try:
            seen_block, stepped, relevant_seen = -1, 0.0, -2
            while True:
                # Task state changes only in new blocks: between them the node is asked nothing (a subscription) or
                # one eth_blockNumber per poll, not the several reads of a step. Subscribed, only blocks whose logs
                # bloom may hold one of STEP_EVENTS are stepped at (another party's vote or submission that does not
                # complete its step changes nothing this party acts on), or the next block after a step that has
                # to look again. Steps still run once a second for wall-clock waits (the resolution grace,
                # deadlines).
                with self.timed("waiting (for a new block)"):
                    block = self._survive(partial(self._next_block, heads, seen_block))
                now = time.monotonic()
                if heads is not None and heads.live:
                    relevant = heads.narrowly_relevant if self._quiet else heads.relevant
                else:
                    relevant = block
                fresh = block != seen_block and (relevant != relevant_seen or self._again)
                seen_block = block
                if fresh or now - stepped > 1.0:
                    stepped, relevant_seen, self._again = now, relevant, False
                    if self._survive(self.step):
                        break
        finally:
            self._heads = None
            if heads is not None:
                heads.close()

    def _next_block(self, heads: NewHeads | None, seen: int) -> int:
        """The latest block once it is past ``seen``, or ``seen`` after up to a second (subscribed) or one poll."""
        if heads is not None and heads.live and seen >= 0:
            found = heads.wait(seen, timeout=1.0)
            if found is not None or heads.live:
                return seen if found is None else found
        block = self.task.client.block_number
        if block == seen:
            time.sleep(self.settings.poll_seconds)
        return block

    def _latest_block(self) -> int:
        """The latest block: as the subscription announced it, else asked of the node (one request). For deadlines;
        incremental event reads go to the node's latest (``read_bound``)."""
        announced = self._announced_latest()
        return announced if announced >= 0 else int(self.task.client.block_number)

    def _announced_latest(self) -> int:
        """The latest block the subscription announced; -1 without a live subscription."""
        heads = self._heads
        return heads.latest if heads is not None and heads.live else -1

    def _announced(self) -> int:
        """The latest announced block that may hold one of ``STEP_EVENTS`` (``NewHeads.relevant``); -1 without a live
        subscription. The task's status, tree, level and phase change only in such blocks."""
        heads = self._heads
        return heads.relevant if heads is not None and heads.live else -1

    def _survive(self, action: Callable[[], Any]) -> Any:
        """Run ``action``; while the chain is unreachable, retry with backoff up to ``chain_outage_seconds``."""
        down_since: float | None = None
        while True:
            try:
                result = action()
                if down_since is not None:
                    self.log(f"chain reachable again after {time.monotonic() - down_since:.1f} s")
                return result
            except CHAIN_DOWN as exc:
                now = time.monotonic()
                if down_since is None:
                    down_since = now
                    self.log(f"chain unreachable ({type(exc).__name__}); retrying")
                elif now - down_since > self.settings.chain_outage_seconds:
                    raise NodeError(f"chain unreachable for {now - down_since:.0f} s") from exc
                self._forget_recent_chain()
                time.sleep(min(2.0, 0.2 + (now - down_since) / 10))

    def _forget_recent_chain(self) -> None:
        """What this party remembers of the chain's latest blocks is read again after an outage: a transaction may
        have landed unseen, and a node that restarted may have lost blocks this party saw (anvil saves its state
        when it stops, so a vote mined just before can be gone: every party then believed it had voted, and failed
        its submission with ``DidNotVote`` once the others closed the step; the subscription's announced head is
        taken again from the node, ``NewHeads.latest``)."""
        self.task.client.forget_nonces()
        with self.lock:
            self._fresh_from = None
            self._seen.clear()
            self._ahead.clear()
            self._pending_ahead = None
            if self.relay is not None:
                self.relay.forget_nonce()
            self._relayed = set()
            self._handed = {}
            # block numbers this party noted may now be past the node's head, or name blocks mined again: the level
            # starts and the tree records are read again from the start (keyed records: re-reading is idempotent)
            self._level_scan = 0
            self.trees.forget_recent()

    def step(self) -> bool:
        """One look at the chain and whatever this party owes the current step; True once the task completed."""
        self._quiet = False
        announced = self._announced()
        with self.timed("chain reads"):
            st = self.task.state(self.task_id)
        self._state = (announced, st) if announced >= 0 else None
        if self.relay is not None:
            self.relay.inbox.note_tree(st.tree)
        if st.status == Status.TRAINING and self._fresh_from is None:
            # the levels this process follows from their start; a resolving level's next one (after a tree's last
            # level, the next root) may already hold this party's votes sent ahead (before a restart or an outage),
            # so it is not one of them
            self._fresh_from = (st.tree, st.level + 1)
            if st.phase == Phase.RESOLVING:  # the next level's or, the tree ending, the next root's votes
                self._fresh_from = (st.tree + 1, 1)
        if st.status == Status.COMPLETED:
            total = ref.from_fixed(self.task.contribution(self.task_id, self.address))
            self.log(f"task completed; this party's contribution {total:.6f}")
            return True
        if st.status != Status.TRAINING:
            raise NodeError(f"task {self.task_id} is {st.status.name.lower()}")
        try:
            with self.timed("computing (gradients, routing)"):
                ctx = self.context(st.tree, st.level, st.open_nodes())
        except ChainLag as exc:
            self.log(f"{exc}; looking again")
            self._again = True
            return False
        now = time.monotonic()
        if st.phase == Phase.VOTING:
            if not self.excluded and not self._has(["VotesSubmitted"], st.tree, st.level):
                self._vote(ctx)
            elif self._close_due(st, now):
                self._try("closeStep", self.task.close_step)
            if st.level == 0:
                self._prefetch_carries(st.tree)
        elif st.phase == Phase.HISTOGRAMS:
            ctx.fixed_block = candidates_block(st, self.cfg.step_blocks)
            drawn = ref.draws(st.tree, self.cfg.voted_trees)  # no vote round: the level opened in this step
            handed = self._handed.get((st.tree, st.level))
            # handed to the relayer: its batch closes the step, or the patience runs out
            if handed is None or now - handed >= self.settings.relay_patience_seconds:
                voted = (drawn and not self.excluded) or self._has(["VotesSubmitted"], st.tree, st.level)
                done = ctx.refused or self._has(["HistogramsSubmitted", "HistogramsDeclined"], st.tree, st.level)
                if voted and not done:
                    if handed is not None:
                        self.log(
                            f"tree {st.tree} level {st.level}: the histograms handed over are not on chain; sending"
                        )
                        del self._handed[(st.tree, st.level)]
                        self._own_submission.add((st.tree, st.level))  # not to the same relayer again
                        if self.relay is not None:
                            self.relay.forget_nonce()
                    self._send_histograms(ctx, st.step_deadline)
                elif self._close_due(st, now):
                    self._try("closeStep", self.task.close_step)
            self._vote_ahead_early(ctx)
            self._relay_histograms(ctx)
            self._quiet = self._owes_nothing_more(ctx)
        else:
            started = self._resolving_since.setdefault((st.tree, st.level), now)
            # the votes first, not waited for: the resolution goes in the same block, after them, and the one that
            # opens the next level finds the ballot; relayed, the relayer sends them all before its resolution
            self._vote_ahead(ctx)
            anyone = now - started > self.settings.resolve_grace_seconds
            if self._relay_ballots(ctx) or anyone:
                self._resolve(ctx, st.resolved_mask, anyone)
            self._settle_ahead()
        return False

    def _prefetch_carries(self, tree: int) -> None:
        """Read what every other party's previous tree allows of its root (``carry_of``) while the root's votes are
        out, once per party and tree: the first endorsement request of the tree then finds it cached, where reading
        the previous tree's submissions in the request was on the critical path of the level. A root whose ballots
        all came ahead has no vote round: its requests read the carries (a thread of their own for this measured
        within the noise)."""
        for p in self.parties:
            if p == self.address or (p, tree) in self._prefetched:
                continue
            self._prefetched = {k for k in self._prefetched if k[1] >= tree} | {(p, tree)}
            with suppress(ChainLag):  # the endorsement request reads it again
                self.carry_of(p, tree)

    def _close_due(self, st: TaskState, now: float) -> bool:
        """Whether this party, with nothing of its own to send in the step, should try closing it now (at most every
        four polls). The vote or submission that completes a step closes it, so a party closes one past its
        deadline (the next block is the first where the contract allows it: someone stayed silent), or once after the
        grace for a step no transaction completes (complete when it opened: no ballots, nobody taking part). Trying
        at every poll, as before, cost a reverting dry run per party and poll."""
        if now - self._last_attempt <= 4 * self.settings.poll_seconds:
            return False
        key = (st.tree, st.level, int(st.phase))
        since = self._step_since.setdefault(key, now)
        if self._latest_block() < st.step_deadline:
            if now - since <= self.settings.resolve_grace_seconds or key in self._closes_tried:
                return False
            self._closes_tried = {k for k in self._closes_tried if k[0] >= st.tree - 1} | {key}
            self._step_since = {k: v for k, v in self._step_since.items() if k[0] >= st.tree - 1}
        self._last_attempt = now
        return True

    def _has(self, names: list[str], tree: int, level: int) -> bool:
        """Whether this party's event for (tree, level) is already on chain (the restart check); once seen, the
        answer cannot change, so it is remembered."""
        key = (names[0], tree, level)
        if key in self._seen:
            return True
        early_root = names[0] == "VotesSubmitted" and level == 0 and tree in self._early_roots
        relayed = (names[0] == "VotesSubmitted" and (tree, level) in self._relayed) or (
            names[0] == "HistogramsSubmitted" and (tree, level) in self._handed
        )
        if relayed and self._taken_on_chain(names[0], tree, level):
            self._seen.add(key)
            return True
        if self._fresh_from is not None and (tree, level) >= self._fresh_from and not early_root and not relayed:
            return False  # followed from its start by this process: its own event would be in _seen
        # votes sent ahead landed while the level before resolved (a root's: the tree before's last level)
        since = (tree, level)
        if names[0] == "VotesSubmitted" and since != (0, 0):
            since = (tree, level - 1) if level > 0 else (tree - 1, self.params.depth - 1)
        start = self._level_block(*since)
        with self.timed("chain reads"):
            events = self.task.client.logs(self.task.contract, names, self.task_id, start)
        # a root ballot sent where this party computed the tree before stopped counts only if sent after the start
        # of that tree's last level (log order: on a network that mines at intervals the two can share a block)
        after = (0, -1)
        if early_root:
            with self.lock:
                after = max((at for k, at in self._level_starts.items() if k[0] == tree - 1), default=after)
        for ev in events:
            a = ev.args
            if int(a["tree"]) == tree and int(a["level"]) == level and str(a["party"]) == self.address:
                if early_root and (ev.block_number, ev.log_index) < after:
                    continue
                self._seen.add(key)
                return True
        return False

    def _taken_on_chain(self, name: str, tree: int, level: int) -> bool:
        """Whether the tree records show this party's relayed call of ``name`` at (tree, level) landed, without a read
        of its own: histograms, if the level's ``HistogramsClosed`` marks this party; a ballot sent ahead, if the
        transaction that opened the level also closed its voting (it took a ballot from every party taking part; a
        step closed at its deadline closes blocks after it opened)."""
        with self.lock:
            if name == "HistogramsSubmitted":
                mask = self.trees.closed.get((tree, level))
                return mask is not None and bool((mask >> self.index) & 1)
            start = self.trees.level_starts.get((tree, level))
            closed = self.trees.voting_closed.get((tree, level))
        return start is not None and closed == start[0]

    def _level_block(self, tree: int, level: int) -> int:
        """The block where (tree, level) started, so that event queries cover one level, not the whole task. While
        its ``LevelStarted`` is not served yet (the node's log index lags its state), the start of the latest earlier
        level known: a bound that holds, where block 0 made every such read scan the whole chain."""
        key = (tree, level)
        with self.lock:  # the tree records' reads add to the same starts, from either thread
            if key not in self._level_starts:
                latest, counted = read_bound(self._announced_latest(), self.task.client)
                # the tree records' reads found every start before their last blocks
                start = max(0, max(self._level_scan, self.trees.next_block) - RESCAN_BLOCKS)
                for ev in self.task.client.logs(self.task.contract, ["LevelStarted"], self.task_id, start, latest):
                    at = (ev.block_number, ev.log_index)
                    self._level_starts[(int(ev.args["tree"]), int(ev.args["level"]))] = at
                self._level_scan = max(self._level_scan, counted + 1)
            found = self._level_starts.get(key)
            if found is not None:
                return found[0]
            return max((at[0] for k, at in self._level_starts.items() if k < key), default=0)

    def _try(self, what: str, fn: Callable[[LocalAccount, int], Any]) -> bool:
        try:
            with self.timed("transactions"):
                fn(self.account, self.task_id)
            return True
        except ContractRevert as exc:
            if exc.name not in ("StepStillOpen", "WrongPhase", "WrongStatus"):
                self.log(f"{what} reverted: {exc}")
            return False

    def _vote(self, ctx: LevelContext) -> None:
        assert self.party is not None
        if self.relay is not None:
            # a vote in the round: a ballot handed over was not taken (possibly one for a level that never opened),
            # so which of this party's requests the forwarder used is its to say
            self.relay.forget_nonce()
        with self.timed("computing (votes)"):
            votes = self.party.votes(ctx.k_of_row, len(ctx.open_nodes), ctx.g, ctx.h_vote, ctx.tree, ctx.level)
        try:
            with self.timed("transactions"):
                res = self.task.submit_votes(self.account, self.task_id, ctx.tree, ctx.level, votes.tolist())
            self._seen.add(("VotesSubmitted", ctx.tree, ctx.level))  # no log query to learn what it just did
            self.log(f"tree {ctx.tree} level {ctx.level}: voted on {len(ctx.open_nodes)} nodes (gas {res.gas_used})")
        except ContractRevert as exc:
            if exc.name == "Excluded":
                self.excluded = True
                self.log(
                    f"tree {ctx.tree} level {ctx.level}: out of the task (a step without accepted histograms); "
                    "verifying and resolving only"
                )
                return
            if exc.name == "AlreadyVoted":
                self._seen.add(("VotesSubmitted", ctx.tree, ctx.level))
            if exc.name in ("AlreadyVoted", "WrongPhase", "StepDeadlinePassed"):
                self.log(f"tree {ctx.tree} level {ctx.level}: vote not taken ({exc.name})")
                return
            raise

    def _send_histograms(self, ctx: LevelContext, deadline: int) -> None:
        with self.timed("computing (histograms)"):
            hists = self.my_histograms(ctx)
        need = quorum(len(self.parties), self.cfg.quorum_num, self.cfg.quorum_den)
        with self.timed("endorsement round trips"):
            endorsements, refusals = self._collect_endorsements(ctx, hists, need, deadline)
        if endorsements is None:
            ctx.refused = True
            self.log(
                f"tree {ctx.tree} level {ctx.level}: fewer than {need} endorsements; declining "
                f"({'; '.join(refusals) or 'no answer'})"
            )
            self._decline(ctx)
            return
        parts = histogram_parts(len(hists), self.params.nbins, ctx.level, len(endorsements))
        relayed = len(parts) == 1 and self.relay is not None and (ctx.tree, ctx.level) not in self._own_submission
        if relayed and self._hand_over_histograms(ctx, hists, endorsements):
            return
        committed = 0
        if len(parts) > 1:
            with self.timed("chain reads"):  # a restart half-way through a wide level resumes after its parts
                start = self._level_block(ctx.tree, ctx.level)
                committed = self.task.committed_nodes(
                    self.task_id, ctx.tree, ctx.level, self.address, self.params.nbins, start
                )
        try:
            with self.timed("transactions"):
                res = self.task.submit_histograms(
                    self.account, self.task_id, ctx.tree, ctx.level, hists, endorsements, committed
                )
            self._seen.add(("HistogramsSubmitted", ctx.tree, ctx.level))
            self.log(
                f"tree {ctx.tree} level {ctx.level}: histograms submitted with {need} endorsements (gas {res.gas_used})"
            )
        except ContractRevert as exc:
            if exc.name in RULE_ERRORS:
                ctx.refused = True
                self.log(f"tree {ctx.tree} level {ctx.level}: the contract refuses the histograms ({exc}); declining")
                self._decline(ctx)
                return
            if exc.name == "Excluded":  # drawn candidates: the first sign that this party is out of the task
                self.excluded = True
                self.log(f"tree {ctx.tree} level {ctx.level}: out of the task; verifying and resolving only")
                return
            if exc.name == "AlreadySubmitted":
                self._seen.add(("HistogramsSubmitted", ctx.tree, ctx.level))
            if exc.name in ("AlreadySubmitted", "WrongPhase", "StepDeadlinePassed"):
                self.log(f"tree {ctx.tree} level {ctx.level}: histograms not taken ({exc.name})")
                return
            raise

    def _decline(self, ctx: LevelContext) -> None:
        """Step aside for the level's histograms so that the others need not wait for the deadline; the party is
        then out of the task."""
        self.excluded = True
        try:
            with self.timed("transactions"):
                self.task.decline_histograms(self.account, self.task_id, ctx.tree, ctx.level)
        except ContractRevert as exc:
            if exc.name not in ("AlreadySubmitted", "WrongPhase", "WrongStep", "StepDeadlinePassed", "Excluded"):
                raise

    def _collect_endorsements(
        self, ctx: LevelContext, hists: list[ref.NodeHistograms], need: int, deadline: int
    ) -> tuple[list[Endorsement] | None, list[str]]:
        """Ask every other party until ``need`` signatures arrive; parties not yet at this step are asked again.
        Returns the endorsements to submit (``node.protocol.endorsement.choose``: the ``need`` with the largest
        credit), or None short of the quorum, and the refusals' reasons."""
        body = {
            "task": self.task_id,
            "tree": ctx.tree,
            "level": ctx.level,
            "party": self.address,
            "nodes": [[str(v) for v in block] for block in _blocks(hists)],
        }
        message = json.dumps(body)  # once for every verifier (a wide level's is about 100 KB of JSON)
        others = [p for p in self.parties if p != self.address]
        answers: dict[str, tuple[bytes, ref.Credit]] = {}
        final: dict[str, str] = {}
        started = time.monotonic()
        if self._asking is None:
            self._asking = ThreadPoolExecutor(max_workers=max(1, len(others)), thread_name_prefix="endorse-ask")
        pool = self._asking
        while True:
            pending = [p for p in others if p not in answers and p not in final]
            for p, (answer, reason, retry) in pool.map(lambda p: (p, self._ask(p, message)), pending):
                if answer is not None:
                    answers[p] = answer
                elif not retry:
                    final[p] = f"party {self.parties.index(p)}: {reason}"
            # every verifier's answer is awaited, since the credit is the quorum-th best attestation; a
            # verifier that cannot be reached is given up on once a quorum is in and the patience is spent
            if len(answers) + len(final) == len(others) or len(others) - len(final) < need:
                break
            waited = time.monotonic() - started
            if self._latest_block() > deadline or (
                len(answers) >= need and waited > self.settings.endorse_patience_seconds
            ):
                break
            time.sleep(self.settings.poll_seconds * 4)
        index = {p: self.parties.index(p) for p in answers}
        verdicts = {index[p]: Verdict(True, (), credit) for p, (_, credit) in answers.items()}
        chosen = choose(verdicts, need)
        if chosen is None:
            return None, list(final.values())
        by_index = {index[p]: p for p in answers}
        return [Endorsement(answers[by_index[i]][0], answers[by_index[i]][1]) for i in chosen[0]], list(final.values())

    def _ask(self, party: str, body: str) -> tuple[tuple[bytes, ref.Credit] | None, str, bool]:
        """((signature, credit), reason, retry later) from one verifier."""
        try:
            status, answer = self._verifiers.ask(self.endpoints[party], body)
        except NoEndorsementStream as exc:
            return None, str(exc), False
        except VerifierUnreachable as exc:
            return None, f"unreachable ({exc})", True
        if status == 200:
            credit = ref.Credit(*(int(answer["credit"][q]) for q in ("g", "h", "n")))
            return (bytes.fromhex(answer["signature"].removeprefix("0x")), credit), "", False
        return None, str(answer.get("detail", answer)), status == 409

    def _resolve(self, ctx: LevelContext, resolved_mask: int, anyone: bool) -> None:
        """Resolve this party's share of the level's open nodes, or any after a grace, ``resolve_batch`` nodes per
        transaction at most. The shares are runs of as many nodes as one transaction carries (``resolution_share``),
        run i going to party (i + level) mod M, run 0 to the level's relayer of ballots (``relayer_index``): a level
        of up to nine nodes is one transaction of one party, where node j to party j mod M made it up to M
        transactions, each its own block that every party wakes for."""
        base = 1 << ctx.level
        owners = self._resolvers(ctx)
        todo = [
            n
            for n, owner in zip(ctx.open_nodes, owners, strict=True)
            if not (resolved_mask >> (n - base)) & 1 and (anyone or owner == self.index)
        ]
        if not todo:
            return
        endorsed = self._endorsed_histograms(ctx)
        if endorsed is None:
            with self.timed("chain reads"):
                level_hists = self._submitted_histograms(ctx)
        else:
            level_hists = endorsed
        batch = resolution_batches(
            len(todo),
            len(level_hists),
            self.params.nbins,
            len(ctx.open_nodes),
            self._node_gas or FIRST_NODE_GAS_PER_PARTY * len(self.parties),
            max(1, self.settings.resolve_batch),
        )
        for i in range(0, len(todo), batch):
            nodes = todo[i : i + batch]
            try:
                # the first without an estimate, which ran the call several times (tens of ms of the chain's time
                # each, on the critical path of the first tree): granted twice the assumed cost, capped at a block
                limit = None if self._node_gas else 2 * FIRST_NODE_GAS_PER_PARTY * len(self.parties) * len(nodes)
                with self.timed("transactions"):
                    res = self.task.resolve_nodes(
                        self.account, self.task_id, nodes, ctx.open_nodes, level_hists, gas=limit
                    )
                # the costliest node seen so far sizes later batches (a level-closing call costs the most)
                self._node_gas = max(self._node_gas, res.gas_used // len(nodes))
            except ContractRevert as exc:
                self._again = True
                if endorsed is not None:
                    # What this party endorsed is not what was submitted (a party submitted other histograms,
                    # or did not submit): the contract checked it against the commitments; read the events.
                    ctx.from_events = True
                    self.log(
                        f"tree {ctx.tree} level {ctx.level}: resolving from the endorsed histograms failed "
                        f"({exc}); reading the submissions"
                    )
                    return
                if _fewer_histograms_than_chain(exc):
                    # The chain counts a submission whose event its node does not serve yet (its log index lags
                    # its state, notably just after a restart): the next poll reads the level's events again.
                    lagging = self._histogram_lag_since.setdefault((ctx.tree, ctx.level), time.monotonic())
                    if time.monotonic() - lagging > HISTOGRAM_LAG_SECONDS:
                        raise NodeError(
                            f"tree {ctx.tree} level {ctx.level}: the chain counts {exc.args_[0]} histogram words "
                            f"per node but its node serves events for only {exc.args_[1]} after "
                            f"{HISTOGRAM_LAG_SECONDS:.0f} s: a HistogramsSubmitted event was lost (a chain restored "
                            "from a state file written mid-block?)"
                        ) from exc
                    self.log(f"{exc}: a submission's event is not served yet; looking again")
                    return
                # Another party may have resolved one of them first, or resolved the others so that this call now
                # also closes the level and needs more gas than estimated: both are settled by looking again next
                # poll, with the resolved mask read afresh.
                failures = self._resolve_failures.get(nodes[0], 0) + 1
                self._resolve_failures[nodes[0]] = failures
                if failures > 20:
                    raise NodeError(f"resolving nodes {nodes} keeps failing: {exc}") from exc
                return

    def _resolvers(self, ctx: LevelContext) -> list[int]:
        """The party that resolves each open node of the level (``_resolve``): runs of as many nodes as one
        transaction carries (``resolution_share``), run i to party (i + level) mod M, so run 0 to the level's relayer
        (``relayer_index``)."""
        share = resolution_share(len(ctx.open_nodes), len(self.parties), self.params.nbins, self.settings.resolve_batch)
        first = relayer_index(ctx.level, len(self.parties))
        return [(first + j // share) % len(self.parties) for j in range(len(ctx.open_nodes))]

    def _vote_ahead(self, ctx: LevelContext) -> None:
        """Vote on the next level of the tree while this one resolves (``submitVotes`` ahead): two votes per open
        node, one per child, the children that do not open abstaining; at the tree's last level, or where no node of
        this one splits, on the next tree's root (``_root_ahead``).

        Why: the level's submissions fix every split (``node.protocol.resolve.level_splits``: the contract's best split
        of the aggregated histograms), so this party knows the next level's nodes and where its rows go before the chain
        resolves the level. Its votes then travel in the resolution round instead of a round of their own; when every
        party taking part voted ahead, the resolution that opens the level also closes its voting. Only a party whose
        histograms the level accepted may, from the submissions it holds (``_held_submissions``); otherwise, or if
        the transaction fails, it votes when the level opens, as before. The ballot is handed to the level's relayer
        (``_hand_over_ballot``, ``node.party.relay``), which sends every party's in one transaction; one the relayer
        does not take goes as this party's own transaction."""
        target, last = self._ahead_target(ctx)
        if self.excluded or target in self._ahead or not self._votes_on(target[0]) or not self._has_submitted(ctx):
            return
        with self.timed("chain reads"):
            submitters = self._closed_submitters(ctx)
        if submitters is None:
            return  # the level's close is not served yet: the next poll looks again
        self._ahead.add(target)
        submissions = self._held_submissions(ctx, submitters)
        if submissions is None:
            return
        self._cast_ahead(ctx, target, last, submissions, submitters)

    def _ahead_target(self, ctx: LevelContext) -> tuple[tuple[int, int], bool]:
        """(the (tree, level) a ballot sent while ``ctx`` resolves is for, whether ``ctx`` is its tree's last level
        by depth): the next level, or after the last, the next tree's root."""
        last = ctx.level + 1 >= self.params.depth
        return ((ctx.tree + 1, 0) if last else (ctx.tree, ctx.level + 1)), last

    def _vote_ahead_early(self, ctx: LevelContext) -> None:
        """Vote ahead as soon as this party handed its histograms to the relayer, from the histograms it endorsed:
        with every party taking part asking every other for endorsements, each holds the whole level before it is
        on chain, so its ballot reaches the relayer while the submissions are being sent, and the relayer sends the
        ballots and its resolution right after them, where waiting for the close on chain cost every party a
        notification round per level.

        The ballot is computed for the parties this party expects to submit (``_taking_part``), and the relayer
        sends it only if the chain accepted exactly those (``RelayedRequest.assumed``); otherwise it is left out,
        and this party votes in the level's round, as for a ballot that came too late. A party it has not received
        the histograms of within ``relay_wait_seconds`` leaves it to the close, as before."""
        if self.relay is None or (ctx.tree, ctx.level) not in self._handed:
            return
        target, last = self._ahead_target(ctx)
        if self.excluded or target in self._ahead or not self._votes_on(target[0]):
            return
        taking = self._taking_part(ctx.tree, ctx.level)
        mask = self._mask_of(taking)
        others = taking - {self.address}
        key = (ctx.tree, ctx.level)
        with self.timed("relay"), self._endorsed_changed:
            self._endorsed_changed.wait_for(
                lambda: others <= set(self._endorsed.get(key, {})), timeout=self.settings.relay_wait_seconds
            )
        submissions = self._held_submissions(ctx, mask)
        if submissions is None:
            return
        self._ahead.add(target)
        self._cast_ahead(ctx, target, last, submissions, mask, early_step=True)

    def _cast_ahead(
        self,
        ctx: LevelContext,
        target: tuple[int, int],
        last: bool,
        submissions: list[list[ref.NodeHistograms]],
        mask: int,
        early_step: bool = False,
    ) -> None:
        """Compute this party's ballot for ``target`` from the level's ``submissions`` (of the parties in ``mask``)
        and send it ahead: handed to the relayer, else as its own transaction (``early_step``: before the level's
        close, where a transaction would be refused, nothing: the close tries again)."""
        assert self.party is not None
        early = False
        with self.timed("computing (votes)"):
            ahead = self._root_ahead(ctx, submissions) if last else self._level_ahead(ctx, submissions)
            if ahead == ([], 0) and self._votes_on(ctx.tree + 1):
                # no split: the tree ends at this level, before its depth, and the next root is what opens
                target, last, early = (ctx.tree + 1, 0), True, True
                self._ahead.add(target)
                ahead = self._root_ahead(ctx, submissions)
        if ahead is None or ahead == ([], 0):
            if ahead == ([], 0) and not early_step:
                self._no_ballots.add((ctx.tree, ctx.level))  # every party computes the same: none to relay
            if last:
                self._ahead.discard(target)  # a record not served yet: the next look tries again
            return
        ballot, nodes = ahead
        if self.relay is not None and self._hand_over_ballot(ctx, target, ballot, nodes, early, mask):
            return
        if early_step:
            self._ahead.discard(target)
            return
        try:
            with self.timed("transactions"):
                pending = self.task.submit_votes_ahead(self.account, self.task_id, *target, ballot)
        except ContractRevert as exc:
            self.log(f"tree {target[0]} level {target[1]}: votes not taken ahead ({exc.name}); voting when it opens")
            return
        self._pending_ahead = (*target, nodes, pending, early)

    def _hand_over_ballot(
        self, ctx: LevelContext, target: tuple[int, int], ballot: list[int], nodes: int, early: bool, assumed: int
    ) -> bool:
        """Hand this party's ballot for ``target`` to the relayer of the level that resolves; whether it was taken
        (False: send the transaction instead)."""
        assert self.relay is not None
        with self.timed("relay"):
            signed = self.relay.request(
                "votes",
                ctx.tree,
                ctx.level,
                "submitVotes",
                (self.task_id, *target, ballot),
                vote_request_gas(len(ballot)),
                assumed,
            )
            refused = self.relay.hand_over(signed)
        if refused is not None:
            self.log(f"tree {target[0]} level {target[1]}: votes not relayed ({refused}); sending them")
            return False
        self._relayed = {k for k in self._relayed if k[0] >= ctx.tree - 1} | {target}
        if early:
            self._early_roots.add(target[0])
        return True

    def _hand_over_histograms(
        self, ctx: LevelContext, hists: list[ref.NodeHistograms], endorsements: list[Endorsement]
    ) -> bool:
        """Hand this party's endorsed histograms to the level's relayer; whether it was taken (False: submit them
        as this party's own transaction)."""
        assert self.relay is not None
        args = submit_histograms_args(self.task_id, ctx.tree, ctx.level, hists, endorsements)
        gas = histogram_request_gas(len(hists), self.params.nbins, len(endorsements))
        with self.timed("relay"):
            signed = self.relay.request("histograms", ctx.tree, ctx.level, "submitHistograms", args, gas)
            refused = self.relay.hand_over(signed)
        if refused is not None:
            self.log(f"tree {ctx.tree} level {ctx.level}: histograms not relayed ({refused}); submitting them")
            return False
        key = (ctx.tree, ctx.level)
        self._handed = {k: v for k, v in self._handed.items() if k[0] >= ctx.tree - 1} | {key: time.monotonic()}
        return True

    def _taking_part(self, tree: int, level: int) -> set[str]:
        """The parties that may send (tree, level)'s histograms, as far as this party knows: those whose histograms
        the step before accepted (its ``HistogramsClosed``), every party at the task's first step. A party that did
        not vote is among them; the relayer's wait bounds what that costs."""
        with self.lock:
            before = [k for k in self.trees.closed if k < (tree, level)]
            mask = self.trees.closed[max(before)] if before else None
        return set(self.parties) if mask is None else self._parties_in(mask)

    def _parties_in(self, mask: int) -> set[str]:
        """The parties of a submitter mask (bit p for ``parties[p]``, as ``HistogramsClosed`` marks them)."""
        return {p for i, p in enumerate(self.parties) if (mask >> i) & 1}

    def _mask_of(self, parties: Collection[str]) -> int:
        """The submitter mask of ``parties`` (``_parties_in``'s inverse)."""
        return sum(1 << i for i, p in enumerate(self.parties) if p in parties)

    def _relay_requests(
        self,
        kind: str,
        ctx: LevelContext,
        expected: set[str],
        keep: Callable[[RelayedRequest], bool] = lambda r: True,
    ) -> list[TxResult]:
        """As the level's relayer, send the requests of ``kind`` handed over for it (``RelayChannel.send``), once;
        the batches' results."""
        assert self.relay is not None
        self._mark_relayed(kind, ctx.tree, ctx.level)
        if not self.relay.inbox.holds(kind, ctx.tree, ctx.level, self.address):
            expected = expected - {self.address}
        with self.timed("relay (waiting and sending)"):
            count, results, failures = self.relay.send(
                kind, ctx.tree, ctx.level, expected, self.settings.relay_wait_seconds, keep
            )
        self._log_relayed(ctx, f"{count} {kind}" if count else "", results, failures)
        return results

    def _mark_relayed(self, kind: str, tree: int, level: int) -> None:
        """Note that this party relayed (tree, level)'s requests of ``kind``, forgetting trees before the last."""
        self._relayed_levels = {k for k in self._relayed_levels if k[1] >= tree - 1} | {(kind, tree, level)}

    def _log_relayed(self, ctx: LevelContext, what: str, results: list[TxResult], failures: list[str]) -> None:
        """Log a relayer's batches: why any failed, and what went in how many transactions (``what``, if any)."""
        for why in failures:
            self.log(f"tree {ctx.tree} level {ctx.level}: relaying failed ({why})")
        if what:
            gas = sum(r.gas_used for r in results)
            self.log(f"tree {ctx.tree} level {ctx.level}: relayed {what} in {len(results)} transactions (gas {gas})")

    def _relay_ballots(self, ctx: LevelContext) -> bool:
        """As the level's relayer (``relayer_index``), send the ballots handed over while it resolves, once every
        party taking part in the next step handed its own or ``relay_wait_seconds`` passed, before this party's
        resolution; whether this party may resolve now (False: the level's close is not served yet, and a
        resolution sent now could open the next level before the ballots)."""
        if self.relay is None or self.relay.relayer(ctx.level) != self.index:
            return True
        if ("votes", ctx.tree, ctx.level) in self._relayed_levels or not self._ballots_expected(ctx):
            return True
        with self.timed("chain reads"):
            submitters = self._closed_submitters(ctx)
        if submitters is None:
            self._again = True
            return False
        self._no_ballots = {k for k in self._no_ballots if k[0] >= ctx.tree - 1}
        expected = self._parties_in(submitters)
        # a ballot computed before the close counts only if the level accepted the submissions it assumed
        self._relay_requests("votes", ctx, expected, lambda r: r.assumed == submitters)
        return True

    def _relay_histograms(self, ctx: LevelContext) -> None:
        """As the level's relayer, send the histograms handed over, once every party taking part handed its own or
        ``relay_wait_seconds`` passed, and with them, after them, the ballots the parties computed from them
        (``_vote_ahead_early``): the last submission closes the step, and the ballots that follow are taken ahead.
        A ballot goes only if it assumed exactly the submissions sent; if one of those fails, the step stays open
        and the ballots fail too (a ballot is taken ahead only while the level resolves). Then this party resolves
        its share at once, where waiting for the block's notification cost a round per level."""
        if self.relay is None or self.relay.relayer(ctx.level) != self.index:
            return
        tree, level = ctx.tree, ctx.level
        if ("histograms", tree, level) in self._relayed_levels:
            return
        inbox = self.relay.inbox
        self._mark_relayed("histograms", tree, level)
        expected = self._taking_part(tree, level)
        if not inbox.holds("histograms", tree, level, self.address):
            expected.discard(self.address)
        wait = self.settings.relay_wait_seconds
        with self.timed("relay (waiting and sending)"):
            held = inbox.take("histograms", tree, level, expected, wait)
            senders = {r.request.sender for r in held}
            mask = self._mask_of(senders)
            ballots: list[RelayedRequest] = []
            complete = bool(held)  # every ballot due is here: this party may resolve in the same batch
            if held and self._ballots_expected(ctx):
                # a ballot of every sender, computed from exactly these submissions (one this party lacks of its own
                # comes after the close: no wait for it)
                mine = self.address not in senders or inbox.holds("votes", tree, level, self.address)
                early = inbox.wait("votes", tree, level, senders, wait) if mine else []
                complete = {b.request.sender for b in early if b.assumed == mask} == senders
                if complete:
                    self._mark_relayed("votes", tree, level)
                    # taken again, as the wait saw them: a ballot offered meanwhile (or replaced) is checked too
                    ballots = [b for b in inbox.take("votes", tree, level, senders, 0.0) if b.assumed == mask]
                # else the ballots go after the close (``_relay_ballots``), those computed early with them
            own = [r for r in held + ballots if r.request.sender == self.address]
            folded = self._folded_resolution(ctx, senders) if complete else None
            results, failures = self.relay.send_requests(held + ballots + ([folded] if folded else []))
        self._log_relayed(ctx, f"{len(held)} histograms and {len(ballots)} ballots" if held else "", results, failures)
        executed = {
            int(ev.args["nonce"])
            for r in results
            for ev in r.events_named("ExecutedForwardRequest")
            if str(ev.args["signer"]) == self.address and ev.args["success"]
        }
        if any(r.request.nonce not in executed for r in own) or (folded and folded.request.nonce not in executed):
            self.relay.forget_nonce()  # one of its own did not land: the forwarder says which nonce is next
        closed = [ev for r in results for ev in r.events_named("HistogramsClosed")]
        if folded is not None and folded.request.nonce not in executed and closed:
            self._node_gas *= 2  # the step closed, yet the resolution failed: short of gas, most likely
        if not closed:
            return  # a party's submission is missing: the step closes later, and the level resolves as it used to
        with self.lock:  # the close as the tree records will read it: the resolution below needs no read for it
            self.trees.closed[(tree, level)] = int(closed[-1].args["submitterMask"])
        self._vote_ahead(ctx)  # a ballot not computed early: relayed after the close
        if (folded is None or folded.request.nonce not in executed) and self._relay_ballots(ctx):
            self._resolve(ctx, 0, False)
        self._settle_ahead()

    def _folded_resolution(self, ctx: LevelContext, senders: set[str]) -> RelayedRequest | None:
        """This party's resolution of its share of the level (``_resolve``'s run 0) as its own request, to follow the
        submissions and ballots in the relayer's batch: the level then takes one transaction, where the resolution
        was a block of its own. Only once this party knows what a node costs (its first resolution goes as its own
        transaction, ``_node_gas``), when the share fits one call, and from the submissions the batch sends. The
        request grants twice the costliest node seen per node; one that fails (short of gas, say) leaves the share
        to ``_resolve``, as before."""
        assert self.relay is not None
        if self._node_gas == 0:
            return None
        held = self._held_by_party(ctx)
        if held is None or set(held) != senders:
            return None
        level_hists = [held[p] for p in self.parties if p in held]
        owners = self._resolvers(ctx)
        # run 0, this party's as the relayer (a later run of its, on a level of more runs than parties, waits)
        todo = [
            n for n, owner in takewhile(lambda pair: pair[1] == owners[0], zip(ctx.open_nodes, owners, strict=True))
        ]
        batch = resolution_batches(
            len(todo),
            len(level_hists),
            self.params.nbins,
            len(ctx.open_nodes),
            self._node_gas,
            max(1, self.settings.resolve_batch),
        )
        if batch < len(todo):
            return None
        gas = min(BLOCK_GAS_LIMIT // 2, 2 * self._node_gas * len(todo) + 200_000)
        args = resolve_nodes_args(self.task_id, todo, ctx.open_nodes, level_hists)
        folded = self.relay.request("resolution", ctx.tree, ctx.level, "resolveNodes", args, gas)
        self.relay.keep_own()
        return folded

    def _ballots_expected(self, ctx: LevelContext) -> bool:
        """Whether ballots are sent ahead while ``ctx`` resolves: the next level votes, and some node splits (or the
        next tree's root votes)."""
        _, last = self._ahead_target(ctx)
        return (ctx.tree, ctx.level) not in self._no_ballots and self._votes_on(ctx.tree + 1 if last else ctx.tree)

    def _owes_nothing_more(self, ctx: LevelContext) -> bool:
        """Whether this party handed the relayer all it owes the level, and resolves none of it (``_quiet``)."""
        if (
            self.relay is None
            or self.relay.relayer(ctx.level) == self.index
            or (ctx.tree, ctx.level) not in self._handed
        ):
            return False
        target, _ = self._ahead_target(ctx)
        if self._votes_on(target[0]) and target not in self._relayed:
            return False  # a ballot still to send when the level closes (or the next root's, if it stops early)
        return self.index not in self._resolvers(ctx)

    def _has_submitted(self, ctx: LevelContext) -> bool:
        """Whether this party's histograms of the level are on chain, as far as it knows without a read: sent as its
        own transaction, or handed to the relayer and marked by the level's ``HistogramsClosed``."""
        key = (ctx.tree, ctx.level)
        if ("HistogramsSubmitted", *key) in self._seen:
            return True
        if key not in self._handed:
            return False
        with self.timed("chain reads"):
            mask = self._closed_submitters(ctx)
        if mask is None or not (mask >> self.index) & 1:
            return False
        self._seen.add(("HistogramsSubmitted", *key))
        return True

    def _votes_on(self, tree: int) -> bool:
        """Whether tree ``tree`` exists and votes (a drawn tree has no ballots)."""
        return tree < self.cfg.trees and not ref.draws(tree, self.cfg.voted_trees)

    def _level_ahead(
        self, ctx: LevelContext, submissions: list[list[ref.NodeHistograms]]
    ) -> tuple[list[int], int] | None:
        """The ballot of the tree's next level sent ahead and the number of its nodes; ``([], 0)`` where no node
        splits (the tree ends at this level), None where the contract would revert the resolution."""
        assert self.party is not None
        nxt = ctx.level + 1
        try:
            splits = level_splits(submissions, self.candidates(ctx), self.cfg.params())
        except ref.FixedPointOverflow:
            return None  # the contract reverts this level's resolution: nothing opens
        local = {n: (s.feature, s.threshold) for n, s in zip(ctx.open_nodes, splits, strict=True) if s is not None}
        next_open = sorted(c for n in local for c in (2 * n, 2 * n + 1))
        if not next_open:
            return [], 0  # no split: the next level of the tree never opens
        # each row's node at this level from its place in the context (0 for a row in a leaf, which no split
        # moves), then one routing step: not the whole tree routed again from its root
        nodes = np.asarray(ctx.open_nodes, dtype=np.int64)
        at = np.where(ctx.k_of_row >= 0, nodes[np.maximum(ctx.k_of_row, 0)], 0)
        ids = route(self.party.rows.slots, at, local)
        self._routed = (ctx.tree, nxt, tuple(next_open), local, ids)  # the next level's context reuses these
        k_of_row = open_positions(ids, next_open, self.params.depth)
        votes = self.party.votes(k_of_row, len(next_open), ctx.g, ctx.h_vote, ctx.tree, nxt)
        mine = dict(zip(next_open, votes.tolist(), strict=True))
        return [mine.get(c, ref.ABSTAIN) for n in ctx.open_nodes for c in (2 * n, 2 * n + 1)], len(next_open)

    def _root_ahead(
        self, ctx: LevelContext, submissions: list[list[ref.NodeHistograms]]
    ) -> tuple[list[int], int] | None:
        """The next tree's root ballot, sent ahead at this tree's last level (by depth: the chain surely ends the
        tree there and takes it) or where no node of the level splits (the chain takes it if its resolution agrees:
        ``_early_roots``), None where the tree's leaves are not all known yet.

        The level's submissions give its splits and leaves as the contract will make them (``tree_end``, with each
        node's totals from its parent's split on chain); with the leaves of the levels before, every row's score
        after the tree, hence the next gradients and this party's root vote: the vote it would cast when the root
        opens, where ``context`` computes the same gradients from the chain's leaves."""
        assert self.party is not None
        tree = ctx.tree
        chain_totals = self.trees.totals.get(tree, {})
        inherited = [None if n == 1 else chain_totals.get(n) for n in ctx.open_nodes]
        if any(t is None for n, t in zip(ctx.open_nodes, inherited, strict=True) if n != 1):
            return None  # a parent's split is not served yet
        end = tree_end(submissions, self.candidates(ctx), ctx.open_nodes, inherited, self.cfg.params())
        if end is None:
            return None
        splits, leaves = end
        leaves = {**self.trees.leaves.get(tree, {}), **leaves}
        ids = route(self.party.rows.slots, self._route(tree, ctx.level), splits)
        if not set(np.unique(ids).tolist()) <= set(leaves):
            return None  # a leaf of a level before is not served yet
        values = np.zeros(1 << (self.params.depth + 1))
        for nid, v in leaves.items():
            values[nid] = v / ref.ONE
        _, _, h_vote = grads = self.party.gradients(self.party.score + values[ids])
        root = np.zeros(self.party.n_rows, dtype=np.int64)  # every row at the root, the one open node
        return [int(v) for v in self.party.votes(root, 1, grads[0], h_vote, tree + 1, 0)], 1

    def _settle_ahead(self) -> None:
        """Wait for the votes sent ahead (``_vote_ahead``), once this party's resolution of the round is sent."""
        if self._pending_ahead is None:
            return
        tree, level, nodes, pending, early = self._pending_ahead
        try:  # a lost connection leaves it pending: the outage's recovery forgets it and reads the chain again
            with self.timed("transactions"):
                res = pending()
        except ContractRevert as exc:
            self._pending_ahead = None
            self.log(f"tree {tree} level {level}: votes not taken ahead ({exc.name}); voting when the level opens")
            return
        except TimeoutError:
            self._pending_ahead = None
            self.log(f"tree {tree} level {level}: votes sent ahead not mined yet; the chain says later if they were")
            self.task.client.forget_nonces()  # the next transaction asks the node for this sender's nonce
            if self._fresh_from is not None:  # they may still be mined and counted: that level's record is read
                self._fresh_from = max(self._fresh_from, (tree, level + 1))
            return
        self._pending_ahead = None
        if early:
            # counted only if the chain ends the tree where this party computed it would: ``_has`` reads the record
            self._early_roots.add(tree)
        else:
            self._seen.add(("VotesSubmitted", tree, level))
        self.log(f"tree {tree} level {level}: voted ahead on {nodes} nodes (gas {res.gas_used})")

    def _closed_submitters(self, ctx: LevelContext) -> int | None:
        """Which parties' histograms the level accepted, as its ``HistogramsClosed`` marks them (bit ``p`` for
        ``parties[p]``), None while not served: from the tree records' reads (``LIGHT_EVENTS``), read once more if
        it is not there yet, then from the level's start."""
        key = (ctx.tree, ctx.level)
        with self.lock:
            mask = self.trees.closed.get(key)
            if mask is None and self.trees.refresh():
                mask = self.trees.closed.get(key)
        if mask is not None:
            return mask
        # not in the records: the node served it late, past the blocks the records' reads take again
        start = self._level_block(ctx.tree, ctx.level)
        for ev in self.task.client.logs(self.task.contract, ["HistogramsClosed"], self.task_id, start):
            if (int(ev.args["tree"]), int(ev.args["level"])) == (ctx.tree, ctx.level):
                return int(ev.args["submitterMask"])
        return None

    def _held_submissions(self, ctx: LevelContext, submitters: int) -> list[list[ref.NodeHistograms]] | None:
        """The level's submissions in party order as this party holds them: its own and those it endorsed, when they
        are from exactly the parties the chain accepted (``submitters``, the ``HistogramsClosed`` mask); else None
        (a party it endorsed did not get in, or one it refused did).

        Not read back from the events: a level's histograms are megabytes, and reading them cost more than the
        round the votes save (measured on anvil). What this party holds of another is what that party showed it;
        one that submitted other histograms, endorsed by others, would make this ballot a vote on nodes the chain
        does not open as assumed: counted like any vote for the candidates, while the chain's splits and
        resolution stay the contract's."""
        held = self._held_by_party(ctx)
        accepted = self._parties_in(submitters)
        if held is None or set(held) != accepted:
            return None
        return [held[p] for p in self.parties if p in held]

    def _endorsed_histograms(self, ctx: LevelContext) -> list[list[ref.NodeHistograms]] | None:
        """The level's submissions as this party knows them without reading the chain, in party order
        (``_held_by_party``)."""
        held = self._held_by_party(ctx)
        return None if held is None else [held[p] for p in self.parties if p in held]

    def _held_by_party(self, ctx: LevelContext) -> dict[str, list[ref.NodeHistograms]] | None:
        """The level's submissions as this party knows them without reading the chain: its own histograms if it
        submitted, and the histograms it endorsed of every other party, by party. None where that cannot be the
        whole level (this party endorsed nobody, after a restart, or a resolution from them failed). The contract
        checks every party's histograms against its commitment, so a wrong guess reverts and changes nothing."""
        endorsed = self._endorsed.get((ctx.tree, ctx.level), {})
        if ctx.from_events or not endorsed:
            return None
        out = {}
        for p in self.parties:
            if p == self.address:
                mine = ("HistogramsSubmitted", ctx.tree, ctx.level) in self._seen or (
                    ctx.tree,
                    ctx.level,
                ) in self._handed
                if mine and ctx.histograms is not None:
                    out[p] = ctx.histograms
            elif p in endorsed:
                out[p] = endorsed[p]
        return out

    def _submitted_histograms(self, ctx: LevelContext) -> list[list[ref.NodeHistograms]]:
        """Every submitting party's level histograms, in party order, from the HistogramsSubmitted events."""
        cands = self.candidates(ctx)
        nb = self.params.nbins
        events = self.task.client.logs(
            self.task.contract, list(HISTOGRAM_EVENTS), self.task_id, self._level_block(ctx.tree, ctx.level)
        )
        by_party = {
            p: w for (p, tree, level), w in submitted_words(events).items() if (tree, level) == (ctx.tree, ctx.level)
        }
        out = []
        for p in self.parties:
            if p in by_party:
                out.append(_unblock(by_party[p], cands, nb))
        return out

    # ------------------------------------------------------------------ endorsing others

    def endorse(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Check another party's level histograms against this party's estimate; (HTTP status, JSON body)."""
        if self.party is None:
            return 409, {"detail": "this party has not started training yet"}
        if int(body.get("task", -1)) != self.task_id:
            return 422, {"detail": f"this node serves task {self.task_id} only"}
        party = str(body.get("party", ""))
        if party == self.address:
            return 422, {"detail": "a party cannot endorse itself"}
        if party not in self.parties:
            return 403, {"detail": f"{party} is not an approved member of task {self.task_id}"}
        tree, level = int(body.get("tree", -1)), int(body.get("level", -1))
        cached = self._state
        if (
            cached is not None
            and cached[0] == self._announced()
            and cached[1].status == Status.TRAINING
            and (cached[1].tree, cached[1].level, cached[1].phase) == (tree, level, Phase.HISTOGRAMS)
        ):
            st = cached[1]  # the main loop's read, and no step-changing block since: the chain's step as of now
        else:
            st = self.task.state(self.task_id)
        if st.status != Status.TRAINING or (st.tree, st.level) != (tree, level) or st.phase != Phase.HISTOGRAMS:
            return 409, {
                "detail": f"not the current step (the task is at tree {st.tree} level {st.level}, "
                f"phase {st.phase.name.lower()})"
            }
        try:
            ctx = self.context(tree, level, st.open_nodes())
        except ChainLag as exc:
            return 409, {"detail": str(exc)}
        ctx.fixed_block = candidates_block(st, self.cfg.step_blocks)
        cands = self.candidates(ctx)
        nb = self.params.nbins
        try:
            blocks = [list(map(int, block)) for block in body["nodes"]]
        except (KeyError, TypeError, ValueError):
            return 422, {"detail": "nodes must be a list of integer lists"}
        if len(blocks) != len(ctx.open_nodes) or any(len(b) != 6 * nb for b in blocks):
            return 422, {"detail": f"expected {len(ctx.open_nodes)} node blocks of {6 * nb} integers"}
        hists = _unblock([v for b in blocks for v in b], cands, nb)
        try:  # nothing the contract would refuse is endorsed (the inherited totals it checks itself)
            for hist, node in zip(hists, ctx.open_nodes, strict=True):
                check_node(hist, node, bounds_of(self.cfg.objective, self.cfg.epsilon), tree == 0)
        except (HistogramRuleError, ref.FixedPointOverflow) as exc:
            return 422, {"detail": f"the contract refuses these histograms: {exc}"}
        if level == 0:
            try:
                carry = self.carry_of(party, tree)
            except ChainLag as exc:
                return 409, {"detail": str(exc)}
            try:
                if carry is not None:
                    carry.check(candidate_totals(hists[0], 0))
            except CarryError as exc:
                return 422, {"detail": f"the verifiers refuse these histograms: {exc}"}
        assert self.party is not None
        # below a tree's root the statistical rule signs what keeps the exact rules: no claims to convert, and no
        # wait for the lock the main loop holds while it builds a context
        reads = reads_claims(self.rule, level == 0)
        with self.lock if reads else nullcontext():
            verdict, _ = decide(
                self.rule,
                self.party.rows,
                ctx.k_of_row,
                np.asarray(cands, dtype=np.int64),
                ctx.g,
                ctx.h,
                self.estimators[self.parties.index(party)],
                Claims.from_messages(hists) if reads else None,
                root=level == 0,
            )
        if not verdict.sign:
            return 422, {"detail": "; ".join(verdict.reasons), "z": verdict.z}
        root = merkle_root([node_hash(h) for h in hists])
        with self.lock:
            self._endorsed = {k: v for k, v in self._endorsed.items() if k[0] >= tree - 1}
            self._endorsed.setdefault((tree, level), {})[party] = hists
            self._endorsed_roots = {k: v for k, v in self._endorsed_roots.items() if k[0] >= tree - 1}
            self._endorsed_roots.setdefault((tree, level), {})[party] = root
            self._endorsed_changed.notify_all()
        digest = endorsement_digest(
            self.task.client.chain_id, self.task.address, self.task_id, tree, level, party, root, verdict.credit
        )
        return 200, {
            "signature": "0x" + sign_endorsement(self.account.key, digest).hex(),
            "credit": {"g": str(verdict.credit.g), "h": str(verdict.credit.h), "n": str(verdict.credit.n)},
            "z": verdict.z,
        }

    def carry_of(self, party: str, tree: int) -> Carry | None:
        """What ``party``'s tree ``tree - 1`` allows of its root at ``tree`` (``ledger.spec.tree_carry``), from the
        chain's
        records: its submitted histograms of every level of that tree, the tree's splits and leaf values. None where
        the rule does not apply (the first tree, a private task, the overlap rule); cached per party and tree."""
        if tree == 0 or not applies(self.rule.rule, self.cfg.objective, self.cfg.epsilon > 0):
            return None
        key = (party, tree)
        with self.lock:  # the main loop iterates the tree records this refreshes
            if key not in self._carries:
                self._carries = {k: v for k, v in self._carries.items() if k[1] >= tree}
                self._carries[key] = self._read_carry(party, tree)
            return self._carries[key]

    def _read_carry(self, party: str, tree: int) -> Carry:
        """``carry_of`` from the chain's records (the caller holds the lock): ``party``'s histograms of the previous
        tree as this party endorsed them where every level's endorsed root is the root ``party`` submitted (one read
        of the events' heads per tree), else as the events carry them (decoding every level's words)."""
        prev = tree - 1
        with self.timed("chain reads"):
            self.trees.refresh()
            splits = self.trees.splits.get(prev, {})
            leaves = self.trees.leaves.get(prev, {})
            levels = self._endorsed_levels(party, prev, splits, leaves)
            if levels is None:
                levels = self._submitted_levels(party, prev, splits, leaves)
            carry = Carry.of(
                self.cfg.objective,
                candidate_totals(levels[0][1], 0),
                leaf_sums(levels, splits, leaves),
                self._score_bounds.before(tree),
            )
        return carry

    def _tree_levels(
        self, tree: int, splits: dict[int, tuple[int, int]], leaves: dict[int, int]
    ) -> Iterator[tuple[int, list[int]]]:
        """(level, open nodes) of a finished tree, from its recorded splits and leaves; ChainLag where a node's
        record is not served yet."""
        open_nodes = [1]
        for level in range(self.params.depth):
            if not open_nodes:
                return
            if any(n not in splits and n not in leaves for n in open_nodes):
                raise ChainLag(f"tree {tree} level {level}: the splits are not served yet")
            yield level, open_nodes
            last = level + 1 == self.params.depth
            open_nodes = [] if last else sorted(c for n in open_nodes if n in splits for c in (2 * n, 2 * n + 1))

    def _endorsed_levels(
        self, party: str, tree: int, splits: dict[int, tuple[int, int]], leaves: dict[int, int]
    ) -> list[dict[int, ref.NodeHistograms]] | None:
        """``party``'s levels of ``tree`` as this party endorsed them, or None unless every level's endorsed root is
        the one ``party`` submitted: a party may submit histograms whose quorum came from others, so what this
        party signed is only used where the chain says it is what counted."""
        endorsed = [self._endorsed.get((tree, level), {}).get(party) for level in range(self.params.depth)]
        if endorsed[0] is None:
            return None
        roots = self._roots.get(tree)
        levels_known = {level for p, level in roots or {} if p == party}
        if roots is None or any(e is not None and level not in levels_known for level, e in enumerate(endorsed)):
            start = self._level_block(tree, 0)
            roots = {
                (p, level): r
                for (p, t, level), r in self.task.submitted_roots(self.task_id, start).items()
                if t == tree
            }
            self._roots = {tree: roots}
        levels: list[dict[int, ref.NodeHistograms]] = []
        for level, open_nodes in self._tree_levels(tree, splits, leaves):
            hists = endorsed[level]
            if hists is None or len(hists) != len(open_nodes):
                return None
            signed = self._endorsed_roots.get((tree, level), {}).get(party)
            if signed is None or roots.get((party, level)) != signed:  # what this party signed
                return None
            levels.append(dict(zip(open_nodes, hists, strict=True)))
        return levels

    def _submitted_levels(
        self, party: str, tree: int, splits: dict[int, tuple[int, int]], leaves: dict[int, int]
    ) -> list[dict[int, ref.NodeHistograms]]:
        """``party``'s levels of ``tree`` from its ``HISTOGRAM_EVENTS`` (ChainLag while not all are served)."""
        words = self._submitted_words(tree, party)
        levels: list[dict[int, ref.NodeHistograms]] = []
        for level, open_nodes in self._tree_levels(tree, splits, leaves):
            if level not in words:
                self._submitted.pop(tree, None)  # read the events again next time
                raise ChainLag(f"tree {tree} level {level}: {party}'s histograms are not served yet")
            cands = self._tree_candidates(tree, open_nodes)
            levels.append(dict(zip(open_nodes, _unblock(words[level], cands, self.params.nbins), strict=True)))
        return levels

    def _submitted_words(self, tree: int, party: str) -> dict[int, list[int]]:
        """``party``'s histogram words of a finished tree by level, from the ``HistogramsSubmitted`` events, read
        once per tree for every party (again when a party's are not all served yet)."""
        known = self._submitted.get(tree)
        if known is None or not any(p == party for p, _ in known):
            known = {}
            start = self._level_block(tree, 0)
            events = self.task.client.logs(self.task.contract, list(HISTOGRAM_EVENTS), self.task_id, start)
            for (p, t, level), w in submitted_words(events).items():
                if t == tree:
                    known[(p, level)] = w
            self._submitted = {tree: known}
        return {level: w for (p, level), w in known.items() if p == party}

    def _tree_candidates(self, tree: int, nodes: Sequence[int]) -> list[tuple[int, int]]:
        """The candidates of some of a finished tree's nodes, as the contract records them: those of the levels this
        party took part in are known already (``candidates``), the others (after a restart) are read once per node."""
        self._candidates = {t: c for t, c in self._candidates.items() if t >= tree}
        known = self._candidates.setdefault(tree, {})
        missing = [n for n in nodes if n not in known]
        if missing:
            recs = self.task.client.call_many(self.task.contract, "getNode", [(self.task_id, tree, n) for n in missing])
            known.update((n, (int(r[1]), int(r[2]))) for n, r in zip(missing, recs, strict=True))
        return [known[n] for n in nodes]


def resolution_share(open_nodes: int, parties: int, nbins: int, batch: int) -> int:
    """Nodes per party's share of a level's resolution: as many as one ``resolveNodes`` carries with every party
    submitting (the calldata limit) and at most ``batch``. The same for every party, whatever gas each has seen, so
    that the shares cover the level without gaps or overlaps; a sender still splits its share by gas."""
    return resolution_batches(open_nodes, parties, nbins, open_nodes, 1, max(1, batch))


def _fewer_histograms_than_chain(exc: ContractRevert) -> bool:
    """A ``resolveNodes`` revert because this party passed fewer submitters' histograms than the chain counts."""
    args = exc.args_
    return exc.name == "LengthMismatch" and len(args) == 2 and int(args[0]) > int(args[1])


def splits_open(splits: dict[int, tuple[int, int]], level: int, open_nodes: Sequence[int]) -> bool:
    """Whether the recorded splits of level ``level - 1`` open exactly ``open_nodes`` (the chain's open mask):
    routing rows with a split missing would put them in the wrong nodes, and a level's context is computed once."""
    if level == 0:
        return True
    low = 1 << (level - 1)
    children = sorted(c for n in splits if low <= n < 2 * low for c in (2 * n, 2 * n + 1))
    return children == sorted(open_nodes)


def _blocks(hists: Sequence[ref.NodeHistograms]) -> list[list[int]]:
    return [node_block(h) for h in hists]


def _unblock(words: Sequence[int], candidates: Sequence[tuple[int, int]], nbins: int) -> list[ref.NodeHistograms]:
    """Per-node histograms from the contract layout ``g[2*nbins] | h[2*nbins] | n[2*nbins]`` per node."""
    width = 6 * nbins
    if len(words) != width * len(candidates):
        raise ValueError(f"{len(words)} words for {len(candidates)} nodes of {width}")
    return [
        block_histograms(words[j * width : (j + 1) * width], (cand[0], cand[1]), nbins)
        for j, cand in enumerate(candidates)
    ]
