"""Random-split trees with private leaves (``node.sim.random_split``): public splits, one noisy leaf release per tree,
the accounting of ``node.privacy.accountant.leaf_plan``, and a model that predicts what training applied."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.model.metrics import auc
from fgbdt_chain.node.model.trees import bin_matrix, slot_widths
from fgbdt_chain.node.privacy.accountant import (
    LEAF_GRADIENT_SHARE,
    ROW_BOUNDS,
    SPLIT,
    default_colluders,
    leaf_plan,
    loss_bounds,
)
from fgbdt_chain.node.sim.experiment import PrepConfig, make_model, prepare, run
from fgbdt_chain.node.sim.random_split import (
    bin_tree,
    draw_splits,
    feature_turns,
    leaf_index,
    masked_leaf_sums,
    one_feature_per_tree,
    party_leaf_sums,
    train_random_split,
)


def _data(rows: int = 8_000, seed: int = 3) -> tuple[Dataset, Dataset]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 5))
    X[:, 2] = np.where(rng.random(rows) < 0.1, np.nan, X[:, 2])  # missing values
    X[:, 4] = 1.0  # a constant column: never drawn
    y = (X[:, 0] - X[:, 1] + 0.4 * rng.normal(size=rows) > 0).astype(float)
    cut = rows * 3 // 4
    return Dataset(X[:cut], y[:cut]), Dataset(X[cut:], y[cut:])


def test_splits_are_drawn_inside_every_features_bins() -> None:
    widths = np.array([18, 3, 2, 10])  # feature 2 has no edge: no split can separate its rows
    features, thresholds = draw_splits(widths, 6, np.random.default_rng(0))
    assert features.shape == thresholds.shape == (63,)
    assert 2 not in set(features.tolist()) and {0, 1, 3} <= set(features.tolist())
    assert np.all(thresholds >= 1) and np.all(thresholds <= widths[features] - 2)  # a bin on each side
    with pytest.raises(ValueError, match="no feature has two bins"):
        draw_splits(np.array([2, 1]), 2, np.random.default_rng(0))


def test_rows_reach_the_leaf_the_model_routes_them_to() -> None:
    """Training adds to each row the value of the leaf ``leaf_index`` gives it; the saved model must predict the
    same sums from the raw values, to the last bit, missing values included."""
    train, _ = _data(2_000)
    params = TrainParams(trees=7, depth=3, bins=8)
    prep = prepare(train, train, params, PrepConfig(parties=2, theta=0.5, seed=1))
    plan = leaf_plan(math.inf, 1e-5, params.trees)
    res = train_random_split(prep.party_slots(), prep.party_y(), params, slot_widths(prep.edges), plan, seed=1)
    model = make_model(prep, res.trees, "randomsplit")
    model.validate()
    slots = bin_matrix(train.X, prep.edges)
    expected = np.zeros(train.n_rows)
    for tree in res.trees:
        features = np.array([tree.nodes[i].feature for i in range(1, 8)])
        thresholds = np.array([tree.nodes[i].threshold for i in range(1, 8)])
        values = np.array([tree.nodes[8 + j].value_fixed for j in range(8)], dtype=object)
        expected += np.array([v / 10**18 for v in values[leaf_index(slots, features, thresholds, 3)]], dtype=float)
    np.testing.assert_allclose(model.predict_raw(train.X), expected, rtol=0, atol=1e-12)


def test_a_bin_tree_gives_every_slot_its_own_leaf() -> None:
    """A one-feature tree's leaf for a row is the row's slot of that feature, the missing slot 0 included, as
    ``Model.predict`` routes it, and it is ``ceil(log2(width))`` levels deep."""
    for width in (2, 3, 5, 8, 17, 33):
        values = [1000 * (s + 1) for s in range(width)]
        tree = bin_tree(2, width, values)
        assert tree.depth == math.ceil(math.log2(width)) and len(tree.leaf_ids()) == width
        assert {tree.nodes[i].feature for i in tree.internal_ids()} == {2}
        for slot in range(width):
            node = 1
            while not tree.nodes[node].is_leaf:
                node = 2 * node + (slot > tree.nodes[node].threshold)
            assert tree.nodes[node].value_fixed == values[slot]
    with pytest.raises(ValueError, match="a value for each of at least two slots"):
        bin_tree(0, 4, [1, 2, 3])
    with pytest.raises(ValueError, match="a value for each of at least two slots"):
        bin_tree(0, 1, [1])


def test_one_feature_trees_fit_a_leaf_per_bin_and_predict_what_training_applied() -> None:
    """Without noise, a one-feature tree's leaf on each slot is the parties' Newton step over exactly the rows in
    that slot; the model then predicts, from raw values, what training added."""
    train, _ = _data(2_000)
    params = TrainParams(trees=6, depth=3, bins=8, learning_rate=1.0)
    prep = prepare(train, train, params, PrepConfig(parties=2, theta=0.5, seed=1))
    widths = slot_widths(prep.edges)
    plan = leaf_plan(math.inf, 1e-5, params.trees)
    res = train_random_split(prep.party_slots(), prep.party_y(), params, widths, plan, seed=1, tree_features="one")
    assert res.tree_features == "one"
    first = res.trees[0]
    feature = first.nodes[1].feature
    slots = bin_matrix(train.X, prep.edges)
    y = np.concatenate(prep.party_y())
    rows = np.concatenate([s[:, feature] for s in prep.party_slots()])
    for slot in range(int(widths[feature])):
        g = (0.5 - y[rows == slot]).sum()  # the logistic gradient at score 0
        step = -g / (0.25 * (rows == slot).sum() + params.lam)
        node = 1
        while not first.nodes[node].is_leaf:
            node = 2 * node + (slot > first.nodes[node].threshold)
        assert first.nodes[node].value_fixed / 10**18 == pytest.approx(step, abs=1e-12)
    model = make_model(prep, res.trees, "randomsplit")
    model.validate()
    expected = np.zeros(train.n_rows)
    for tree in res.trees:
        f = tree.nodes[1].feature
        for row, slot in enumerate(slots[:, f]):
            node = 1
            while not tree.nodes[node].is_leaf:
                node = 2 * node + (slot > tree.nodes[node].threshold)
            expected[row] += tree.nodes[node].value_fixed / 10**18
    np.testing.assert_allclose(model.predict_raw(train.X), expected, rtol=0, atol=1e-12)
    assert res.comm_bytes_per_party_per_tree == pytest.approx(64 * np.mean([len(t.leaf_ids()) for t in res.trees]))


@pytest.mark.parametrize(("epsilon", "trees"), [(0.5, 20), (1.0, 50), (4.0, 200)])
def test_the_leaf_plan_spends_the_budget_and_no_more(epsilon: float, trees: int) -> None:
    p = leaf_plan(epsilon, 1e-5, trees)
    assert epsilon * 0.999 <= p.accounted_epsilon <= epsilon
    accountant = rdp_privacy_accountant.RdpAccountant()  # recomputed from what the plan says each release gets
    accountant.compose(
        dp_event.ComposedDpEvent(
            [
                dp_event.ZCDpEvent((SPLIT["sketch"] * epsilon) ** 2 / 2),
                dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(p.noise_multiplier), trees),
            ]
        )
    )
    assert accountant.get_epsilon(1e-5) == pytest.approx(p.accounted_epsilon, rel=1e-9)
    # one Gaussian mechanism of the plan's multiplier: a row moves (G, H) of its leaf by (1, 1/4) at most, which in
    # units of the noise is a vector of length exactly 1 / noise_multiplier
    moved = math.hypot(ROW_BOUNDS["g"] / p.noise_sd("g"), ROW_BOUNDS["h"] / p.noise_sd("h"))
    assert moved == pytest.approx(1 / p.noise_multiplier)
    assert (ROW_BOUNDS["g"] / p.noise_sd("g")) ** 2 * p.noise_multiplier**2 == pytest.approx(LEAF_GRADIENT_SHARE)
    assert p.report()["gradient_share"] == LEAF_GRADIENT_SHARE
    assert leaf_plan(2 * epsilon, 1e-5, trees).noise_multiplier < p.noise_multiplier  # more budget, less noise
    with pytest.raises(ValueError, match="epsilon must be positive"):
        leaf_plan(0.0, 1e-5, trees)
    with pytest.raises(ValueError, match="delta"):
        leaf_plan(epsilon, 1.0, trees)


def test_private_leaves_carry_the_planned_noise() -> None:
    """A party's release per leaf: the exact sums on the lattice of 2^-bits plus integer noise of the plan's
    standard deviation, on every leaf; the standard deviations within 0.05 (over four standard errors of a standard
    deviation from 4,000 draws, 1 / sqrt(2 * 4000) = 0.011) and the means within four standard errors."""
    rng = np.random.default_rng(0)
    leaf = rng.integers(0, 3, size=400)  # leaf 3 of 4 is empty: it is released too
    g, h = rng.uniform(-1, 1, size=400), rng.uniform(0, 0.25, size=400)
    plan, bits = leaf_plan(1.0, 1e-5, 50), 30
    exact_g, exact_h = party_leaf_sums(leaf, g, h, 4, leaf_plan(math.inf, 1e-5, 50), rng)
    np.testing.assert_allclose(exact_g, np.bincount(leaf, g, minlength=4))
    np.testing.assert_allclose(exact_h, np.bincount(leaf, h, minlength=4))
    lattice = [np.bincount(leaf, np.rint(v * 2.0**bits), minlength=4).astype(np.int64) for v in (g, h)]
    draws = [party_leaf_sums(leaf, g, h, 4, plan, np.random.default_rng(s), bits) for s in range(4000)]
    assert all(d[0].dtype == d[1].dtype == np.int64 for d in draws)  # integers: exact discrete noise
    noise_g = (np.array([d[0] for d in draws]) - lattice[0]) / 2.0**bits
    noise_h = (np.array([d[1] for d in draws]) - lattice[1]) / 2.0**bits
    assert np.all(np.abs(noise_g.std(axis=0) / plan.noise_sd("g") - 1) < 0.05)
    assert np.all(np.abs(noise_h.std(axis=0) / plan.noise_sd("h") - 1) < 0.05)
    assert np.all(np.abs(noise_g.mean(axis=0)) < 4 * plan.noise_sd("g") / math.sqrt(4000))
    assert np.all(np.abs(noise_h.mean(axis=0)) < 4 * plan.noise_sd("h") / math.sqrt(4000))


def test_default_colluders_are_fewer_than_half_of_the_others_and_at_least_one() -> None:
    assert [default_colluders(m) for m in range(1, 9)] == [0, 1, 1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="at least one party"):
        default_colluders(0)


@pytest.mark.parametrize("colluders", [1, 2, 3])
def test_each_party_adds_its_share_of_the_noise_the_coalition_cannot_remove(colluders: int) -> None:
    """With ``colluders`` of four parties pooling their noise against one, the noise left on the sum is the other
    ``4 - colluders`` parties' (the victim's included): exactly the calibrated multiplier's variance; if all three
    others pool, only the party's own share is left, and the accountant prices that, as it prices the guarantee."""
    plan = leaf_plan(1.0, 1e-5, 50, parties=4, colluders=colluders)
    for q, scale in (("g", ROW_BOUNDS["g"] / math.sqrt(LEAF_GRADIENT_SHARE)), ("h", 0.25 / math.sqrt(0.2))):
        left = math.sqrt(4 - colluders) * plan.noise_sd(q)
        assert left == pytest.approx(plan.noise_multiplier * scale, rel=1e-12)
        assert plan.sum_noise_sd(q) == pytest.approx(2 * plan.noise_sd(q), rel=1e-12)
    assert plan.noise_multiplier == leaf_plan(1.0, 1e-5, 50).noise_multiplier  # the calibration is the same
    alone_z = plan.noise_multiplier / math.sqrt(4 - colluders)
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(
        dp_event.ComposedDpEvent(
            [
                dp_event.ZCDpEvent((SPLIT["sketch"] * 1.0) ** 2 / 2),
                dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(alone_z), 50),
            ]
        )
    )
    assert plan.all_others_epsilon == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-9)
    if colluders == 3:
        assert plan.all_others_epsilon == pytest.approx(plan.accounted_epsilon, rel=1e-12)
        assert plan.accounted_epsilon <= 1.0
    else:
        assert plan.all_others_epsilon > 1.0 >= plan.accounted_epsilon
    assert plan.regularisation(0.1) == pytest.approx(plan.sum_noise_sd("g"))


