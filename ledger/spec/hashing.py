"""keccak256 of bytes at the C library's cost, for the hot paths that hash thousands of small blocks per level.

Why not ``eth_utils.keccak``: it accepts text, hex and integers, and its argument checks cost more than the hash
itself (4.7 us for 64 bytes, against 0.8 us for safe-pysha3's ``keccak_256`` called directly, measured here). A
verifier hashes every node of every histogram it endorses, and every Merkle layer above them; a relayer hashes the
requests it relays. The same digests: ``tests/ledger/spec/test_hashing.py`` checks them against ``eth_utils.keccak``.
"""

from __future__ import annotations

from collections.abc import Callable

try:
    from sha3 import keccak_256

    def _keccak(data: bytes) -> bytes:
        return keccak_256(data).digest()

except ImportError:  # pragma: no cover - safe-pysha3 is a dependency; eth-hash's own backend gives the same digest
    from eth_hash.auto import keccak as _eth_hash

    def _keccak(data: bytes) -> bytes:
        return _eth_hash(data)


keccak256: Callable[[bytes], bytes] = _keccak
"""keccak256 of ``data`` (bytes only), 32 bytes."""
