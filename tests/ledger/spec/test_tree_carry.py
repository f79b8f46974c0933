"""The verifiers' carry rule (``ledger.spec.tree_carry``): every honest root is within what the party's previous tree
allows, on any data; a stretch that starts after the first tree is not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import candidate_totals
from fgbdt_chain.ledger.spec.reference import ONE, Totals
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tree_carry import Carry, CarryError, leaf_sums, next_score_bound
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import Dataset
from fgbdt_chain.node.kernels.histogram import FixedRows
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.protocol.local_party import messages_of
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, federation, prepare
from fgbdt_chain.node.sim.fvtree import Federation, LevelView


def _exact(values: np.ndarray) -> list[int]:
    """Every row's value as the party quantises it (``FixedRows``)."""
    rows = FixedRows.of(values, np.zeros_like(values))
    return [(int(hi) << 32) + int(lo) for hi, lo in zip(rows.g_hi, rows.g_lo, strict=True)]


def _sums(g: np.ndarray, h: np.ndarray, rows: np.ndarray) -> Totals:
    qg, qh = _exact(g[rows]), _exact(h[rows])
    return Totals(sum(qg), sum(qh), int(rows.sum()))


def _step(objective: str, rng: np.random.Generator, n: int, spread: float) -> tuple[Carry, Totals]:
    """A party's carry from one tree and its next root, through the float pipeline a party runs: label-skewed rows
    at scores far from 0, six leaves with values of standard deviation ``spread``."""
    code = ref.OBJECTIVES[objective]  # type: ignore[index]
    y = (rng.random(n) < 0.8).astype(float) if objective == "binary" else rng.normal(50, 30, n)
    score = rng.normal(-1, 2, n) if objective == "binary" else rng.normal(30, 30, n)
    leaf_of = rng.integers(0, 6, n)
    values = [int(v) for v in rng.normal(0, spread, 6) * ONE]
    g0, h0 = gradients(objective, y, score)
    root = _sums(g0, h0, np.ones(n, dtype=bool))
    leaves = [(values[k], _sums(g0, h0, leaf_of == k)) for k in range(6)]
    bound = next_score_bound(int(np.abs(score).max() * ONE) + 1, values)
    score1 = score + np.array([v / ONE for v in values])[leaf_of]
    g1, h1 = gradients(objective, y, score1)
    return Carry.of(code, root, leaves, bound), _sums(g1, h1, np.ones(n, dtype=bool))