@pytest.mark.parametrize(("parties", "colluders"), [(4, 4), (4, 0), (2, 0), (4, -1), (0, 0)])
def test_a_leaf_plan_refuses_an_impossible_coalition(parties: int, colluders: int) -> None:
    """Zero colluders is refused too: every party reads the sum and knows its own noise."""
    with pytest.raises(ValueError, match=r"colluders must be from 1|at least one party"):
        leaf_plan(1.0, 1e-5, 10, parties=parties, colluders=colluders)
    assert leaf_plan(1.0, 1e-5, 10, parties=1, colluders=0).colluders == 0  # alone: nobody to collude


def test_the_released_sums_carry_each_partys_share_of_the_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """What training releases, recorded where it is made: each party's noise on its leaf sums has its share's
    standard deviation, is independent of every other party's, and the sums go through the masked secure sum at
    the planned fixed-point scale, whose output is their sum; so the sum carries the calibrated noise."""
    import fgbdt_chain.node.sim.random_split as rs
    from fgbdt_chain.node.privacy.secure_agg import fraction_bits

    train, _ = _data(6_000)
    params = TrainParams(trees=60, depth=3, bins=16)
    prep = prepare(train, train, params, PrepConfig(parties=4, theta=0.5, seed=4))
    plan = leaf_plan(1.0, 1e-5, params.trees, parties=4, colluders=1)
    masked: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    real_sums, real_masked = rs.party_leaf_sums, rs.masked_leaf_sums
    calls: list[tuple[np.ndarray, np.ndarray]] = []

    def record_party(leaf, g, h, leaves, plan_, rng, bits):  # type: ignore[no-untyped-def]
        out = real_sums(leaf, g, h, leaves, plan_, rng, bits)
        assert out[0].dtype == out[1].dtype == np.int64  # integers at 2^bits, exact noise on them
        exact = [np.bincount(leaf, np.rint(v * 2.0**bits), minlength=leaves) for v in (g, h)]
        calls.append(((out[0] - exact[0]) / 2.0**bits, (out[1] - exact[1]) / 2.0**bits))
        return out

    def record_masked(released, secure, bits):  # type: ignore[no-untyped-def]
        out = real_masked(released, secure, bits)
        masked.append((bits, np.sum([r[0] for r in released], axis=0) / 2.0**bits, out[0], out[1]))
        return out

    monkeypatch.setattr(rs, "party_leaf_sums", record_party)
    monkeypatch.setattr(rs, "masked_leaf_sums", record_masked)
    rs.train_random_split(
        prep.party_slots(), prep.party_y(), params, slot_widths(prep.edges), plan, seed=4, tree_features="one"
    )
    assert len(masked) == params.trees and len(calls) == 4 * params.trees  # every tree through the secure sum
    rows = sum(len(y) for y in prep.party_y())
    assert {b for b, *_ in masked} == {fraction_bits(rows + 64 * plan.sum_noise_sd("g"))}
    for _, plain, g_out, _ in masked:
        np.testing.assert_array_equal(g_out, plain)  # integer sums: the secure sum adds them exactly
    per_party = [np.concatenate([calls[4 * t + i][0] for t in range(params.trees)]) for i in range(4)]
    for q, idx in (("g", 0), ("h", 1)):
        party_noise = [np.concatenate([calls[4 * t + i][idx] for t in range(params.trees)]) for i in range(4)]
        for e in party_noise:
            assert abs(e.std() / plan.noise_sd(q) - 1) < 0.1
        assert abs(np.sum(party_noise, axis=0).std() / plan.sum_noise_sd(q) - 1) < 0.1
    corr = np.corrcoef(per_party)
    assert np.all(np.abs(corr[np.triu_indices(4, 1)]) < 0.15)  # four streams, not one


