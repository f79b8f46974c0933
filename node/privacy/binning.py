"""Common bin edges for all parties, derived without revealing raw values.

Every party must bin with the same edges, fixed when the task starts and recorded on chain. Exact global quantiles
would need the pooled raw values, so the default (``dp``) works from public information (the task schema's
per-feature [low, high]) plus a differentially private sketch that each party publishes when it joins. The
requester merges the parties' sketches by mass and cuts there; only the noisy sketch leaves a party.

**Why the grid must follow the mass.** Real columns are heavy-tailed: a ratio whose 99th percentile is 1.09 and
whose maximum is 50,708 puts every row but a handful in the first of 64 equal-width buckets over [low, high], and
the task then has one useful bin for it. So the sketch's resolution is spent where the rows are, at any scale.

**The sketch (``local_sketch``), per feature, in two private stages.**

1. *Cells.* The schema range is cut, without looking at data, into signed octaves: the boundaries are 0 and
   +-2^e for every e >= -60 (2^-60 is below the 18-decimal fixed point's resolution) that lies inside (low, high),
   each through fixed point (``fixed_round``). A cell is (a, b], closed on the right like a bin (``x <= edge`` goes
   left), so a boundary at 0 or at a power of two keeps that value apart from larger ones. There are ``O`` cells,
   about 80 per sign for a range up to 10^6; a range inside one octave is one cell.
2. *Stage 1* counts the party's rows per cell and adds noise (below). A cell is *selected* when its noisy count
   exceeds ``tau = b1 ln(O / alpha)``: an empty cell passes with probability at most ``alpha / O``, so the chance
   that any empty cell of a feature is selected is at most ``alpha`` = :data:`FALSE_SELECTION_RATE` (a union
   bound). If none passes, the cell with the largest noisy count is selected (noisy max, post-processing).
3. *Grid.* Selected cells are spans of their own; each run of unselected cells between them is one span (a
   *gap*). The party spends ``K = resolution`` buckets on the spans in proportion to their clipped noisy counts
   (at least one each; at most ``K`` selected cells, the heaviest) and cuts each span into that many equal-width
   buckets. A cell holding 40% of the rows gets 40% of the buckets at whatever scale it lies, and a gap, whose
   cells are each too thin to see, still gets buckets in proportion to its total (equal width inside it: the
   old assumption, used only where the noise hides the shape). Why ``K`` is the payload bound and no smaller: a
   bin's mass is off by about ``n / K`` from the grid and by about ``b2 sqrt(2K / bins)`` from the noise, which is
   smallest at ``K = (sqrt(2 bins) n / b2)^(2/3)``; at 16 bins that exceeds 64 from ``n`` of about ``90 b2`` rows
   (1,800 rows for 10 features at epsilon 1). Below that, the model's smaller ``K`` was tried while designing
   this on five benchmark sets (cut to 500 and 1,250 rows per party): it gave worse edges on four of five at 500
   rows and was mixed at 1,250 (better on three, worse on two, never by more than 0.006 of the rows in the largest
   bin), so ``K`` stays the bound.
4. *Stage 2* counts the party's rows per grid bucket and adds noise. The sketch is the grid's description (each
   span's first cell and bucket count) and the stage-2 noisy counts; stage-1 counts stay with the party.

**Privacy accounting.** Adding or removing one row changes, in each stage, one count of every feature whose value is
present (a missing value changes none) by one. Only the ``F'`` features whose schema range is not a single point
have cells, so each stage's counts, all features together, have L1 sensitivity ``F'``. Each stage adds two-sided
geometric noise (the discrete Laplace mechanism, Ghosh, Roughgarden and Sundararajan 2009) with ``P(k) ~ exp(-|k| /
b)`` and ``b = F' / epsilon_stage`` (rounded up to a multiple of 2^-20 and sampled exactly,
``node.privacy.discrete_gaussian.discrete_laplaces``): each stage is ``epsilon_stage``-DP, with integer outputs and
therefore without the floating-point leaks of sampled continuous noise. Stage 2's grid depends only on stage 1's
noisy output and the public schema, so the stages compose sequentially (adaptively): ``epsilon = epsilon1 +
epsilon2``. Neither stage can be spared (no grid without stage 1, no counts on it without stage 2) and no model says
one matters more, so the budget is split evenly (:data:`STAGE1_SHARE`); shares of 0.3 or 0.7 moved the edges' mean
excess bin share over exact quantiles by at most 0.011 on the benchmark sets. Everything the requester derives
(clipping, merging, the cuts) is post-processing. Per-count scale: :func:`sketch_noise_scale`; at epsilon 1 and 10
features it is 20 rows. ``epsilon = inf`` (experiments only) adds no noise and selects every non-empty cell.

**Integer columns.** The schema also says which features hold integers only (``schema_integers``: counts, codes,
one-hot flags). No integer lies strictly between k and k + 1, so a cut anywhere in that gap parts the rows as the
cut at k + 0.5 does, and two cuts in the same gap leave an empty bin between them. Whatever method chose them, an
integer feature's cuts are moved to the half-integers and merged (``snap_integer_edges``): every row falls on the
same side of every cut as before, so no split, gain or model changes, but the empty bins go. Where no feature keeps
more than a few bins (one-hot data), the task's histograms narrow with them (``ledger.spec.edges.histogram_slots``); a
binary flag, which the noise used to cut 15 times between 0 and 1, has one cut at 0.5.

``dp-equal-width`` is the previous sketch (discrete Laplace counts in ``resolution`` equal-width buckets over
[low, high], scale ``F / epsilon``), kept for measuring; ``exact`` (pooled quantiles, not private) and ``uniform``
(equal-width cuts of the schema range, no data at all) are kept for measuring what the private edges cost.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fgbdt_chain.ledger.spec.fixed_point import from_fixed, to_fixed
from fgbdt_chain.ledger.spec.modes import BINNING_METHODS as BINNING_METHODS
from fgbdt_chain.node.kernels.bucketing import bucket_counts_by_feature
from fgbdt_chain.node.kernels.column_stats import column_stats
from fgbdt_chain.node.privacy.discrete_gaussian import discrete_laplaces

DEFAULT_RESOLUTION = 64
"""``K``: the buckets a party spends on one feature's grid (the payload bound)."""
FALSE_SELECTION_RATE = 0.05
"""``alpha``: the probability that stage 1 selects any empty cell of a feature (a family-wise error rate)."""
STAGE1_SHARE = 0.5
"""Share of the sketch's epsilon spent on stage 1 (the cells); the rest goes to stage 2 (the grid's buckets)."""
OCTAVE_FLOOR = -60
"""Smallest octave boundary 2^-60: below the fixed point's 10^-18, so every representable value has its cell."""
INTEGER_LIMIT = float(2**52)
"""Integer features are those below this magnitude: their half-integers are exact doubles."""
MAX_RESOLUTION = 16_000
"""Bound on ``resolution``: a feature's spans (at most 2K + 1) and buckets (at most 4K + 2) fit the payload's u16."""


