"""Independent audit of a task: replay its events and recompute everything with the Python reference.

Why: the contract is the party everybody has to trust for splits, contributions and payouts. The audit removes that
trust: anyone holding an RPC endpoint re-derives, from the public record only, every endorsement signer, every
histogram commitment, every top-2, split, leaf, Shapley value, voting contribution, per-party total and payout, with
``ledger.spec.reference`` (the specification the contract is tested against), and reports the first place where the
chain disagrees with the specification.

Two layers keep the checks testable without a chain:

* :func:`audit_events` is pure: it takes an :class:`AuditInput` (decoded events in chain order, the
  ``submitHistograms`` calls found in the transactions' calldata and, optionally, a snapshot of the contract's views)
  and returns an :class:`AuditReport`. Unit tests tamper the input and check what is caught.
* :func:`read_task` reads that input from a node: logs through :meth:`ChainClient.logs`, transaction inputs with
  ``eth_getTransactionByHash`` (signatures are not in the events), views at one pinned block so that events and
  storage are read from the same state.

Senders are always taken from event arguments (the contract emits ``_msgSender()``), never from ``tx.from``, so
requests relayed by an ERC-2771 forwarder audit like direct transactions; the ``submitHistograms`` call is searched
for anywhere in the transaction input, which also finds it inside a forwarder's ``execute`` payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from eth_abi import decode as abi_decode
from eth_keys import keys
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.rpc.abi_codec import canonical_type
from fgbdt_chain.ledger.rpc.client import ChainClient, Event
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import EdgesFormatError, decode_edges, histogram_slots
from fgbdt_chain.ledger.spec.encoding import block_histograms, endorsement_digest, merkle_root, words
from fgbdt_chain.ledger.spec.histogram_rules import HistogramRuleError, Sides, bounds_of, candidate_totals, check_level
from fgbdt_chain.ledger.spec.tree_carry import Carry, CarryError, ScoreBounds, applies, leaf_sums

SECP256K1_HALF_N: int = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0
"""The contract rejects high-s signatures (malleability); the audit applies the same rule."""

STATUS_TRAINING: int = 2
STATUS_COMPLETED: int = 3
KIND_OPEN, KIND_SPLIT, KIND_LEAF = 1, 2, 3


class AuditError(Exception):
    """The audit cannot run (unknown task, task not started, unreachable chain): a usage error, not a mismatch."""


# ---------------------------------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class SubmitCall:
    """One ``submitHistograms`` call decoded from a transaction's input: the only place the signatures live, with
    the credit each endorsement attests."""

    task_id: int
    tree: int
    level: int
    data: tuple[int, ...]
    signatures: tuple[bytes, ...]
    credits: tuple[ref.Credit, ...] = ()


@dataclass(frozen=True)
class NodeState:
    """``getNode`` as a plain tuple-like record (kind 0 unknown, 1 open, 2 split, 3 leaf)."""

    kind: int = 0
    cand0: int = 0
    cand1: int = 0
    feature: int = 0
    threshold: int = 0
    tree: int = 0
    g: int = 0
    h: int = 0
    n: int = 0
    value: int = 0


@dataclass
class ChainState:
    """The contract's views of the task at the audited block; compared with what the replay says they must be.

    Events are what the contract *said*; storage is what it *keeps* and pays from. Checking both catches a record
    whose events are right but whose storage is not (a buggy upgrade, a tampered node).
    """

    status: int
    reward: int
    config: dict[str, int]
    contributions: dict[str, int]
    owed: dict[str, int]
    nodes: dict[tuple[int, int], NodeState]


@dataclass
class AuditInput:
    """Everything the pure audit needs. ``calls`` maps a transaction hash (hex, no 0x, lower case) to the
    ``submitHistograms`` calls found in its input."""

    chain_id: int
    contract: str
    task_id: int
    events: list[Event]
    calls: dict[str, list[SubmitCall]] = field(default_factory=dict)
    state: ChainState | None = None


@dataclass(frozen=True)
class Mismatch:
    """The first disagreement between the record and the recomputation, located as precisely as possible."""

    field: str
    expected: Any
    recorded: Any
    tree: int | None = None
    level: int | None = None
    node: int | None = None
    party: str | None = None

    def __str__(self) -> str:
        where = [
            f"{name} {value}"
            for name, value in (("tree", self.tree), ("level", self.level), ("node", self.node), ("party", self.party))
            if value is not None
        ]
        loc = f" at {', '.join(where)}" if where else ""
        return f"MISMATCH{loc}: {self.field}: expected {_show(self.expected)}, recorded {_show(self.recorded)}"


@dataclass
class AuditCounts:
    """How much was checked (printed with OK so a reader can tell an empty audit from a full one)."""

    trees: int = 0
    levels: int = 0
    nodes: int = 0
    vote_sets: int = 0
    ahead_sets: int = 0
    """Of those, the ones sent ahead with the level before's resolution (``submitVotes`` ahead)."""
    histograms: int = 0
    signatures: int = 0
    payouts: int = 0
    state_checked: bool = False


@dataclass
class AuditReport:
    """Result of an audit: ``ok`` and the first mismatch (None when ok)."""

    ok: bool
    first_mismatch: str | None
    counts: AuditCounts
    mismatch: Mismatch | None = None
    completed: bool = False
    pending: str | None = None
    privacy: dict[str, Any] | None = None
    """The task's differential privacy as the accountant computes it from the recorded config
    (``node.privacy.accountant``: epsilon, delta and every mechanism's share); None for a task without privacy noise."""

    def summary(self) -> str:
        """One line: ``OK`` and what was checked, or the first mismatch."""
        if not self.ok:
            return str(self.first_mismatch)
        c = self.counts
        stage = "training completed" if self.completed else f"training in progress ({self.pending})"
        guarantee = ""
        if self.privacy is not None:
            guarantee = f"; ({self.privacy['epsilon']:g}, {self.privacy['delta']:g})-DP per party"
        return (
            f"OK: {c.trees} trees, {c.levels} levels, {c.nodes} nodes, {c.vote_sets} vote sets "
            f"({c.ahead_sets} sent ahead), "
            f"{c.histograms} histogram submissions, {c.signatures} signatures, {c.payouts} payouts checked; {stage}"
            + ("" if c.state_checked else "; contract storage not checked")
            + guarantee
        )


def _show(x: Any) -> str:
    if isinstance(x, bytes | bytearray):
        return "0x" + bytes(x).hex()
    if isinstance(x, tuple | list):
        return "[" + ", ".join(_show(v) for v in x) + "]"
    return str(x)


