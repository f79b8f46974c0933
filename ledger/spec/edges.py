"""The common bin edges as bytes: what ``start`` publishes on chain and every party and auditor decodes.

Edges are raw-value thresholds (floats), so they travel as IEEE-754 doubles, exactly: the model a party trains with,
the model read back from the chain and the exported LightGBM model all compare against the same numbers. Layout
(big-endian): magic ``FGBE``, version (u8), feature count (u32), histogram slots (u16, ``histogram_slots``), then per
feature its edge count (u16) followed by that many doubles. The contract reads the slots at bytes 9-10 (``start``):
every histogram of the task is that wide.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Sequence, Sized

MAGIC = b"FGBE"
VERSION = 2
SLOTS_OFFSET = 9
"""Where the histogram slots sit in the encoding (read by the contract's ``start``)."""
MIN_SLOTS = 3
"""The missing slot and at least two value bins (``TrainParams`` takes two bins at least), even when every feature is
constant."""


class EdgesFormatError(ValueError):
    """Bytes that are not a valid encoding of bin edges."""


def histogram_slots(edges: Sequence[Sized]) -> int:
    """Histogram slots per candidate that the edges need: the missing slot plus the most value bins of any feature
    (one more than its edges), at least ``MIN_SLOTS``.

    Why: a slot above a feature's top bin never holds a row, whatever the data (``bin_matrix`` cannot put one
    there), so a histogram as wide as the finest feature needs carries the same sums as one of ``bins + 1`` slots
    and leaves every split, gain and Shapley value unchanged. When no feature has ``bins`` distinct values (one-hot,
    integer or constant-heavy columns) the narrower histograms cut the gas and calldata of every submission and
    resolution, and the parties' work, in proportion. The one rule of the width: the contract stores what the
    encoding's header says, and the header must be this."""
    return max(MIN_SLOTS, max((len(e) for e in edges), default=0) + 2)


def encode_edges(edges: Sequence[Sequence[float]]) -> bytes:
    """Deterministic encoding; every feature's edges must be finite and strictly increasing."""
    slots = histogram_slots(edges)
    if slots > 0xFFFF:
        raise ValueError(f"{slots} histogram slots do not fit the encoding")
    out = [MAGIC, struct.pack(">BIH", VERSION, len(edges), slots)]
    for f, e in enumerate(edges):
        values = [float(v) for v in e]
        if len(values) > 0xFFFF:
            raise ValueError(f"feature {f}: too many edges ({len(values)})")
        if any(not math.isfinite(v) for v in values) or any(b <= a for a, b in itertools.pairwise(values)):
            raise ValueError(f"feature {f}: edges must be finite and strictly increasing")
        out.append(struct.pack(f">H{len(values)}d", len(values), *values))
    return b"".join(out)


def decode_edges(data: bytes) -> list[list[float]]:
    """Inverse of :func:`encode_edges`; rejects anything that does not re-encode to the same bytes."""
    if len(data) < 5 or data[:4] != MAGIC:
        raise EdgesFormatError("not an FGBDT bin-edges payload (bad magic or too short)")
    if data[4] != VERSION:
        raise EdgesFormatError(f"unsupported bin-edges version {data[4]} (this release reads version {VERSION})")
    if len(data) < SLOTS_OFFSET + 2:
        raise EdgesFormatError("truncated header")
    count, slots = struct.unpack_from(">IH", data, 5)
    pos, edges = SLOTS_OFFSET + 2, []
    for f in range(count):
        if pos + 2 > len(data):
            raise EdgesFormatError(f"truncated before feature {f}")
        (n,) = struct.unpack_from(">H", data, pos)
        pos += 2
        if pos + 8 * n > len(data):
            raise EdgesFormatError(f"truncated inside feature {f}")
        edges.append(list(struct.unpack_from(f">{n}d", data, pos)))
        pos += 8 * n
    if pos != len(data):
        raise EdgesFormatError(f"{len(data) - pos} trailing bytes")
    if slots != histogram_slots(edges):
        raise EdgesFormatError(f"the header names {slots} histogram slots; the edges need {histogram_slots(edges)}")
    try:
        if encode_edges(edges) != data:
            raise EdgesFormatError("not the canonical encoding")
    except ValueError as exc:
        raise EdgesFormatError(str(exc)) from exc
    return edges
