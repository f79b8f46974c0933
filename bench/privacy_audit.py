"""The empirical privacy audit: canaries in one party's rows, attacked for membership in everything the task releases,
and the epsilon lower bound at 95% confidence of Steinke, Nasr and Jagielski (``node.privacy.audit``), for random
splits and FV-tree at a claimed epsilon, next to the same audit of deliberately broken mechanisms.

The canaries are built to be found by a mechanism that leaks. The data: ``F`` features, as many as canaries, the
rows uniform in [0, 1] with a logistic label on the first two features; the requester declares every feature's range
as [0, 2]. Canary ``i`` holds 2 (the top of the declared range, where no other row is) in feature ``i`` and values
of its own in [0, 1] in the others (:func:`canary_rows`), label 1; each goes into party 0's rows with probability
1/2, independently of everything else. The attacker knows every other row (the worst case DP allows for) and reads
what the task released: the schema's ranges, the bin edges and the model. A canary's score is

* a large constant when every released range holds its values (the declared ranges hold every canary alike, so
  under the real mechanism this moves no canary against another; ranges read from the parties' rows, the leak
  restored, hold exactly the canaries that are in);
* plus, over the trees where it shares its leaf with no other canary, the leaf's released value minus the value the
  other rows alone give (each row's gradient from the released model's earlier trees), signed by the canary's own
  effect and in units of the leaf value's claimed noise: a likelihood-ratio score of the Gaussian leaf release.

The attacker guesses "in" for the quarter of canaries with the highest scores and "out" for the quarter with the
lowest; runs with independent coins pool (``node.privacy.audit.pool``). Mechanisms audited:

* ``real``: the task as the code runs it;
* ``noise-off``: random splits whose leaf releases carry no noise while the task claims the budget (the claimed
  plan's noise multiplier set to 0);
* ``range-leak``: the schema's ranges taken from the parties' pooled rows, as a requester without a declaration
  would, every mechanism otherwise as claimed.

Every run's noise is seeded from its seed (an experiment that repeats); the coins come from another stream.

    python -m bench.privacy_audit --runs 10 --epsilons 1,8 --jobs 1

The real mechanisms at a large claimed epsilon (8) show what the attack can find where the noise is small: the
bound it reaches there is the attack's power, which a claim of 1 is tested with.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec.reference import from_fixed
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.model.trees import Tree, bin_matrix, slot_widths, tree_values
from fgbdt_chain.node.privacy.audit import Audit, audit, pool
from fgbdt_chain.node.privacy.schema import Declared
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run
from fgbdt_chain.node.sim.random_split import train_random_split

CANARY_VALUE = 2.0
"""A canary's value in its own feature: the top of the declared range, above every other row (which lie in [0, 1])."""
DELTA = 1e-5
RANGE_SCORE = 1e9
"""A canary's score when every released range holds it: far above any leaf score, so ranges decide first."""
MECHANISMS: dict[str, tuple[str, ...]] = {
    "randomsplit": ("real", "noise-off", "range-leak"),
    "fvtree": ("real", "range-leak"),
}
"""The mechanisms audited per algorithm. FV-tree without noise is not audited: its leaves hold many canaries each,
so the leaf score cannot tell them apart (the histograms per node would, and are not attacked here)."""
COIN_TAG = 0xC0
"""Mixed into the coins' seed, so that the coins share no stream with the task's noise or splits."""


@dataclass(frozen=True)
class Setting:
    """One audited task: the algorithm, the claimed budget, the canaries and the federation's shape."""

    algo: str
    mechanism: str
    epsilon: float = 1.0
    canaries: int = 40
    rows: int = 300
    """Rows of every party besides the canaries."""
    parties: int = 4
    trees: int | None = None
    """None: as many as features for random splits (every feature one turn), 5 for FV-tree."""
    depth: int = 3
    bins: int = 64
    """Finer than the canaries' spacing (``1 / (canaries - 1)``), so that they can fall in distinct bins."""

    def __post_init__(self) -> None:
        if self.algo not in MECHANISMS:
            raise ValueError(f"algo must be one of {', '.join(MECHANISMS)}, got {self.algo!r}")
        if self.mechanism not in MECHANISMS[self.algo]:
            raise ValueError(f"{self.algo} audits {', '.join(MECHANISMS[self.algo])}, not {self.mechanism!r}")
        if self.canaries < 4:
            raise ValueError(f"an audit needs at least 4 canaries, got {self.canaries}")

    @property
    def tree_count(self) -> int:
        if self.trees is not None:
            return self.trees
        return self.canaries if self.algo == "randomsplit" else 5