class _Found(Exception):
    """Internal: carries the first mismatch out of the replay."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(str(mismatch))
        self.mismatch = mismatch


# ---------------------------------------------------------------------------------------------------- pure core


def _addr(a: Any) -> str:
    return to_checksum_address(str(a))


def recover_endorser(digest: bytes, signature: bytes) -> str | None:
    """The signer of an EIP-191 signature over ``digest`` under the contract's rules (65 bytes, v in {0, 1, 27, 28},
    low s, recoverable), or None where ``submitHistograms`` would revert with ``InvalidSignature``."""
    if len(signature) != 65:
        return None
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    v = signature[64]
    if v < 27:
        v += 27
    if v not in (27, 28) or s > SECP256K1_HALF_N:
        return None
    eth_hash = keccak(b"\x19Ethereum Signed Message:\n32" + digest)
    try:
        pub = keys.Signature(vrs=(v - 27, r, s)).recover_public_key_from_msg_hash(eth_hash)
    except Exception:  # out-of-range r/s or no curve point: ecrecover returns address(0)
        return None
    return str(pub.to_checksum_address())


def split_level_data(data: Sequence[int], open_nodes: int, nbins: int) -> list[list[int]] | None:
    """A level's ``submitHistograms`` data cut into per-node blocks of ``6 * nbins`` words (None: wrong length)."""
    width = 6 * nbins
    if len(data) != open_nodes * width:
        return None
    return [list(data[i * width : (i + 1) * width]) for i in range(open_nodes)]


def expected_payouts(
    parties: Sequence[str], totals: dict[str, int], finished: set[str], reward: int, requester: str
) -> tuple[int, list[tuple[str, str, int]]]:
    """(positive total, the payout events ``(name, account, amount)`` in emission order) exactly as the contract's
    ``_complete`` (``reference.payouts``): in party order, each non-zero amount as ``RewardAssigned`` to a party that
    took part to the last step (``finished``) or ``RewardForfeited`` otherwise, then the remainder to the requester."""
    due = ref.payouts([totals.get(p, 0) for p in parties], [p in finished for p in parties], reward)
    events = [
        ("RewardAssigned", p, paid) if paid else ("RewardForfeited", p, lost)
        for p, paid, lost in zip(parties, due.paid, due.forfeited, strict=True)
        if paid or lost
    ]
    if due.requester > 0:
        events.append(("RewardAssigned", requester, due.requester))
    return due.positive, events