def test_entropy_noise_differs_run_to_run_and_seeded_noise_repeats() -> None:
    train, _ = _data(2_000)
    params = TrainParams(trees=5, depth=2, bins=8)
    prep = prepare(train, train, params, PrepConfig(parties=2, theta=0.5, seed=1))
    plan = leaf_plan(1.0, 1e-5, params.trees, parties=2)
    widths = slot_widths(prep.edges)

    def values(noise_seed: int | None) -> list[list[int]]:
        res = train_random_split(prep.party_slots(), prep.party_y(), params, widths, plan, 1, noise_seed=noise_seed)
        return [[n.value_fixed for n in t.nodes.values() if n.is_leaf] for t in res.trees]

    assert values(1) == values(1) and values(None) != values(None)


def test_masked_leaf_sums_add_the_releases_and_show_none_of_them() -> None:
    """The masked vectors the parties send do not contain their releases, and their sum is the releases' sum to
    the fixed-point step; the training loop refuses a plan made for another party count."""
    from fgbdt_chain.node.privacy.secure_agg import SecureSum

    rng = np.random.default_rng(5)
    scale = 2.0**30
    released = [
        (
            np.rint(rng.normal(0, 50, 17) * scale).astype(np.int64),
            np.rint(rng.normal(10, 5, 17) * scale).astype(np.int64),
        )
        for _ in range(4)
    ]
    secure = SecureSum(4, seed=9)
    g, h = masked_leaf_sums(released, secure, 30)
    np.testing.assert_array_equal(g, np.sum([r[0] for r in released], axis=0) / scale)
    np.testing.assert_array_equal(h, np.sum([r[1] for r in released], axis=0) / scale)
    for (rg, _), sent in zip(released, secure.last_masked, strict=True):
        assert not np.any(sent[:17].view(np.int64) == rg)
    assert list(secure.bytes_sent) == [8 * 34] * 4
    slots, y = [rng.integers(1, 4, size=(50, 2))] * 2, [rng.integers(0, 2, 50).astype(float)] * 2
    with pytest.raises(ValueError, match="plan is for 3 parties, the task has 2"):
        train_random_split(slots, y, TrainParams(trees=1, depth=1), np.array([5, 5]), leaf_plan(1.0, 1e-5, 1, 3), 0)


