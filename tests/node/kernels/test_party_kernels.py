"""Every party's level kernel in one call (``node.kernels.party_kernels``) against each party's own kernel, bit for
bit."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.kernels import party_kernels
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, RowGroups, votes_from_gains
from fgbdt_chain.node.kernels.party_kernels import PartyKernels
from fgbdt_chain.node.sim.fvtree import Federation


def _parties(seed: int, sizes: list[int], features: int = 6, nbins: int = 5) -> list[BinnedRows]:
    """Parties of different sizes and layouts: sparse columns around a common slot (short and long rows), a
    constant column and one spread over every slot."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        slots = np.where(rng.random((n, features)) < 0.7, 0, rng.integers(0, nbins, (n, features)))
        slots[:, 1] = 2  # constant
        slots[:, 2] = rng.integers(0, nbins, n)
        out.append(BinnedRows(slots.astype(np.uint8), nbins))
    return out


def _rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, FixedRows]:
    g = rng.normal(size=n)
    h = rng.uniform(0.05, 0.25, n)
    return g * rng.uniform(0.5, 2, n), h, FixedRows.of(g, h, rng.integers(1, 3, n))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_tree_grown_by_the_one_call_kernels_is_each_partys_own(threads: int) -> None:
    """Level by level with random splits (leaves among them): the gains, the exact candidate sums, the rows' groups,
    node ids and places are the per-party kernels' (``BinnedRows``), inactive parties left at -inf."""
    rng = np.random.default_rng(3)
    sizes = [400, 37, 250]
    rows = _parties(1, sizes)
    kernels = PartyKernels(rows, threads)
    for _ in range(2):  # a second tree reuses the buffers from a fresh root
        inputs = [_rows(rng, n) for n in sizes]
        levels = kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
        groups = [RowGroups.everything(n) for n in sizes]
        k_of = [np.zeros(n, dtype=np.int64) for n in sizes]
        ids = [np.ones(n, dtype=np.int64) for n in sizes]
        k = 1
        for level in range(4):
            active = [True, level != 2, True]
            best = levels.best_gains(0.5, 1 + level % 2, active)
            votes = levels.votes(0.5, 1 + level % 2, active)
            assert votes.shape == (len(sizes), k)
            for p, party in enumerate(rows):
                own = party.best_gains(k_of[p], k, inputs[p][0], inputs[p][1], 0.5, 1 + level % 2)
                assert np.array_equal(best[p], own if active[p] else np.full_like(own, -np.inf))
                assert np.array_equal(votes[p], votes_from_gains(own) if active[p] else np.full(k, -1))
            features = rng.integers(0, 6, (k, 2))
            sums = levels.candidates_fixed(features)
            for p, party in enumerate(rows):
                own = party.group_candidates_fixed(groups[p], features, inputs[p][2])
                for mine, theirs in zip(sums, (own.g_hi, own.g_lo, own.h_hi, own.h_lo, own.n), strict=True):
                    assert np.array_equal(mine[p], theirs)
            split_feature = np.where(rng.random(k) < 0.8, rng.integers(0, 6, k), -1)
            if not (split_feature >= 0).any():
                split_feature[0] = 2
            threshold = rng.integers(0, 4, k)
            levels.split(split_feature, threshold)
            for p, party in enumerate(rows):
                groups[p] = party.split_groups(groups[p], split_feature, threshold, ids[p], k_of[p])
                assert np.array_equal(levels.groups(p).order, groups[p].order)
                assert np.array_equal(levels.groups(p).start, groups[p].start)
                assert np.array_equal(kernels.group_of_row[p], k_of[p])
                assert np.array_equal(kernels.node_id[p], ids[p])
            k = 2 * int((split_feature >= 0).sum())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("keep_up_to", [None, 2])
