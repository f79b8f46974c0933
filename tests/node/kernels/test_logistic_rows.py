"""``node.kernels.logistic_rows``: a tree's starting rows under the logistic loss made in one compiled call are, array
for
array, what each party's own steps make (gradients, the votes' refitted values, the fixed-point limbs), and a
federation trains the same record with them as without."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.kernels.histogram import BinnedRows
from fgbdt_chain.node.kernels.party_kernels import FIXED_FIELDS, PartyKernels
from fgbdt_chain.node.protocol.local_party import LocalParty
from fgbdt_chain.node.sim.fvtree import Federation


def _parties(rng: np.random.Generator, sizes: list[int], weights: bool) -> list[LocalParty]:
    params = TrainParams(trees=2, depth=3, bins=5, min_rows=1)
    parties = []
    for n in sizes:
        slots = rng.integers(0, 5, (n, 4)).astype(np.uint8)
        y = (rng.random(n) < 0.4).astype(np.float64)
        party = LocalParty(slots, y, params, rng.uniform(0.2, 3.0, n) if weights else None)
        # scores of every size, both signs, the edges of the logistic function's two branches
        party.score[:] = rng.normal(size=n) * 10.0 ** rng.integers(-12, 3, n)
        party.score[:4] = [0.0, -0.0, 745.0, -745.0][: min(4, n)]
        parties.append(party)
    return parties


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("weights", [True, False])
def test_the_rows_are_each_partys_own(threads: int, weights: bool) -> None:
    rng = np.random.default_rng(7 + threads)
    parties = _parties(rng, [300, 41, 128], weights)
    kernels = PartyKernels([BinnedRows(p.rows.slots, 5) for p in parties], threads)
    made = kernels.logistic_tree(
        [p.score for p in parties], [p.y for p in parties], [p.w for p in parties] if weights else None
    )
    assert made is not None
    pairs, _ = made
    for i, party in enumerate(parties):
        g, h, hv = party.gradients()
        gv, hvv = party.vote_gradients(g, hv)
        fixed = party.fixed_rows(g, h, 0)
        assert np.array_equal(pairs[i][0], g) and np.array_equal(pairs[i][1], h)
        assert np.array_equal(kernels._g_vote[i], gv) and np.array_equal(kernels._h_vote[i], hvv)
        for field, buffers in zip(FIXED_FIELDS, kernels._fixed, strict=True):
            assert np.array_equal(buffers[i], getattr(fixed, field)), field
    # the scores change in place between trees: the next tree reads them again
    parties[1].score += 0.5
    pairs, _ = kernels.logistic_tree(
        [p.score for p in parties], [p.y for p in parties], [p.w for p in parties] if weights else None
    ) or ([], None)
    assert np.array_equal(pairs[1][0], parties[1].gradients()[0])


def test_a_score_the_fixed_point_cannot_hold_goes_the_parties_way() -> None:
    parties = _parties(np.random.default_rng(3), [50, 60], True)
    parties[1].score[5] = np.nan
    kernels = PartyKernels([BinnedRows(p.rows.slots, 5) for p in parties], 1)
    assert kernels.logistic_tree([p.score for p in parties], [p.y for p in parties], [p.w for p in parties]) is None
    g, h, _ = parties[1].gradients()
    with pytest.raises(OverflowError, match="not finite"):
        parties[1].fixed_rows(g, h, 0)


@pytest.mark.parametrize("weights", [True, False])
def test_a_federation_trains_the_same_record_with_the_one_call_rows(
    weights: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    slots = [rng.integers(0, 8, (n, 5)).astype(np.uint8) for n in (160, 90, 120)]
    ys = [(rng.random(len(s)) < 0.35).astype(np.float64) for s in slots]
    w = [rng.uniform(0.5, 1.5, len(s)) for s in slots] if weights else None
    params = TrainParams(trees=5, depth=3, bins=8, min_rows=3)
    calls = []
    original = Federation._logistic_tree

    def counted(self: Federation, t: int):  # type: ignore[no-untyped-def]
        out = original(self, t)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(Federation, "_logistic_tree", counted)
    algo = "fvtree" if weights else "pvtree"
    fast = Federation(slots, ys, params, algo=algo, party_weights=w, keep_levels=True).train()
    assert calls and all(calls)
    monkeypatch.setattr(Federation, "_logistic_tree", lambda self, t: None)
    slow = Federation(slots, ys, params, algo=algo, party_weights=w, keep_levels=True).train()
    assert [t.nodes for t in fast.trees] == [t.nodes for t in slow.trees]
    assert (fast.phi, fast.kappa, fast.total, fast.levels) == (slow.phi, slow.kappa, slow.total, slow.levels)