def test_random_split_learns_and_reports_its_guarantee() -> None:
    train, test = _data()
    params = TrainParams(trees=30, depth=3, bins=16)
    public = prepare(train, test, params, PrepConfig(parties=3, theta=0.8, seed=0))
    report, model, _ = run(public, "randomsplit")
    assert model is not None and report["test_auc"] > 0.85
    assert report["privacy"]["epsilon"] == math.inf and report["params"]["lam"] == params.lam
    private = prepare(train, test, params, PrepConfig(parties=3, theta=0.8, seed=0, epsilon=1.0, dp_noise="seeded"))
    report_p, model_p, _ = run(private, "randomsplit")
    assert model_p is not None and 0.6 < report_p["test_auc"] < report["test_auc"]
    assert report_p["privacy"]["accounted_epsilon"] <= 1.0
    plan = leaf_plan(1.0, private.config.dp_delta, params.trees, 3)
    assert report_p["params"]["lam"] == pytest.approx(plan.regularisation(params.lam))  # its own floor
    assert report_p["privacy"]["colluders"] == default_colluders(3) == 1
    again, _, _ = run(private, "randomsplit")
    assert again["test_auc"] == report_p["test_auc"]  # seeded noise: the same run twice
    assert auc(test.y, model_p.predict(test.X)) == report_p["test_auc"]


