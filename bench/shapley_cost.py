"""Per-split cost of exact split Shapley for M = 2..16 parties, and the cost model ``fgbdt simulate`` warns with.

Exact Shapley sums over all 2^M coalitions (equation 8, exact), so its cost, not the histograms, is what limits M. This
measures three kernels on one split with realistic fixed-point sums (18-decimal gradients of a few thousand rows):

* ``ledger.spec.reference.split_shapley``, the reference the contract is checked against;
* ``ledger.spec.reference.split_shapley_fast``, the Python path (``node.protocol.resolve``), for the splits outside the
compiled
  kernel's bounds;
* ``compiled``: ``node.kernels.shapley_kernel`` on 256-bit integers, what ``fgbdt simulate`` runs for the splits within
its
  bounds (nearly all), called as ``resolve_level`` calls it and checked against the Python path at every M.

Each M is timed after one warm-up call (the fast kernel caches a per-M plan on first use; its build time is reported
apart), as the best of several repeats. A least-squares fit of ``t(M) = a * 2^M + b * M * 2^M`` (the utilities cost
one step per coalition, the per-party accumulators one step per party and coalition) over M >= 6, where the constant
overhead no longer matters, gives the constants that ``node.protocol.shapley_cost.SHAPLEY_COST`` uses for its warning
(the compiled kernel's fit).

    python -m bench.shapley_cost [--max-parties 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.shapley_kernel import level_phis
from fgbdt_chain.node.protocol.shapley_cost import SHAPLEY_COST, shapley_seconds
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run

Kernel = Callable[[Sequence[int], Sequence[int], Sequence[int], Sequence[int], int], tuple[int, list[int]]]


def compiled(
    g_left: Sequence[int], h_left: Sequence[int], g_right: Sequence[int], h_right: Sequence[int], lam: int
) -> tuple[int, list[int]]:
    """``node.kernels.shapley_kernel`` on one split, as ``resolve_level`` calls it: the sums as limbs (left, and left
    plus right for the whole node), neutral credits; what it returns is checked against the fast Python kernel."""
    m = len(g_left)
    at = np.zeros((5, m, 1), dtype=np.int64)
    whole = np.zeros((5, m, 1), dtype=np.int64)
    for q, (left, right) in enumerate(((g_left, g_right), (h_left, h_right))):
        at[2 * q, :, 0], at[2 * q + 1, :, 0] = limbs.split(left)
        whole[2 * q, :, 0], whole[2 * q + 1, :, 0] = limbs.split([a + b for a, b in zip(left, right, strict=True)])
    result = level_phis(at, whole, [ref.NEUTRAL] * m, ref.HESSIAN_SECOND_ORDER, lam)[0]
    if result is None:
        raise ValueError("the split is outside the compiled kernel's bounds")
    return result


KERNELS: dict[str, Kernel] = {
    "compiled": compiled,
    "split_shapley_fast": ref.split_shapley_fast,
    "split_shapley": ref.split_shapley,
}


def split_sums(m: int, seed: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """One split's per-party left/right sums in fixed point: gradients of up to ~2000 rows each side, hessians > 0."""
    rng = np.random.default_rng(seed)

    def fixed(values: np.ndarray) -> list[int]:
        return [ref.to_fixed(float(v)) for v in values]

    rows_left, rows_right = rng.integers(200, 2000, m), rng.integers(200, 2000, m)
    return (
        fixed(rng.normal(0.0, 0.3, m) * rows_left),
        fixed(rng.uniform(0.1, 0.25, m) * rows_left),
        fixed(rng.normal(0.0, 0.3, m) * rows_right),
        fixed(rng.uniform(0.1, 0.25, m) * rows_right),
    )


def time_kernel(kernel: Kernel, m: int, min_seconds: float, seed: int) -> dict[str, float]:
    """Seconds of the first call (plan build included) and the best per-call time of the repeats after it."""
    args = split_sums(m, seed)
    lam = ref.to_fixed(0.1)
    start = time.perf_counter()
    kernel(*args, lam)
    first = time.perf_counter() - start
    times: list[float] = []
    spent = 0.0
    while spent < min_seconds or len(times) < 3:
        start = time.perf_counter()
        kernel(*args, lam)
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return {"first_call_s": first, "per_split_s": min(times), "repeats": len(times)}


