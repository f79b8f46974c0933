"""The exact histogram rules: every honest party keeps them on any data, and each break is named."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import ROW_SLACK, HistogramRuleError, Sides, check_level, check_node
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedRows, RowGroups
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.protocol.local_party import messages_of


def _honest_levels(
    seed: int, rows: int, nbins: int, objective: str, score_scale: float, depth: int
) -> list[tuple[list[NodeHistograms], list[int], dict[int, Sides] | None]]:
    """One party's levels of a tree grown on random splits: (histograms, open nodes, sides at the parent)."""
    rng = np.random.default_rng(seed)
    slots = rng.integers(0, nbins, (rows, 4)).astype(np.uint8)
    y = (rng.random(rows) < 0.4).astype(float) if objective == "binary" else rng.normal(size=rows) * 50
    score = rng.normal(size=rows) * score_scale
    g, h = gradients(objective, y, score)
    binned = BinnedRows(slots, nbins)
    fixed = FixedRows.of(g, h)
    out = []
    groups = RowGroups.everything(rows)
    node_id = np.ones(rows, dtype=np.int64)
    group_of_row = np.zeros(rows, dtype=np.int64)
    nodes = [1]
    sides: dict[int, Sides] | None = None
    for _ in range(depth):
        cands = [tuple(int(f) for f in rng.choice(4, 2, replace=False)) for _ in nodes]
        sums = binned.group_candidates_fixed(groups, np.array(cands), fixed)
        hists = messages_of(sums, cands)
        out.append((hists, list(nodes), sides))
        feat = np.array([c[0] for c in cands])
        thr = rng.integers(0, nbins - 1, len(nodes))
        sides = {n: Sides.of(hh, 0, int(t)) for n, hh, t in zip(nodes, hists, thr, strict=True)}
        groups = binned.split_groups(groups, feat, thr, node_id, group_of_row)
        nodes = [c for n in nodes for c in (2 * n, 2 * n + 1)]
    return out


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**31),
    st.integers(1, 300),
    st.integers(2, 9),
    st.sampled_from(["binary", "regression"]),
    st.sampled_from([0.0, 0.3, 3.0, 40.0]),
)
def test_an_honest_party_keeps_every_rule(seed: int, rows: int, nbins: int, objective: str, scale: float) -> None:
    """Exact per-row sums over any rows, labels and scores (0 = the first tree; large scores put p at 0 or 1):
    equal candidate totals, the children's totals at the parent's sides, the loss's bin bounds."""
    code = ref.OBJECTIVES[objective]  # type: ignore[index]
    for hists, nodes, sides in _honest_levels(seed, rows, nbins, objective, scale, 3):
        check_level(hists, nodes, code, scale == 0.0, sides)


def _node(g: tuple[int, ...], h: tuple[int, ...], n: tuple[int, ...]) -> NodeHistograms:
    return NodeHistograms((0, 1), (g, g), (h, h), (n, n))


