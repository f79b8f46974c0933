"""What a greedy party may do to its histograms, for experiments: the same attack in ``simulate`` and on chain.

Why row-level attacks: the contract checks exact identities (``ledger.spec.histogram_rules``), so an attacker that wants
its histograms accepted must keep them. Stretching every row's values before they are summed keeps every identity a
bin-level stretch would break: candidate totals stay equal, children's totals stay the parent's side sums. Those
kinds are the strongest form of their attack. ``targeted`` stretches single bins after summing, the naive attack
on released histograms, and the identities catch it.

Kinds (``factor`` F):

* ``gradients``: every row's gradient times F;
* ``gradients-hessians``: gradient and hessian times F;
* ``counts``: every row counted F times on average (its count weight is ``floor(F)`` or ``floor(F) + 1``, drawn once
  per party from a seeded stream), gradients and hessians as they are: phantom rows;
* ``sign-flip``: every row's gradient times -F;
* ``targeted``: the two largest-magnitude gradient bins of each candidate histogram times F.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fgbdt_chain.node.kernels import limbs

AttackKind = Literal["gradients", "gradients-hessians", "counts", "sign-flip", "targeted"]
ATTACK_KINDS: tuple[AttackKind, ...] = ("gradients", "gradients-hessians", "counts", "sign-flip", "targeted")
TARGETED_BINS = 2
"""Bins per candidate histogram a ``targeted`` attack stretches."""
FACTOR_SCALE = 10**9
"""``targeted`` multiplies exact integers by ``round(F * FACTOR_SCALE)`` and divides back (truncating)."""


@dataclass(frozen=True)
class Attack:
    """A greedy party's attack on its own histograms (module docstring)."""

    kind: AttackKind
    factor: float
    seed: int = 0
    start_tree: int = 0
    """The first tree attacked (the party is honest before): an attacker that knows the first tree's exact rules
    (``FirstTreeLabels``) waits for the second."""

    def __post_init__(self) -> None:
        if self.kind not in ATTACK_KINDS:
            raise ValueError(f"unknown attack {self.kind!r}; choose one of {', '.join(ATTACK_KINDS)}")
        if not (np.isfinite(self.factor) and self.factor > 0):
            raise ValueError(f"the attack factor must be a positive number, got {self.factor}")
        if self.start_tree < 0:
            raise ValueError(f"the first attacked tree must be >= 0, got {self.start_tree}")

    def active(self, tree: int) -> bool:
        """Whether the party attacks tree ``tree``."""
        return tree >= self.start_tree

    def rows(self, g: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(g, h, count weights or None for one per row) as the attacker sums them."""
        f = self.factor
        if self.kind == "gradients":
            return g * f, h, None
        if self.kind == "gradients-hessians":
            return g * f, h * f, None
        if self.kind == "sign-flip":
            return g * -f, h, None
        if self.kind == "counts":
            whole = int(np.floor(f))
            draws = np.random.default_rng([self.seed, 0xC0]).random((len(g),))
            extra: np.ndarray = np.less(draws, f - whole).astype(np.int64)
            return g, h, whole + extra
        return g, h, None

    def bins(self, g_hi: np.ndarray, g_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``targeted``: exact gradient sums (limbs, shape (nodes, C, nbins)) with each candidate's largest bins
        stretched; other kinds leave them as they are."""
        if self.kind != "targeted":
            return g_hi, g_lo
        value = limbs.join(g_hi, g_lo)
        scale = round(self.factor * FACTOR_SCALE)
        magnitude = np.abs(g_hi.astype(np.float64) * 2.0**32 + g_lo.astype(np.float64))
        top = np.argsort(-magnitude, axis=-1, kind="stable")[..., :TARGETED_BINS]
        for idx in np.ndindex(*value.shape[:-1]):
            for b in top[idx]:
                q = int(value[idx][b]) * scale
                value[idx][b] = -(-q // FACTOR_SCALE) if q < 0 else q // FACTOR_SCALE
        return limbs.split(value)
