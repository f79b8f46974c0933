"""FV-tree federated training (Algorithm 3), simulated: M parties in one process, batched per tree level.

Party-side computation (gradients, refitted histograms, votes, quantised candidate histograms, applying splits)
is vectorised over all parties at once by numbering histogram groups ``party * K + node``; the coordinator side
(top-2, best split, leaf values, split Shapley values, voting contributions) is exactly what the contract computes,
done by ``ledger.reference`` on the quantised messages. The model produced here is therefore the model the chain
produces from the same messages.

Algorithms:
``fvtree``      votes on refitted histograms (gradients weighted by the PSD distribution weights w*);
``pvtree``      votes on the raw local histograms (PV-tree, no refit);
``allfeatures`` no voting: the candidates are the two best features of the aggregated float histograms of all
                features, so its difference to ``fvtree`` is the cost of voting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ledger import reference as ref
from node.histogram import BinnedRows, votes_from_gains
from node.messages import endorsement_quorum, level_traffic
from node.model import Node, Tree
from node.objective import gradients

ALGORITHMS = ("fvtree", "pvtree", "allfeatures")
HESSIAN_MODES = {"second": ref.HESSIAN_SECOND_ORDER, "count": ref.HESSIAN_COUNT}


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
    """What the parties hold during one level, for observers (the endorsement calibration): the rows' node
    positions, the candidates and the float sums each party is about to quantise and send."""

    tree: int
    level: int
    k_of_row: np.ndarray
    candidates: list[tuple[int, ...]]
    g: np.ndarray
    h: np.ndarray
    sums: tuple[np.ndarray, ...]  # (g, h, n), each (parties, nodes, C, nbins)


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


class Federation:
    """M parties' binned rows, gradients and weights, trained level by level."""

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
        self.party_of_row = np.concatenate([np.full(len(y), p, dtype=np.int64) for p, y in enumerate(party_y)])
        slots = np.vstack(party_slots)
        self.n_features = slots.shape[1]
        self.rows = BinnedRows(slots, params.nbins)
        self.y = np.concatenate(party_y).astype(np.float64)
        if party_weights is not None:
            self.w = np.concatenate(party_weights).astype(np.float64)
        else:
            self.w = np.ones_like(self.y)
        self.score = np.zeros_like(self.y)
        self.cparams = params.contract_params()
        self.quorum = endorsement_quorum(self.m)
        self.seconds: dict[str, float] = {}
        self.level_observer: Callable[[LevelView], None] | None = None
        self._tree = self._level = 0
        self._k_of_row = np.zeros(0, dtype=np.int64)
        self.vote_mechanism: Callable[[np.ndarray], np.ndarray] = no_noise
        """Hook for the differential-privacy step on the votes: maps the (groups, F) local best gains to the gains
        the vote is taken from (the exponential mechanism goes here). Identity by default."""
        self.histogram_mechanism: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, ...]] = no_noise3
        """Hook for the differential-privacy step on the sent histograms: maps (g, h, n) float sums, each
        (groups, C, nbins), to the noised sums that are quantised and sent (Laplace noise goes here)."""

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
        g, h = gradients(p.objective, self.y, self.score)
        h_vote = np.ones_like(h) if p.hessian == "count" else h
        node_id = np.ones(len(self.y), dtype=np.int64)
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
            pos = np.full(1 << (p.depth + 1), -1, dtype=np.int64)
            pos[open_nodes] = np.arange(k)
            k_of_row = pos[node_id]
            group = np.where(k_of_row >= 0, self.party_of_row * k + k_of_row, -1)
            clock = self._tick("party: gradients, routing, applying splits", clock)
            self._tree, self._level, self._k_of_row = t, level, k_of_row
            votes, cands = self._candidates(group, k, k_of_row, g, h_vote)
            clock = self._tick("party: votes (refitted histograms, local search)", clock)
            party_hists = self._candidate_histograms(group, k, cands, g, h)
            clock = self._tick("party: candidate histograms (build, quantise)", clock)
            last = level == p.depth - 1
            results = []
            split_feature = np.full(k, -1, dtype=np.int64)
            split_threshold = np.zeros(k, dtype=np.int64)
            next_open: list[int] = []
            node_votes = votes.T.tolist()
            for j, nid in enumerate(open_nodes):
                hists = [party_hists[i][j] for i in range(self.m)]
                res = ref.resolve_node(hists, node_votes[j], inherited[nid], last, self.cparams)
                results.append(res)
                for i in range(self.m):
                    tree_total[i] += res.contribution[i]
                if res.split is None:
                    assert res.leaf is not None
                    tree.nodes[nid] = Node.leaf(res.leaf, self._count(hists, inherited[nid]))
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
            # apply the recorded splits to the rows
            in_split = k_of_row >= 0
            rows = np.nonzero(in_split)[0]
            feat = split_feature[k_of_row[rows]]
            moving = feat >= 0
            rows, feat = rows[moving], feat[moving]
            go_left = self.rows.slots[rows, feat] <= split_threshold[k_of_row[rows]]
            node_id[rows] = 2 * node_id[rows] + (~go_left).astype(np.int64)
            if self.keep_levels:
                records.append(LevelRecord(t, level, list(open_nodes), votes.tolist(), cands, results))
            else:
                records.append(LevelRecord(t, level, [], [], [], results))
            open_nodes = next_open
        self.score += leaf_value[node_id]
        self._tick("party: gradients, routing, applying splits", clock)
        return tree, tree_total, records, traffic

    @staticmethod
    def _count(hists: Sequence[ref.NodeHistograms], inherited: ref.Totals | None) -> int:
        if inherited is not None:
            return inherited.n
        return sum(sum(hh.n[0]) for hh in hists)

    def _candidates(
        self, group: np.ndarray, k: int, k_of_row: np.ndarray, g: np.ndarray, h_vote: np.ndarray
    ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """Votes (party x node) and each node's candidate features."""
        p = self.params
        if self.algo == "allfeatures":
            best = self.rows.best_gains(k_of_row, k, g, h_vote, p.lam, p.min_rows)
            order = np.argsort(-best, axis=1, kind="stable")
            votes = np.full((self.m, k), ref.ABSTAIN, dtype=np.int64)
            top: list[tuple[int, ...]] = [(int(order[j, 0]), int(order[j, 1])) for j in range(k)]
            return votes, top
        if self.algo == "fvtree":
            best = self.rows.best_gains(group, self.m * k, g * self.w, h_vote * self.w, p.lam)
        else:
            best = self.rows.best_gains(group, self.m * k, g, h_vote, p.lam)
        votes = votes_from_gains(self.vote_mechanism(best)).reshape(self.m, k)
        cands: list[tuple[int, ...]] = [ref.top2(votes[:, j].tolist(), self.n_features) for j in range(k)]
        return votes, cands

    def _candidate_histograms(
        self, group: np.ndarray, k: int, cands: Sequence[tuple[int, ...]], g: np.ndarray, h: np.ndarray
    ) -> list[list[ref.NodeHistograms]]:
        """Each party's quantised original histograms of its nodes' candidates: [party][node]."""
        cand_arr = np.asarray(cands, dtype=np.int64)  # (k, C)
        features = np.tile(cand_arr, (self.m, 1))  # group party*k + j has node j's candidates
        sg, sh, sn = self.histogram_mechanism(*self.rows.candidate_histograms(group, self.m * k, features, g, h))
        shape = (self.m, k, *sn.shape[1:])
        if self.level_observer is not None:
            self.level_observer(
                LevelView(
                    self._tree,
                    self._level,
                    self._k_of_row,
                    list(cands),
                    g,
                    h,
                    (sg.reshape(shape), sh.reshape(shape), sn.reshape(shape)),
                )
            )
        qg, qh = quantise(sg.reshape(shape)), quantise(sh.reshape(shape))
        ln = sn.reshape(shape).tolist()
        return [
            [
                ref.NodeHistograms(
                    tuple(cands[j]),
                    tuple(map(tuple, qg[i][j])),
                    tuple(map(tuple, qh[i][j])),
                    tuple(map(tuple, ln[i][j])),
                )
                for j in range(k)
            ]
            for i in range(self.m)
        ]


def params_dict(params: TrainParams) -> dict[str, Any]:
    """The parameters as a plain dict (for JSON reports and saved models)."""
    return asdict(params)
