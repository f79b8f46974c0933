"""Signing keys kept between signatures (``ledger.signing_keys``): the same signatures as eth-keys' own keys make,
transactions and endorsements alike, from one libsecp256k1 key object per key."""

from __future__ import annotations

import os

from eth_account import Account
from eth_keys.datatypes import PrivateKey

from fgbdt_chain.ledger import signing_keys
from fgbdt_chain.ledger.encoding import recover_signer, sign_endorsement
from fgbdt_chain.ledger.signing_keys import signing_key


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


def test_a_transaction_and_an_endorsement_signed_with_a_kept_key_verify() -> None:
    acct = Account.create()
    tx = {"to": acct.address, "value": 1, "gas": 21_000, "gasPrice": 1, "nonce": 0, "chainId": 31337}
    kept = Account.sign_transaction(tx, signing_key(bytes(acct.key)))
    assert kept.raw_transaction == Account.sign_transaction(tx, acct.key).raw_transaction
    assert Account.recover_transaction(kept.raw_transaction) == acct.address
    digest = os.urandom(32)
    assert recover_signer(digest, sign_endorsement(bytes(acct.key), digest)) == acct.address
