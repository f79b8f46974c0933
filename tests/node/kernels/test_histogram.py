"""The level kernel against a plain dense computation, on sparse data with missing slots."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.node.kernels.histogram import BinnedRows, RowGroups, row_width, votes_from_gains, votes_into
from fgbdt_chain.node.kernels.vote_histograms import vote_scale
from fgbdt_chain.node.protocol.local_party import open_positions, route


def _data(seed: int, n: int = 600, f: int = 9, nb: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    slots = np.where(rng.random((n, f)) < 0.7, 1, rng.integers(0, nb, (n, f))).astype(np.uint8)
    slots[:, 3] = 2  # a constant feature: no valid split
    return slots, rng.normal(size=n), rng.random(n)


def _dense_best(
    slots: np.ndarray, group: np.ndarray, groups: int, g: np.ndarray, h: np.ndarray, nb: int, lam: float, min_rows: int
) -> np.ndarray:
    f = slots.shape[1]
    best = np.full((groups, f), -np.inf)
    for k in range(groups):
        rows = group == k
        for j in range(f):
            hg = np.bincount(slots[rows, j], weights=g[rows], minlength=nb)
            hh = np.bincount(slots[rows, j], weights=h[rows], minlength=nb)
            hn = np.bincount(slots[rows, j], minlength=nb)
            for t in range(nb - 1):
                nl, nr = hn[: t + 1].sum(), hn[t + 1 :].sum()
                if nl < min_rows or nr < min_rows:
                    continue
                gl, hl = hg[: t + 1].sum(), hh[: t + 1].sum()
                gr, hr = hg.sum() - gl, hh.sum() - hl
                best[k, j] = max(best[k, j], gl * gl / (hl + lam) + gr * gr / (hr + lam))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("min_rows", [1, 15])
def test_best_gains_match_dense_computation(seed: int, min_rows: int) -> None:
    slots, g, h = _data(seed)
    rows = BinnedRows(slots, 6)
    group = np.random.default_rng(seed + 10).integers(-1, 5, len(g))  # -1: rows outside every open node
    fast = rows.best_gains(group, 5, g, h, 0.5, min_rows)
    slow = _dense_best(slots, group, 5, g, h, 6, 0.5, min_rows)
    assert np.array_equal(np.isinf(fast), np.isinf(slow))
    np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-9)
    assert np.all(np.isinf(fast[:, 3]))  # the constant feature never splits


def test_candidate_histograms_match_bincount() -> None:
    slots, g, h = _data(5)
    rows = BinnedRows(slots, 6)
    group = np.random.default_rng(3).integers(-1, 4, len(g))
    feats = np.array([[0, 1], [2, 0], [8, 7], [1, 1]])
    sg, sh, sn = rows.candidate_histograms(group, 4, feats, g, h)
    for k in range(4):
        sel = group == k
        for c in range(2):
            col = slots[sel, feats[k, c]]
            np.testing.assert_allclose(sg[k, c], np.bincount(col, weights=g[sel], minlength=6))
            np.testing.assert_allclose(sh[k, c], np.bincount(col, weights=h[sel], minlength=6))
            assert np.array_equal(sn[k, c], np.bincount(col, minlength=6))


def test_votes_take_the_lowest_index_on_ties_and_abstain_without_a_split() -> None:
    best = np.array([[1.0, 3.0, 3.0], [-np.inf, -np.inf, -np.inf], [2.0, -np.inf, 1.0]])
    assert votes_from_gains(best).tolist() == [1, -1, 0]


def test_rejects_bad_shapes_and_slots() -> None:
    with pytest.raises(ValueError, match="out of range"):
        BinnedRows(np.full((3, 2), 7, dtype=np.uint8), 6)
    rows = BinnedRows(np.zeros((3, 2), dtype=np.uint8), 6)
    with pytest.raises(ValueError, match="shape"):
        rows.best_gains(np.zeros(2, dtype=np.int64), 1, np.zeros(3), np.zeros(3), 0.1)


def _binary_data(seed: int, n: int = 500, f: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-slot features (the vote kernel's fast path), rows of varying length, some missing values."""
    rng = np.random.default_rng(seed)
    slots = (rng.random((n, f)) < rng.uniform(0.1, 0.9, f)).astype(np.uint8) + 1
    slots[rng.random((n, f)) < 0.02] = 0  # a few three-slot features
    return slots, rng.normal(size=n), rng.random(n)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("min_rows", [1, 10])
