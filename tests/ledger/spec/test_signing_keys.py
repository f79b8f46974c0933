"""Signing keys kept between signatures (``ledger.spec.signing_keys``): the same signatures as eth-keys' own keys make,
transactions and endorsements alike, from one libsecp256k1 key object per key."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from eth_account import Account
from eth_keys.datatypes import PrivateKey

from fgbdt_chain.ledger.spec import signing_keys
from fgbdt_chain.ledger.spec.encoding import recover_signer, sign_endorsement
from fgbdt_chain.ledger.spec.signing_keys import signing_key


def test_kept_keys_sign_the_same_bytes_as_eth_keys_and_are_made_once() -> None:
    raw = os.urandom(32)
    kept, plain = signing_key(raw), PrivateKey(raw)
    assert signing_key(raw) is kept
    for _ in range(5):
        digest = os.urandom(32)
        assert kept.sign_msg_hash(digest).to_bytes() == plain.sign_msg_hash(digest).to_bytes()
    backend = kept.backend
    if signing_keys.CoinCurveECCBackend is not None:
        assert isinstance(backend, signing_keys.CoinCurveECCBackend)
        assert backend.raw == raw  # one libsecp256k1 key object, for every signature of this key
        other = os.urandom(32)
        assert signing_key(other).backend is not backend
        digest = os.urandom(32)  # a key object of another key still signs as its own
        plain_other = PrivateKey(other)
        assert backend.ecdsa_sign(digest, plain_other).to_bytes() == plain_other.sign_msg_hash(digest).to_bytes()


def test_a_transaction_and_an_endorsement_signed_with_a_kept_key_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sign with the kept libsecp256k1 object (a spy counts its signatures), and verify as eth-account's own."""
    acct = Account.create()
    key = signing_key(bytes(acct.key))
    calls: list[bytes] = []
    if signing_keys.CoinCurveECCBackend is not None:
        sign = key.backend.kept.sign_recoverable
        monkeypatch.setattr(
            key.backend, "kept", SimpleNamespace(sign_recoverable=lambda h, hasher: calls.append(h) or sign(h, hasher))
        )
    tx = {"to": acct.address, "value": 1, "gas": 21_000, "gasPrice": 1, "nonce": 0, "chainId": 31337}
    kept = Account.sign_transaction(tx, key)
    assert kept.raw_transaction == Account.sign_transaction(tx, acct.key).raw_transaction
    assert Account.recover_transaction(kept.raw_transaction) == acct.address
    digest = os.urandom(32)
    assert recover_signer(digest, sign_endorsement(bytes(acct.key), digest)) == acct.address
    if signing_keys.CoinCurveECCBackend is not None:
        assert len(calls) == 2  # the transaction's signature and the endorsement's, both by the kept object
