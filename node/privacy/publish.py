"""What a party publishes when it asks to join: its PSD, the scale of the PSD's noise and its noisy binning sketch.

Both are differentially private (docs/privacy.md, node/privacy/binning.py), so they can go on chain in the join
transaction; the contract stores only their hash. The PSD's Laplace scale is public so that verifiers can account
for that noise in their endorsement test (``node.protocol.verify``). Layout (big-endian): magic ``FGBJ``, version
(u8), PSD length (u32), the PSD's own encoding, the leaf-count noise scale (double), then the sketch in
``node.privacy.binning.encode_sketch``'s layout (per feature: the grid's spans and the noisy integer bucket counts).

Version 3 carries the mass-following sketch of ``node.privacy.binning``; version 2 carried the equal-width sketch
(feature
count, bucket count and the counts as doubles) and is refused, since its edges would differ from the simulator's.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from fgbdt_chain.node.privacy.binning import Sketch, decode_sketch, encode_sketch
from fgbdt_chain.node.privacy.psd import PSD

MAGIC = b"FGBJ"
VERSION = 3


class PayloadError(ValueError):
    """A join payload that cannot be decoded."""


@dataclass(frozen=True)
class JoinPayload:
    """A party's join publication: its PSD, the Laplace scale of the PSD's leaf counts, its binning sketch."""

    psd: PSD
    psd_scale: float
    sketch: Sketch


def encode_join(psd: PSD, psd_scale: float, sketch: Sketch) -> bytes:
    """The join payload of one party."""
    if not (math.isfinite(psd_scale) and psd_scale >= 0):
        raise ValueError(f"the PSD noise scale must be a finite number >= 0, got {psd_scale}")
    body = psd.encode()
    header = struct.pack(">BI", VERSION, len(body))
    return b"".join([MAGIC, header, body, struct.pack(">d", psd_scale), encode_sketch(sketch)])


def decode_join(data: bytes) -> JoinPayload:
    """The publication in a join payload; raises PayloadError naming what is wrong."""
    if len(data) < 9 or data[:4] != MAGIC:
        raise PayloadError("not an FGBDT join payload (bad magic or too short)")
    version, size = struct.unpack_from(">BI", data, 4)
    if version != VERSION:
        raise PayloadError(f"unsupported join payload version {version} (this node reads version {VERSION})")
    pos = 9
    if pos + size + 8 > len(data):
        raise PayloadError("truncated PSD")
    try:
        psd = PSD.decode(data[pos : pos + size])
    except ValueError as exc:
        raise PayloadError(f"bad PSD: {exc}") from exc
    pos += size
    (psd_scale,) = struct.unpack_from(">d", data, pos)
    if not (math.isfinite(psd_scale) and psd_scale >= 0):
        raise PayloadError(f"the PSD noise scale must be a finite number >= 0, got {psd_scale}")
    try:
        sketch, end = decode_sketch(data, pos + 8)
    except (ValueError, struct.error) as exc:
        raise PayloadError(f"bad binning sketch: {exc}") from exc
    if end != len(data):
        raise PayloadError(f"{len(data) - end} bytes after the binning sketch")
    return JoinPayload(psd, float(psd_scale), sketch)