def test_best_gains_of_binary_features_match_dense_computation(seed: int, min_rows: int) -> None:
    slots, g, h = _binary_data(seed)
    rows = BinnedRows(slots, 3)
    group = np.random.default_rng(seed + 20).integers(-1, 4, len(g))
    fast = rows.best_gains(group, 4, g, h, 0.1, min_rows)
    slow = _dense_best(slots, group, 4, g, h, 3, 0.1, min_rows)
    assert np.array_equal(np.isinf(fast), np.isinf(slow))
    np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-9)


def test_rows_longer_than_the_fixed_width_keep_their_tail() -> None:
    slots, g, h = _data(3, f=12)
    rows = BinnedRows(slots, 6)
    assert rows.tail_cell.size > 0 and rows.row_cells.shape[1] > 0  # both parts of the layout are exercised
    group = np.random.default_rng(4).integers(-1, 3, len(g))
    fast = rows.best_gains(group, 3, g, h, 0.5)
    slow = _dense_best(slots, group, 3, g, h, 6, 0.5, 1)
    np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-9)


def test_row_width_weighs_padding_against_ragged_tails() -> None:
    assert row_width(np.array([], dtype=np.int64)) == 0
    assert row_width(np.zeros(5, dtype=np.int64)) == 0
    assert row_width(np.full(10, 7)) == 7  # equal rows: no padding, no tail
    # a9a's rows: 8 to 16 entries, mostly 8 and 10 -> 10
    lengths = np.repeat([8, 10, 12, 14, 16], [3566, 4563, 1850, 444, 42])
    assert row_width(lengths) == 10
    assert row_width(np.array([1] * 100 + [40])) == 1  # one long row goes to the tail


def test_grouping_does_not_change_a_single_float() -> None:
    """A group's gains do not depend on the other groups (its sums are exact integers; the candidates' floats are
    summed in increasing row order): they equal those of the same rows searched as a group of their own."""
    slots, g, h = _data(6)
    rows = BinnedRows(slots, 6)
    group = np.random.default_rng(7).integers(-1, 3, len(g))
    both = rows.best_gains(group, 3, g, h, 0.5)
    for k in range(3):
        alone = rows.best_gains(np.where(group == k, 0, -1), 1, g, h, 0.5)
        assert both[k].tobytes() == alone[0].tobytes()
    feats = np.array([[0, 1], [2, 2], [8, 4]])
    sums = rows.candidate_histograms(group, 3, feats, g, h)
    for k in range(3):
        one = rows.candidate_histograms(np.where(group == k, 0, -1), 1, feats[k : k + 1], g, h)
        assert all(a[k].tobytes() == b[0].tobytes() for a, b in zip(sums, one, strict=True))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_groups_route_like_route(seed: int) -> None:
    rng = np.random.default_rng(seed)
    slots, _, _ = _data(seed)
    rows = BinnedRows(slots, 6)
    node_id = np.ones(len(slots), dtype=np.int64)
    k_of_row = np.zeros(len(slots), dtype=np.int64)
    groups = RowGroups.everything(len(slots))
    open_nodes = [1]
    for _level in range(3):
        feature = rng.integers(-1, slots.shape[1], len(open_nodes))  # -1: the node becomes a leaf
        threshold = rng.integers(0, 5, len(open_nodes))
        splits = {nid: (int(f), int(t)) for nid, f, t in zip(open_nodes, feature, threshold, strict=True) if f >= 0}
        expected = route(slots, node_id, splits)
        groups = rows.split_groups(groups, feature, threshold, node_id, k_of_row)
        open_nodes = [c for nid in sorted(splits) for c in (2 * nid, 2 * nid + 1)]
        assert np.array_equal(node_id, expected)
        assert np.array_equal(k_of_row, open_positions(node_id, open_nodes, 4))
        assert groups.num_groups == len(open_nodes)
        for k in range(len(open_nodes)):
            assert np.array_equal(groups.order[groups.start[k] : groups.start[k + 1]], np.nonzero(k_of_row == k)[0])


