"""A task trained party by party: each party an object that computes its own side of every level (its votes, its
histograms, where its rows go), which may sit in another process or hold its rows on disk or on Dask workers, and
the contract's side (top-2, the best split, leaves, split Shapley values and voting contributions) computed on what
the parties send.

Why beside the simulator: ``node.sim.fvtree.Federation`` runs the parties' work as one compiled call over every
party's rows in memory, which is what makes it fast and what a party whose rows do not fit one process cannot
join. Here each party is asked level by level, as a party node is by the chain, so one party's rows may be read
from Parquet chunk by chunk (``node.protocol.chunked_rows``) while the others keep theirs in memory. Every party
computes with ``LocalParty``, the class the simulator and the party node compute with, and the contract's side is
``node.protocol.resolve``'s, the simulator's: without endorsement, the trees, contributions and every submitted
histogram are the simulator's, bit for bit (the tests compare them).

Endorsement is not played here (every party's histograms are taken as sent, at neutral credit, as the simulator does
with no endorsement rule), nor privacy, attacks or leave-one-out contributions: those are refused by name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from fgbdt_chain.ledger.spec import modes
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.shapley_estimate import estimated, node_seed
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.kernels.histogram import FixedRows, FixedSums
from fgbdt_chain.node.model.trees import Tree
from fgbdt_chain.node.protocol.chunked_rows import ChunkedRows
from fgbdt_chain.node.protocol.local_party import LocalParty, messages_of, open_positions, route
from fgbdt_chain.node.protocol.resolve import level_of, resolve_level_view, top2_level
from fgbdt_chain.node.protocol.resolved_level import Inherited, ResolvedLevel, grow_level

ROUND_ALGORITHMS = ("fvtree", "pvtree", "drawn")
"""What a task trained party by party runs (``node.sim.fvtree.ALGORITHMS`` but the pooled ``allfeatures``)."""


class PartySide(Protocol):
    """What the task asks of one party, level by level (:class:`PartyWork`, or a stand-in for one in another
    process)."""

    def start_tree(self, tree: int) -> None: ...

    def votes(self, tree: int, level: int, open_nodes: Sequence[int]) -> list[int]: ...

    def histograms(
        self, tree: int, level: int, open_nodes: Sequence[int], candidates: Sequence[tuple[int, ...]]
    ) -> FixedSums: ...

    def apply(self, splits: dict[int, tuple[int, int]]) -> None: ...

    def end_tree(self, leaf_value: np.ndarray) -> None: ...


class PartyWork:
    """One party's side of the task: its ``LocalParty`` (slots in memory, or ``ChunkedRows``) and each row's node in
    the tree being grown. A tree's gradients, vote values and fixed-point rows are taken once, at its start."""

    def __init__(self, party: LocalParty) -> None:
        if party.privacy.private:
            raise ValueError("a task trained party by party runs without differential privacy")
        if party.attack is not None:
            raise ValueError("a task trained party by party runs without attacks")
        self.party = party
        self.node_id = np.ones(party.n_rows, dtype=np.int64)
        self._vote: tuple[np.ndarray, np.ndarray] | None = None
        self._fixed: FixedRows | None = None
        self._at: tuple[tuple[int, ...], np.ndarray] | None = None

    def start_tree(self, tree: int) -> None:
        g, h, h_vote = self.party.gradients()
        self._vote = self.party.vote_gradients(g, h_vote)
        self._fixed = self.party.fixed_rows(g, h, tree)
        self.node_id = np.ones(self.party.n_rows, dtype=np.int64)
        self._at = None

    def _k_of_row(self, open_nodes: Sequence[int]) -> np.ndarray:
        """Each row's place among the level's open nodes (computed once per level)."""
        key = tuple(open_nodes)
        if self._at is None or self._at[0] != key:
            self._at = (key, open_positions(self.node_id, open_nodes, self.party.params.depth))
        return self._at[1]

    def votes(self, tree: int, level: int, open_nodes: Sequence[int]) -> list[int]:
        assert self._vote is not None, "start_tree first"
        k_of_row = self._k_of_row(open_nodes)
        votes = self.party.votes_on(k_of_row, len(open_nodes), *self._vote, tree, level)
        return [int(v) for v in votes]

    def histograms(
        self, tree: int, level: int, open_nodes: Sequence[int], candidates: Sequence[tuple[int, ...]]
    ) -> FixedSums:
        assert self._fixed is not None, "start_tree first"
        cand = np.asarray(candidates, dtype=np.int64).reshape(len(candidates), -1)
        groups = self.party.rows.groups(self._k_of_row(open_nodes), len(candidates))
        return self.party.level_sums(groups, cand, self._fixed, tree, level)

    def apply(self, splits: dict[int, tuple[int, int]]) -> None:
        rows = self.party.rows
        if isinstance(rows, ChunkedRows):
            self.node_id = rows.route(self.node_id, splits)
        else:
            self.node_id = route(rows.slots, self.node_id, splits)
        self._at = None

    def end_tree(self, leaf_value: np.ndarray) -> None:
        self.party.score += leaf_value[self.node_id]


