"""``contribution = scaled`` in the simulator: scaled judged values (``ledger.spec.scaled``) paid in place of split
Shapley values, on the same model, with negative totals withheld from the reward."""

from __future__ import annotations

import numpy as np

from fgbdt_chain import train
from fgbdt_chain.ledger.spec import scaled

SHAPE = {"num_trees": 4, "max_depth": 3, "seed": 0}


def test_scaled_pays_nothing_for_coin_flip_labels_and_withholds_their_harm() -> None:
    """Four parties with one rule and base rates of 20, 40, 60 and 80% positive labels; party 1's labels are coin
    flips. The model is the one split Shapley pays on; the coin flips earn nothing and their negative total is kept
    back from the others (the shares sum to less than 1 by exactly its weight), every skewed party earns."""
    rng = np.random.default_rng(0)

    def rows(n: int, offset: float) -> tuple[np.ndarray, np.ndarray]:
        X = rng.normal(size=(n, 6))
        return X, (X[:, 0] + 0.7 * X[:, 1] + rng.normal(0, 0.7, n) > offset).astype(np.float64)

    parties = [rows(1500, o) for o in (0.9, 0.3, -0.3, -0.9)]
    parties[1] = (parties[1][0], rng.integers(0, 2, 1500).astype(np.float64))
    valid = rows(1000, 0.0)
    shapley = train({**SHAPE, "contribution": "shapley"}, parties, valid_set=valid)
    model = train({**SHAPE, "contribution": "scaled"}, parties, valid_set=valid)
    assert [t.to_json_dict() for t in model.trees] == [t.to_json_dict() for t in shapley.trees]
    assert model.contributions is not None
    shares = [c["share"] for c in model.contributions]
    totals = [int(c["total_fixed"]) for c in model.contributions]
    assert totals[1] < 0 and shares[1] == 0.0 and min(shares[0], shares[2], shares[3]) > 0.1
    assert shares == scaled.withheld_shares(totals, [True] * 4)
    assert abs(sum(shares) - (1.0 - abs(totals[1]) / sum(abs(t) for t in totals))) < 1e-9
    for c in model.contributions:  # the vote's kappa is recorded, not paid
        assert c["total_fixed"] == c["phi_fixed"]
