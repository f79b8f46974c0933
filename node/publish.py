"""What a party publishes when it asks to join: its PSD, the scale of the PSD's noise and its noisy binning sketch.

Both are differentially private (docs/psd.md, node/binning.py), so they can go on chain in the join transaction;
the contract stores only their hash. The PSD's Laplace scale is public so that verifiers can account for that noise
in their endorsement test (``node.verify``). Layout (big-endian): magic ``FGBJ``, version (u8), PSD length (u32), the
PSD's own encoding, the leaf-count noise scale (double), then the sketch: feature count (u32), bucket count (u32)
and the counts as doubles, row by row.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from fgbdt_chain.node.psd import PSD

MAGIC = b"FGBJ"
VERSION = 2


class PayloadError(ValueError):
    """A join payload that cannot be decoded."""


@dataclass(frozen=True)
class JoinPayload:
    """A party's join publication: its PSD, the Laplace scale of the PSD's leaf counts, its binning sketch."""

    psd: PSD
    psd_scale: float
    sketch: np.ndarray


def encode_join(psd: PSD, psd_scale: float, sketch: np.ndarray) -> bytes:
    """The join payload of one party."""
    if sketch.ndim != 2:
        raise ValueError("the sketch must be a (features, buckets) array")
    if not (np.isfinite(psd_scale) and psd_scale >= 0):
        raise ValueError(f"the PSD noise scale must be a finite number >= 0, got {psd_scale}")
    body = psd.encode()
    rows, cols = sketch.shape
    return b"".join(
        [
            MAGIC,
            struct.pack(">BI", VERSION, len(body)),
            body,
            struct.pack(">dII", psd_scale, rows, cols),
            np.ascontiguousarray(sketch, dtype=">f8").tobytes(),
        ]
    )


def decode_join(data: bytes) -> JoinPayload:
    """The publication in a join payload; raises PayloadError naming what is wrong."""
    if len(data) < 9 or data[:4] != MAGIC:
        raise PayloadError("not an FGBDT join payload (bad magic or too short)")
    version, size = struct.unpack_from(">BI", data, 4)
    if version != VERSION:
        raise PayloadError(f"unsupported join payload version {version}")
    pos = 9
    if pos + size + 16 > len(data):
        raise PayloadError("truncated PSD")
    try:
        psd = PSD.decode(data[pos : pos + size])
    except ValueError as exc:
        raise PayloadError(f"bad PSD: {exc}") from exc
    pos += size
    psd_scale, rows, cols = struct.unpack_from(">dII", data, pos)
    if not (np.isfinite(psd_scale) and psd_scale >= 0):
        raise PayloadError(f"the PSD noise scale must be a finite number >= 0, got {psd_scale}")
    pos += 16
    if len(data) - pos != 8 * rows * cols:
        raise PayloadError(f"sketch of {rows}x{cols} needs {8 * rows * cols} bytes, found {len(data) - pos}")
    sketch = np.frombuffer(data, dtype=">f8", count=rows * cols, offset=pos).astype(np.float64).reshape(rows, cols)
    if not np.all(np.isfinite(sketch)) or np.any(sketch < 0):
        raise PayloadError("sketch counts must be finite and non-negative")
    return JoinPayload(psd, float(psd_scale), sketch)
