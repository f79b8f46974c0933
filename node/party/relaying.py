"""Relaying a level (``node.party.relay``): this party's histograms and ballots handed to the level's relayer, and,
as the relayer, every party's sent in one batch, its own resolution folded in where it can."""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import takewhile

from fgbdt_chain.ledger.rpc.client import TxResult
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.tx_size import BLOCK_GAS_LIMIT, resolution_batches
from fgbdt_chain.ledger.wrappers.contracts import Endorsement, resolve_nodes_args, submit_histograms_args
from fgbdt_chain.ledger.wrappers.forwarder import histogram_request_gas, vote_request_gas
from fgbdt_chain.node.party.following import ChainFollower
from fgbdt_chain.node.party.level_state import LevelContext, ahead_target
from fgbdt_chain.node.party.relay import RelayedRequest
from fgbdt_chain.node.party.resolution import Resolver
from fgbdt_chain.node.party.sent import SentLog
from fgbdt_chain.node.party.session import PartySession


class Relayer:
    """This party's part in the relay of each level: handing over, and relaying the levels it is the relayer of."""

    def __init__(self, session: PartySession, chain: ChainFollower, sent: SentLog, resolver: Resolver) -> None:
        self.s, self.chain, self.sent, self.resolver = session, chain, sent, resolver
        self._relayed_levels: set[tuple[str, int, int]] = set()
        """The (kind, tree, level)s this party relayed the requests of."""
        self._no_ballots: set[tuple[int, int]] = set()
        """Resolving (tree, level)s after which nothing votes ahead (no split, and the next tree draws)."""

    def note_no_ballots(self, tree: int, level: int) -> None:
        """Nothing votes ahead while (tree, level) resolves: every party computes the same, so none to relay."""
        self._no_ballots.add((tree, level))

    # ------------------------------------------------------------------ handing over

    def hand_over_ballot(
        self, ctx: LevelContext, target: tuple[int, int], ballot: list[int], nodes: int, early: bool, assumed: int
    ) -> bool:
        """Hand this party's ballot for ``target`` to the relayer of the level that resolves; whether it was taken
        (False: send the transaction instead)."""
        relay = self.s.relay
        assert relay is not None
        with self.s.timed("relay"):
            signed = relay.request(
                "votes",
                ctx.tree,
                ctx.level,
                "submitVotes",
                (self.s.task_id, *target, ballot),
                vote_request_gas(len(ballot)),
                assumed,
            )
            refused = relay.hand_over(signed)
        if refused is not None:
            self.s.log(f"tree {target[0]} level {target[1]}: votes not relayed ({refused}); sending them")
            return False
        self.sent.relayed = {k for k in self.sent.relayed if k[0] >= ctx.tree - 1} | {target}
        if early:
            self.sent.early_roots.add(target[0])
        return True

    def hand_over_histograms(
        self, ctx: LevelContext, hists: list[ref.NodeHistograms], endorsements: list[Endorsement]
    ) -> bool:
        """Hand this party's endorsed histograms to the level's relayer; whether it was taken (False: submit them
        as this party's own transaction)."""
        relay = self.s.relay
        assert relay is not None
        args = submit_histograms_args(self.s.task_id, ctx.tree, ctx.level, hists, endorsements)
        gas = histogram_request_gas(len(hists), self.s.params.nbins, len(endorsements))
        with self.s.timed("relay"):
            signed = relay.request("histograms", ctx.tree, ctx.level, "submitHistograms", args, gas)
            refused = relay.hand_over(signed)
        if refused is not None:
            self.s.log(f"tree {ctx.tree} level {ctx.level}: histograms not relayed ({refused}); submitting them")
            return False
        key = (ctx.tree, ctx.level)
        handed = self.sent.handed
        self.sent.handed = {k: v for k, v in handed.items() if k[0] >= ctx.tree - 1} | {key: time.monotonic()}
        return True

    # ------------------------------------------------------------------ as the level's relayer

    def _relay_requests(
        self,
        kind: str,
        ctx: LevelContext,
        expected: set[str],
        keep: Callable[[RelayedRequest], bool] = lambda r: True,
    ) -> list[TxResult]:
        """As the level's relayer, send the requests of ``kind`` handed over for it (``RelayChannel.send``), once;
        the batches' results."""
        relay = self.s.relay
        assert relay is not None
        self._mark_relayed(kind, ctx.tree, ctx.level)
        if not relay.inbox.holds(kind, ctx.tree, ctx.level, self.s.address):
            expected = expected - {self.s.address}
        with self.s.timed("relay (waiting and sending)"):
            count, results, failures = relay.send(
                kind, ctx.tree, ctx.level, expected, self.s.settings.relay_wait_seconds, keep
            )
        self._log_relayed(ctx, f"{count} {kind}" if count else "", results, failures)
        return results

    def _mark_relayed(self, kind: str, tree: int, level: int) -> None:
        """Note that this party relayed (tree, level)'s requests of ``kind``, forgetting trees before the last."""
        self._relayed_levels = {k for k in self._relayed_levels if k[1] >= tree - 1} | {(kind, tree, level)}

    def _log_relayed(self, ctx: LevelContext, what: str, results: list[TxResult], failures: list[str]) -> None:
        """Log a relayer's batches: why any failed, and what went in how many transactions (``what``, if any)."""
        for why in failures:
            self.s.log(f"tree {ctx.tree} level {ctx.level}: relaying failed ({why})")
        if what:
            gas = sum(r.gas_used for r in results)
            self.s.log(f"tree {ctx.tree} level {ctx.level}: relayed {what} in {len(results)} transactions (gas {gas})")

    def relay_ballots(self, ctx: LevelContext) -> bool:
        """As the level's relayer (``relayer_index``), send the ballots handed over while it resolves, once every
        party taking part in the next step handed its own or ``relay_wait_seconds`` passed, before this party's
        resolution; whether this party may resolve now (False: the level's close is not served yet, and a
        resolution sent now could open the next level before the ballots)."""
        relay = self.s.relay
        if relay is None or relay.relayer(ctx.level) != self.s.index:
            return True
        if ("votes", ctx.tree, ctx.level) in self._relayed_levels or not self.ballots_expected(ctx):
            return True
        with self.s.timed("chain reads"):
            submitters = self.chain.closed_submitters(ctx)
        if submitters is None:
            self.chain.again = True
            return False
        self._no_ballots = {k for k in self._no_ballots if k[0] >= ctx.tree - 1}
        expected = self.s.parties_in(submitters)
        # a ballot computed before the close counts only if the level accepted the submissions it assumed
        self._relay_requests("votes", ctx, expected, lambda r: r.assumed == submitters)
        return True

    def relay_histograms(self, ctx: LevelContext) -> tuple[bool, bool]:
        """As the level's relayer, send the histograms handed over, once every party taking part handed its own or
        ``relay_wait_seconds`` passed, and with them, after them, the ballots the parties computed from them (the
        votes sent early): the last submission closes the step, and the ballots that follow are taken ahead. A
        ballot goes only if it assumed exactly the submissions sent; if one of those fails, the step stays open and
        the ballots fail too (a ballot is taken ahead only while the level resolves). This party's resolution of its
        share follows in the same batch where it can (``folded_resolution``).

        Returns (whether the batch closed the step, whether this party's resolution landed in it): once the step
        closed, the caller sends the ballots still due and resolves at once, where waiting for the block's
        notification cost a round per level."""
        relay = self.s.relay
        address = self.s.address
        if relay is None or relay.relayer(ctx.level) != self.s.index:
            return False, False
        tree, level = ctx.tree, ctx.level
        if ("histograms", tree, level) in self._relayed_levels:
            return False, False
        inbox = relay.inbox
        self._mark_relayed("histograms", tree, level)
        expected = self.chain.taking_part(tree, level)
        if not inbox.holds("histograms", tree, level, address):
            expected.discard(address)
        wait = self.s.settings.relay_wait_seconds
        with self.s.timed("relay (waiting and sending)"):
            held = inbox.take("histograms", tree, level, expected, wait)
            senders = {r.request.sender for r in held}
            mask = self.s.mask_of(senders)
            ballots: list[RelayedRequest] = []
            complete = bool(held)  # every ballot due is here: this party may resolve in the same batch
            if held and self.ballots_expected(ctx):
                # a ballot of every sender, computed from exactly these submissions (one this party lacks of its own
                # comes after the close: no wait for it)
                mine = address not in senders or inbox.holds("votes", tree, level, address)
                early = inbox.wait("votes", tree, level, senders, wait) if mine else []
                complete = {b.request.sender for b in early if b.assumed == mask} == senders
                if complete:
                    self._mark_relayed("votes", tree, level)
                    # taken again, as the wait saw them: a ballot offered meanwhile (or replaced) is checked too
                    ballots = [b for b in inbox.take("votes", tree, level, senders, 0.0) if b.assumed == mask]
                # else the ballots go after the close (``relay_ballots``), those computed early with them
            own = [r for r in held + ballots if r.request.sender == address]
            folded = self.folded_resolution(ctx, senders) if complete else None
            self.s.level_clock.mark(tree, level, "sending")
            results, failures = relay.send_requests(held + ballots + ([folded] if folded else []))
            self.s.level_clock.mark(tree, level, "mined")
        self._log_relayed(ctx, f"{len(held)} histograms and {len(ballots)} ballots" if held else "", results, failures)
        executed = {
            int(ev.args["nonce"])
            for r in results
            for ev in r.events_named("ExecutedForwardRequest")
            if str(ev.args["signer"]) == address and ev.args["success"]
        }
        if any(r.request.nonce not in executed for r in own) or (folded and folded.request.nonce not in executed):
            relay.forget_nonce()  # one of its own did not land: the forwarder says which nonce is next
        closed = [ev for r in results for ev in r.events_named("HistogramsClosed")]
        if folded is not None and folded.request.nonce not in executed and closed:
            self.resolver.node_gas *= 2  # the step closed, yet the resolution failed: short of gas, most likely
        if not closed:
            return False, False  # a party's submission is missing: the step closes later, and the level resolves then
        with self.s.lock:  # the close as the tree records will read it: the resolution after needs no read for it
            self.chain.trees.closed[(tree, level)] = int(closed[-1].args["submitterMask"])
        return True, folded is not None and folded.request.nonce in executed

    def folded_resolution(self, ctx: LevelContext, senders: set[str]) -> RelayedRequest | None:
        """This party's resolution of its share of the level (``Resolver.resolve``'s run 0) as its own request, to
        follow the submissions and ballots in the relayer's batch: the level then takes one transaction, where the
        resolution was a block of its own. Only once this party knows what a node costs (its first resolution goes
        as its own transaction, ``Resolver.node_gas``), when the share fits one call, and from the submissions the
        batch sends. The request grants twice the costliest node seen per node; one that fails (short of gas, say)
        leaves the share to ``Resolver.resolve``."""
        relay = self.s.relay
        assert relay is not None
        node_gas = self.resolver.node_gas
        if node_gas == 0:
            return None
        held = self.resolver.held_by_party(ctx)
        if held is None or set(held) != senders:
            return None
        level_hists = [held[p] for p in self.s.parties if p in held]
        owners = self.resolver.resolvers(ctx)
        # run 0, this party's as the relayer (a later run of its, on a level of more runs than parties, waits)
        todo = [
            n for n, owner in takewhile(lambda pair: pair[1] == owners[0], zip(ctx.open_nodes, owners, strict=True))
        ]
        batch = resolution_batches(
            len(todo),
            len(level_hists),
            self.s.params.nbins,
            len(ctx.open_nodes),
            node_gas,
            max(1, self.s.settings.resolve_batch),
        )
        if batch < len(todo):
            return None
        gas = min(BLOCK_GAS_LIMIT // 2, 2 * node_gas * len(todo) + 200_000)
        args = resolve_nodes_args(self.s.task_id, todo, ctx.open_nodes, level_hists)
        folded = relay.request("resolution", ctx.tree, ctx.level, "resolveNodes", args, gas)
        relay.keep_own()
        return folded

    def ballots_expected(self, ctx: LevelContext) -> bool:
        """Whether ballots are sent ahead while ``ctx`` resolves: the next level votes, and some node splits (or the
        next tree's root votes)."""
        _, last = ahead_target(ctx, self.s.params.depth)
        return (ctx.tree, ctx.level) not in self._no_ballots and self.s.votes_on(ctx.tree + 1 if last else ctx.tree)

    def owes_nothing_more(self, ctx: LevelContext) -> bool:
        """Whether this party handed the relayer all it owes the level, and resolves none of it (``quiet``)."""
        relay = self.s.relay
        if relay is None or relay.relayer(ctx.level) == self.s.index or (ctx.tree, ctx.level) not in self.sent.handed:
            return False
        target, _ = ahead_target(ctx, self.s.params.depth)
        if self.s.votes_on(target[0]) and target not in self.sent.relayed:
            return False  # a ballot still to send when the level closes (or the next root's, if it stops early)
        return self.s.index not in self.resolver.resolvers(ctx)