def test_each_algorithm_reports_the_privacy_it_spends() -> None:
    """Under one budget, random splits report their leaf plan, FV-tree its own plan, and the LightGBM baselines, which
    add no noise to pooled rows, no privacy at all."""
    train, test = _data(2_000)
    params = TrainParams(trees=4, depth=2, bins=8)
    prep = prepare(train, test, params, PrepConfig(parties=3, theta=0.5, seed=0, epsilon=1.0))
    rs, _, _ = run(prep, "randomsplit")
    assert rs["privacy"]["colluders"] == 1 and rs["privacy"]["accounted_epsilon"] <= 1.0
    fv, _, _ = run(prep, "fvtree")
    assert "colluders" not in fv["privacy"] and fv["privacy"]["accounted_epsilon"] <= 1.0
    for algo in ("centralized", "lightgbm", "lightgbm-defaults"):
        baseline, _, _ = run(prep, algo)
        assert baseline["privacy"]["epsilon"] == math.inf and baseline["privacy"]["accounted_epsilon"] == 0, algo


def test_private_random_split_regression_needs_the_squared_errors_bounds() -> None:
    """A plan calibrated to the logistic loss's bounds is refused for a regression task; one of a declared label
    range (loss_bounds) trains, clips every gradient to half the range, and starts the scores at its midpoint."""
    rng = np.random.default_rng(0)
    slots, y = [rng.integers(1, 4, size=(50, 2))], [rng.uniform(2.0, 10.0, size=50)]
    params = TrainParams(trees=1, depth=1, objective="regression")
    with pytest.raises(ValueError, match="squared error's bounds"):
        train_random_split(slots, y, params, np.array([5, 5]), leaf_plan(1.0, 1e-5, 1), seed=0)
    public = train_random_split(slots, y, params, np.array([5, 5]), leaf_plan(math.inf, 1e-5, 1), seed=0)
    assert len(public.trees) == 1  # regression without privacy trains
    bounds = loss_bounds("regression", (0.0, 12.0))
    assert bounds == (6.0, 1.0)
    plan = leaf_plan(1.0, 1e-5, 1, bounds=bounds)
    assert plan.noise_sd("g") == pytest.approx(6.0 * plan.noise_multiplier / math.sqrt(LEAF_GRADIENT_SHARE))
    assert plan.noise_sd("h") == pytest.approx(plan.noise_multiplier / math.sqrt(1 - LEAF_GRADIENT_SHARE))
    assert plan.regularisation(0.0) == pytest.approx(plan.sum_noise_sd("g") / 6.0)
    big = TrainParams(trees=1, depth=1, objective="regression", learning_rate=1.0, lam=0.0)
    one = train_random_split(slots, y, big, np.array([5, 5]), leaf_plan(math.inf, 1e-5, 1), seed=0, base_score=6.0)
    leaves = [n.value_fixed for n in one.trees[0].nodes.values() if n.is_leaf]
    assert all(2.0 <= ref_value / 1e18 <= 10.0 for ref_value in leaves if ref_value != 6 * 10**18)  # means, from 6
    with pytest.raises(ValueError, match="label range declared"):
        loss_bounds("regression", None)
    with pytest.raises(ValueError, match="low < high"):
        loss_bounds("regression", (3.0, 3.0))


