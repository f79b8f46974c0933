"""Estimated split Shapley (``ledger.spec.shapley_estimate``): its accuracy against the exact values, and its cost.

Accuracy, at M = 8, 12 and 16 parties, where the exact values are computable: on the splits of real histograms (every
data set of the benchmarks, each split among M parties with label skew theta = 0.8, the first tree's root gradients,
the best threshold of each of the eight features whose pooled gain is largest) and on synthetic stress sides (a few
parties twenty times larger than the rest, gradients of either sign, a party empty on one side). For every split,
the exact values (the simulator's compiled kernel; the Python reference above its size) against the estimates of
several task seeds: the share of values within the stated bound (``error_bound``: Hoeffding at delta = 0.01, expected
at least 99% and in practice all), the largest error over the bound, and the largest error over the split's gain;
mean and standard error over the (partition seed, task seed) pairs.

Cost, at M = 12, 13, 32, 64: the simulator's time per split, estimated (Python integers) above the exact size and
exact (the compiled kernel) at it,
``FGBDTEstimateLib.splitShapleyEstimate``'s gas alone, and a tree of depth 2 trained on anvil by M parties
(``ledger.wrappers.federation.run_level`` with synthetic rows): gas per level and the largest transaction (each must
stay under 30M gas; at 64 parties with the most bins whose node resolution fits a transaction,
``tx_size.largest_fitting``), the contributions of a 13-party run checked against the exact values within the stated
bound (exact is computable at 13), and the audit (``ledger.audit``) of every run.

    python -m bench.shapley_estimate [--datasets a9a,...] [--seeds 0,1,2] [--task-seeds 0,1,2] [--parties 12,13,32,64]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.datasets import DATASETS, SYNTHETIC, load, objective
from bench.gas import BLOCK_GAS, level_gas, open_task
from bench.record import Run, parameters_of
from bench.shapley_cost import compiled
from bench.stats import mean_se
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec import shapley_estimate as se
from fgbdt_chain.ledger.spec.fixed_point import to_fixed
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tx_size import largest_fitting
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare

ONE = ref.ONE
LAM = to_fixed(0.1)
"""The task's default lambda."""
SPLITS_PER_SET = 8
Sides = tuple[list[int], list[int], list[int], list[int]]


def real_splits(name: str, parties: int, seed: int) -> list[Sides]:
    """Every party's fixed-point (gL, hL, gR, hR) at the best threshold of the data set's most informative features,
    at the first tree's root (score 0: logistic g = 0.5 - y, h = 0.25; squared error g = mean(y) - y, h = 1)."""
    train, test = load(name, seed)
    prep = prepare(train, test, TrainParams(trees=1, depth=1), PrepConfig(parties=parties, theta=0.8, seed=seed))
    slots, ys = prep.party_slots(), prep.party_y()
    binary = objective(name) == "binary"
    mean = float(np.mean(np.concatenate(ys)))
    grads = [(0.5 - y if binary else mean - y) for y in ys]
    hess = [np.full(len(y), 0.25 if binary else 1.0) for y in ys]
    nslots = int(max(s.max() for s in slots)) + 1
    features = slots[0].shape[1]
    # per party, feature and slot: the sums of g and h
    g_hist = np.zeros((parties, features, nslots))
    h_hist = np.zeros((parties, features, nslots))
    for p in range(parties):
        for f in range(features):
            g_hist[p, f] = np.bincount(slots[p][:, f], weights=grads[p], minlength=nslots)
            h_hist[p, f] = np.bincount(slots[p][:, f], weights=hess[p], minlength=nslots)
    lam = ref.from_fixed(LAM)
    best: list[tuple[float, int, int]] = []
    for f in range(features):
        gl, hl = np.cumsum(g_hist[:, f].sum(0))[:-1], np.cumsum(h_hist[:, f].sum(0))[:-1]
        gt, ht = g_hist[:, f].sum(), h_hist[:, f].sum()
        gain = gl**2 / (hl + lam) + (gt - gl) ** 2 / (ht - hl + lam)
        t = int(np.argmax(gain))
        best.append((float(gain[t]), f, t))
    out = []
    for _, f, t in sorted(best, reverse=True)[:SPLITS_PER_SET]:
        cols: Sides = ([], [], [], [])
        for p in range(parties):
            left_g, left_h = g_hist[p, f, : t + 1].sum(), h_hist[p, f, : t + 1].sum()
            right_g, right_h = g_hist[p, f, t + 1 :].sum(), h_hist[p, f, t + 1 :].sum()
            for q, v in enumerate((left_g, left_h, right_g, right_h)):
                cols[q].append(to_fixed(float(v)))
        out.append(cols)
    return out


