"""Following the chain: new blocks (a new-head subscription, or polling), the task's state, and the events a party
reads about the current level (its start, its candidates, its closed histogram step, its submissions).

A party's progress is derived from chain state at every step, never kept only in memory: what this part remembers
of the chain is a cache of it, read again after an outage (``forget_recent``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from web3.exceptions import Web3RPCError

from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.rpc.heads import NewHeads
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.wrappers.contracts import HISTOGRAM_EVENTS, Phase, Status, TaskState, submitted_words
from fgbdt_chain.node.party.session import PartySession
from fgbdt_chain.node.party.tree_log import RESCAN_BLOCKS, TreeLog, read_bound
from fgbdt_chain.node.party.wire import unblock

if TYPE_CHECKING:
    from fgbdt_chain.node.party.level_state import LevelContext


class ChainLag(RuntimeError):
    """The chain's state is ahead of the logs its node serves (a new block's logs not yet indexed): look again."""


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


def splits_open(splits: dict[int, tuple[int, int]], level: int, open_nodes: Sequence[int]) -> bool:
    """Whether the recorded splits of level ``level - 1`` open exactly ``open_nodes`` (the chain's open mask):
    routing rows with a split missing would put them in the wrong nodes, and a level's context is computed once."""
    if level == 0:
        return True
    low = 1 << (level - 1)
    children = sorted(c for n in splits if low <= n < 2 * low for c in (2 * n, 2 * n + 1))
    return children == sorted(open_nodes)


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
"""What a party that handed everything it owes a level to the relayer waits for (``ChainFollower.quiet``): the level's
close and resolution are the relayer's."""


class ChainFollower:
    """One party's view of the chain: when to look again, the task's state, and the current level's events."""

    def __init__(self, session: PartySession) -> None:
        self.s = session
        self.trees = TreeLog(session.task, session.task_id, self.announced_latest)
        self.heads: NewHeads | None = None
        """The node's new-head subscription while following (None: polling)."""
        self.state: tuple[int, TaskState] | None = None
        """The task state the main loop read last, with the latest block announced before it was read that may hold a
        step-changing event: while no newer such block is announced, its status, tree, level and phase are the
        chain's, and a verifier answering in the meantime need not read them again (its masks may be older)."""
        self.again = False
        """The last step has to look again at the next block (the node lagged, a resolution failed)."""
        self.quiet = False
        """This party handed the relayer everything it owes the level (its histograms and ballot) and resolves none
        of it: it steps again when the next level opens (``OPENING_EVENTS``), not at the level's close, or once a
        second (a relayer that failed: the patience, the resolution grace)."""
        self.level_scan = 0
        self.candidates_by_tree: dict[int, dict[int, tuple[int, int]]] = {}
        """Per tree (the current one and the one before), its nodes' candidates as the contract records them."""

    # ------------------------------------------------------------------ blocks

    def follow(self, step: Callable[[], bool], survive: Callable[[Callable[[], Any]], Any]) -> None:
        """Call ``step`` whenever a new block arrives (and at least once a second) until it says the task completed;
        ``survive`` runs each call through chain outages."""
        task = self.s.task
        url = getattr(task.client.w3.provider, "endpoint_uri", None)
        watch, narrow = task.event_watch(STEP_EVENTS), task.event_watch(OPENING_EVENTS)
        subscribed = self.s.settings.subscribe and str(url).startswith("http")
        heads = NewHeads(str(url), watch=watch, narrow=narrow) if subscribed else None
        self.heads = heads
        try:
            seen_block, stepped, relevant_seen = -1, 0.0, -2
            while True:
                # Task state changes only in new blocks: between them the node is asked nothing (a subscription) or
                # one eth_blockNumber per poll, not the several reads of a step. Subscribed, only blocks whose logs
                # bloom may hold one of STEP_EVENTS are stepped at (another party's vote or submission that does not
                # complete its step changes nothing this party acts on), or the next block after a step that has
                # to look again. Steps still run once a second for wall-clock waits (the resolution grace,
                # deadlines).
                with self.s.timed("waiting (for a new block)"):
                    block = survive(partial(self.next_block, heads, seen_block))
                now = time.monotonic()
                if heads is not None and heads.live:
                    relevant = heads.narrowly_relevant if self.quiet else heads.relevant
                else:
                    relevant = block
                fresh = block != seen_block and (relevant != relevant_seen or self.again)
                seen_block = block
                if fresh or now - stepped > 1.0:
                    stepped, relevant_seen, self.again = now, relevant, False
                    if survive(step):
                        break
        finally:
            self.heads = None
            if heads is not None:
                heads.close()

    def next_block(self, heads: NewHeads | None, seen: int) -> int:
        """The latest block once it is past ``seen``, or ``seen`` after up to a second (subscribed) or one poll."""
        if heads is not None and heads.live and seen >= 0:
            found = heads.wait(seen, timeout=1.0)
            if found is not None or heads.live:
                return seen if found is None else found
        block = self.s.task.client.block_number
        if block == seen:
            time.sleep(self.s.settings.poll_seconds)
        return block

    def latest_block(self) -> int:
        """The latest block: as the subscription announced it, else asked of the node (one request). For deadlines;
        incremental event reads go to the node's latest (``read_bound``)."""
        announced = self.announced_latest()
        return announced if announced >= 0 else int(self.s.task.client.block_number)

    def announced_latest(self) -> int:
        """The latest block the subscription announced; -1 without a live subscription."""
        heads = self.heads
        return heads.latest if heads is not None and heads.live else -1

    def announced(self) -> int:
        """The latest announced block that may hold one of ``STEP_EVENTS`` (``NewHeads.relevant``); -1 without a live
        subscription. The task's status, tree, level and phase change only in such blocks."""
        heads = self.heads
        return heads.relevant if heads is not None and heads.live else -1

    def forget_recent(self) -> None:
        """After an outage: block numbers this party noted may now be past the node's head, or name blocks mined
        again, so the level starts and the tree records are read again from the start (keyed records: re-reading is
        idempotent)."""
        self.level_scan = 0
        self.trees.forget_recent()

    # ------------------------------------------------------------------ the task's state

    def read_state(self) -> TaskState:
        """The task's state, kept with the latest step-changing block announced before it was read (``state``)."""
        announced = self.announced()
        with self.s.timed("chain reads"):
            st = self.s.task.state(self.s.task_id)
        self.state = (announced, st) if announced >= 0 else None
        return st

    def histogram_step_state(self, tree: int, level: int) -> TaskState:
        """The task's state for a verifier asked about (tree, level)'s histograms: the main loop's read while no
        step-changing block was announced since and it is that step, else read now."""
        cached = self.state
        if (
            cached is not None
            and cached[0] == self.announced()
            and cached[1].status == Status.TRAINING
            and (cached[1].tree, cached[1].level, cached[1].phase) == (tree, level, Phase.HISTOGRAMS)
        ):
            return cached[1]  # the main loop's read, and no step-changing block since: the chain's step as of now
        return self.s.task.state(self.s.task_id)

    # ------------------------------------------------------------------ the level's events

    def level_block(self, tree: int, level: int) -> int:
        """The block where (tree, level) started, so that event queries cover one level, not the whole task. While
        its ``LevelStarted`` is not served yet (the node's log index lags its state), the start of the latest earlier
        level known: a bound that holds, where block 0 made every such read scan the whole chain."""
        key = (tree, level)
        task = self.s.task
        with self.s.lock:  # the tree records' reads add to the same starts, from either thread
            starts = self.trees.level_starts
            if key not in starts:
                latest, counted = read_bound(self.announced_latest(), task.client)
                # the tree records' reads found every start before their last blocks
                start = max(0, max(self.level_scan, self.trees.next_block) - RESCAN_BLOCKS)
                for ev in task.client.logs(task.contract, ["LevelStarted"], self.s.task_id, start, latest):
                    at = (ev.block_number, ev.log_index)
                    starts[(int(ev.args["tree"]), int(ev.args["level"]))] = at
                self.level_scan = max(self.level_scan, counted + 1)
            found = starts.get(key)
            if found is not None:
                return found[0]
            return max((at[0] for k, at in starts.items() if k < key), default=0)

    def closed_submitters(self, ctx: LevelContext) -> int | None:
        """Which parties' histograms the level accepted, as its ``HistogramsClosed`` marks them (bit ``p`` for
        ``parties[p]``), None while not served: from the tree records' reads (``LIGHT_EVENTS``), read once more if
        it is not there yet, then from the level's start."""
        key = (ctx.tree, ctx.level)
        with self.s.lock:
            mask = self.trees.closed.get(key)
            if mask is None and self.trees.refresh():
                mask = self.trees.closed.get(key)
        if mask is not None:
            return mask
        # not in the records: the node served it late, past the blocks the records' reads take again
        task = self.s.task
        start = self.level_block(ctx.tree, ctx.level)
        for ev in task.client.logs(task.contract, ["HistogramsClosed"], self.s.task_id, start):
            if (int(ev.args["tree"]), int(ev.args["level"])) == (ctx.tree, ctx.level):
                return int(ev.args["submitterMask"])
        return None

    def taking_part(self, tree: int, level: int) -> set[str]:
        """The parties that may send (tree, level)'s histograms, as far as this party knows: those whose histograms
        the step before accepted (its ``HistogramsClosed``), every party at the task's first step. A party that did
        not vote is among them; the relayer's wait bounds what that costs."""
        with self.s.lock:
            before = [k for k in self.trees.closed if k < (tree, level)]
            mask = self.trees.closed[max(before)] if before else None
        return set(self.s.parties) if mask is None else self.s.parties_in(mask)

    def candidates(self, ctx: LevelContext) -> list[tuple[int, int]]:
        """The level's candidates as fixed by the closing of its vote (drawn candidates: as the level opened): as the
        tree records' reads found their ``CandidatesFixed`` events (usually the read that brought the level's start),
        else from their block (one log query), else from the node records (a node that does not serve the level's
        logs yet)."""
        if not ctx.candidates:
            task = self.s.task
            with self.s.timed("chain reads"):
                found = self.fixed_candidates(ctx)
                if not all(n in found for n in ctx.open_nodes):
                    for ev in self.candidate_events(ctx):
                        if int(ev.args["tree"]) == ctx.tree:
                            found[int(ev.args["node"])] = (int(ev.args["first"]), int(ev.args["second"]))
                if all(n in found for n in ctx.open_nodes):
                    ctx.candidates = [found[n] for n in ctx.open_nodes]
                else:
                    recs = task.client.call_many(
                        task.contract, "getNode", [(self.s.task_id, ctx.tree, n) for n in ctx.open_nodes]
                    )
                    ctx.candidates = [(int(r[1]), int(r[2])) for r in recs]
            with self.s.lock:  # kept for the carry checks of the next tree (``tree_candidates``)
                self.candidates_by_tree = {t: c for t, c in self.candidates_by_tree.items() if t >= ctx.tree - 1}
                self.candidates_by_tree.setdefault(ctx.tree, {}).update(
                    zip(ctx.open_nodes, ctx.candidates, strict=True)
                )
        return ctx.candidates

    def fixed_candidates(self, ctx: LevelContext) -> dict[int, tuple[int, int]]:
        """The tree's candidates as the tree records' reads found them (``LIGHT_EVENTS``), read once more if the
        level's are not all there: usually the read that brought the splits opening the level brought them too."""
        with self.s.lock:
            found = dict(self.trees.candidates.get(ctx.tree, {}))
            if not all(n in found for n in ctx.open_nodes) and self.trees.refresh():
                found = dict(self.trees.candidates.get(ctx.tree, {}))
        return found

    def candidate_events(self, ctx: LevelContext) -> list[Event]:
        """The level's ``CandidatesFixed`` events: from the one block the task state names where it is known
        (``candidates_block``), else from the level's start. The state can be ahead of the node's log index (anvil
        answered a query of the block its state had just mined with "block height is N but requested was N + 1"):
        then none, and the caller reads the node records instead."""
        task = self.s.task
        if ctx.fixed_block is None:
            start = self.level_block(ctx.tree, ctx.level)
            return task.client.logs(task.contract, ["CandidatesFixed"], self.s.task_id, start)
        try:
            return task.client.logs(
                task.contract, ["CandidatesFixed"], self.s.task_id, ctx.fixed_block, ctx.fixed_block
            )
        except Web3RPCError:
            return []

    def tree_candidates(self, tree: int, nodes: Sequence[int]) -> list[tuple[int, int]]:
        """The candidates of some of a finished tree's nodes, as the contract records them: those of the levels this
        party took part in are known already (``candidates``), the others (after a restart) are read once per node."""
        task = self.s.task
        self.candidates_by_tree = {t: c for t, c in self.candidates_by_tree.items() if t >= tree}
        known = self.candidates_by_tree.setdefault(tree, {})
        missing = [n for n in nodes if n not in known]
        if missing:
            recs = task.client.call_many(task.contract, "getNode", [(self.s.task_id, tree, n) for n in missing])
            known.update((n, (int(r[1]), int(r[2]))) for n, r in zip(missing, recs, strict=True))
        return [known[n] for n in nodes]

    def submitted_histograms(self, ctx: LevelContext) -> list[list[ref.NodeHistograms]]:
        """Every submitting party's level histograms, in party order, from the HistogramsSubmitted events."""
        cands = self.candidates(ctx)
        nb = self.s.params.nbins
        task = self.s.task
        events = task.client.logs(
            task.contract, list(HISTOGRAM_EVENTS), self.s.task_id, self.level_block(ctx.tree, ctx.level)
        )
        by_party = {
            p: w for (p, tree, level), w in submitted_words(events).items() if (tree, level) == (ctx.tree, ctx.level)
        }
        out = []
        for p in self.s.parties:
            if p in by_party:
                out.append(unblock(by_party[p], cands, nb))
        return out
