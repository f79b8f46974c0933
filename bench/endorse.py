"""Endorsement on any data: honest acceptance, detection of every attack by factor, and the greedy party's share,
over data sets, federations and seeds.

For every (data set, M, theta, seed), ``simulate`` trains FV-tree with the chain's endorsement round (exact rules,
the verifiers' statistical test at every tree's root at the task's false-refusal rate, credits at the verified
scale):

* **honest acceptance**: the share of honest submissions that reach the quorum (every party honest), and the
  honest root checks one verifier refused (the stated rate bounds their share);
* **honest statistics by level**: the verifiers' statistics of honest histograms at every level, also below the
  root where no verdict rests on them: the measurement behind testing at the root only;
* **detection**: for every party's root submission of that honest run, what the verifiers would have said had it
  sent its histograms stretched (gradients, gradients and hessians, counts, a sign flip, each times F; the exact
  inherited-totals rule makes a stretch of whole rows start at a root): the verifiers' statistics of stretched
  claims follow exactly from the honest ones (``node.protocol.verify.Measurement.scaled``), the exact bin rules are
  checked on the stretched sums, and the verifiers' carry rule (``ledger.spec.tree_carry``) on the stretched root totals
  against what the party's previous tree allows. A submission is refused when a rule breaks or fewer than the quorum
  of verifiers sign. Counted from the second tree (an attacker waits for it: at the first tree every score is 0 and the
  ``FirstTreeLabels`` identities refuse any stretch outright);
* **share change**: one party (party 0) really attacks from tree ``--start-tree`` on (default: half way, when the
  model is established and the bounds of the loss looser than early on), every kind (and ``targeted``, which breaks
  the identities) at every factor, continuing a copy of the honest federation from that tree; its share of the
  reward (``reference.reward_shares``: of the positive contributions, and nothing once refused, since a party that
  leaves before the last step forfeits its amount), against the same party's share when everyone stays honest, and
  the tree and level where it was refused.

    python -m bench.endorse --datasets a9a,higgs,susy,credit,abalone,cpusmall,stress --parties 2,4,8 \\
        --thetas 0.5,0.8 --seeds 0,1,2,3,4 --trees 50 --depth 8 --jobs 2

``stress`` is synthetic (``bench.stress``: heavy tails, outliers, counts, constant-heavy and missing columns) and its
parties also differ in one feature (``--stress-feature-skew``, default 0.5). Results go to
``bench/results/endorse.json`` (``bench.record``); ``python -m bench.report`` puts its tables in the benchmarks page.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.datasets import load
from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec.reference import ALL_TREES_VOTED, Totals
from fgbdt_chain.ledger.spec.task_params import DEFAULT_REFUSAL_RATE
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.protocol.endorsement import quorum
from fgbdt_chain.node.protocol.verify import Claims, Measurement, judge, limit
from fgbdt_chain.node.sim.experiment import PrepConfig, evaluate, federation, make_model, prepare
from fgbdt_chain.node.sim.fvtree import LevelView, TrainResult

OBSERVED = ("gradients", "gradients-hessians", "counts", "sign-flip")
"""Attacks whose verdicts follow from the honest run's statistics (stretches of whole rows)."""
PLAYED = (*OBSERVED, "targeted")
"""Attacks played in runs of their own, for the share change."""
FACTORS = (1.1, 1.25, 1.5, 2.0, 4.0)
GREEDY = 0
PAYOUT_RULE = "completion"
"""Recorded with every run: shares under ``reference.payouts`` (a party that leaves before the last step forfeits)."""
START_TREE = 1
"""First tree of the observed stretches (the first tree's exact identities refuse any stretch)."""


def stretch(kind: str, factor: float) -> tuple[float, float, float]:
    """(gradient, hessian, count) factors of an attack on whole rows."""
    return {
        "gradients": (factor, 1.0, 1.0),
        "gradients-hessians": (factor, factor, 1.0),
        "counts": (1.0, 1.0, factor),
        "sign-flip": (-factor, 1.0, 1.0),
    }[kind]


