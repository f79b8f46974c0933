"""Data manipulation: how much a party gains by changing its rows before it joins, and what honest data earns.

A greedy party (the holder, party 1) duplicates its rows, adds synthetic rows near its own (jittered copies or draws
from its fitted distribution), joins as several parties, or both at once: several parties each holding a copy of its
rows (``node.attacks.data``); its sketch, PSD, histograms and carry are then consistent and nothing refuses them.
Each grid point trains ``fgbdt_chain.train`` on a random sample of the data set's training rows split over M parties
(the simulator's partition at theta), honest and with every manipulation (``--kinds``), and reports the change of
the holder's reward share (combined over its identities) in points, with the change of the test metric and, for the
clones, the floor that equal treatment of parties sets (``clone_floor``). The honest ladder gives the holder fewer
rows (half, quarter), noisier labels (10, 30, 50% flipped; for a regression label, that share replaced by other rows'
labels) or uninformative rows (every feature shuffled among its rows), and reports the share each earns, with the
honest federation's test metric next to LightGBM's with its defaults on the same rows. ``--contribution`` chooses the
measure played and ``--alpha`` split Shapley's vote weight; ``--noisy-party J`` gives another party coin-flip labels
in every run of a point; the page ends with every measure's worst grid cell (``across_runs``).

    python -m bench.manipulation           # all shared data sets, M 4, k 2 3, s 2 3, theta 0.5, 3 seeds (minutes)
    python -m bench.manipulation --full    # + synthetic stress, heavy and claims data, M 2 4 8, k 2 3 5, s 2 3 4,
                                           # theta 0.5 0.8, 5 seeds
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.datasets import DATASETS, load, objective
from bench.record import Run, parameters_of
from bench.stats import mean_se, seeds_of
from fgbdt_chain.ledger.spec.parameters import parameter
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.data import (
    CLONE_KINDS,
    DATA_ATTACK_KINDS,
    IDENTITY_KINDS,
    DataAttack,
    DataAttackKind,
    apply_to_parties,
    holder_share,
)
from fgbdt_chain.node.baselines.centralized import train_defaults
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.sim.engine import train
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, partition

HOLDER = 1
COPY_KINDS: tuple[DataAttackKind, ...] = ("duplicate", "jitter", "fitted")
"""Manipulations that take the copies factor k; ``split`` and ``clone`` take the identities s."""
LADDER = ("full", "half", "quarter", "flip10", "flip30", "flip50", "shuffled")
"""The honest ladder: the holder's own rows as they are, fewer of them, noisier labels, features that say nothing."""
DEFAULT_MEASURE = str(parameter("contribution").default)
"""The measure tasks use unless they choose another (``ledger.spec.parameters``)."""
ALPHA = float(parameter("alpha").default)
"""The voting contribution's default weight: runs at another are another measure to ``across_runs``."""
TITLE_KEYS = {"contribution": "shapley"}
"""The benchmarks page names the measure of every group of runs (runs made before the option existed measured split
Shapley, then the only measure)."""
GOAL_POINTS = 0.5
"""The most a manipulation may raise the holder's share on average, in points, for the measure to count as robust."""
FULL = {
    "datasets": ",".join([*DATASETS, "stress", "heavy", "claims"]),
    "parties": "2,4,8",
    "factors": "2,3,5",
    "splits": "2,3,4",
    "thetas": "0.5,0.8",
    "seeds": "0-4",
}
_LADDER_TAG = 0x1ADD
_NOISY_TAG = 0x0C0F


