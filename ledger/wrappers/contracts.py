"""Typed wrappers over the FGBDT-Chain contracts.

Why: callers (party nodes, the requester, resolvers, tests, the gas bench) should speak in project terms (task
configs, ``NodeHistograms``, ``Split``) and never hand-assemble ABI tuples or flattened arrays; the flattening rules
live in :mod:`ledger.spec.encoding` and here only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3.contract import Contract

from fgbdt_chain.ledger.rpc.client import ChainClient, LogHead, TxResult
from fgbdt_chain.ledger.spec.encoding import (
    endorsement_digest,
    layers_proof,
    merkle_layers,
    merkle_root,
    node_block,
    node_hash,
    sign_endorsement,
)
from fgbdt_chain.ledger.spec.reference import (
    NEUTRAL,
    Credit,
    NodeHistograms,
    Split,
)
from fgbdt_chain.ledger.spec.task_params import TaskConfig
from fgbdt_chain.ledger.spec.tx_size import CALLDATA_LIMIT, histogram_parts


class Status(IntEnum):
    """``FGBDTChain.Status``."""

    NONE = 0
    OPEN = 1
    TRAINING = 2
    COMPLETED = 3
    CANCELLED = 4


class Phase(IntEnum):
    """``FGBDTChain.Phase``."""

    VOTING = 0
    HISTOGRAMS = 1
    RESOLVING = 2


class Membership(IntEnum):
    """``FGBDTChain.Membership``."""

    NONE = 0
    PENDING = 1
    APPROVED = 2
    REFUSED = 3


def level_nodes(level: int, mask: int) -> list[int]:
    """The node ids, increasing, that a level's bit mask names (bit ``b`` is node ``2^level + b``), as the contract's
    ``openMask`` and ``resolvedMask`` do."""
    base = 1 << level
    return [base + b for b in range(base) if (mask >> b) & 1]


@dataclass(frozen=True)
class TaskState:
    """``getState``."""

    requester: str
    status: Status
    phase: Phase
    tree: int
    level: int
    open_mask: int
    resolved_mask: int
    step_deadline: int
    reward: int

    def open_nodes(self) -> list[int]:
        """Open node ids of the current level, increasing."""
        return level_nodes(self.level, self.open_mask)


@dataclass(frozen=True)
class NodeRecord:
    """``getNode``: kind 0 unknown (or no longer kept), 1 open, 2 split, 3 leaf; ``value`` is the gain or the leaf
    value."""

    kind: int
    cand0: int
    cand1: int
    feature: int
    threshold: int
    tree: int
    """The tree the record belongs to: the chain keeps the current and the previous tree's nodes only."""
    g: int
    h: int
    n: int
    value: int


@dataclass(frozen=True)
class Sent:
    """Who sent a level's votes or histograms, and where the event is, without its data (``TaskContract.sent``)."""

    name: str
    party: str
    tree: int
    level: int
    block_number: int
    log_index: int


@dataclass(frozen=True)
class ShapleySeed:
    """``ShapleySeedFixed``: the task seed of the estimated split Shapley values (``ledger.spec.shapley_estimate``),
    keccak256 of the hash of ``seed_block`` (the block of ``start``, unless its hash expired unread) and the task id,
    fixed in ``block_number`` by the first task transaction after the seed block."""

    seed: int
    seed_block: int
    block_number: int


SENT_EVENTS = ("VotesSubmitted", "HistogramsSubmitted", "HistogramsDeclined")
"""Events whose topics are (signature, task id, party) and whose data starts with the tree and the level."""


@dataclass(frozen=True)
class Endorsement:
    """``FGBDTChain.Endorsement``: a verifier's signature and the credit it attests (signed with it)."""

    signature: bytes
    credit: Credit = NEUTRAL

    def as_tuple(self) -> tuple[bytes, int, int, int]:
        """The ABI tuple."""
        return (self.signature, self.credit.g, self.credit.h, self.credit.n)