def test_candidate_counts_read_off_the_vote_histograms_are_the_rows_counts(
    threads: int, keep_up_to: int | None
) -> None:
    """Rows that each count one: a level's candidate counts come from its vote histograms (subtracted or summed,
    kept or too wide to keep) where a party voted on the level, else from its rows (a level without votes, a party
    out of the votes, three candidates); every sum is the party's own kernel's, bit for bit."""
    rng = np.random.default_rng(17)
    sizes = [700, 90, 350]
    rows = _parties(9, sizes, features=7, nbins=6)
    kernels = PartyKernels(rows, threads)
    if keep_up_to is not None:
        kernels.KEPT_BYTES = 2 * keep_up_to * sum(int(r.cell_start[-1]) + r.row_cells.shape[1] for r in rows) * 24
    for tree in range(2):
        g = [rng.normal(size=n) for n in sizes]
        h = [rng.uniform(0.05, 0.25, n) for n in sizes]
        fixed = [FixedRows.of(a, b) for a, b in zip(g, h, strict=True)]
        levels = kernels.tree(g, h, fixed)
        assert levels.unit_counts
        groups = [RowGroups.everything(n) for n in sizes]
        ids = [np.ones(n, dtype=np.int64) for n in sizes]
        k_of = [np.zeros(n, dtype=np.int64) for n in sizes]
        k = 1
        for level in range(5):
            if level != 3:  # level 3 takes no votes
                levels.votes(1.0, 1, [True, level != 1, tree == 0 or level != 2])
            features = rng.integers(0, 7, (k, 3 if level == 4 else 2))
            sums = levels.candidates_fixed(features)
            for p, party in enumerate(rows):
                own = party.group_candidates_fixed(groups[p], features, fixed[p])
                for mine, theirs in zip(sums, (own.g_hi, own.g_lo, own.h_hi, own.h_lo, own.n), strict=True):
                    assert np.array_equal(mine[p], theirs)
            split_feature = rng.choice([0, 2, 3, 4, 5, 6], k)
            threshold = rng.integers(0, 5, k)
            levels.split(split_feature, threshold)
            for p, party in enumerate(rows):
                groups[p] = party.split_groups(groups[p], split_feature, threshold, ids[p], k_of[p])
            k = 2 * int((split_feature >= 0).sum())
    weighted = [FixedRows.of(a, b, np.full(a.shape[0], 2)) for a, b in zip(g, h, strict=True)]
    assert not kernels.tree(g, h, weighted).unit_counts  # rows that count two: counted from the rows


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("keep_up_to", [None, 4])
def test_votes_by_subtraction_survive_growing_buffers_and_skipped_levels(threads: int, keep_up_to: int | None) -> None:
    """Nodes split at every level (1, 2, 4, 8 nodes, then 4, 8 and 16: the kept histograms' buffers grow twice,
    copying the level before), one level without votes (a drawn tree's: the next sums from rows), a party out for a
    level, and (with ``keep_up_to``) levels too wide to keep under ``KEPT_BYTES``, then a narrower one: each level's
    votes and gains are what a party node makes from its rows, bit for bit."""
    rng = np.random.default_rng(11)
    sizes = [900, 600]
    rows = _parties(5, sizes, features=8, nbins=6)
    kernels = PartyKernels(rows, threads)
    if keep_up_to is not None:
        kernels.KEPT_BYTES = 2 * keep_up_to * sum(int(r.cell_start[-1]) + r.row_cells.shape[1] for r in rows) * 24
        assert kernels.keeps_levels(keep_up_to) and not kernels.keeps_levels(keep_up_to + 1)
    inputs = [_rows(rng, n) for n in sizes]
    levels = kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
    k_of = [np.zeros(n, dtype=np.int64) for n in sizes]
    ids = [np.ones(n, dtype=np.int64) for n in sizes]
    groups = [RowGroups.everything(n) for n in sizes]
    k = 1
    for level in range(7):
        active = [True, level != 4]
        if level != 1:  # level 1 takes no votes
            best = levels.best_gains(1.0, 1, active)
            again = levels.votes(1.0, 1, active)  # asked twice at one level: the same
            for p, party in enumerate(rows):
                own = party.best_gains(k_of[p], k, inputs[p][0], inputs[p][1], 1.0, 1)
                want = own if active[p] else np.full_like(own, -np.inf)
                assert best[p].tobytes() == want.tobytes()
                assert np.array_equal(again[p], votes_from_gains(own) if active[p] else np.full(k, -1))
        split_feature = rng.choice([0, 2, 3, 4, 5, 6, 7], k)  # every node splits (the constant feature 1 would not)
        if level == 3:  # but two: a narrower level after a wide one
            split_feature[2:] = -1
        threshold = rng.integers(0, 4, k)
        levels.split(split_feature, threshold)
        for p, party in enumerate(rows):
            groups[p] = party.split_groups(groups[p], split_feature, threshold, ids[p], k_of[p])
        k = 2 * int((split_feature >= 0).sum())
    assert kernels._hist_groups == (16 if keep_up_to is None else 8)  # the kept buffers' size: grown, or held back


