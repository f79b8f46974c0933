"""The compiled split Shapley values of a level (``node.kernels.shapley_kernel``) are the Python integers' exactly, and
the
splits outside its bounds are left to the Python path, which resolves them as before."""

from __future__ import annotations

import numpy as np
import pytest

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.node.kernels.shapley_kernel import level_phis
from fgbdt_chain.node.protocol.resolve import _python_shapley, _sides_as_ints

ONE = ref.ONE


def _level(rng: np.random.Generator, m: int, splits: int, hi_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Limbs (5, M, S) of every party's left sums and whole-node sums, as ``resolve_level`` slices them: signed
    gradient limbs, hessian limbs (some negative: an attacker's), low limbs not normalised, counts."""
    at = np.zeros((5, m, splits), dtype=np.int64)
    whole = np.zeros((5, m, splits), dtype=np.int64)
    top = 2**hi_bits
    for arr in (at, whole):
        arr[0] = rng.integers(-top, top, (m, splits))
        arr[1] = rng.integers(0, 2**34, (m, splits))
        arr[2] = rng.integers(-top // 8, top, (m, splits))
        arr[3] = rng.integers(0, 2**34, (m, splits))
    at[4] = rng.integers(0, 10**6, (m, splits))
    whole[4] = at[4] + rng.integers(0, 10**6, (m, splits))
    return at, whole


def _credits(rng: np.random.Generator, m: int) -> list[ref.Credit]:
    return [
        ref.Credit(*(int(c) for c in rng.integers(0, 3 * ONE, 3))) if rng.random() < 0.7 else ref.NEUTRAL
        for _ in range(m)
    ]


@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_shapley_values_are_the_python_integers(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = [1, 2, 3, 4, 5, 7, 4, 6][seed]
    at, whole = _level(rng, m, 40, int(rng.integers(8, 60)))
    exact = _sides_as_ints(at, whole)
    for credits in ([ref.NEUTRAL] * m, _credits(rng, m), [ref.Credit(ref.MAX_CREDIT, 0, ref.MAX_CREDIT)] * m):
        for hm in (ref.HESSIAN_SECOND_ORDER, ref.HESSIAN_COUNT):
            for lam in (0, 1, ONE // 10, 3 * ONE):
                got = level_phis(at, whole, credits, hm, lam)
                for s, result in enumerate(got):
                    if result is not None:  # else left to the Python path (a utility past its bound)
                        assert result == _python_shapley(exact, s, credits, hm, lam)
                if lam >= ONE // 10:
                    assert sum(r is not None for r in got) >= 0.9 * len(got)  # the bounds leave the usual to it


def test_splits_beyond_the_bounds_are_left_to_the_python_path() -> None:
    rng = np.random.default_rng(3)
    at, whole = _level(rng, 4, 6, 30)
    at[2, :, 3], at[3, :, 3], whole[2, :, 3], whole[3, :, 3] = 0, 0, 0, 0  # hessians 0 at lambda 1: huge utilities
    at[0, :, 3], whole[0, :, 3] = 2**62, -(2**62)
    got = level_phis(at, whole, [ref.NEUTRAL] * 4, ref.HESSIAN_SECOND_ORDER, 1)
    assert [r is None for r in got] == [False, False, False, True, False, False]
    exact = _sides_as_ints(at, whole)
    for s in (0, 1, 2, 4, 5):
        assert got[s] == _python_shapley(exact, s, [ref.NEUTRAL] * 4, ref.HESSIAN_SECOND_ORDER, 1)
    # credits for another number of parties (the kernel would read past them), or a lambda beyond the bound: every
    # split to the Python path, which refuses the first
    assert level_phis(at, whole, [ref.Credit(ONE, ONE, ONE)] * 6, ref.HESSIAN_SECOND_ORDER, 1) == [None] * 6
    assert level_phis(at, whole, [ref.Credit(ONE, ONE, ONE)] * 2, ref.HESSIAN_SECOND_ORDER, 1) == [None] * 6
    assert level_phis(at, whole, [ref.NEUTRAL] * 4, ref.HESSIAN_SECOND_ORDER, 2**251) == [None] * 6
    # negative counts (an attacker's), or counts whose n * ONE passes 2^96, in count mode
    at[4, 0, 0] = -5
    at[4, 1, 2], whole[4, 1, 2] = 2**61, 2**62
    got = level_phis(at, whole, [ref.NEUTRAL] * 4, ref.HESSIAN_COUNT, ONE)
    assert got[0] is None and got[2] is None and got[1] is not None
