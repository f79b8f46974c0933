"""What the collaborators of one party node share: the task and this party's key, its settings, the task's terms
(parameters, privacy, endorsement rule) and, once training starts, who takes part and this party's rows.

The node's work is split by concern (``node.party.party_node`` wires the parts); each part keeps its own state and
reads the shared one here, so that a part never holds a stale copy of what another changes (the parameters fitted to
the published edges, the parties, whether this party is still in the task).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.parameters import default
from fgbdt_chain.ledger.spec.task_params import TaskConfig
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.party.endorse_client import EndorseClient
from fgbdt_chain.node.party.level_clock import LevelClock
from fgbdt_chain.node.party.peer_auth import PeerLimits, RequestSigner, tls_client_context
from fgbdt_chain.node.party.relay import RELAY_TTL_SECONDS, RelayChannel, relay_patience
from fgbdt_chain.node.privacy.accountant import PrivacyPlan
from fgbdt_chain.node.protocol.endorsement import EndorsementRule
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.protocol.parquet_party import ParquetParty
from fgbdt_chain.node.protocol.verify import PartyEstimator

PartyData = Dataset | ParquetParty
"""This party's rows: loaded in memory, or a Parquet dataset read chunk by chunk (``node.protocol.parquet_party``)."""

CHAIN_DOWN: tuple[type[BaseException], ...] = (OSError, TimeoutError)
"""Transport failures of the JSON-RPC client (requests' ConnectionError and Timeout are OSErrors)."""


class NodeError(RuntimeError):
    """An unrecoverable condition: the node logs it and exits non-zero."""


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
    relay_patience_seconds: float | None = None
    """How long a party waits for the histograms it handed over to land before it submits them as its own transaction
    (the relayer failed, or held them back); None: past the request's deadline (``node.party.relay.relay_patience``
    of its time to live), so that the relayer can no longer land it too. Under a step's deadline either way."""
    block_seconds: float | None = None
    """The chain's block interval (``fgbdt node --block-time``, as the deployment states it), which sets how long a
    relayed request lives (``node.party.relay.relay_ttl``); None: measured from the chain's latest blocks when
    training starts (``measured_block_seconds``)."""
    resolve_batch: int = 16
    """Nodes per ``resolveNodes`` transaction: about 0.85M gas per node at M=4 (bench/gas.py), so 16 stay under
    half of a 30M block; a devnet with a large gas limit may take a whole level at once."""
    chain_outage_seconds: float = 300.0
    peer_limits: PeerLimits = field(default_factory=PeerLimits)
    """What this party's endpoints take from each other party (``node.party.peer_auth``)."""
    tls_ca_file: str | None = None
    """The CA certificates (PEM) the other parties' ``https`` endpoints are verified against; None: the system's."""


class PartySession:
    """One party of one task, as every part of its node sees it."""

    def __init__(
        self,
        task: TaskContract,
        task_id: int,
        account: LocalAccount,
        data: PartyData,
        settings: NodeSettings,
        log: Callable[[str], None],
        cfg: TaskConfig,
        params: TrainParams,
        privacy: PrivacyPlan,
        rule: EndorsementRule,
    ) -> None:
        self.task, self.task_id, self.account = task, task_id, account
        self.data, self.settings, self.log = data, settings, log
        self.address = account.address
        self.lock = threading.RLock()
        """Held by the main loop and by the endorsement endpoint's thread alike, around what both read and change."""
        self.cfg = cfg
        self.params = params
        """The task's training parameters; fitted to the published edges once training starts."""
        self.privacy = privacy
        """The task's differential privacy for everything this party releases (``node.privacy.accountant``)."""
        self.rule = rule
        self.verifiers = EndorseClient(
            settings.endorse_timeout,
            RequestSigner(account, lambda: task.client.chain_id, task_id),
            tls_client_context(settings.tls_ca_file),
        )
        """The connections to the other parties' endpoints: endorsement requests and requests handed to a relayer."""
        self.relay: RelayChannel | None = None
        """This party's side of the relay (``node.party.relay``; None until training starts, or with ``relay`` off)."""
        self.party: LocalParty | None = None
        self.parties: list[str] = []
        self.index = -1
        self.W = np.zeros((0, 0))
        self.estimators: list[PartyEstimator] = []
        self.endpoints: dict[str, str] = {}
        self.excluded = False
        """This party no longer takes part (refused, declined or silent once): it only verifies and resolves."""
        self.seconds: dict[str, float] = {}
        """Where this node's time went (for the chain benchmark): compute, chain reads, transactions, endorsements."""
        self.level_clock = LevelClock()
        """When each level reached each of its rounds, as this party saw it (for the chain benchmark)."""

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

    def relay_patience(self) -> float:
        """Seconds a party waits for the histograms it handed to the relayer to land before it sends them itself:
        the setting, else past the relayed request's time to live."""
        if self.settings.relay_patience_seconds is not None:
            return self.settings.relay_patience_seconds
        return relay_patience(self.relay.ttl if self.relay is not None else RELAY_TTL_SECONDS)

    def parties_in(self, mask: int) -> set[str]:
        """The parties of a submitter mask (bit p for ``parties[p]``, as ``HistogramsClosed`` marks them)."""
        return {p for i, p in enumerate(self.parties) if (mask >> i) & 1}

    def mask_of(self, parties: Collection[str]) -> int:
        """The submitter mask of ``parties`` (``parties_in``'s inverse)."""
        return sum(1 << i for i, p in enumerate(self.parties) if p in parties)

    def votes_on(self, tree: int) -> bool:
        """Whether tree ``tree`` exists and votes (a drawn tree has no ballots)."""
        return tree < self.cfg.trees and not ref.draws(tree, self.cfg.voted_trees)