def test_each_break_is_named_in_the_contracts_order() -> None:
    ok = _node((ONE // 2, -ONE // 2), (ONE // 4, ONE // 4), (1, 1))  # first tree: one negative, one positive row
    check_node(ok, 1, ref.OBJECTIVE_BINARY, True)
    cases = {
        "CandidateTotalsMismatch": NodeHistograms((0, 1), (ok.g[0], (ONE // 2, ONE // 2)), ok.h, ok.n),
        "CountOutOfRange": _node((0, 0), (0, 0), (-1, 1)),
        "GradientOutOfRange": _node((2 * ONE, 0), (0, 0), (1, 1)),
        "HessianOutOfRange": _node((0, 0), (ONE // 4 + 1, 0), (1, 1)),
        "FirstTreeLabels": _node((ONE // 2, -ONE // 2), (ONE // 4 - 1, ONE // 4), (1, 1)),
    }
    for name, hist in cases.items():
        with pytest.raises(HistogramRuleError) as exc:
            check_node(hist, 5, ref.OBJECTIVE_BINARY, True)
        assert exc.value.name == name and exc.value.node == 5
    # past the first tree: four rows whose gradients add to 3 hold at most 3/4 of hessian (|G|(1 - |G|/n))
    edge = _node((3 * ONE, 0), (3 * ONE // 4 + 4 * ROW_SLACK, 0), (4, 0))
    check_node(edge, 1, ref.OBJECTIVE_BINARY, False)
    with pytest.raises(HistogramRuleError, match="LogisticBound"):
        check_node(_node((3 * ONE, 0), (ONE, 0), (4, 0)), 1, ref.OBJECTIVE_BINARY, False)
    # squared error: every row's hessian is 1
    check_node(_node((-5 * ONE, 7 * ONE), (3 * ONE, 2 * ONE), (3, 2)), 1, ref.OBJECTIVE_SQUARED, False)
    with pytest.raises(HistogramRuleError, match="HessianOutOfRange"):
        check_node(_node((0, 0), (3 * ONE, ONE), (3, 2)), 1, ref.OBJECTIVE_SQUARED, False)


def test_children_must_carry_the_parents_sides() -> None:
    (_, _, _), (level1, nodes, sides) = _honest_levels(3, 200, 5, "binary", 0.5, 2)
    assert sides is not None
    check_level(level1, nodes, ref.OBJECTIVE_BINARY, False, sides)
    # one row's worth moved from the left child to the right one
    a, b = level1[0], level1[1]
    row = max(range(5), key=lambda i: a.n[0][i])
    moved = [
        NodeHistograms(a.features, a.g, a.h, tuple(tuple(v - (i == row) for i, v in enumerate(r)) for r in a.n)),
        NodeHistograms(b.features, b.g, b.h, tuple(tuple(v + (i == row) for i, v in enumerate(r)) for r in b.n)),
        *level1[2:],
    ]
    with pytest.raises(HistogramRuleError, match="InheritedTotalsMismatch") as exc:
        check_level(moved, nodes, ref.OBJECTIVE_BINARY, False, sides)
    assert exc.value.node == nodes[0]
    # a party without recorded sides (it did not submit at the parent's level) cannot continue
    with pytest.raises(HistogramRuleError, match="InheritedTotalsMismatch"):
        check_level(level1, nodes, ref.OBJECTIVE_BINARY, False, {})


def test_a_stretch_of_every_row_keeps_the_identities_but_not_the_bounds() -> None:
    """Why the bounds matter: stretching rows keeps candidate and inherited totals equal (``node.attacks.histograms``),
    so only the loss's bounds (and the verifiers) can see it; at the first tree a stretch is refused outright."""
    rng = np.random.default_rng(5)
    rows = 400
    slots = rng.integers(0, 5, (rows, 3)).astype(np.uint8)
    y = (slots[:, 0] >= 3).astype(float)  # bins nearly pure in labels, as a label-skewed party's are
    g, h = gradients("binary", y, np.zeros(rows))
    binned = BinnedRows(slots, 5)
    for factor, first in ((1.1, True), (2.0, False)):
        sums = binned.group_candidates_fixed(
            RowGroups.everything(rows), np.array([[0, 1]]), FixedRows.of(g * factor, h)
        )
        hists = messages_of(sums, [(0, 1)])
        with pytest.raises(HistogramRuleError):
            check_level(hists, [1], ref.OBJECTIVE_BINARY, first, None)


def test_the_fast_checked_sum_is_the_checked_sum() -> None:
    """``_checked_sum`` sums at C speed where no partial sum can leave int256, and checks each one otherwise: the same
    results, and the same overflow where one does (a near-limit term followed by another)."""
    import random

    from fgbdt_chain.ledger.spec.histogram_rules import _SAFE_TERM, _checked_sum
    from fgbdt_chain.ledger.spec.reference import FixedPointOverflow, check_int256

    def slow(values: list[int]) -> int:
        acc = 0
        for v in values:
            acc = check_int256(acc + v)
        return acc

    rng = random.Random(2)
    for _ in range(300):
        bits = rng.choice([8, 64, 200, 246, 247, 254, 255])
        values = [rng.randrange(-(1 << bits), 1 << bits) for _ in range(rng.choice([1, 5, 33, 256, 257]))]
        try:
            want: int | None = slow(values)
        except FixedPointOverflow:
            want = None
        try:
            got: int | None = _checked_sum(values)
        except FixedPointOverflow:
            got = None
        assert got == want
    near = (1 << 255) - 1
    with pytest.raises(FixedPointOverflow):
        _checked_sum([near, 1])
    assert _checked_sum([_SAFE_TERM - 1] * 256) == 256 * (_SAFE_TERM - 1)
    assert _checked_sum([]) == 0
