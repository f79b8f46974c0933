"""The endorsement check (NOTES 8): a verifier rebuilds another party's histograms from its own rows and compares.

Verifier j cannot see party m's rows, but it holds W[:, m], which re-weights j's rows to mimic m's distribution
(Algorithm 2), and the gradients of any row follow from the shared model. So j builds, over its own rows in each
open node, the candidate histograms with gradient ``g * W[:, m]`` and count ``W[:, m]``: an estimate of what m
should have sent. An inflated or flipped histogram sits far from that estimate; an honest one close to it.

The distance is equation 11 with magnitudes: per bin ``|a - b| / max(|a|, |b|)`` for the gradient sums plus the
same for the counts, a term being 0 when both values are 0. Summed over a whole level (every open node's two
candidates), it grows with the number of occupied bins and is dominated by near-zero bins, so the verifier
thresholds the magnitude-weighted version, ``level_overlap``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ledger.reference import NodeHistograms
from node.histogram import BinnedRows


def relative_differences(claimed: np.ndarray, estimate: np.ndarray) -> tuple[float, int]:
    """Sum of ``|a - b| / max(|a|, |b|)`` over entries, 0 where both are 0, and the number of non-zero terms."""
    a, b = np.abs(claimed), np.abs(estimate)
    scale = np.maximum(a, b)
    occupied = scale > 0
    terms = np.abs(claimed - estimate)[occupied] / scale[occupied]
    return float(terms.sum()), int(occupied.sum())


def overlap(claimed_g: np.ndarray, claimed_n: np.ndarray, est_g: np.ndarray, est_n: np.ndarray) -> float:
    """Equation 11 with magnitudes (NOTES 8): the gradient terms plus the count terms."""
    return relative_differences(claimed_g, est_g)[0] + relative_differences(claimed_n, est_n)[0]


def level_overlap(claimed_g: np.ndarray, claimed_n: np.ndarray, est_g: np.ndarray, est_n: np.ndarray) -> float:
    """What the verifier compares with the task's threshold: the equation-11 terms of a whole level, each weighted
    by its magnitude, ``sum |a - b| / sum max(|a|, |b|)``, averaged over the gradient and the count histograms.

    Per-bin terms of small, near-zero gradient sums are noise (0.1 against -0.1 scores 2), and an unweighted sum
    grows with the number of occupied bins; weighting by magnitude keeps the bins that carry the split's evidence,
    gives a number in [0, 2] comparable across levels, and is what the calibration (``bench/endorse.py``) measured.
    """
    out = 0.0
    for a, b in ((claimed_g, est_g), (claimed_n, est_n)):
        den = float(np.maximum(np.abs(a), np.abs(b)).sum())
        out += float(np.abs(a - b).sum()) / den if den > 0 else 0.0
    return out / 2


def endorsement_overlap(
    hists: Sequence[NodeHistograms],
    claimed_g: np.ndarray,
    claimed_n: np.ndarray,
    est_g: np.ndarray,
    est_n: np.ndarray,
) -> float:
    """The overlap a verifier compares with the threshold, 0 for an all-zero level.

    A party without rows in the level's open nodes sends zeros: a null player that earns nothing. The PSD-based
    estimate (noisy counts) may still expect a few rows there, and would refuse it with an overlap of 1.
    """
    if all(not any(map(any, (*h.g, *h.h, *h.n))) for h in hists):
        return 0.0
    return level_overlap(claimed_g, claimed_n, est_g, est_n)


def estimate_histograms(
    rows: BinnedRows,
    node_of_row: np.ndarray,
    num_nodes: int,
    candidates: np.ndarray,
    g: np.ndarray,
    weight: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The verifier's estimate of another party's (gradient, count) histograms of every open node's candidates.

    ``node_of_row`` places the verifier's own rows in the level's open nodes (-1: elsewhere), ``candidates`` is
    (num_nodes, C), ``weight`` the verifier's column of W for the party being checked. Shapes (num_nodes, C, nbins).
    """
    est_g, est_n, _ = rows.candidate_histograms(node_of_row, num_nodes, candidates, g * weight, weight)
    return est_g, est_n
