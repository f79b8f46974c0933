"""Data attacks (``node.attacks.data``): what each manipulation does to a party's rows, that the list form
(``fgbdt_chain.train``) and the pooled form (``simulate``, ``train`` on chain) give each party the same rows, and that a
manipulated party trains through ``fgbdt_chain.train`` with its combined share reported."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fgbdt_chain import train
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.data import (
    DATA_ATTACK_KINDS,
    IDENTITY_KINDS,
    JITTER,
    DataAttack,
    DataAttackKind,
    apply_to_dataset,
    apply_to_parties,
    duplicate,
    holder_share,
    split,
    synthetic,
)
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.sim.experiment import PrepConfig, prepare, run


def rows(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two continuous features, one binary, one integer-valued; a few missing values; binary labels."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.normal(size=n), rng.normal(5.0, 2.0, size=n), rng.integers(0, 2, size=n), rng.integers(0, 50, size=n)]
    ).astype(np.float64)
    X[rng.random(X.shape) < 0.02] = np.nan
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(np.float64)
    return X, y


def test_duplicate_copies_every_row_k_times() -> None:
    X, y = rows(50)
    X3, y3 = duplicate(X, y, 3)
    assert X3.shape == (150, 4)
    np.testing.assert_array_equal(X3[100:], X)
    np.testing.assert_array_equal(y3[50:100], y)
    with pytest.raises(ValueError, match="k >= 1"):
        duplicate(X, y, 0)


def test_jitter_adds_near_copies_and_keeps_binary_and_integer_features() -> None:
    X, y = rows()
    Xj, yj = synthetic(X, y, len(y), np.random.default_rng(1), kind="jitter")
    assert Xj.shape == (2 * len(y), 4)
    np.testing.assert_array_equal(Xj[: len(y)], X)
    np.testing.assert_array_equal(yj[len(y) :], y)  # a copy of each row, in order, with its label
    new = Xj[len(y) :]
    np.testing.assert_array_equal(np.isnan(new), np.isnan(X))
    np.testing.assert_array_equal(new[:, 2], X[:, 2])  # binary: untouched
    ok = ~np.isnan(X[:, 3])
    assert np.all(new[ok, 3] == np.round(new[ok, 3]))  # integer-valued: stays integer
    for j in (0, 1):  # continuous: moved, by about JITTER standard deviations
        ok = ~np.isnan(X[:, j])
        moved = new[ok, j] - X[ok, j]
        assert np.all(moved != 0)
        assert np.std(moved) == pytest.approx(JITTER * np.nanstd(X[:, j]), rel=0.2)


def test_fitted_rows_follow_each_class_marginals() -> None:
    X, y = rows(2000)
    extra = 4000
    Xf, yf = synthetic(X, y, extra, np.random.default_rng(2), kind="fitted")
    new, labels = Xf[len(y) :], yf[len(y) :]
    assert new.shape == (extra, 4)
    assert abs(labels.mean() - y.mean()) < 0.04
    for c in (0.0, 1.0):
        for j in range(4):  # every new value is one of the class's own, with the class's mean
            mine = X[y == c, j]
            drawn = new[labels == c, j]
            assert np.isin(drawn[~np.isnan(drawn)], mine).all()
            assert abs(np.nanmean(drawn) - np.nanmean(mine)) < 0.15 * (np.nanstd(mine) + 1e-9) + 0.05
    # rows are not copies: the features are drawn independently
    assert len({tuple(r) for r in np.nan_to_num(new[:200])} & {tuple(r) for r in np.nan_to_num(X)}) < 20


def test_split_cuts_the_holder_into_near_equal_identities() -> None:
    parts = [np.arange(0, 10), np.arange(10, 31), np.arange(31, 40)]
    out, identities = split(parts, 1, 3, np.random.default_rng(0))
    assert identities == [1, 3, 4]
    assert len(out) == 5
    assert [len(out[i]) for i in identities] == [7, 7, 7]
    np.testing.assert_array_equal(np.sort(np.concatenate([out[i] for i in identities])), np.arange(21))
    np.testing.assert_array_equal(out[0], parts[0])
    with pytest.raises(ValueError, match="too few"):
        split(parts, 1, 22, np.random.default_rng(0))


@pytest.mark.parametrize("kind", DATA_ATTACK_KINDS)
def test_list_and_pooled_forms_give_each_party_the_same_rows(kind: DataAttackKind) -> None:
    X, y = rows(300)
    bounds = [0, 90, 200, 300]
    pairs = [(X[a:b], y[a:b]) for a, b in itertools.pairwise(bounds)]
    attack = DataAttack(kind, 3, seed=5)
    listed, ids_a = apply_to_parties(pairs, 1, attack)
    pooled, parts, ids_b = apply_to_dataset(
        Dataset(X, y, ["a", "b", "c", "d"]),
        [np.arange(a, b) for a, b in itertools.pairwise(bounds)],
        1,
        attack,
    )
    assert ids_a == ids_b == attack.identities(3, 1)
    assert len(listed) == len(parts) == (5 if kind in IDENTITY_KINDS else 3)
    for (Xi, yi), idx in zip(listed, parts, strict=True):
        np.testing.assert_array_equal(Xi, pooled.X[idx])
        np.testing.assert_array_equal(yi, pooled.y[idx])
    np.testing.assert_array_equal(pooled.X[: len(y)], X)  # the other parties' rows untouched
    holder_rows = sum(len(parts[i]) for i in ids_b)
    assert holder_rows == (110 if kind == "split" else 330)


def test_clones_are_identities_each_holding_a_jittered_copy_of_every_row() -> None:
    X, y = rows(120)
    pairs = [(X[:40], y[:40]), (X[40:80], y[40:80]), (X[80:], y[80:])]
    listed, identities = apply_to_parties(pairs, 1, DataAttack("clone", 3, seed=2))
    assert identities == [1, 3, 4]
    own = X[40:80]
    np.testing.assert_array_equal(listed[1][0], own)  # the first identity keeps the holder's own rows
    for Xc, yc in (listed[3], listed[4]):
        np.testing.assert_array_equal(yc, y[40:80])  # labels copied as they are
        np.testing.assert_array_equal(Xc[:, 2], own[:, 2])  # a binary feature is not jittered
        assert np.all(np.isnan(Xc[:, 3]) | (Xc[:, 3] == np.round(Xc[:, 3])))  # an integer one stays integer
        spread = np.nanmean(np.abs(Xc[:, :2] - own[:, :2]) / np.nanstd(own[:, :2], axis=0))
        assert 0 < spread < 0.05  # near, not equal: the jitter is 1% of a feature's spread
    assert not np.allclose(listed[3][0][:, :2], listed[4][0][:, :2], equal_nan=True)  # each clone its own noise


def test_fresh_clones_draw_their_labels_from_a_model_of_the_holders_rows() -> None:
    X, y = rows(600, seed=4)
    pairs = [(X[:100], y[:100]), (X[100:], y[100:])]
    listed, identities = apply_to_parties(pairs, 1, DataAttack("fresh-clone", 3, seed=1))
    assert identities == [1, 2, 3]
    own_X, own_y = pairs[1]
    first, second = listed[2][1], listed[3][1]
    for labels in (first, second):
        assert set(np.unique(labels)) <= {0.0, 1.0}
        assert 0.03 < np.mean(labels != own_y) < 0.4  # fresh noise, yet the model's signal (x0 > 0)
        assert np.mean(labels == (own_X[:, 0] > 0)) > 0.7
    assert not np.array_equal(first, second)  # each clone its own draw
    reg = np.nan_to_num(own_X[:, 1], nan=5.0) * 2.0 + np.random.default_rng(0).normal(size=len(own_y))
    listed, _ = apply_to_parties([pairs[0], (own_X, reg)], 1, DataAttack("fresh-clone", 2, seed=1))
    drawn = listed[2][1]
    assert not np.array_equal(drawn, reg) and abs(np.std(drawn) - np.std(reg)) < 0.25 * np.std(reg)
    assert np.corrcoef(drawn, reg)[0, 1] > 0.5


def test_bad_attacks_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown data attack"):
        DataAttack("copies", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        DataAttack("duplicate", 0.5)
    with pytest.raises(ValueError, match="holder"):
        apply_to_parties([rows(10), rows(10)], 2, DataAttack("duplicate", 2))


def test_a_manipulated_party_trains_through_the_python_api_as_simulate_trains_it() -> None:
    X, y = rows(900, seed=3)
    pairs = [(X[i::3], y[i::3]) for i in range(3)]
    params = {"num_trees": 3, "max_depth": 3, "min_data_in_leaf": 5, "seed": 1}
    attack = DataAttack("split", 2, seed=1)
    listed, identities = apply_to_parties(pairs, 1, attack)
    contributions = train(params, listed).contributions
    assert contributions is not None and len(contributions) == 4
    share = holder_share(contributions, identities)
    assert share == pytest.approx(contributions[1]["share"] + contributions[3]["share"])
    assert 0.0 < share < 1.0
    # the pooled form through prepare/run (simulate's path) gives the same contributions
    pooled, parts, _ = apply_to_dataset(
        Dataset(np.vstack([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs]), [f"f{j}" for j in range(4)]),
        [np.arange(i * 300, (i + 1) * 300) for i in range(3)],
        1,
        attack,
    )
    empty = Dataset(np.zeros((0, 4)), np.zeros(0), pooled.feature_names)
    tp = TrainParams(trees=3, depth=3, min_rows=5)
    report, _, _ = run(prepare(pooled, empty, tp, PrepConfig(parties=4, seed=1), parts=parts), "fvtree")
    assert [c["share"] for c in report["contributions"]] == [c["share"] for c in contributions]
