"""SimFL (Li, Wen, He, "Practical Federated Gradient Boosting Decision Trees", AAAI 2020): similarity-weighted
gradient boosting over p-stable LSH, as a baseline in the same harness as FV-tree.

**Preprocessing (Algorithm 1).** Every party hashes its rows with the same ``L = min(40, d - 1)`` p-stable functions
``floor((a . x + b) / r)`` (``a`` Gaussian, ``b`` uniform in ``[0, r)``, ``r = 4``); the hash tables are pooled
(the paper's AllReduce), and for each row of party ``i`` and each other party ``m`` the row of ``m`` sharing the
most hash values is its similar instance (ties: uniformly at random).

**Training (Algorithm 2, Eq. 4).** Trees are built by the parties in turn; the party building a tree replaces each
of its rows' gradient and hessian by the sums over the rows similar to it: its own, plus every other party's rows
whose similar instance in this party it is (each other party sends these sums per row). The tree is grown on the
party's rows only (``node.baselines.local_trees``) and shared.

**Where this departs from the paper, and why.**
- Turns: "each party trains a number of trees sequentially" is read as consecutive blocks, party ``m`` building
  trees ``m T / M`` to ``(m + 1) T / M - 1``, as TFL's framework passes the model from party to party
  (``turns="blocks"``, the default); ``turns="round_robin"`` (party ``t mod M`` builds tree ``t``) is the other
  reading, measured beside it in ``bench.seeds``.
- Scale: the paper hashes LIBSVM sets that are already scaled, where ``r = 4`` means about one standard deviation of
  ``a . x``. On raw data (amounts in the hundred thousands next to ratios) one column would decide every bucket, so
  each feature is divided by its spread read from the public bin edges (the distance between the edges nearest its
  quartiles, over 1.349, i.e. the standard deviation of a normal column; 1 where the edges do not give a spread, as
  for one-hot columns). On the paper's sets this leaves the values as they were, up to a shift, which LSH ignores
  (it moves every ``a . x`` alike). A missing value is hashed at the feature's median edge.
- Trees are grown on the federation's bins with the project's matched LightGBM parameters (the paper uses
  ThunderGBM on raw values), so that SimFL, FV-tree and the centralized baseline differ only in what they share.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fgbdt_chain.node.baselines.local_trees import fit_tree, party_dataset
from fgbdt_chain.node.baselines.seed_systems import SeedInputs, SeedResult
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.model.trees import Tree, tree_values

WINDOW = 4.0
"""The paper's LSH window r."""
MAX_TABLES = 40
"""The paper's cap on the number of hash functions: L = min(40, d - 1) (Theorem 1 needs L < d)."""
REAL_BYTES = 4
"""The paper's communication model: 4 bytes per real number (section 5.3)."""


TURNS = ("blocks", "round_robin")
"""How the parties take turns building trees (module docstring)."""


def builder_of(tree: int, trees: int, parties: int, turns: str) -> int:
    """The party that builds ``tree`` of ``trees``: consecutive blocks of ``trees / M`` (the first ``trees mod M``
    parties one more), or round robin."""
    if turns == "round_robin":
        return tree % parties
    if turns != "blocks":
        raise ValueError(f"unknown turns {turns!r}; choose one of {', '.join(TURNS)}")
    base, extra = divmod(trees, parties)
    cut = extra * (base + 1)
    return tree // (base + 1) if tree < cut else extra + (tree - cut) // base


