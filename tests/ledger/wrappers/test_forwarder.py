"""EIP-712 requests for the ERC-2771 forwarder, packed by hand (``ledger.wrappers.forwarder.request_digest``): the same
digest
and signature as eth-account's generic typed-data encoder, which the forwarder's own ``verify`` accepts (checked on
the EVM in ``tests/contracts/test_ahead_votes.py`` and the API's tests)."""

from __future__ import annotations

import random

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak

from fgbdt_chain.ledger.wrappers.forwarder import (
    MAX_DEADLINE,
    REQUEST_OVERHEAD_GAS,
    ForwardRequest,
    batch_gas,
    recover_signer,
    request_digest,
    sign_request,
    typed_data,
    vote_request_gas,
)

FORWARDER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def _random_request(rng: random.Random, sender: str) -> ForwardRequest:
    return ForwardRequest(
        sender=sender,
        to="0x" + rng.randbytes(20).hex(),
        value=rng.choice([0, rng.getrandbits(256)]),
        gas=rng.getrandbits(rng.choice([16, 64, 256])),
        nonce=rng.getrandbits(rng.choice([8, 256])),
        deadline=rng.choice([0, rng.getrandbits(48), MAX_DEADLINE]),
        data=rng.randbytes(rng.choice([0, 4, 68, 1000])),
    )


def test_the_digest_and_signature_are_eth_accounts() -> None:
    rng = random.Random(5)
    for i in range(60):
        account = Account.from_key(rng.randbytes(32))
        req = _random_request(rng, account.address)
        chain_id = rng.choice([1, 31337, rng.getrandbits(64)])
        forwarder = FORWARDER if i % 2 else FORWARDER.lower()
        message = encode_typed_data(full_message=typed_data(req, chain_id, forwarder))
        assert request_digest(req, chain_id, forwarder) == keccak(
            b"\x19" + message.version + message.header + message.body
        )
        expected = bytes(Account.sign_message(message, account.key).signature)
        assert sign_request(account.key, req, chain_id, forwarder) == expected
        assert recover_signer(req, expected, chain_id, forwarder) == account.address


def test_a_changed_field_or_domain_changes_the_signer() -> None:
    rng = random.Random(6)
    account = Account.from_key(rng.randbytes(32))
    req = _random_request(rng, account.address)
    sig = sign_request(account.key, req, 31337, FORWARDER)
    for other in (
        ForwardRequest(req.sender, req.to, req.value, req.gas + 1, req.nonce, req.deadline, req.data),
        ForwardRequest(req.sender, req.to, req.value, req.gas, req.nonce + 1, req.deadline, req.data),
        ForwardRequest(req.sender, req.to, req.value, req.gas, req.nonce, req.deadline, req.data + b"\x00"),
    ):
        assert recover_signer(other, sig, 31337, FORWARDER) != account.address
    assert recover_signer(req, sig, 31338, FORWARDER) != account.address
    assert recover_signer(req, sig, 31337, "0x" + "11" * 20) != account.address


def test_malformed_requests_and_signatures_are_refused() -> None:
    account = Account.from_key(b"\x01" * 32)
    late = ForwardRequest(account.address, FORWARDER, 0, 1, 0, MAX_DEADLINE + 1, b"")
    with pytest.raises(ValueError, match="uint48"):
        sign_request(account.key, late, 1, FORWARDER)
    ok = ForwardRequest(account.address, FORWARDER, 0, 1, 0, 5, b"")
    with pytest.raises(ValueError, match="65 bytes"):
        recover_signer(ok, b"\x00" * 64, 1, FORWARDER)


def test_a_batch_limit_grants_every_request_its_gas() -> None:
    reqs = [
        ForwardRequest(FORWARDER, FORWARDER, 0, vote_request_gas(n), 0, 1, b"\x00" * (100 + 32 * n))
        for n in (1, 8, 128)
    ]
    limit = batch_gas(reqs)
    # EIP-150: a call gets at most 63/64 of what is left, and the forwarder keeps 1/63 of the request's gas after it
    assert limit >= sum(r.gas * 64 // 63 + REQUEST_OVERHEAD_GAS for r in reqs) + 21_000
    assert vote_request_gas(128) < vote_request_gas(129) and vote_request_gas(128) < 1_000_000


def test_batches_keep_the_order_and_fit_a_transaction_and_a_block() -> None:
    from fgbdt_chain.ledger.spec.tx_size import BLOCK_GAS_LIMIT, CALLDATA_LIMIT
    from fgbdt_chain.ledger.wrappers.forwarder import pack_batches, request_bytes

    rng = random.Random(8)
    reqs = [
        (
            ForwardRequest(
                FORWARDER,
                FORWARDER,
                0,
                rng.choice([10**5, 4 * 10**6, 9 * 10**6]),
                i,
                1,
                bytes(rng.choice([100, 30_000, 48_000])),
            ),
            b"\x00" * 65,
        )
        for i in range(40)
    ]
    batches = pack_batches(reqs)
    assert [r for b in batches for r in b] == reqs  # in order, each once
    for b in batches:
        assert 4 + 96 + sum(request_bytes(r) for r, _ in b) <= CALLDATA_LIMIT
        assert batch_gas([r for r, _ in b]) <= BLOCK_GAS_LIMIT
    assert len(batches) < len(reqs)  # and packed: small requests share a batch
    # a request too large for any batch goes alone
    huge = (ForwardRequest(FORWARDER, FORWARDER, 0, 1, 0, 1, bytes(CALLDATA_LIMIT)), b"\x00" * 65)
    assert pack_batches([reqs[0], huge, reqs[1]]) == [[reqs[0]], [huge], [reqs[1]]]