def ladder_rows(rung: str, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The holder's rows for a rung of the honest ladder (``LADDER``)."""
    n = len(y)
    if rung == "full":
        return X, y
    if rung in ("half", "quarter"):
        keep = np.sort(rng.permutation(n)[: n // (2 if rung == "half" else 4)])
        return X[keep], y[keep]
    if rung.startswith("flip"):
        hit = rng.permutation(n)[: round(int(rung[4:]) / 100 * n)]
        out = y.copy()
        binary = np.isin(np.unique(y), (0.0, 1.0)).all()
        out[hit] = 1.0 - y[hit] if binary else y[rng.permutation(hit)]
        return X, out
    if rung == "shuffled":
        return np.column_stack([X[rng.permutation(n), j] for j in range(X.shape[1])]), y
    raise ValueError(f"unknown ladder rung {rung!r}")


def clone_floor(parties: int, identities: int) -> float:
    """What ``identities`` parties of one population earn together beside ``parties - 1`` others of it, less what one
    earns among ``parties``, in points: ``clone``'s gain under any measure that treats equal parties equally and
    cannot tell the clones' jittered copies from new rows (the threat model's floor)."""
    return 100.0 * (identities / (parties - 1 + identities) - 1.0 / parties)


def metric(report: dict[str, Any]) -> float:
    return float(report["test_error"] if "test_error" in report else report["test_rmse"])


def measure_point(
    name: str,
    parties: int,
    theta: float,
    seed: int,
    args: argparse.Namespace,
    fit: Callable[[list[tuple[np.ndarray, np.ndarray]], str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Every manipulation and ladder rung at one grid point: the holder's share and the test metric, each against the
    honest run's."""
    train_set, test = load(name, seed)
    rng = np.random.default_rng([seed, 0x5A])
    keep = np.sort(rng.permutation(train_set.n_rows)[: min(args.rows, train_set.n_rows)])
    pool = Dataset(train_set.X[keep], train_set.y[keep], train_set.feature_names, name)
    parts = partition(pool, PrepConfig(parties=parties, theta=theta, seed=seed))
    pairs = [(pool.X[p], pool.y[p]) for p in parts]
    if args.noisy_party is not None:  # another party whose labels are coin flips, in every run of the point
        if not 0 <= args.noisy_party < parties or args.noisy_party == HOLDER:
            raise ValueError(f"--noisy-party must be a party other than the holder {HOLDER}, below M = {parties}")
        X, y = pairs[args.noisy_party]
        pairs[args.noisy_party] = ladder_rows("flip50", X, y, np.random.default_rng([seed, _NOISY_TAG]))
    valid = (test.X, test.y)
    point = {"dataset": name, "parties": parties, "theta": theta, "seed": seed}

    def trained(ps: list[tuple[np.ndarray, np.ndarray]], identities: Sequence[int]) -> tuple[float, float]:
        report = fit([*ps, valid], objective(name))  # the last pair is the test set (fitter)
        return holder_share(report["contributions"], identities), metric(report)

    honest_share, honest_metric = trained(pairs, [HOLDER])
    lgb = lightgbm_metric(pool, test, objective(name), seed)
    point = {**point, "lightgbm_metric": lgb}
    out = []
    kinds = args.kinds.split(",")
    attacks: list[tuple[DataAttackKind, int]] = [(k, int(f)) for k in COPY_KINDS for f in args.factors.split(",")]
    attacks += [(kind, int(s)) for kind in IDENTITY_KINDS for s in args.splits.split(",")]
    attacks = [(kind, factor) for kind, factor in attacks if kind in kinds]
    for kind, factor in attacks:
        if kind in IDENTITY_KINDS and parties + factor - 1 > args.max_parties:
            continue
        manipulated, identities = apply_to_parties(pairs, HOLDER, DataAttack(kind, factor, seed=seed))
        share, quality = trained(manipulated, identities)
        out.append(
            {
                **point,
                "kind": kind,
                "factor": factor,
                "share": share,
                "honest_share": honest_share,
                "points": 100.0 * (share - honest_share),
                "metric": quality,
                "honest_metric": honest_metric,
            }
        )
    X, y = pairs[HOLDER]
    for rung in LADDER:
        rows = ladder_rows(rung, X, y, np.random.default_rng([seed, _LADDER_TAG, LADDER.index(rung)]))
        share, quality = (
            (honest_share, honest_metric)
            if rung == "full"
            else trained([*pairs[:HOLDER], rows, *pairs[HOLDER + 1 :]], [HOLDER])
        )
        out.append({**point, "kind": "ladder", "rung": rung, "share": share, "metric": quality})
    return out


def lightgbm_metric(pool: Dataset, test: Dataset, loss: str, seed: int) -> float:
    """The test metric of LightGBM with its defaults on every sampled training row (raw values, its own bins)."""
    params = TrainParams(objective=loss)  # type: ignore[arg-type]
    booster = train_defaults(pool.X, pool.y, params, seed=seed)
    return metric(evaluate(params, test.y, np.asarray(booster.predict(np.asarray(test.X, dtype=np.float64)))))


def fitter(args: argparse.Namespace) -> Callable[[list[tuple[np.ndarray, np.ndarray]], str], dict[str, Any]]:
    """``fgbdt_chain.train`` at the run's shape; the last pair it is given is the validation set."""

    def fit(pairs: list[tuple[np.ndarray, np.ndarray]], loss: str) -> dict[str, Any]:
        *parties, valid = pairs
        params = {
            "num_trees": args.trees,
            "max_depth": args.depth,
            "seed": 0,
            "objective": loss,
            "contribution": args.contribution,
            "alpha": args.alpha,
        }
        model = train(params, parties, valid_set=valid)
        assert model.report is not None
        return model.report

    return fit


# ------------------------------------------------------------------------------------------------------- the tables


def _pm(values: list[float], digits: int = 2, sign: str = "+") -> str:
    if not values:
        return "-"
    m, se = mean_se(values)
    return f"{m:{sign}.{digits}f} ± {se:.{digits}f}"


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown: the holder's share change per manipulation (mean ± standard error over every data set, M, theta and
    seed of the runs, then per data set), the test metric's change, and the honest ladder."""
    points = [p for r in runs for p in r["results"]["points"]]
    attacks = [p for p in points if p["kind"] != "ladder"]
    datasets = list(dict.fromkeys(p["dataset"] for p in points))
    by: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for p in attacks:
        by[(p["kind"], p["factor"])].append(p)
    head = "| manipulation | all: share change (points) | " + " | ".join(datasets) + " | test metric change |"
    lines = [
        "Change of the holder's reward share in points (mean ± standard error over the grid points), per "
        "manipulation; `split` and `clone` give the holder's combined share over its identities. Test metric: error "
        "rate or RMSE, manipulated minus honest.",
        "",
        head,
        "|" + "---|" * (3 + len(datasets)),
    ]
    for (kind, factor), ps in sorted(by.items(), key=lambda kv: (DATA_ATTACK_KINDS.index(kv[0][0]), kv[0][1])):
        cells = [_pm([p["points"] for p in ps if p["dataset"] == d]) for d in datasets]
        change = _pm([p["metric"] - p["honest_metric"] for p in ps], 4)
        label = f"{kind} k={factor}" if kind not in IDENTITY_KINDS else f"{kind} s={factor}"
        lines.append(f"| {label} | {_pm([p['points'] for p in ps])} | " + " | ".join(cells) + f" | {change} |")
    worst = max((mean_se([p["points"] for p in ps])[0] for ps in by.values()), default=float("nan"))
    cloned: dict[int, list[dict[str, Any]]] = defaultdict(list)  # both clone kinds' points, by identities
    for (kind, factor), ps in by.items():
        if kind in CLONE_KINDS:
            cloned[factor] += ps
    floors = [
        f"s = {factor}: {np.mean([clone_floor(p['parties'], factor) for p in ps]):+.2f}"
        for factor, ps in sorted(cloned.items())
    ]
    if floors:
        lines += [
            "",
            "Equal treatment's floor for `clone` and `fresh-clone` (what s parties of the holder's population earn "
            "beside the others, 100 (s / (M - 1 + s) - 1 / M) points, averaged over the grid's M): "
            + ", ".join(floors)
            + ".",
        ]
    lines += [
        "",
        f"Largest mean gain: {worst:+.2f} points (goal: at most {GOAL_POINTS} points).",
        "",
        "Honest ladder: the holder's share in percent (mean ± standard error) for each quality of its own data.",
        "",
        "| rung | all | " + " | ".join(datasets) + " |",
        "|" + "---|" * (2 + len(datasets)),
    ]
    ladder = [p for p in points if p["kind"] == "ladder"]
    for rung in LADDER:
        ps = [p for p in ladder if p["rung"] == rung]
        cells = [_pm([100 * p["share"] for p in ps if p["dataset"] == d], sign="") for d in datasets]
        lines.append(f"| {rung} | {_pm([100 * p['share'] for p in ps], sign='')} | " + " | ".join(cells) + " |")
    scored = [p for p in attacks if "lightgbm_metric" in p]
    if scored:
        lines += [
            "",
            "Test metric (error rate or RMSE, mean ± standard error) of the honest federation and of LightGBM with its "
            "defaults on the same sampled rows.",
            "",
            "| | " + " | ".join(datasets) + " |",
            "|" + "---|" * (1 + len(datasets)),
        ]
        first = {(p["dataset"], p["parties"], p["theta"], p["seed"]): p for p in scored}.values()
        for label, key in (("federation", "honest_metric"), ("LightGBM defaults", "lightgbm_metric")):
            cells = [_pm([p[key] for p in first if p["dataset"] == d], 4, "") for d in datasets]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def across_runs(runs: list[dict[str, Any]]) -> str:
    """Markdown: each measure's largest mean gain over the grid cells it was run on (a cell: a manipulation and its
    factor at one data set, M, theta and row count; the mean over the cell's seeds), and over the cells the default
    measure was also run on, next to the default's there, so that measures are compared on the same cells. Runs
    beside a coin-flip party are left out."""
    seeds: dict[str, dict[tuple[Any, ...], dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        params = run.get("parameters", {})
        if params.get("noisy_party") is not None:
            continue
        measure = str(params.get("contribution", "shapley"))
        if params.get("alpha", ALPHA) != ALPHA:
            measure += f", alpha {params['alpha']}"
        for p in run["results"]["points"]:
            if p["kind"] != "ladder":
                cell = (p["kind"], p["factor"], p["dataset"], p["parties"], p["theta"], params.get("rows"))
                seeds[measure][cell][p["seed"]] = p["points"]
    cells = {m: {c: float(np.mean(list(v.values()))) for c, v in by.items() if len(v) > 1} for m, by in seeds.items()}
    if len(cells) < 2 or DEFAULT_MEASURE not in cells:
        return ""

    def worst(values: dict[tuple[Any, ...], float], among: set[tuple[Any, ...]]) -> str:
        chosen = {c: v for c, v in values.items() if c in among}
        if not chosen:
            return "-"
        cell, value = max(chosen.items(), key=lambda kv: kv[1])
        kind, factor, dataset, parties, theta, _ = cell
        return f"{value:+.2f} ({kind} {factor}, {dataset}, M = {parties}, theta {theta})"

    default = DEFAULT_MEASURE
    lines = [
        "### Every measure's worst case",
        "",
        "The largest mean gain over seeds (at least two) in any grid cell (a manipulation and factor at one data set, "
        f"M, theta and row count), over the cells each measure was run on, and over the cells `{default}` (the "
        "default) was also run on, with its own worst there; runs beside a coin-flip party left out.",
        "",
        "| measure | cells | copies (duplicate, jitter, fitted) | split | clones | cells shared with the default "
        f"| `{default}` on them |",
        "|---|---|---|---|---|---|---|",
    ]
    for measure, values in sorted(cells.items()):
        shared = set(values) & set(cells[default])
        by_kind = [{c for c in values if c[0] in kinds} for kinds in (COPY_KINDS, ("split",), CLONE_KINDS)]
        row = [worst(values, among) for among in (*by_kind, shared)] + [worst(cells[default], shared)]
        lines.append(f"| {measure} | {len(values)} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def ladder_kept(points: list[dict[str, Any]]) -> dict[str, bool]:
    """Whether the mean shares keep the honest order: full > half > quarter; full > flip10 and no more flipped
    labels earning more than fewer (rungs that earn nothing tie at 0); shuffled features earning less than the full
    rows and no more than any other rung."""
    mean = {r: mean_se([100 * p["share"] for p in points if p.get("rung") == r])[0] for r in LADDER}
    return {
        "rows": mean["full"] > mean["half"] > mean["quarter"],
        "labels": mean["full"] > mean["flip10"] >= mean["flip30"] >= mean["flip50"],
        "uninformative": mean["shuffled"] < mean["full"] and all(mean["shuffled"] <= mean[r] for r in LADDER),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--parties", default="4")
    ap.add_argument("--factors", default="2,3", help="copies k of duplicate, jitter and fitted")
    ap.add_argument("--splits", default="2,3", help="identities s of split and clone")
    ap.add_argument(
        "--kinds", default=",".join(DATA_ATTACK_KINDS), help="the manipulations played (the ladder is always played)"
    )
    ap.add_argument("--thetas", default="0.5")
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--rows", type=int, default=12000, help="training rows sampled per grid point")
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument(
        "--contribution", default="shapley", choices=parameter("contribution").choices, help="the measure played"
    )
    ap.add_argument(
        "--alpha",
        type=float,
        default=ALPHA,
        help="weight of the voting contribution beside split Shapley (it pays each identity that voted for a split)",
    )
    ap.add_argument(
        "--noisy-party",
        type=int,
        help="give this party (not the holder) coin-flip labels in every run: what a manipulation earns beside a "
        "party whose rows say nothing",
    )
    ap.add_argument("--max-parties", type=int, default=11, help="skip a split or clone that makes more parties")
    ap.add_argument("--full", action="store_true", help="the whole grid (module docstring)")
    ap.add_argument("--out", help="results file (default bench/results/manipulation.json, bench.record)")
    args = ap.parse_args(argv)
    unknown = set(args.kinds.split(",")) - set(DATA_ATTACK_KINDS)
    if unknown:
        ap.error(f"unknown --kinds {', '.join(sorted(unknown))}; choose from {', '.join(DATA_ATTACK_KINDS)}")
    if args.full:
        for key, value in FULL.items():
            setattr(args, key, value)
    record = Run("manipulation", parameters_of(args), args.out, argv=argv)
    fit = fitter(args)
    points: list[dict[str, Any]] = []
    for d in args.datasets.split(","):
        objective(d)  # an unknown name fails here, before any training
        for m in map(int, args.parties.split(",")):
            for theta in map(float, args.thetas.split(",")):
                for s in seeds_of(args.seeds):
                    points += measure_point(d, m, theta, s, args, fit)
                    print(f"{d} M={m} theta={theta} seed={s}", flush=True)
                    record.save({"points": points}, complete=False)  # a stopped grid keeps what it measured
    attack_points = [p for p in points if p["kind"] != "ladder"]
    summary = {"ladder_kept": ladder_kept(points), "goal_points": GOAL_POINTS}
    summary["max_mean_points"] = max(
        mean_se([p["points"] for p in attack_points if (p["kind"], p["factor"]) == key])[0]
        for key in {(p["kind"], p["factor"]) for p in attack_points}
    )
    record.save({"points": points, **summary})
    print(tables([{"results": {"points": points}}]))
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
