"""Secure aggregation with pairwise masks (Bonawitz et al. 2017, as FederBoost's Protocol 5 simplifies it for parties
that do not drop out): the aggregator learns the sum of the parties' integer vectors and nothing else.

Every pair of parties ``i < j`` agrees on a seed by elliptic-curve Diffie-Hellman (``ecdsa``'s ECDH on secp256k1,
the curve the chain's accounts use; the shared secret hashed with SHA-256). For each aggregation (a round id), each
seed expands into a mask vector by SHAKE-256, an extendable-output function, so a mask is as unpredictable as the
secret. Party ``i`` sends its vector plus the masks it shares with the parties after it, minus those it shares with
the parties before it, all modulo 2^64; in the sum every mask appears once with each sign and cancels, leaving the
exact sum of the inputs modulo 2^64, read back as signed 64-bit integers (two's complement), exact while the true sum
stays within ``[-2^63, 2^63)``.

Real values are scaled to integers first (``to_fixed``: a power of two chosen so that the sum cannot overflow), as
FederBoost scales its gradient sums; counts are integers already.

Experiments derive the parties' private keys from a seed so that runs repeat; a known seed is no secret, and a real
party draws its key from the operating system (``seed=None``).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Sequence

import numpy as np
from ecdsa import ECDH, SECP256k1, SigningKey

WORD_BYTES = 8
"""Bytes per masked entry on the wire: one 64-bit word."""


def pairwise_seeds(parties: int, seed: int | None = None) -> dict[tuple[int, int], bytes]:
    """The 32-byte seed every pair ``(i, j)``, ``i < j``, shares, agreed by ECDH: each party's private key and the
    other's public key give the same point; both sides' derivations are checked equal."""
    if parties < 1:
        raise ValueError(f"secure aggregation needs at least one party, got {parties}")
    keys = []
    for i in range(parties):
        if seed is None:
            secret = secrets.randbelow(SECP256k1.order - 1) + 1
        else:
            digest = hashlib.sha256(f"fgbdt-secure-agg:{seed}:{i}".encode()).digest()
            secret = int.from_bytes(digest, "big") % (SECP256k1.order - 1) + 1
        keys.append(SigningKey.from_secret_exponent(secret, curve=SECP256k1))
    out = {}
    for i in range(parties):
        for j in range(i + 1, parties):
            mine = ECDH(curve=SECP256k1, private_key=keys[i])
            mine.load_received_public_key(keys[j].get_verifying_key())
            theirs = ECDH(curve=SECP256k1, private_key=keys[j])
            theirs.load_received_public_key(keys[i].get_verifying_key())
            shared = mine.generate_sharedsecret_bytes()
            if shared != theirs.generate_sharedsecret_bytes():
                raise RuntimeError("ECDH gave the two parties different secrets")
            out[(i, j)] = hashlib.sha256(shared).digest()
    return out


def mask(seed: bytes, round_id: int, size: int) -> np.ndarray:
    """The pair's mask for one aggregation: ``size`` uniform 64-bit words from SHAKE-256(seed, round)."""
    stream = hashlib.shake_256(seed + round_id.to_bytes(8, "big")).digest(WORD_BYTES * size)
    return np.frombuffer(stream, dtype=np.uint64).copy()


def masked_input(
    party: int, values: np.ndarray, seeds: dict[tuple[int, int], bytes], parties: int, round_id: int
) -> np.ndarray:
    """What party ``party`` sends: its signed 64-bit integers plus its masks with later parties, minus those with
    earlier ones, modulo 2^64."""
    values = np.asarray(values)
    if values.dtype != np.int64:
        raise ValueError(f"secure aggregation takes int64 vectors, got {values.dtype}")
    out = values.view(np.uint64).copy()
    for other in range(parties):
        if other == party:
            continue
        m = mask(seeds[(min(party, other), max(party, other))], round_id, out.size)
        if party < other:
            out += m
        else:
            out -= m
    return out


def aggregate(masked: Sequence[np.ndarray]) -> np.ndarray:
    """The aggregator's sum of the masked vectors: the inputs' exact sum, as signed 64-bit integers."""
    if not masked:
        raise ValueError("nothing to aggregate")
    total = np.zeros_like(masked[0], dtype=np.uint64)
    for v in masked:
        if v.shape != total.shape:
            raise ValueError(f"masked vectors differ in shape: {v.shape} against {total.shape}")
        total += v
    return total.view(np.int64)


def fraction_bits(bound: float) -> int:
    """The scale 2^F for real values whose sum over all parties is at most ``bound`` in absolute value: the largest
    F that keeps ``bound * 2^F`` below 2^62 (one bit of headroom for rounding), capped at 40."""
    if not (bound >= 0 and math.isfinite(bound)):
        raise ValueError(f"the bound on a sum must be finite and non-negative, got {bound}")
    return max(0, min(40, 62 - math.ceil(math.log2(bound + 1.0))))


def to_fixed(values: np.ndarray, bits: int) -> np.ndarray:
    """Real values as integers at scale 2^bits (rounded to nearest)."""
    return np.rint(np.asarray(values, dtype=np.float64) * 2.0**bits).astype(np.int64)


class SecureSum:
    """The parties' side and the aggregator's of repeated secure sums, with the bytes each party sent."""

    def __init__(self, parties: int, seed: int | None = None) -> None:
        self.parties = parties
        self.seeds = pairwise_seeds(parties, seed)
        self.rounds = 0
        self.bytes_sent = np.zeros(parties, dtype=np.int64)
        self.last_masked: list[np.ndarray] = []
        """The vectors the aggregator saw in the last round (kept for tests: they must look random)."""

    def sum(self, vectors: Sequence[np.ndarray]) -> np.ndarray:
        """The exact sum of the parties' int64 vectors, computed from masked inputs only."""
        if len(vectors) != self.parties:
            raise ValueError(f"need one vector per party ({self.parties}), got {len(vectors)}")
        self.rounds += 1
        masked = [masked_input(i, v, self.seeds, self.parties, self.rounds) for i, v in enumerate(vectors)]
        for i, v in enumerate(masked):
            self.bytes_sent[i] += WORD_BYTES * v.size
        self.last_masked = masked
        return aggregate(masked)
