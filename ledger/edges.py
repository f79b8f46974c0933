"""The common bin edges as bytes: what ``start`` publishes on chain and every party and auditor decodes.

Edges are raw-value thresholds (floats), so they travel as IEEE-754 doubles, exactly: the model a party trains with,
the model read back from the chain and the exported LightGBM model all compare against the same numbers. Layout
(big-endian): magic ``FGBE``, version (u8), feature count (u32), then per feature its edge count (u16) followed by
that many doubles.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Sequence

MAGIC = b"FGBE"
VERSION = 1


class EdgesFormatError(ValueError):
    """Bytes that are not a valid encoding of bin edges."""


def encode_edges(edges: Sequence[Sequence[float]]) -> bytes:
    """Deterministic encoding; every feature's edges must be finite and strictly increasing."""
    out = [MAGIC, struct.pack(">BI", VERSION, len(edges))]
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
    if len(data) < 9 or data[:4] != MAGIC:
        raise EdgesFormatError("not an FGBDT bin-edges payload (bad magic or too short)")
    version, count = struct.unpack_from(">BI", data, 4)
    if version != VERSION:
        raise EdgesFormatError(f"unsupported bin-edges version {version}")
    pos, edges = 9, []
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
    try:
        if encode_edges(edges) != data:
            raise EdgesFormatError("not the canonical encoding")
    except ValueError as exc:
        raise EdgesFormatError(str(exc)) from exc
    return edges
