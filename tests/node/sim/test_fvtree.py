"""FV-tree engine: consistency of the model with the protocol record, determinism, algorithms and traffic."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.modes import TIE_RULES
from fgbdt_chain.ledger.spec.reference import endorsement_quorum
from fgbdt_chain.ledger.spec.train_params import TrainParams, task_voted_trees
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.protocol.local_party import open_positions, route
from fgbdt_chain.node.protocol.messages import level_traffic
from fgbdt_chain.node.sim import fvtree
from fgbdt_chain.node.sim.fvtree import Federation, LevelView, TrainResult


def _federation_data(n: int = 1600, parties: int = 3, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] + 0.4 * rng.normal(size=n) > 0).astype(np.float64)
    slots = np.clip(np.floor((X + 3) / 6 * 8), 0, 7).astype(np.uint8) + 1
    slots[rng.random(slots.shape) < 0.03] = 0  # some missing values
    parts = np.array_split(rng.permutation(n), parties)
    return [slots[p] for p in parts], [y[p] for p in parts]


def _train(algo: str = "fvtree", params: TrainParams | None = None, weights: bool = True, **data_kw: int):
    slots, ys = _federation_data(**data_kw)
    params = params or TrainParams(trees=6, depth=3, bins=8, min_rows=5)
    w = [np.random.default_rng(i).uniform(0.5, 1.5, len(y)) for i, y in enumerate(ys)] if weights else None
    fed = Federation(slots, ys, params, algo=algo, party_weights=w, keep_levels=True)
    return fed, fed.train()


def test_model_traversal_reproduces_the_training_scores() -> None:
    from fgbdt_chain.node.model.trees import Model

    fed, result = _train()
    edges = [list(np.arange(1.5, 8.5, 1.0)) for _ in range(6)]  # slot s <-> raw value s (slot 0 <-> NaN)
    model = Model("binary", [f"f{i}" for i in range(6)], edges, 8, result.trees)
    slots = np.vstack([party.rows.slots for party in fed.parties])
    raw = np.where(slots == 0, np.nan, slots.astype(np.float64))
    assert np.array_equal(model.predict_raw(raw), fed.score)


def test_recorded_levels_follow_the_protocol() -> None:
    fed, result = _train()
    assert len(result.levels) > 0
    for rec in result.levels:
        assert rec.nodes == sorted(rec.nodes) and all(2**rec.level <= n < 2 ** (rec.level + 1) for n in rec.nodes)
        for j, res in enumerate(rec.results):
            votes = [rec.votes[i][j] for i in range(fed.m)]
            rule = TIE_RULES[fed.params.tie_break]
            assert tuple(rec.candidates[j]) == ref.top2(votes, fed.n_features, rule, rec.tree, rec.nodes[j])
            if res.split is not None:
                assert abs(sum(res.phi) - res.split.gain) <= fed.m  # efficiency
                assert res.kappa == tuple(res.split.gain if v == res.split.feature else 0 for v in votes)
    # per-party totals are the sums over all nodes of alpha * kappa + phi
    totals = [0] * fed.m
    for rec in result.levels:
        for res in rec.results:
            totals = [t + c for t, c in zip(totals, res.contribution, strict=True)]
    assert totals == result.total
    assert result.phi == [sum(res.phi[i] for rec in result.levels for res in rec.results) for i in range(fed.m)]


def test_training_is_deterministic() -> None:
    _, a = _train()
    _, b = _train()
    assert a.total == b.total and [t.nodes for t in a.trees] == [t.nodes for t in b.trees]


def test_unit_weights_make_fvtree_equal_pvtree() -> None:
    slots, ys = _federation_data()
    params = TrainParams(trees=4, depth=3, bins=8, min_rows=5)
    fv = Federation(slots, ys, params, algo="fvtree", party_weights=[np.ones(len(y)) for y in ys]).train()
    pv = Federation(slots, ys, params, algo="pvtree").train()
    assert [t.nodes for t in fv.trees] == [t.nodes for t in pv.trees] and fv.total == pv.total


def test_allfeatures_root_gain_is_at_least_the_voted_one() -> None:
    _, fv = _train("fvtree")
    _, allf = _train("allfeatures", weights=False)
    fv_root, all_root = fv.trees[0].nodes[1], allf.trees[0].nodes[1]
    assert all_root.gain_fixed is not None and fv_root.gain_fixed is not None
    assert all_root.gain_fixed >= fv_root.gain_fixed
    assert all(k == 0 for k in allf.kappa)  # nobody votes


def test_drawn_candidates_are_the_public_draw_and_blind_to_the_parties() -> None:
    """``drawn``: every node's candidates are the contract's top-2 of empty votes (a public draw per tree and node),
    nobody votes or earns voting contributions, and moving rows between parties changes no candidate at the first
    tree (with votes it does: each party's rows choose its vote)."""
    fed, result = _train("drawn", weights=False)
    for rec in result.levels:
        assert all(v == ref.ABSTAIN for votes in rec.votes for v in votes)
        for j, node in enumerate(rec.nodes):
            assert tuple(rec.candidates[j]) == ref.top2(
                [ref.ABSTAIN] * fed.m, fed.n_features, ref.TIE_HASHED, rec.tree, node
            )
    assert all(k == 0 for k in result.kappa)
    assert len({tuple(c) for rec in result.levels for c in rec.candidates}) > 3  # a draw, not one fixed pair
    slots, ys = _federation_data()
    pooled_slots, pooled_y = np.vstack(slots), np.concatenate(ys)
    order = np.random.default_rng(7).permutation(len(pooled_y))
    moved = np.array_split(order, 3)
    params = TrainParams(trees=1, depth=3, bins=8, min_rows=5)
    roots = []
    for algo in ("drawn", "pvtree"):
        runs = [
            Federation(parts_slots, parts_y, params, algo=algo, keep_levels=True).train()
            for parts_slots, parts_y in (
                (slots, ys),
                ([pooled_slots[i] for i in moved], [pooled_y[i] for i in moved]),
            )
        ]
        roots.append([[tuple(c) for rec in r.levels for c in rec.candidates] for r in runs])
    drawn, voted = roots
    assert drawn[0] == drawn[1]  # the same rows split otherwise among the parties: the same candidates
    assert voted[0] != voted[1]  # with votes, which party holds a row changes what is voted


def test_voted_trees_switch_from_votes_to_the_draw() -> None:
    """``voted_trees`` 2: trees 0-1 vote exactly as the paper's FV-tree does (the same votes, candidates and splits
    as a run where every tree votes), trees from 2 on are drawn trees (no votes, no voting contribution, the public
    draw), and ``task_voted_trees`` carries the switch to the chain (``drawn``: 0)."""
    base = TrainParams(trees=5, depth=3, bins=8, min_rows=5)
    _, every = _train(params=dataclasses.replace(base, voted_trees=ref.ALL_TREES_VOTED))
    fed, switched = _train(params=dataclasses.replace(base, voted_trees=2))
    assert switched.trees[:2] == every.trees[:2] and switched.trees[2:] != every.trees[2:]
    for rec in switched.levels:
        votes = [v for ballot in rec.votes for v in ballot]
        if rec.tree < 2:
            assert any(v != ref.ABSTAIN for v in votes)
        else:
            assert all(v == ref.ABSTAIN for v in votes)
            for j, node in enumerate(rec.nodes):
                assert tuple(rec.candidates[j]) == ref.drawn_candidates(fed.n_features, rec.tree, node)
    assert task_voted_trees("fvtree", dataclasses.replace(base, voted_trees=2)) == 2
    assert task_voted_trees("drawn", base) == 0
    with pytest.raises(ValueError, match="does not run on chain"):
        task_voted_trees("pvtree", base)
    with pytest.raises(ValueError, match="voted_trees"):
        TrainParams(voted_trees=-1)


def test_drawn_traffic_has_no_votes() -> None:
    _, result = _train("drawn", weights=False)
    _, fv_result = _train("fvtree")
    assert sum(result.comm_bytes) < sum(fv_result.comm_bytes)


@pytest.mark.parametrize("hessian", ["hessian", "count"])
def test_training_reduces_the_loss(hessian: str) -> None:
    fed, _ = _train(params=TrainParams(trees=15, depth=3, bins=8, min_rows=5, hessian=hessian))
    p = 1 / (1 + np.exp(-fed.score))
    loss = -np.mean(fed.y * np.log(p) + (1 - fed.y) * np.log(1 - p))
    assert loss < 0.6 < np.log(2)  # clearly below the loss of the zero model


def test_regression_objective() -> None:
    slots, _ = _federation_data()
    targets = [s[:, 0].astype(np.float64) * 2.0 + s[:, 1] for s in slots]
    fed = Federation(
        slots,
        targets,
        TrainParams(trees=30, depth=3, bins=8, min_rows=5, objective="regression", learning_rate=0.3),
        algo="pvtree",
    )
    fed.train()
    y = np.concatenate(targets)
    assert np.sqrt(np.mean((fed.score - y) ** 2)) < 0.25 * np.std(y)


def test_traffic_per_tree_is_independent_of_the_number_of_rows() -> None:
    params = TrainParams(trees=2, depth=3, bins=8, min_rows=1)
    sizes = []
    for n in (900, 3600):
        _, result = _train(params=params, n=n)
        assert all(len(t.nodes) == 15 for t in result.trees)  # full trees, so every level is complete
        sizes.append(result.comm_bytes_per_tree)
    assert sizes[0] == sizes[1]
    expected = sum(level_traffic(2**lvl, 2, 9, 3, endorsement_quorum(3)).total for lvl in range(3))
    assert sizes[0] == [expected] * 3


def test_messages_size_matches_abi_encoding() -> None:
    from eth_abi import encode

    t = level_traffic(3, 2, 5, 4, 2)
    votes = encode(["uint256", "uint256", "uint256", "int256[]"], [1, 2, 3, [0, 1, -1]])
    assert t.votes == 4 + len(votes)
    # sent ahead with the resolution of a level of two open nodes: two votes per node of that level
    ahead = encode(["uint256", "uint256", "uint256", "int256[]"], [1, 2, 3, [0, 1, -1, 2]])
    assert level_traffic(3, 2, 5, 4, 2, ahead_of=2).votes == 4 + len(ahead)
    cells = 3 * 2 * 5
    hist = encode(
        ["uint256", "uint256", "uint256", "int256[]", "int256[]", "uint256[]", "(bytes,uint256,uint256,uint256)[]"],
        [1, 2, 3, [1] * cells, [1] * cells, [1] * cells, [(b"\x01" * 65, 1, 2, 3)] * 2],
    )
    assert t.histograms == 4 + len(hist)


def test_rejects_bad_configuration() -> None:
    slots, ys = _federation_data()
    with pytest.raises(ValueError, match="unknown algorithm"):
        Federation(slots, ys, TrainParams(), algo="xgboost")
    with pytest.raises(ValueError, match="w\\*"):
        Federation(slots, ys, TrainParams(), algo="fvtree")
    with pytest.raises(ValueError, match="alpha"):
        TrainParams(alpha=0)
    with pytest.raises(ValueError, match="tie_break must be one of hashed, index"):
        TrainParams(tie_break="lowest")


def _same_training(a: TrainResult, b: TrainResult) -> bool:
    return (
        [t.nodes for t in a.trees] == [t.nodes for t in b.trees]
        and (a.phi, a.kappa, a.total, a.per_tree_total) == (b.phi, b.kappa, b.total, b.per_tree_total)
        and a.levels == b.levels
    )


@pytest.mark.parametrize("hessian", ["hessian", "count"])
def test_batched_contract_side_equals_resolve_node_on_the_messages(
    hessian: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limbs and ``resolve_level`` give the results ``resolve_node`` gives on the parties' messages."""
    params = TrainParams(trees=4, depth=4, bins=8, min_rows=5, hessian=hessian)
    fed, fast = _train(params=params, parties=4)
    scores = fed.score
    monkeypatch.setattr(fvtree, "level_of", lambda sums, stacked=None: None)
    fed_ref, slow = _train(params=params, parties=4)
    assert _same_training(fast, slow) and np.array_equal(scores, fed_ref.score)


def test_an_overflow_in_the_batched_path_is_left_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    _, want = _train()

    def overflow(*args: object) -> None:
        raise ref.FixedPointOverflow("from the batched path")

    monkeypatch.setattr(fvtree, "resolve_level_view", overflow)
    _, got = _train()
    assert _same_training(got, want)


def test_row_values_beyond_fixed_point_are_refused_and_huge_sums_take_the_reference_path() -> None:
    slots, ys = _federation_data()
    params = TrainParams(trees=1, depth=2, bins=8, min_rows=5)
    fed = Federation(slots, ys, params, algo="pvtree", attacks={0: Attack("gradients", 1e60)})
    with pytest.raises(OverflowError, match="fixed point"):
        fed.train()
    # 1e5 per row is representable, but a bin's sum passes 2**80: the level resolves on Python integers
    fed = Federation(slots, ys, params, algo="pvtree", keep_levels=True, attacks={0: Attack("gradients", 1e5)})
    result = fed.train()
    assert result.levels[0].results[0].split is not None


def test_observers_see_each_rows_open_node() -> None:
    """The positions a level observer gets are those of the rows routed through the splits made so far."""
    slots, ys = _federation_data()
    w = [np.random.default_rng(i).uniform(0.5, 1.5, len(y)) for i, y in enumerate(ys)]
    params = TrainParams(trees=2, depth=4, bins=8, min_rows=5)
    fed = Federation(slots, ys, params, algo="fvtree", party_weights=w, keep_levels=True)
    seen: list[LevelView] = []
    fed.level_observer = seen.append
    result = fed.train()
    assert len(seen) == len(result.levels)
    for view, rec in zip(seen, result.levels, strict=True):
        tree = result.trees[view.tree]
        for party, positions in zip(fed.parties, view.k_of_row, strict=True):
            ids = np.ones(party.n_rows, dtype=np.int64)
            for lvl in range(view.level):
                at_level = {nid: n for nid, n in tree.nodes.items() if 2**lvl <= nid < 2 ** (lvl + 1) and not n.is_leaf}
                ids = route(
                    party.rows.slots, ids, {nid: (int(n.feature), int(n.threshold)) for nid, n in at_level.items()}
                )
            assert np.array_equal(positions, open_positions(ids, rec.nodes, params.depth))


def _sides_by_cumsum(sums, nodes, ranks, thresholds):  # type: ignore[no-untyped-def]
    """``_sides`` as first written, numpy's cumulative sums of the limbs: what the compiled sums must equal."""
    js = np.asarray(nodes, dtype=np.int64)
    rs = np.asarray(ranks, dtype=np.int64)
    at = np.arange(len(js))
    cut = np.asarray(thresholds, dtype=np.int64)
    left, whole = [], []
    for hi, lo in ((sums.g_hi, sums.g_lo), (sums.h_hi, sums.h_lo), (sums.n, None)):
        c_hi = np.cumsum(hi[js, rs], axis=1)
        c_lo = np.cumsum(lo[js, rs], axis=1) if lo is not None else np.zeros_like(c_hi)
        left.append((c_hi[at, cut].tolist(), c_lo[at, cut].tolist()))
        whole.append((c_hi[:, -1].tolist(), c_lo[:, -1].tolist()))
    out = []
    for k in range(len(js)):
        lt = ref.Totals(*((hi[k] << 32) + lo[k] if q < 2 else hi[k] for q, (hi, lo) in enumerate(left)))
        t = ref.Totals(*((hi[k] << 32) + lo[k] if q < 2 else hi[k] for q, (hi, lo) in enumerate(whole)))
        out.append((lt, ref.Totals(t.g - lt.g, t.h - lt.h, t.n - lt.n)))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_compiled_side_sums_equal_the_cumulative_sums(seed: int) -> None:
    from fgbdt_chain.node.kernels.histogram import FixedSums
    from fgbdt_chain.node.sim.fvtree import _node_totals, _sides

    rng = np.random.default_rng(seed)
    k, c, b = int(rng.integers(1, 9)), 2, int(rng.integers(2, 20))
    big = 2**47 if seed % 2 else 2**20
    sums = FixedSums(
        rng.integers(-big, big, size=(k, c, b)),
        rng.integers(0, 2**32, size=(k, c, b)),
        rng.integers(0, big, size=(k, c, b)),
        rng.integers(0, 2**32, size=(k, c, b)),
        rng.integers(0, 10_000, size=(k, c, b)),
    )
    s = int(rng.integers(0, 2 * k))
    nodes = rng.integers(0, k, size=s).tolist()
    ranks = rng.integers(0, c, size=s).tolist()
    cuts = rng.integers(0, b, size=s).tolist()
    got = [(x.left, x.right) for x in _sides(sums, nodes, ranks, cuts)]
    assert got == _sides_by_cumsum(sums, nodes, ranks, cuts)
    whole = _sides_by_cumsum(sums, range(k), [0] * k, [b - 1] * k)
    assert _node_totals(sums, list(range(k))) == [lt for lt, _ in whole]


def test_side_sums_of_several_parties_are_each_partys_own() -> None:
    from fgbdt_chain.node.kernels.histogram import FixedSums
    from fgbdt_chain.node.sim.fvtree import _parties_sides, _sides

    rng = np.random.default_rng(5)
    k, c, b = 4, 2, 9
    parties = [
        FixedSums(
            rng.integers(-(2**47), 2**47, size=(k, c, b)),
            rng.integers(0, 2**32, size=(k, c, b)),
            rng.integers(0, 2**47, size=(k, c, b)),
            rng.integers(0, 2**32, size=(k, c, b)),
            rng.integers(0, 10_000, size=(k, c, b)),
        )
        for _ in range(3)
    ]
    nodes, ranks, cuts = [0, 3, 1, 1], [0, 1, 1, 0], [b - 1, 2, 0, b - 1]
    together = _parties_sides(parties, nodes, ranks, cuts)
    assert together == [_sides(s, nodes, ranks, cuts) for s in parties]
    # and each party's against the cumulative-sum oracle: one party's call goes through the same batched kernel
    assert [[(x.left, x.right) for x in sides] for sides in together] == [
        _sides_by_cumsum(s, nodes, ranks, cuts) for s in parties
    ]