def test_parties_whose_cell_numbers_need_different_widths_share_one_kernel() -> None:
    """A party with more cells than 16 bits number (int64 cells) next to small ones: one list of the widest type."""
    wide = BinnedRows(np.random.default_rng(0).integers(0, 256, (1000, 300)).astype(np.uint8), 256)
    narrow = BinnedRows(np.zeros((20, 300), dtype=np.uint8), 256)
    assert wide.row_cells.dtype != narrow.row_cells.dtype
    kernels = PartyKernels([wide, narrow], 2)
    rng = np.random.default_rng(1)
    inputs = [_rows(rng, n) for n in (1000, 20)]
    levels = kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
    best = levels.best_gains(1.0, 1, [True, True])
    for p, party in enumerate((wide, narrow)):
        own = party.best_gains(np.zeros(party.n_rows, dtype=np.int64), 1, inputs[p][0], inputs[p][1], 1.0)
        assert np.array_equal(best[p], own)


def test_bad_input_is_refused_with_what_was_wrong() -> None:
    rows = _parties(2, [30, 40])
    kernels = PartyKernels(rows, 2)
    rng = np.random.default_rng(0)
    good = [_rows(rng, n) for n in (30, 40)]
    with pytest.raises(ValueError, match=r"one array per party of its rows \(\[30, 40\]\)"):
        kernels.tree([good[0][0], good[0][0]], [g[1] for g in good], [g[2] for g in good])
    levels = kernels.tree([g[0] for g in good], [g[1] for g in good], [g[2] for g in good])
    with pytest.raises(ValueError, match=r"candidate features must be in \[0, 6\)"):
        levels.candidates_fixed(np.array([[0, 6]]))
    with pytest.raises(ValueError, match=r"shape \(1, C\)"):
        levels.candidates_fixed(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="one split feature and threshold per group"):
        levels.split(np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="split feature is not a feature index"):
        levels.split(np.array([6]), np.array([0]))
    with pytest.raises(ValueError, match="disagree on features"):
        PartyKernels([rows[0], BinnedRows(np.zeros((3, 2), dtype=np.uint8), 5)], 1)
    with pytest.raises(ValueError, match="at least 1"):
        PartyKernels(rows, 0)


def test_a_copied_federations_kernels_have_buffers_of_their_own() -> None:
    """``copy.deepcopy`` (an experiment continuing a federation two ways) gives kernels on the same rows whose
    buffers the original's trees do not touch."""
    rows = _parties(4, [50, 60])
    kernels = PartyKernels(rows, 2)
    twin = copy.deepcopy(kernels)
    assert twin.parties == 2 and twin.n_rows == [50, 60]
    rng = np.random.default_rng(0)
    inputs = [_rows(rng, n) for n in (50, 60)]
    twin.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs]).split(
        np.array([2]), np.array([1])
    )
    kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
    assert all(np.array_equal(ids, np.ones_like(ids)) for ids in kernels.node_id)
    assert not all(np.array_equal(ids, np.ones_like(ids)) for ids in twin.node_id)


def test_a_child_forked_after_the_warm_up_runs_the_kernels_serially() -> None:
    """The fork server loads every kernel before forking (``deploy.party_forks``), and compiling a parallel kernel
    already starts GNU OpenMP, which a forked child cannot use (numba kills it): the child runs the serial twins
    and gets the same gains."""
    party_kernels.warm_up()
    assert party_kernels._gains_parallel.signatures and party_kernels._partition_parallel.signatures
    rows = _parties(6, [60, 80])
    rng = np.random.default_rng(2)
    inputs = [_rows(rng, n) for n in (60, 80)]
    want = PartyKernels(rows, 2).tree(*(list(x) for x in zip(*inputs, strict=True))).best_gains(0.5, 1, [True] * 2)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read)
            kernels = PartyKernels(rows, 2)
            got = kernels.tree(*(list(x) for x in zip(*inputs, strict=True))).best_gains(0.5, 1, [True] * 2)
            os.write(write, b"same" if np.array_equal(got, want) and party_kernels._PARALLEL_FAILED else b"differ")
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        answer = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and answer == b"same"


