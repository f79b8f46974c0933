"""FedXGBllr (``node.baselines.fedxgbllr``): the CNN's gradients against finite differences, FedAvg's weighting, and the
learnable learning rates doing better than one client's trees alone."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.baselines.fedxgbllr import TreeCNN, client_update, fed_avg, train_fedxgbllr
from fgbdt_chain.node.baselines.seed_systems import SeedInputs
from fgbdt_chain.node.model.metrics import auc


@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_gradients_match_finite_differences(objective: str) -> None:
    rng = np.random.default_rng(0)
    net = TreeCNN.init(clients=3, per_client=4, rng=rng, channels=5)
    X = rng.normal(size=(7, 12))
    y = (rng.random(7) > 0.5).astype(float) if objective == "binary" else rng.normal(size=7)
    _, grads = net.gradients(X, y, objective)
    for p, g in zip(net.params, grads, strict=True):
        flat, gflat = p.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            keep = flat[i]
            flat[i] = keep + 1e-6
            up = net.gradients(X, y, objective)[0]
            flat[i] = keep - 1e-6
            down = net.gradients(X, y, objective)[0]
            flat[i] = keep
            assert gflat[i] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-7)


def test_fedavg_of_one_client_is_its_local_training() -> None:
    """With one client FedAvg returns that client's update, and the average weighs clients by their rows."""
    rng = np.random.default_rng(1)
    net = TreeCNN.init(2, 3, rng, channels=4)
    X, y = rng.normal(size=(40, 6)), (rng.random(40) > 0.5).astype(float)
    local = client_update(net, X, y, "binary", epochs=3, batch=8, rng=np.random.default_rng(2))
    again = client_update(net, X, y, "binary", epochs=3, batch=8, rng=np.random.default_rng(2))
    averaged = fed_avg([local], [40])
    assert all(np.array_equal(a, b) for a, b in zip(averaged.params, again.params, strict=True))
    assert not np.array_equal(local.conv_w, net.conv_w)  # it trained
    other = TreeCNN(*(np.ones_like(p) for p in net.params))
    mixed = fed_avg([local, other], [30, 10])
    np.testing.assert_allclose(mixed.fc_w, 0.75 * local.fc_w + 0.25)


def test_learnable_rates_beat_one_clients_trees() -> None:
    """Two clients whose rows differ (each holds one half of feature 0's range, where a different feature decides
    the label): the CNN over both ensembles predicts the pooled test rows better than either client's alone."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3_000, 4))
    y = (np.where(X[:, 0] < 0, X[:, 1], X[:, 2]) + 0.3 * rng.normal(size=3_000) > 0).astype(float)
    left = X[:2_000, 0] < 0
    party_X = [X[:2_000][left], X[:2_000][~left]]
    party_y = [y[:2_000][left], y[:2_000][~left]]
    params = TrainParams(trees=20, depth=3, bins=16)
    inputs = SeedInputs(party_X, [], party_y, [], X[2_000:], np.zeros((1_000, 4), np.uint8), params, seed=0)
    result = train_fedxgbllr(inputs, rounds=3, epochs=5, batch=32, channels=8)
    assert result.details["trees_per_client"] == 10 and result.details["cnn_parameters"] == 8 * 10 + 8 + 16 + 1
    fed = auc(y[2_000:], result.test_pred)
    for Xk, yk in zip(party_X, party_y, strict=True):
        booster = lgb.train(baselines.own_bins_params(params), lgb.Dataset(Xk, label=yk), num_boost_round=10)
        assert fed > auc(y[2_000:], booster.predict(X[2_000:])) + 0.02
    losses = result.details["train_loss_per_round"]
    assert losses[-1] < losses[0]


def test_bad_inputs_are_refused() -> None:
    X = np.zeros((10, 2))
    params = TrainParams(trees=2, depth=2, bins=4)
    three = SeedInputs([X, X, X], [], [np.zeros(10)] * 3, [], X, X.astype(np.uint8), params, seed=0)
    with pytest.raises(ValueError, match="cannot be shared by 3 clients"):
        train_fedxgbllr(three)
    one = SeedInputs([X], [], [np.zeros(10)], [], X, X.astype(np.uint8), params, seed=0)
    with pytest.raises(ValueError, match="at least 1"):
        train_fedxgbllr(one, rounds=0)