def lsh_scale(edges: np.ndarray) -> tuple[float, float]:
    """A feature's (centre, spread) from its public bin edges: the median edge, and the distance between the edges
    nearest the quartiles over 1.349 (1.0 when the edges give no spread)."""
    e = np.asarray(edges, dtype=np.float64)
    if e.size == 0:
        return 0.0, 1.0
    centre = float(e[e.size // 2])
    if e.size < 3:
        return centre, 1.0
    q1, q3 = e[(e.size + 1) // 4 - 1], e[(3 * (e.size + 1)) // 4 - 1]
    spread = float(q3 - q1) / 1.349
    return centre, spread if spread > 0 else 1.0


def lsh_coordinates(X: np.ndarray, edges: list[np.ndarray] | tuple[np.ndarray, ...]) -> np.ndarray:
    """The values as hashed: each feature over its spread, a missing value at its median edge."""
    X = np.asarray(X, dtype=np.float64)
    out = np.empty_like(X)
    for f, e in enumerate(edges):
        centre, spread = lsh_scale(e)
        col = np.where(np.isnan(X[:, f]), centre, X[:, f])
        out[:, f] = col / spread
    return out


def hash_functions(features: int, seed: int, window: float = WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """The shared p-stable functions (every party draws the same from the task's seed): ``a`` (features x L) from
    the normal (2-stable) distribution and ``b`` uniform in ``[0, r)``."""
    if features < 2:
        raise ValueError(f"SimFL hashes with L = d - 1 >= 1 functions: it needs at least 2 features, got {features}")
    tables = min(MAX_TABLES, features - 1)
    rng = np.random.default_rng([seed, 0x51F1])
    return rng.normal(size=(features, tables)), rng.uniform(0.0, window, size=tables)


def signatures(Z: np.ndarray, a: np.ndarray, b: np.ndarray, window: float = WINDOW) -> np.ndarray:
    """Every row's L hash values."""
    return np.floor((Z @ a + b) / window).astype(np.int64)


@njit(cache=True, nogil=True)
def _first_at_least(keys: np.ndarray, key: np.int64) -> int:  # pragma: no cover - compiled
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _match(  # pragma: no cover - compiled
    rep: np.ndarray,
    keys: np.ndarray,
    order: np.ndarray,
    starts: np.ndarray,
    grouped: np.ndarray,
    uniform: np.ndarray,
    n_to: int,
) -> np.ndarray:
    """For each distinct signature ``rep[u]`` of the rows ``grouped[starts[u]:starts[u + 1]]``: count, over the L
    tables, the target rows in the same bucket (``keys[l]`` sorted, ``order[l]`` their rows), and give each of
    those rows one of the most-counted targets, chosen by its uniform draw."""
    tables = rep.shape[1]
    counts = np.zeros(n_to, np.int64)
    touched = np.empty(n_to, np.int64)
    best_rows = np.empty(n_to, np.int64)
    out = np.empty(grouped.shape[0], np.int64)
    for u in range(rep.shape[0]):
        nt = 0
        for t in range(tables):
            key = rep[u, t]
            k = _first_at_least(keys[t], key)
            while k < n_to and keys[t, k] == key:
                idx = order[t, k]
                if counts[idx] == 0:
                    touched[nt] = idx
                    nt += 1
                counts[idx] += 1
                k += 1
        best, nb = 0, 0
        for j in range(nt):
            c = counts[touched[j]]
            if c > best:
                best, nb = c, 0
            if c == best:
                best_rows[nb] = touched[j]
                nb += 1
        for r in range(starts[u], starts[u + 1]):
            row = grouped[r]
            if nb == 0:  # no bucket shared: every target ties at zero
                out[row] = min(int(uniform[row] * n_to), n_to - 1)
            else:
                out[row] = best_rows[min(int(uniform[row] * nb), nb - 1)]
        for j in range(nt):
            counts[touched[j]] = 0
    return out


def most_similar(sig_from: np.ndarray, sig_to: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For every row of ``sig_from``, the row of ``sig_to`` with the most identical hash values (ties at random).

    Rows with the same signature share their counts, so each distinct signature is counted once."""
    if sig_to.shape[0] == 0:
        raise ValueError("a party without rows has no similar instances")
    order = np.argsort(sig_to, axis=0, kind="stable").T.copy()
    keys = np.take_along_axis(sig_to, order.T, axis=0).T.copy()
    rep, inverse = np.unique(sig_from, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    grouped = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[grouped], np.arange(rep.shape[0] + 1))
    uniform = np.asarray(rng.random(sig_from.shape[0]), dtype=np.float64)
    return _match(rep.astype(np.int64), keys, order, starts.astype(np.int64), grouped, uniform, sig_to.shape[0])


def similarity(party_sigs: list[np.ndarray], seed: int) -> dict[tuple[int, int], np.ndarray]:
    """``S[(i, m)]``: for each row of party ``i``, its similar row in party ``m`` (``i != m``)."""
    out = {}
    for i, sig_i in enumerate(party_sigs):
        for m, sig_m in enumerate(party_sigs):
            if i != m:
                out[(i, m)] = most_similar(sig_i, sig_m, np.random.default_rng([seed, 0x51F2, i, m]))
    return out


def weighted_gradients(
    m: int, g: list[np.ndarray], h: list[np.ndarray], similar: dict[tuple[int, int], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 4's ``G_mq``, ``H_mq`` for party ``m``'s rows: its own gradient plus, from every other party ``i``, the
    sums of the gradients of ``i``'s rows whose similar instance in ``m`` is ``q`` (what ``i`` sends to ``m``)."""
    G, H = g[m].astype(np.float64).copy(), h[m].astype(np.float64).copy()
    for i in range(len(g)):
        if i != m:
            G += np.bincount(similar[(i, m)], weights=g[i], minlength=G.size)
            H += np.bincount(similar[(i, m)], weights=h[i], minlength=H.size)
    return G, H


def train_simfl(inputs: SeedInputs, *, window: float = WINDOW, turns: str = "blocks") -> SeedResult:
    """SimFL on the harness's parties: preprocessing, then ``params.trees`` trees built in turn with weighted
    gradients. Communication (the paper's section 5.3, 4-byte reals): a party sends ``8 n_m`` bytes of sums to the
    builder ``m`` of each tree it does not build and ``8 (2^D - 1)`` bytes to each other party for each tree it
    builds; the preprocessing (``8 N L`` per party in the paper's AllReduce) is in ``details``."""
    p = inputs.params
    parties = len(inputs.party_slots)
    if parties < 1 or len(inputs.party_X) != parties or len(inputs.party_y) != parties:
        raise ValueError("need each party's raw rows, slots and labels, and at least one party")
    features = int(inputs.party_X[0].shape[1])
    a, b = hash_functions(features, inputs.seed, window)
    sigs = [signatures(lsh_coordinates(X, list(inputs.edges)), a, b, window) for X in inputs.party_X]
    similar = similarity(sigs, inputs.seed)
    data = [party_dataset(s, p) for s in inputs.party_slots]
    scores = [np.zeros(len(y)) for y in inputs.party_y]
    trees: list[Tree] = []
    sent = np.zeros(parties)
    tree_bytes = 2 * REAL_BYTES * (2**p.depth - 1)
    for t in range(p.trees):
        m = builder_of(t, p.trees, parties, turns)
        grads = [gradients(p.objective, y, s) for y, s in zip(inputs.party_y, scores, strict=True)]
        G, H = weighted_gradients(m, [g for g, _ in grads], [h for _, h in grads], similar)
        tree = fit_tree(data[m], G, H, p, seed=inputs.seed + t, threads=inputs.threads)
        trees.append(tree)
        for i, slots in enumerate(inputs.party_slots):
            scores[i] += tree_values(tree, slots)
            sent[i] += tree_bytes * (parties - 1) if i == m else 2 * REAL_BYTES * len(inputs.party_y[m])
    test = np.zeros(inputs.test_slots.shape[0])
    for tree in trees:
        test += tree_values(tree, inputs.test_slots)
    pred = 1.0 / (1.0 + np.exp(-test)) if p.objective == "binary" else test
    rows = sum(len(y) for y in inputs.party_y)
    return SeedResult(
        test_pred=pred,
        comm_bytes_per_party_per_tree=[float(s) / p.trees for s in sent],
        comm_formula="SimFL section 5.3: 8 n_m bytes of similarity-weighted (g, h) sums to the builder of each "
        "tree, 8 (2^D - 1) bytes per tree built to each other party (4-byte reals)",
        trees=trees,
        details={
            "hash_tables": int(a.shape[1]),
            "window": window,
            "turns": turns,
            "preprocessing_bytes_per_party": 2 * REAL_BYTES * rows * int(a.shape[1]),
            "paper_bytes_per_tree_total": 2 * REAL_BYTES * (rows + (2**p.depth - 1) * (parties - 1)),
        },
    )
