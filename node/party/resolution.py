"""Resolving a level: this party's share of its open nodes sent to the contract with every submitting party's
histograms, as this party holds them (its own and those it endorsed) or, failing that, as the chain's events carry
them."""

from __future__ import annotations

import time

from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.tx_size import resolution_batches
from fgbdt_chain.node.party.endorsing import Endorser
from fgbdt_chain.node.party.following import ChainFollower
from fgbdt_chain.node.party.level_state import LevelContext
from fgbdt_chain.node.party.relay import relayer_index
from fgbdt_chain.node.party.sent import SentLog
from fgbdt_chain.node.party.session import NodeError, PartySession

FIRST_NODE_GAS_PER_PARTY = 500_000
"""Gas per resolved node and submitting party assumed until this party has resolved a node (measured: about 0.85M
per node at M=4, ``bench/gas.py``): about twice that, so that a first share is one transaction, not one per node."""

HISTOGRAM_LAG_SECONDS = 60.0
"""How long a party waits for its node to serve a histogram event the chain already counts before it gives up: a
lagging log index catches up within a block or two; a lost event never does."""


def resolution_share(open_nodes: int, parties: int, nbins: int, batch: int) -> int:
    """Nodes per party's share of a level's resolution: as many as one ``resolveNodes`` carries with every party
    submitting (the calldata limit) and at most ``batch``. The same for every party, whatever gas each has seen, so
    that the shares cover the level without gaps or overlaps; a sender still splits its share by gas."""
    return resolution_batches(open_nodes, parties, nbins, open_nodes, 1, max(1, batch))


def fewer_histograms_than_chain(exc: ContractRevert) -> bool:
    """A ``resolveNodes`` revert because this party passed fewer submitters' histograms than the chain counts."""
    args = exc.args_
    return exc.name == "LengthMismatch" and len(args) == 2 and int(args[0]) > int(args[1])


