"""FederBoost, horizontal (Tian et al., "FederBoost: Private Federated Learning for GBDT", section 4.2): buckets
from quantiles found by bisection over secure-aggregated counts (Protocol 3), then trees grown from secure-aggregated
gradient histograms of every feature (Protocols 4 and 5), as a baseline in the same harness as FV-tree.

**Buckets (Protocol 3).** For each feature and each of the ``q - 1`` quantiles (``q`` = the task's bins), the active
party bisects between the feature's smallest and largest values: every party counts its values below the candidate,
the counts are summed by secure aggregation (``node.privacy.secure_agg``), and the candidate moves up or down until it
stands where ``k n / q`` of all values lie below it. All features' quantiles are searched at once, one secure sum per
bisection round. A feature with fewer distinct values than buckets ends with several quantiles at the same value;
they are merged, which gives a bucket per value (the paper's rule for discrete features). Missing values keep a
bucket of their own (slot 0), which, as in FV-tree, sorts first and so goes left.

**Trees (Protocol 4).** Level by level, every party computes, for each open node, each feature and each bucket,
its sums of g and h and its row count; the vectors are scaled to integers (``secure_agg.fraction_bits``: a power of
two that no sum can overflow, from a bound on |g| and |h| the parties agree on per tree) and summed by secure
aggregation. The active party finds each node's best split on the sums (the gain ``G_L^2 / (H_L + lambda) +
G_R^2 / (H_R + lambda) - G^2 / (H + lambda)``, at least ``min_rows`` rows on each side) and sends it to all;
nodes without a positive gain become leaves worth ``-lr G / (H + lambda)``. Without the masks this is exactly a
centralized histogram GBDT on FederBoost's buckets (a test checks it against LightGBM on the same buckets).

**Departures.** The value range the bisection starts from is the parties' smallest and largest values (the paper
takes "the smallest and largest possible values" as known); the bisection runs a fixed ``BISECTION_ROUNDS`` rounds
(the paper stops when the count is met, which a feature with ties may never do exactly). The trees are on
FederBoost's buckets, not on the federation's bins, so ``trees`` is None in the harness and the test rows are
predicted with FederBoost's own buckets.
"""

from __future__ import annotations

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines.seed_systems import SeedInputs, SeedResult
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.model.trees import Node, Tree, bin_matrix, tree_values
from fgbdt_chain.node.privacy.secure_agg import SecureSum, fraction_bits, to_fixed

BISECTION_ROUNDS = 48
"""Bisection rounds per quantile search: the range shrinks by 2^48, below a double's resolution of most ranges."""
SPLIT_BYTES = 16
"""The split the active party sends per node (feature and bucket, two 64-bit words), as counted in the traffic."""


def quantile_edges(party_X: list[np.ndarray], buckets: int, agg: SecureSum) -> list[np.ndarray]:
    """Protocol 3 for every feature at once: the bucket edges, from secure sums of the parties' counts only."""
    if buckets < 2:
        raise ValueError(f"FederBoost needs at least 2 buckets, got {buckets}")
    features = party_X[0].shape[1]
    # each party sorts its values once; its count below a candidate is then a binary search
    columns = [[np.sort(X[:, f][~np.isnan(X[:, f])]) for f in range(features)] for X in party_X]
    totals = agg.sum([np.array([c.size for c in cols], dtype=np.int64) for cols in columns])  # values per feature
    lows = np.array(
        [min((c[0] for c in (cols[f] for cols in columns) if c.size), default=np.nan) for f in range(features)]
    )
    highs = np.array(
        [max((c[-1] for c in (cols[f] for cols in columns) if c.size), default=np.nan) for f in range(features)]
    )
    k = np.arange(1, buckets)
    target = totals[:, None] * k[None, :] / buckets  # features x (q - 1)
    lo = np.repeat(lows[:, None], buckets - 1, axis=1).astype(np.float64)
    hi = np.repeat(highs[:, None], buckets - 1, axis=1).astype(np.float64)
    for _ in range(BISECTION_ROUNDS):
        mid = (lo + hi) / 2
        counts = [
            np.concatenate([np.searchsorted(c, mid[f], side="left") for f, c in enumerate(cols)]) for cols in columns
        ]
        below = agg.sum([c.astype(np.int64) for c in counts]).reshape(features, buckets - 1)
        enough = below >= target
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid)
    edges = []
    for f in range(features):
        if not np.isfinite(lows[f]) or totals[f] == 0:
            edges.append(np.zeros(0))
            continue
        e = np.unique(hi[f])
        edges.append(e[(e >= lows[f]) & (e < highs[f])])
    return edges


