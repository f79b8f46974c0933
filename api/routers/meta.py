"""``/health``, ``/signing``, ``/nonces``: the chain the API talks to and what a client needs to sign a request."""

from __future__ import annotations

from fastapi import APIRouter

from fgbdt_chain.api import models as m
from fgbdt_chain.api.dependencies import BackendDep
from fgbdt_chain.api.params import PartyPath
from fgbdt_chain.api.responses import R503
from fgbdt_chain.ledger.wrappers.forwarder import FORWARD_REQUEST_TYPES, domain

router = APIRouter(tags=["meta"])


@router.get("/health", response_model=m.HealthResponse, responses=R503)
def health(backend: BackendDep) -> m.HealthResponse:
    """The chain id, latest block, contract and forwarder addresses, and the relayer's balance."""
    client = backend.client()
    relayer = backend.relayer.address if backend.relayer else None
    return m.HealthResponse(
        chain_id=client.chain_id,
        block=client.block_number,
        contract=backend.task().address,
        forwarder=backend.forwarder().address,
        relayer=relayer,
        relayer_balance_wei=client.balance(relayer) if relayer else None,
    )


@router.get("/signing", response_model=m.SigningInfo, responses=R503)
def signing(backend: BackendDep) -> m.SigningInfo:
    """EIP-712 domain and types of the `ForwardRequest` every state-changing request must sign."""
    client = backend.client()
    fw = backend.forwarder()
    return m.SigningInfo(
        chain_id=client.chain_id,
        forwarder=fw.address,
        contract=backend.task().address,
        relayer=backend.relayer.address if backend.relayer else None,
        domain=domain(client.chain_id, fw.address),
        types=FORWARD_REQUEST_TYPES,
        primary_type="ForwardRequest",
    )


@router.get("/nonces/{address}", response_model=m.NonceResponse, responses=R503)
def nonce(address: PartyPath, backend: BackendDep) -> m.NonceResponse:
    """The forwarder nonce the next signed request of `address` must carry."""
    return m.NonceResponse(address=address, nonce=backend.forwarder().nonce(address))
