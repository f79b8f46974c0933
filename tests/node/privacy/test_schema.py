"""Under a budget the schema (ranges, integer flags) is declared or the requester's, never the parties' rows."""

from __future__ import annotations

import numpy as np
import pytest

import fgbdt_chain
from fgbdt_chain.node.privacy.schema import SchemaRequired

OUTLIER = 1000.123


def _parties(outlier: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Four parties with a binary feature and a constant one (3.0); party 0's first row holds ``outlier`` in both."""
    rng = np.random.default_rng(7)
    parties = []
    for p in range(4):
        flag = rng.integers(0, 2, 300).astype(np.float64)
        X = np.column_stack([flag, np.full(300, 3.0)])
        y = (rng.random(300) < 0.2 + 0.6 * flag).astype(np.float64)
        if p == 0:
            X[0] = outlier
        parties.append((X, y))
    return parties


def test_a_budget_without_declared_ranges_is_refused_with_a_request_for_them() -> None:
    with pytest.raises(SchemaRequired, match="declared: give feature_ranges"):
        fgbdt_chain.train({"objective": "binary", "epsilon": 1.0}, _parties(OUTLIER))


def test_exact_binning_is_refused_under_a_budget() -> None:
    params = {"epsilon": 1.0, "binning": "exact", "feature_ranges": [(0, 1), (3, 3)]}
    with pytest.raises(ValueError, match="binning 'exact' cuts at the pooled training rows' quantiles"):
        fgbdt_chain.train(params, _parties(OUTLIER))


def test_nothing_released_depends_on_the_outlier() -> None:
    """With declared ranges the outlier row is clipped: the model (edges, trees) and the report equal those of the
    same parties with that row at the range's top, bit for bit under the same seeded noise."""
    params = {
        "objective": "binary",
        "epsilon": 1.0,
        "feature_ranges": [(0.0, 1.0), (3.0, 3.0)],
        "integer_features": [True, True],
        "dp_noise": "seeded",
        "num_iterations": 3,
    }
    leaked = fgbdt_chain.train(params, _parties(OUTLIER))
    clipped = _parties(OUTLIER)
    clipped[0][0][0] = [1.0, 3.0]
    reference = fgbdt_chain.train(params, clipped)
    assert leaked.edges == reference.edges
    assert [e for e in leaked.edges[0]] == [0.5] and leaked.edges[1] == []
    assert leaked.to_json_dict() == reference.to_json_dict()
    # the report keeps no exact counts: no party's rows nor positives, no pooled row count
    assert leaked.report["train_rows"] is None
    assert all(pp["rows"] is None and pp["positives"] is None for pp in leaked.report["per_party"])
    assert leaked.report["privacy"]["schema"] == "declared"


def test_a_validation_set_gives_the_ranges_and_noise_is_entropy_by_default() -> None:
    rng = np.random.default_rng(3)
    flag = rng.integers(0, 2, 200).astype(np.float64)
    valid = (np.column_stack([flag, np.full(200, 3.0)]), flag)
    model = fgbdt_chain.train({"epsilon": 1.0, "num_iterations": 2}, _parties(OUTLIER), valid_set=valid)
    assert all(np.all((np.asarray(e) > 0) & (np.asarray(e) < 1)) for e in model.edges[:1]) and model.edges[1] == []
    assert model.report["privacy"]["noise"] == "entropy"
    assert model.report["privacy"]["schema"] == "requester's rows"