class Resolver:
    """This party's part in resolving each level, and the level's submissions as it holds them."""

    def __init__(self, session: PartySession, chain: ChainFollower, sent: SentLog, endorser: Endorser) -> None:
        self.s, self.chain, self.sent, self.endorser = session, chain, sent, endorser
        self.node_gas = 0
        """The most gas one node of a resolveNodes call cost this party (0 until it resolved one)."""
        self._resolve_failures: dict[int, int] = {}
        self._histogram_lag_since: dict[tuple[int, int], float] = {}
        self._resolving_since: dict[tuple[int, int], float] = {}

    def grace_over(self, tree: int, level: int, now: float) -> bool:
        """Whether the resolution grace of (tree, level) passed since this party first saw it resolving: then any
        party resolves any node left, not only its share."""
        started = self._resolving_since.setdefault((tree, level), now)
        return now - started > self.s.settings.resolve_grace_seconds

    def resolvers(self, ctx: LevelContext) -> list[int]:
        """The party that resolves each open node of the level (``resolve``): runs of as many nodes as one
        transaction carries (``resolution_share``), run i to party (i + level) mod M, so run 0 to the level's relayer
        (``relayer_index``)."""
        parties = len(self.s.parties)
        share = resolution_share(len(ctx.open_nodes), parties, self.s.params.nbins, self.s.settings.resolve_batch)
        first = relayer_index(ctx.level, parties)
        return [(first + j // share) % parties for j in range(len(ctx.open_nodes))]

    def resolve(self, ctx: LevelContext, resolved_mask: int, anyone: bool) -> None:
        """Resolve this party's share of the level's open nodes, or any after a grace, ``resolve_batch`` nodes per
        transaction at most. The shares are runs of as many nodes as one transaction carries (``resolution_share``),
        run i going to party (i + level) mod M, run 0 to the level's relayer of ballots (``relayer_index``): a level
        of up to nine nodes is one transaction of one party, where node j to party j mod M made it up to M
        transactions, each its own block that every party wakes for."""
        s = self.s
        base = 1 << ctx.level
        owners = self.resolvers(ctx)
        todo = [
            n
            for n, owner in zip(ctx.open_nodes, owners, strict=True)
            if not (resolved_mask >> (n - base)) & 1 and (anyone or owner == s.index)
        ]
        if not todo:
            return
        endorsed = self.endorsed_histograms(ctx)
        if endorsed is None:
            with s.timed("chain reads"):
                level_hists = self.chain.submitted_histograms(ctx)
        else:
            level_hists = endorsed
        batch = resolution_batches(
            len(todo),
            len(level_hists),
            s.params.nbins,
            len(ctx.open_nodes),
            self.node_gas or FIRST_NODE_GAS_PER_PARTY * len(s.parties),
            max(1, s.settings.resolve_batch),
        )
        for i in range(0, len(todo), batch):
            nodes = todo[i : i + batch]
            try:
                # the first without an estimate, which ran the call several times (tens of ms of the chain's time
                # each, on the critical path of the first tree): granted twice the assumed cost, capped at a block
                limit = None if self.node_gas else 2 * FIRST_NODE_GAS_PER_PARTY * len(s.parties) * len(nodes)
                with s.timed("transactions"):
                    res = s.task.resolve_nodes(s.account, s.task_id, nodes, ctx.open_nodes, level_hists, gas=limit)
                # the costliest node seen so far sizes later batches (a level-closing call costs the most)
                self.node_gas = max(self.node_gas, res.gas_used // len(nodes))
            except ContractRevert as exc:
                self.chain.again = True
                if endorsed is not None:
                    # What this party endorsed is not what was submitted (a party submitted other histograms,
                    # or did not submit): the contract checked it against the commitments; read the events.
                    ctx.from_events = True
                    s.log(
                        f"tree {ctx.tree} level {ctx.level}: resolving from the endorsed histograms failed "
                        f"({exc}); reading the submissions"
                    )
                    return
                if fewer_histograms_than_chain(exc):
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
                    s.log(f"{exc}: a submission's event is not served yet; looking again")
                    return
                if exc.name == "ShapleySeedPending":
                    # Mined in the block of `start`, whose hash is the task's Shapley seed, readable from the next
                    # block on: the next poll, a block later, resolves. Not a failure.
                    s.log(f"{exc}: the Shapley seed is fixed from the next block on; looking again")
                    return
                # Another party may have resolved one of them first, or resolved the others so that this call now
                # also closes the level and needs more gas than estimated: both are settled by looking again next
                # poll, with the resolved mask read afresh.
                failures = self._resolve_failures.get(nodes[0], 0) + 1
                self._resolve_failures[nodes[0]] = failures
                if failures > 20:
                    raise NodeError(f"resolving nodes {nodes} keeps failing: {exc}") from exc
                return

    # ------------------------------------------------------------------ the level's submissions as held

    def held_submissions(self, ctx: LevelContext, submitters: int) -> list[list[ref.NodeHistograms]] | None:
        """The level's submissions in party order as this party holds them: its own and those it endorsed, when they
        are from exactly the parties the chain accepted (``submitters``, the ``HistogramsClosed`` mask); else None
        (a party it endorsed did not get in, or one it refused did).

        Not read back from the events: a level's histograms are megabytes, and reading them cost more than the
        round the votes save (measured on anvil). What this party holds of another is what that party showed it;
        one that submitted other histograms, endorsed by others, would make this ballot a vote on nodes the chain
        does not open as assumed: counted like any vote for the candidates, while the chain's splits and
        resolution stay the contract's."""
        held = self.held_by_party(ctx)
        accepted = self.s.parties_in(submitters)
        if held is None or set(held) != accepted:
            return None
        return [held[p] for p in self.s.parties if p in held]

    def endorsed_histograms(self, ctx: LevelContext) -> list[list[ref.NodeHistograms]] | None:
        """The level's submissions as this party knows them without reading the chain, in party order
        (``held_by_party``)."""
        held = self.held_by_party(ctx)
        return None if held is None else [held[p] for p in self.s.parties if p in held]

    def held_by_party(self, ctx: LevelContext) -> dict[str, list[ref.NodeHistograms]] | None:
        """The level's submissions as this party knows them without reading the chain: its own histograms if it
        submitted, and the histograms it endorsed of every other party, by party. None where that cannot be the
        whole level (this party endorsed nobody, after a restart, or a resolution from them failed). The contract
        checks every party's histograms against its commitment, so a wrong guess reverts and changes nothing."""
        endorsed = self.endorser.endorsed.get((ctx.tree, ctx.level), {})
        if ctx.from_events or not endorsed:
            return None
        out = {}
        for p in self.s.parties:
            if p == self.s.address:
                mine = self.sent.sent_histograms(ctx.tree, ctx.level)
                if mine and ctx.histograms is not None:
                    out[p] = ctx.histograms
            elif p in endorsed:
                out[p] = endorsed[p]
        return out