def stress_splits(parties: int, seed: int) -> list[Sides]:
    """Synthetic sides that stress the estimator: every fifth party twenty times larger, gradients of either sign
    (a party's marginal often negative), party 1 empty on the right."""
    rng = random.Random(seed)
    out = []
    for _ in range(SPLITS_PER_SET):
        cols: Sides = ([], [], [], [])
        for p in range(parties):
            rows = rng.randint(5, 400) * (20 if p % 5 == 0 else 1)
            left = rng.randint(0, rows)
            right = 0 if p == 1 else rows - left
            cols[0].append(rng.randint(-left, left) * ONE // 3)
            cols[1].append(left * ONE // 4)
            cols[2].append(rng.randint(-right, right) * ONE // 3)
            cols[3].append(right * ONE // 4)
        out.append(cols)
    return out


def exact(sides: Sides) -> tuple[int, list[int]]:
    """The exact values as the simulator computes them (compiled kernel; the Python path where it does not apply)."""
    try:
        return compiled(*sides, LAM)
    except ValueError:
        return ref.split_shapley_fast(*sides, LAM)


def accuracy_of(splits: Sequence[Sides], task_seed: int) -> dict[str, float]:
    """One (partition, task seed) pair's figures over its splits."""
    inside = total = 0
    over_bound = over_gain = bound_over_gain = 0.0
    for i, sides in enumerate(splits):
        m = len(sides[0])
        gain, want = exact(sides)
        width = se.marginal_range(*sides, LAM)
        if width is None or gain <= 0:
            continue
        bound = se.error_bound(m, width)
        got_gain, got = se.split_shapley_estimate(*sides, LAM, se.node_seed(task_seed, 0, i + 1))
        assert got_gain == gain
        errors = [abs(a - b) for a, b in zip(got, want, strict=True)]
        inside += sum(e <= bound for e in errors)
        total += m
        over_bound = max(over_bound, max(errors) / bound)
        over_gain = max(over_gain, max(errors) / gain)
        bound_over_gain = max(bound_over_gain, bound / gain)
    return {
        "within_bound": inside / max(total, 1),
        "max_error_over_bound": over_bound,
        "max_error_over_gain": over_gain,
        "bound_over_gain": bound_over_gain,
        "values": total,
    }


def accuracy(datasets: Sequence[str], parties: Sequence[int], seeds: Sequence[int], task_seeds: Sequence[int]) -> list:
    rows = []
    for name in [*datasets, "stress-sides"]:
        for m in parties:
            pairs = []
            for s in seeds:
                splits = stress_splits(m, s) if name == "stress-sides" else real_splits(name, m, s)
                pairs += [accuracy_of(splits, t) for t in task_seeds]
            row: dict[str, Any] = {"data": name, "parties": m, "pairs": len(pairs)}
            for key in ("within_bound", "max_error_over_bound", "max_error_over_gain", "bound_over_gain"):
                row[key], row[key + "_se"] = mean_se(p[key] for p in pairs)
            row["values"] = sum(p["values"] for p in pairs)
            rows.append(row)
            print(f"accuracy {name} M={m}: {row}", file=sys.stderr, flush=True)
    return rows


def simulate_seconds(parties: Sequence[int], repeats: int = 3) -> list[dict[str, Any]]:
    """Per split, best of ``repeats``: the estimator on Python integers (its orders drawn each time, as for a new
    node) and, at 16 and below, the exact compiled kernel."""
    rows = []
    for m in parties:
        sides = stress_splits(m, 0)[0]
        est = []
        for r in range(repeats):
            start = time.perf_counter()
            se.split_shapley_estimate(*sides, LAM, se.node_seed(r, 0, 1))
            est.append(time.perf_counter() - start)
        row: dict[str, Any] = {"parties": m, "estimate_seconds": min(est), "permutations": se.PERMUTATIONS}
        row["estimate_step_seconds"] = min(est) / (se.PERMUTATIONS * m)
        if m <= se.EXACT_MAX_PARTIES:
            exact(sides)
            start = time.perf_counter()
            exact(sides)
            row["exact_seconds"] = time.perf_counter() - start
        rows.append(row)
        print(f"simulate M={m}: {row}", file=sys.stderr, flush=True)
    return rows


def chain_runs(parties: Sequence[int], depth: int, bins: int, check_parties: int) -> dict[str, Any]:
    """Gas per level of a depth-``depth`` tree at each M, the estimator's gas alone, the audit of every run, and
    the ``check_parties`` run's contributions against the exact values."""
    from fgbdt_chain.ledger.audit.replay import audit_chain
    from fgbdt_chain.ledger.devnet.anvil import start_anvil
    from fgbdt_chain.ledger.rpc.client import ChainClient
    from fgbdt_chain.ledger.wrappers.contracts import Status, TaskConfig, TaskContract
    from fgbdt_chain.ledger.wrappers.federation import RowSource, run_level

    node = start_anvil()
    out: dict[str, Any] = {"block_gas": BLOCK_GAS, "depth": depth, "bins": bins, "runs": []}
    try:
        client = ChainClient.connect(node.url)
        owner = client.new_account(10**22)
        task = TaskContract.deploy(client, owner)
        lib = client.deploy("FGBDTEstimateLib", owner)
        for m in sorted({*parties, check_parties}):
            started = time.perf_counter()
            sides = stress_splits(m, 1)[0]
            data = lib.functions.splitShapleyEstimate(*sides, LAM, 1, se.PERMUTATIONS)._encode_transaction_data()
            alone = int(client.w3.eth.estimate_gas({"to": lib.address, "data": data}))
            # the contract refuses a task whose node resolution cannot fit a transaction: fewer bins where needed
            fit = min(bins, largest_fitting(m, None, depth))
            cfg = TaskConfig(
                trees=1, depth=depth, bins=fit, min_parties=m, max_parties=m, min_rows=1, step_blocks=10**6, lam=ONE
            )
            tid, accounts, _, resolver = open_task(client, task, cfg, m)
            rng = random.Random(m)
            source = RowSource(rng, [p.address for p in accounts], 300, 8, fit + 1)
            source.start_tree(0)
            levels, checked = [], []
            while task.state(tid).status == Status.TRAINING:
                nodes = task.state(tid).open_nodes()
                votes: dict[str, list[int]] = {p.address: [rng.randint(0, 7) for _ in nodes] for p in accounts}
                outcome = run_level(task, tid, accounts, votes, source, resolver)
                source.follow(outcome)
                gas = level_gas(outcome)
                gas["largest_tx"] = max(tx.gas_used for tx in outcome.txs)
                levels.append(gas)
                if m == check_parties:
                    checked += _check_bound(outcome)
            report = audit_chain(client, task.address, tid)
            run: dict[str, Any] = {
                "parties": m,
                "bins": fit,
                "estimated": se.estimated(m),
                "estimate_gas_alone": alone,
                "levels": levels,
                "largest_tx": max(lv["largest_tx"] for lv in levels),
                "audit_ok": report.ok,
                "seconds": time.perf_counter() - started,
            }
            if not report.ok:
                run["audit_failure"] = str(report)
            if m == check_parties:
                run["checked_nodes"] = checked
            out["runs"].append(run)
            print(f"chain M={m}: {run}", file=sys.stderr, flush=True)
    finally:
        node.stop()
    return out


def _check_bound(outcome: Any) -> list[dict[str, Any]]:
    """Every split node of a level: the chain's phi (``ContributionsAdded``) against the exact values of the same
    credited sides (neutral credits: every party honest), within the stated bound."""
    rows = []
    for nd in outcome.open_nodes:
        try:
            split_ev = outcome.node_event(nd, "NodeSplit")
        except KeyError:
            continue
        contrib = outcome.node_event(nd, "ContributionsAdded")
        j = outcome.open_nodes.index(nd)
        rank = list(outcome.candidates[nd]).index(int(split_ev.args["feature"]))
        threshold = int(split_ev.args["threshold"])
        sides: Sides = ([], [], [], [])
        for party in outcome.submitters:
            s = ref.party_side_sums(outcome.hists[party][j], rank, threshold, ref.HESSIAN_SECOND_ORDER)
            for q in range(4):
                sides[q].append(s[q])
        gain, want = ref.split_shapley(*sides, ONE)
        got = [int(v) for v in contrib.args["phi"]]
        width = se.marginal_range(*sides, ONE)
        bound = se.error_bound(len(got), width) if width is not None else float("inf")
        errors = [abs(a - b) for a, b in zip(got, want, strict=True)]
        rows.append(
            {
                "node": nd,
                "within_bound": all(e <= bound for e in errors),
                "max_error_over_bound": max(errors) / bound,
                "max_error_over_gain": max(errors) / gain if gain > 0 else 0.0,
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join([*DATASETS, *SYNTHETIC]))
    ap.add_argument("--exact-parties", default="8,12,16")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--task-seeds", default="0,1,2")
    ap.add_argument("--parties", default="12,13,32,64", help="the cost's federations")
    ap.add_argument("--check-parties", type=int, default=13, help="the chain run checked against exact values")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--bins", type=int, default=8)
    ap.add_argument("--skip-chain", action="store_true")
    ap.add_argument("--out", help="results file (default bench/results/shapley_estimate.json, bench.record)")
    args = ap.parse_args()
    record = Run("shapley_estimate", parameters_of(args), args.out)
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    results: dict[str, Any] = {
        "exact_max_parties": se.EXACT_MAX_PARTIES,
        "permutations": se.PERMUTATIONS,
        "delta": se.DELTA_PPM / 1e6,
        "tolerance": se.TOLERANCE_PPM / 1e6,
    }
    results["accuracy"] = accuracy(
        args.datasets.split(","), ints(args.exact_parties), ints(args.seeds), ints(args.task_seeds)
    )
    results["simulate"] = simulate_seconds(ints(args.parties))
    if not args.skip_chain:
        results["chain"] = chain_runs(ints(args.parties), args.depth, args.bins, args.check_parties)
    record.save(results)
    print(tables([{"parameters": record.parameters, "results": results}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of the last recorded run."""
    r = runs[-1]["results"]
    lines = [
        f"Split Shapley is exact up to {r['exact_max_parties']} parties and estimated above from K = "
        f"{r['permutations']} random orders (Hoeffding at delta = {r['delta']}, tolerance {r['tolerance']} of the "
        "marginals' range at 64 parties). Accuracy against the exact values (estimator forced on), mean ± standard "
        "error over (partition seed, task seed) pairs:",
        "",
        "| data | M | values | within the stated bound | max error / bound | max error / gain | bound / gain |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in r["accuracy"]:
        lines.append(
            f"| {a['data']} | {a['parties']} | {a['values']} | {a['within_bound']:.4f} ± {a['within_bound_se']:.4f} "
            f"| {a['max_error_over_bound']:.3f} ± {a['max_error_over_bound_se']:.3f} "
            f"| {a['max_error_over_gain']:.4f} ± {a['max_error_over_gain_se']:.4f} "
            f"| {a['bound_over_gain']:.2f} ± {a['bound_over_gain_se']:.2f} |"
        )
    lines += ["", "Simulator time per split (Python integers for the estimate, compiled kernel for exact):", ""]
    lines += ["| M | estimated | per party and order | exact |", "|---|---|---|---|"]
    for s in r["simulate"]:
        ex = f"{s['exact_seconds'] * 1e3:.1f} ms" if "exact_seconds" in s else "-"
        lines.append(
            f"| {s['parties']} | {s['estimate_seconds'] * 1e3:.1f} ms | {s['estimate_step_seconds'] * 1e6:.2f} us "
            f"| {ex} |"
        )
    chain = r.get("chain")
    if chain:
        lines += [
            "",
            f"On anvil, one tree of depth {chain['depth']} ({chain['bins']} bins, fewer where a node's resolution "
            "would not fit a transaction) per M; every transaction must stay under "
            f"{chain['block_gas'] / 1e6:.0f}M gas:",
            "",
            "| M | bins | Shapley | estimate alone | largest resolveNode | largest transaction | gas per level "
            "| audit |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in chain["runs"]:
            per_level = ", ".join(f"{lv['total'] / 1e6:.1f}M" for lv in c["levels"])
            lines.append(
                f"| {c['parties']} | {c.get('bins', chain['bins'])} | {'estimated' if c['estimated'] else 'exact'} "
                f"| {c['estimate_gas_alone']:,} "
                f"| {max(lv['resolve_max'] for lv in c['levels']):,} | {c['largest_tx']:,} | {per_level} "
                f"| {'passes' if c['audit_ok'] else 'FAILS'} |"
            )
        checked = [n for c in chain["runs"] for n in c.get("checked_nodes", [])]
        if checked:
            inside = sum(n["within_bound"] for n in checked)
            worst = max(n["max_error_over_bound"] for n in checked)
            lines += [
                "",
                "Chain contributions against the exact values at M = "
                f"{next(c['parties'] for c in chain['runs'] if c.get('checked_nodes') is not None)}: "
                f"{inside} of {len(checked)} split nodes within the stated bound (largest error {worst:.3f} of it).",
            ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
