"""The kernels one party computes with, loaded (or compiled) before anything waits for them.

A party node loads them on a thread while it joins and waits for its start (``node.party``), and the fork server
before it forks the parties (``deploy.party_forks``), without importing the simulator; ``node.sim.warmup`` loads these
and the simulator's own before a timed simulation."""

from __future__ import annotations

import numpy as np

from fgbdt_chain.node.kernels.bucketing import bucket_counts_by_feature
from fgbdt_chain.node.kernels.column_stats import column_stats
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, votes_from_gains
from fgbdt_chain.node.kernels.psd_leaves import leaves_of
from fgbdt_chain.node.protocol import resolve, verify


def warm_up(simulator: bool = False) -> None:
    """Load (or compile) the kernels on tiny inputs: the histograms' (``node.kernels.histogram``), the contract side's
    (``resolve``) and the verifiers' (``verify``).

    ``simulator``: also the verifiers' checks of every party at once (``verify.measure_many``), which only the
    simulator runs. A party node leaves out every kernel of the simulator's: loading them took the fork server's load
    from 0.9 to 2.2 s, and every party started that much later on chain (measured)."""
    rows = BinnedRows(np.array([[0, 1], [1, 0]], dtype=np.uint8), 2)
    group = np.zeros(2, dtype=np.int64)
    ones = np.ones(2)
    votes_from_gains(rows.best_gains(group, 1, ones, ones, 1.0))
    groups = rows.groups(group, 1)
    rows.group_candidates(groups, np.zeros((1, 1), dtype=np.int64), ones, ones)
    rows.group_candidates_fixed(groups, np.zeros((1, 1), dtype=np.int64), FixedRows.of(ones, ones))
    rows.split_groups(groups, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.ones(2, np.int64), group)
    resolve.warm_up()
    verify.warm_up(simulator)
    X, tiny = np.zeros((1, 1)), np.zeros(1, dtype=np.int64)  # the schema, the binning sketch and the PSDs
    column_stats(X, 1.0)
    bucket_counts_by_feature(X, [np.zeros(1)])
    leaves_of(X, np.zeros(1), (tiny - 1, tiny, tiny, tiny), np.zeros(1), 0)
