"""This party's view of a level: its scores after the finished trees, its gradients, where its rows are among the
open nodes, and its histograms of them (computed once per level).

Numerically it runs :class:`node.protocol.local_party.LocalParty`, the code the simulator runs for each party, on
the same rows, edges, PSDs and seeds, so a task trained on chain records exactly the model ``fgbdt simulate``
computes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import Sides
from fgbdt_chain.node.kernels.histogram import FixedRows
from fgbdt_chain.node.party.following import ChainFollower, ChainLag, splits_open
from fgbdt_chain.node.party.session import NodeError, PartySession
from fgbdt_chain.node.protocol.chunked_rows import route_rows
from fgbdt_chain.node.protocol.local_party import open_positions


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


def ahead_target(ctx: LevelContext, depth: int) -> tuple[tuple[int, int], bool]:
    """(the (tree, level) a ballot sent while ``ctx`` resolves is for, whether ``ctx`` is its tree's last level
    by depth): the next level, or after the last, the next tree's root."""
    last = ctx.level + 1 >= depth
    return ((ctx.tree + 1, 0) if last else (ctx.tree, ctx.level + 1)), last


class LevelState:
    """This party's levels: their contexts (cached; shared with the endorsement endpoint) and its histograms."""

    def __init__(self, session: PartySession, chain: ChainFollower) -> None:
        self.s, self.chain = session, chain
        self.applied_trees = 0
        self._grad_tree = -1
        self._grads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._fixed: FixedRows | None = None
        self._contexts: dict[tuple[int, int], LevelContext] = {}
        self._leaf_lag_since: dict[int, float] = {}
        self.routed: tuple[int, int, tuple[int, ...], dict[int, tuple[int, int]], np.ndarray] | None = None
        """(tree, level, open nodes, the splits that opened them, each row's node, 0 for a row in a leaf) of the level
        the votes sent ahead routed the rows to: only the rows' places among the open nodes are read from it."""

    def apply_completed_trees(self, current_tree: int) -> None:
        """Add every finished tree's leaf values to this party's scores, in tree order (as the simulator does)."""
        party, params, trees = self.s.party, self.s.params, self.chain.trees
        assert party is not None
        while self.applied_trees < current_tree:
            t = self.applied_trees
            trees.refresh()
            ids = self.route(t, params.depth + 1)
            leaves = trees.leaves.get(t, {})
            missing = set(np.unique(ids).tolist()) - set(leaves)
            if missing:  # read the tree's records again before calling the chain inconsistent
                trees.refresh(since=self.chain.level_block(t, 0))
                ids = self.route(t, params.depth + 1)
                leaves = trees.leaves.get(t, {})
                missing = set(np.unique(ids).tolist()) - set(leaves)
            if missing:
                # the state may be ahead of the logs the node serves (the race TreeLog rescans for): without a vote
                # round the next level starts in the very block that finished the tree, so give the node time
                since = self._leaf_lag_since.setdefault(t, time.monotonic())
                if time.monotonic() - since > self.s.settings.chain_outage_seconds:
                    raise NodeError(f"tree {t} is finished on chain but nodes {sorted(missing)[:5]} have no leaf value")
                raise ChainLag(
                    f"tree {t} is finished on chain but the leaves of nodes {sorted(missing)[:5]} are not served yet"
                )
            values = np.zeros(1 << (params.depth + 1))
            for nid, v in leaves.items():
                values[nid] = v / ref.ONE
            party.score += values[ids]
            self.applied_trees += 1

    def routed_ahead(self, tree: int, level: int, open_nodes: Sequence[int]) -> np.ndarray | None:
        """Each row's node at the level, as the votes sent ahead routed them, where the chain made the same splits
        (else None: routed again from the chain's records)."""
        if self.routed is None:
            return None
        t, lv, nodes, local, ids = self.routed
        chain = self.chain.trees.splits.get(tree, {})
        if (t, lv, nodes) != (tree, level, tuple(open_nodes)) or any(chain.get(n) != s for n, s in local.items()):
            return None
        return ids

    def knows_level(self, tree: int, level: int, open_nodes: Sequence[int]) -> bool:
        return splits_open(self.chain.trees.splits.get(tree, {}), level, open_nodes)

    def route(self, tree: int, levels: int) -> np.ndarray:
        """Each row's node after ``levels`` levels of tree ``tree``'s recorded splits."""
        party = self.s.party
        assert party is not None
        ids = np.ones(party.n_rows, dtype=np.int64)
        splits = self.chain.trees.splits.get(tree, {})
        for _ in range(levels):
            ids = route_rows(party.rows, ids, splits)
        return ids

    def context(self, tree: int, level: int, open_nodes: Sequence[int]) -> LevelContext:
        """This party's view of a level (cached; shared with the endorsement server)."""
        trees = self.chain.trees
        with self.s.lock:
            key = (tree, level)
            if key in self._contexts:
                return self._contexts[key]
            party = self.s.party
            assert party is not None
            self.apply_completed_trees(tree)
            if self._grad_tree != tree:
                self._grads = party.gradients()
                self._fixed = None
                self._grad_tree = tree
            assert self._grads is not None
            trees.refresh()
            if not self.knows_level(tree, level, open_nodes):
                trees.refresh(since=self.chain.level_block(tree, 0))  # the tree again; then give the node time
                if not self.knows_level(tree, level, open_nodes):
                    raise ChainLag(f"tree {tree} level {level}: the splits that opened it are not served yet")
            ids = self.routed_ahead(tree, level, open_nodes)
            if ids is None:
                ids = self.route(tree, level)
            k_of_row = open_positions(ids, open_nodes, self.s.params.depth)
            g, h, h_vote = self._grads
            ctx = LevelContext(tree, level, list(open_nodes), k_of_row, g, h, h_vote)
            self._contexts = {k: v for k, v in self._contexts.items() if k[0] >= tree - 1}
            self._contexts[key] = ctx
            return ctx

    def my_histograms(self, ctx: LevelContext) -> list[ref.NodeHistograms]:
        """This party's histograms of the level's open nodes: exact sums of its rows' fixed-point values, with its
        privacy noise in a private task (projected onto the totals it released at the parents)."""
        party = self.s.party
        assert party is not None
        cands = self.chain.candidates(ctx)
        with self.s.lock:
            if ctx.histograms is None:
                if self._fixed is None or self._grad_tree != ctx.tree:
                    self._fixed = party.fixed_rows(ctx.g, ctx.h, ctx.tree)
                totals = self.released_totals(ctx) if party.privacy.private else None
                ctx.histograms = party.histograms(ctx.k_of_row, cands, self._fixed, ctx.tree, ctx.level, totals)
            return ctx.histograms

    def released_totals(self, ctx: LevelContext) -> list[tuple[int, int, int]] | None:
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
        splits = self.chain.trees.splits.get(ctx.tree, {})
        out = []
        for nid in ctx.open_nodes:
            feature, threshold = splits[nid // 2]
            hist = released[nid // 2]
            sides = Sides.of(hist, hist.features.index(feature), threshold)
            t = sides.left if nid % 2 == 0 else sides.right
            out.append((t.g, t.h, t.n))
        return out