def _histograms(
    slots: np.ndarray, node_pos: np.ndarray, g: np.ndarray, h: np.ndarray, nodes: int, width: int
) -> np.ndarray:
    """One party's (g, h, count) sums per open node, feature and bucket: shape (3, nodes, features, width)."""
    features = slots.shape[1]
    keep = node_pos >= 0
    idx = (node_pos[keep, None] * features + np.arange(features)[None, :]) * width + slots[keep].astype(np.int64)
    size = nodes * features * width
    flat = idx.ravel()
    out = np.empty((3, size))
    out[0] = np.bincount(flat, np.repeat(g[keep], features), minlength=size)
    out[1] = np.bincount(flat, np.repeat(h[keep], features), minlength=size)
    out[2] = np.bincount(flat, minlength=size)
    return out.reshape(3, nodes, features, width)


def _best_splits(hist: np.ndarray, params: TrainParams) -> list[tuple[float, int, int]]:
    """Per node: (gain, feature, threshold bucket) of the best split with ``min_rows`` on each side (gain 0 and
    feature -1 when none gains)."""
    lam = params.lam
    cum = np.cumsum(hist, axis=3)  # left sums for threshold t = bucket index
    total = cum[:, :, :, -1:]
    gl, hl, nl = cum[0][..., :-1], cum[1][..., :-1], cum[2][..., :-1]
    gt, ht, nt = total[0], total[1], total[2]
    gr, hr, nr = gt - gl, ht - hl, nt - nl
    gain = gl**2 / (hl + lam) + gr**2 / (hr + lam) - gt**2 / (ht + lam)
    gain = np.where((nl >= params.min_rows) & (nr >= params.min_rows), gain, -np.inf)
    out = []
    for node in range(hist.shape[1]):
        flat = int(np.argmax(gain[node]))
        f, t = divmod(flat, gain.shape[2])
        best = float(gain[node, f, t])
        out.append((best, f, t) if best > 0 else (0.0, -1, -1))
    return out


