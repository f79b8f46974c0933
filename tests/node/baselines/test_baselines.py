"""LightGBM baselines (``node.baselines.centralized``): what each takes from the task and what it leaves at LightGBM's
own."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines


def test_lightgbm_defaults_is_lightgbm_as_a_user_runs_it() -> None:
    """The ``lightgbm-defaults`` baseline takes none of the task's parameters: 100 rounds, trees of 31 leaves
    grown leaf-wise past any depth the task sets, and its predictions are those of a plain ``lgb.train``."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3_000, 4))
    y = (X[:, 0] * X[:, 1] + 0.5 * X[:, 2] + 0.3 * rng.normal(size=3_000) > 0).astype(float)
    params = TrainParams(trees=7, depth=2, lam=5.0)
    booster = baselines.train_defaults(X, y, params, seed=3)
    assert booster.num_trees() == 100
    leaves = [t["num_leaves"] for t in booster.dump_model()["tree_info"]]
    assert max(leaves) == 31 > 2**params.depth
    # LightGBM's own scikit-learn estimator with nothing set but the seed and threads: the same model
    sk = lgb.LGBMClassifier(random_state=3, n_jobs=1, deterministic=True, verbose=-1).fit(X, y)
    np.testing.assert_allclose(booster.predict(X), sk.predict_proba(X)[:, 1], rtol=0, atol=1e-12)
