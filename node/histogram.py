"""Gradient histograms and the local split search for a whole tree level in one pass.

A level needs, for every (party, open node) group, the best local split gain of every feature (to vote), and the
histograms of the two candidate features (to send). Looping over nodes or features in Python would dominate the
run time, so:

* rows' bin slots are stored once as sparse entries around each feature's most common slot (a9a: about 14 of 123
  features are non-zero per row), and only the (feature, slot) cells that occur in the data get a histogram cell,
  so work and memory follow the data, not ``features * slots``;
* the vote search (accumulate, fill the default cells from the group totals, scan every threshold) is one compiled
  numba kernel over all groups of the level;
* candidate histograms touch two features per row, in a second small kernel.

The same code serves one party (a node process) and all parties at once (the simulator), which numbers its groups
``party * K + node``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _best_gains_kernel(  # pragma: no cover - compiled
    entry_row: np.ndarray,
    entry_cell: np.ndarray,
    group_of_row: np.ndarray,
    num_groups: int,
    cell_start: np.ndarray,
    default_cell: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    lam: float,
    min_rows: int,
) -> np.ndarray:
    num_features = default_cell.shape[0]
    num_cells = cell_start[num_features]
    hg = np.zeros((num_groups, num_cells))
    hh = np.zeros((num_groups, num_cells))
    hn = np.zeros((num_groups, num_cells), dtype=np.int64)
    tg = np.zeros(num_groups)
    th = np.zeros(num_groups)
    tn = np.zeros(num_groups, dtype=np.int64)
    for r in range(group_of_row.shape[0]):
        k = group_of_row[r]
        if k >= 0:
            tg[k] += g[r]
            th[k] += h[r]
            tn[k] += 1
    for e in range(entry_row.shape[0]):
        r = entry_row[e]
        k = group_of_row[r]
        if k >= 0:
            c = entry_cell[e]
            hg[k, c] += g[r]
            hh[k, c] += h[r]
            hn[k, c] += 1
    best = np.full((num_groups, num_features), -np.inf)
    for k in range(num_groups):
        if tn[k] == 0:
            continue
        for f in range(num_features):
            lo, hi, d = cell_start[f], cell_start[f + 1], default_cell[f]
            sg, sh, sn = 0.0, 0.0, 0
            for c in range(lo, hi):
                if c != d:
                    sg += hg[k, c]
                    sh += hh[k, c]
                    sn += hn[k, c]
            hg[k, d] = tg[k] - sg
            hh[k, d] = th[k] - sh
            hn[k, d] = tn[k] - sn
            gl, hl, nl = 0.0, 0.0, 0
            b = -np.inf
            for c in range(lo, hi - 1):
                gl += hg[k, c]
                hl += hh[k, c]
                nl += hn[k, c]
                nr = tn[k] - nl
                if nl < min_rows or nr < min_rows:
                    continue
                gr, hr = tg[k] - gl, th[k] - hl
                dl, dr = hl + lam, hr + lam
                gain = (gl * gl / dl if dl > 0 else 0.0) + (gr * gr / dr if dr > 0 else 0.0)
                if gain > b:
                    b = gain
            best[k, f] = b
    return best


@njit(cache=True, nogil=True)
def _candidate_kernel(  # pragma: no cover - compiled
    slots: np.ndarray,
    group_of_row: np.ndarray,
    features: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    nbins: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    num_groups, nc = features.shape
    hg = np.zeros((num_groups, nc, nbins))
    hh = np.zeros((num_groups, nc, nbins))
    hn = np.zeros((num_groups, nc, nbins), dtype=np.int64)
    for r in range(group_of_row.shape[0]):
        k = group_of_row[r]
        if k < 0:
            continue
        for c in range(nc):
            s = slots[r, features[k, c]]
            hg[k, c, s] += g[r]
            hh[k, c, s] += h[r]
            hn[k, c, s] += 1
    return hg, hh, hn


class BinnedRows:
    """Bin slots of a fixed set of rows, laid out for repeated level-wise split searches."""

    def __init__(self, slots: np.ndarray, nbins: int) -> None:
        if slots.ndim != 2:
            raise ValueError(f"slots must be a 2-D array (rows, features), got shape {slots.shape}")
        if slots.size and int(slots.max()) >= nbins:
            raise ValueError(f"slot {int(slots.max())} out of range for {nbins} slots")
        self.slots = np.ascontiguousarray(slots, dtype=np.uint8)
        self.n_rows, self.n_features = slots.shape
        self.nbins = nbins
        offsets = np.arange(self.n_features, dtype=np.int64) * nbins
        flat = (self.slots.astype(np.int64) + offsets).ravel()
        per_cell = np.bincount(flat, minlength=self.n_features * nbins).reshape(self.n_features, nbins)
        used = per_cell > 0
        used[:, 0] |= ~used.any(axis=1)  # a feature of an empty row set still gets one cell
        # compact cell numbering: the used slots of feature f are cells cell_start[f] .. cell_start[f+1]-1
        self.cell_of = np.where(used, np.cumsum(used.ravel()).reshape(used.shape) - 1, -1).astype(np.int64)
        self.cell_start = np.concatenate(([0], np.cumsum(used.sum(axis=1)))).astype(np.int64)
        default_slot = per_cell.argmax(axis=1)
        self.default_cell = self.cell_of[np.arange(self.n_features), default_slot]
        rows, feats = np.nonzero(self.slots != default_slot[None, :].astype(np.uint8))
        self.entry_row = rows.astype(np.int64)
        self.entry_cell = self.cell_of[feats, self.slots[rows, feats]]

    def best_gains(
        self, group_of_row: np.ndarray, num_groups: int, g: np.ndarray, h: np.ndarray, lam: float, min_rows: int = 1
    ) -> np.ndarray:
        """Best split gain of every feature in every group, shape (num_groups, F); -inf where none is valid.

        The gain is equation 4 when ``g``/``h`` are refitted (weighted) values: ``GL^2/(HL+lambda) +
        GR^2/(HR+lambda)``, both sides needing ``min_rows`` rows. Rows of group -1 take no part.
        """
        if group_of_row.shape != (self.n_rows,) or g.shape != (self.n_rows,) or h.shape != (self.n_rows,):
            raise ValueError(f"group_of_row, g and h must have shape ({self.n_rows},)")
        return _best_gains_kernel(
            self.entry_row,
            self.entry_cell,
            group_of_row.astype(np.int64),
            int(num_groups),
            self.cell_start,
            self.default_cell,
            g.astype(np.float64),
            h.astype(np.float64),
            float(lam),
            int(min_rows),
        )

    def candidate_histograms(
        self, group_of_row: np.ndarray, num_groups: int, features: np.ndarray, g: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sums of g, h and the row counts of each group's candidate features, each of shape (num_groups, C, nbins),
        where ``features`` (num_groups, C) names the candidates of every group."""
        if group_of_row.shape != (self.n_rows,) or g.shape != (self.n_rows,) or h.shape != (self.n_rows,):
            raise ValueError(f"group_of_row, g and h must have shape ({self.n_rows},)")
        if features.ndim != 2 or features.shape[0] != num_groups:
            raise ValueError(f"features must have shape ({num_groups}, C), got {features.shape}")
        if features.size and not (features.min() >= 0 and features.max() < self.n_features):
            raise ValueError(f"candidate features must be in [0, {self.n_features})")
        return _candidate_kernel(
            self.slots,
            group_of_row.astype(np.int64),
            features.astype(np.int64),
            g.astype(np.float64),
            h.astype(np.float64),
            self.nbins,
        )


def votes_from_gains(best: np.ndarray) -> np.ndarray:
    """Each group's vote from its per-feature best gains: the best feature (lowest index on ties) or -1."""
    vote = best.argmax(axis=-1)
    has = np.isfinite(np.take_along_axis(best, vote[..., None], axis=-1)[..., 0])
    return np.where(has, vote, -1)


def warm_up() -> None:
    """Load (or compile) both kernels on tiny inputs, so that a timed run measures training, not the JIT."""
    rows = BinnedRows(np.array([[0, 1], [1, 0]], dtype=np.uint8), 2)
    group = np.zeros(2, dtype=np.int64)
    ones = np.ones(2)
    rows.best_gains(group, 1, ones, ones, 1.0)
    rows.candidate_histograms(group, 1, np.zeros((1, 1), dtype=np.int64), ones, ones)