def bins_break(claims: Claims, fg: float, fh: float, fn: float, first_tree: bool, binary: bool) -> bool:
    """Whether stretched sums break a bin rule of ``ledger.spec.histogram_rules`` (in floats, with a margin of one part
    in 1e9: the benchmark's approximation of the contract's exact check)."""
    g, h, n = claims.g * fg, claims.h * fh, claims.n * fn
    tol = 1e-9 * np.maximum(n, 1.0)
    if not binary:
        return bool(np.any(np.abs(h - n) > tol))
    a = np.abs(g)
    if np.any(a > n + tol) or np.any(h < -tol) or np.any(4 * h > n + tol):
        return True
    concave = (2 * a > n + tol) & (h * n > a * (n - a) + tol * n)
    if np.any(concave):
        return True
    if first_tree:
        labels = n / 2 - g
        return bool(np.any(np.abs(4 * h - n) > tol) or np.any(np.abs(labels - np.round(labels)) > 1e-6))
    return False


def carry_breaks(view: LevelView, party: int, fg: float, fh: float, fn: float) -> bool:
    """Whether the party's root totals, stretched, break what its previous tree allows (``ledger.spec.tree_carry``,
    checked by every verifier). The stretched totals are the exact ones times the factors, rounded to units (a
    stretch of whole rows rounds row by row: within the carry's per-row slack)."""
    carry = view.carries[party] if view.carries else None
    if carry is None:
        return False
    t = view.roots[party]
    return not carry.allows(Totals(round(t.g * fg), round(t.h * fh), round(t.n * fn)))


LEVEL_STATS = ("g", "h", "n", "-gflip")
"""The honest statistics recorded per level: each stretch score, and the flip score negated (large = refused)."""