def grow_tree(
    party_slots: list[np.ndarray],
    party_g: list[np.ndarray],
    party_h: list[np.ndarray],
    width: int,
    params: TrainParams,
    agg: SecureSum,
) -> Tree:
    """Protocol 4 for one tree: level by level, secure sums of every open node's histograms, the best splits."""
    parties = len(party_slots)
    bound = max(float(np.abs(g).sum()) for g in party_g) * parties + max(float(h.sum()) for h in party_h) * parties
    bits = fraction_bits(bound)
    node_id = [np.ones(len(g), dtype=np.int64) for g in party_g]
    open_nodes = [1]
    nodes: dict[int, Node] = {}
    for level in range(params.depth + 1):
        pos = {n: i for i, n in enumerate(open_nodes)}
        lookup = np.full(2 ** (level + 1), -1, dtype=np.int64)
        lookup[open_nodes] = np.arange(len(open_nodes))
        local = [
            _histograms(s, lookup[nid], g, h, len(open_nodes), width)
            for s, nid, g, h in zip(party_slots, node_id, party_g, party_h, strict=True)
        ]
        if level == params.depth:  # the last level's nodes are leaves: only their totals are needed
            local = [x[:, :, :1, :] for x in local]
        vectors = [np.concatenate([to_fixed(x[:2], bits).ravel(), x[2].astype(np.int64).ravel()]) for x in local]
        summed = agg.sum(vectors)
        half = 2 * local[0][0].size
        hist = np.empty((3, *local[0].shape[1:]))
        hist[:2] = summed[:half].reshape(2, *local[0].shape[1:]) / 2.0**bits
        hist[2] = summed[half:].reshape(local[0].shape[1:])
        splits = _best_splits(hist, params) if level < params.depth else [(0.0, -1, -1)] * len(open_nodes)
        next_open = []
        for n, (gain, f, t) in zip(open_nodes, splits, strict=True):
            G, H, count = (float(hist[q, pos[n], 0].sum()) for q in range(3))
            if f < 0:
                nodes[n] = Node.leaf(ref.to_fixed(-params.learning_rate * G / (H + params.lam)), int(count))
            else:
                nodes[n] = Node.split(f, t, ref.to_fixed(gain), int(count))
                next_open += [2 * n, 2 * n + 1]
        for s, nid in zip(party_slots, node_id, strict=True):
            for n in open_nodes:
                node = nodes[n]
                if not node.is_leaf:
                    here = nid == n
                    nid[here] = 2 * n + (s[here, node.feature] > node.threshold)
        if not next_open:
            break
        open_nodes = next_open
    return Tree(nodes)


def train_federboost(inputs: SeedInputs) -> SeedResult:
    """Horizontal FederBoost on the harness's parties, ``params.bins`` buckets per feature. Communication: the
    masked vectors each party sends (8 bytes an entry) per tree, and the splits the active party (party 0)
    broadcasts; the bucket construction's traffic is in ``details``."""
    p = inputs.params
    parties = len(inputs.party_X)
    if parties < 1 or len(inputs.party_y) != parties:
        raise ValueError("need each party's raw rows and labels, and at least one party")
    agg = SecureSum(parties, seed=inputs.seed)
    edges = quantile_edges([np.asarray(X, dtype=np.float64) for X in inputs.party_X], p.bins, agg)
    setup_bytes = agg.bytes_sent.copy()
    slots = [bin_matrix(X, edges) for X in inputs.party_X]
    width = max(len(e) for e in edges) + 2
    scores = [np.zeros(len(y)) for y in inputs.party_y]
    trees = []
    split_bytes = 0
    for _ in range(p.trees):
        grads = [gradients(p.objective, y, s) for y, s in zip(inputs.party_y, scores, strict=True)]
        tree = grow_tree(slots, [g for g, _ in grads], [h for _, h in grads], width, p, agg)
        trees.append(tree)
        split_bytes += SPLIT_BYTES * len(tree.internal_ids()) * (parties - 1)
        for i, s in enumerate(slots):
            scores[i] += tree_values(tree, s)
    test_slots = bin_matrix(inputs.test_X, edges)
    raw = np.zeros(test_slots.shape[0])
    for tree in trees:
        raw += tree_values(tree, test_slots)
    sent = (agg.bytes_sent - setup_bytes).astype(np.float64)
    sent[0] += split_bytes
    return SeedResult(
        test_pred=1.0 / (1.0 + np.exp(-raw)) if p.objective == "binary" else raw,
        comm_bytes_per_party_per_tree=[float(s) / p.trees for s in sent],
        comm_formula="masked (g, h, count) histograms of every open node, feature and bucket, 8 bytes an entry, "
        "plus the splits party 0 sends to the others",
        trees=None,
        details={
            "buckets": [len(e) + 1 for e in edges],
            "bisection_rounds": BISECTION_ROUNDS,
            "setup_bytes_per_party": [int(b) for b in setup_bytes],
            "secure_sums": agg.rounds,
            "edges": [e.tolist() for e in edges],
        },
    )
