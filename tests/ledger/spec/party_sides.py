"""A party's logistic sums at a cut, shared by the tests of the judged contribution measures (loo, centred, scaled)."""

from __future__ import annotations

import numpy as np

from fgbdt_chain.ledger.spec import loo
from fgbdt_chain.ledger.spec.fixed_point import to_fixed


def party(rng: np.random.Generator, rows: int, signal: float, base: float = 0.5, copies: int = 1) -> loo.Sides:
    """A party's sums at a cut: logistic gradients at score 0 of labels whose probability is ``base`` minus (left) or
    plus (right) ``signal``; every row ``copies`` times. Parties of different ``base`` are a label-skewed partition
    with the same contrast."""
    left = rng.random(rows) < 0.5
    y = (rng.random(rows) < np.where(left, base - signal, base + signal)).astype(float)
    g = 0.5 - y
    return loo.Sides(
        copies * sum(to_fixed(v) for v in g[left]),
        copies * to_fixed(0.25) * int(left.sum()),
        copies * sum(to_fixed(v) for v in g[~left]),
        copies * to_fixed(0.25) * int((~left).sum()),
    )
