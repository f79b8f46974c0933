"""FV-tree federated training (Algorithm 3), simulated: M parties in one process, batched per tree level.

Party-side computation (gradients, refitted histograms, votes, quantised candidate histograms, applying splits)
runs one compiled kernel per party and level over all the level's open nodes (``node.histogram``), the same code a
party node runs; the coordinator side (top-2, best split, leaf values, split Shapley values, voting contributions)
is exactly what the contract computes, the ``ledger.reference`` functions on the quantised messages (batched per
level by ``node.resolve``, whose results equal ``reference.resolve_node``'s node by node). The model produced here
is therefore the model the chain produces from the same messages.

Algorithms:
``fvtree``      votes on refitted histograms (gradients weighted by the PSD distribution weights w*);
``pvtree``      votes on the raw local histograms (PV-tree, no refit);
``allfeatures`` no voting: the candidates are the two best features of the aggregated float histograms of all
                features, so its difference to ``fvtree`` is the cost of voting.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ledger import reference as ref
from node.histogram import BinnedRows, RowGroups, votes_from_gains
from node.messages import endorsement_quorum, level_traffic
from node.model import Node, Tree
from node.objective import gradients
from node.resolve import quantise_level, resolve_level, top2_level

ALGORITHMS = ("fvtree", "pvtree", "allfeatures")
HESSIAN_MODES = {"second": ref.HESSIAN_SECOND_ORDER, "count": ref.HESSIAN_COUNT}
# top-2 tie rules: "hashed" (default) orders equally voted features pseudo-randomly per node; "index" is NOTES 6 as
# written (the lower index wins), which on single-feature ballots systematically favours low-index features
TIE_BREAKS = ref.TIE_RULES


@dataclass(frozen=True)
class TrainParams:
    """GBDT and protocol parameters (paper settings by default, NOTES 4-5 for hessian and depth)."""

    trees: int = 500
    depth: int = 8
    bins: int = 16
    learning_rate: float = 0.1
    lam: float = 0.1
    min_rows: int = 20
    delta: float = 1.0
    alpha: float = 1.0
    hessian: str = "second"
    objective: str = "binary"
    tie_break: ref.TieRuleName = "hashed"

    def __post_init__(self) -> None:
        checks = [
            (self.trees >= 1, "trees must be at least 1"),
            (1 <= self.depth <= 16, "depth must be in [1, 16]"),
            (2 <= self.bins <= 254, "bins must be in [2, 254]"),
            (self.learning_rate > 0, "learning rate must be positive"),
            (self.lam >= 0, "lambda must be non-negative"),
            (self.min_rows >= 1, "min rows per leaf must be at least 1"),
            (self.delta > 0, "delta must be positive"),
            (0 < self.alpha <= 1, "alpha must be in (0, 1]"),
            (self.hessian in HESSIAN_MODES, f"hessian must be one of {', '.join(HESSIAN_MODES)}"),
            (self.objective in ("binary", "regression"), "objective must be binary or regression"),
            (self.tie_break in TIE_BREAKS, f"tie_break must be one of {', '.join(TIE_BREAKS)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def nbins(self) -> int:
        """Histogram slots per feature: the value bins plus the missing-value slot 0."""
        return self.bins + 1

    def contract_params(self) -> ref.Params:
        """The integer parameters the contract computes with."""
        return ref.Params(
            lam=ref.to_fixed(self.lam),
            learning_rate=ref.to_fixed(self.learning_rate),
            min_rows=self.min_rows,
            alpha=ref.to_fixed(self.alpha),
            hessian_mode=HESSIAN_MODES[self.hessian],
        )


@dataclass
class LevelRecord:
    """Everything a level put on chain and what the contract made of it (the audit trail of the simulation)."""

    tree: int
    level: int
    nodes: list[int]
    votes: list[list[int]]  # [party][node]
    candidates: list[tuple[int, ...]]
    results: list[ref.NodeResult]


@dataclass(frozen=True)
class LevelView:
    """What the parties hold during one level, for observers (the endorsement calibration), one entry per party:
    the rows' positions among the open nodes, the gradients, and the float (g, h, n) sums about to be sent."""

    tree: int
    level: int
    k_of_row: list[np.ndarray]
    candidates: list[tuple[int, ...]]
    g: list[np.ndarray]
    sums: list[tuple[np.ndarray, ...]]