@dataclass
class RoundsResult:
    """The trees and every party's contributions (fixed point, as ``node.sim.fvtree.TrainResult``'s)."""

    trees: list[Tree] = field(default_factory=list)
    phi: list[int] = field(default_factory=list)
    kappa: list[int] = field(default_factory=list)
    total: list[int] = field(default_factory=list)
    per_tree_total: list[list[int]] = field(default_factory=list)


Observer = Callable[[int, int, list[tuple[int, ...]], list[FixedSums]], None]
"""Called with (tree, level, candidates, every party's histograms as sent) at every level."""


def resolve(
    sums: Sequence[FixedSums],
    cands: list[tuple[int, ...]],
    node_votes: Sequence[Sequence[int]],
    inherited: Inherited,
    last: bool,
    params: ref.Params,
    seeds: Sequence[int] | None = None,
) -> ResolvedLevel:
    """The contract's resolution of a level (every party at neutral credit): on the exact limbs where they carry the
    sums, else on the messages as Python integers, as ``node.sim.fvtree.Federation`` resolves; ``seeds``: each node's
    seed of its estimated split Shapley values (``shapley_estimate.node_seed``) above the exact size."""
    credits = [ref.NEUTRAL] * len(sums)
    level = level_of(sums)
    if level is not None:
        with contextlib.suppress(ref.FixedPointOverflow):
            return resolve_level_view(level, cands, node_votes, inherited, last, params, credits, seeds)
    hists = [messages_of(s, cands) for s in sums]
    results, totals = [], []
    for j, node_totals in enumerate(inherited.totals):
        node_hists = [h[j] for h in hists]
        seed = seeds[j] if seeds is not None else None
        results.append(ref.resolve_node(node_hists, node_votes[j], node_totals, last, params, credits, seed))
        if node_totals is None:
            node_totals = ref.Totals(*(sum(getattr(ref.aggregate(node_hists), f)[0]) for f in ("g", "h", "n")))
        totals.append(node_totals)
    return ResolvedLevel.of_results(results, totals, len(sums), last)


def train_rounds(
    parties: Sequence[PartySide],
    params: TrainParams,
    n_features: int,
    algo: str = "fvtree",
    observer: Observer | None = None,
    progress: Callable[[int], None] | None = None,
    shapley_seed: int = 0,
) -> RoundsResult:
    """Grow ``params.trees`` trees with every party asked for its side of each level (module docstring). ``algo``
    says whether the parties vote (``fvtree``/``pvtree``: the first ``params.voted_trees`` trees) or the candidates
    are drawn; which values a party votes on (refitted or raw) is its ``LocalParty``'s (its weights)."""
    if algo not in ROUND_ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r} for a task trained party by party: {', '.join(ROUND_ALGORITHMS)}")
    if params.contribution != "shapley":
        raise ValueError(f"contribution {params.contribution!r}: a task trained party by party pays split Shapley")
    if not parties or len(parties) > ref.MAX_PARTIES:
        raise ValueError(f"{len(parties)} parties: between 1 and {ref.MAX_PARTIES}")
    m, depth = len(parties), params.depth
    cparams = params.contract_params()
    out = RoundsResult(phi=[0] * m, kappa=[0] * m, total=[0] * m)
    for t in range(params.trees):
        for p in parties:
            p.start_tree(t)
        tree = Tree()
        leaf_value = np.zeros(1 << (depth + 1), dtype=np.float64)
        inherited = Inherited.roots()
        open_nodes = [1]
        tree_total = [0] * m
        for level in range(depth):
            if not open_nodes:
                break
            k = len(open_nodes)
            if algo == "drawn" or ref.draws(t, params.voted_trees):
                votes = np.full((m, k), ref.ABSTAIN, dtype=np.int64)
                cands = top2_level(votes, n_features, modes.TIE_HASHED, t, open_nodes)
            else:
                votes = np.array([p.votes(t, level, open_nodes) for p in parties], dtype=np.int64).reshape(m, k)
                cands = top2_level(votes, n_features, modes.TIE_RULES[params.tie_break], t, open_nodes)
            sums = [p.histograms(t, level, open_nodes, cands) for p in parties]
            if observer is not None:
                observer(t, level, cands, sums)
            last = level == depth - 1
            seeds = [node_seed(shapley_seed, t, nid) for nid in open_nodes] if estimated(m) else None
            results = resolve(sums, cands, votes.T.tolist(), inherited, last, cparams, seeds)
            for i, (phi, kappa, total) in enumerate(
                zip(results.phi_sums, results.kappa_sums, results.contribution_sums, strict=True)
            ):
                out.phi[i] += phi
                out.kappa[i] += kappa
                tree_total[i] += total
            splits: dict[int, tuple[int, int]] = {}
            next_open: list[int] = []
            for _, nid, _, feature, threshold in grow_level(tree, leaf_value, open_nodes, results, last):
                splits[nid] = (feature, threshold)
                if not last:
                    next_open += [2 * nid, 2 * nid + 1]
            inherited = results.children()
            if splits:
                for p in parties:
                    p.apply(splits)
            open_nodes = next_open
        for p in parties:
            p.end_tree(leaf_value)
        for i in range(m):
            out.total[i] += tree_total[i]
        out.per_tree_total.append(tree_total)
        out.trees.append(tree)
        if progress is not None:
            progress(t)
    return out
