"""Votes sent ahead: this party's ballot of the next level (or the next tree's root) computed from the level's
submissions while the level resolves, so that its votes travel in the resolution round instead of a round of their
own.

Why: the level's submissions fix every split (``node.protocol.resolve.level_splits``: the contract's best split of
the aggregated histograms), so this party knows the next level's nodes and where its rows go before the chain
resolves the level. When every party taking part voted ahead, the resolution that opens the level also closes its
voting. Only a party whose histograms the level accepted may, from the submissions it holds
(``Resolver.held_submissions``); otherwise, or if the transaction fails, it votes when the level opens. The ballot is
handed to the level's relayer (``Relayer.hand_over_ballot``, ``node.party.relay``), which sends every party's in one
transaction; one the relayer does not take goes as this party's own transaction.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fgbdt_chain.ledger.rpc.client import TxResult
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.node.party.endorsing import Endorser
from fgbdt_chain.node.party.following import ChainFollower
from fgbdt_chain.node.party.level_state import LevelContext, LevelState, ahead_target
from fgbdt_chain.node.party.relaying import Relayer
from fgbdt_chain.node.party.resolution import Resolver
from fgbdt_chain.node.party.sent import SentLog
from fgbdt_chain.node.party.session import PartySession
from fgbdt_chain.node.protocol.chunked_rows import route_rows
from fgbdt_chain.node.protocol.local_party import open_positions
from fgbdt_chain.node.protocol.resolve import level_splits, tree_end


class VotesAhead:
    """This party's ballots sent ahead, and the one sent as its own transaction and not waited for yet."""

    def __init__(
        self,
        session: PartySession,
        chain: ChainFollower,
        sent: SentLog,
        levels: LevelState,
        endorser: Endorser,
        resolver: Resolver,
        relayer: Relayer,
    ) -> None:
        self.s, self.chain, self.sent, self.levels = session, chain, sent, levels
        self.endorser, self.resolver, self.relayer = endorser, resolver, relayer
        self.ahead: set[tuple[int, int]] = set()
        """The (tree, level)s this party sent its votes ahead for, or tried to (once per level)."""
        self.pending: tuple[int, int, int, Callable[[], TxResult], bool] | None = None
        """(tree, level, nodes, its result, whether it is a root ballot sent where the tree before stopped short
        (``SentLog.early_roots``)) of the votes sent ahead and not waited for yet."""

    def forget(self) -> None:
        """After an outage: a vote sent ahead may be gone, so it may be sent again."""
        self.ahead.clear()
        self.pending = None

    def vote_ahead(self, ctx: LevelContext) -> None:
        """Vote on the next level of the tree while this one resolves (``submitVotes`` ahead): two votes per open
        node, one per child, the children that do not open abstaining; at the tree's last level, or where no node of
        this one splits, on the next tree's root (``_root_ahead``)."""
        target, last = ahead_target(ctx, self.s.params.depth)
        if (
            self.s.excluded
            or target in self.ahead
            or not self.s.votes_on(target[0])
            or not self.sent.has_submitted(ctx)
        ):
            return
        with self.s.timed("chain reads"):
            submitters = self.chain.closed_submitters(ctx)
        if submitters is None:
            return  # the level's close is not served yet: the next poll looks again
        self.ahead.add(target)
        submissions = self.resolver.held_submissions(ctx, submitters)
        if submissions is None:
            return
        self._cast_ahead(ctx, target, last, submissions, submitters)

    def vote_ahead_early(self, ctx: LevelContext) -> None:
        """Vote ahead as soon as this party handed its histograms to the relayer, from the histograms it endorsed:
        with every party taking part asking every other for endorsements, each holds the whole level before it is
        on chain, so its ballot reaches the relayer while the submissions are being sent, and the relayer sends the
        ballots and its resolution right after them, where waiting for the close on chain cost every party a
        notification round per level.

        The ballot is computed for the parties this party expects to submit (``ChainFollower.taking_part``), and the
        relayer sends it only if the chain accepted exactly those (``RelayedRequest.assumed``); otherwise it is left
        out, and this party votes in the level's round, as for a ballot that came too late. A party it has not
        received the histograms of within ``relay_wait_seconds`` leaves it to the close."""
        if self.s.relay is None or (ctx.tree, ctx.level) not in self.sent.handed:
            return
        target, last = ahead_target(ctx, self.s.params.depth)
        if self.s.excluded or target in self.ahead or not self.s.votes_on(target[0]):
            return
        taking = self.chain.taking_part(ctx.tree, ctx.level)
        mask = self.s.mask_of(taking)
        others = taking - {self.s.address}
        key = (ctx.tree, ctx.level)
        endorser = self.endorser
        with self.s.timed("relay"), endorser.endorsed_changed:
            endorser.endorsed_changed.wait_for(
                lambda: others <= set(endorser.endorsed.get(key, {})), timeout=self.s.settings.relay_wait_seconds
            )
        submissions = self.resolver.held_submissions(ctx, mask)
        if submissions is None:
            return
        self.ahead.add(target)
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
        s = self.s
        assert s.party is not None
        early = False
        with s.timed("computing (votes)"):
            ahead = self._root_ahead(ctx, submissions) if last else self._level_ahead(ctx, submissions)
            if ahead == ([], 0) and s.votes_on(ctx.tree + 1):
                # no split: the tree ends at this level, before its depth, and the next root is what opens
                target, last, early = (ctx.tree + 1, 0), True, True
                self.ahead.add(target)
                ahead = self._root_ahead(ctx, submissions)
        if ahead is None or ahead == ([], 0):
            if ahead == ([], 0) and not early_step:
                self.relayer.note_no_ballots(ctx.tree, ctx.level)  # every party computes the same: none to relay
            if last:
                self.ahead.discard(target)  # a record not served yet: the next look tries again
            return
        ballot, nodes = ahead
        if s.relay is not None and self.relayer.hand_over_ballot(ctx, target, ballot, nodes, early, mask):
            return
        if early_step:
            self.ahead.discard(target)
            return
        try:
            with s.timed("transactions"):
                pending = s.task.submit_votes_ahead(s.account, s.task_id, *target, ballot)
        except ContractRevert as exc:
            s.log(f"tree {target[0]} level {target[1]}: votes not taken ahead ({exc.name}); voting when it opens")
            return
        self.pending = (*target, nodes, pending, early)

    def _level_ahead(
        self, ctx: LevelContext, submissions: list[list[ref.NodeHistograms]]
    ) -> tuple[list[int], int] | None:
        """The ballot of the tree's next level sent ahead and the number of its nodes; ``([], 0)`` where no node
        splits (the tree ends at this level), None where the contract would revert the resolution."""
        party = self.s.party
        assert party is not None
        nxt = ctx.level + 1
        try:
            splits = level_splits(submissions, self.chain.candidates(ctx), self.s.cfg.params())
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
        ids = route_rows(party.rows, at, local)
        self.levels.routed = (ctx.tree, nxt, tuple(next_open), local, ids)  # the next level's context reuses these
        k_of_row = open_positions(ids, next_open, self.s.params.depth)
        votes = party.votes(k_of_row, len(next_open), ctx.g, ctx.h_vote, ctx.tree, nxt)
        mine = dict(zip(next_open, votes.tolist(), strict=True))
        return [mine.get(c, ref.ABSTAIN) for n in ctx.open_nodes for c in (2 * n, 2 * n + 1)], len(next_open)

    def _root_ahead(
        self, ctx: LevelContext, submissions: list[list[ref.NodeHistograms]]
    ) -> tuple[list[int], int] | None:
        """The next tree's root ballot, sent ahead at this tree's last level (by depth: the chain surely ends the
        tree there and takes it) or where no node of the level splits (the chain takes it if its resolution agrees:
        ``SentLog.early_roots``), None where the tree's leaves are not all known yet.

        The level's submissions give its splits and leaves as the contract will make them (``tree_end``, with each
        node's totals from its parent's split on chain); with the leaves of the levels before, every row's score
        after the tree, hence the next gradients and this party's root vote: the vote it would cast when the root
        opens, where ``LevelState.context`` computes the same gradients from the chain's leaves."""
        party = self.s.party
        assert party is not None
        tree = ctx.tree
        trees = self.chain.trees
        chain_totals = trees.totals.get(tree, {})
        inherited = [None if n == 1 else chain_totals.get(n) for n in ctx.open_nodes]
        if any(t is None for n, t in zip(ctx.open_nodes, inherited, strict=True) if n != 1):
            return None  # a parent's split is not served yet
        end = tree_end(submissions, self.chain.candidates(ctx), ctx.open_nodes, inherited, self.s.cfg.params())
        if end is None:
            return None
        splits, leaves = end
        leaves = {**trees.leaves.get(tree, {}), **leaves}
        ids = route_rows(party.rows, self.levels.route(tree, ctx.level), splits)
        if not set(np.unique(ids).tolist()) <= set(leaves):
            return None  # a leaf of a level before is not served yet
        values = np.zeros(1 << (self.s.params.depth + 1))
        for nid, v in leaves.items():
            values[nid] = v / ref.ONE
        _, _, h_vote = grads = party.gradients(party.score + values[ids])
        root = np.zeros(party.n_rows, dtype=np.int64)  # every row at the root, the one open node
        return [int(v) for v in party.votes(root, 1, grads[0], h_vote, tree + 1, 0)], 1

    def settle_ahead(self) -> None:
        """Wait for the votes sent ahead (``vote_ahead``), once this party's resolution of the round is sent."""
        if self.pending is None:
            return
        s = self.s
        tree, level, nodes, pending, early = self.pending
        try:  # a lost connection leaves it pending: the outage's recovery forgets it and reads the chain again
            with s.timed("transactions"):
                res = pending()
        except ContractRevert as exc:
            self.pending = None
            s.log(f"tree {tree} level {level}: votes not taken ahead ({exc.name}); voting when the level opens")
            return
        except TimeoutError:
            self.pending = None
            s.log(f"tree {tree} level {level}: votes sent ahead not mined yet; the chain says later if they were")
            s.task.client.forget_nonces()  # the next transaction asks the node for this sender's nonce
            if self.sent.fresh_from is not None:  # they may still be mined and counted: that level's record is read
                self.sent.fresh_from = max(self.sent.fresh_from, (tree, level + 1))
            return
        self.pending = None
        if early:
            # counted only if the chain ends the tree where this party computed it would: ``SentLog.has`` reads the
            # record
            self.sent.early_roots.add(tree)
        else:
            self.sent.seen.add(("VotesSubmitted", tree, level))
        s.log(f"tree {tree} level {level}: voted ahead on {nodes} nodes (gas {res.gas_used})")
