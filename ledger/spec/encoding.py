"""Wire encodings shared by the parties, the resolvers and the contract.

Why a module of its own: the contract checks histograms against commitments by hashing exact byte layouts, so the
layout, the node hash, the Merkle tree and the endorsement digest must be computed identically everywhere. This is the
single Python definition of them; ``FGBDTChain.sol`` is the Solidity one.

Endorsements are EIP-712 typed data (``Endorsement`` under ``FGBDTChain``'s domain, :data:`ENDORSEMENT_TYPES`), so
that a wallet shows what it signs; :func:`endorsement_digest` packs the same words by hand.

Layout of one party's histograms of one node (``nbins = bins + 1``): ``g[2*nbins] | h[2*nbins] | n[2*nbins]``, the
candidate of rank ``k`` at slots ``k*nbins .. (k+1)*nbins - 1``. The node hash is keccak256 of those ``6*nbins``
int256 words, big-endian two's complement. A party's level commitment is the Merkle root of its node hashes in
increasing node id, padded with zero leaves to a power of two, inner nodes ``keccak256(left || right)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import ecdsa
from eth_account import Account
from eth_keys import keys
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.spec.hashing import keccak256
from fgbdt_chain.ledger.spec.reference import NEUTRAL, Credit, NodeHistograms
from fgbdt_chain.ledger.spec.signing_keys import signing_key

try:
    from coincurve import PublicKey

    _recover_key: Any = PublicKey.from_signature_and_message
except ImportError:  # pragma: no cover - eth-account depends on coincurve
    _recover_key = None

ENDORSEMENT_DOMAIN_NAME: str = "FGBDTChain"
"""The task contract's EIP-712 domain name (``FGBDTEndorseLib.DOMAIN_NAME``)."""
ENDORSEMENT_DOMAIN_VERSION: str = "1"
"""The task contract's EIP-712 domain version (``FGBDTEndorseLib.DOMAIN_VERSION``)."""
ENDORSEMENT_TYPES: dict[str, list[dict[str, str]]] = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "Endorsement": [
        {"name": "taskId", "type": "uint256"},
        {"name": "tree", "type": "uint256"},
        {"name": "level", "type": "uint256"},
        {"name": "party", "type": "address"},
        {"name": "histogramRoot", "type": "bytes32"},
        {"name": "creditG", "type": "uint256"},
        {"name": "creditH", "type": "uint256"},
        {"name": "creditN", "type": "uint256"},
    ],
}
"""The EIP-712 types of an endorsement (``FGBDTEndorseLib.ENDORSEMENT_TYPEHASH``), ``EIP712Domain`` included: the
chain and the task contract are the domain's, the task's step, the endorsed party, its histogram commitment and the
attested credits the message's."""


def _type_hash(name: str) -> bytes:
    fields = ",".join(f"{f['type']} {f['name']}" for f in ENDORSEMENT_TYPES[name])
    return keccak(text=f"{name}({fields})")


ENDORSEMENT_TYPEHASH: bytes = _type_hash("Endorsement")
DOMAIN_TYPEHASH: bytes = _type_hash("EIP712Domain")


def node_block(hist: NodeHistograms) -> list[int]:
    """The ``6 * nbins`` words of one party's histograms of one node, in contract order."""
    if len(hist.features) != 2:
        raise ValueError("the contract expects exactly two candidate features per node")
    out: list[int] = []
    for field in (hist.g, hist.h, hist.n):
        for k in range(2):
            out.extend(field[k])
    return out


def block_histograms(block: Sequence[int], features: tuple[int, int], nbins: int) -> NodeHistograms:
    """Inverse of :func:`node_block`: one node's ``g | h | n`` words as reference histograms."""
    rows = [tuple(block[i * nbins : (i + 1) * nbins]) for i in range(6)]
    return NodeHistograms(features, (rows[0], rows[1]), (rows[2], rows[3]), (rows[4], rows[5]))


def words(values: Sequence[int]) -> bytes:
    """int256 words, big-endian two's complement (``abi.encodePacked`` of an int256 array)."""
    return b"".join(v.to_bytes(32, "big", signed=True) for v in values)


@lru_cache(maxsize=65536)
def node_hash(hist: NodeHistograms) -> bytes:
    """keccak256 of a node block: what a party commits to per node (memoised: a party hashes the same histograms when
    it endorses them, when they are submitted and when it resolves the level)."""
    return keccak256(words(node_block(hist)))


