"""The command line and loop of the benchmarks that train honest federations over a grid (data set, M, theta, seed)
and record their ``runs`` (``bench.record``) with a markdown summary (``bench.negative_shapley``,
``bench.shapley_utility``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bench.datasets import load
from bench.record import Run, parameters_of
from fgbdt_chain.ledger.spec.task_params import DEFAULT_VOTED_TREES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare

Measure = Callable[[str, int, float, int, int, int], dict[str, Any]]
"""(data set, parties, theta, seed, trees, depth) -> one run's record."""
Markdown = Callable[[list[dict[str, Any]]], str]
"""runs -> the markdown summary."""


def prepared(name: str, parties: int, theta: float, seed: int, trees: int, depth: int) -> Prepared:
    """One grid point's parties: the data set's seeded split, the default protocol (votes for the first
    ``DEFAULT_VOTED_TREES`` trees, then drawn candidates) at ``trees`` and ``depth``."""
    train, test = load(name, seed)
    params = TrainParams(trees=trees, depth=depth, voted_trees=DEFAULT_VOTED_TREES)
    return prepare(train, test, params, PrepConfig(parties=parties, theta=theta, seed=seed))


def parser(doc: str | None, bench: str) -> argparse.ArgumentParser:
    """The grid's options; results go to ``bench/results/<bench>.json`` unless ``--out`` says otherwise."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="credit,a9a,higgs,susy")
    ap.add_argument("--parties", default="2,4")
    ap.add_argument("--thetas", default="0.8")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--out", help=f"results file (default bench/results/{bench}.json, bench.record)")
    return ap


def run(bench: str, args: argparse.Namespace, measure: Measure, markdown: Markdown) -> int:
    """Every grid point in order, recorded as it goes (``bench.record``), then the markdown summary."""
    record = Run(bench, parameters_of(args), args.out)
    runs = []
    for d in args.datasets.split(","):
        for m in args.parties.split(","):
            for theta in args.thetas.split(","):
                for s in args.seeds.split(","):
                    runs.append(measure(d, int(m), float(theta), int(s), args.trees, args.depth))
                    print(f"{d} M={m} theta={theta} seed={s}", flush=True)
                    record.save({"runs": runs}, complete=False)  # a stopped sweep keeps what it measured
    record.save({"runs": runs})
    print(markdown(runs))
    return 0
