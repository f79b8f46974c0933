"""Every kernel loaded (or compiled) before a timed run, so that the clock measures training, not the JIT.

It sits above the kernels, the protocol steps and the simulator because it touches all of them; nothing below
imports it."""

from __future__ import annotations

import numpy as np

from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, votes_from_gains
from fgbdt_chain.node.protocol import resolve, verify
from fgbdt_chain.node.sim import fvtree


def warm_up(simulator: bool = True) -> None:
    """Load (or compile) the kernels on tiny inputs: the histograms', the contract side's (``resolve``), the
    verifiers' (``verify``) and the simulator's (``fvtree``).

    ``simulator=False``: only what one party node runs. The simulator's kernels for every party at once
    (``node.kernels.party_kernels``, ``verify.measure_many``) took the fork server's load from 0.9 to 2.2 s, and every
    party started that much later on chain (measured)."""
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
    fvtree.warm_up(simulator)
