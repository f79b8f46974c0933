"""Secure aggregation with pairwise masks (Bonawitz et al. 2017, from whom FederBoost's Protocol 5 takes them), with
their recovery of parties that drop out: the aggregator learns the sum of the parties' integer vectors and nothing
else.

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

**Parties that drop out** (Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine Learning",
CCS 2017). A party that leaves after the keys are agreed and before it sends its masked vector would leave its
masks with every other party in the sum. So each party splits its private key into Shamir shares, one for each other
party, any ``threshold`` of which rebuild it; when a party is missing, the survivors hand the aggregator their
shares of its key, and the aggregator recomputes its pairwise masks with each survivor (ECDH with the survivor's
public key) and takes them out. Its key is then known, so a party that dropped stays out of the later sums. Each
party also adds a self-mask from a fresh seed per round, shared the same way: the survivors reveal the shares of a
survivor's seed and of a dropped party's key, never both for one party, so a vector that arrives late after its
party was declared dropped stays masked (their double masking). Below ``threshold`` survivors nothing is rebuilt
and the round is refused. The default threshold is a majority of the parties, the honest majority the coalition
bound of ``node.privacy.accountant`` assumes.
"""

from __future__ import annotations

import hashlib
import math
import random
import secrets
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from ecdsa import ECDH, SECP256k1, SigningKey

WORD_BYTES = 8
"""Bytes per masked entry on the wire: one 64-bit word."""


def party_keys(parties: int, seed: int | None = None) -> list[SigningKey]:
    """Each party's secp256k1 key: from the operating system's entropy, or derived from ``seed`` (experiments)."""
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
    return keys


def shared_seed(private: SigningKey, public: SigningKey) -> bytes:
    """The 32-byte seed of a pair: SHA-256 of the ECDH point of one party's private key and the other's public key."""
    ecdh = ECDH(curve=SECP256k1, private_key=private)
    ecdh.load_received_public_key(public.get_verifying_key())
    return hashlib.sha256(ecdh.generate_sharedsecret_bytes()).digest()


def pairwise_seeds(parties: int, seed: int | None = None) -> dict[tuple[int, int], bytes]:
    """The 32-byte seed every pair ``(i, j)``, ``i < j``, shares, agreed by ECDH: each party's private key and the
    other's public key give the same point; both sides' derivations are checked equal."""
    return seeds_of(party_keys(parties, seed))


def seeds_of(keys: Sequence[SigningKey]) -> dict[tuple[int, int], bytes]:
    """:func:`pairwise_seeds` of given keys."""
    out = {}
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            shared = shared_seed(keys[i], keys[j])
            if shared != shared_seed(keys[j], keys[i]):
                raise RuntimeError("ECDH gave the two parties different secrets")
            out[(i, j)] = shared
    return out


SHARE_PRIME = SECP256k1.order
"""The field of the Shamir shares: secp256k1's group order, a prime above every private key."""


def shamir_shares(secret: int, holders: Sequence[int], threshold: int, draw: Callable[[int], int]) -> dict[int, int]:
    """``secret`` split among ``holders`` (party indices), any ``threshold`` of whose shares rebuild it: a random
    polynomial of degree ``threshold - 1`` with ``secret`` at 0, evaluated at ``holder + 1``. ``draw(n)`` is a
    uniform integer below ``n``."""
    if not 1 <= threshold <= len(holders):
        raise ValueError(f"the threshold must be from 1 to the {len(holders)} holders, got {threshold}")
    if not 0 <= secret < SHARE_PRIME:
        raise ValueError("a shared secret must lie in the share field")
    coefficients = [secret] + [draw(SHARE_PRIME) for _ in range(threshold - 1)]
    out = {}
    for h in holders:
        x, y = h + 1, 0
        for c in reversed(coefficients):
            y = (y * x + c) % SHARE_PRIME
        out[h] = y
    return out


def shamir_secret(shares: dict[int, int]) -> int:
    """The secret at 0 of the polynomial through ``shares`` (holder -> share), by Lagrange interpolation."""
    if not shares:
        raise ValueError("no shares to rebuild a secret from")
    xs = {h: h + 1 for h in shares}
    total = 0
    for h, y in shares.items():
        num, den = 1, 1
        for other in shares:
            if other != h:
                num = num * (-xs[other]) % SHARE_PRIME
                den = den * (xs[h] - xs[other]) % SHARE_PRIME
        total = (total + y * num * pow(den, -1, SHARE_PRIME)) % SHARE_PRIME
    return total


def default_threshold(parties: int) -> int:
    """A majority of the parties: the fewest survivors a round can be rebuilt from."""
    return parties // 2 + 1


def mask(seed: bytes, round_id: int, size: int) -> np.ndarray:
    """The pair's mask for one aggregation: ``size`` uniform 64-bit words from SHAKE-256(seed, round)."""
    stream = hashlib.shake_256(seed + round_id.to_bytes(8, "big")).digest(WORD_BYTES * size)
    return np.frombuffer(stream, dtype=np.uint64).copy()