def test_one_feature_trees_take_turns_over_the_splittable_features() -> None:
    widths = np.array([18, 3, 2, 10, 5])  # feature 2 has no edge
    turns = feature_turns(widths, 11, np.random.default_rng(4))
    assert len(turns) == 11
    for start in (0, 4):  # every round holds each splittable feature once
        assert sorted(turns[start : start + 4]) == [0, 1, 3, 4]
    assert feature_turns(widths, 11, np.random.default_rng(4)) == turns  # a public draw: every party gets it
    assert one_feature_per_tree("auto", True, 4, 4) and not one_feature_per_tree("auto", False, 4, 4)
    assert one_feature_per_tree("one", False, 4, 4) and not one_feature_per_tree("all", True, 4, 4)
    # fewer trees than features (a9a's 123 columns, 40 trees): a one-feature model would never see most of them
    assert not one_feature_per_tree("auto", True, 123, 40) and one_feature_per_tree("one", True, 123, 40)
    with pytest.raises(ValueError, match="tree_features must be one of"):
        one_feature_per_tree("two", True, 4, 4)


@pytest.mark.parametrize(("epsilon", "expected"), [(1.0, "one"), (math.inf, "all")])
def test_auto_trees_split_on_one_feature_under_privacy(epsilon: float, expected: str) -> None:
    train, test = _data(3_000)
    params = TrainParams(trees=8, depth=2, bins=8)
    prep = prepare(train, test, params, PrepConfig(parties=2, theta=0.5, seed=2, epsilon=epsilon))
    report, model, _ = run(prep, "randomsplit")
    assert report["params"]["tree_features"] == expected and model is not None
    per_tree = [{tree.nodes[i].feature for i in tree.internal_ids()} for tree in model.trees]
    if expected == "one":
        assert all(len(f) == 1 for f in per_tree)
        assert sorted(f.pop() for f in per_tree[:4]) == [0, 1, 2, 3]  # feature 4 is constant: never a turn
    else:
        assert any(len(f) > 1 for f in per_tree)


def test_a_private_regression_task_trains_on_its_declared_label_range() -> None:
    """Under a budget a regression task is refused without a declared label range; with one, the parties' labels
    are clipped to it, the plan's gradient bound is half of it, and the model learns (its RMSE below the labels'
    spread around the range's midpoint, where every score starts)."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(6_000, 3))
    y = np.clip(10.0 + 3.0 * X[:, 0] + rng.normal(size=6_000), 0.0, 20.0)
    y[0] = 25.0  # outside the declared range: clipped
    train, test = Dataset(X[:4_500], y[:4_500]), Dataset(X[4_500:], y[4_500:])
    params = TrainParams(trees=40, depth=3, bins=16, objective="regression")
    config = PrepConfig(parties=2, theta=0.5, seed=2, epsilon=4.0, dp_noise="seeded")
    with pytest.raises(ValueError, match="label range declared"):
        prepare(train, test, params, config)
    prep = prepare(train, test, params, dataclasses.replace(config, label_range=(0.0, 20.0)))
    assert prep.label_range == (0.0, 20.0) and float(prep.train.y.max()) == 20.0
    report, model, _ = run(prep, "randomsplit")
    assert model is not None and report["privacy"]["gradient_bound"] == 10.0
    assert report["privacy"]["hessian_bound"] == 1.0 and report["privacy"]["accounted_epsilon"] <= 4.0
    assert report["test_rmse"] < float(np.sqrt(np.mean((test.y - 10.0) ** 2)))
    with pytest.raises(ValueError, match="binary task"):
        run(prep, "fvtree")  # FV-tree's plan rests on the logistic loss's bounds
