"""The simulator above ``shapley_estimate.EXACT_MAX_PARTIES`` parties: estimated split Shapley values from the task
seed, the same on the limbs and on the messages (``reference.resolve_node``), efficient, and the model untouched."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.ledger.spec import shapley_estimate as se
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.sim import fvtree
from fgbdt_chain.node.sim.fvtree import Federation, TrainResult

PARTIES = se.EXACT_MAX_PARTIES + 4


def _train(shapley_seed: int) -> TrainResult:
    rng = np.random.default_rng(0)
    n = 60 * PARTIES
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] - 0.6 * X[:, 1] + 0.4 * rng.normal(size=n) > 0).astype(np.float64)
    slots = np.clip(np.floor((X + 3) / 6 * 8), 0, 7).astype(np.uint8) + 1
    parts = np.array_split(rng.permutation(n), PARTIES)
    weights = [np.ones(len(p)) for p in parts]
    params = TrainParams(trees=2, depth=2, bins=8, min_rows=5)
    fed = Federation(
        [slots[p] for p in parts],
        [y[p] for p in parts],
        params,
        party_weights=weights,
        keep_levels=True,
        shapley_seed=shapley_seed,
    )
    return fed.train()


def test_estimates_follow_the_seed_and_leave_the_model_alone() -> None:
    a, b = _train(1), _train(2)
    assert [t.nodes for t in a.trees] == [t.nodes for t in b.trees]
    assert a.phi != b.phi
    assert _train(1).phi == a.phi
    splits = 0
    for level in a.levels:
        for res in level.results:
            if res.split is not None:
                splits += 1
                assert abs(sum(res.phi) - res.credited_gain) <= PARTIES
    assert splits > 0


def test_the_limbs_and_the_messages_give_the_same_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _train(7)
    monkeypatch.setattr(fvtree, "level_of", lambda sums, stacked=None: None)
    slow = _train(7)
    assert [t.nodes for t in fast.trees] == [t.nodes for t in slow.trees]
    assert (fast.phi, fast.kappa, fast.total) == (slow.phi, slow.kappa, slow.total)
    assert fast.levels == slow.levels


def test_a_seed_outside_uint256_is_refused() -> None:
    with pytest.raises(ValueError, match="shapley_seed"):
        Federation([np.ones((4, 1), dtype=np.uint8)] * 2, [np.zeros(4)] * 2, TrainParams(), shapley_seed=-1)


def test_train_takes_the_task_seed() -> None:
    """``fgbdt_chain.train``'s ``shapley_seed`` is the simulator's: the same seed gives the same contributions, another
    seed other ones, and a seed outside uint256 is refused before any work, naming the key."""
    import fgbdt_chain

    rng = np.random.default_rng(1)
    parties = []
    for _ in range(se.EXACT_MAX_PARTIES + 1):
        X = rng.normal(size=(40, 3))
        parties.append((X, (X[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(np.float64)))
    params = {"num_trees": 1, "max_depth": 2, "max_bin": 8, "min_data_in_leaf": 5, "seed": 0}

    def totals(seed: int) -> list[float]:
        model = fgbdt_chain.train({**params, "shapley_seed": seed}, parties)
        assert model.contributions is not None
        return [c["total"] for c in model.contributions]

    one = totals(1)
    assert totals(1) == one
    assert totals(2) != one
    with pytest.raises(ValueError, match=r"shapley_seed=-1: the task seed is a uint256"):
        fgbdt_chain.train({**params, "shapley_seed": -1}, parties)
