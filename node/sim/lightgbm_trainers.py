"""The trainers of the LightGBM baselines (``node.baselines.centralized``), as ``node.sim.algorithms`` names them.

Why a module of their own: it loads LightGBM, which a run of the protocol does not need, and ``node.sim.algorithms``
imports a trainer's module only when the algorithm first runs.
"""

from __future__ import annotations

import time

import numpy as np

from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.sim.algorithms import Job, Trained, algorithm
from fgbdt_chain.node.sim.experiment import evaluate, standalone_errors


def standalone(job: Job) -> Trained:
    """Each party alone: the mean over the parties of their test metrics (each party's own in ``per_party``)."""
    if job.standalone is None:
        job.standalone = standalone_errors(job.prep, job.threads)
    for key in job.standalone[0]:
        job.report[key] = float(np.mean([s[key] for s in job.standalone]))
    return Trained(0.0)


def centralized(job: Job) -> Trained:
    """All training rows on the task's bins, with the matched parameters: what federating costs."""
    prep, p = job.prep, job.prep.params
    start = time.perf_counter()
    booster = baselines.train_lightgbm(prep.train_slots, prep.train.y, p, threads=job.threads, seed=prep.config.seed)
    seconds = time.perf_counter() - start
    job.report.update(evaluate(p, prep.test.y, baselines.predict_lightgbm(booster, prep.test_slots, p)))
    return Trained(seconds)


def raw_lightgbm(job: Job) -> Trained:
    """All training rows binned by LightGBM itself (``centralized.RAW_BASELINES``): with the task's shape, or with
    its own when the algorithm trains one; the report then gives what it trained."""
    prep, p, report = job.prep, job.prep.params, job.report
    own = algorithm(job.algo).own_shape is not None
    start = time.perf_counter()
    lp = baselines.RAW_BASELINES[job.algo](p, threads=job.threads, seed=prep.config.seed)
    booster = baselines.raw_booster(prep.train.X, prep.train.y, lp, None if own else p.trees)
    seconds = time.perf_counter() - start
    report.update(evaluate(p, prep.test.y, np.asarray(booster.predict(prep.test.X), dtype=np.float64)))
    report["lightgbm_params"] = lp
    if own:  # what it trained, not the task's shape: its own rounds, leaf-wise trees with no depth limit
        report["trees"], report["depth"] = booster.num_trees(), None
    return Trained(seconds)