# ----------------------------------------------------------------------------------------------- schema and fixed point


def feature_ranges(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature [low, high] ignoring missing values; all-missing features get [0, 0].

    In a task these come from the requester's data schema; the simulator derives them from the pooled training
    rows, which stands in for that public schema.
    """
    low, high, present, _ = column_stats(X, INTEGER_LIMIT)
    return np.where(present, low, 0.0), np.where(present, high, 0.0)


def schema_ranges(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The task schema's per-feature [low, high] as the chain holds them: 18-decimal fixed point, read back.

    Binning and PSDs use these rounded values both in the simulator and in the party nodes, so both derive the same
    bucket bounds and PSD midpoints from what is recorded on chain.
    """
    low, high = feature_ranges(X)
    return fixed_round(low), fixed_round(high)


def schema_label_range(objective: str, y: np.ndarray) -> tuple[float, float]:
    """The label's range in the task's schema as the chain holds it (``Config.labelMin``/``labelMax``, through fixed
    point): [0, 1] for a binary task, the training labels' [min, max] for regression.

    Every party's PSD splits the label over this range, so all parties must use the same one, from the chain; like
    the features' ranges, the simulator derives it from the pooled training rows in place of the data dictionary."""
    if objective == "binary":
        return 0.0, 1.0
    if y.size == 0 or not np.all(np.isfinite(y)):
        raise ValueError("a regression task's labels must be finite and at least one")
    low, high = fixed_round(np.array([np.min(y), np.max(y)]))
    return float(low), float(high)


def schema_integers(X: np.ndarray) -> np.ndarray:
    """Per feature, whether every present value is an integer of magnitude below 2^52 (so k + 0.5 is exact).

    Like the ranges, this stands in for the task's public schema (a data dictionary says which columns are counts,
    codes or flags); the simulator derives it from the pooled training rows. An all-missing feature is not one."""
    _, _, present, whole = column_stats(X, INTEGER_LIMIT)
    return whole & present


def snap_integer_edges(edges: Sequence[np.ndarray], integers: np.ndarray | None) -> list[np.ndarray]:
    """Each integer feature's cuts moved to the half-integer of their gap (``floor(c) + 0.5``: a cut at k keeps k
    on the left, as ``x <= edge`` does) and merged; other features' cuts as they are. The rows' bins keep their
    order and their sides of every cut (module docstring, *Integer columns*)."""
    if integers is None:
        return [np.asarray(e, dtype=np.float64) for e in edges]
    if len(integers) != len(edges):
        raise ValueError(f"{len(integers)} integer flags for {len(edges)} features")
    out = []
    for e, whole in zip(edges, integers, strict=True):
        e = np.asarray(e, dtype=np.float64)
        out.append(np.unique(np.floor(e) + 0.5) if whole and e.size else e)
    return out


def fixed_round(values: np.ndarray) -> np.ndarray:
    """Each value through fixed point and back (``ledger.spec.reference.to_fixed`` then ``from_fixed``)."""
    return np.array([from_fixed(to_fixed(float(v))) for v in values], dtype=np.float64)


# ------------------------------------------------------------------------------------------------------ the cells


def cell_bounds(low: float, high: float) -> np.ndarray:
    """The inner boundaries of the signed-octave cells of [low, high]: 0 and +-2^e (e >= -60) strictly inside,
    through fixed point. Cell ``c`` is (bounds[c - 1], bounds[c]] with low and high closing the ends."""
    return np.array(_cell_bounds(float(low), float(high)), dtype=np.float64)


@functools.lru_cache(maxsize=4096)
def _cell_bounds(low: float, high: float) -> tuple[float, ...]:
    """:func:`cell_bounds`, computed once per schema range (party and requester ask for them per feature often)."""
    if not high > low:
        return ()
    top = max(abs(low), abs(high))
    e_top = max(OCTAVE_FLOOR, math.ceil(math.log2(top))) if top > 0 else OCTAVE_FLOOR
    powers = np.ldexp(1.0, np.arange(OCTAVE_FLOOR, e_top + 1))
    candidates = np.concatenate([-powers[::-1], [0.0], powers])
    inside = candidates[(candidates > low) & (candidates < high)]
    bounds = np.unique(fixed_round(inside))
    return tuple(bounds[(bounds > low) & (bounds < high)].tolist())


def grid_bounds(low: float, high: float, starts: np.ndarray, splits: np.ndarray) -> np.ndarray:
    """The inner boundaries of a party's stage-2 grid: span ``i`` covers cells ``starts[i]`` up to the next span's
    first cell (the last span up to ``high``) and is cut into ``splits[i]`` equal-width buckets.

    The party (to count) and the requester (to merge) both call this on the public schema and the published spans,
    so they agree on every boundary to the bit.
    """
    inner = cell_bounds(low, high)
    ends = np.concatenate([[low], inner, [high]])
    stops = np.append(starts[1:], inner.size + 1)
    points: list[np.ndarray] = [ends[starts]]
    for s, t, k in zip(starts.tolist(), stops.tolist(), splits.tolist(), strict=True):
        if k > 1:
            a, b = ends[s], ends[t]
            points.append(fixed_round(a + (b - a) * np.arange(1, k) / k))
    bounds = np.unique(np.concatenate(points))
    return bounds[(bounds > low) & (bounds < high)]


# ------------------------------------------------------------------------------------------------------ the noise


def sketch_noise_scale(epsilon: float, features: int, share: float = STAGE1_SHARE) -> float:
    """The scale ``b = F' / epsilon_stage`` of one stage's noise, ``epsilon_stage = share * epsilon`` (0: none)."""
    if not epsilon > 0:
        raise ValueError("epsilon for the binning sketch must be positive")
    if math.isinf(epsilon):
        return 0.0
    return features / (share * epsilon)


# ------------------------------------------------------------------------------------------------------ the sketch


@dataclass(frozen=True)
class FeatureSketch:
    """One feature's part of a sketch: the grid's spans (first cell, bucket count) and the noisy bucket counts."""

    starts: np.ndarray
    splits: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class Sketch:
    """A party's binning sketch: one :class:`FeatureSketch` per feature (empty for a single-point range)."""

    features: tuple[FeatureSketch, ...]

    def __len__(self) -> int:
        return len(self.features)


def sketched_features(low: np.ndarray, high: np.ndarray) -> int:
    """``F'``: the features whose schema range has room for a cut; only these are sketched and pay noise."""
    return int(np.sum(np.asarray(high) > np.asarray(low)))


def selection_threshold(cells: int, scale: float) -> float:
    """``tau = b ln(O / alpha)``: an empty cell's noisy count exceeds it with probability at most ``alpha / O``."""
    return scale * math.log(cells / FALSE_SELECTION_RATE) if scale > 0 else 0.0


def plan_spans(noisy: np.ndarray, scale: float, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage 1's decision from the noisy cell counts: the grid's spans (first cells) and their bucket counts.

    Selected cells are spans of their own, the runs of unselected cells between them one span each; the ``budget``
    buckets go to the spans in proportion to their clipped noisy counts, at least one each."""
    cells = noisy.shape[0]
    chosen = np.flatnonzero(noisy > selection_threshold(cells, scale))
    if chosen.size == 0:
        chosen = np.array([int(np.argmax(noisy))])
    if chosen.size > budget:  # the heaviest, ties to the lower cell
        order = np.lexsort((chosen, -noisy[chosen]))
        chosen = np.sort(chosen[order[:budget]])
    starts = np.unique(np.concatenate([[0], chosen, chosen + 1]))
    starts = starts[starts < cells]
    mass = np.maximum(np.add.reduceat(noisy.astype(np.float64), starts), 0.0)
    total = mass.sum()
    share = mass / total if total > 0 else np.full(starts.size, 1.0 / starts.size)
    splits = np.maximum(1, np.rint(budget * share)).astype(np.int64)
    return starts.astype(np.int64), splits


BucketCounter = Callable[[Sequence["np.ndarray | None"]], Sequence["np.ndarray | None"]]
"""``count(bounds)``: per feature, its rows' counts in the buckets of ``bounds[f]`` (None: not counted), as
:func:`bucket_counts` gives them; a party's rows in memory or read in chunks."""


def local_sketch(
    rows: np.ndarray | BucketCounter,
    low: np.ndarray,
    high: np.ndarray,
    *,
    resolution: int = DEFAULT_RESOLUTION,
    epsilon: float,
    rng: np.random.Generator,
) -> Sketch:
    """A party's private sketch of its rows (the two stages of the module docstring): all it publishes for binning.

    ``rows``: the party's raw matrix (rows, features), or a :data:`BucketCounter` over its rows (read in chunks,
    ``node.protocol.parquet_party``). Each stage counts every feature at once (one pass over the rows a stage); the
    noise is drawn per feature, the first stage's then the second's (whose size the first stage's plan fixes), so a
    party's rows in memory and the same rows read in chunks give the same sketch bit for bit."""
    count = rows if callable(rows) else (lambda bounds: bucket_counts_by_feature(rows, bounds))
    if not 1 <= resolution <= MAX_RESOLUTION:
        raise ValueError(f"binning resolution must be in [1, {MAX_RESOLUTION}], got {resolution}")
    if len(low) != len(high):
        raise ValueError(f"low and high need one value per feature, got {len(low)} and {len(high)}")
    live = [bool(high[f] > low[f]) for f in range(len(low))]
    features = sketched_features(low, high)
    b1 = sketch_noise_scale(epsilon, features, STAGE1_SHARE)
    b2 = sketch_noise_scale(epsilon, features, 1.0 - STAGE1_SHARE)
    stage1 = count([cell_bounds(float(low[f]), float(high[f])) if live[f] else None for f in range(len(low))])
    plans: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None] = []
    for f, counts in enumerate(stage1):
        if counts is None:
            plans.append(None)
            continue
        noisy = counts + discrete_laplaces(b1, counts.size, rng)
        starts, splits = plan_spans(noisy, b1, resolution)
        grid = grid_bounds(float(low[f]), float(high[f]), starts, splits)
        plans.append((starts, splits, grid, discrete_laplaces(b2, grid.size + 1, rng)))
    stage2 = count([None if plan is None else plan[2] for plan in plans])
    empty = np.zeros(0, dtype=np.int64)
    return Sketch(
        tuple(
            FeatureSketch(empty, empty, empty)
            if plan is None or counts is None
            else FeatureSketch(plan[0], plan[1], counts + plan[3])
            for plan, counts in zip(plans, stage2, strict=True)
        )
    )


def bucket_counts(col: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Rows per bucket (bounds[i - 1], bounds[i]] of one feature, missing values in none: the counts a stage noises.

    One row adds one to exactly one bucket (or none when missing): the sensitivity the accounting rests on. Every
    feature at once: ``node.kernels.bucketing.bucket_counts_by_feature``, the same counts."""
    present = col[~np.isnan(col)]
    return np.bincount(np.searchsorted(bounds, present, side="left"), minlength=bounds.size + 1)


def encode_sketch(sketch: Sketch) -> bytes:
    """The sketch as bytes (big-endian): feature count (u32); per feature the span count (u16), then (first cell
    u16, buckets u16) per span, the count of noisy counts (u16) and the counts (i32)."""
    out = [struct.pack(">I", len(sketch))]
    for fs in sketch.features:
        fields = np.concatenate([fs.starts, fs.splits])
        if np.any(fields < 0) or np.any(fields > 0xFFFF) or fs.counts.size > 0xFFFF:
            raise ValueError("sketch spans and bucket counts must fit u16")
        if np.any(np.abs(fs.counts) >= 2**31):
            raise ValueError("sketch counts must fit i32")
        pairs = np.column_stack([fs.starts, fs.splits]).astype(">u2")
        out.append(struct.pack(">H", fs.starts.size) + pairs.tobytes())
        out.append(struct.pack(">H", fs.counts.size) + fs.counts.astype(">i4").tobytes())
    return b"".join(out)


def decode_sketch(data: bytes, pos: int = 0) -> tuple[Sketch, int]:
    """The sketch encoded at ``data[pos:]`` and the position after it; raises ValueError naming what is wrong.

    Only the layout is checked here; whether the spans fit the task's cells is checked against the schema when
    the sketches are merged (:func:`merged_mass`)."""

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise ValueError("truncated binning sketch")
        chunk = data[pos : pos + n]
        pos += n
        return chunk

    (count,) = struct.unpack(">I", take(4))
    if 4 * count > len(data) - pos:  # each feature needs at least four bytes: a hostile count cannot allocate
        raise ValueError(f"binning sketch claims {count} features in {len(data) - pos} bytes")
    features = []
    for f in range(count):
        (spans,) = struct.unpack(">H", take(2))
        pairs = np.frombuffer(take(4 * spans), dtype=">u2").astype(np.int64).reshape(spans, 2)
        (buckets,) = struct.unpack(">H", take(2))
        counts = np.frombuffer(take(4 * buckets), dtype=">i4").astype(np.int64)
        starts, splits = pairs[:, 0].copy(), pairs[:, 1].copy()
        if spans and (starts[0] != 0 or np.any(np.diff(starts) <= 0) or np.any(splits < 1)):
            raise ValueError(f"feature {f}: spans must start at cell 0, increase and have a bucket each")
        features.append(FeatureSketch(starts, splits, counts))
    return Sketch(tuple(features)), pos


# ------------------------------------------------------------------------------------------------------ the merge


def merged_mass(sketches: Sequence[FeatureSketch], low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """The parties' noisy counts of one feature on the union of their grids: (inner boundaries, mass per piece).

    Each party's bucket count is spread uniformly over the bucket's value range; the sum over parties is clipped
    at 0 piece by piece (post-processing of the noisy counts, after the noise of the parties has partly cancelled).
    """
    cells = cell_bounds(low, high).size + 1
    grids = []
    for fs in sketches:
        if not (fs.starts.size and fs.starts[0] == 0 and fs.starts[-1] < cells and np.all(np.diff(fs.starts) > 0)):
            raise ValueError(f"a sketch's spans do not partition the {cells} cells of its feature")
        if fs.splits.size != fs.starts.size or np.any(fs.splits < 1) or fs.splits.sum() > 4 * MAX_RESOLUTION + 2:
            raise ValueError(f"a sketch's spans need one bucket count each, in all from 1 to {4 * MAX_RESOLUTION + 2}")
        grid = grid_bounds(low, high, fs.starts, fs.splits)
        if fs.counts.size != grid.size + 1:
            raise ValueError(f"a sketch has {fs.counts.size} counts for a grid of {grid.size + 1} buckets")
        grids.append(grid)
    union = np.unique(np.concatenate([np.zeros(0), *grids]))
    ends = np.concatenate([[low], union, [high]])
    cdf = np.zeros(ends.size)
    for fs, grid in zip(sketches, grids, strict=True):
        own = np.concatenate([[low], grid, [high]])
        cdf += np.interp(ends, own, np.concatenate([[0.0], np.cumsum(fs.counts, dtype=np.float64)]))
    return union, np.maximum(np.diff(cdf), 0.0)


def mass_cuts(bounds: np.ndarray, mass: np.ndarray, bins: int) -> np.ndarray:
    """At most ``bins - 1`` of ``bounds`` (the inner boundaries of pieces holding ``mass``) as cut points.

    Greedy by mass: each cut is the boundary nearest in mass to leaving the remaining mass to the remaining bins in
    equal shares; a cut needs mass on both sides. A piece holding more than its share (a frequent value) thus
    gets a bin of its own and the rest is shared among the other bins. When the noise leaves no boundary with mass
    on both sides, the heaviest piece is cut off from the rest (at its upper end unless it is the last piece): a
    schema range that is not a single point holds at least two values, and that cut is the likeliest to part them
    (a rare one-hot value whose count drowns in the noise keeps its cut).
    """
    if bounds.size == 0:
        return np.zeros(0)
    cum = np.cumsum(mass)[:-1]  # mass at or below each inner boundary
    total = float(mass.sum())
    cuts: list[int] = []
    start, last = 0.0, -1
    for remaining in range(bins, 1, -1):
        target = start + (total - start) / remaining
        j = int(np.searchsorted(cum, target, side="left"))
        options = [i for i in (j - 1, j) if last < i < cum.size and start < cum[i] < total]
        if not options:
            break
        best = min(options, key=lambda i: (abs(cum[i] - target), i))
        cuts.append(best)
        start, last = float(cum[best]), best
    if not cuts:
        heaviest = int(np.argmax(mass))
        cuts.append(heaviest if heaviest < bounds.size else heaviest - 1)
    return bounds[np.array(cuts, dtype=np.int64)]


def edges_from_sketch(sketches: Sequence[Sketch], low: np.ndarray, high: np.ndarray, bins: int) -> list[np.ndarray]:
    """The common edges from the parties' sketches (in party order), cut by merged mass (module docstring).

    A feature whose merged mass is empty gets equal-width cuts of its schema range (no data to follow)."""
    if any(len(s) != len(low) for s in sketches):
        raise ValueError(f"every sketch must cover the task's {len(low)} features")
    edges: list[np.ndarray] = []
    for f in range(len(low)):
        lo, hi = float(low[f]), float(high[f])
        if not hi > lo:
            edges.append(np.zeros(0))
            continue
        bounds, mass = merged_mass([s.features[f] for s in sketches], lo, hi)
        if not mass.sum() > 0:
            cuts = np.unique(fixed_round(bucket_bounds(lo, hi, bins)))
            edges.append(cuts[(cuts > lo) & (cuts < hi)])
            continue
        edges.append(mass_cuts(bounds, mass, bins))
    return edges


# ------------------------------------------------------------------------------------------- reference methods


def bucket_bounds(low: float, high: float, resolution: int) -> np.ndarray:
    """The ``resolution - 1`` inner boundaries of equal-width buckets over [low, high]."""
    return np.linspace(low, high, resolution + 1)[1:-1]


def equal_width_sketch(
    X: np.ndarray, low: np.ndarray, high: np.ndarray, *, resolution: int, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """The previous sketch (``dp-equal-width``): counts in equal-width buckets with discrete Laplace noise of scale
    ``F / epsilon`` (exact, ``node.privacy.discrete_gaussian.discrete_laplaces``), shape (F, R).

    One row changes one bucket of every feature, so the whole sketch has L1 sensitivity F; clipping at 0 is
    post-processing. Kept to measure what following the mass gains."""
    num_features = X.shape[1]
    sketch = np.zeros((num_features, resolution), dtype=np.float64)
    for f in range(num_features):
        col = X[:, f]
        col = col[~np.isnan(col)]
        if high[f] > low[f]:
            idx = np.searchsorted(bucket_bounds(low[f], high[f], resolution), col, side="left")
        else:
            idx = np.zeros(col.shape[0], dtype=np.int64)
        sketch[f] = np.bincount(idx, minlength=resolution)[:resolution]
    if np.isfinite(epsilon):
        if epsilon <= 0:
            raise ValueError("epsilon for the binning sketch must be positive")
        sketch += discrete_laplaces(num_features / epsilon, sketch.shape, rng)
    return np.clip(sketch, 0.0, None)


def equal_width_edges(sketch: np.ndarray, low: np.ndarray, high: np.ndarray, bins: int) -> list[np.ndarray]:
    """The previous merge: cuts at the ``bins``-quantiles of the summed equal-width sketches, snapped to buckets."""
    num_features, resolution = sketch.shape
    edges: list[np.ndarray] = []
    for f in range(num_features):
        if not high[f] > low[f]:
            edges.append(np.zeros(0))
            continue
        bounds = bucket_bounds(low[f], high[f], resolution)
        cum = np.cumsum(sketch[f])
        total = cum[-1]
        if total <= 0:
            edges.append(np.unique(bucket_bounds(low[f], high[f], bins)))
            continue
        targets = total * np.arange(1, bins) / bins
        pos = np.searchsorted(cum[:-1], targets, side="left")
        pos = pos[pos < resolution - 1]
        # a cut is only useful where mass lies on both sides of it
        keep = (cum[pos] > 0) & (cum[pos] < total)
        edges.append(np.unique(bounds[pos[keep]]))
    return edges


def exact_edges(X: np.ndarray, bins: int) -> list[np.ndarray]:
    """Pooled-data quantile cut points (not private): the reference the private edges are measured against."""
    edges: list[np.ndarray] = []
    for f in range(X.shape[1]):
        col = X[:, f]
        col = np.sort(col[~np.isnan(col)])
        if col.size == 0:
            edges.append(np.zeros(0))
            continue
        qs = col[np.minimum((np.arange(1, bins) * col.size) // bins, col.size - 1)]
        cuts = np.unique(qs)
        # a cut equal to the maximum would leave the top bin empty
        edges.append(cuts[cuts < col[-1]])
    return edges


def uniform_edges(low: np.ndarray, high: np.ndarray, bins: int) -> list[np.ndarray]:
    """Equal-width cuts of the schema range: no data used at all."""
    return [
        np.unique(bucket_bounds(lo, hi, bins)) if hi > lo else np.zeros(0) for lo, hi in zip(low, high, strict=True)
    ]


# ------------------------------------------------------------------------------------------------------ the task


def sketch_rng(seed: int | None, party: int) -> np.random.Generator:
    """Party ``party``'s own noise stream for its sketch, so a party process reproduces the simulator's sketch;
    without a seed, the operating system's entropy (``node.privacy.accountant.NOISE_SOURCES``)."""
    return np.random.default_rng(None if seed is None else [seed, 0xB1, party])


def party_sketches(
    party_X: Sequence[np.ndarray],
    low: np.ndarray,
    high: np.ndarray,
    *,
    epsilon: float,
    resolution: int = DEFAULT_RESOLUTION,
    seed: int | None = 0,
) -> list[Sketch]:
    """Every party's ``dp`` sketch with its own seeded noise stream, as the party nodes compute them."""
    return [
        local_sketch(X, low, high, resolution=resolution, epsilon=epsilon, rng=sketch_rng(seed, p))
        for p, X in enumerate(party_X)
    ]


def common_edges(
    party_X: Sequence[np.ndarray],
    bins: int,
    *,
    method: str = "dp",
    epsilon: float = 1.0,
    resolution: int = DEFAULT_RESOLUTION,
    seed: int | None = 0,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
    integers: np.ndarray | None = None,
) -> list[np.ndarray]:
    """The task's bin edges from the parties' data, by ``method`` (see the module docstring)."""
    edges, _ = edges_and_sketch_bytes(
        party_X,
        bins,
        method=method,
        epsilon=epsilon,
        resolution=resolution,
        seed=seed,
        ranges=ranges,
        integers=integers,
    )
    return edges


def edges_and_sketch_bytes(
    party_X: Sequence[np.ndarray],
    bins: int,
    *,
    method: str = "dp",
    epsilon: float = 1.0,
    resolution: int = DEFAULT_RESOLUTION,
    seed: int | None = 0,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
    integers: np.ndarray | None = None,
) -> tuple[list[np.ndarray], list[int]]:
    """:func:`common_edges` and the bytes of each party's published sketch (0 for the non-private methods; the
    equal-width sketch counted as doubles, as version 2 of the join payload carried it). ``integers``: the
    schema's integer features (``schema_integers``), whose cuts are snapped (``snap_integer_edges``)."""
    edges, sizes = _edges_and_sketch_bytes(party_X, bins, method, epsilon, resolution, seed, ranges)
    return snap_integer_edges(edges, integers), sizes


def _edges_and_sketch_bytes(
    party_X: Sequence[np.ndarray],
    bins: int,
    method: str,
    epsilon: float,
    resolution: int,
    seed: int | None,
    ranges: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[list[np.ndarray], list[int]]:
    if bins < 2 or bins > 255:
        raise ValueError(f"bins must be in [2, 255], got {bins}")
    if method not in BINNING_METHODS:
        raise ValueError(f"unknown binning method {method!r}; choose one of {', '.join(BINNING_METHODS)}")
    low, high = ranges if ranges is not None else feature_ranges(np.vstack(party_X))
    if method == "exact":
        return exact_edges(np.vstack(party_X), bins), [0] * len(party_X)
    if method == "uniform":
        return uniform_edges(low, high, bins), [0] * len(party_X)
    if method == "dp-equal-width":
        merged = sum(
            (
                equal_width_sketch(X, low, high, resolution=resolution, epsilon=epsilon, rng=sketch_rng(seed, p))
                for p, X in enumerate(party_X)
            ),
            start=np.zeros((len(low), resolution)),
        )
        return equal_width_edges(merged, low, high, bins), [8 + 8 * len(low) * resolution] * len(party_X)
    sketches = party_sketches(party_X, low, high, epsilon=epsilon, resolution=resolution, seed=seed)
    return edges_from_sketch(sketches, low, high, bins), [len(encode_sketch(s)) for s in sketches]
