"""Endorsements as ``submitHistograms`` checks them: who signed, under the contract's signature rules, and the credit.

Why the audit recovers signers itself: signatures are not in the events, only in the transactions' calldata, and the
contract's ``_checkEndorsements`` is the one check of the protocol whose inputs the events do not repeat. The digest
signed is the specification's (``ledger.spec.encoding.endorsement_digest``), imported by the caller, never copied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from typing import Any

from fgbdt_chain.ledger.audit.record import SubmitCall
from fgbdt_chain.ledger.audit.report import Mismatch
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.encoding import SECP256K1_HALF_N, endorsement_signer

__all__ = ["SECP256K1_HALF_N", "check_endorsements", "least_credit", "recover_endorser"]


def recover_endorser(digest: bytes, signature: bytes) -> str | None:
    """The signer of an EIP-712 signature over the endorsement ``digest`` under the contract's rules (OpenZeppelin's
    ``ECDSA``: 65 bytes, v 27 or 28, low s, recoverable), or None where ``submitHistograms`` would revert with
    ``InvalidSignature`` (``ledger.spec.encoding.endorsement_signer``)."""
    return endorsement_signer(digest, signature)


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
