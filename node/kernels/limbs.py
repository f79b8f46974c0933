"""Exact fixed-point sums held as two int64 limbs, ``q = hi * 2**32 + lo`` with ``0 <= lo < 2**32``.

Why: the compiled kernels sum 18-decimal fixed-point values that outgrow one int64
(``node.kernels.histogram.FixedSums``),
and the contract, the verifiers, the privacy noise and the attacks need them back as Python integers. One pair of
conversions, so that every module splits and joins a value the same way (the low limb non-negative, the high limb
its floor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LIMB = 1 << 32
"""The low limb's range: ``0 <= lo < LIMB``."""


def join(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Python integers ``hi * 2**32 + lo`` of two limb arrays (an object array of the same shape)."""
    return np.asarray(hi).astype(object) * LIMB + np.asarray(lo).astype(object)


def split(values: Any, dtype: type = np.int64) -> tuple[np.ndarray, np.ndarray]:
    """``join``'s inverse: the limbs of integers (any shape, Python integers or an integer array), as ``dtype``.

    ``dtype=np.float64`` takes values whose high limb leaves int64 (what a party claims is not bounded): each limb
    is then rounded on its own, the high one exactly while below 2**53."""
    q = np.asarray(values, dtype=object)
    hi = q >> 32
    lo = q - hi * LIMB
    return hi.astype(dtype), lo.astype(dtype)
