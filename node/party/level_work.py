"""The level's work: what this party owes each step of the current level (its votes, its endorsed histograms, its
share of the resolution), sent once, and a step closed where nobody else completes it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import RULE_ERRORS
from fgbdt_chain.ledger.spec.tx_size import histogram_parts
from fgbdt_chain.ledger.wrappers.contracts import Phase, TaskState
from fgbdt_chain.node.party.endorse_asking import EndorsementAsker
from fgbdt_chain.node.party.endorsing import Endorser
from fgbdt_chain.node.party.following import ChainFollower, candidates_block
from fgbdt_chain.node.party.level_state import LevelContext, LevelState
from fgbdt_chain.node.party.relaying import Relayer
from fgbdt_chain.node.party.resolution import Resolver
from fgbdt_chain.node.party.sent import SentLog
from fgbdt_chain.node.party.session import PartySession
from fgbdt_chain.node.party.votes_ahead import VotesAhead
from fgbdt_chain.node.protocol.endorsement import quorum


class LevelWork:
    """What this party does at each step of a level, from the task's state and its view of the level."""

    def __init__(
        self,
        session: PartySession,
        chain: ChainFollower,
        sent: SentLog,
        levels: LevelState,
        asker: EndorsementAsker,
        endorser: Endorser,
        resolver: Resolver,
        relayer: Relayer,
        ahead: VotesAhead,
    ) -> None:
        self.s, self.chain, self.sent, self.levels = session, chain, sent, levels
        self.asker, self.endorser, self.resolver, self.relayer, self.ahead = asker, endorser, resolver, relayer, ahead
        self._last_attempt = 0.0
        self._step_since: dict[tuple[int, int, int], float] = {}
        """When this party first saw each (tree, level, phase): the grace before it tries closing a step early."""
        self._closes_tried: set[tuple[int, int, int]] = set()

    def step(self, st: TaskState, ctx: LevelContext) -> bool:
        """Whatever this party owes the task's current step; whether it owes the level nothing more (it handed the
        relayer all it owes and resolves none of it: ``ChainFollower.quiet``)."""
        s = self.s
        now = time.monotonic()
        if st.phase == Phase.VOTING:
            if not s.excluded and not self.sent.has(["VotesSubmitted"], st.tree, st.level):
                self.vote(ctx)
            elif self.close_due(st, now):
                self.try_call("closeStep", s.task.close_step)
            if st.level == 0:
                self.endorser.prefetch_carries(st.tree)
            return False
        if st.phase == Phase.HISTOGRAMS:
            self.histograms_step(st, ctx, now)
            return self.relayer.owes_nothing_more(ctx)
        anyone = self.resolver.grace_over(st.tree, st.level, now)
        # the votes first, not waited for: the resolution goes in the same block, after them, and the one that
        # opens the next level finds the ballot; relayed, the relayer sends them all before its resolution
        self.ahead.vote_ahead(ctx)
        if self.relayer.relay_ballots(ctx) or anyone:
            self.resolver.resolve(ctx, st.resolved_mask, anyone)
        self.ahead.settle_ahead()
        return False

    def histograms_step(self, st: TaskState, ctx: LevelContext, now: float) -> None:
        """The histogram step: this party's endorsed histograms sent (handed to the relayer, or, past the patience,
        as its own transaction), its ballot of the next level computed early, and, as the level's relayer, every
        party's relayed with its resolution."""
        s, sent = self.s, self.sent
        s.level_clock.mark(st.tree, st.level, "open")
        ctx.fixed_block = candidates_block(st, s.cfg.step_blocks)
        drawn = ref.draws(st.tree, s.cfg.voted_trees)  # no vote round: the level opened in this step
        handed = sent.handed.get((st.tree, st.level))
        # handed to the relayer: its batch closes the step, or the patience runs out
        if handed is None or now - handed >= s.relay_patience():
            voted = (drawn and not s.excluded) or sent.has(["VotesSubmitted"], st.tree, st.level)
            done = ctx.refused or sent.has(["HistogramsSubmitted", "HistogramsDeclined"], st.tree, st.level)
            # past the deadline no submission is taken (the next block is past it): the step is closed instead,
            # where sending again at every poll would ask the verifiers and revert each time
            if voted and not done and self.chain.latest_block() < st.step_deadline:
                if handed is not None:
                    s.log(f"tree {st.tree} level {st.level}: the histograms handed over are not on chain; sending")
                    del sent.handed[(st.tree, st.level)]
                    sent.own_submission.add((st.tree, st.level))  # not to the same relayer again
                    if s.relay is not None:
                        s.relay.forget_nonce()
                self.send_histograms(ctx, st.step_deadline)
            elif self.close_due(st, now):
                self.try_call("closeStep", s.task.close_step)
        self.ahead.vote_ahead_early(ctx)
        closed, resolved = self.relayer.relay_histograms(ctx)
        if closed:
            self.ahead.vote_ahead(ctx)  # a ballot not computed early: relayed after the close
            if not resolved and self.relayer.relay_ballots(ctx):
                self.resolver.resolve(ctx, 0, False)
            self.ahead.settle_ahead()

    def close_due(self, st: TaskState, now: float) -> bool:
        """Whether this party, with nothing of its own to send in the step, should try closing it now (at most every
        four polls). The vote or submission that completes a step closes it, so a party closes one past its
        deadline (the next block is the first where the contract allows it: someone stayed silent), or once after the
        grace for a step no transaction completes (complete when it opened: no ballots, nobody taking part). Trying
        at every poll cost a reverting dry run per party and poll."""
        settings = self.s.settings
        if now - self._last_attempt <= 4 * settings.poll_seconds:
            return False
        key = (st.tree, st.level, int(st.phase))
        since = self._step_since.setdefault(key, now)
        if self.chain.latest_block() < st.step_deadline:
            if now - since <= settings.resolve_grace_seconds or key in self._closes_tried:
                return False
            self._closes_tried = {k for k in self._closes_tried if k[0] >= st.tree - 1} | {key}
            self._step_since = {k: v for k, v in self._step_since.items() if k[0] >= st.tree - 1}
        self._last_attempt = now
        return True

    def try_call(self, what: str, fn: Callable[[LocalAccount, int], Any]) -> bool:
        """Send ``fn``'s transaction; whether it went through (a step closed by another party meanwhile is no news)."""
        try:
            with self.s.timed("transactions"):
                fn(self.s.account, self.s.task_id)
            return True
        except ContractRevert as exc:
            if exc.name not in ("StepStillOpen", "WrongPhase", "WrongStatus"):
                self.s.log(f"{what} reverted: {exc}")
            return False

    def vote(self, ctx: LevelContext) -> None:
        """This party's votes of the level, in the level's vote round."""
        s = self.s
        assert s.party is not None
        if s.relay is not None:
            # a vote in the round: a ballot handed over was not taken (possibly one for a level that never opened),
            # so which of this party's requests the forwarder used is its to say
            s.relay.forget_nonce()
        with s.timed("computing (votes)"):
            votes = s.party.votes(ctx.k_of_row, len(ctx.open_nodes), ctx.g, ctx.h_vote, ctx.tree, ctx.level)
        try:
            with s.timed("transactions"):
                res = s.task.submit_votes(s.account, s.task_id, ctx.tree, ctx.level, votes.tolist())
            self.sent.seen.add(("VotesSubmitted", ctx.tree, ctx.level))  # no log query to learn what it just did
            s.log(f"tree {ctx.tree} level {ctx.level}: voted on {len(ctx.open_nodes)} nodes (gas {res.gas_used})")
        except ContractRevert as exc:
            if exc.name == "Excluded":
                s.excluded = True
                s.log(
                    f"tree {ctx.tree} level {ctx.level}: out of the task (a step without accepted histograms); "
                    "verifying and resolving only"
                )
                return
            if exc.name == "AlreadyVoted":
                self.sent.seen.add(("VotesSubmitted", ctx.tree, ctx.level))
            if exc.name in ("AlreadyVoted", "WrongPhase", "StepDeadlinePassed"):
                s.log(f"tree {ctx.tree} level {ctx.level}: vote not taken ({exc.name})")
                return
            raise

    def send_histograms(self, ctx: LevelContext, deadline: int) -> None:
        """This party's histograms of the level, endorsed by a quorum of the others, handed to the level's relayer or
        submitted as its own transaction; declined short of the quorum or where the contract refuses them."""
        s = self.s
        with s.timed("computing (histograms)"):
            hists = self.levels.my_histograms(ctx)
        need = quorum(len(s.parties), s.cfg.quorum_num, s.cfg.quorum_den)
        with s.timed("endorsement round trips"):
            endorsements, refusals = self.asker.collect(ctx, hists, need, deadline)
        if endorsements is None:
            ctx.refused = True
            s.log(
                f"tree {ctx.tree} level {ctx.level}: fewer than {need} endorsements; declining "
                f"({'; '.join(refusals) or 'no answer'})"
            )
            self.decline(ctx)
            return
        parts = histogram_parts(len(hists), s.params.nbins, ctx.level, len(endorsements))
        relayed = len(parts) == 1 and s.relay is not None and (ctx.tree, ctx.level) not in self.sent.own_submission
        if relayed and self.relayer.hand_over_histograms(ctx, hists, endorsements):
            return
        committed = 0
        if len(parts) > 1:
            with s.timed("chain reads"):  # a restart half-way through a wide level resumes after its parts
                start = self.chain.level_block(ctx.tree, ctx.level)
                committed = s.task.committed_nodes(s.task_id, ctx.tree, ctx.level, s.address, s.params.nbins, start)
        try:
            with s.timed("transactions"):
                res = s.task.submit_histograms(
                    s.account, s.task_id, ctx.tree, ctx.level, hists, endorsements, committed
                )
            self.sent.seen.add(("HistogramsSubmitted", ctx.tree, ctx.level))
            s.log(
                f"tree {ctx.tree} level {ctx.level}: histograms submitted with {need} endorsements (gas {res.gas_used})"
            )
        except ContractRevert as exc:
            if exc.name in RULE_ERRORS:
                ctx.refused = True
                s.log(f"tree {ctx.tree} level {ctx.level}: the contract refuses the histograms ({exc}); declining")
                self.decline(ctx)
                return
            if exc.name == "Excluded":  # drawn candidates: the first sign that this party is out of the task
                s.excluded = True
                s.log(f"tree {ctx.tree} level {ctx.level}: out of the task; verifying and resolving only")
                return
            if exc.name == "AlreadySubmitted":
                self.sent.seen.add(("HistogramsSubmitted", ctx.tree, ctx.level))
            # the level (or the task) moved on without them: a relayer's batch carrying them landed while this
            # party, no longer waiting for it, sent them itself, or the level closed by its deadline
            if exc.name in ("AlreadySubmitted", "WrongPhase", "WrongStep", "WrongStatus", "StepDeadlinePassed"):
                s.log(f"tree {ctx.tree} level {ctx.level}: histograms not taken ({exc.name})")
                return
            raise

    def decline(self, ctx: LevelContext) -> None:
        """Step aside for the level's histograms so that the others need not wait for the deadline; the party is
        then out of the task."""
        s = self.s
        s.excluded = True
        try:
            with s.timed("transactions"):
                s.task.decline_histograms(s.account, s.task_id, ctx.tree, ctx.level)
        except ContractRevert as exc:
            if exc.name not in ("AlreadySubmitted", "WrongPhase", "WrongStep", "StepDeadlinePassed", "Excluded"):
                raise
