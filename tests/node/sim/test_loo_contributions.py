"""``contribution = loo`` in the simulator: cross-fitted leave-one-out values (``ledger.spec.loo``) paid in place of
split Shapley values, on the same model."""

from __future__ import annotations

import numpy as np

from fgbdt_chain import train

SHAPE = {"num_trees": 4, "max_depth": 3, "seed": 0}


def _parties(seed: int = 0) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
    """Four parties of 1,500 rows of the same distribution; party 1's labels are coin flips."""
    rng = np.random.default_rng(seed)

    def rows(n: int) -> tuple[np.ndarray, np.ndarray]:
        X = rng.normal(size=(n, 6))
        return X, (X[:, 0] + 0.7 * X[:, 1] + rng.normal(0, 0.7, n) > 0).astype(np.float64)

    parties = [rows(1500) for _ in range(4)]
    parties[1] = (parties[1][0], rng.integers(0, 2, 1500).astype(np.float64))
    return parties, rows(1000)


def test_loo_pays_nothing_for_coin_flip_labels_on_the_same_model() -> None:
    parties, valid = _parties()
    shapley = train({**SHAPE, "contribution": "shapley"}, parties, valid_set=valid)
    model = train({**SHAPE, "contribution": "loo"}, parties, valid_set=valid)
    assert [t.to_json_dict() for t in model.trees] == [t.to_json_dict() for t in shapley.trees]
    assert model.contributions is not None
    shares = [c["share"] for c in model.contributions]
    assert shares[1] == 0.0 and min(shares[0], shares[2], shares[3]) > 0.2
    assert abs(sum(shares) - 1.0) < 1e-9
    for c in model.contributions:  # the vote's kappa is recorded, not paid
        assert c["total_fixed"] == c["phi_fixed"]
