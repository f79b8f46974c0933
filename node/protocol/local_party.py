"""What one party computes in FV-tree: its binned rows, scores, gradients, votes and exact histograms, and where its
rows go as the tree splits.

The simulator (``node.sim.fvtree``) runs M of these parties in one process and a party node (``node.party``) runs one,
on the same rows, edges, PSDs and seeds, so a task trained on chain records exactly the model ``fgbdt simulate``
computes. Nothing here knows of the other parties or of the chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, FixedSums, RowGroups, votes_from_gains
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.privacy.accountant import (
    HISTOGRAMS,
    NO_PRIVACY,
    VOTES,
    PrivacyPlan,
    exponential_votes,
    noise_rng,
    noisy_sums,
    vote_floor,
)

if TYPE_CHECKING:
    from fgbdt_chain.ledger.spec.train_params import TrainParams


def join_limbs(hi: np.ndarray, lo: np.ndarray) -> list[Any]:
    """Python integers ``hi * 2**32 + lo`` of two int64 limb arrays, as nested lists of the same shape."""
    return list(limbs.join(hi, lo).tolist())


def messages_of(sums: FixedSums, candidates: Sequence[tuple[int, ...]]) -> list[ref.NodeHistograms]:
    """The histograms of each open node as sent: what is endorsed, committed and resolved."""
    qg, qh, ln = join_limbs(sums.g_hi, sums.g_lo), join_limbs(sums.h_hi, sums.h_lo), sums.n.tolist()
    return [
        ref.NodeHistograms(
            tuple(candidates[j]), tuple(map(tuple, qg[j])), tuple(map(tuple, qh[j])), tuple(map(tuple, ln[j]))
        )
        for j in range(len(candidates))
    ]


class LocalParty:
    """One party's side of FV-tree: its binned rows, scores, gradients, votes and exact histograms.

    The simulator runs M of these and the party node runs one, so a party computes exactly the same numbers in
    both (the kernel's layout, such as each feature's default slot, depends on the rows it is built over, and so
    does its rounding). ``weights`` are the party's w* (fvtree) or None (votes on raw gradients, PV-tree).
    Histograms are exact integer sums of every row's gradient and hessian quantised once per tree
    (:meth:`fixed_rows`), so the same rows sum to the same integers at every node and level
    (``ledger.spec.histogram_rules``).
    """

    def __init__(
        self,
        slots: np.ndarray | BinnedRows,
        y: np.ndarray,
        params: TrainParams,
        weights: np.ndarray | None = None,
        *,
        privacy: PrivacyPlan = NO_PRIVACY,
        noise_seed: int | None = None,
        index: int = 0,
        widths: np.ndarray | None = None,
    ) -> None:
        # slots in memory, or rows already laid out (``node.protocol.chunked_rows``: slots read chunk by chunk)
        rows = slots if isinstance(slots, BinnedRows) else BinnedRows(slots, params.nbins)
        if rows.n_rows != y.shape[0]:
            raise ValueError(f"{rows.n_rows} rows of bin slots but {y.shape[0]} labels")
        if weights is not None and weights.shape != y.shape:
            raise ValueError(f"weights must have shape {y.shape}, got {weights.shape}")
        self.params = params
        self.rows = rows
        self.y = y.astype(np.float64) / params.label_scale  # a power of two: exact
        self.w = None if weights is None else weights.astype(np.float64)
        self.score = np.zeros_like(self.y)
        self.attack: Attack | None = None
        """Greedy-party experiments only: what this party does to its histograms (``node.attacks.histograms``)."""
        self.privacy = privacy
        """This party's differential-privacy mechanisms (``node.privacy.accountant``): none by default."""
        if privacy.private and params.objective != "binary":
            raise ValueError("differential privacy needs the binary logistic loss (bounded gradients)")
        self.noise_seed = noise_seed
        self.index = index
        """The party's place in the task: which noise stream a seeded experiment draws
        (``node.privacy.accountant.noise_rng``)."""
        self.widths = widths
        """Slots per feature (``node.model.trees.slot_widths`` of the task's edges): where a private party's noise
        goes."""

    @property
    def n_rows(self) -> int:
        return self.rows.n_rows

    def gradients(self, score: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(g, h, h used for votes and gains) at the current scores, or at ``score`` (the scores a tree not yet
        applied will give: a node votes on the next root ahead)."""
        g, h = gradients(self.params.objective, self.y, self.score if score is None else score)
        return g, h, (np.ones_like(h) if self.params.hessian == "count" else h)

    def attacks(self, tree: int) -> Attack | None:
        """The attack this party plays on tree ``tree``, if any."""
        return self.attack if self.attack is not None and self.attack.active(tree) else None

    def fixed_rows(self, g: np.ndarray, h: np.ndarray, tree: int) -> FixedRows:
        """Every row's (g, h) in fixed point, once per tree, as this party sums them (an attack applied)."""
        count = None
        attack = self.attacks(tree)
        if attack is not None:
            g, h, count = attack.rows(g, h)
        return FixedRows.of(g, h, count)

    def votes(
        self, k_of_row: np.ndarray, k: int, g: np.ndarray, h_vote: np.ndarray, tree: int = 0, level: int = 0
    ) -> np.ndarray:
        """This party's vote for each of the ``k`` open nodes (Algorithm 3, equation 4 on refitted sums)."""
        return self.votes_on(k_of_row, k, *self.vote_gradients(g, h_vote), tree, level)

    def vote_gradients(self, g: np.ndarray, h_vote: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (g, h) the votes are taken on: refitted with w* (fvtree) or raw (PV-tree). They only change with
        the gradients, so the simulator computes them once per tree instead of once per level. A private party
        clips every refitted gradient to [-1, 1] and counts rows as hessians, which bounds the vote's sensitivity
        (``node.privacy.accountant``)."""
        gv = g if self.w is None else g * self.w
        if self.privacy.private:
            return np.clip(gv, -1.0, 1.0), np.ones_like(h_vote)
        return gv, (h_vote if self.w is None else h_vote * self.w)

    def votes_on(
        self, k_of_row: np.ndarray, k: int, g_vote: np.ndarray, h_vote: np.ndarray, tree: int = 0, level: int = 0
    ) -> np.ndarray:
        """``votes`` on values already refitted by ``vote_gradients``; a private party draws its vote by the
        exponential mechanism, over every threshold (no row minimum: feasibility would depend on one row)."""
        best = self.rows.best_gains(k_of_row, k, g_vote, h_vote, self.params.lam, self.vote_min_rows)
        return self.votes_from(best, tree, level, self.vote_floor(k_of_row, k, g_vote, h_vote))

    def vote_floor(self, k_of_row: np.ndarray, k: int, g_vote: np.ndarray, h_vote: np.ndarray) -> np.ndarray | None:
        """A private party's one-sided gain per open node (``node.privacy.accountant.vote_floor``), which completes
        its utilities to every public threshold; None without privacy."""
        return vote_floor(k_of_row, k, g_vote, h_vote, self.params.lam) if self.privacy.private else None

    @property
    def vote_min_rows(self) -> int:
        """Rows a side needs for a vote's gain: one, or none for a private party (feasibility would depend on one
        row)."""
        return 0 if self.privacy.private else 1

    def votes_from(self, best: np.ndarray, tree: int, level: int, floor: np.ndarray | None = None) -> np.ndarray:
        """This party's votes from its best gains per (node, feature), taken with ``vote_min_rows``; a private
        party's need its ``vote_floor``."""
        if not self.privacy.private:
            return votes_from_gains(best)
        if floor is None:
            raise ValueError("a private vote needs its nodes' one-sided gains (vote_floor)")
        rng = noise_rng(self.noise_seed, self.index, tree, level, VOTES)
        return exponential_votes(best, self.privacy, rng, floor)

    def level_sums(
        self,
        groups: RowGroups,
        candidates: np.ndarray,
        rows: FixedRows,
        tree: int,
        level: int = 0,
        totals: Sequence[tuple[int, int, int]] | None = None,
    ) -> FixedSums:
        """The candidate histograms of the open nodes (rows grouped by node), as this party sends them: exact, or
        with its privacy noise projected onto ``totals`` (its released sides at the parents; None at a root)."""
        exact = self.rows.group_candidates_fixed(groups, candidates, rows)
        return self.sent_sums(exact, candidates, tree, level, totals)

    def sent_sums(
        self,
        sums: FixedSums,
        candidates: np.ndarray,
        tree: int,
        level: int = 0,
        totals: Sequence[tuple[int, int, int]] | None = None,
    ) -> FixedSums:
        """The exact candidate sums of the open nodes as this party sends them (``level_sums``): ``sums`` itself
        unless an attack or privacy noise changes them."""
        attack = self.attacks(tree)
        if attack is not None and attack.kind == "targeted":
            g_hi, g_lo = attack.bins(sums.g_hi, sums.g_lo)
            sums = FixedSums(g_hi, g_lo, sums.h_hi, sums.h_lo, sums.n)
        if self.privacy.private:
            rng = noise_rng(self.noise_seed, self.index, tree, level, HISTOGRAMS)
            widths = None if self.widths is None else self.widths[np.asarray(candidates, dtype=np.int64)]
            sums = noisy_sums(sums, totals, self.privacy, rng, widths)
        return sums

    def histograms(
        self,
        k_of_row: np.ndarray,
        candidates: Sequence[tuple[int, ...]],
        rows: FixedRows,
        tree: int,
        level: int = 0,
        totals: Sequence[tuple[int, int, int]] | None = None,
    ) -> list[ref.NodeHistograms]:
        """The histograms of each open node, from the rows' positions among them (the node's path)."""
        cand = np.asarray(candidates, dtype=np.int64).reshape(len(candidates), -1)
        groups = self.rows.groups(k_of_row, len(candidates))
        return messages_of(self.level_sums(groups, cand, rows, tree, level, totals), candidates)


def route(slots: np.ndarray, node_id: np.ndarray, splits: dict[int, tuple[int, int]]) -> np.ndarray:
    """Move rows sitting at split nodes to their children: ``splits`` maps node id to (feature, threshold); a row
    goes left when its slot is at most the threshold (missing values, slot 0, always go left)."""
    if not splits:
        return node_id.copy()
    size = max(int(node_id.max()), max(splits)) + 1
    feature = np.full(size, -1, dtype=np.int64)
    threshold = np.zeros(size, dtype=np.int64)
    for nid, (f, t) in splits.items():
        feature[nid], threshold[nid] = f, t
    out = node_id.copy()
    rows = np.nonzero(feature[node_id] >= 0)[0]
    at = node_id[rows]
    out[rows] = 2 * at + (slots[rows, feature[at]] > threshold[at]).astype(np.int64)
    return out


def open_positions(node_id: np.ndarray, open_nodes: Sequence[int], depth: int) -> np.ndarray:
    """Each row's index among the level's open nodes, -1 for rows in closed nodes."""
    pos = np.full(1 << (depth + 1), -1, dtype=np.int64)
    pos[list(open_nodes)] = np.arange(len(open_nodes))
    return pos[node_id]
