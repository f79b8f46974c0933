"""How ``simulate``'s training time and peak memory grow with rows, parties, depth and trees, next to LightGBM as a
user runs it, with the fitted growth exponent of each.

Each axis varies one setting from a base task (synthetic stress data of 250,000 rows, 75% of them for training, 4
parties at theta 0.8, 20 trees of depth 6, 16 bins); every other setting stays at the base. Each point is
``bench.speed``'s measurement (``--one``: a process of its own, threads pinned alike for both sides, peak memory that
process's ``ru_maxrss``), repeated ``--repeat`` times, interleaved. The exponent is the least-squares slope of
log(CPU seconds) and of log(peak memory) on log(the axis value) over the axis's points (mean over repetitions):
1 is linear growth. CPU seconds (``time.process_time`` of the training, every thread) are fitted rather than wall
seconds, since a shared machine's waits for a core vary from run to run; both are reported.

    python -m bench.curves                          # every axis (an hour or more on two cores)
    python -m bench.curves --axis rows --values 10000,100000,1000000,10000000

Parties stop at the federation's ``MAX_PARTIES`` and depth at the task's maximum depth (the contract's open-node mask
of 256 bits). LightGBM has no parties; its column on that axis is the same pooled rows at every point. Peak memory
includes the interpreter, numpy, numba and LightGBM (about 300 MiB before any data), so its exponent over the whole
axis understates the growth; the exponent between the axis's two largest points is given beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from typing import Any

import numpy as np

from bench.plots import pyplot, save_figure
from bench.record import Run
from bench.speed import THREAD_ENV
from bench.stats import mean_se
from fgbdt_chain.ledger.spec.parameters import MAX_PARTIES, parameter
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES, PERMUTATIONS
from fgbdt_chain.node.kernels.parallel import default_threads

BASE: dict[str, Any] = {"data": "stress", "rows": 250_000, "parties": 4, "theta": 0.8, "trees": 20, "depth": 6}
"""The base task every axis varies one setting of."""
AXES: dict[str, tuple[int, ...]] = {
    "rows": (10_000, 100_000, 1_000_000, 10_000_000),
    "parties": tuple(m for m in (2, 4, 8, 16, 32, 64) if m <= MAX_PARTIES),
    "depth": tuple(d for d in (2, 4, 6, 8, 10) if d <= (parameter("depth").maximum or d)),
    "trees": (10, 20, 50, 100),
}
"""Each axis's default points."""
RUNS = ("fvtree", "lightgbm-user")
"""``bench.speed``'s runs measured at each point: the simulator and LightGBM as a user runs it."""
LABELS = {"fvtree": "simulate", "lightgbm-user": "LightGBM"}


