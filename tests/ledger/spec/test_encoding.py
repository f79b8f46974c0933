"""Merkle commitments of a level's histograms: every proof, built from the tree's layers once, leads from its leaf to
the root the contract stores, for any number of open nodes (padding included), and a resolution's proofs are each
submitter's proof of that node."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.spec.encoding import (
    ENDORSEMENT_TAG,
    endorsement_digest,
    layers_proof,
    merkle_layers,
    merkle_proof,
    merkle_root,
    node_hash,
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


def test_the_endorsement_digest_is_abi_encode_of_its_words() -> None:
    """The digest packs its static words directly; ``abi.encode`` (eth-abi here, the contract's library in
    ``tests/contracts/test_client.py``) gives the same bytes, over random values up to each type's limit."""
    rng = random.Random(7)
    types = ["bytes32", "uint256", "address", "uint256", "uint256", "uint256", "address", "bytes32"] + ["uint256"] * 3
    for _ in range(100):
        credit = Credit(*(rng.randrange(MAX_CREDIT + 1) for _ in range(3)))
        chain_id, task_id, tree, level = rng.randrange(1 << 64), rng.randrange(1 << 256), rng.randrange(999), 5
        contract, party = (to_checksum_address(rng.randbytes(20)) for _ in range(2))
        root = rng.randbytes(32)
        values = [ENDORSEMENT_TAG, chain_id, contract, task_id, tree, level, party, root, credit.g, credit.h, credit.n]
        assert endorsement_digest(chain_id, contract, task_id, tree, level, party, root, credit) == keccak(
            abi_encode(types, values)
        )
    with pytest.raises(ValueError, match="32 bytes"):
        endorsement_digest(1, "0x" + "ab" * 20, 1, 0, 0, "0x" + "cd" * 20, b"\x01" * 31)
    with pytest.raises(ValueError, match="not an address"):
        endorsement_digest(1, "0x" + "ab" * 19, 1, 0, 0, "0x" + "cd" * 20, b"\x01" * 32)
    with pytest.raises(ValueError, match="uint256"):
        endorsement_digest(1, "0x" + "ab" * 20, -1, 0, 0, "0x" + "cd" * 20, b"\x01" * 32)