class MathContract:
    """``FGBDTMath``: the stateless contract math."""

    def __init__(self, client: ChainClient, contract: Contract) -> None:
        self.client = client
        self.contract = contract

    @classmethod
    def deploy(cls, client: ChainClient, sender: LocalAccount) -> MathContract:
        """Deploy (no constructor arguments)."""
        return cls(client, client.deploy("FGBDTMath", sender))

    def split_shapley(
        self, g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
    ) -> tuple[int, list[int]]:
        """``splitShapley``: (gain, phi)."""
        gain, phi = self.client.call(
            self.contract, "splitShapley", list(g_left), list(h_left), list(g_right), list(h_right), lam
        )
        return int(gain), [int(p) for p in phi]

    def split_shapley_many(self, cases: Sequence[tuple[Sequence[int], ...]]) -> list[tuple[int, list[int]]]:
        """Many ``splitShapley`` calls, batched; each case is (gL, hL, gR, hR, lambda)."""
        args = [[list(c[0]), list(c[1]), list(c[2]), list(c[3]), c[4]] for c in cases]
        out = self.client.call_many(self.contract, "splitShapley", args)
        return [(int(g), [int(p) for p in phi]) for g, phi in out]

    def split_gain(self, g_left: int, h_left: int, g_right: int, h_right: int, lam: int) -> int:
        """``splitGain`` (equation 7)."""
        return int(self.client.call(self.contract, "splitGain", g_left, h_left, g_right, h_right, lam))

    def leaf_value(self, g: int, h: int, lam: int, learning_rate: int) -> int:
        """``leafValue``."""
        return int(self.client.call(self.contract, "leafValue", g, h, lam, learning_rate))

    def top2(self, votes: Sequence[int], num_features: int, rule: int, tree: int = 0, node: int = 0) -> tuple[int, int]:
        """``top2``."""
        a, b = self.client.call(self.contract, "top2", list(votes), num_features, rule, tree, node)
        return int(a), int(b)

    def ahead_ballot(self, ahead: bytes, previous_mask: int, mask: int, level: int) -> bytes:
        """``aheadBallot``: a packed ballot sent ahead, cut to the nodes of ``mask`` (2 bytes per node)."""
        return bytes(self.client.call(self.contract, "aheadBallot", ahead, previous_mask, mask, level))

    def top2_many(self, cases: Sequence[tuple[Sequence[int], int, int, int, int]]) -> list[tuple[int, int]]:
        """Many ``top2`` calls, batched; each case is (votes, num_features, rule, tree, node)."""
        out = self.client.call_many(self.contract, "top2", [[list(v), f, r, t, n] for v, f, r, t, n in cases])
        return [(int(a), int(b)) for a, b in out]

    @staticmethod
    def _best_split_args(hist: NodeHistograms, lam: int, min_rows: int, hessian_mode: int) -> list[Any]:
        nbins = len(hist.g[0])
        flat = [[x for row in field for x in row] for field in (hist.g, hist.h, hist.n)]
        return [flat[0], flat[1], flat[2], nbins, lam, min_rows, hessian_mode]

    @staticmethod
    def _to_split(hist: NodeHistograms, found: bool, s: Sequence[int]) -> Split | None:
        if not found:
            return None
        rank = int(s[0])
        return Split(rank, hist.features[rank], *(int(x) for x in s[1:]))

    def best_split(self, hist: NodeHistograms, lam: int, min_rows: int, hessian_mode: int = 0) -> Split | None:
        """``bestSplit`` on an aggregated node histogram, as a reference ``Split`` (None for a leaf)."""
        found, s = self.client.call(
            self.contract, "bestSplit", *self._best_split_args(hist, lam, min_rows, hessian_mode)
        )
        return self._to_split(hist, found, s)

    def best_split_many(self, cases: Sequence[tuple[NodeHistograms, int, int, int]]) -> list[Split | None]:
        """Many ``bestSplit`` calls, batched; each case is (hist, lambda, min_rows, hessian_mode)."""
        out = self.client.call_many(self.contract, "bestSplit", [self._best_split_args(*c) for c in cases])
        return [self._to_split(c[0], found, s) for c, (found, s) in zip(cases, out, strict=True)]