def masked_input(
    party: int,
    values: np.ndarray,
    seeds: dict[tuple[int, int], bytes],
    parties: int,
    round_id: int,
    self_seed: bytes | None = None,
) -> np.ndarray:
    """What party ``party`` sends: its signed 64-bit integers plus its masks with later parties, minus those with
    earlier ones, plus its own self-mask from ``self_seed`` when given, modulo 2^64."""
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
    if self_seed is not None:
        out += mask(self_seed, round_id, out.size)
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
    """The parties' side and the aggregator's of repeated secure sums, with the bytes each party sent, recovering
    from parties that drop out (module docstring)."""

    def __init__(self, parties: int, seed: int | None = None, threshold: int | None = None) -> None:
        self.parties = parties
        self.keys = party_keys(parties, seed)
        self.seeds = seeds_of(self.keys)
        self.threshold = default_threshold(parties) if threshold is None else threshold
        if not 1 <= self.threshold <= parties:
            raise ValueError(f"the recovery threshold must be from 1 to {parties} parties, got {self.threshold}")
        self._draw: Callable[[int], int] = (
            secrets.randbelow if seed is None else random.Random(f"fgbdt-secure-agg-shares:{seed}").randrange
        )
        """Uniform integers below a bound for the shares' polynomials and the self-mask seeds: the operating
        system's entropy, or a generator seeded by the experiment's seed."""
        # each party's key split among all parties, itself included (party j holds key_shares[i][j])
        everyone = list(range(parties))
        self.key_shares = [
            shamir_shares(k.privkey.secret_multiplier, everyone, self.threshold, self._draw) for k in self.keys
        ]
        self.rounds = 0
        self.dropped: set[int] = set()
        """Parties that dropped out: their keys are rebuilt, so they take part in no later sum."""
        self.bytes_sent = np.zeros(parties, dtype=np.int64)
        self.last_masked: list[np.ndarray] = []
        """The vectors the aggregator saw in the last round (kept for tests: they must look random)."""

    def _self_seed(self, party: int) -> bytes:
        """The party's fresh self-mask seed of this round (a secret in the share field, as 32 bytes)."""
        return self._draw(SHARE_PRIME).to_bytes(32, "big")

    def sum(self, vectors: Sequence[np.ndarray]) -> np.ndarray:
        """The exact sum of every party's int64 vector, computed from masked inputs only."""
        if len(vectors) != self.parties:
            raise ValueError(f"need one vector per party ({self.parties}), got {len(vectors)}")
        return self.sum_of(dict(enumerate(vectors)))

    def sum_of(self, vectors: Mapping[int, np.ndarray]) -> np.ndarray:
        """The exact sum of the vectors that arrived (party -> int64 vector): the parties missing from ``vectors``
        dropped out of this round, and their masks with the survivors are rebuilt from the survivors' shares of
        their keys and taken out. Refused below the threshold of survivors, or for a party that dropped before."""
        back = sorted(set(vectors) & self.dropped)
        if back:
            raise ValueError(f"parties {back} dropped out of an earlier sum: their keys are known, they cannot rejoin")
        unknown = sorted(set(vectors) - set(range(self.parties)))
        if unknown:
            raise ValueError(f"no parties {unknown} in a sum of {self.parties} parties")
        survivors = sorted(vectors)
        if len(survivors) < self.threshold:
            raise ValueError(
                f"{len(survivors)} of {self.parties} parties sent their vectors, fewer than the {self.threshold} "
                "the masks of the others can be rebuilt from"
            )
        self.rounds += 1
        round_id = self.rounds
        self_seeds = {i: self._self_seed(i) for i in survivors}
        # the self-mask seeds are shared among the others when the round starts, before anyone can drop
        everyone = list(range(self.parties))
        seed_shares = {
            i: shamir_shares(int.from_bytes(b, "big"), everyone, self.threshold, self._draw)
            for i, b in self_seeds.items()
        }
        masked = {i: masked_input(i, vectors[i], self.seeds, self.parties, round_id, self_seeds[i]) for i in survivors}
        for i, v in masked.items():
            self.bytes_sent[i] += WORD_BYTES * v.size
        self.last_masked = list(masked.values())
        total = aggregate(self.last_masked).view(np.uint64).copy()
        quorum = survivors[: self.threshold]  # any threshold of the survivors answer the aggregator
        for i in survivors:  # their shares of each survivor's self-mask seed
            rebuilt = shamir_secret({j: seed_shares[i][j] for j in quorum})
            total -= mask(rebuilt.to_bytes(32, "big"), round_id, total.size)
        for d in sorted(set(range(self.parties)) - set(survivors)):  # and their shares of each dropped party's key
            secret = shamir_secret({j: self.key_shares[d][j] for j in quorum})
            key = SigningKey.from_secret_exponent(secret, curve=SECP256k1)
            for s in survivors:
                m = mask(shared_seed(key, self.keys[s]), round_id, total.size)
                if s < d:
                    total -= m
                else:
                    total += m
            self.dropped.add(d)
        return total.view(np.int64)