class _Auditor:
    """The replay. Methods raise :class:`_Found` at the first mismatch; the order of checks follows the order in
    which the contract produced the records (level by level, step by step), so "first" means first in time."""

    def __init__(self, inp: AuditInput) -> None:
        self.inp = inp
        self.counts = AuditCounts()
        self.contract = _addr(inp.contract)
        self.by_name: dict[str, list[Event]] = {}
        for ev in inp.events:
            self.by_name.setdefault(ev.name, []).append(ev)
        self.pending: str | None = None
        self.completed = False
        # expected storage, built while replaying
        self.nodes: dict[tuple[int, int], NodeState] = {}
        self.totals: dict[str, int] = {}
        # the exact rules' state: who took part in the previous step, each party's side sums at the previous
        # level's splits, and each party's credit for the current tree
        self.active: set[str] | None = None
        self.last_closed: tuple[int, int] | None = None
        """Where the last ``HistogramsClosed`` replayed is (block, log index): a root's ballot sent ahead is taken
        only if sent after the close of the tree before's last level, while that level resolved."""
        self.sides: dict[str, dict[int, Sides]] = {}
        self.credits: dict[str, ref.Credit] = {}
        # the verifiers' carry rule: each party's histograms of the current and the previous tree, level by level,
        # the previous tree's splits and leaves, and the bound on every score after each finished tree
        self.tree_hists: dict[int, dict[str, list[dict[int, ref.NodeHistograms]]]] = {}
        self.tree_nodes: dict[int, tuple[dict[int, tuple[int, int]], dict[int, int]]] = {}
        self.score_bounds = ScoreBounds(lambda t: self._tree_nodes(t)[1].values())

    # ----------------------------------------------------------------- helpers

    def fail(self, fld: str, expected: Any, recorded: Any, **where: Any) -> NoReturn:
        raise _Found(Mismatch(fld, expected, recorded, **where))

    def one(self, name: str, events: list[Event], **where: Any) -> Event | None:
        """The single event of a kind for one step, None when absent; two is a mismatch (the contract emits one)."""
        if len(events) > 1:
            self.fail(f"number of {name} events", 1, len(events), **where)
        return events[0] if events else None

    # ----------------------------------------------------------------- setup

    def run(self) -> None:
        created = self.by_name.get("TaskCreated", [])
        if not created:
            raise AuditError(f"unknown task {self.inp.task_id}: no TaskCreated event")
        self.created = created[0]
        if "TrainingStarted" not in self.by_name:
            if "TaskCancelled" in self.by_name:
                raise AuditError(f"task {self.inp.task_id} was cancelled before training started")
            raise AuditError(f"task {self.inp.task_id} has not started training yet")
        cfg = {k: int(v) for k, v in dict(self.created.args["cfg"]).items()}
        self.cfg = cfg
        self.params = ref.Params(cfg["lambda"], cfg["learningRate"], cfg["minRows"], cfg["alpha"], cfg["hessianMode"])
        self.depth, self.trees = cfg["depth"], cfg["trees"]
        self.tie_break = cfg["tieBreak"]
        self.objective = cfg["objective"]
        self.bounds = bounds_of(cfg["objective"], cfg.get("epsilon", 0))
        self.num_features = len(self.created.args["featureMin"])
        self.requester = _addr(self.created.args["requester"])
        started = self.by_name["TrainingStarted"]
        if len(started) != 1:
            self.fail("number of TrainingStarted events", 1, len(started))
        self.parties = [_addr(p) for p in started[0].args["parties"]]
        self.party_set = set(self.parties)
        approved = sorted(self.by_name.get("PartyApproved", []), key=lambda e: int(e.args["index"]))
        recorded_order = [_addr(e.args["party"]) for e in approved]
        if recorded_order != self.parties:
            self.fail("party order (PartyApproved vs TrainingStarted)", recorded_order, self.parties)
        m = len(self.parties)
        self.quorum = (cfg["quorumNum"] * (m - 1) + cfg["quorumDen"] - 1) // cfg["quorumDen"]
        self.reward = self._reward()
        self._check_hashes()
        self._index_events()
        self._replay_levels()
        self._check_totals_and_payouts()
        if self.inp.state is not None:
            self._check_state(self.inp.state)

    def privacy(self) -> dict[str, Any] | None:
        """The recorded privacy budget, through the accountant (``node.privacy.accountant.plan``)."""
        from fgbdt_chain.node.privacy.accountant import plan  # the parties' side; the audit only reports it

        eps = self.cfg.get("epsilon", 0)
        if eps <= 0:
            return None
        return plan(ref.from_fixed(eps), ref.from_fixed(self.cfg["delta"]), self.trees, self.depth).report()

    def _reward(self) -> int:
        """The deposit: ``createTask``'s value plus every ``fund`` (each ``TaskFunded`` states the new total)."""
        reward = int(self.created.args["reward"])
        for ev in self.by_name.get("TaskFunded", []):
            want = reward + int(ev.args["amount"])
            if int(ev.args["reward"]) != want:
                self.fail("reward after TaskFunded", want, int(ev.args["reward"]), party=_addr(ev.args["funder"]))
            reward = want
        return reward

    def _check_hashes(self) -> None:
        """The stored hashes of published blobs: each PSD, and the bin edges (against the hash fixed at creation)."""
        for ev in self.by_name.get("JoinRequested", []):
            want = keccak(bytes(ev.args["psd"]))
            if bytes(ev.args["psdHash"]) != want:
                self.fail(
                    "PSD hash (keccak of the PSD)", want, bytes(ev.args["psdHash"]), party=_addr(ev.args["party"])
                )
        fixed = self.by_name.get("BinEdgesFixed", [])
        if len(fixed) != 1:
            self.fail("number of BinEdgesFixed events", 1, len(fixed))
        want = keccak(bytes(fixed[0].args["binEdges"]))
        if bytes(fixed[0].args["binEdgesHash"]) != want:
            self.fail("bin edges hash (keccak of the edges)", want, bytes(fixed[0].args["binEdgesHash"]))
        at_creation = bytes(self.created.args["binEdgesHash"])
        if at_creation != b"\x00" * 32 and at_creation != want:
            self.fail("bin edges hash (fixed at createTask)", at_creation, want)
        try:  # the histogram width the contract took from the encoding's header: it must be what the edges need
            self.nbins = histogram_slots(decode_edges(bytes(fixed[0].args["binEdges"])))
        except EdgesFormatError as exc:
            self.fail("bin edges encoding", "a canonical encoding", str(exc))

    def _index_events(self) -> None:
        self.level_ev: dict[tuple[int, int, str], list[Event]] = {}
        for name in (
            "VotesSubmitted",
            "VotingClosed",
            "HistogramsCommitted",
            "HistogramsSubmitted",
            "HistogramsDeclined",
            "HistogramsClosed",
        ):
            for ev in self.by_name.get(name, []):
                key = (int(ev.args["tree"]), int(ev.args["level"]), name)
                self.level_ev.setdefault(key, []).append(ev)
        self.node_ev: dict[tuple[int, int, str], list[Event]] = {}
        for name in ("CandidatesFixed", "NodeSplit", "LeafSet", "ContributionsAdded"):
            for ev in self.by_name.get(name, []):
                key = (int(ev.args["tree"]), int(ev.args["node"]), name)
                self.node_ev.setdefault(key, []).append(ev)
        self.used: set[tuple[int, int, str]] = set()

    def take_level(self, tree: int, level: int, name: str) -> list[Event]:
        self.used.add((tree, level, name))
        return self.level_ev.get((tree, level, name), [])

    def take_node(self, tree: int, node: int, name: str) -> list[Event]:
        self.used.add((tree, node, name))
        return self.node_ev.get((tree, node, name), [])

    # ----------------------------------------------------------------- levels

    def _replay_levels(self) -> None:
        starts = self.by_name.get("LevelStarted", [])
        tree, level, open_nodes = 0, 0, [1]
        previous: list[int] = []  # the open nodes of the level before in the same tree (none at a root)
        inherited: dict[tuple[int, int], ref.Totals] = {}
        i = 0
        while True:
            where = {"tree": tree, "level": level}
            if i >= len(starts):
                self.pending = f"tree {tree}, level {level} not started"
                if self.by_name.get("TaskCompleted"):
                    self.fail("LevelStarted before TaskCompleted", f"level {level} of tree {tree}", "none", **where)
                break
            st = starts[i]
            i += 1
            got = (int(st.args["tree"]), int(st.args["level"]), int(st.args["openMask"]))
            base = 1 << level
            mask = sum(1 << (nd - base) for nd in open_nodes)
            if got != (tree, level, mask):
                self.fail("LevelStarted (tree, level, openMask)", (tree, level, mask), got, **where)
            if level == 0:
                self.counts.trees += 1
            for nd in open_nodes:
                self.nodes.setdefault((tree, nd), NodeState(tree=tree))
                self.nodes[(tree, nd)] = _with(self.nodes[(tree, nd)], kind=KIND_OPEN)
            nxt = self._level(tree, level, open_nodes, previous, st, inherited)
            if not nxt:  # no next level of the tree (yet, or ever): what was sent ahead for it is held unused
                self._ahead_not_taken(tree, level + 1, open_nodes)
            if nxt is None:  # the level is still running: nothing after it may exist but ballots sent ahead
                self._ahead_not_taken(tree + 1, 0, [])
                if i < len(starts):
                    self.fail("a complete level before the next LevelStarted", "resolved level", "incomplete", **where)
                break
            self.counts.levels += 1
            if nxt:
                level, previous, open_nodes = level + 1, open_nodes, nxt
            elif tree + 1 < self.trees:
                tree, level, previous, open_nodes = tree + 1, 0, [], [1]
            else:
                if i < len(starts):
                    self.fail("no level after the last tree", "TaskCompleted", "LevelStarted", tree=tree + 1)
                self.completed = True
                break
        leftovers = sorted(k for k in [*self.level_ev, *self.node_ev] if k not in self.used)
        if leftovers:
            t, x, name = leftovers[0]
            self.fail(f"{name} event outside the replayed levels", "none", f"tree {t}, level/node {x}")

    def _level(
        self,
        tree: int,
        level: int,
        open_nodes: list[int],
        previous: list[int],
        started: Event,
        inherited: dict[tuple[int, int], ref.Totals],
    ) -> list[int] | None:
        """Check one level (``previous``: the open nodes of the level before in its tree); the next level's open
        nodes, or None while the level is still in progress."""
        where: dict[str, Any] = {"tree": tree, "level": level}
        progress = f"tree {tree}, level {level}"
        step = self.cfg["stepBlocks"]
        if int(started.args["deadline"]) != started.block_number + step:
            want = started.block_number + step
            self.fail("first step's deadline (block + stepBlocks)", want, started.args["deadline"], **where)
        found: tuple[dict[str, list[int]], dict[int, tuple[int, int]], int] | None
        if ref.draws(tree, self.cfg.get("votedTrees", ref.ALL_TREES_VOTED)):
            found = self._drawn(tree, level, open_nodes, started, where)
        else:
            found = self._voted(tree, level, open_nodes, previous, started, where, progress)
        if found is None:
            return None
        votes, cands, deadline = found
        # histograms and endorsements
        hists: dict[str, list[ref.NodeHistograms]] = {}
        committed: dict[str, list[Event]] = {}
        for ev in self.take_level(tree, level, "HistogramsCommitted"):
            committed.setdefault(_addr(ev.args["party"]), []).append(ev)
        for ev in self.take_level(tree, level, "HistogramsSubmitted"):
            party = _addr(ev.args["party"])
            w = {**where, "party": party}
            if party not in votes:
                self.fail("histogram sender voted at this level", "a voter", party, **w)
            if party in hists:
                self.fail("one histogram submission per party", 1, 2, **w)
            if ev.block_number > deadline:
                self.fail("histograms before the step deadline", f"block <= {deadline}", ev.block_number, **w)
            prefix = self._committed(committed.get(party, []), ev, deadline, w)
            hists[party] = self._histograms(ev, prefix, tree, level, open_nodes, cands, party)
            self._rules(hists[party], tree, level, open_nodes, party)
            if level == 0:
                self._carry(hists[party][0], tree, party)
            self.tree_hists.setdefault(tree, {}).setdefault(party, []).append(
                dict(zip(open_nodes, hists[party], strict=True))
            )
            self.counts.histograms += 1
        declined: set[str] = set()
        for ev in self.take_level(tree, level, "HistogramsDeclined"):
            party = _addr(ev.args["party"])
            w = {**where, "party": party}
            if party not in votes or party in hists or party in declined:
                self.fail("a voter declines once, instead of submitting", "a voter without histograms", party, **w)
            if ev.block_number > deadline:
                self.fail("decline before the step deadline", f"block <= {deadline}", ev.block_number, **w)
            declined.add(party)
        hclosed = self.one("HistogramsClosed", self.take_level(tree, level, "HistogramsClosed"), **where)
        if hclosed is None:
            self.pending = f"{progress}, histograms open"
            return None
        self.last_closed = (hclosed.block_number, hclosed.log_index)
        if int(hclosed.args["submitters"]) != len(hists):
            self.fail("HistogramsClosed submitters", len(hists), int(hclosed.args["submitters"]), **where)
        mask = sum(1 << i for i, p in enumerate(self.parties) if p in hists)
        if int(hclosed.args["submitterMask"]) != mask:
            self.fail("HistogramsClosed submitter mask", bin(mask), bin(int(hclosed.args["submitterMask"])), **where)
        if len(hists) + len(declined) < len(votes) and hclosed.block_number <= deadline:
            self.fail(
                "histograms closed after their deadline or with every voter submitted or declined",
                "later block",
                hclosed.block_number,
                **where,
            )
        # resolution
        accepted = [p for p in self.parties if p in hists]
        self.active = set(accepted)
        self.sides = {p: {} for p in accepted}
        last = level == self.depth - 1
        nxt: list[int] = []
        unresolved: list[int] = []
        for j, nd in enumerate(open_nodes):
            # anyone resolves, in any order: an unresolved node does not stop the checks of its resolved siblings
            split = self._node(tree, level, nd, j, accepted, hists, votes, inherited, last, cands[nd])
            if split is None:
                unresolved.append(nd)
            elif split and not last:
                nxt.extend((2 * nd, 2 * nd + 1))
        if unresolved:
            self.pending = f"{progress}, nodes {unresolved} unresolved"
            return None
        return nxt

    def _voted(
        self,
        tree: int,
        level: int,
        open_nodes: list[int],
        previous: list[int],
        started: Event,
        where: dict[str, Any],
        progress: str,
    ) -> tuple[dict[str, list[int]], dict[int, tuple[int, int]], int] | None:
        """The vote round of a level with voted candidates: every ballot, the close, the top-2. Returns the ballots,
        the candidates and the histogram step's deadline, or None while voting is open. A ballot sent ahead (before
        the level started, while the level before resolved) holds two votes per node of ``previous`` and counts as
        the votes of the nodes that opened (``reference.ahead_ballot``), as the contract takes it. At a root
        (``previous`` empty) it is the root's one vote, counted if it was sent while the tree before resolved its
        last level (after ``last_closed``); one sent at an earlier level of that tree is held unused."""
        k = len(open_nodes)
        step = self.cfg["stepBlocks"]
        votes: dict[str, list[int]] = {}
        for ev in self.take_level(tree, level, "VotesSubmitted"):
            party = _addr(ev.args["party"])
            w = {**where, "party": party}
            if party not in self.party_set:
                self.fail("voter is an approved party", "approved party", party, **w)
            at = (ev.block_number, ev.log_index)
            early = at < (started.block_number, started.log_index)
            if early and not previous and (self.last_closed is None or at < self.last_closed):
                # a root's ballot sent ahead while an earlier level of the tree before resolved (the tree went on):
                # held unused, and the party votes in the round
                self._ahead_ballot(ev, previous, w)
                continue
            if party in votes:
                self.fail("one vote set per party", 1, 2, **w)
            if self.active is not None and party not in self.active:
                self.fail("voter took part in the previous step (continuity)", "a party taking part", party, **w)
            vs = [int(v) for v in ev.args["votes"]]
            if early:
                raw = self._ahead_ballot(ev, previous, w)
                if raw is None:
                    continue
                vs = ref.ahead_ballot(raw, previous, open_nodes)
                self.counts.ahead_sets += 1
            if len(vs) != k:
                self.fail("number of votes", k, len(vs), **w)
            for j, v in enumerate(vs):
                if v != ref.ABSTAIN and not 0 <= v < self.num_features:
                    self.fail("vote is a feature or -1", f"[-1, {self.num_features})", v, node=open_nodes[j], **w)
            if ev.block_number > int(started.args["deadline"]):
                self.fail("vote before the step deadline", f"block <= {started.args['deadline']}", ev.block_number, **w)
            votes[party] = vs
            self.counts.vote_sets += 1
        closed = self.one("VotingClosed", self.take_level(tree, level, "VotingClosed"), **where)
        if closed is None:
            self.pending = f"{progress}, voting open"
            return None
        if int(closed.args["voters"]) != len(votes):
            self.fail("VotingClosed voters", len(votes), int(closed.args["voters"]), **where)
        taking_part = len(self.parties) if self.active is None else len(self.active)
        if len(votes) < taking_part and closed.block_number <= int(started.args["deadline"]):
            self.fail(
                "voting closed after its deadline or with every vote", "later block", closed.block_number, **where
            )
        if int(closed.args["deadline"]) != closed.block_number + step:
            self.fail(
                "histogram deadline (block + stepBlocks)", closed.block_number + step, closed.args["deadline"], **where
            )
        voters = [p for p in self.parties if p in votes]
        # top-2
        cands = {
            nd: self._candidates(
                tree,
                nd,
                ref.top2([votes[p][j] for p in voters], self.num_features, self.tie_break, tree, nd),
                "candidates (top-2 of the votes)",
                where,
            )
            for j, nd in enumerate(open_nodes)
        }
        return votes, cands, int(closed.args["deadline"])

    def _ahead_not_taken(self, tree: int, level: int, previous: list[int]) -> None:
        """Ballots sent ahead for a level that never opened (the level before made no split) or has not opened yet
        (the level before is resolving; ``previous`` empty: the next tree's root): the contract holds them unused;
        each must be a ballot the contract takes ahead (``_ahead_ballot``) from an approved party."""
        for ev in self.take_level(tree, level, "VotesSubmitted"):
            party = _addr(ev.args["party"])
            where = {"tree": tree, "level": level, "party": party}
            if party not in self.party_set:
                self.fail("voter is an approved party", "approved party", party, **where)
            self._ahead_ballot(ev, previous, where)

    def _ahead_ballot(self, ev: Event, previous: list[int], where: dict[str, Any]) -> list[int] | None:
        """A ballot sent ahead as the contract takes it: two votes per node of ``previous``, or one for a root
        (``previous`` empty), each a feature or -1 (it refuses the whole ballot otherwise). Its votes, or None where
        it is not one. (Who sent it is checked by the caller, as for any ballot.)"""
        vs = [int(v) for v in ev.args["votes"]]
        want = 2 * len(previous) if previous else 1
        if len(vs) != want:
            self.fail(
                "number of votes sent ahead (two per node of the level before, one at a root)", want, len(vs), **where
            )
            return None
        bad = [v for v in vs if v != ref.ABSTAIN and not 0 <= v < self.num_features]
        if bad:
            self.fail("vote sent ahead is a feature or -1", f"[-1, {self.num_features})", bad[0], **where)
            return None
        return vs

    def _drawn(
        self, tree: int, level: int, open_nodes: list[int], started: Event, where: dict[str, Any]
    ) -> tuple[dict[str, list[int]], dict[int, tuple[int, int]], int]:
        """A level with drawn candidates: no vote round (a vote or a close is a mismatch), each node's candidates
        fixed as the level opened to ``reference.drawn_candidates``. The parties taking part count as voters of empty
        ballots (no voting contribution), and the level's first deadline is its histogram deadline."""
        for name in ("VotesSubmitted", "VotingClosed"):
            if self.take_level(tree, level, name):
                self.fail("no vote round with drawn candidates", "none", name, **where)
        taking_part = self.parties if self.active is None else [p for p in self.parties if p in self.active]
        votes = {p: [ref.ABSTAIN] * len(open_nodes) for p in taking_part}
        cands = {
            nd: self._candidates(
                tree,
                nd,
                ref.drawn_candidates(self.num_features, tree, nd),
                "candidates (drawn from the public seed)",
                where,
                opened=started.block_number,
            )
            for nd in open_nodes
        }
        return votes, cands, int(started.args["deadline"])

    def _candidates(
        self,
        tree: int,
        nd: int,
        want: tuple[int, int],
        what: str,
        where: dict[str, Any],
        opened: int | None = None,
    ) -> tuple[int, int]:
        """The node's one ``CandidatesFixed`` against the candidates it must fix (``what`` names the rule); with
        ``opened``, also fixed in the block that opened the level (drawn candidates). Records them on the node."""
        w = {**where, "node": nd}
        fixed = self.one("CandidatesFixed", self.take_node(tree, nd, "CandidatesFixed"), **w)
        if fixed is None:
            self.fail("CandidatesFixed", want, "none", **w)
        if opened is not None and fixed.block_number != opened:
            self.fail("drawn candidates fixed as the level opens", opened, fixed.block_number, **w)
        got = (int(fixed.args["first"]), int(fixed.args["second"]))
        if got != want:
            self.fail(what, want, got, **w)
        self.nodes[(tree, nd)] = _with(self.nodes[(tree, nd)], cand0=want[0], cand1=want[1])
        return want

    def _committed(self, parts: list[Event], submitted: Event, deadline: int, where: dict[str, Any]) -> list[int]:
        """The words a party committed in ``commitHistograms`` parts before its submission, checked as the contract
        takes them: in order, each from the node after the last, before the submission and the deadline."""
        words_: list[int] = []
        for ev in parts:
            if int(ev.args["first"]) != len(words_) // (6 * self.nbins):
                self.fail("committed part's first node", len(words_) // (6 * self.nbins), ev.args["first"], **where)
            if (ev.block_number, ev.log_index) > (submitted.block_number, submitted.log_index):
                self.fail("histogram parts before the submission", submitted.block_number, ev.block_number, **where)
            if ev.block_number > deadline:
                self.fail("histogram parts before the step deadline", f"block <= {deadline}", ev.block_number, **where)
            words_.extend(int(x) for x in ev.args["data"])
        return words_

    def _histograms(
        self,
        ev: Event,
        prefix: list[int],
        tree: int,
        level: int,
        open_nodes: list[int],
        cands: dict[int, tuple[int, int]],
        party: str,
    ) -> list[ref.NodeHistograms]:
        """Commitment (data vs root) and endorsements (signatures from the transaction input) of one submission,
        whose level starts with the ``prefix`` words committed in parts."""
        where: dict[str, Any] = {"tree": tree, "level": level, "party": party}
        final = [int(x) for x in ev.args["data"]]
        data = prefix + final
        blocks = split_level_data(data, len(open_nodes), self.nbins)
        if blocks is None:
            self.fail("histogram data length", len(open_nodes) * 6 * self.nbins, len(data), **where)
        root = merkle_root([keccak(words(b)) for b in blocks])
        if bytes(ev.args["root"]) != root:
            self.fail("histogram commitment (Merkle root of the data)", root, bytes(ev.args["root"]), **where)
        candidates = self._find_calls(ev, tree, level, final)
        if not candidates:
            self.fail(
                "submitHistograms call in the transaction input", f"tx {ev.tx_hash} carrying this data", "none", **where
            )
        # Several calls with this data in one transaction (a batch, or decoy bytes in a wrapper's input) cannot be told
        # apart without a trace: the submission is accepted when any of them carries a valid endorsement set.
        first: Mismatch | None = None
        for call in candidates:
            found = self._endorsements(call, root, tree, level, party, int(ev.args["endorsements"]), where)
            if found is None:
                self.counts.signatures += len(call.signatures)
                credit = _least(call.credits)
                recorded = tuple(int(x) for x in ev.args["credit"])
                if recorded != (credit.g, credit.h, credit.n):
                    self.fail("credit (least of the endorsements')", (credit.g, credit.h, credit.n), recorded, **where)
                if level == 0:
                    self.credits[party] = credit
                break
            first = first or found
        else:
            assert first is not None
            raise _Found(first)
        return [block_histograms(b, cands[nd], self.nbins) for b, nd in zip(blocks, open_nodes, strict=True)]

    def _rules(self, hists: list[ref.NodeHistograms], tree: int, level: int, open_nodes: list[int], party: str) -> None:
        """The exact rules ``submitHistograms`` applies (``ledger.spec.histogram_rules``), on the submitted data."""
        try:
            check_level(hists, open_nodes, self.bounds, tree == 0, None if level == 0 else self.sides.get(party, {}))
        except HistogramRuleError as exc:
            self.fail(
                "exact histogram rules (the contract would revert)",
                "none broken",
                str(exc),
                tree=tree,
                level=level,
                party=party,
            )
        except ref.FixedPointOverflow as exc:
            self.fail(
                "exact histogram rules (the contract would revert)",
                "no overflow",
                str(exc),
                tree=tree,
                level=level,
                party=party,
            )

    def _carry(self, root: ref.NodeHistograms, tree: int, party: str) -> None:
        """The verifiers' carry rule (``ledger.spec.tree_carry``): an endorsed root within what the party's previous
        tree allows. Its inputs are all on chain, so a root a quorum endorsed against it is named here."""
        self.tree_hists.pop(tree - 2, None)
        self.tree_nodes.pop(tree - 2, None)
        rule = self.cfg.get("endorseRule", ref.ENDORSE_STATISTICAL)
        if tree == 0 or not applies(rule, self.objective, self.cfg.get("epsilon", 0) > 0):
            return
        levels = self.tree_hists.get(tree - 1, {}).get(party, [])
        if not levels:
            return  # it did not take part in the previous tree: continuity refuses it (checked with the rules)
        splits, leaves = self._tree_nodes(tree - 1)
        previous = candidate_totals(levels[0][1], 0)
        carry = Carry.of(self.objective, previous, leaf_sums(levels, splits, leaves), self.score_bounds.before(tree))
        try:
            carry.check(candidate_totals(root, 0))
        except CarryError as exc:
            self.fail(
                "root totals within what the party's previous tree allows (its verifiers must refuse them)",
                "within",
                str(exc),
                tree=tree,
                level=0,
                party=party,
            )

    def _tree_nodes(self, tree: int) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
        """A finished replayed tree's splits (node -> feature, threshold) and leaf values (node -> value), read once
        for all its parties."""
        if tree in self.tree_nodes:
            return self.tree_nodes[tree]
        splits: dict[int, tuple[int, int]] = {}
        leaves: dict[int, int] = {}
        for nd in range(1, 2 << self.depth):
            s = self.nodes.get((tree, nd))
            if s is not None and s.kind == KIND_SPLIT:
                splits[nd] = (s.feature, s.threshold)
            elif s is not None and s.kind == KIND_LEAF:
                leaves[nd] = s.value
        self.tree_nodes[tree] = (splits, leaves)
        return splits, leaves

    def _endorsements(
        self, call: SubmitCall, root: bytes, tree: int, level: int, party: str, recorded: int, where: dict[str, Any]
    ) -> Mismatch | None:
        """The contract's ``_checkEndorsements`` on one decoded call: the first violation, or None."""
        seen: set[str] = set()
        credits = call.credits or (ref.NEUTRAL,) * len(call.signatures)
        for i, (sig, credit) in enumerate(zip(call.signatures, credits, strict=True)):
            digest = endorsement_digest(
                self.inp.chain_id, self.contract, self.inp.task_id, tree, level, party, root, credit
            )
            signer = recover_endorser(digest, bytes(sig))
            fld = f"endorsement {i} signer"
            if signer is None:
                return Mismatch(fld, "a valid low-s 65-byte signature", bytes(sig), **where)
            if signer not in self.party_set:
                return Mismatch(fld, "an approved party", signer, **where)
            if signer == party:
                return Mismatch(fld, "a party other than the sender", signer, **where)
            if signer in seen:
                return Mismatch(fld, "no duplicate endorser", signer, **where)
            seen.add(signer)
        if len(seen) < self.quorum:
            return Mismatch("endorsements (quorum)", f">= {self.quorum}", len(seen), **where)
        if recorded != len(seen):
            return Mismatch("HistogramsSubmitted endorsements", len(seen), recorded, **where)
        return None

    def _find_calls(self, ev: Event, tree: int, level: int, data: list[int]) -> list[SubmitCall]:
        return [
            call
            for call in self.inp.calls.get(_txkey(ev.tx_hash), [])
            if (call.task_id, call.tree, call.level) == (self.inp.task_id, tree, level) and list(call.data) == data
        ]

    def _node(
        self,
        tree: int,
        level: int,
        nd: int,
        j: int,
        accepted: list[str],
        hists: dict[str, list[ref.NodeHistograms]],
        votes: dict[str, list[int]],
        inherited: dict[tuple[int, int], ref.Totals],
        last: bool,
        features: tuple[int, int],
    ) -> bool | None:
        """Check one node's resolution; True when it split, False for a leaf, None when not resolved yet."""
        where: dict[str, Any] = {"tree": tree, "level": level, "node": nd}
        contrib = self.one("ContributionsAdded", self.take_node(tree, nd, "ContributionsAdded"), **where)
        splits = self.take_node(tree, nd, "NodeSplit")
        leaves = self.take_node(tree, nd, "LeafSet")
        if contrib is None:
            if splits or leaves:
                self.fail("ContributionsAdded with the node's result", "one event", "none", **where)
            return None
        recorded_parties = [_addr(p) for p in contrib.args["parties"]]
        if recorded_parties != accepted:
            self.fail("accepted parties (histogram senders in party order)", accepted, recorded_parties, **where)
        try:
            res = ref.resolve_node(
                [hists[p][j] for p in accepted],
                [votes[p][j] for p in accepted],
                inherited.get((tree, nd)) if nd != 1 else None,
                last,
                self.params,
                [self.credits.get(p, ref.NEUTRAL) for p in accepted],
            )
        except (ref.FixedPointOverflow, ZeroDivisionError, ValueError) as exc:
            self.fail("reference resolution (the contract would revert)", f"revert: {exc}", "resolved", **where)
        self.counts.nodes += 1
        key = (tree, nd)
        if nd == 1:
            agg = ref.aggregate([hists[p][j] for p in accepted]) if accepted else None
            tot = (sum(agg.g[0]), sum(agg.h[0]), sum(agg.n[0])) if agg is not None else (0, 0, 0)
            self.nodes[key] = _with(self.nodes[key], g=tot[0], h=tot[1], n=tot[2])
        if res.split is None:
            if splits:
                self.fail("node result", "leaf", "split", **where)
            leaf = self.one("LeafSet", leaves, **where)
            if leaf is None:
                self.fail("LeafSet", res.leaf, "none", **where)
            if int(leaf.args["value"]) != res.leaf:
                self.fail("leaf value", res.leaf, int(leaf.args["value"]), **where)
            self.nodes[key] = _with(self.nodes[key], kind=KIND_LEAF, value=int(res.leaf or 0))
        else:
            sp = res.split
            if leaves:
                self.fail("node result", "split", "leaf", **where)
            ns = self.one("NodeSplit", splits, **where)
            if ns is None:
                self.fail("NodeSplit", (sp.feature, sp.threshold, sp.gain), "none", **where)
            for fld, want, got in (
                ("split feature", sp.feature, int(ns.args["feature"])),
                ("split threshold", sp.threshold, int(ns.args["threshold"])),
                ("split gain", sp.gain, int(ns.args["gain"])),
                (
                    "split sides (gL, hL, nL, gR, hR, nR)",
                    [sp.g_left, sp.h_left, sp.n_left, sp.g_right, sp.h_right, sp.n_right],
                    [int(x) for x in ns.args["sides"]],
                ),
            ):
                if want != got:
                    self.fail(fld, want, got, **where)
            self.nodes[key] = _with(
                self.nodes[key], kind=KIND_SPLIT, feature=sp.feature, threshold=sp.threshold, value=sp.gain
            )
            assert res.left is not None and res.right is not None
            for p in accepted:
                self.sides[p][nd] = Sides.of(hists[p][j], sp.rank, sp.threshold)
            for child, sums in ((2 * nd, res.left), (2 * nd + 1, res.right)):
                inherited[(tree, child)] = sums
                self.nodes[(tree, child)] = NodeState(
                    kind=0 if last else KIND_OPEN, tree=tree, g=sums.g, h=sums.h, n=sums.n
                )
            if last:
                for child, value in ((2 * nd, res.left_leaf), (2 * nd + 1, res.right_leaf)):
                    w = {"tree": tree, "level": level + 1, "node": child}
                    leaf = self.one("LeafSet", self.take_node(tree, child, "LeafSet"), **w)
                    if leaf is None:
                        self.fail("LeafSet", value, "none", **w)
                    if int(leaf.args["value"]) != value:
                        self.fail("leaf value", value, int(leaf.args["value"]), **w)
                    self.nodes[(tree, child)] = _with(self.nodes[(tree, child)], kind=KIND_LEAF, value=int(value or 0))
                    self.counts.nodes += 1
        for fld, want_all in (("phi", res.phi), ("kappa", res.kappa), ("contribution", res.contribution)):
            got_all = [int(x) for x in contrib.args[fld]]
            if len(got_all) != len(want_all):
                self.fail(f"number of {fld} values", len(want_all), len(got_all), **where)
            for p, want, got in zip(accepted, want_all, got_all, strict=True):
                if want != got:
                    self.fail(fld, want, got, party=p, **where)
        for p, c in zip(accepted, res.contribution, strict=True):
            self.totals[p] = self.totals.get(p, 0) + c
        return res.split is not None

    # ----------------------------------------------------------------- rewards and storage

    def _check_totals_and_payouts(self) -> None:
        completed = self.by_name.get("TaskCompleted", [])
        assigned = self.by_name.get("RewardAssigned", []) + self.by_name.get("RewardForfeited", [])
        if not self.completed:
            if completed or assigned:
                self.fail(
                    "payouts only after the last level", "no TaskCompleted/RewardAssigned/RewardForfeited", "present"
                )
            return
        done = self.one("TaskCompleted", completed)
        if done is None:
            self.fail("TaskCompleted after the last level", "TaskCompleted", "none")
        finished = set(self.parties) if self.active is None else self.active
        positive, want = expected_payouts(self.parties, self.totals, finished, self.reward, self.requester)
        if int(done.args["positiveTotal"]) != positive:
            self.fail("positive contribution total", positive, int(done.args["positiveTotal"]))
        emitted = sorted(assigned, key=lambda e: (e.block_number, e.log_index))
        got = [(e.name, _addr(e.args.get("account", e.args.get("party"))), int(e.args["amount"])) for e in emitted]
        for i in range(max(len(want), len(got))):
            w = want[i] if i < len(want) else None
            g = got[i] if i < len(got) else None
            if w != g:
                party = (w or g or ("?", "?", 0))[1]
                self.fail(f"payout #{i} (event, account, amount)", w, g, party=party)
            self.counts.payouts += 1

    def _check_state(self, st: ChainState) -> None:
        """Storage (through the views) against the replay: what the contract keeps and pays from must be what its
        own events, recomputed, say it should be."""
        self.counts.state_checked = True
        if st.config != self.cfg:
            diff = sorted(k for k in set(st.config) | set(self.cfg) if st.config.get(k) != self.cfg.get(k))
            name = diff[0]
            self.fail(f"stored config {name}", self.cfg.get(name), st.config.get(name))
        want_status = STATUS_COMPLETED if self.completed else STATUS_TRAINING
        if st.status != want_status:
            self.fail("stored task status", want_status, st.status)
        if st.reward != self.reward:
            self.fail("stored reward", self.reward, st.reward)
        for p in self.parties:
            want = self.totals.get(p, 0)
            got = st.contributions.get(p)
            if got != want:
                self.fail("stored contribution total (getMember)", want, got, party=p)
        for key in sorted(self.nodes):
            want_node, got_node = self.nodes[key], st.nodes.get(key)
            if got_node is None:
                continue  # not read from the chain (the reader reads every node the replay knows)
            tree, nd = key
            for name in NodeState.__dataclass_fields__:
                a, b = getattr(want_node, name), getattr(got_node, name)
                if a != b:
                    self.fail(f"stored node {name} (getNode)", a, b, tree=tree, level=nd.bit_length() - 1, node=nd)
        owed: dict[str, int] = {}
        for ev in self.by_name.get("RewardAssigned", []):
            a = _addr(ev.args["account"])
            owed[a] = owed.get(a, 0) + int(ev.args["amount"])
        for ev in self.by_name.get("Withdrawn", []):
            a = _addr(ev.args["account"])
            owed[a] = owed.get(a, 0) - int(ev.args["amount"])
        for a in sorted(set(owed) | set(st.owed)):
            if a in st.owed and st.owed[a] != owed.get(a, 0):
                self.fail("stored owed (assigned minus withdrawn)", owed.get(a, 0), st.owed[a], party=a)


def _least(credits: Sequence[ref.Credit]) -> ref.Credit:
    """The credit the contract applies: the least attested, quantity by quantity (neutral with no endorsement)."""
    if not credits:
        return ref.NEUTRAL
    return ref.Credit(min(c.g for c in credits), min(c.h for c in credits), min(c.n for c in credits))


def _with(node: NodeState, **changes: int) -> NodeState:
    return NodeState(**{**node.__dict__, **changes})


def _txkey(tx_hash: str) -> str:
    return tx_hash.lower().removeprefix("0x")


def audit_events(inp: AuditInput) -> AuditReport:
    """Replay a task's record and recompute it with the reference; the first mismatch, or OK with counts.

    Raises :class:`AuditError` when the task does not exist or has not started (nothing to audit)."""
    auditor = _Auditor(inp)
    try:
        auditor.run()
    except _Found as found:
        return AuditReport(False, str(found.mismatch), auditor.counts, found.mismatch, auditor.completed)
    return AuditReport(True, None, auditor.counts, None, auditor.completed, auditor.pending, auditor.privacy())


# ---------------------------------------------------------------------------------------------------- chain layer


def _submit_abi(abi: Iterable[dict[str, Any]]) -> tuple[bytes, list[str]]:
    for item in abi:
        if item.get("type") == "function" and item.get("name") == "submitHistograms":
            types = [canonical_type(i) for i in item["inputs"]]
            return keccak(text=f"submitHistograms({','.join(types)})")[:4], types
    raise AuditError("the FGBDTChain ABI has no submitHistograms function")


def find_submit_calls(tx_input: bytes, selector: bytes, types: Sequence[str]) -> list[SubmitCall]:
    """Every decodable ``submitHistograms`` call inside a transaction input: at offset 0 for a direct call, deeper
    for a relayed one (an ERC-2771 forwarder's request carries the call, with the signer appended, as ``bytes``)."""
    out: list[SubmitCall] = []
    pos = tx_input.find(selector)
    while pos >= 0:
        try:
            task_id, tree, level, data, endorsements = abi_decode(list(types), tx_input[pos + 4 :])
            call = SubmitCall(
                int(task_id),
                int(tree),
                int(level),
                tuple(data),
                tuple(bytes(e[0]) for e in endorsements),
                tuple(ref.Credit(int(e[1]), int(e[2]), int(e[3])) for e in endorsements),
            )
        except Exception:  # the selector bytes occurred by chance inside other data, or credits out of range
            pass
        else:
            out.append(call)
        pos = tx_input.find(selector, pos + 1)
    return out


def read_task(client: ChainClient, address: str, task_id: int, block: int | None = None) -> AuditInput:
    """Read a task's events, ``submitHistograms`` calldata and contract views, all at one block (default: latest)."""
    w3 = client.w3
    try:
        code = w3.eth.get_code(to_checksum_address(address))
    except ValueError as exc:
        raise AuditError(f"invalid contract address {address!r}: {exc}") from exc
    if len(code) == 0:
        raise AuditError(f"no contract code at {address} on chain {client.chain_id}")
    contract = client.register("FGBDTChain", address)
    latest = client.block_number
    if block is not None and not 0 <= block <= latest:
        raise AuditError(f"block {block} is not in the chain (latest is {latest})")
    at = latest if block is None else block
    events = client.logs(contract, (), task_id, to_block=at)
    names = {e.name for e in events}
    if "TaskCreated" not in names:
        raise AuditError(f"unknown task {task_id} at {contract.address}")
    if "TrainingStarted" not in names:
        state = "was cancelled" if "TaskCancelled" in names else "has not started training"
        raise AuditError(f"task {task_id} {state}: nothing to audit")
    selector, types = _submit_abi(client.artifacts["FGBDTChain"].abi)
    calls: dict[str, list[SubmitCall]] = {}
    for ev in events:
        if ev.name == "HistogramsSubmitted" and _txkey(ev.tx_hash) not in calls:
            tx = w3.eth.get_transaction(ev.tx_hash)  # type: ignore[arg-type]
            calls[_txkey(ev.tx_hash)] = find_submit_calls(bytes(tx["input"]), selector, types)
    return AuditInput(
        client.chain_id, contract.address, task_id, events, calls, _read_state(contract, task_id, events, at)
    )


def _read_state(contract: Any, task_id: int, events: list[Event], at: int) -> ChainState:
    """The views the audit compares with its replay: state, config, members, nodes and owed amounts."""

    def view(fn: str, *args: Any) -> Any:
        return getattr(contract.functions, fn)(*args).call(block_identifier=at)

    st = view("getState", task_id)
    cfg_abi = next(i for i in contract.abi if i.get("type") == "function" and i.get("name") == "getConfig")
    names = [c["name"] for c in cfg_abi["outputs"][0]["components"]]
    cfg_raw = view("getConfig", task_id)
    config = {
        k: int(v) for k, v in (cfg_raw.items() if isinstance(cfg_raw, dict) else zip(names, cfg_raw, strict=True))
    }
    parties: list[str] = []
    requester = _addr(st[0])
    accounts = {requester}
    nodes: set[tuple[int, int]] = set()
    for ev in events:
        if ev.name == "TrainingStarted":
            parties = [_addr(p) for p in ev.args["parties"]]
        elif ev.name in ("RewardAssigned", "Withdrawn"):
            accounts.add(_addr(ev.args["account"]))
        elif ev.name in ("CandidatesFixed", "NodeSplit", "LeafSet"):
            t, nd = int(ev.args["tree"]), int(ev.args["node"])
            nodes.add((t, nd))
            if ev.name == "NodeSplit":
                nodes.update({(t, 2 * nd), (t, 2 * nd + 1)})
    accounts.update(parties)
    contributions = {p: int(view("getMember", task_id, p)[3]) for p in parties}
    owed = {a: int(view("owed", task_id, a)) for a in sorted(accounts)}
    node_states = {}
    kept = int(st[3]) - 1  # getState's tree: the chain keeps its nodes and the previous tree's (getNode)
    for t, nd in sorted(nodes):
        if t < kept:
            continue
        rec = view("getNode", task_id, t, nd)
        values = rec.values() if isinstance(rec, dict) else rec
        node_states[(t, nd)] = NodeState(*(int(x) for x in values))
    return ChainState(int(st[1]), int(st[8]), config, contributions, owed, node_states)


def audit_chain(client: ChainClient, address: str, task_id: int, block: int | None = None) -> AuditReport:
    """Read a task from the chain and audit it (see :func:`read_task` and :func:`audit_events`)."""
    return audit_events(read_task(client, address, task_id, block))
