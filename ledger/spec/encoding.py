"""Wire encodings shared by the parties, the resolvers and the contract.

Why a module of its own: the contract checks histograms against commitments by hashing exact byte layouts, so the
layout, the node hash, the Merkle tree and the endorsement digest must be computed identically everywhere. This is the
single Python definition of them; ``FGBDTChain.sol`` is the Solidity one.

Layout of one party's histograms of one node (``nbins = bins + 1``): ``g[2*nbins] | h[2*nbins] | n[2*nbins]``, the
candidate of rank ``k`` at slots ``k*nbins .. (k+1)*nbins - 1``. The node hash is keccak256 of those ``6*nbins``
int256 words, big-endian two's complement. A party's level commitment is the Merkle root of its node hashes in
increasing node id, padded with zero leaves to a power of two, inner nodes ``keccak256(left || right)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

import ecdsa
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_utils import keccak

from fgbdt_chain.ledger.spec.hashing import keccak256
from fgbdt_chain.ledger.spec.reference import NEUTRAL, Credit, NodeHistograms
from fgbdt_chain.ledger.spec.signing_keys import signing_key

ENDORSEMENT_TAG: bytes = keccak(text="FGBDTChain.Endorsement.v2")


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
    """The digest endorsers sign (``FGBDTEndorseLib.digest`` in the contract), before the EIP-191 prefix: it binds the
    credit multipliers the endorser attests, so a party cannot submit a signature with a better credit.

    ``abi.encode`` of static values is one 32-byte word each (numbers big-endian, addresses left-padded), packed here
    directly: eth-abi's encoder took 57 us of it, and a verifier signs three requests a level. Stricter than eth-abi:
    the root must be 32 bytes (eth-abi pads a shorter one) and the addresses hex strings."""
    if len(root) != 32:
        raise ValueError(f"root must be 32 bytes, not {len(root)}")
    numbers = (chain_id, task_id, tree, level, credit.g, credit.h, credit.n)
    if any(not 0 <= v < 1 << 256 for v in numbers):
        raise ValueError(f"a digest's numbers are uint256: {numbers}")
    return keccak256(
        ENDORSEMENT_TAG
        + chain_id.to_bytes(32, "big")
        + address_word(contract)
        + b"".join(v.to_bytes(32, "big") for v in (task_id, tree, level))
        + address_word(party)
        + bytes(root)
        + b"".join(v.to_bytes(32, "big") for v in (credit.g, credit.h, credit.n))
    )


def address_word(address: str) -> bytes:
    """An address as ``abi.encode`` lays it out: 12 zero bytes, then its 20 bytes."""
    raw = bytes.fromhex(address.removeprefix("0x"))
    if len(raw) != 20:
        raise ValueError(f"not an address: {address}")
    return bytes(12) + raw


def sign_endorsement(private_key: bytes | str, digest: bytes) -> bytes:
    """A 65-byte ``r || s || v`` signature of ``digest`` under the EIP-191 prefix, as ``submitHistograms`` verifies
    (:func:`sign_hash` of the prefixed digest)."""
    return sign_hash(private_key, keccak256(b"\x19Ethereum Signed Message:\n32" + digest))


def sign_hash(private_key: bytes | str, msg_hash: bytes) -> bytes:
    """A 65-byte ``r || s || v`` signature of the 32-byte ``msg_hash`` itself, as ``ecrecover`` (and OpenZeppelin's
    ``ECDSA.recover``) verifies it: endorsements (EIP-191) and relayed requests (EIP-712) alike.

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
    """The address ``ecrecover`` would return for an EIP-191 signature of ``digest``."""
    return str(Account.recover_message(encode_defunct(primitive=digest), signature=signature))


def recover_hash_signer(msg_hash: bytes, signature: bytes) -> str:
    """The address ``ecrecover`` would return for a signature of the 32-byte ``msg_hash`` itself (:func:`sign_hash`)."""
    return str(Account._recover_hash(msg_hash, signature=signature))


def encode_vote(vote: int) -> int:
    """Votes travel as int256 with -1 = abstain; kept as a function so callers never hand-roll it."""
    if vote < -1:
        raise ValueError(f"invalid vote {vote}")
    return vote
