"""Signing keys made once per key, for transactions and endorsements alike.

Why: eth-keys' coincurve backend builds a libsecp256k1 key object for every signature it makes, and building one
derives the public key (twice: coincurve 21 derives the x-only key too): 56 of the 94 us a signature took, measured
here. A party signs two transactions and endorses two others' histograms at every level, so the key object is kept,
per key, in a backend of its own. Signatures are the same bytes: libsecp256k1 signs with RFC 6979 nonces.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from eth_keys.datatypes import PrivateKey, Signature

try:
    from eth_keys.backends.coincurve import CoinCurveECCBackend
except ImportError:  # pragma: no cover - eth-account depends on coincurve; other backends sign as they do
    CoinCurveECCBackend = None  # type: ignore[assignment,misc]


def _backend() -> Any:
    """eth-keys' coincurve backend with its key objects kept (None, the default backend, without coincurve)."""
    if CoinCurveECCBackend is None:  # pragma: no cover
        return None

    class KeptKeyBackend(CoinCurveECCBackend):
        def __init__(self) -> None:
            super().__init__()
            self._kept: dict[bytes, Any] = {}

        def ecdsa_sign(self, msg_hash: bytes, private_key: PrivateKey) -> Signature:
            raw = private_key.to_bytes()
            key = self._kept.get(raw)
            if key is None:
                key = self._kept[raw] = self.keys.PrivateKey(raw)
            return Signature(key.sign_recoverable(msg_hash, hasher=None), backend=self)

    return KeptKeyBackend()


_BACKEND = _backend()


@lru_cache(maxsize=64)
def signing_key(raw: bytes) -> PrivateKey:
    """``raw``'s key object for eth-account and eth-keys, made once: it signs with a libsecp256k1 key kept between
    signatures."""
    return PrivateKey(raw, backend=_BACKEND)