@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_honest_rows_keep_the_carry(objective: str) -> None:
    """Large leaf values (the Taylor remainder's worst case): the next root is always allowed, and one row more
    never is."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        carry, nxt = _step(objective, rng, int(rng.integers(50, 400)), 1.5)
        carry.check(nxt)
        with pytest.raises(CarryError, match="CarriedCountMismatch"):
            carry.check(Totals(nxt.g, nxt.h, nxt.n + 1))


@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_a_stretch_of_a_root_breaks_the_carry(objective: str) -> None:
    """Leaf values of a learning rate's size (0.1): the root's gradients stretched by 5%, or its hessians by 20%,
    are refused."""
    rng = np.random.default_rng(8)
    for trial in range(40):
        carry, nxt = _step(objective, rng, int(rng.integers(200, 800)), 0.1)
        carry.check(nxt)
        assert not carry.allows(Totals(nxt.g * 105 // 100, nxt.h, nxt.n)), trial
        if objective == "binary":
            assert not carry.allows(Totals(nxt.g, nxt.h * 120 // 100, nxt.n)), trial


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


def _prep(objective: str, theta: float, skew: float, depth: int = 4, min_rows: int = 5) -> object:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 6))
    X[:, 3] = np.exp(2 * X[:, 3])  # a heavy tail
    X[rng.random(3000) < 0.1, 4] = np.nan  # missing values
    X[:, 5] = rng.poisson(1.0, 3000)  # an integer column
    lin = X[:, 0] - X[:, 1] + 0.3 * np.log(X[:, 3]) + 0.4 * rng.normal(size=3000)
    y = (lin > 0).astype(float) if objective == "binary" else 10 + 3 * lin
    params = TrainParams(trees=12, depth=depth, bins=16, min_rows=min_rows, objective=objective)  # type: ignore[arg-type]
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


CARRY = "the verifiers refuse the histograms: Carried"
"""The verifiers' carry rule's refusals (``CarriedGradientOutOfRange``, ``CarriedCountMismatch``, ...)."""


@pytest.mark.parametrize(
    ("objective", "kind", "rules"),
    [
        ("regression", "gradients", ("the verifiers refuse the histograms: CarriedGradientOutOfRange",)),
        ("binary", "counts", ("the verifiers refuse the histograms: CarriedCountMismatch",)),
        # a logistic stretch breaks the contract's bin bound where a bin's rows leave it no room (rows that share
        # their label, which the noisy bin edges make or not), else the carry rule refuses it: either is exact
        ("binary", "gradients-hessians", ("the contract refuses the histograms: HessianOutOfRange", CARRY)),
        ("binary", "gradients", ("the contract refuses the histograms: LogisticBound", CARRY)),
        ("regression", "counts", ("the contract refuses the histograms: HessianOutOfRange",)),
    ],
)
def test_a_stretch_started_later_is_refused_at_its_first_root(
    objective: str, kind: str, rules: tuple[str, ...]
) -> None:
    """A party honest for three trees that then stretches by 2%: refused at that root by an exact rule, the
    contract's where the stretch breaks one of its bin rules (the contract checks first), else the verifiers'
    carry rule, and paid nothing."""
    attack = Attack(kind, 1.02, start_tree=3)  # type: ignore[arg-type]
    fed = federation(_prep(objective, 0.8, 0.0), "fvtree", attacks={1: attack})  # type: ignore[arg-type]
    result = fed.train()
    [refusal] = result.refusals
    assert (refusal.party, refusal.tree, refusal.level) == (1, 3, 0)
    assert any(rule in refusal.reason for rule in rules), refusal.reason
    assert result.shares()[1] == 0.0


class _Recording(Federation):
    """A federation that keeps every party's histograms as sent, level by level (what the chain's events hold)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[tuple[int, int], dict[int, dict[int, ref.NodeHistograms]]] = {}

    def _submissions(self, t: int, level: int, open_nodes: list[int], cands: Any, sums: Any, *rest: Any) -> Any:
        for i, s in enumerate(sums):
            self.sent.setdefault((t, i), {})[level] = dict(zip(open_nodes, messages_of(s, cands), strict=True))
        return super()._submissions(t, level, open_nodes, cands, sums, *rest)


@pytest.mark.parametrize("objective", ["binary", "regression"])
def test_simulate_carries_what_the_chain_records_give(objective: str) -> None:
    """The verifiers on chain and the audit rebuild each carry from the submitted histograms and the tree's records
    (``tree_carry.leaf_sums``); simulate sums the same from its exact limbs (``Federation._leaf_sums``). Equal for
    every party and tree, leaves at every depth included."""
    prep = _prep(objective, 0.8, 0.5, depth=6, min_rows=60)  # deep, with nodes too small to split
    assert isinstance(prep, Prepared)
    fed = federation(prep, "fvtree")
    rec = _Recording.__new__(_Recording)
    rec.__dict__.update(fed.__dict__)
    rec.sent = {}
    carries: dict[int, list[Carry | None]] = {}
    rec.level_observer = lambda view: carries.update({view.tree: view.carries}) if view.level == 0 else None
    result = rec.train()
    code = ref.OBJECTIVES[objective]  # type: ignore[index]
    bound = 0
    internal_leaves = 0
    for t in range(prep.params.trees - 1):
        nodes = result.trees[t].nodes
        splits = {nid: (nd.feature, nd.threshold) for nid, nd in nodes.items() if not nd.is_leaf}
        leaves = {nid: nd.value_fixed for nid, nd in nodes.items() if nd.is_leaf}
        internal_leaves += sum(nid < 1 << prep.params.depth for nid in leaves)
        bound = next_score_bound(bound, [v for v in leaves.values() if v is not None])
        for i in range(4):
            levels = [rec.sent[(t, i)][lv] for lv in sorted(rec.sent[(t, i)])]
            root = candidate_totals(levels[0][1], 0)
            expected = Carry.of(code, root, leaf_sums(levels, splits, leaves), bound)  # type: ignore[arg-type]
            assert carries[t + 1][i] == expected, (t, i)
    assert internal_leaves > 0  # nodes that stopped before the last level were part of it