@dataclass
class Observer:
    """Collects the honest verdicts, the honest statistics level by level, and the verdicts stretched histograms
    would have had at every tree's root (where a stretch of whole rows must show:
    ``node.protocol.endorsement.decide``)."""

    parties: int
    alpha: float
    binary: bool

    def __post_init__(self) -> None:
        self.need = quorum(self.parties)
        self.submissions = 0
        self.refused = 0
        self.checks = 0  # root checks by one verifier of one party
        self.check_refusals = 0
        self.max_ratio = 0.0  # largest honest root statistic over its limit
        self.levels: dict[tuple[int, str], list[float]] = {}  # (level, quantity) -> [count, sum, sum sq, max]
        self.roots = 0
        self.caught: dict[tuple[str, float], int] = {}
        self.first_tree: dict[tuple[str, float], list[int]] = {}
        self.by_carry: dict[tuple[str, float], int] = {}  # stretched roots the carry alone refuses

    def __call__(self, view: LevelView) -> None:
        z = limit(self.alpha)
        for m in range(self.parties):
            if not view.active[m] or not view.verdicts[m]:
                continue
            signers = sum(v.sign for v in view.verdicts[m].values())
            self.submissions += 1
            self.refused += signers < self.need
            measured = view.measurements[m] if view.measurements else {}
            for mm in measured.values():
                values = (mm.g.z_stretch, mm.h.z_stretch, mm.n.z_stretch, -mm.g.z_flip)
                for name, value in zip(LEVEL_STATS, values, strict=True):
                    stats = self.levels.setdefault((view.level, name), [0.0, 0.0, 0.0, -math.inf])
                    stats[0] += 1
                    stats[1] += value
                    stats[2] += value**2
                    stats[3] = max(stats[3], value)
            if view.level != 0:
                continue
            for v in view.verdicts[m].values():
                self.checks += 1
                self.check_refusals += not v.sign
                self.max_ratio = max(self.max_ratio, v.z["g"] / z, v.z["h"] / z, v.z["n"] / z, -v.z["g_flip"] / z)
            if view.tree >= START_TREE:
                self.roots += 1
            for kind in OBSERVED:
                for factor in FACTORS:
                    refused = self._refused(view, m, measured, view.claims[m], kind, factor)
                    if view.tree >= START_TREE:
                        self.caught[(kind, factor)] = self.caught.get((kind, factor), 0) + refused
                    else:
                        self.first_tree.setdefault((kind, factor), []).append(refused)

    def _refused(
        self, view: LevelView, m: int, measured: dict[int, Measurement], claims: Claims, kind: str, factor: float
    ) -> bool:
        fg, fh, fn = stretch(kind, factor)
        if bins_break(claims, fg, fh, fn, view.tree == 0, self.binary):
            return True
        if carry_breaks(view, m, fg, fh, fn):
            self.by_carry[(kind, factor)] = self.by_carry.get((kind, factor), 0) + 1
            return True
        signers = sum(judge(mm.scaled(fg, fh, fn), self.alpha).sign for mm in measured.values())
        return signers < self.need

    def summary(self) -> dict[str, Any]:
        levels = {}
        for (level, name), (count, total, squares, top) in sorted(self.levels.items()):
            mean = total / count
            levels[f"{level} {name}"] = {
                "statistics": count,
                "mean": mean,
                "sd": math.sqrt(max(squares / count - mean * mean, 0.0)),
                "max": top,
            }
        return {
            "submissions": self.submissions,
            "honest_refused": self.refused,
            "root_checks": self.checks,
            "root_check_refusals": self.check_refusals,
            "honest_max_statistic_over_limit": self.max_ratio,
            "honest_statistics_by_level": levels,
            "detection": {
                f"{kind} x{factor}": self.caught.get((kind, factor), 0) / max(self.roots, 1)
                for kind in OBSERVED
                for factor in FACTORS
            },
            "detection_by_carry": {
                f"{kind} x{factor}": self.by_carry.get((kind, factor), 0) / max(self.roots, 1)
                for kind in OBSERVED
                for factor in FACTORS
            },
            "first_tree_root_refused": {
                f"{kind} x{factor}": float(np.mean(v)) for (kind, factor), v in self.first_tree.items()
            },
        }


def one_config(task: tuple[str, int, float, int, int, int, float, float, int | None, str, int]) -> dict[str, Any]:
    """Every measurement of one (data set, M, theta, seed); ``attack_from`` None skips the attack runs; ``algo`` is
    ``fvtree`` or ``drawn`` (the candidates drawn from a public seed, not voted)."""
    name, parties, theta, seed, trees, depth, alpha, stress_skew, attack_from, algo, voted_trees = task
    start = time.perf_counter()
    train, test = load(name, seed)
    objective = "binary" if set(np.unique(train.y).tolist()) <= {0.0, 1.0} else "regression"
    params = TrainParams(trees=trees, depth=depth, objective=objective, voted_trees=voted_trees)  # type: ignore[arg-type]
    config = PrepConfig(
        parties=parties,
        theta=theta,
        seed=seed,
        refusal_rate=alpha,
        feature_skew=stress_skew if name == "stress" else 0.0,
    )
    prep = prepare(train, test, params, config)
    observer = Observer(parties, alpha, objective == "binary")
    fed = federation(prep, algo, observer=observer)
    fed.measure_every_level = True
    fed.train(until=attack_from or 0)
    fork = copy.deepcopy(fed)
    honest = fed.train()
    model = make_model(prep, honest, algo)
    pred = model.predict_proba(test.X) if objective == "binary" else model.predict_raw(test.X)
    honest_report = evaluate(params, test.y, pred)
    metric = "test_error" if objective == "binary" else "test_rmse"
    out: dict[str, Any] = {
        "dataset": name,
        "parties": parties,
        "theta": theta,
        "seed": seed,
        "objective": objective,
        "rows_per_party": [len(p) for p in prep.parts],
        "honest": {
            **observer.summary(),
            "refusals": [r.reason for r in honest.refusals],
            "shares": honest.shares(),
            metric: honest_report[metric],
        },
        "attacks": {},
        "payout": PAYOUT_RULE,
    }
    if attack_from is not None:
        out["attack_from_tree"] = attack_from
        for kind in PLAYED:
            for factor in FACTORS:
                attacked = copy.deepcopy(fork)
                attacked.level_observer = None
                attacked.measure_every_level = False
                attack = Attack(kind, factor, seed=seed, start_tree=attack_from)  # type: ignore[arg-type]
                attacked.parties[GREEDY].attack = attack
                out["attacks"][f"{kind} x{factor}"] = _attacked(attacked.train(), honest.shares()[GREEDY])
    out["seconds"] = time.perf_counter() - start
    return out


