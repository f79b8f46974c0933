"""A party's node: joins a task, follows it on chain level by level, and endorses the other parties' histograms.

The node holds only its own rows. Everything else it needs it reads from the chain: the task's parameters and
schema, the common bin edges (``BinEdgesFixed``), the other parties' PSDs (``JoinRequested``), the candidates of
every open node, the recorded splits and leaves. Its own progress is derived from chain state at every step, never
kept only in memory, so a node killed mid-level and restarted with the same key resumes where the chain is and never
submits twice (it checks the chain first; the contract would refuse a second vote or histogram anyway).

Numerically it runs :class:`node.protocol.local_party.LocalParty`, the code the simulator runs for each party, on the
same rows, edges, PSDs and seeds, so a task trained on chain records exactly the model ``fgbdt simulate`` computes.

``PartyNode`` wires the parts, each a concern of its own module: joining the task (``joining``), following the chain
(``following``, ``tree_log``, ``sent``), this party's view of a level (``level_state``), the level's work
(``level_work``, ``votes_ahead``, ``resolution``), endorsement (``endorse_asking``, ``endorsing``) and the relay of
each level's batch (``relaying``). They share the task's terms and who takes part (``session``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import TaskConfig
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tree_carry import Carry
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskContract
from fgbdt_chain.node.party.endorse_asking import EndorsementAsker
from fgbdt_chain.node.party.endorsing import Endorser
from fgbdt_chain.node.party.following import ChainFollower, ChainLag
from fgbdt_chain.node.party.joining import Joiner, TaskTerms, read_terms
from fgbdt_chain.node.party.level_state import LevelContext, LevelState
from fgbdt_chain.node.party.level_work import LevelWork
from fgbdt_chain.node.party.relay import RelayChannel
from fgbdt_chain.node.party.relaying import Relayer
from fgbdt_chain.node.party.resolution import Resolver
from fgbdt_chain.node.party.sent import SentLog
from fgbdt_chain.node.party.session import CHAIN_DOWN, NodeError, NodeSettings, PartyData, PartySession
from fgbdt_chain.node.party.tree_log import TreeLog
from fgbdt_chain.node.party.votes_ahead import VotesAhead
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.protocol.warmup import warm_up

__all__ = ["NodeError", "NodeSettings", "PartyNode"]

DEFAULT_SETTINGS = NodeSettings()


class PartyNode:
    """One party of one task."""

    def __init__(
        self,
        task: TaskContract,
        task_id: int,
        account: LocalAccount,
        data: PartyData,
        endpoint: str,
        settings: NodeSettings = DEFAULT_SETTINGS,
        log: Callable[[str], None] = print,
    ) -> None:
        terms = read_terms(task, task_id, data, settings)
        session = PartySession(
            task, task_id, account, data, settings, log, terms.cfg, terms.params, terms.privacy, terms.rule
        )
        self._assemble(session, terms, endpoint)

    @classmethod
    def assembled(cls, session: PartySession, terms: TaskTerms, endpoint: str = "") -> PartyNode:
        """A node of parts over ``session``, whose terms are given rather than read from the chain (tests)."""
        node = cls.__new__(cls)
        node._assemble(session, terms, endpoint)
        return node

    def _assemble(self, session: PartySession, terms: TaskTerms, endpoint: str) -> None:
        self.session = session
        self.chain = ChainFollower(session)
        self.sent = SentLog(session, self.chain)
        self.joiner = Joiner(session, terms, endpoint)
        self.levels = LevelState(session, self.chain)
        self.asker = EndorsementAsker(session, self.chain)
        self.endorser = Endorser(session, self.chain, self.levels)
        self.resolver = Resolver(session, self.chain, self.sent, self.endorser)
        self.relayer = Relayer(session, self.chain, self.sent, self.resolver)
        self.ahead = VotesAhead(session, self.chain, self.sent, self.levels, self.endorser, self.resolver, self.relayer)
        self.work = LevelWork(
            session,
            self.chain,
            self.sent,
            self.levels,
            self.asker,
            self.endorser,
            self.resolver,
            self.relayer,
            self.ahead,
        )

    # ------------------------------------------------------------------ what others read of the node

    @property
    def task(self) -> TaskContract:
        return self.session.task

    @property
    def task_id(self) -> int:
        return self.session.task_id

    @property
    def account(self) -> LocalAccount:
        return self.session.account

    @property
    def address(self) -> str:
        return self.session.address

    @property
    def settings(self) -> NodeSettings:
        return self.session.settings

    @property
    def cfg(self) -> TaskConfig:
        return self.session.cfg

    @property
    def params(self) -> TrainParams:
        return self.session.params

    @property
    def label_range(self) -> tuple[float, float]:
        """The label's range in the task's schema: this party's PSD splits the label over it, as every other's."""
        return self.joiner.label_range

    @property
    def endpoint(self) -> str:
        """The endorsement endpoint this party joins with (set once its server listens)."""
        return self.joiner.endpoint

    @endpoint.setter
    def endpoint(self, url: str) -> None:
        self.joiner.endpoint = url

    @property
    def party(self) -> LocalParty | None:
        return self.session.party

    @property
    def parties(self) -> list[str]:
        return self.session.parties

    @property
    def index(self) -> int:
        return self.session.index

    @property
    def relay(self) -> RelayChannel | None:
        """This party's side of the relay (``node.party.relay``; None until training starts, or with ``relay`` off)."""
        return self.session.relay

    @property
    def trees(self) -> TreeLog:
        return self.chain.trees

    @property
    def seconds(self) -> dict[str, float]:
        """Where this node's time went (for the chain benchmark): compute, chain reads, transactions, endorsements."""
        return self.session.seconds

    def timed(self, category: str) -> AbstractContextManager[None]:
        return self.session.timed(category)

    def time_split(self) -> str:
        return self.session.time_split()

    # ------------------------------------------------------------------ joining

    def registered_endpoint(self) -> str | None:
        """The endorsement endpoint this party joined the task with (its ``JoinRequested``), None before it joined."""
        return self.joiner.registered_endpoint()

    def join(self) -> None:
        """Ask to join with the PSD and binning sketch, unless this key already did (a restart)."""
        self.joiner.join()

    def wait_for_start(self) -> None:
        """Until the requester approved this party and started training; refusal or cancellation is fatal."""
        self.joiner.wait_for_start()

    # ------------------------------------------------------------------ per-level state

    def context(self, tree: int, level: int, open_nodes: Sequence[int]) -> LevelContext:
        """This party's view of a level (cached; shared with the endorsement server)."""
        return self.levels.context(tree, level, open_nodes)

    def candidates(self, ctx: LevelContext) -> list[tuple[int, int]]:
        """The level's candidates as fixed by the closing of its vote (``ChainFollower.candidates``)."""
        return self.chain.candidates(ctx)

    def my_histograms(self, ctx: LevelContext) -> list[ref.NodeHistograms]:
        """This party's histograms of the level's open nodes (``LevelState.my_histograms``)."""
        return self.levels.my_histograms(ctx)

    # ------------------------------------------------------------------ the training loop

    def run(self) -> None:
        """Join, wait for the start, then follow the task until it completes, riding out chain outages."""
        # The compiled kernels load (numba's target context and its cache, about a second of CPU) on a thread while
        # this party joins and waits for the requester's approval and start, instead of on the first level, where
        # every party waits for the slowest; a kernel called before they are in waits on numba's compile lock.
        threading.Thread(target=warm_up, name="kernel warm-up", daemon=True).start()
        self._survive(self.join)
        self._survive(self.wait_for_start)
        try:
            self.chain.follow(self.step, self._survive)
        finally:  # also when stopped (SIGTERM): the time split of a partial run is a measurement too
            self.asker.close()
            self.session.verifiers.close()
            self.session.log(f"time split: {self.time_split()}")
            self.session.log(self.session.level_clock.log_line())
            sent = sorted(self.task.client.outcomes().items())
            self.session.log(
                "transactions (ok/failed/out of gas): "
                + ", ".join(f"{f} {ok}/{bad}/{short}" for f, (ok, bad, short) in sent)
            )

    def _survive(self, action: Callable[[], Any]) -> Any:
        """Run ``action``; while the chain is unreachable, retry with backoff up to ``chain_outage_seconds``."""
        down_since: float | None = None
        while True:
            try:
                result = action()
                if down_since is not None:
                    self.session.log(f"chain reachable again after {time.monotonic() - down_since:.1f} s")
                return result
            except CHAIN_DOWN as exc:
                now = time.monotonic()
                if down_since is None:
                    down_since = now
                    self.session.log(f"chain unreachable ({type(exc).__name__}); retrying")
                elif now - down_since > self.settings.chain_outage_seconds:
                    raise NodeError(f"chain unreachable for {now - down_since:.0f} s") from exc
                self.forget_recent_chain()
                time.sleep(min(2.0, 0.2 + (now - down_since) / 10))

    def forget_recent_chain(self) -> None:
        """What this party remembers of the chain's latest blocks is read again after an outage: a transaction may
        have landed unseen, and a node that restarted may have lost blocks this party saw (anvil saves its state
        when it stops, so a vote mined just before can be gone: every party then believed it had voted, and failed
        its submission with ``DidNotVote`` once the others closed the step; the subscription's announced head is
        taken again from the node, ``NewHeads.latest``)."""
        self.task.client.forget_nonces()
        with self.session.lock:
            self.sent.forget()
            self.ahead.forget()
            if self.relay is not None:
                self.relay.forget_nonce()
            self.chain.forget_recent()

    def step(self) -> bool:
        """One look at the chain and whatever this party owes the current step; True once the task completed."""
        self.chain.quiet = False
        st = self.chain.read_state()
        if self.relay is not None:
            self.relay.inbox.note_tree(st.tree)
        if st.status == Status.TRAINING:
            self.sent.note_following(st)
        if st.status == Status.COMPLETED:
            total = ref.from_fixed(self.task.contribution(self.task_id, self.address))
            self.session.log(f"task completed; this party's contribution {total:.6f}")
            return True
        if st.status != Status.TRAINING:
            raise NodeError(f"task {self.task_id} is {st.status.name.lower()}")
        try:
            with self.timed("computing (gradients, routing)"):
                ctx = self.context(st.tree, st.level, st.open_nodes())
        except ChainLag as exc:
            self.session.log(f"{exc}; looking again")
            self.chain.again = True
            return False
        self.chain.quiet = self.work.step(st, ctx)
        return False

    # ------------------------------------------------------------------ endorsing others

    def endorse(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Check another party's level histograms against this party's estimate; (HTTP status, JSON body)."""
        return self.endorser.endorse(body)

    def carry_of(self, party: str, tree: int) -> Carry | None:
        """What ``party``'s tree ``tree - 1`` allows of its root at ``tree`` (``Endorser.carry_of``)."""
        return self.endorser.carry_of(party, tree)
