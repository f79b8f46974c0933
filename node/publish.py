"""What a party publishes when it asks to join: its PSD and its noisy binning sketch, as one payload.

Both are differentially private (docs/psd.md, node/binning.py), so they can go on chain in the join transaction;
the contract stores only their hash. Layout (big-endian): magic ``FGBJ``, version (u8), PSD length (u32), the PSD's
own encoding, then the sketch: feature count (u32), bucket count (u32) and the counts as doubles, row by row.
"""

from __future__ import annotations

import struct

import numpy as np

from node.psd import PSD

MAGIC = b"FGBJ"
VERSION = 1


class PayloadError(ValueError):
    """A join payload that cannot be decoded."""


def encode_join(psd: PSD, sketch: np.ndarray) -> bytes:
    """The join payload of one party."""
    if sketch.ndim != 2:
        raise ValueError("the sketch must be a (features, buckets) array")
    body = psd.encode()
    rows, cols = sketch.shape
    return b"".join(
        [
            MAGIC,
            struct.pack(">BI", VERSION, len(body)),
            body,
            struct.pack(">II", rows, cols),
            np.ascontiguousarray(sketch, dtype=">f8").tobytes(),
        ]
    )


def decode_join(data: bytes) -> tuple[PSD, np.ndarray]:
    """(PSD, sketch) of a join payload; raises PayloadError naming what is wrong."""
    if len(data) < 9 or data[:4] != MAGIC:
        raise PayloadError("not an FGBDT join payload (bad magic or too short)")
    version, size = struct.unpack_from(">BI", data, 4)
    if version != VERSION:
        raise PayloadError(f"unsupported join payload version {version}")
    pos = 9
    if pos + size + 8 > len(data):
        raise PayloadError("truncated PSD")
    try:
        psd = PSD.decode(data[pos : pos + size])
    except ValueError as exc:
        raise PayloadError(f"bad PSD: {exc}") from exc
    pos += size
    rows, cols = struct.unpack_from(">II", data, pos)
    pos += 8
    if len(data) - pos != 8 * rows * cols:
        raise PayloadError(f"sketch of {rows}x{cols} needs {8 * rows * cols} bytes, found {len(data) - pos}")
    sketch = np.frombuffer(data, dtype=">f8", count=rows * cols, offset=pos).astype(np.float64).reshape(rows, cols)
    if not np.all(np.isfinite(sketch)) or np.any(sketch < 0):
        raise PayloadError("sketch counts must be finite and non-negative")
    return psd, sketch
