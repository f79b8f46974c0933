"""The trainers of the simulator's own algorithms and of the seed systems, as ``node.sim.algorithms`` names them:
each trains on a :class:`~fgbdt_chain.node.sim.algorithms.Job` and adds its figures to the job's report.

Why one function per family and not per name: the four protocol variants differ only inside ``Federation`` (how a
level's candidates are chosen), and the seed systems share one interface (``node.baselines.seed_systems``), which
imports each system when it first trains.
"""

from __future__ import annotations

import dataclasses
import time

from fgbdt_chain.node.baselines.seed_systems import train_seed
from fgbdt_chain.node.model.trees import slot_widths
from fgbdt_chain.node.privacy.accountant import LeafPlan
from fgbdt_chain.node.sim.algorithms import Job, Trained
from fgbdt_chain.node.sim.experiment import (
    contributions_report,
    endorsement_report,
    evaluate,
    federation,
    make_model,
    publishes_psds,
    seed_inputs,
)
from fgbdt_chain.node.sim.random_split import train_random_split


def federated(job: Job) -> Trained:
    """The protocol (``node.sim.fvtree.Federation``): the model, every party's contributions, who stopped taking part,
    and what each party sent (its bin sketch and, when published, its PSD, before training)."""
    prep, p, c, report = job.prep, job.prep.params, job.prep.config, job.report
    fed = federation(prep, job.algo, keep_levels=job.keep_levels, attacks=job.attacks, observer=job.observer)
    start = time.perf_counter()
    result = fed.train(job.progress)
    seconds = time.perf_counter() - start
    model = make_model(prep, result, job.algo)
    if prep.test.n_rows:  # the Python API's train may have no test rows
        report.update(evaluate(p, prep.test.y, model.predict(prep.test.X)))
    report["contributions"] = contributions_report(result)
    report["endorsement"] = endorsement_report(result, job.attacks)
    setup = list(prep.sketch_bytes or [0] * c.parties)
    if prep.psd_bytes is not None and publishes_psds(job.algo, fed.endorsement):
        setup = [s + b for s, b in zip(setup, prep.psd_bytes, strict=True)]
    report["comm_bytes_per_party"] = [int(x) for x in result.comm_bytes]
    report["comm_bytes_per_party_per_tree"] = [float(x) for x in result.comm_bytes_per_tree]
    report["setup_bytes_per_party"] = setup
    return Trained(seconds, model, result)


def random_split(job: Job) -> Trained:
    """Random-split trees with (private) leaves (``node.sim.random_split``), at the lambda asked for: their noise
    sets its own regularisation. A regression task's scores start at the midpoint of its label range (public)."""
    prep, p, c, report = job.prep, job.prep.params, job.prep.config, job.report
    assert isinstance(job.privacy, LeafPlan)  # their privacy: a leaf plan, already in the report
    lam = p.lam if prep.lam_given is None else prep.lam_given
    start = time.perf_counter()
    rs = train_random_split(
        prep.party_slots(),
        prep.party_y(),
        dataclasses.replace(p, lam=lam),
        slot_widths(prep.edges),
        job.privacy,
        c.seed,
        c.tree_features,
        noise_seed=c.noise_seed,
        progress=job.progress,
        base_score=sum(prep.label_range) / 2 if p.objective == "regression" else 0.0,
    )
    seconds = time.perf_counter() - start
    model = make_model(prep, rs.trees, job.algo)
    if prep.test.n_rows:
        report.update(evaluate(p, prep.test.y, model.predict(prep.test.X)))
    report["params"]["lam"] = rs.lam
    report["params"]["tree_features"] = rs.tree_features
    report["comm_bytes_per_party_per_tree"] = [rs.comm_bytes_per_party_per_tree] * c.parties
    return Trained(seconds, model)


def seed_system(job: Job) -> Trained:
    """A seed system on the run's parties, bins and test rows: its predictions, its own count of what each party
    sent, what its paper reports, and its trees when they are on the task's bins."""
    prep, p, report = job.prep, job.prep.params, job.report
    inputs = seed_inputs(prep, job.threads)
    start = time.perf_counter()
    seed_run = train_seed(job.algo, inputs)
    seconds = time.perf_counter() - start
    if prep.test.n_rows:
        report.update(evaluate(p, prep.test.y, seed_run.test_pred))
    model = make_model(prep, seed_run.trees, job.algo) if seed_run.trees is not None else None
    report["comm_bytes_per_party_per_tree"] = [float(b) for b in seed_run.comm_bytes_per_party_per_tree]
    report["comm_formula"] = seed_run.comm_formula
    report["details"] = seed_run.details
    return Trained(seconds, model)
