"""The verifiers' carry rule (``ledger.tree_carry``): every honest root is within what the party's previous tree
allows, on any data; a stretch that starts after the first tree is not."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.ledger.reference import ONE, Totals
from fgbdt_chain.ledger.tree_carry import Carry, CarryError, next_score_bound
from fgbdt_chain.node.attacks import Attack
from fgbdt_chain.node.data import Dataset
from fgbdt_chain.node.experiment import PrepConfig, federation, prepare
from fgbdt_chain.node.fvtree import LevelView, TrainParams
from fgbdt_chain.node.histogram import FixedRows
from fgbdt_chain.node.objective import gradients


def _exact(values: np.ndarray) -> list[int]:
    """Every row's value as the party quantises it (``FixedRows``)."""
    rows = FixedRows.of(values, np.zeros_like(values))
    return [(int(hi) << 32) + int(lo) for hi, lo in zip(rows.g_hi, rows.g_lo, strict=True)]


def _sums(g: np.ndarray, h: np.ndarray, rows: np.ndarray) -> Totals:
    qg, qh = _exact(g[rows]), _exact(h[rows])
    return Totals(sum(qg), sum(qh), int(rows.sum()))


@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_honest_rows_keep_the_carry_and_a_stretch_breaks_it(objective: str) -> None:
    """Rows with scores far from 0 and large leaf values (the Taylor remainder's worst case), through the float
    pipeline a party runs: the next root is always allowed; its gradients stretched by 1%, or one row more, are
    not."""
    rng = np.random.default_rng(7)
    code = ref.OBJECTIVES[objective]  # type: ignore[index]
    for trial in range(40):
        n = int(rng.integers(50, 400))
        y = (rng.random(n) < 0.3).astype(float) if objective == "binary" else rng.normal(50, 30, n)
        score = rng.normal(0, 3, n) if objective == "binary" else rng.normal(50, 30, n)
        leaf_of = rng.integers(0, 6, n)
        values = [int(v) for v in rng.normal(0, 1.5, 6) * ONE]
        g0, h0 = gradients(objective, y, score)
        root = _sums(g0, h0, np.ones(n, dtype=bool))
        leaves = [(values[k], _sums(g0, h0, leaf_of == k)) for k in range(6)]
        bound = next_score_bound(int(np.abs(score).max() * ONE) + 1, values)
        carry = Carry.of(code, root, leaves, bound)
        score1 = score + np.array([v / ONE for v in values])[leaf_of]
        g1, h1 = gradients(objective, y, score1)
        nxt = _sums(g1, h1, np.ones(n, dtype=bool))
        carry.check(nxt)  # honest: never refused
        if abs(nxt.g) > 100 * carry.g_slack:  # a 1% stretch is detectable only where it moves G by more than the room
            assert not carry.allows(Totals(nxt.g * 101 // 100, nxt.h, nxt.n)), trial
        with pytest.raises(CarryError, match="CarriedCountMismatch"):
            carry.check(Totals(nxt.g, nxt.h, nxt.n + 1))


def test_squared_error_carries_the_gradient_exactly() -> None:
    """Squared error moves every row's gradient by exactly its leaf value: the room is float rounding only."""
    root = Totals(-5 * ONE, 10 * ONE, 10)
    carry = Carry.of(
        ref.OBJECTIVE_SQUARED, root, [(ONE // 2, Totals(0, 4 * ONE, 4)), (-ONE, Totals(0, 6 * ONE, 6))], ONE
    )
    assert carry.g == -5 * ONE + 2 * ONE - 6 * ONE and carry.g_slack < ONE // 10**6 and carry.h_slack == 0
    carry.check(Totals(-9 * ONE, 10 * ONE, 10))
    with pytest.raises(CarryError, match="CarriedGradientOutOfRange"):
        carry.check(Totals(-9 * ONE - ONE // 1000, 10 * ONE, 10))


def test_the_logistic_hessian_moves_at_most_its_bound() -> None:
    """A hessian sum stretched past ``sum n |v| sup|sigmoid''|`` is refused; one inside is not."""
    root = Totals(0, 2 * ONE, 10)
    carry = Carry.of(ref.OBJECTIVE_BINARY, root, [(ONE // 10, Totals(0, 2 * ONE, 10))], ONE)
    room = float(carry.h_slack) / ONE
    assert 0.0962 < room < 0.0963  # 10 rows x 0.1 x 1/(6 sqrt 3), and the rounding room
    g = ONE // 5  # the gradient moves by v H = 0.1 x 2
    carry.check(Totals(g, 2 * ONE + int(0.09 * ONE), 10))
    with pytest.raises(CarryError, match="CarriedHessianOutOfRange"):
        carry.check(Totals(g, 2 * ONE + int(0.1 * ONE), 10))


def _prep(objective: str, theta: float, skew: float) -> object:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 6))
    X[:, 3] = np.exp(2 * X[:, 3])  # a heavy tail
    X[rng.random(3000) < 0.1, 4] = np.nan  # missing values
    X[:, 5] = rng.poisson(1.0, 3000)  # an integer column
    lin = X[:, 0] - X[:, 1] + 0.3 * np.log(X[:, 3]) + 0.4 * rng.normal(size=3000)
    y = (lin > 0).astype(float) if objective == "binary" else 10 + 3 * lin
    params = TrainParams(trees=12, depth=4, bins=16, min_rows=5, objective=objective)  # type: ignore[arg-type]
    config = PrepConfig(parties=4, theta=theta, seed=0, psd_max_rows=40, feature_skew=skew)
    return prepare(Dataset(X[:2500], y[:2500]), Dataset(X[2500:], y[2500:]), params, config)


@pytest.mark.parametrize(
    ("objective", "theta", "skew"),
    [("binary", 0.5, 0.0), ("binary", 0.8, 0.5), ("regression", 0.5, 0.0), ("regression", 0.8, 0.5)],
)
def test_simulated_honest_roots_keep_the_carry_and_stretches_do_not(objective: str, theta: float, skew: float) -> None:
    """Every honest party's root from the second tree on, as the verifiers see it: allowed. The same root with its
    gradients times 2: refused at most roots (at all of them under squared error); its rows times 1.5: at all."""
    roots: list[tuple[Carry, Totals]] = []

    def observe(view: LevelView) -> None:
        if view.level == 0 and view.carries:
            roots.extend((c, t) for c, t in zip(view.carries, view.roots, strict=True) if c is not None)

    result = federation(_prep(objective, theta, skew), "fvtree", observer=observe).train()  # type: ignore[arg-type]
    assert result.refusals == []
    assert len(roots) == 4 * 11
    assert all(c.allows(t) for c, t in roots)
    stretched = [c.allows(Totals(2 * t.g, t.h, t.n)) for c, t in roots]
    # the logistic room is the Taylor remainder: a party whose gradients nearly cancel (no label skew) can hide a
    # stretch of them in it, which the verifiers' statistical test is left to see
    assert sum(stretched) <= (0 if objective == "regression" else len(roots) // 4)
    assert not any(c.allows(Totals(t.g, t.h, t.n * 3 // 2)) for c, t in roots)


@pytest.mark.parametrize(
    ("objective", "kind", "rule"),
    [
        ("regression", "gradients", "the verifiers refuse the histograms: CarriedGradientOutOfRange"),
        ("binary", "counts", "the verifiers refuse the histograms: CarriedCountMismatch"),
        ("binary", "gradients-hessians", "the contract refuses the histograms: HessianOutOfRange"),
        # a bin of rows that share their label leaves no room: the contract's bound is first
        ("binary", "gradients", "the contract refuses the histograms: LogisticBound"),
        ("regression", "counts", "the contract refuses the histograms: HessianOutOfRange"),
    ],
)
def test_a_stretch_started_later_is_refused_at_its_first_root(objective: str, kind: str, rule: str) -> None:
    """A party honest for three trees that then stretches by 2%: refused at that root, by the carry rule where the
    stretch keeps every bin rule of the contract."""
    attack = Attack(kind, 1.02, start_tree=3)  # type: ignore[arg-type]
    fed = federation(_prep(objective, 0.8, 0.0), "fvtree", attacks={1: attack})  # type: ignore[arg-type]
    result = fed.train()
    [refusal] = result.refusals
    assert (refusal.party, refusal.tree, refusal.level) == (1, 3, 0)
    assert rule in refusal.reason
    assert result.shares()[1] == 0.0