def _attacked(result: TrainResult, honest_share: float) -> dict[str, Any]:
    mine = [r for r in result.refusals if r.party == GREEDY]
    others = [r for r in result.refusals if r.party != GREEDY]
    return {
        "share": result.shares()[GREEDY],
        "share_change": result.shares()[GREEDY] - honest_share,
        "refused_at": [mine[0].tree, mine[0].level] if mine else None,
        "refusal": mine[0].reason if mine else None,
        "honest_refused": len(others),
    }


def mean_se(values: Iterable[float]) -> tuple[float, float]:
    v = [x for x in values if x is not None and not math.isnan(x)]
    if not v:
        return math.nan, math.nan
    mean = float(np.mean(v))
    se = float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
    return mean, se


def pooled_levels(runs: list[dict[str, Any]]) -> dict[tuple[int, str], tuple[float, float, float]]:
    """Per (level, quantity), the honest statistics' (mean, sd, max) pooled over runs."""
    acc: dict[tuple[int, str], list[float]] = {}
    for r in runs:
        for key, st in r["honest"]["honest_statistics_by_level"].items():
            level, name = key.split()
            a = acc.setdefault((int(level), name), [0.0, 0.0, 0.0, -math.inf])
            n = st["statistics"]
            a[0] += n
            a[1] += n * st["mean"]
            a[2] += n * (st["sd"] ** 2 + st["mean"] ** 2)
            a[3] = max(a[3], st["max"])
    out = {}
    for level, (n, total, squares, top) in sorted(acc.items()):
        mean = total / n
        out[level] = (mean, math.sqrt(max(squares / n - mean * mean, 0.0)), top)
    return out