def fit(ms: Sequence[int], seconds: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``(a, b)`` of ``t = a 2^M + b M 2^M``, weighted by 1/t so that every M counts alike, with
    ``b >= 0`` (a cost cannot fall with the parties; the compiled kernel's per-party accumulators are too cheap to
    show, and a free fit makes ``b`` slightly negative): ``b = 0`` and ``a`` alone when the free fit's ``b`` is."""
    m = np.asarray(ms, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    design = np.stack([2.0**m, m * 2.0**m], axis=1) / t[:, None]
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if b < 0:
        (a,), *_ = np.linalg.lstsq(design[:, :1], np.ones_like(t), rcond=None)
        b = 0.0
    return float(a), float(b)


def simulate_check(m: int, seed: int) -> dict[str, float]:
    """A whole simulated federation (pvtree, 4 trees of depth 4, no endorsement) at M parties: the seconds of its
    contract phase (top-2, best split, leaves and Shapley) against the estimate for the splits it made."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(4000, 6))
    y = (X[:, 0] - X[:, 1] + 0.5 * rng.normal(size=4000) > 0).astype(float)
    train, test = Dataset(X[:3000], y[:3000], name="synthetic"), Dataset(X[3000:], y[3000:], name="synthetic")
    params = TrainParams(trees=4, depth=4, bins=8, min_rows=5)
    prep = prepare(train, test, params, PrepConfig(parties=m, theta=0.8, seed=seed, endorse="none"))
    _, model, result = run(prep, "pvtree")
    assert model is not None and result is not None
    splits = sum(len(tree.internal_ids()) for tree in model.trees)
    contract = sum(v for k, v in result.seconds.items() if k.startswith("contract"))
    return {"parties": m, "splits": splits, "contract_s": contract, "estimate_s": shapley_seconds(m, 1, 1) * splits}


def model_seconds(a: float, b: float, m: int) -> float:
    return a * 2.0**m + b * m * 2.0**m


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-parties", type=int, default=EXACT_MAX_PARTIES)
    ap.add_argument("--min-seconds", type=float, default=0.3, help="time spent per kernel and M (at least 3 calls)")
    ap.add_argument("--fit-from", type=int, default=6, help="smallest M in the fit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="results file (default bench/results/shapley_cost.json, bench.record)")
    args = ap.parse_args(argv)
    record = Run("shapley_cost", parameters_of(args), args.out, argv=None if argv is None else list(argv))
    ms = list(range(2, args.max_parties + 1))
    rows: dict[str, dict[int, dict[str, float]]] = {}
    for m in ms:  # the compiled kernel's numbers are the Python path's
        sums, lam = split_sums(m, args.seed + m), ref.to_fixed(0.1)
        if compiled(*sums, lam) != ref.split_shapley_fast(*sums, lam):
            raise SystemExit(f"the compiled kernel differs from the Python path at M = {m}")
    for name, kernel in KERNELS.items():
        rows[name] = {}
        for m in ms:
            rows[name][m] = time_kernel(kernel, m, args.min_seconds, args.seed + m)
            print(f"{name} M={m}: {rows[name][m]['per_split_s'] * 1e3:.3f} ms/split", file=sys.stderr, flush=True)
    checks = [simulate_check(m, args.seed) for m in (12, 14, 16) if m <= args.max_parties]
    fits = {
        name: fit([m for m in ms if m >= args.fit_from], [r[m]["per_split_s"] for m in ms if m >= args.fit_from])
        for name, r in rows.items()
    }
    results = {
        "fit": {k: {"a": a, "b": b} for k, (a, b) in fits.items()},
        "fit_from": args.fit_from,
        "simulate_check": checks,
        "timings": {k: {str(m): v for m, v in r.items()} for k, r in rows.items()},
    }
    record.save(results)
    print(tables([{"parameters": record.parameters, "results": results}]))
    return 0


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of a recorded run (the last: timings of one process, whose best-of-repeats is its own estimate)."""
    r = runs[-1]["results"]
    timings, fits = r["timings"], {k: (v["a"], v["b"]) for k, v in r["fit"].items()}
    ms = sorted(int(m) for m in timings["compiled"])
    lines = [
        "Seconds per split of exact split Shapley on one core (best of repeats after a warm-up call), the fitted model "
        f"t(M) = a 2^M + b M 2^M (fit over M >= {r.get('fit_from', 6)}) and the model's value.",
        "",
        "| M | coalitions | compiled: s/split | compiled: model | fast: s/split | fast: model | "
        "fast: first call (plan) | reference: s/split | reference: model |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ca, cb = fits["compiled"]
    fa, fb = fits["split_shapley_fast"]
    ra, rb = fits["split_shapley"]
    for m in ms:
        comp, fast, slow = (timings[k][str(m)] for k in ("compiled", "split_shapley_fast", "split_shapley"))
        lines.append(
            f"| {m} | {2**m} | {comp['per_split_s']:.3g} | {model_seconds(ca, cb, m):.3g} | "
            f"{fast['per_split_s']:.3g} | {model_seconds(fa, fb, m):.3g} | "
            f"{fast['first_call_s']:.3g} | {slow['per_split_s']:.3g} | {model_seconds(ra, rb, m):.3g} |"
        )
    lines += [
        "",
        f"- compiled (`node.kernels.shapley_kernel`, what `fgbdt simulate` runs for the splits within its bounds): "
        f"a = {ca:.3g} s, b = {cb:.3g} s",
        f"- split_shapley_fast (the Python path): a = {fa:.3g} s, b = {fb:.3g} s",
        f"- split_shapley (the reference): a = {ra:.3g} s, b = {rb:.3g} s",
        f"- the constants `fgbdt simulate` warns with (`node.protocol.shapley_cost.SHAPLEY_COST`): "
        f"a = {SHAPLEY_COST[0]:.3g} s, b = {SHAPLEY_COST[1]:.3g} s",
        "",
        "A tree of depth d has at most 2^d - 1 splits, so simulate's Shapley time is at most "
        "trees (2^d - 1) t(M): at M = 16, 500 trees of depth 8 is "
        f"{500 * 255 * model_seconds(ca, cb, 16) / 3600:.1f} h by the compiled kernel's fitted model.",
        "",
        "Check on whole simulated federations (pvtree, 3000 synthetic rows, 4 trees of depth 4, no endorsement): "
        "the contract phase (top-2, best split, leaves, Shapley) against `shapley_seconds` for the splits made.",
        "",
        "| M | splits | contract phase s | estimate s |",
        "|---|---|---|---|",
        *(
            f"| {c['parties']} | {c['splits']} | {c['contract_s']:.2f} | {c['estimate_s']:.2f} |"
            for c in r["simulate_check"]
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
