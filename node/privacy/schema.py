"""The task's schema under a privacy budget: feature ranges and integer flags that no party's rows chose.

Every mechanism of a private task reads the features' ``[low, high]`` and which features hold integers: the
binning sketch's cells, the grid's fallback cuts, the PSD's midpoints, the snapping of integer cuts. Taken from the
parties' pooled rows they are released without noise: one row holding 1000.123 moves ``high`` to 1000.123, and every
cut derived from the range (equal-width fallbacks, the PSD's midpoints, the sketch's top cell) with it. So under a
budget the schema is *public by declaration*: the requester declares it (``feature_ranges`` and
``integer_features``, as the chain task carries its ranges), or it is read from rows the requester holds itself (the
simulator's test rows, ``fgbdt_chain.train``'s ``valid_set``), which the parties' guarantee does not cover. The
parties' rows are then clipped to the declared ranges before anything is computed from them, so a row outside moves
nothing but the count of the outermost bin, as any row inside does. Without a declaration and without rows of the
requester, a private task is refused (:class:`SchemaRequired`): guessing the ranges from the parties would undo the
guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DECLARED = "declared"
"""Schema source: the requester's declaration (``feature_ranges``, ``integer_features``)."""
REQUESTER_ROWS = "requester's rows"
"""Schema source: rows the requester holds itself (the simulator's test rows, ``train``'s ``valid_set``)."""
POOLED = "pooled training rows (no budget)"
"""Schema source without a budget: the parties' pooled rows, as the simulator has always stood in for a schema."""


class SchemaRequired(ValueError):
    """A private task without a declared schema nor rows of the requester to read one from."""


@dataclass(frozen=True)
class Declared:
    """A requester's declared schema: per feature ``(low, high)`` and, optionally, whether it holds integers only."""

    ranges: tuple[tuple[float, float], ...]
    integers: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        for f, pair in enumerate(self.ranges):
            if len(pair) != 2 or not (np.isfinite(pair[0]) and np.isfinite(pair[1]) and pair[0] <= pair[1]):
                raise ValueError(f"feature_ranges[{f}] must be a finite (low, high) with low <= high, got {pair!r}")
        if self.integers is not None and len(self.integers) != len(self.ranges):
            raise ValueError(f"{len(self.integers)} integer_features flags for {len(self.ranges)} feature_ranges")

    @staticmethod
    def of(ranges: Sequence[Sequence[float]], integers: Sequence[bool] | None = None) -> Declared:
        """From any sequences (lists of pairs, arrays of shape (F, 2))."""
        pairs = tuple((float(p[0]), float(p[1])) for p in ranges)
        return Declared(pairs, None if integers is None else tuple(bool(b) for b in integers))


def clip_rows(X: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``X`` clipped feature by feature to ``[low, high]``; missing values stay missing."""
    return np.clip(np.asarray(X, dtype=np.float64), low, high)


def private_schema_refusal(features: int) -> SchemaRequired:
    """The refusal of a private task that names what to declare."""
    return SchemaRequired(
        f"a privacy budget needs the {features} features' ranges declared: give feature_ranges (one (low, high) per "
        "feature, as the task on chain carries them) and optionally integer_features, or rows of the requester "
        "(a test or validation set) to read them from; ranges taken from the parties' rows would be released "
        "without noise"
    )