@dataclass
class TrainResult:
    """The trained trees with everything the protocol recorded along the way."""

    trees: list[Tree]
    phi: list[int]
    kappa: list[int]
    total: list[int]
    per_tree_total: list[list[int]]
    comm_bytes: list[int]
    comm_bytes_per_tree: list[float]
    levels: list[LevelRecord] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the training time went: party-side phases and the contract-side resolution (``ledger.reference``)."""

    def shares(self) -> list[float]:
        """Each party's share of the positive contributions (negative totals earn nothing)."""
        pos = [max(t, 0) for t in self.total]
        s = sum(pos)
        return [p / s if s else 0.0 for p in pos]


def no_noise(x: np.ndarray) -> np.ndarray:
    """The identity mechanism: no differential-privacy noise."""
    return x


def no_noise3(g: np.ndarray, h: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, ...]:
    """The identity mechanism for histogram triples."""
    return g, h, n


def quantise(a: np.ndarray) -> list[Any]:
    """Fixed-point integers of a float array (nested lists of Python ints, same shape).

    ``np.rint`` of the scaled value is an integral float, so ``int`` converts it exactly; this equals
    ``ref.to_fixed`` element by element (both round half to even). Only non-zero values need converting, which on
    sparse data is a small fraction of the slots.
    """
    scaled = np.rint(a * float(ref.ONE))
    out = np.zeros(a.shape, dtype=object)
    nz = scaled != 0
    out[nz] = _to_int(scaled[nz])
    return list(out.tolist())


_to_int = np.frompyfunc(int, 1, 1)


