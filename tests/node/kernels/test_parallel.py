"""The simulator's parties on several threads (``node.kernels.parallel``): the same federation, bit for bit."""

from __future__ import annotations

import gc
import pickle
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels import party_kernels
from fgbdt_chain.node.kernels.parallel import PartyThreads, balanced_blocks
from fgbdt_chain.node.protocol import verify
from fgbdt_chain.node.sim import fvtree
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, federation, prepare
from fgbdt_chain.node.sim.fvtree import TrainResult


def test_blocks_balance_the_rows_and_keep_party_order() -> None:
    assert balanced_blocks([10672, 10672, 5609, 5608], 2) == [[0, 2], [1, 3]]
    assert balanced_blocks([5, 1, 1, 1], 2) == [[0], [1, 2, 3]]
    assert balanced_blocks([3, 3], 8) == [[0], [1]]
    assert balanced_blocks([4, 2, 2], 1) == [[0, 1, 2]]
    assert balanced_blocks([], 2) == [[]]


def test_map_returns_in_party_order_and_raises_the_first_partys_error() -> None:
    threads = PartyThreads([5, 4, 3, 2, 1], 2)
    assert threads.map(lambda i: i * i) == [0, 1, 4, 9, 16]

    def fail(i: int) -> int:
        if i in (1, 3, 4):
            raise ValueError(f"party {i}")
        return i

    with pytest.raises(ValueError, match="party 1"):
        threads.map(fail)
    with pytest.raises(ValueError, match="at least 1"):
        PartyThreads([1, 2], 0)


def test_idle_workers_keep_nothing_of_the_last_task_alive() -> None:
    """A worker waiting for its next task holds no reference to the last one: in the API server a finished
    training's federation (rows, sums, gradients) must be freed, not kept until the worker is reused."""

    class Big:
        def work(self, i: int) -> int:
            return i

    big = Big()
    ref = weakref.ref(big)
    assert PartyThreads([1, 1], 2).map(big.work) == [0, 1]
    del big
    gc.collect()
    assert ref() is None


def _prep(endorse: str) -> Prepared:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 5))
    y = (X[:, 0] - X[:, 1] + 0.5 * X[:, 2] + 0.4 * rng.normal(size=3000) > 0).astype(float)
    config = PrepConfig(parties=4, theta=0.8, seed=0, psd_max_rows=40, endorse=endorse)
    return prepare(Dataset(X[:2500], y[:2500]), Dataset(X[2500:], y[2500:]), TrainParams(trees=6, depth=3), config)


def _train(prep: Prepared, threads: int, attacks: dict[int, Attack]) -> tuple[TrainResult, list[bytes]]:
    """The record and every level's view (pickled: arrays, verdicts and statistics compared bit for bit)."""
    views: list[bytes] = []
    fed = federation(prep, "fvtree", keep_levels=True, attacks=attacks, threads=threads)
    fed.level_observer = lambda view: views.append(pickle.dumps(view))
    fed.measure_every_level = True  # the verifiers' statistics at every level, on the threads too
    return fed.train(), views


@pytest.mark.parametrize("endorse", ["statistical", "overlap", "none"])
def test_threads_train_the_sequential_federation_bit_for_bit(endorse: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Votes, verdicts, statistics, refusals (in party order), trees and contributions are the sequential loop's,
    on two and on three threads (uneven blocks); and the work did go to the cores: the overlap rule's checks to the
    threads, the statistical rule's statistics and the parties' level kernels to their parallel variants
    (``node.kernels.party_kernels``)."""
    verifiers: set[int] = set()
    decide = fvtree.decide
    parallel_calls: list[str] = []

    def recorded(*args: Any) -> Any:
        verifiers.add(threading.get_ident())
        return decide(*args)

    monkeypatch.setattr(fvtree, "decide", recorded)
    for module, name in (
        (party_kernels, "_gains_parallel"),
        (party_kernels, "_candidates_parallel"),
        (party_kernels, "_partition_parallel"),
        (verify, "_measure_parallel"),
    ):
        monkeypatch.setattr(module, name, _counting(getattr(module, name), name, parallel_calls))
    prep = _prep(endorse)
    # refused at the same root by an exact rule and by the verifiers, then by the carry rule
    attacks = {0: Attack("gradients", 4.0), 2: Attack("sign-flip", 1.0), 3: Attack("counts", 2.0, start_tree=2)}
    one, one_views = _train(prep, 1, attacks)
    assert verifiers <= {threading.get_ident()} and not parallel_calls
    if endorse != "none":
        assert [(r.party, r.tree, r.level) for r in one.refusals[:2]] == [(0, 0, 0), (2, 0, 0)]
    for threads in (2, 3):
        verifiers.clear()
        many, views = _train(prep, threads, attacks)
        # the overlap rule's checks on threads, the statistical rule's statistics in one parallel call
        assert len(verifiers) == (threads if endorse == "overlap" else 0)
        assert ("_measure_parallel" in parallel_calls) == (endorse == "statistical")
        assert {"_gains_parallel", "_candidates_parallel", "_partition_parallel"} <= set(parallel_calls)
        parallel_calls.clear()
        assert pickle.dumps(many.trees) == pickle.dumps(one.trees)
        assert (many.phi, many.kappa, many.total) == (one.phi, one.kappa, one.total)
        assert many.per_tree_total == one.per_tree_total
        assert (many.refusals, many.credits, many.finished) == (one.refusals, one.credits, one.finished)
        assert pickle.dumps(many.levels) == pickle.dumps(one.levels)
        assert views == one_views


def _counting(kernel: Callable[..., None], name: str, calls: list[str]) -> Callable[..., None]:
    def run(*args: Any) -> None:
        calls.append(name)
        kernel(*args)

    return run


@pytest.mark.parametrize("endorse", ["statistical", "overlap"])
def test_the_endorsements_decided_at_once_below_a_root_are_the_full_loops(endorse: str) -> None:
    """Without an observer, the levels below a root under the statistical rule skip the verifiers' twelve decisions
    (``Federation._submissions``); an observer that reads nothing makes every level take the full loop. Both train
    the same record, with attackers refused at a root and by the carry rule."""
    prep = _prep(endorse)
    attacks = {0: Attack("gradients", 4.0), 2: Attack("targeted", 3.0), 3: Attack("counts", 2.0, start_tree=2)}
    records = []
    for observe in (False, True):
        fed = federation(prep, "fvtree", keep_levels=True, attacks=attacks, threads=1)
        if observe:
            fed.level_observer = lambda view: None
        records.append(fed.train())
    quick, full = records
    assert full.refusals and (quick.refusals, quick.credits, quick.finished) == (
        full.refusals,
        full.credits,
        full.finished,
    )
    assert pickle.dumps(quick.trees) == pickle.dumps(full.trees)
    assert (quick.phi, quick.kappa, quick.total, quick.per_tree_total) == (
        full.phi,
        full.kappa,
        full.total,
        full.per_tree_total,
    )
    assert pickle.dumps(quick.levels) == pickle.dumps(full.levels)
