"""Every value a party releases in a private task, with its mechanism, sensitivity and budget, or why it is public.

A guarantee "for all it releases" is only as good as the list of what is released. This table is that list; the
privacy page (docs/privacy.md) carries it as a table checked against this one, and the tests hold what ``simulate``
and ``fgbdt_chain.train`` report, and what a party of the simulator sends, to it: a value released that is not here
fails them. Neighbouring datasets differ by one row of the party, added or removed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """One released value: who reads it, the mechanism and its sensitivity and budget, or the reason it is public."""

    name: str
    mechanism: str
    sensitivity: str
    budget: str


PUBLIC = "public"
"""Mechanism of a value no row of a party chose: declared, derived from the task's parameters, or from released values
only (post-processing)."""
NOT_RELEASED = "not released under a budget"
"""Mechanism of a value the simulator computes only without a budget, or reports as None under one."""

RELEASES: tuple[Release, ...] = (
    Release("schema ranges", PUBLIC, "-", "declared by the requester or read from its own rows; party rows clipped"),
    Release("integer flags", PUBLIC, "-", "declared by the requester or read from its own rows"),
    Release(
        "label range",
        PUBLIC,
        "-",
        "binary: [0, 1]; regression (random splits only): declared by the requester, party labels clipped",
    ),
    Release("sketch", "discrete Laplace, two stages", "L1 F' per stage", "SPLIT sketch share, pure epsilon"),
    Release("edges", PUBLIC, "-", "post-processing of the sketches and the schema"),
    Release(
        "PSD",
        "discrete Laplace leaf counts and noisy stops",
        "1 per level",
        "SPLIT psd share; weights nothing under one",
    ),
    Release(
        "votes",
        "exponential mechanism over every threshold, sampled exactly",
        "6 + 2^-18 (utilities on a lattice)",
        "SPLIT votes share, zCDP",
    ),
    Release(
        "histograms",
        "discrete Gaussian on fixed-point sums and counts",
        "g in [-1, 1], h <= 1/4 per row",
        "SPLIT histograms share, zCDP",
    ),
    Release(
        "leaf sums",
        "discrete Gaussian on fixed-point sums, summed by secure aggregation",
        "binary: g in [-1, 1], h <= 1/4; regression: g in [-r, r] for r half the label range, h = 1",
        "leaf plan, RDP",
    ),
    Release("masked vectors", "secure aggregation", "-", "uniform given the sum; keys from entropy"),
    Release("model", PUBLIC, "-", "post-processing of edges, votes, histograms or leaf sums"),
    Release("contributions", PUBLIC, "-", "post-processing of the released histograms at neutral credit"),
    Release("credits", NOT_RELEASED, "-", "neutral: endorsement keeps the exact rules only"),
    Release("statistics", NOT_RELEASED, "-", "the verifiers measure nothing under a budget"),
    Release("distribution weights", NOT_RELEASED, "-", "rows weigh min(delta, 1) each under a budget"),
    Release("refusals", PUBLIC, "-", "exact rules checked on released histograms only"),
    Release("counts", NOT_RELEASED, "-", "rows and positives per party, pooled rows: None in reports"),
    Release("communication bytes", PUBLIC, "-", "sizes of released messages (post-processing)"),
    Release("report parameters", PUBLIC, "-", "the task's parameters and the privacy plan"),
    Release("test metrics", PUBLIC, "-", "the model on the requester's test rows"),
    Release("timings", PUBLIC, "-", "wall-clock of the run: a side channel outside the guarantee"),
    Release(
        "baselines",
        "none",
        "-",
        "simulate's comparison on exact rows (--no-baselines): never a party's release; the seed systems' own "
        "random draws (SimFL's hashes, FedXGBllr's initial weights) are no privacy noise and run under no budget",
    ),
)
"""What a party releases in a private task, each once."""

REPORT_KEYS: dict[str, str] = {
    "algo": "report parameters",
    "dataset": "report parameters",
    "test_dataset": "report parameters",
    "parties": "report parameters",
    "theta": "report parameters",
    "feature_skew": "report parameters",
    "trees": "report parameters",
    "depth": "report parameters",
    "bins": "report parameters",
    "seed": "report parameters",
    "params": "report parameters",
    "privacy": "report parameters",
    "train_rows": "counts",
    "test_rows": "test metrics",
    "features": "report parameters",
    "train_seconds": "timings",
    "prep_seconds": "timings",
    "per_party": "counts",
    "test_error": "test metrics",
    "test_auc": "test metrics",
    "test_logloss": "test metrics",
    "test_rmse": "test metrics",
    "contributions": "contributions",
    "endorsement": "refusals",
    "comm_bytes_per_party": "communication bytes",
    "comm_bytes_per_party_per_tree": "communication bytes",
    "setup_bytes_per_party": "communication bytes",
    "random_split": "report parameters",
    "centralized": "baselines",
    "lightgbm": "baselines",
    "lightgbm_defaults": "baselines",
}
"""Every key of a private run's report (``node.sim.experiment.run``) and the release it reports."""

PER_PARTY_KEYS: dict[str, str] = {
    "party": "report parameters",
    "rows": "counts",
    "positives": "counts",
    "standalone_test_error": "baselines",
    "standalone_test_auc": "baselines",
}
"""The keys of each ``per_party`` entry; ``counts`` are None under a budget."""


def release(name: str) -> Release:
    """The inventory's entry ``name``; KeyError for a value the inventory does not list."""
    for r in RELEASES:
        if r.name == name:
            return r
    raise KeyError(f"{name!r} is released but not in node.privacy.inventory.RELEASES")


def markdown_table() -> str:
    """The inventory as the privacy page's table."""
    lines = ["| released value | mechanism | sensitivity | budget or why public |", "| --- | --- | --- | --- |"]
    lines += [f"| {r.name} | {r.mechanism} | {r.sensitivity} | {r.budget} |" for r in RELEASES]
    return "\n".join(lines)