def merkle_layers(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """All layers of the commitment tree, leaves first (padded to a power of two with zero hashes)."""
    if not leaves:
        raise ValueError("no leaves")
    size = 1
    while size < len(leaves):
        size <<= 1
    layer = list(leaves) + [b"\x00" * 32] * (size - len(leaves))
    layers = [layer]
    while len(layer) > 1:
        layer = [keccak256(layer[2 * i] + layer[2 * i + 1]) for i in range(len(layer) // 2)]
        layers.append(layer)
    return layers


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The level commitment over a party's node hashes."""
    return merkle_layers(leaves)[-1][0]


def merkle_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """Sibling hashes from leaf ``index`` up to (not including) the root."""
    return layers_proof(merkle_layers(leaves), index)


def layers_proof(layers: Sequence[Sequence[bytes]], index: int) -> list[bytes]:
    """:func:`merkle_proof` from a tree's :func:`merkle_layers`, built once for every leaf's proof: a level's
    resolution needs each party's proof for each of its nodes, and building the layers per proof made that
    quadratic in the open nodes (8,064 hashes for 32 nodes of 4 parties, where 252 do)."""
    proof = []
    for layer in layers[:-1]:
        proof.append(layer[index ^ 1])
        index >>= 1
    return proof


@lru_cache(maxsize=64)
def endorsement_domain_separator(chain_id: int, contract: str) -> bytes:
    """The task contract's EIP-712 domain separator (OpenZeppelin's ``EIP712._domainSeparatorV4``)."""
    if not 0 <= chain_id < 1 << 256:
        raise ValueError(f"a chain id is a uint256: {chain_id}")
    return keccak256(
        DOMAIN_TYPEHASH
        + keccak(text=ENDORSEMENT_DOMAIN_NAME)
        + keccak(text=ENDORSEMENT_DOMAIN_VERSION)
        + chain_id.to_bytes(32, "big")
        + address_word(contract)
    )


def endorsement_typed_data(
    chain_id: int,
    contract: str,
    task_id: int,
    tree: int,
    level: int,
    party: str,
    root: bytes,
    credit: Credit = NEUTRAL,
) -> dict[str, Any]:
    """The full EIP-712 payload of an endorsement (``eth_signTypedData_v4``: what a wallet shows and signs); its hash is
    :func:`endorsement_digest`."""
    return {
        "types": ENDORSEMENT_TYPES,
        "primaryType": "Endorsement",
        "domain": {
            "name": ENDORSEMENT_DOMAIN_NAME,
            "version": ENDORSEMENT_DOMAIN_VERSION,
            "chainId": chain_id,
            "verifyingContract": to_checksum_address(contract),
        },
        "message": {
            "taskId": task_id,
            "tree": tree,
            "level": level,
            "party": to_checksum_address(party),
            "histogramRoot": bytes(root),
            "creditG": credit.g,
            "creditH": credit.h,
            "creditN": credit.n,
        },
    }


def endorsement_digest(
    chain_id: int,
    contract: str,
    task_id: int,
    tree: int,
    level: int,
    party: str,
    root: bytes,
    credit: Credit = NEUTRAL,
) -> bytes:
    """The EIP-712 digest endorsers sign (``FGBDTEndorseLib.digest`` under the contract's domain): the hash of
    :func:`endorsement_typed_data`, which binds the chain, the contract, the step, the party, its commitment and the
    credit multipliers the endorser attests, so a party cannot submit a signature with a better credit.

    The struct's static fields are one 32-byte word each (numbers big-endian, addresses left-padded), packed here
    directly: eth-account's generic typed-data encoder parses the types and checks every field on each call, and a
    verifier signs three requests a level (checked against it over random values in
    ``tests/ledger/spec/test_encoding.py``). Stricter than the encoder: the root must be 32 bytes and the addresses
    hex strings."""
    if len(root) != 32:
        raise ValueError(f"root must be 32 bytes, not {len(root)}")
    numbers = (chain_id, task_id, tree, level, credit.g, credit.h, credit.n)
    if any(not 0 <= v < 1 << 256 for v in numbers):
        raise ValueError(f"a digest's numbers are uint256: {numbers}")
    struct = keccak256(
        ENDORSEMENT_TYPEHASH
        + b"".join(v.to_bytes(32, "big") for v in (task_id, tree, level))
        + address_word(party)
        + bytes(root)
        + b"".join(v.to_bytes(32, "big") for v in (credit.g, credit.h, credit.n))
    )
    return keccak256(b"\x19\x01" + endorsement_domain_separator(chain_id, contract.lower()) + struct)


def address_word(address: str) -> bytes:
    """An address as ``abi.encode`` lays it out: 12 zero bytes, then its 20 bytes."""
    raw = bytes.fromhex(address.removeprefix("0x"))
    if len(raw) != 20:
        raise ValueError(f"not an address: {address}")
    return bytes(12) + raw


def sign_endorsement(private_key: bytes | str, digest: bytes) -> bytes:
    """A 65-byte ``r || s || v`` EIP-712 signature of an endorsement's :func:`endorsement_digest`, as
    ``submitHistograms`` verifies it (:func:`sign_hash` of the digest itself: the same bytes as eth-account's
    ``sign_typed_data`` of :func:`endorsement_typed_data`)."""
    return sign_hash(private_key, digest)


def sign_hash(private_key: bytes | str, msg_hash: bytes) -> bytes:
    """A 65-byte ``r || s || v`` signature of the 32-byte ``msg_hash`` itself, as ``ecrecover`` (and OpenZeppelin's
    ``ECDSA.recover``) verifies it: endorsements and relayed requests (both EIP-712) alike.

    Signed on secp256k1 with an RFC 6979 deterministic nonce and canonical low ``s``; ``v`` is the recovery id (27 or
    28) that makes ``ecrecover`` return the signer. ``eth_keys`` signs (with coincurve, libsecp256k1: 0.17 ms against
    1.3 ms for the pure-Python ``ecdsa`` package, which also recovered the signer to find ``v``; a verifier signs
    every other party's histograms at every level); the ``ecdsa`` path, which gives the same bytes, remains for a
    high ``s`` (a backend that does not canonise).
    """
    key = (
        bytes.fromhex(private_key[2:] if private_key.startswith("0x") else private_key)
        if isinstance(private_key, str)
        else bytes(private_key)
    )
    fast = signing_key(key).sign_msg_hash(msg_hash)
    if 2 * fast.s < SECP256K1_ORDER:
        return fast.r.to_bytes(32, "big") + fast.s.to_bytes(32, "big") + bytes([27 + fast.v])
    signing = ecdsa.SigningKey.from_string(key, curve=ecdsa.SECP256k1)
    rs = signing.sign_digest_deterministic(
        msg_hash, hashfunc=hashlib.sha256, sigencode=ecdsa.util.sigencode_string_canonize
    )
    address = Account.from_key(key).address
    for v in (27, 28):
        signature = rs + bytes([v])
        if recover_hash_signer(msg_hash, signature) == address:
            return signature
    raise ValueError("no recovery id reproduces the signer")  # cannot happen for a valid key


SECP256K1_ORDER: int = ecdsa.SECP256k1.order


def recover_signer(digest: bytes, signature: bytes) -> str:
    """The address ``ecrecover`` would return for an endorsement's signature of ``digest`` (its EIP-712 hash)."""
    return recover_hash_signer(digest, signature)


SECP256K1_HALF_N: int = SECP256K1_ORDER // 2
"""The largest ``s`` OpenZeppelin's ``ECDSA`` accepts (a high ``s`` is the same signature's malleable twin)."""


def endorsement_signer(digest: bytes, signature: bytes) -> str | None:
    """The signer ``FGBDTEndorseLib.signers`` recovers from a signature of ``digest`` under OpenZeppelin's
    ``ECDSA.tryRecover`` (65 bytes, ``v`` 27 or 28, ``s`` at most n/2, a recoverable point), or None where
    ``submitHistograms`` reverts with ``InvalidSignature``."""
    if len(signature) != 65:
        return None
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    v = signature[64]
    if v not in (27, 28) or s > SECP256K1_HALF_N:
        return None
    try:
        pub = keys.Signature(vrs=(v - 27, r, s)).recover_public_key_from_msg_hash(digest)
    except Exception:  # out-of-range r/s or no curve point: ecrecover returns address(0)
        return None
    return str(pub.to_checksum_address())


def recover_hash_signer(msg_hash: bytes, signature: bytes) -> str:
    """The address ``ecrecover`` would return for a signature of the 32-byte ``msg_hash`` itself (:func:`sign_hash`),
    checksummed; eth-account's error where it refuses the signature.

    A 65-byte signature with ``v`` 27 or 28 is recovered by libsecp256k1 (coincurve) straight from its bytes: 59 us
    against eth-account's 108, which validates and wraps every field first; a verifier recovers the signer of every
    request another party sends it, several a level. Anything else goes through eth-account, which answers (or
    refuses) it as before."""
    if _recover_key is not None and len(signature) == 65 and signature[64] in (27, 28):
        try:
            key = _recover_key(bytes(signature[:64]) + bytes([signature[64] - 27]), msg_hash, hasher=None)
        except Exception:  # r or s out of range, no curve point: eth-account says which
            pass
        else:
            return to_checksum_address(keccak(key.format(compressed=False)[1:])[-20:])
    return str(Account._recover_hash(msg_hash, signature=signature))


def personal_hash(text: bytes) -> bytes:
    """The hash an EIP-191 ``personal_sign`` signature of ``text`` is over (eth-account's ``encode_defunct``)."""
    return keccak(b"\x19Ethereum Signed Message:\n" + str(len(text)).encode() + text)


def encode_vote(vote: int) -> int:
    """Votes travel as int256 with -1 = abstain; kept as a function so callers never hand-roll it."""
    if vote < -1:
        raise ValueError(f"invalid vote {vote}")
    return vote
