"""Endorsements as ``submitHistograms`` checks them: who signed, under the contract's signature rules, and the credit.

Why the audit recovers signers itself: signatures are not in the events, only in the transactions' calldata, and the
contract's ``_checkEndorsements`` is the one check of the protocol whose inputs the events do not repeat. The digest
signed is the specification's (``ledger.spec.encoding.endorsement_digest``), imported by the caller, never copied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from typing import Any

from eth_keys import keys
from eth_utils import keccak

from fgbdt_chain.ledger.audit.record import SubmitCall
from fgbdt_chain.ledger.audit.report import Mismatch
from fgbdt_chain.ledger.spec import reference as ref

SECP256K1_HALF_N: int = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0
"""The contract rejects high-s signatures (malleability); the audit applies the same rule."""


def recover_endorser(digest: bytes, signature: bytes) -> str | None:
    """The signer of an EIP-191 signature over ``digest`` under the contract's rules (65 bytes, v in {0, 1, 27, 28},
    low s, recoverable), or None where ``submitHistograms`` would revert with ``InvalidSignature``."""
    if len(signature) != 65:
        return None
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    v = signature[64]
    if v < 27:
        v += 27
    if v not in (27, 28) or s > SECP256K1_HALF_N:
        return None
    eth_hash = keccak(b"\x19Ethereum Signed Message:\n32" + digest)
    try:
        pub = keys.Signature(vrs=(v - 27, r, s)).recover_public_key_from_msg_hash(eth_hash)
    except Exception:  # out-of-range r/s or no curve point: ecrecover returns address(0)
        return None
    return str(pub.to_checksum_address())


def check_endorsements(
    call: SubmitCall,
    digest: Callable[[ref.Credit], bytes],
    sender: str,
    parties: Set[str],
    quorum: int,
    recorded: int,
    where: dict[str, Any],
) -> Mismatch | None:
    """The contract's ``_checkEndorsements`` on one decoded call: each signature (over ``digest`` of the credit it
    attests) from an approved party other than the sender, no endorser twice, at least ``quorum`` of them, as many
    as the event ``recorded``. The first violation, or None."""
    seen: set[str] = set()
    credits = call.credits or (ref.NEUTRAL,) * len(call.signatures)
    for i, (sig, credit) in enumerate(zip(call.signatures, credits, strict=True)):
        signer = recover_endorser(digest(credit), bytes(sig))
        fld = f"endorsement {i} signer"
        if signer is None:
            return Mismatch(fld, "a valid low-s 65-byte signature", bytes(sig), **where)
        if signer not in parties:
            return Mismatch(fld, "an approved party", signer, **where)
        if signer == sender:
            return Mismatch(fld, "a party other than the sender", signer, **where)
        if signer in seen:
            return Mismatch(fld, "no duplicate endorser", signer, **where)
        seen.add(signer)
    if len(seen) < quorum:
        return Mismatch("endorsements (quorum)", f">= {quorum}", len(seen), **where)
    if recorded != len(seen):
        return Mismatch("HistogramsSubmitted endorsements", len(seen), recorded, **where)
    return None


def least_credit(credits: Sequence[ref.Credit]) -> ref.Credit:
    """The credit the contract applies: the least attested, quantity by quantity (neutral with no endorsement)."""
    if not credits:
        return ref.NEUTRAL
    return ref.Credit(min(c.g for c in credits), min(c.h for c in credits), min(c.n for c in credits))