def base_rows(n: int, features: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows uniform in [0, 1], the label logistic in the first two features."""
    X = rng.random((n, features))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-4.0 * (X[:, 0] + X[:, 1] - 1.0)))).astype(np.float64)
    return X, y


def canary_rows(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Canary ``i``: :data:`CANARY_VALUE` in feature ``i``; in every other feature ``j`` a value of its own in
    [0, 1], ``(p - 1/2) / (m - 1)`` with ``p = (i - j) mod m``, so that in each feature the canaries lie at distinct
    quantiles of the uniform rows, in distinct bins wherever the released edges are finer than ``1 / (m - 1)``
    there, and the more trees find a canary alone in its leaf (the sketch's noise decides the edges: with as many
    features as canaries and few rows, many cuts land where no row is). Label 1."""
    X = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            X[i, j] = CANARY_VALUE if i == j else (((i - j) % m) - 0.5) / (m - 1)
    return X, np.ones(m)


def leaf_ids(tree: Tree, slots: np.ndarray) -> np.ndarray:
    """Each row's leaf (node id), routed as ``Model.predict`` routes it."""
    size = 2 ** (tree.depth + 1)
    feature = np.zeros(size, dtype=np.int64)
    threshold = np.zeros(size, dtype=np.int64)
    internal = np.zeros(size, dtype=bool)
    for node_id, node in tree.nodes.items():
        if not node.is_leaf:
            feature[node_id], threshold[node_id], internal[node_id] = node.feature, node.threshold, True
    rows = np.arange(slots.shape[0])
    node_of = np.ones(slots.shape[0], dtype=np.int64)
    for _ in range(tree.depth):
        right = slots[rows, feature[node_of]] > threshold[node_of]
        node_of = np.where(internal[node_of], 2 * node_of + right, node_of)
    return node_of


def canary_scores(
    trees: list[Tree],
    known_slots: np.ndarray,
    known_y: np.ndarray,
    canary_slots: np.ndarray,
    canary_y: np.ndarray,
    lam: float,
    learning_rate: float,
    sigma_g: float,
    in_range: np.ndarray,
) -> np.ndarray:
    """Every canary's score from the released trees (module docstring): the range term, plus per tree where the
    canary is the only canary in its leaf, ``(released value - value of the other rows) * sign(canary's effect)``
    over the value's noise scale ``lr * sigma_g / (H_other + lambda)``."""
    m = canary_y.size
    score = np.where(in_range, RANGE_SCORE, 0.0)
    known_raw, canary_raw = np.zeros(known_y.size), np.zeros(m)
    for tree in trees:
        gk, hk = gradients("binary", known_y, known_raw)
        gc, hc = gradients("binary", canary_y, canary_raw)
        known_leaf, canary_leaf = leaf_ids(tree, known_slots), leaf_ids(tree, canary_slots)
        for i in range(m):
            leaf = canary_leaf[i]
            if np.sum(canary_leaf == leaf) != 1:
                continue
            here = known_leaf == leaf
            g_other, h_other = float(gk[here].sum()), float(hk[here].sum())
            base = -learning_rate * g_other / (max(h_other, 0.0) + lam)
            moved = -learning_rate * (g_other + gc[i]) / (max(h_other + hc[i], 0.0) + lam)
            released = from_fixed(tree.nodes[int(leaf)].value_fixed or 0)
            scale = learning_rate * sigma_g / (max(h_other, 0.0) + lam)
            score[i] += (released - base) * math.copysign(1.0, moved - base) / scale
        known_raw += tree_values(tree, known_slots)
        canary_raw += tree_values(tree, canary_slots)
    return score


def one_run(setting: Setting, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train one task with the canaries' coins drawn from ``seed``; return (scores, coins)."""
    m = setting.canaries
    rng = np.random.default_rng([seed, COIN_TAG])
    included = rng.random(m) < 0.5
    data = np.random.default_rng([seed, COIN_TAG, 1])
    parts_X, parts_y = zip(*(base_rows(setting.rows, m, data) for _ in range(setting.parties)), strict=True)
    cX, cy = canary_rows(m)
    known_X, known_y = np.vstack(parts_X), np.concatenate(parts_y)
    X = np.vstack([known_X, cX[included]])
    y = np.concatenate([known_y, cy[included]])
    sizes = [setting.rows] * setting.parties
    starts = np.cumsum([0, *sizes])
    parts = [np.arange(starts[p], starts[p + 1]) for p in range(setting.parties)]
    parts[0] = np.concatenate([parts[0], np.arange(known_y.size, y.size)])  # party 0 holds the canaries that are in
    test_X, test_y = base_rows(200, m, data)
    if setting.mechanism == "range-leak":
        schema = Declared.of(np.column_stack([X.min(axis=0), X.max(axis=0)]).tolist())
    else:
        schema = Declared.of([(0.0, CANARY_VALUE)] * m)
    params = TrainParams(trees=setting.tree_count, depth=setting.depth, bins=setting.bins, objective="binary")
    config = PrepConfig(
        parties=setting.parties, seed=seed, epsilon=setting.epsilon, dp_delta=DELTA, schema=schema, dp_noise="seeded"
    )
    prep = prepare(Dataset(X, y, name="audit"), Dataset(test_X, test_y, name="audit-test"), params, config, parts)
    if setting.algo == "randomsplit":
        claimed = config.leaf_privacy(params)
        mechanism = dataclasses.replace(claimed, noise_multiplier=0.0) if setting.mechanism == "noise-off" else claimed
        lam_given = params.lam if prep.lam_given is None else prep.lam_given
        result = train_random_split(
            prep.party_slots(),
            prep.party_y(),
            dataclasses.replace(prep.params, lam=lam_given),
            slot_widths(prep.edges),
            mechanism,
            seed,
            noise_seed=seed,
        )
        trees, lam, sigma_g = result.trees, result.lam, claimed.sum_noise_sd("g")
    else:
        _, model, _ = run(prep, "fvtree")
        assert model is not None
        claimed_plan = config.privacy(params)
        trees, lam = model.trees, prep.params.lam
        sigma_g = math.sqrt(setting.parties) * claimed_plan.noise_sd("g")
    low, high = prep.ranges
    in_range = np.all((cX >= low) & (cX <= high), axis=1)
    known_slots = prep.train_slots[: known_y.size]
    canary_slots = bin_matrix(np.clip(cX, low, high), prep.edges)
    scores = canary_scores(
        trees, known_slots, known_y, canary_slots, cy, lam, prep.params.learning_rate, sigma_g, in_range
    )
    return scores, included


def audit_run(setting: Setting, seed: int) -> Audit:
    """One run's audit: a quarter of the canaries guessed in, a quarter out."""
    scores, included = one_run(setting, seed)
    k = setting.canaries // 4
    return audit(scores, included, k, k, DELTA)


def task(item: tuple[Setting, int]) -> dict[str, Any]:
    setting, seed = item
    start = time.perf_counter()
    a = audit_run(setting, seed)
    return {
        **dataclasses.asdict(setting),
        "seed": seed,
        "m": a.m,
        "r": a.r,
        "v": a.v,
        "seconds": time.perf_counter() - start,
    }


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (algorithm, mechanism, epsilon): the runs pooled, their lower bound and whether it refutes the claim."""
    keys = list(dict.fromkeys((r["algo"], r["mechanism"], r["epsilon"]) for r in rows))
    out = []
    for algo, mechanism, eps in keys:
        same = [r for r in rows if (r["algo"], r["mechanism"], r["epsilon"]) == (algo, mechanism, eps)]
        pooled = pool([Audit(r["m"], r["r"], r["v"], DELTA) for r in same])
        bound = pooled.epsilon_lower_bound
        out.append(
            {
                "algo": algo,
                "mechanism": mechanism,
                "claimed_epsilon": eps,
                "runs": len(same),
                "canaries": pooled.m,
                "guesses": pooled.r,
                "right": pooled.v,
                "epsilon_lower_bound": bound,
                "flagged": bound > eps,
            }
        )
    return out


def tables(runs: list[dict[str, Any]]) -> str:
    """The pooled audits of recorded runs."""
    rows = [row for one in runs for row in one["results"]["rows"]]
    lines = [
        "| algorithm | mechanism | claimed epsilon | runs | canaries | guesses | right | epsilon lower bound (95%) "
        "| refutes the claim |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        lines.append(
            f"| {s['algo']} | {s['mechanism']} | {s['claimed_epsilon']:g} | {s['runs']} | {s['canaries']} "
            f"| {s['guesses']} | {s['right']} | {s['epsilon_lower_bound']:.3f} | {'yes' if s['flagged'] else 'no'} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="independent runs per algorithm and mechanism (seeds 0..)")
    ap.add_argument(
        "--epsilons",
        default="1",
        help="claimed budgets per party, comma separated (the broken mechanisms are audited at the first)",
    )
    ap.add_argument("--canaries", type=int, default=40, help="canaries per run (and features of the data)")
    ap.add_argument("--rows", type=int, default=300, help="rows of every party besides the canaries")
    ap.add_argument("--algos", default="randomsplit,fvtree", help="comma separated: randomsplit, fvtree")
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel processes")
    ap.add_argument("--out", help="results file (default bench/results/privacy_audit.json, bench.record)")
    args = ap.parse_args()
    algos = args.algos.split(",")
    unknown = [a for a in algos if a not in MECHANISMS]
    if unknown:
        ap.error(f"unknown algorithm {', '.join(unknown)}; choose from {', '.join(MECHANISMS)}")
    record = Run("privacy_audit", parameters_of(args), args.out)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    items = [
        (Setting(a, mech, eps, args.canaries, args.rows), seed)
        for eps in epsilons
        for a in algos
        for mech in MECHANISMS[a]
        if mech == "real" or eps == epsilons[0]
        for seed in range(args.runs)
    ]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool_:
        for row in pool_.map(task, items):
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("algo", "mechanism", "seed", "r", "v")}), file=sys.stderr)
            record.save({"rows": rows, "summary": summary(rows)}, complete=False)
    record.save({"rows": rows, "summary": summary(rows)})
    print(tables([{"results": {"rows": rows}}]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
