"""Merkle commitments of a level's histograms: every proof, built from the tree's layers once, leads from its leaf to
the root the contract stores, for any number of open nodes (padding included), and a resolution's proofs are each
submitter's proof of that node."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.spec.encoding import (
    SECP256K1_ORDER,
    endorsement_digest,
    endorsement_signer,
    endorsement_typed_data,
    layers_proof,
    merkle_layers,
    merkle_proof,
    merkle_root,
    node_hash,
    personal_hash,
    recover_hash_signer,
    sign_endorsement,
    sign_hash,
)
from fgbdt_chain.ledger.spec.reference import MAX_CREDIT, Credit, NodeHistograms
from fgbdt_chain.ledger.wrappers.contracts import resolution_calldata


def _climb(leaf: bytes, index: int, proof: list[bytes]) -> bytes:
    """What ``FGBDTCommitLib.verifyAndAggregate`` computes from a leaf and its proof."""
    for sibling in proof:
        leaf = keccak(sibling + leaf) if index & 1 else keccak(leaf + sibling)
        index >>= 1
    return leaf


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13, 17, 32])
def test_every_proof_climbs_to_the_root(count: int) -> None:
    leaves = [keccak(bytes([i, count])) for i in range(count)]
    root, layers = merkle_root(leaves), merkle_layers(leaves)
    for i, leaf in enumerate(leaves):
        proof = layers_proof(layers, i)
        assert proof == merkle_proof(leaves, i)
        assert len(proof) == (count - 1).bit_length()
        assert _climb(leaf, i, proof) == root


def test_a_resolutions_proofs_are_each_submitters_proofs_of_its_nodes() -> None:
    rng = random.Random(3)

    def hist() -> NodeHistograms:
        def rows() -> tuple[tuple[int, ...], tuple[int, ...]]:
            return tuple(rng.randrange(-9, 9) for _ in range(3)), tuple(rng.randrange(-9, 9) for _ in range(3))

        return NodeHistograms((0, 1), rows(), rows(), rows())

    open_nodes = [8, 9, 10, 12, 13]
    level = [[hist() for _ in open_nodes] for _ in range(3)]
    nodes = [13, 9]
    _, _, _, proofs = resolution_calldata(nodes, open_nodes, level)
    depth = (len(open_nodes) - 1).bit_length()
    assert len(proofs) == len(nodes) * len(level) * depth
    for k, node in enumerate(nodes):
        idx = open_nodes.index(node)
        for p, party in enumerate(level):
            proof = proofs[(k * len(level) + p) * depth : (k * len(level) + p + 1) * depth]
            root = merkle_root([node_hash(h) for h in party])
            assert _climb(node_hash(party[idx]), idx, proof) == root


_BACKEND = (
    "import fgbdt_chain, eth_hash.auto as a; from eth_utils import keccak; "
    "print(keccak(b'abc').hex(), type(a.keccak.hasher.__self__).__module__)"
)


@pytest.mark.parametrize(
    ("chosen", "backend"), [(None, "eth_hash.backends.pysha3"), ("pycryptodome", "eth_hash.backends.pycryptodome")]
)
def test_keccak_takes_the_fast_backend_unless_the_environment_chose(chosen: str | None, backend: str) -> None:
    """Importing the package makes eth-hash hash with safe-pysha3 (``fgbdt_chain/__init__.py``), the same digests as
    pycryptodome's, without setting a variable its subprocesses would inherit; a backend the environment names
    stands."""
    env = {k: v for k, v in os.environ.items() if k != "ETH_HASH_BACKEND"}
    if chosen is not None:
        env["ETH_HASH_BACKEND"] = chosen
    out = subprocess.run([sys.executable, "-c", _BACKEND], env=env, capture_output=True, text=True, check=True).stdout
    digest, module = out.split()
    assert digest == "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"  # keccak256("abc")
    assert module == backend
    child = "import os; print(os.environ.get('ETH_HASH_BACKEND'))"
    parent = f"import fgbdt_chain, subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    inherited = subprocess.run(
        [sys.executable, "-c", parent],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert inherited == str(chosen)  # nothing set for the processes it starts


def test_the_endorsement_digest_is_eth_accounts_typed_data_hash() -> None:
    """The digest packs its static words by hand; eth-account's EIP-712 encoder of the typed data (what a wallet shows
    and signs) gives the same hash, over random values up to each type's limit, and the same signature; the contract's
    library gives it too (``tests/contracts/test_client.py``)."""
    rng = random.Random(7)
    for i in range(60):
        credit = Credit(*(rng.randrange(MAX_CREDIT + 1) for _ in range(3)))
        chain_id, task_id, tree, level = rng.randrange(1 << 64), rng.randrange(1 << 256), rng.randrange(999), 5
        contract, party = (to_checksum_address(rng.randbytes(20)) for _ in range(2))
        contract = contract if i % 2 else contract.lower()
        root = rng.randbytes(32)
        args = (chain_id, contract, task_id, tree, level, party, root, credit)
        message = encode_typed_data(full_message=endorsement_typed_data(*args))
        digest = endorsement_digest(*args)
        assert digest == keccak(b"\x19" + message.version + message.header + message.body)
        account = Account.from_key(rng.randbytes(32))
        signature = sign_endorsement(account.key, digest)
        assert signature == bytes(Account.sign_message(message, account.key).signature)
        assert endorsement_signer(digest, signature) == account.address
    with pytest.raises(ValueError, match="32 bytes"):
        endorsement_digest(1, "0x" + "ab" * 20, 1, 0, 0, "0x" + "cd" * 20, b"\x01" * 31)
    with pytest.raises(ValueError, match="not an address"):
        endorsement_digest(1, "0x" + "ab" * 19, 1, 0, 0, "0x" + "cd" * 20, b"\x01" * 32)
    with pytest.raises(ValueError, match="uint256"):
        endorsement_digest(1, "0x" + "ab" * 20, -1, 0, 0, "0x" + "cd" * 20, b"\x01" * 32)


def test_the_endorsement_signer_follows_openzeppelins_ecdsa() -> None:
    """``endorsement_signer`` refuses what ``ECDSA.tryRecover`` refuses: a length other than 65, v other than 27 or
    28 (0 and 1 included), the high-s twin of a valid signature; a changed field recovers someone else."""
    account = Account.from_key(b"\x02" * 32)
    args = (31337, "0x" + "ab" * 20, 4, 1, 2, "0x" + "cd" * 20, b"\x03" * 32)
    digest = endorsement_digest(*args)
    signature = sign_endorsement(account.key, digest)
    assert endorsement_signer(digest, signature) == account.address
    assert endorsement_signer(digest, signature[:64]) is None
    assert endorsement_signer(digest, signature + b"\x00") is None
    assert endorsement_signer(digest, signature[:64] + bytes([signature[64] - 27])) is None
    s = int.from_bytes(signature[32:64], "big")
    twin = signature[:32] + (SECP256K1_ORDER - s).to_bytes(32, "big") + bytes([55 - signature[64]])
    assert recover_hash_signer(digest, twin) == account.address  # ecrecover alone takes the twin
    assert endorsement_signer(digest, twin) is None
    other = endorsement_digest(*args[:4], 3, *args[5:])
    assert endorsement_signer(other, signature) not in (None, account.address)


def _recovered(recover: object, msg_hash: bytes, signature: bytes) -> str:
    """What a recovery gives: the address, or the kind of error it raises."""
    try:
        return str(recover(msg_hash, signature))  # type: ignore[operator]
    except Exception as exc:
        return type(exc).__name__


def test_the_signer_is_recovered_as_eth_account_recovers_it() -> None:
    """``recover_hash_signer`` (libsecp256k1 straight from the bytes) answers what eth-account's ``_recover_hash``
    answers: the signer of valid signatures and of their high-s twins, the same address or the same error for
    changed v (0, 1, 26, 29, 35), r or s of 0 or at least the group order, random bytes and wrong lengths."""
    rng = random.Random(3)
    account = Account.from_key(b"\x05" * 32)
    oracle = Account._recover_hash

    def slow(msg_hash: bytes, signature: bytes) -> str:
        return str(oracle(msg_hash, signature=signature))

    cases = []
    for _ in range(40):
        msg_hash = rng.randbytes(32)
        signature = sign_hash(account.key, msg_hash)
        r, s = signature[:32], int.from_bytes(signature[32:64], "big")
        twin = r + (SECP256K1_ORDER - s).to_bytes(32, "big") + bytes([55 - signature[64]])
        noise = rng.randbytes(64) + bytes([27 + rng.randrange(2)])
        cases += [(msg_hash, signature), (msg_hash, twin), (msg_hash, noise)]
        cases += [(msg_hash, signature[:64] + bytes([v])) for v in (0, 1, 26, 29, 35)]
    order = SECP256K1_ORDER.to_bytes(32, "big")
    for bad in (b"\x00" * 32 + b"\x01" * 32, b"\x01" * 32 + b"\x00" * 32, order + b"\x01" * 32, b"\x01" * 32 + order):
        cases += [(b"\x07" * 32, bad + b"\x1b"), (b"\x07" * 32, bad + b"\x1c")]
    cases += [(b"\x07" * 32, b"\x01" * 64), (b"\x07" * 32, b"\x01" * 66)]
    answers = [(_recovered(recover_hash_signer, h, sig), _recovered(slow, h, sig)) for h, sig in cases]
    assert all(fast == slow for fast, slow in answers), [a for a in answers if a[0] != a[1]][:3]
    signed = [fast for k, (fast, _) in enumerate(answers[:320]) if k % 8 in (0, 1)]  # each message's first two
    assert signed == [account.address] * 80


def test_a_personal_sign_hash_is_eth_accounts() -> None:
    """``personal_hash`` and ``sign_hash`` make eth-account's ``sign_message(encode_defunct(text))`` bytes."""
    account = Account.from_key(b"\x06" * 32)
    for text in (b"", b"fgbdt-party-request-v1\nPOST\n/endorse", bytes(range(256)) * 5):
        expected = account.sign_message(encode_defunct(text)).signature
        assert sign_hash(account.key, personal_hash(text)) == bytes(expected)
        assert recover_hash_signer(personal_hash(text), bytes(expected)) == account.address
