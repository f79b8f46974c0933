"""Signing keys made once per key, for transactions and endorsements alike.

Why: eth-keys' coincurve backend builds a libsecp256k1 key object for every signature it makes, and building one
derives the public key (twice: coincurve 21 derives the x-only key too): 56 of the 94 us a signature took, measured
here. A party signs two transactions and endorses three others' histograms at every level, so the key object is
kept, each key in a backend of its own (as many as ``signing_key`` keeps). The signatures are the same bytes:
libsecp256k1 signs with RFC 6979 nonces either way.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from eth_keys.datatypes import PrivateKey, Signature

try:
    from eth_keys.backends.coincurve import CoinCurveECCBackend
except ImportError:  # pragma: no cover - eth-account depends on coincurve; other backends sign as they do
    CoinCurveECCBackend = None  # type: ignore[assignment,misc]


if CoinCurveECCBackend is not None:

    class KeptKeyBackend(CoinCurveECCBackend):
        """eth-keys' coincurve backend holding one key's libsecp256k1 object."""

        def __init__(self, raw: bytes) -> None:
            super().__init__()
            self.raw = raw
            self.kept = self.keys.PrivateKey(raw)

        def ecdsa_sign(self, msg_hash: bytes, private_key: PrivateKey) -> Signature:
            if private_key.to_bytes() != self.raw:  # another key: signed as eth-keys signs it
                return super().ecdsa_sign(msg_hash, private_key)
            return Signature(self.kept.sign_recoverable(msg_hash, hasher=None), backend=self)


def _backend(raw: bytes) -> Any:
    """A backend keeping ``raw``'s key object; None (eth-keys' default) without coincurve."""
    return None if CoinCurveECCBackend is None else KeptKeyBackend(raw)


@lru_cache(maxsize=64)
def signing_key(raw: bytes) -> PrivateKey:
    """``raw``'s key object for eth-account and eth-keys, made once: it signs with a libsecp256k1 key kept between
    signatures."""
    return PrivateKey(raw, backend=_backend(raw))
