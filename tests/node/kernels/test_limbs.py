"""``node.kernels.limbs``: the one split and join of exact sums into two int64 limbs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fgbdt_chain.node.kernels import limbs
from fgbdt_chain.node.kernels.histogram import FixedRows


def _values(seed: int) -> list[int]:
    r = random.Random(seed)
    edges = [0, 1, -1, limbs.LIMB - 1, limbs.LIMB, limbs.LIMB + 1, -limbs.LIMB, -limbs.LIMB - 1, 2**94, -(2**94)]
    return edges + [r.randint(-(2**94), 2**94) for _ in range(200)] + [r.randint(-(2**40), 2**40) for _ in range(200)]


@pytest.mark.parametrize("seed", range(3))
def test_split_then_join_gives_the_integers_back_with_a_low_limb_in_range(seed: int) -> None:
    values = np.array(_values(seed), dtype=object).reshape(-1, 2)
    hi, lo = limbs.split(values)
    assert hi.dtype == np.int64 and lo.dtype == np.int64 and hi.shape == values.shape
    assert np.all((lo >= 0) & (lo < limbs.LIMB))
    assert limbs.join(hi, lo).tolist() == values.tolist()


def test_split_agrees_with_the_quantised_rows_limbs() -> None:
    """The limbs the kernels quantise (``FixedRows``) are the ones ``split`` gives of their joined values."""
    rng = np.random.default_rng(0)
    rows = FixedRows.of(rng.normal(0, 50, 300), rng.uniform(0, 3, 300))
    hi, lo = limbs.split(limbs.join(rows.g_hi, rows.g_lo))
    assert np.array_equal(hi, rows.g_hi) and np.array_equal(lo, rows.g_lo)


def test_split_to_float_takes_values_whose_high_limb_leaves_int64() -> None:
    big = [2**200 + 12345, -(2**150)]
    with pytest.raises(OverflowError):
        limbs.split(big)
    hi, lo = limbs.split(big, np.float64)
    assert hi.tolist() == [float(2**168), float(-(2**118))]
    assert lo.tolist() == [12345.0, 0.0]