class TaskContract:
    """``FGBDTChain``: tasks, membership, training steps, rewards."""

    def __init__(self, client: ChainClient, contract: Contract, calldata_limit: int = CALLDATA_LIMIT) -> None:
        self.client = client
        self.contract = contract
        self.calldata_limit = calldata_limit
        """The most calldata one histogram transaction may carry (``tx_size.CALLDATA_LIMIT``; lower in tests)."""

    @classmethod
    def deploy(cls, client: ChainClient, sender: LocalAccount, forwarder: str | None = None) -> TaskContract:
        """Deploy, trusting the ERC-2771 forwarder at ``forwarder``; without one, a fresh ``FGBDTForwarder`` is
        deployed first (so every deployment can take relayed, signed requests from the API)."""
        if forwarder is None:
            forwarder = str(client.deploy("FGBDTForwarder", sender).address)
        else:
            client.register("FGBDTForwarder", forwarder)
        return cls(client, client.deploy("FGBDTChain", sender, forwarder))

    @classmethod
    def at(cls, client: ChainClient, address: str) -> TaskContract:
        """Bind to a deployed contract."""
        return cls(client, client.register("FGBDTChain", address))

    @property
    def address(self) -> str:
        """The contract address (checksummed)."""
        return str(self.contract.address)

    def event_watch(self, names: Sequence[str]) -> list[list[bytes]]:
        """(this contract's address, an event's topic) for each event of ``names`` this contract has: the item sets
        ``ledger.rpc.heads.NewHeads`` checks a block's logs bloom for."""
        address = bytes.fromhex(self.address.removeprefix("0x"))
        return [[address, topic] for topic in self.client.event_topics(names)]

    def _tx(self, function: str, *args: Any, sender: LocalAccount, value: int = 0, gas: int | None = None) -> TxResult:
        return self.client.transact(self.contract, function, *args, sender=sender, value=value, gas=gas)

    # ---------------------------------------------------------------- lifecycle

    def create_task(
        self,
        sender: LocalAccount,
        cfg: TaskConfig,
        feature_min: Sequence[int],
        feature_max: Sequence[int],
        bin_edges_hash: bytes = b"\x00" * 32,
        reward: int = 0,
    ) -> tuple[int, TxResult]:
        """``createTask``; returns (task id, tx)."""
        res = self._tx(
            "createTask",
            cfg.as_tuple(),
            list(feature_min),
            list(feature_max),
            bin_edges_hash,
            sender=sender,
            value=reward,
        )
        return int(res.event("TaskCreated").args["taskId"]), res

    def fund(self, sender: LocalAccount, task_id: int, amount: int) -> TxResult:
        """``fund``: add ``amount`` wei to an open task's reward (how a task created through the API gets its reward,
        since a relayed request carries no ether)."""
        return self._tx("fund", task_id, sender=sender, value=amount)

    def join(self, sender: LocalAccount, task_id: int, psd: bytes, endpoint: str) -> TxResult:
        """``join``."""
        return self._tx("join", task_id, psd, endpoint, sender=sender)

    def approve(self, sender: LocalAccount, task_id: int, party: str) -> TxResult:
        """``approve``."""
        return self._tx("approve", task_id, party, sender=sender)

    def refuse(self, sender: LocalAccount, task_id: int, party: str) -> TxResult:
        """``refuse``."""
        return self._tx("refuse", task_id, party, sender=sender)

    def start(self, sender: LocalAccount, task_id: int, bin_edges: bytes) -> TxResult:
        """``start``: begin training and publish the encoded common bin edges."""
        return self._tx("start", task_id, bin_edges, sender=sender)

    def cancel(self, sender: LocalAccount, task_id: int) -> TxResult:
        """``cancel``."""
        return self._tx("cancel", task_id, sender=sender)

    def withdraw(self, sender: LocalAccount, task_id: int) -> TxResult:
        """``withdraw``."""
        return self._tx("withdraw", task_id, sender=sender)

    # ---------------------------------------------------------------- training

    def submit_votes(self, sender: LocalAccount, task_id: int, tree: int, level: int, votes: Sequence[int]) -> TxResult:
        """``submitVotes``: one vote per open node, -1 abstains."""
        return self._tx("submitVotes", task_id, tree, level, list(votes), sender=sender)

    def submit_votes_ahead(
        self, sender: LocalAccount, task_id: int, tree: int, level: int, votes: Sequence[int]
    ) -> Callable[[], TxResult]:
        """``submitVotes`` ahead (the next level's, two per open node), sent without waiting for its block
        (:meth:`ChainClient.transact_ahead`): the resolution the party sends next goes in the same block, after it."""
        return self.client.transact_ahead(
            self.contract, "submitVotes", task_id, tree, level, list(votes), sender=sender
        )

    def close_step(self, sender: LocalAccount, task_id: int) -> TxResult:
        """``closeStep``: the vote or histogram step, once its deadline passed."""
        return self._tx("closeStep", task_id, sender=sender)

    def submit_histograms(
        self,
        sender: LocalAccount,
        task_id: int,
        tree: int,
        level: int,
        hists: Sequence[NodeHistograms],
        endorsements: Sequence[Endorsement],
        committed: int = 0,
    ) -> TxResult:
        """``submitHistograms``: one ``NodeHistograms`` per open node (increasing id), endorsed by others. A level
        too wide for one transaction a network relays goes as ``commitHistograms`` parts first
        (``tx_size.histogram_parts``); the result is the ``submitHistograms`` transaction's, with the parts' in
        its ``parts``. ``committed``: the open nodes whose parts are already on chain at this step (a sender that
        restarted half-way, see :meth:`committed_nodes`), which are not sent again."""
        nbins = len(hists[0].g[0]) if hists else 1
        sizes = histogram_parts(len(hists) - committed, nbins, level, len(endorsements), self.calldata_limit)
        sent: list[TxResult] = []
        start = committed
        for size in sizes[:-1]:
            part = [x for h in hists[start : start + size] for x in node_block(h)]
            sent.append(self._tx("commitHistograms", task_id, tree, level, part, sender=sender))
            start += size
        args = submit_histograms_args(task_id, tree, level, hists[start:], endorsements)
        res = self._tx("submitHistograms", *args, sender=sender)
        res.parts = sent
        return res

    def submitted_roots(
        self, task_id: int, from_block: int, to_block: int | str = "latest"
    ) -> dict[tuple[str, int, int], bytes]:
        """Each submission's commitment root, keyed (party, tree, level), from the ``HistogramsSubmitted`` events in
        the blocks given, their histogram words left undecoded (the event's data starts tree, level, root)."""
        heads = self._sent_heads(task_id, ["HistogramsSubmitted"], 3, from_block, to_block)
        return {(s.party, s.tree, s.level): h.words[2] for s, h in heads}

    def sent(self, task_id: int, names: Sequence[str], from_block: int = 0) -> list[Sent]:
        """Each vote or submission event of ``names`` (of ``SENT_EVENTS``) since ``from_block``: its sender, tree and
        level, in chain order. Read as log heads: a report that counts who sent what decoded every level's histogram
        words to find them (the requester's report of 50 trees spent 0.5 s there)."""
        return [s for s, _ in self._sent_heads(task_id, names, 2, from_block)]

    def _sent_heads(
        self, task_id: int, names: Sequence[str], words: int, from_block: int, to_block: int | str = "latest"
    ) -> list[tuple[Sent, LogHead]]:
        """The ``SENT_EVENTS`` of ``names`` as log heads of ``words`` data words, each with its sender, tree and
        level, in chain order."""
        if not set(names) <= set(SENT_EVENTS):
            other = sorted(set(names) - set(SENT_EVENTS))
            raise ValueError(f"not an event with a sender, tree and level first: {other}")
        heads = self.client.log_heads(self.contract, list(names), task_id, words, from_block, to_block)
        checksummed: dict[bytes, str] = {}  # a few parties, thousands of events: 34 us a checksum

        def party(topic: bytes) -> str:
            if topic not in checksummed:
                checksummed[topic] = to_checksum_address(topic[12:])
            return checksummed[topic]

        return [
            (
                Sent(
                    h.name,
                    party(h.topics[2]),
                    int.from_bytes(h.words[0], "big"),
                    int.from_bytes(h.words[1], "big"),
                    h.block_number,
                    h.log_index,
                ),
                h,
            )
            for h in heads
            if len(h.topics) == 3 and len(h.words) == words
        ]

    def committed_nodes(self, task_id: int, tree: int, level: int, party: str, nbins: int, from_block: int) -> int:
        """How many of the level's open nodes ``party`` has committed in ``commitHistograms`` parts (from its
        ``HistogramsCommitted`` events since ``from_block``, the level's start; ``nbins`` slots per candidate)."""
        done = 0
        for ev in self.client.logs(self.contract, ["HistogramsCommitted"], task_id, from_block):
            a = ev.args
            if (int(a["tree"]), int(a["level"]), str(a["party"])) == (tree, level, party):
                done = max(done, int(a["first"]) + len(a["data"]) // (6 * nbins))
        return done

    def commit_histograms(
        self, sender: LocalAccount, task_id: int, tree: int, level: int, hists: Sequence[NodeHistograms]
    ) -> TxResult:
        """``commitHistograms``: the next open nodes' histograms ahead of the level's ``submitHistograms``."""
        data = [x for h in hists for x in node_block(h)]
        return self._tx("commitHistograms", task_id, tree, level, data, sender=sender)

    def decline_histograms(self, sender: LocalAccount, task_id: int, tree: int, level: int) -> TxResult:
        """``declineHistograms``: a voter steps aside for this level's histograms (refused endorsement)."""
        return self._tx("declineHistograms", task_id, tree, level, sender=sender)

    def resolve_node(
        self,
        sender: LocalAccount,
        task_id: int,
        node: int,
        open_nodes: Sequence[int],
        level_hists: Sequence[Sequence[NodeHistograms]],
    ) -> TxResult:
        """``resolveNode``: ``level_hists`` holds, per submitting party in party order, its whole level's
        histograms (one per open node); the node's own data and Merkle proofs are extracted here."""
        g, h, n, proofs = resolution_calldata([node], open_nodes, level_hists)
        return self._tx("resolveNode", task_id, node, g, h, n, proofs, sender=sender)

    def resolve_nodes(
        self,
        sender: LocalAccount,
        task_id: int,
        nodes: Sequence[int],
        open_nodes: Sequence[int],
        level_hists: Sequence[Sequence[NodeHistograms]],
        gas: int | None = None,
    ) -> TxResult:
        """``resolveNodes``: several nodes of the level in one transaction (same inputs as :meth:`resolve_node`);
        ``gas`` a limit to send it with, where no earlier receipt gives one (else it is estimated first)."""
        args = resolve_nodes_args(task_id, nodes, open_nodes, level_hists)
        return self._tx("resolveNodes", *args, sender=sender, gas=gas)

    # ---------------------------------------------------------------- endorsements

    def endorse(
        self,
        endorser: LocalAccount,
        task_id: int,
        tree: int,
        level: int,
        party: str,
        hists: Sequence[NodeHistograms],
        credit: Credit = NEUTRAL,
    ) -> Endorsement:
        """An endorser's signed endorsement of ``party``'s level histograms at ``credit`` (after its own check, off
        chain)."""
        root = merkle_root([node_hash(h) for h in hists])
        digest = endorsement_digest(self.client.chain_id, self.address, task_id, tree, level, party, root, credit)
        return Endorsement(sign_endorsement(endorser.key, digest), credit)

    # ---------------------------------------------------------------- views

    def trusted_forwarder(self) -> str:
        """The ERC-2771 forwarder this contract trusts (``trustedForwarder``)."""
        return str(self.client.call(self.contract, "trustedForwarder"))

    def limits(self) -> tuple[int, int]:
        """(``MAX_PARTIES``, ``MAX_DEPTH``)."""
        return int(self.client.call(self.contract, "MAX_PARTIES")), int(self.client.call(self.contract, "MAX_DEPTH"))

    def state(self, task_id: int) -> TaskState:
        """``getState``."""
        r = self.client.call(self.contract, "getState", task_id)
        return TaskState(str(r[0]), Status(r[1]), Phase(r[2]), *(int(x) for x in r[3:]))

    def config(self, task_id: int) -> TaskConfig:
        """``getConfig``."""
        return TaskConfig(*(int(x) for x in self.client.call(self.contract, "getConfig", task_id)))

    def shapley_seed(self, task_id: int) -> ShapleySeed | None:
        """The task's Shapley seed from its ``ShapleySeedFixed`` event; None until a task transaction in a block after
        the seed block fixed it (every resolution needs it: ``ShapleySeedPending`` in the seed block itself)."""
        fixed = self.client.logs(self.contract, ["ShapleySeedFixed"], task_id)
        if not fixed:
            return None
        ev = fixed[0]
        return ShapleySeed(int(ev.args["seed"]), int(ev.args["seedBlock"]), ev.block_number)

    def parties(self, task_id: int) -> list[str]:
        """``getParties``."""
        return [str(a) for a in self.client.call(self.contract, "getParties", task_id)]

    def member(self, task_id: int, party: str) -> tuple[Membership, int, bytes, int]:
        """``getMember``: (status, index, psd hash, contribution)."""
        s, i, psd, c = self.client.call(self.contract, "getMember", task_id, party)
        return Membership(s), int(i), bytes(psd), int(c)

    def contribution(self, task_id: int, party: str) -> int:
        """A party's contribution total."""
        return self.member(task_id, party)[3]

    def node(self, task_id: int, tree: int, node: int) -> NodeRecord:
        """``getNode``."""
        return NodeRecord(*(int(x) for x in self.client.call(self.contract, "getNode", task_id, tree, node)))

    def owed(self, task_id: int, account: str) -> int:
        """Wei ``account`` can withdraw from the task."""
        return int(self.client.call(self.contract, "owed", task_id, account))

    def task_count(self) -> int:
        """Number of tasks."""
        return int(self.client.call(self.contract, "taskCount"))


def submit_histograms_args(
    task_id: int, tree: int, level: int, hists: Sequence[NodeHistograms], endorsements: Sequence[Endorsement]
) -> tuple[Any, ...]:
    """``submitHistograms``' arguments: the node blocks in one word array, and the endorsements as ABI tuples."""
    return task_id, tree, level, [x for h in hists for x in node_block(h)], [e.as_tuple() for e in endorsements]


def resolve_nodes_args(
    task_id: int, nodes: Sequence[int], open_nodes: Sequence[int], level_hists: Sequence[Sequence[NodeHistograms]]
) -> tuple[Any, ...]:
    """``resolveNodes``' arguments: the nodes, and the submitters' histograms with their Merkle proofs."""
    g, h, n, proofs = resolution_calldata(nodes, open_nodes, level_hists)
    return task_id, list(nodes), g, h, n, proofs


def resolution_calldata(
    nodes: Sequence[int], open_nodes: Sequence[int], level_hists: Sequence[Sequence[NodeHistograms]]
) -> tuple[list[int], list[int], list[int], list[bytes]]:
    """(g, h, n, proofs) of ``resolveNode`` for each of ``nodes``, concatenated node-major as ``resolveNodes``
    takes them: per node, every submitting party's two candidate histograms and its Merkle proof for that node."""
    position = {nd: i for i, nd in enumerate(open_nodes)}
    trees = [merkle_layers([node_hash(x) for x in party_hists]) for party_hists in level_hists]
    g: list[int] = []
    h: list[int] = []
    n: list[int] = []
    proofs: list[bytes] = []
    for node in nodes:
        idx = position[node]
        for party_hists, layers in zip(level_hists, trees, strict=True):
            hist = party_hists[idx]
            for src, dst in ((hist.g, g), (hist.h, h), (hist.n, n)):
                for row in src:
                    dst.extend(row)
            proofs.extend(layers_proof(layers, idx))
    return g, h, n, proofs


HISTOGRAM_EVENTS = ("HistogramsCommitted", "HistogramsSubmitted")
"""The events that carry a party's level histograms: its ``commitHistograms`` parts, then its submission."""


def submitted_words(events: Iterable[Any]) -> dict[tuple[str, int, int], list[int]]:
    """Each submitting party's whole level of histogram words, keyed (party, tree, level), from
    ``HISTOGRAM_EVENTS`` in log order: the parts it committed (by their first node) followed by its submission's
    data. Parts of a level the party never submitted (it declined, or its deadline passed) are left out, as the
    contract leaves them out of everything."""
    parts: dict[tuple[str, int, int], dict[int, list[int]]] = {}
    out: dict[tuple[str, int, int], list[int]] = {}
    for ev in events:
        a = ev.args
        key = (str(a["party"]), int(a["tree"]), int(a["level"]))
        if ev.name == "HistogramsCommitted":
            parts.setdefault(key, {})[int(a["first"])] = [int(v) for v in a["data"]]
        elif ev.name == "HistogramsSubmitted":
            before = parts.pop(key, {})
            out[key] = [v for first in sorted(before) for v in before[first]] + [int(v) for v in a["data"]]
    return out