def measure(setting: dict[str, Any], run: str, threads: int) -> dict[str, Any]:
    """One ``bench.speed --one`` measurement of ``setting`` in a child process."""
    cmd = [sys.executable, "-m", "bench.speed", "--threads", str(threads), "--one", run]
    for key, value in setting.items():
        cmd += [f"--{key}", str(value)]
    env = {**os.environ, **{var: str(threads) for var in THREAD_ENV}}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-3:])
        raise SystemExit(f"bench.speed --one {run} at {setting} failed:\n{tail}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log(y) on log(x); None with fewer than two usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    lx, ly = np.array(pts).T
    return float(np.polyfit(lx, ly, 1)[0])


def summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per run: mean and standard error at each axis value, and the fitted exponents."""
    out: dict[str, Any] = {}
    for run in RUNS:
        rows = []
        for value in dict.fromkeys(p["value"] for p in points):
            ms = [p for p in points if p["value"] == value and p["run"] == run]
            if not ms:
                continue
            row: dict[str, Any] = {"value": value, "n": len(ms)}
            for key in ("train_seconds", "train_cpu_seconds", "prep_seconds", "peak_rss_mb"):
                row[key] = mean_se(m[key] for m in ms if m.get(key) is not None)
            rows.append(row)
        xs = [float(r["value"]) for r in rows]
        cpu, memory = [r["train_cpu_seconds"][0] for r in rows], [r["peak_rss_mb"][0] for r in rows]
        out[run] = {
            "points": rows,
            "cpu_exponent": slope(xs, cpu),
            "memory_exponent": slope(xs, memory),
            "cpu_exponent_top": slope(xs[-2:], cpu[-2:]),
            "memory_exponent_top": slope(xs[-2:], memory[-2:]),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--axis", choices=[*AXES, "all"], default="all")
    ap.add_argument("--values", help="the axis's points, comma-separated (default: AXES; one axis only)")
    ap.add_argument("--repeat", type=int, default=2, help="measurements per point and run, interleaved (default 2)")
    ap.add_argument("--threads", type=int, default=default_threads(), help="threads of every run (default: all)")
    ap.add_argument("--out", help="results file (default bench/results/curves.json, bench.record)")
    args = ap.parse_args()
    axes = list(AXES) if args.axis == "all" else [args.axis]
    if args.values and len(axes) != 1:
        raise SystemExit("--values needs one --axis")
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {args.repeat}")
    for axis in axes:
        values = [int(v) for v in args.values.split(",")] if args.values else list(AXES[axis])
        if axis == "parties" and max(values) > MAX_PARTIES:
            raise SystemExit(f"--values: a federation has at most MAX_PARTIES = {MAX_PARTIES} parties")
        if min(values) < 1:
            raise SystemExit(f"--values must be positive, got {values}")
        params = {"axis": axis, "values": ",".join(map(str, values)), "threads": args.threads, "base": BASE}
        record = Run("curves", params, args.out, argv=sys.argv[1:])
        points: list[dict[str, Any]] = []
        for rep in range(args.repeat):
            for value in values:
                for run in RUNS:
                    setting = {**BASE, axis: value}
                    m = measure(setting, run, args.threads)
                    points.append({**m, "axis": axis, "value": value, "repeat": rep})
                    print(json.dumps({k: points[-1][k] for k in ("axis", "value", "run", "train_cpu_seconds")}))
                    record.save({"points": points, "summary": summary(points)}, complete=False)
        record.save({"points": points, "summary": summary(points)})
        print(tables([{"parameters": params, "results": {"summary": summary(points)}}]))
    return 0


def _ms(stat: list[float] | tuple[float, float], digits: int = 2) -> str:
    mean, se = stat
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def _exp(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of one axis: each point's simulate and LightGBM figures, the CPU ratio, and the fitted exponents."""
    run = runs[-1]
    axis = run["parameters"]["axis"]
    points = run["results"].get("points")
    s = summary(points) if points else run["results"]["summary"]  # the points, where recorded, fitted as now
    sim = {r["value"]: r for r in s["fvtree"]["points"]}
    lgb = {r["value"]: r for r in s["lightgbm-user"]["points"]}
    lines = [
        f"| {axis} | simulate train s | CPU s | prep s | peak MiB | LightGBM train s | CPU s | peak MiB | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for value, r in sim.items():
        g = lgb.get(value)
        ratio = f"{r['train_cpu_seconds'][0] / g['train_cpu_seconds'][0]:.2f}x" if g else "-"
        lg = [_ms(g["train_seconds"]), _ms(g["train_cpu_seconds"]), _ms(g["peak_rss_mb"], 0)] if g else ["-", "-", "-"]
        lines.append(
            f"| {value:,} | {_ms(r['train_seconds'])} | {_ms(r['train_cpu_seconds'])} | {_ms(r['prep_seconds'])} "
            f"| {_ms(r['peak_rss_mb'], 0)} | {' | '.join(lg)} | {ratio} |"
        )
    sim_s, lgb_s = s["fvtree"], s["lightgbm-user"]
    lines += [
        "",
        f"Growth exponent against {axis}, fitted over every point (between the two largest points): CPU seconds "
        f"simulate {_exp(sim_s['cpu_exponent'])} ({_exp(sim_s.get('cpu_exponent_top'))}), LightGBM "
        f"{_exp(lgb_s['cpu_exponent'])} ({_exp(lgb_s.get('cpu_exponent_top'))}); peak memory simulate "
        f"{_exp(sim_s['memory_exponent'])} ({_exp(sim_s.get('memory_exponent_top'))}), LightGBM "
        f"{_exp(lgb_s['memory_exponent'])} ({_exp(lgb_s.get('memory_exponent_top'))}).",
    ]
    if axis == "parties" and any(v > EXACT_MAX_PARTIES for v in sim):
        lines += [
            "",
            f"Above {EXACT_MAX_PARTIES} parties every split's Shapley values are estimated, as the contract estimates "
            f"them, from K = {PERMUTATIONS} orders of the parties (``ledger.spec.shapley_estimate``): K * M exact "
            "split gains and K * (M - 1) keccak256 draws a split, which set the time from there on.",
        ]
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], path: Any) -> None:
    """CPU seconds and peak memory against the axis, log-log, both systems (mean ± standard error)."""
    run = runs[-1]
    axis = run["parameters"]["axis"]
    s = run["results"]["summary"]
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
    for i, name in enumerate(RUNS):
        pts = s[name]["points"]
        xs = [p["value"] for p in pts]
        for ax, key in ((left, "train_cpu_seconds"), (right, "peak_rss_mb")):
            ax.errorbar(
                xs,
                [p[key][0] for p in pts],
                yerr=[p[key][1] for p in pts],
                marker="o",
                color=f"C{i}",
                label=LABELS[name],
            )
    for ax, title in ((left, "training CPU seconds"), (right, "peak memory, MiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(axis)
        ax.set_title(title, fontsize=10)
    left.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    raise SystemExit(main())