class LocalParty:
    """One party's side of FV-tree: its binned rows, scores, gradients, votes and quantised histograms.

    The simulator runs M of these and the party node runs one, so a party computes exactly the same floats in
    both (the kernel's layout, such as each feature's default slot, depends on the rows it is built over, and so
    does its rounding). ``weights`` are the party's w* (fvtree) or None (votes on raw gradients, PV-tree).
    """

    def __init__(
        self, slots: np.ndarray, y: np.ndarray, params: TrainParams, weights: np.ndarray | None = None
    ) -> None:
        if slots.shape[0] != y.shape[0]:
            raise ValueError(f"{slots.shape[0]} rows of bin slots but {y.shape[0]} labels")
        if weights is not None and weights.shape != y.shape:
            raise ValueError(f"weights must have shape {y.shape}, got {weights.shape}")
        self.params = params
        self.rows = BinnedRows(slots, params.nbins)
        self.y = y.astype(np.float64)
        self.w = None if weights is None else weights.astype(np.float64)
        self.score = np.zeros_like(self.y)
        self.inflate = 1.0
        """Greedy-party experiments only: factor applied to the gradient sums before they are sent."""
        self.vote_mechanism: Callable[[np.ndarray], np.ndarray] = no_noise
        """Hook for the differential-privacy step on the votes: maps the (nodes, F) local best gains to the gains
        the vote is taken from (the exponential mechanism goes here). Identity by default."""
        self.histogram_mechanism: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, ...]] = no_noise3
        """Hook for the differential-privacy step on the sent histograms: maps (g, h, n) float sums, each
        (nodes, C, nbins), to the noised sums that are quantised and sent (Laplace noise goes here)."""

    @property
    def n_rows(self) -> int:
        return self.rows.n_rows

    def gradients(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(g, h, h used for votes and gains) at the current scores."""
        g, h = gradients(self.params.objective, self.y, self.score)
        return g, h, (np.ones_like(h) if self.params.hessian == "count" else h)

    def votes(self, k_of_row: np.ndarray, k: int, g: np.ndarray, h_vote: np.ndarray) -> np.ndarray:
        """This party's vote for each of the ``k`` open nodes (Algorithm 3, equation 4 on refitted sums)."""
        return self.votes_on(k_of_row, k, *self.vote_gradients(g, h_vote))

    def vote_gradients(self, g: np.ndarray, h_vote: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (g, h) the votes are taken on: refitted with w* (fvtree) or raw (PV-tree). They only change with
        the gradients, so the simulator computes them once per tree instead of once per level."""
        if self.w is None:
            return g, h_vote
        return g * self.w, h_vote * self.w

    def votes_on(self, k_of_row: np.ndarray, k: int, g_vote: np.ndarray, h_vote: np.ndarray) -> np.ndarray:
        """``votes`` on values already refitted by ``vote_gradients``."""
        best = self.rows.best_gains(k_of_row, k, g_vote, h_vote, self.params.lam)
        return votes_from_gains(self.vote_mechanism(best))

    def candidate_sums(
        self, k_of_row: np.ndarray, k: int, candidates: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Float (g, h, n) sums of each open node's candidates, (k, C, nbins) each, as they will be sent."""
        return self.group_candidate_sums(self.rows.groups(k_of_row, k), candidates, g, h)

    def group_candidate_sums(
        self, groups: RowGroups, candidates: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """``candidate_sums`` on rows already grouped by open node (``BinnedRows.groups``)."""
        sg, sh, sn = self.histogram_mechanism(*self.rows.group_candidates(groups, candidates, g, h))
        return sg * self.inflate if self.inflate != 1.0 else sg, sh, sn

    def messages(self, sums: tuple[np.ndarray, ...], candidates: Sequence[tuple[int, ...]]) -> list[ref.NodeHistograms]:
        """The quantised histograms of each open node: what is endorsed, committed and sent."""
        sg, sh, sn = sums
        qg, qh, ln = quantise(sg), quantise(sh), sn.tolist()
        return [
            ref.NodeHistograms(
                tuple(candidates[j]), tuple(map(tuple, qg[j])), tuple(map(tuple, qh[j])), tuple(map(tuple, ln[j]))
            )
            for j in range(len(candidates))
        ]


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


class Federation:
    """M simulated parties trained level by level, with the contract's side computed by ``ledger.reference``.

    Each party's rows start a tree as one group and are partitioned with every split (``BinnedRows.split_groups``),
    which also keeps their node ids and positions, instead of routing every row and regrouping it every level.
    """

    def __init__(
        self,
        party_slots: Sequence[np.ndarray],
        party_y: Sequence[np.ndarray],
        params: TrainParams,
        *,
        algo: str = "fvtree",
        party_weights: Sequence[np.ndarray] | None = None,
        keep_levels: bool = False,
    ) -> None:
        if algo not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")
        if len(party_slots) != len(party_y) or not party_slots:
            raise ValueError("need one label array per party and at least one party")
        if algo == "fvtree" and party_weights is None:
            raise ValueError("fvtree needs the parties' distribution weights w*")
        self.params = params
        self.algo = algo
        self.m = len(party_slots)
        self.keep_levels = keep_levels
        self.n_features = party_slots[0].shape[1]
        weights = list(party_weights) if algo == "fvtree" and party_weights is not None else [None] * self.m
        self.parties = [LocalParty(s, y, params, w) for s, y, w in zip(party_slots, party_y, weights, strict=True)]
        # all-features aggregates every party's rows in one search: a baseline, never run on chain
        self.pooled = BinnedRows(np.vstack(party_slots), params.nbins) if algo == "allfeatures" else None
        self.cparams = params.contract_params()
        self.quorum = endorsement_quorum(self.m)
        self.seconds: dict[str, float] = {}
        self.level_observer: Callable[[LevelView], None] | None = None

    @property
    def score(self) -> np.ndarray:
        """All parties' raw scores, in party order."""
        return np.concatenate([p.score for p in self.parties])

    @property
    def y(self) -> np.ndarray:
        return np.concatenate([p.y for p in self.parties])

    def _tick(self, phase: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - since
        return now

    def train(self, progress: Callable[[int], None] | None = None) -> TrainResult:
        """Grow ``params.trees`` trees; ``progress(t)`` is called after each tree."""
        p = self.params
        phi = [0] * self.m
        kappa = [0] * self.m
        total = [0] * self.m
        per_tree: list[list[int]] = []
        comm = [0] * self.m
        trees: list[Tree] = []
        levels: list[LevelRecord] = []
        for t in range(p.trees):
            tree, tree_total, tree_levels, traffic = self._grow_tree(t)
            for rec in tree_levels:
                for res in rec.results:
                    for i in range(self.m):
                        phi[i] += res.phi[i]
                        kappa[i] += res.kappa[i]
            for i in range(self.m):
                total[i] += tree_total[i]
                comm[i] += traffic
            per_tree.append(tree_total)
            trees.append(tree)
            if self.keep_levels:
                levels.extend(tree_levels)
            if progress is not None:
                progress(t)
        return TrainResult(
            trees, phi, kappa, total, per_tree, comm, [c / p.trees for c in comm], levels, dict(self.seconds)
        )

    def _grow_tree(self, t: int) -> tuple[Tree, list[int], list[LevelRecord], int]:
        clock = time.perf_counter()
        p = self.params
        grads = [party.gradients() for party in self.parties]
        vote_grads = [party.vote_gradients(g, hv) for party, (g, _, hv) in zip(self.parties, grads, strict=True)]
        # each party's rows: node id, position among the level's open nodes (-1: in a leaf), and the rows of
        # every open node, all kept up to date by the splits instead of being recomputed every level
        node_ids = [np.ones(party.n_rows, dtype=np.int64) for party in self.parties]
        k_of_rows = [np.zeros(party.n_rows, dtype=np.int64) for party in self.parties]
        groups = [RowGroups.everything(party.n_rows) for party in self.parties]
        tree = Tree()
        leaf_value = np.zeros(1 << (p.depth + 1), dtype=np.float64)
        inherited: dict[int, ref.Totals | None] = {1: None}
        open_nodes = [1]
        tree_total = [0] * self.m
        records: list[LevelRecord] = []
        traffic = 0
        for level in range(p.depth):
            if not open_nodes:
                break
            k = len(open_nodes)
            clock = self._tick("party: gradients, routing, applying splits", clock)
            if self.algo == "allfeatures":
                votes, cands = self._allfeatures_candidates(k_of_rows, k, grads)
            else:
                votes = np.stack(
                    [
                        party.votes_on(kr, k, gv, hv)
                        for party, kr, (gv, hv) in zip(self.parties, k_of_rows, vote_grads, strict=True)
                    ]
                )
                cands = top2_level(votes, self.n_features, TIE_BREAKS[p.tie_break], t, open_nodes)
            node_votes = votes.T.tolist()
            clock = self._tick("party: votes (refitted histograms, local search)", clock)
            cand_arr = np.asarray(cands, dtype=np.int64)
            sums = [
                party.group_candidate_sums(gr, cand_arr, g, h)
                for party, gr, (g, h, _) in zip(self.parties, groups, grads, strict=True)
            ]
            if self.level_observer is not None:
                positions = [kr.copy() for kr in k_of_rows]  # the observer may keep them; the splits update ours
                self.level_observer(LevelView(t, level, positions, cands, [gr[0] for gr in grads], sums))
            # the quantised histograms every party sends, as exact int64 limbs
            fixed = quantise_level(sums)
            clock = self._tick("party: candidate histograms (build, quantise)", clock)
            last = level == p.depth - 1
            node_inherited = [inherited[nid] for nid in open_nodes]
            resolved = None
            # on an overflow the contract reverts: the reference below raises its own error, at its own node
            with contextlib.suppress(ref.FixedPointOverflow):
                if fixed is not None:
                    resolved = resolve_level(fixed, cands, node_votes, node_inherited, last, self.cparams)
            if resolved is None:  # sums the limbs cannot carry: the messages, as Python integers
                party_hists = [party.messages(s, cands) for party, s in zip(self.parties, sums, strict=True)]
                resolved = self._resolve_messages(party_hists, node_votes, node_inherited, last)
            results, totals = resolved
            split_feature = np.full(k, -1, dtype=np.int64)
            split_threshold = np.zeros(k, dtype=np.int64)
            next_open: list[int] = []
            for j, nid in enumerate(open_nodes):
                res = results[j]
                for i in range(self.m):
                    tree_total[i] += res.contribution[i]
                if res.split is None:
                    assert res.leaf is not None
                    tree.nodes[nid] = Node.leaf(res.leaf, totals[j].n)
                    leaf_value[nid] = res.leaf / ref.ONE
                    continue
                s = res.split
                assert res.left is not None and res.right is not None
                tree.nodes[nid] = Node.split(s.feature, s.threshold, s.gain, s.n_left + s.n_right)
                split_feature[j], split_threshold[j] = s.feature, s.threshold
                if last:
                    assert res.left_leaf is not None and res.right_leaf is not None
                    tree.nodes[2 * nid] = Node.leaf(res.left_leaf, s.n_left)
                    tree.nodes[2 * nid + 1] = Node.leaf(res.right_leaf, s.n_right)
                    leaf_value[2 * nid] = res.left_leaf / ref.ONE
                    leaf_value[2 * nid + 1] = res.right_leaf / ref.ONE
                else:
                    inherited[2 * nid], inherited[2 * nid + 1] = res.left, res.right
                    next_open += [2 * nid, 2 * nid + 1]
            voting = self.algo != "allfeatures"
            ncand = 2 if voting else self.n_features
            traffic += level_traffic(k, ncand, p.nbins, self.m, self.quorum, voting=voting).total
            clock = self._tick("contract: top-2, best split, leaves, Shapley (ledger.reference)", clock)
            groups = [
                party.rows.split_groups(gr, split_feature, split_threshold, ids, kr)
                for party, gr, ids, kr in zip(self.parties, groups, node_ids, k_of_rows, strict=True)
            ]
            if self.keep_levels:
                records.append(LevelRecord(t, level, list(open_nodes), votes.tolist(), cands, results))
            else:
                records.append(LevelRecord(t, level, [], [], [], results))
            open_nodes = next_open
        for party, ids in zip(self.parties, node_ids, strict=True):
            party.score += leaf_value[ids]
        self._tick("party: gradients, routing, applying splits", clock)
        return tree, tree_total, records, traffic

    def _resolve_messages(
        self,
        party_hists: Sequence[Sequence[ref.NodeHistograms]],
        node_votes: Sequence[Sequence[int]],
        inherited: Sequence[ref.Totals | None],
        last: bool,
    ) -> tuple[list[ref.NodeResult], list[ref.Totals]]:
        """``resolve_node`` on every open node's messages, and each node's totals (as ``resolve_level``)."""
        results, totals = [], []
        for j, node_totals in enumerate(inherited):
            hists = [party_hists[i][j] for i in range(self.m)]
            results.append(ref.resolve_node(hists, node_votes[j], node_totals, last, self.cparams))
            if node_totals is None:  # the root: the sums of its candidate 0, as resolve_node takes them
                agg = ref.aggregate(hists)
                node_totals = ref.Totals(sum(agg.g[0]), sum(agg.h[0]), sum(agg.n[0]))
            totals.append(node_totals)
        return results, totals

    def _allfeatures_candidates(
        self, k_of_rows: Sequence[np.ndarray], k: int, grads: Sequence[tuple[np.ndarray, ...]]
    ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """No votes (all abstain); each node's candidates are the two best features of the pooled float
        histograms of all features."""
        assert self.pooled is not None
        best = self.pooled.best_gains(
            np.concatenate(k_of_rows),
            k,
            np.concatenate([gr[0] for gr in grads]),
            np.concatenate([gr[2] for gr in grads]),
            self.params.lam,
            self.params.min_rows,
        )
        order = np.argsort(-best, axis=1, kind="stable")
        votes = np.full((self.m, k), ref.ABSTAIN, dtype=np.int64)
        top: list[tuple[int, ...]] = [(int(order[j, 0]), int(order[j, 1])) for j in range(k)]
        return votes, top


def params_dict(params: TrainParams) -> dict[str, Any]:
    """The parameters as a plain dict (for JSON reports and saved models)."""
    return asdict(params)