def test_split_groups_and_candidates_reject_bad_input() -> None:
    slots, g, h = _data(1)
    rows = BinnedRows(slots, 6)
    groups = RowGroups.everything(len(slots))
    ids, pos = np.ones(len(slots), dtype=np.int64), np.zeros(len(slots), dtype=np.int64)
    with pytest.raises(ValueError, match="one split feature"):
        rows.split_groups(groups, np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64), ids, pos)
    with pytest.raises(ValueError, match="int64"):
        rows.split_groups(groups, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), ids.astype(np.int32), pos)
    with pytest.raises(ValueError, match="not a feature index"):
        rows.split_groups(groups, np.array([9]), np.zeros(1, dtype=np.int64), ids, pos)
    with pytest.raises(ValueError, match="candidate features"):
        rows.group_candidates(groups, np.array([[0, 9]]), g, h)
    with pytest.raises(ValueError, match="num_groups"):
        rows.best_gains(np.full(len(slots), 3), 2, g, h, 0.1)


def test_compiled_votes_follow_numpy_argmax() -> None:
    """The first maximum wins, a NaN wins where numpy's argmax puts it, and a non-finite best is no vote."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        best = rng.choice([-np.inf, np.inf, np.nan, 0.0, 1.0, 2.0, 2.0], size=(int(rng.integers(0, 5)), 4))
        vote = best.argmax(axis=-1) if best.size else np.zeros(0, dtype=np.int64)
        has = np.isfinite(best[np.arange(len(vote)), vote]) if best.size else np.zeros(0, dtype=bool)
        assert np.array_equal(votes_from_gains(best), np.where(has, vote, -1))
    assert votes_from_gains(np.array([[[1.0, 2.0]], [[np.inf, 0.0]]])).tolist() == [[1], [-1]]  # the numpy path
    no_features = np.full(3, 7, dtype=np.int64)
    votes_into(np.zeros((3, 0)), no_features)  # the party kernels' entry: no feature is no vote
    assert no_features.tolist() == [-1, -1, -1]


def _sequential_best(
    rows: BinnedRows, group: np.ndarray, groups: int, g: np.ndarray, h: np.ndarray, lam: float, min_rows: int
) -> np.ndarray:
    """The vote search as plain loops: the values quantised at the party's scale (``vote_histograms``), exact
    integer sums per cell, and the kernel's float expressions on them, in its order (a vote, and so the model, may
    turn on the last bit)."""
    scale = vote_scale(g, h)
    qg = [int(v) for v in np.rint(g * 2.0**scale)]
    qh = [int(v) for v in np.rint(h * 2.0**scale)]
    inv = 2.0 ** (-scale)
    best = np.full((groups, rows.n_features), -np.inf)
    for k in range(groups):
        members = [r for r in range(rows.n_rows) if group[r] == k]
        if not members:
            continue
        tg, th, tn = sum(qg[r] for r in members), sum(qh[r] for r in members), len(members)
        for f in range(rows.n_features):
            lo, hi = int(rows.cell_start[f]), int(rows.cell_start[f + 1])
            cg, ch, cn = (
                [0] * hi,
                [0] * hi,
                [0] * hi,
            )  # every cell from its rows (the kernel: a default as the rest)
            for r in members:
                c = int(rows.cell_of[f, rows.slots[r, f]])
                cg[c] += qg[r]
                ch[c] += qh[r]
                cn[c] += 1
            gl, hl, nl, b = 0, 0, 0, -np.inf
            for c in range(lo, hi - 1):
                gl += cg[c]
                hl += ch[c]
                nl += cn[c]
                if nl < min_rows or tn - nl < min_rows:
                    continue
                fgl, fgr = gl * inv, (tg - gl) * inv
                dl, dr = hl * inv + lam, (th - hl) * inv + lam
                gain = (fgl * fgl / dl if dl > 0 else 0.0) + (fgr * fgr / dr if dr > 0 else 0.0)
                if gain > b:
                    b = gain
            best[k, f] = b
    return best


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kernels_are_bit_for_bit_the_sequential_loops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    slots, g, h = _binary_data(seed, n=300, f=5) if seed % 2 else _data(seed, n=300, f=6)
    g = g * 10.0 ** rng.integers(-8, 8, len(g))  # magnitudes that make rounding depend on the order
    rows = BinnedRows(slots, int(slots.max()) + 1)
    group = rng.integers(-1, 4, len(g))
    for lam, min_rows in ((0.1, 1), (0.0, 1), (0.5, 7)):
        got = rows.best_gains(group, 4, g, h, lam, min_rows)
        assert got.tobytes() == _sequential_best(rows, group, 4, g, h, lam, min_rows).tobytes()
    feats = rng.integers(0, slots.shape[1], (4, 2))
    sg, sh, _ = rows.candidate_histograms(group, 4, feats, g, h)
    want_g, want_h = np.zeros(sg.shape), np.zeros(sh.shape)
    for r in range(len(g)):  # the candidate sums: every slot in increasing row order
        if group[r] >= 0:
            for c in range(2):
                want_g[group[r], c, slots[r, feats[group[r], c]]] += g[r]
                want_h[group[r], c, slots[r, feats[group[r], c]]] += h[r]
    assert sg.tobytes() == want_g.tobytes() and sh.tobytes() == want_h.tobytes()


@pytest.mark.parametrize("seed", range(6))
def test_exact_candidate_sums_are_the_integer_sums_of_the_rows(seed: int) -> None:
    from fgbdt_chain.node.kernels.histogram import FixedRows

    rng = np.random.default_rng(seed)
    rows, features, nbins, groups = int(rng.integers(1, 300)), 5, int(rng.integers(2, 9)), int(rng.integers(1, 6))
    binned = BinnedRows(rng.integers(0, nbins, size=(rows, features)).astype(np.uint8), nbins)
    fixed = FixedRows.of(rng.normal(size=rows) * 10 ** float(rng.integers(-3, 6)), rng.uniform(0, 3, size=rows))
    group_of_row = rng.integers(-1, groups, size=rows)
    grouped = binned.groups(group_of_row, groups)
    q_g = [(int(a) << 32) + int(b) for a, b in zip(fixed.g_hi, fixed.g_lo, strict=True)]
    q_h = [(int(a) << 32) + int(b) for a, b in zip(fixed.h_hi, fixed.h_lo, strict=True)]
    for nc in (1, 2, 3):
        cands = rng.integers(0, features, size=(groups, nc))
        if nc == 2:
            cands[0, 1] = cands[0, 0]  # the same feature twice
        sums = binned.group_candidates_fixed(grouped, cands, fixed)
        for k in range(groups):
            for c in range(nc):
                for s in range(nbins):
                    at = [r for r in range(rows) if group_of_row[r] == k and binned.slots[r, cands[k, c]] == s]
                    assert (int(sums.g_hi[k, c, s]) << 32) + int(sums.g_lo[k, c, s]) == sum(q_g[r] for r in at)
                    assert (int(sums.h_hi[k, c, s]) << 32) + int(sums.h_lo[k, c, s]) == sum(q_h[r] for r in at)
                    assert 0 <= sums.g_lo[k, c, s] < 2**32 and 0 <= sums.h_lo[k, c, s] < 2**32
                    assert sums.n[k, c, s] == len(at)