def test_vote_values_the_fixed_point_cannot_hold_are_refused_at_the_trees_start() -> None:
    """A party whose vote values are not finite or too large to sum in int64 (``node.kernels.vote_histograms``) is named
    before any level runs, on one thread and on the cores."""
    rows = _parties(7, [50, 70])
    rng = np.random.default_rng(4)
    for threads in (1, 2):
        kernels = PartyKernels(rows, threads)
        for party, bad in ((0, np.nan), (1, np.inf), (1, 1e300)):
            inputs = [_rows(rng, n) for n in (50, 70)]
            inputs[party][0][5] = bad
            with pytest.raises(ValueError, match=f"party {party}'s vote values are not finite or too large"):
                kernels.tree(*(list(x) for x in zip(*inputs, strict=True)))
        inputs = [_rows(rng, n) for n in (50, 70)]
        with pytest.raises(ValueError, match=r"one active flag per party \(2\), got 1"):
            kernels.tree(*(list(x) for x in zip(*inputs, strict=True))).best_gains(0.5, 1, [True])


def test_a_federation_pickles_and_resumes() -> None:
    """Its kernels pickle as their rows (numba lists do not): a pickled federation trains on as the original."""
    rng = np.random.default_rng(1)
    slots = [rng.integers(0, 4, (n, 3)).astype(np.uint8) for n in (40, 50)]
    ys = [(rng.random(n) < 0.5).astype(float) for n in (40, 50)]
    fed = Federation(slots, ys, TrainParams(trees=4, depth=2, bins=4), algo="pvtree")
    fed.train(until=2)
    again = pickle.loads(pickle.dumps(fed))
    assert again.kernels is not fed.kernels and again.kernels.row_lists == {}
    assert pickle.dumps(again.train().trees) == pickle.dumps(fed.train().trees)


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="reads Linux's /proc")
def test_a_process_keeping_a_core_busy_is_seen() -> None:
    """``others_running`` counts another process's runnable thread (a busy loop is runnable whether or not it holds
    a core at that instant), and ``free_threads`` leaves the kernels at least one thread and at most those asked."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        seen = party_kernels.others_running()
        assert seen is not None and seen >= 1
        assert 1 <= party_kernels.free_threads(2) <= 2
    finally:
        hog.kill()
        hog.wait()
    assert party_kernels.free_threads(1) == 1


def test_the_kernels_leave_their_threads_only_for_cores_busy_twice_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree's kernels take fewer threads only when the cores were busy at its start and the tree before's: a
    runnable blip seen once leaves them all."""
    rows = _parties(5, [30, 40])
    kernels = PartyKernels(rows, 2)
    if kernels.threads < 2:
        pytest.skip("numba has one thread here")
    rng = np.random.default_rng(0)
    inputs = [_rows(rng, n) for n in (30, 40)]
    looks = iter([1, 2, 1, 1, 1, 2, 2])
    monkeypatch.setattr(party_kernels, "free_threads", lambda threads: next(looks))
    monkeypatch.setattr(party_kernels, "LOOK_EVERY", 0.0)  # a look at every tree
    taken = []
    for _ in range(7):
        kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
        taken.append(kernels.now)
    assert taken == [2, 2, 2, 1, 1, 2, 2]


def test_the_cores_are_looked_at_once_per_interval_not_per_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """A look at the cores costs about 0.2 ms (every thread's /proc entry): trees that start within
    ``LOOK_EVERY`` of the last look keep its answer."""
    kernels = PartyKernels(_parties(5, [30, 40]), 2)
    inputs = [_rows(np.random.default_rng(1), n) for n in (30, 40)]
    looks: list[int] = []
    monkeypatch.setattr(party_kernels, "free_threads", lambda threads: looks.append(threads) or threads)
    monkeypatch.setattr(party_kernels, "LOOK_EVERY", 3600.0)
    for _ in range(5):
        kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
    assert looks == [2]
    monkeypatch.setattr(party_kernels, "LOOK_EVERY", 0.0)
    kernels.tree([i[0] for i in inputs], [i[1] for i in inputs], [i[2] for i in inputs])
    assert looks == [2, 2]