def summarise(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (data set, M, theta): the figures over seeds."""
    rows = []
    keys = sorted({(r["dataset"], r["parties"], r["theta"]) for r in results}, key=lambda k: (k[0], k[1], k[2]))
    for key in keys:
        runs = [r for r in results if (r["dataset"], r["parties"], r["theta"]) == key]
        row: dict[str, Any] = {
            "dataset": key[0],
            "parties": key[1],
            "theta": key[2],
            "seeds": len(runs),
            "honest_submissions": sum(r["honest"]["submissions"] for r in runs),
            "honest_refused": sum(r["honest"]["honest_refused"] for r in runs),
            "root_checks": sum(r["honest"]["root_checks"] for r in runs),
            "root_check_refusals": sum(r["honest"]["root_check_refusals"] for r in runs),
            "honest_max_statistic_over_limit": max(r["honest"]["honest_max_statistic_over_limit"] for r in runs),
            "honest_sd_by_level": {f"{lv} {q}": sd for (lv, q), (_, sd, _) in pooled_levels(runs).items()},
            "test_error": mean_se(r["honest"].get("test_error", math.nan) for r in runs),
        }
        for kind in OBSERVED:
            for factor in FACTORS:
                name = f"{kind} x{factor}"
                row[f"detect {name}"] = mean_se(r["honest"]["detection"][name] for r in runs)
                row[f"carry {name}"] = mean_se(
                    r["honest"].get("detection_by_carry", {}).get(name, math.nan) for r in runs
                )
        played = [r for r in runs if r["attacks"]]
        if played:
            worst: tuple[str, float, float] | None = None
            for name in played[0]["attacks"]:
                m, se = mean_se(r["attacks"][name]["share_change"] for r in played)
                row[f"share change {name}"] = (m, se)
                if worst is None or m > worst[1]:
                    worst = (name, m, se)
                trees = [
                    (r["attacks"][name]["refused_at"][0] - r["attack_from_tree"])
                    if r["attacks"][name]["refused_at"]
                    else None
                    for r in played
                ]
                row[f"caught within 5 trees {name}"] = sum(t is not None and t < 5 for t in trees) / len(trees)
                row[f"honest refused {name}"] = sum(r["attacks"][name]["honest_refused"] for r in played)
            row["largest share change"] = worst
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], results: list[dict[str, Any]]) -> str:
    pct = lambda x: f"{100 * x[0]:.1f}%" if isinstance(x, tuple) else f"{100 * x:.1f}%"  # noqa: E731
    lines = [
        "Honest acceptance (submissions reaching the quorum, all levels), honest root checks refused by one "
        "verifier, the largest honest root statistic over its limit, the share of roots (from the second tree) "
        "where histograms stretched by F would have been refused (mean over seeds; 'by the carry': by the carry rule "
        "alone, ledger.tree_carry), the greedy party's largest "
        "share change over every attack and factor (mean ± SE over seeds, in points of share) and the share of "
        "seeds where a persistent gradients x1.5 was refused within 5 trees of its start.",
        "",
        "| data | M | theta | seeds | honest accepted | root checks refused | max z/limit | g x1.25 | g x1.5 | "
        "g x2 | g x2 by the carry | g,h x2 | counts x1.5 | counts x2 | flip x1.1 | largest share change | "
        "g x1.5 caught in 5 trees |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        accepted = 1 - r["honest_refused"] / max(r["honest_submissions"], 1)
        worst = r.get("largest share change")
        change = f"{worst[0]}: {100 * worst[1]:+.2f} ± {100 * worst[2]:.2f}" if worst else "-"
        caught = r.get("caught within 5 trees gradients x1.5")
        lines.append(
            f"| {r['dataset']} | {r['parties']} | {r['theta']} | {r['seeds']} | "
            f"{100 * accepted:.2f}% ({r['honest_submissions'] - r['honest_refused']}/{r['honest_submissions']}) | "
            f"{r['root_check_refusals']}/{r['root_checks']} | {r['honest_max_statistic_over_limit']:.2f} | "
            f"{pct(r['detect gradients x1.25'])} | {pct(r['detect gradients x1.5'])} | "
            f"{pct(r['detect gradients x2.0'])} | {pct(r['carry gradients x2.0'])} | "
            f"{pct(r['detect gradients-hessians x2.0'])} | "
            f"{pct(r['detect counts x1.5'])} | {pct(r['detect counts x2.0'])} | {pct(r['detect sign-flip x1.1'])} | "
            f"{change} | {'-' if caught is None else f'{100 * caught:.0f}%'} |"
        )
    depth = max((int(key.split()[0]) for r in rows for key in r["honest_sd_by_level"]), default=0)
    lines += [
        "",
        "Why the test runs at the root only: per level, the standard deviation of the honest statistics over every "
        "M, seed and verifier, the larger of the hessians' and the counts' (the gradients' is shifted and spread by "
        "boosting's anti-correlation: JSON). The noise model says 1 or less; below the root the cells are nodes "
        "chosen with the tested party's own rows.",
        "",
        "| data | theta | " + " | ".join(f"level {lv}" for lv in range(depth + 1)) + " |",
        "|---|---|" + "---|" * (depth + 1),
    ]
    for name, theta in sorted({(r["dataset"], r["theta"]) for r in results}):
        pooled = pooled_levels([r for r in results if (r["dataset"], r["theta"]) == (name, theta)])
        cells = [
            f"{max(pooled[(lv, 'h')][1], pooled[(lv, 'n')][1]):.2f}" if (lv, "n") in pooled else "-"
            for lv in range(depth + 1)
        ]
        lines.append(f"| {name} | {theta} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Why the flip test runs at the root only: per level, the largest honest flip score (the gradient claims' "
        "projection on the estimate, negated, in standard deviations) over every M, seed and verifier. A test "
        f"refuses beyond {limit(DEFAULT_REFUSAL_RATE):.1f} at the default rate; below the root boosting's residuals "
        "run against the estimate.",
        "",
        "| data | theta | " + " | ".join(f"level {lv}" for lv in range(depth + 1)) + " |",
        "|---|---|" + "---|" * (depth + 1),
    ]
    for name, theta in sorted({(r["dataset"], r["theta"]) for r in results}):
        pooled = pooled_levels([r for r in results if (r["dataset"], r["theta"]) == (name, theta)])
        cells = [f"{pooled[(lv, '-gflip')][2]:.1f}" if (lv, "-gflip") in pooled else "-" for lv in range(depth + 1)]
        lines.append(f"| {name} | {theta} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="a9a,higgs,susy,credit,abalone,cpusmall,stress")
    ap.add_argument("--parties", default="2,4,8")
    ap.add_argument("--thetas", default="0.5,0.8")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--refusal-rate", type=float, default=1e-9)
    ap.add_argument("--stress-feature-skew", type=float, default=0.5)
    ap.add_argument("--no-attack-runs", action="store_true", help="only the honest runs (acceptance, detection)")
    ap.add_argument("--start-tree", type=int, help="first tree the greedy party attacks (default: trees // 2)")
    ap.add_argument("--jobs", type=int, default=1, help="configurations run in parallel processes")
    ap.add_argument("--algo", choices=("fvtree", "drawn"), default="fvtree", help="voted or drawn candidates")
    ap.add_argument(
        "--voted-trees",
        type=int,
        default=ALL_TREES_VOTED,
        help="fvtree: trees that vote before the candidates are drawn (default: all, the paper's FV-tree)",
    )
    ap.add_argument("--out", help="results file (default bench/results/endorse.json, bench.record)")
    args = ap.parse_args()
    record = Run("endorse", parameters_of(args), args.out)
    tasks = [
        (
            d,
            int(m),
            float(t),
            int(s),
            args.trees,
            args.depth,
            args.refusal_rate,
            args.stress_feature_skew,
            None if args.no_attack_runs else (args.trees // 2 if args.start_tree is None else args.start_tree),
            args.algo,
            args.voted_trees,
        )
        for d in args.datasets.split(",")
        for m in args.parties.split(",")
        for t in args.thetas.split(",")
        for s in args.seeds.split(",")
    ]
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for res in pool.map(one_config, tasks):
            results.append(res)
            h = res["honest"]
            print(
                f"{res['dataset']} M={res['parties']} theta={res['theta']} seed={res['seed']}: honest "
                f"{h['submissions'] - h['honest_refused']}/{h['submissions']} accepted, root checks refused "
                f"{h['root_check_refusals']}/{h['root_checks']}, max z/limit "
                f"{h['honest_max_statistic_over_limit']:.2f} ({res['seconds']:.0f} s)",
                flush=True,
            )
            record.save({"configs": results}, complete=False)  # a stopped run keeps what it measured
    record.save({"configs": results, "summary": summarise(results)})
    print(tables([{"parameters": record.parameters, "results": {"configs": results}}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of recorded runs of one setting: their configurations together (each a data set, M, theta and
    seed), summarised over seeds."""
    results = [config for run in runs for config in run["results"]["configs"]]
    return markdown(summarise(results), results)


if __name__ == "__main__":
    sys.exit(main())
