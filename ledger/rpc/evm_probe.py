"""Which EVM version a chain runs, found by executing a few bytes of init code with ``eth_call``.

Why probe: a node does not say which hardfork it runs (``web3_clientVersion`` names the software, not its
configuration: a Besu or geth network runs the fork its genesis file names), and bytecode compiled for a newer EVM
than the chain's fails at its first new opcode, deep inside a transaction, or even at deployment with an unhelpful
"invalid opcode". Each probe is init code that uses one opcode of a fork and returns nothing; a chain that runs it
answers ``0x``, one that does not answers with an error. ``fgbdt deploy`` deploys the newest version the package
ships bytecode for (``ledger.toolchain.compile.EVM_VERSIONS``) that the chain runs, and refuses a chain older than
all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from web3.types import RPCEndpoint

from fgbdt_chain.ledger.rpc.errors import ChainRefused, reason_of


@dataclass(frozen=True)
class Probe:
    """Init code that needs ``evm_version``'s ``opcode``."""

    evm_version: str
    opcode: str
    init_code: str


PROBES: tuple[Probe, ...] = (
    # PUSH1 0 (x3), MCOPY, PUSH1 0, PUSH1 0, RETURN: copies nothing, returns nothing
    Probe("cancun", "MCOPY (EIP-5656)", "0x6000600060005e60006000f3"),
    # PUSH0, PUSH0, RETURN
    Probe("shanghai", "PUSH0 (EIP-3855)", "0x5f5ff3"),
)
"""Newest first; each fork's probe also needs the older forks' opcodes only where those are in this list."""

UNSUPPORTED_PHRASES = ("opcode", "invalid", "not activated", "not defined", "undefined instruction", "unknown op")
"""How nodes report an opcode their fork lacks (geth "invalid opcode: MCOPY", ganache "VM Exception while processing
transaction: invalid opcode", anvil "NotActivated", Besu "INVALID_OPERATION", py-evm "Invalid opcode 0x5e")."""


def _call(provider: Any, init_code: str) -> tuple[bool, str]:
    """(ran, the node's reason when it did not) for ``eth_call`` of ``init_code`` as a contract creation."""
    try:
        answer = provider.make_request(RPCEndpoint("eth_call"), [{"data": init_code}, "latest"])
    except Exception as exc:  # an in-process provider raises what a node answers
        return False, reason_of(exc)
    error = answer.get("error")
    return (True, "") if error is None else (False, reason_of(error))


def runs(provider: Any, probe: Probe) -> bool:
    """Whether the chain behind ``provider`` executes ``probe``'s opcode; :class:`ChainRefused` when the answer is
    another error than an unknown opcode (the node refused the call itself: nothing is learnt)."""
    ran, reason = _call(provider, probe.init_code)
    if ran:
        return True
    if any(phrase in reason.lower() for phrase in UNSUPPORTED_PHRASES):
        return False
    raise ChainRefused(f"probing for {probe.opcode} with eth_call", reason)


def supported_versions(provider: Any) -> list[str]:
    """The EVM versions of ``PROBES`` whose opcodes the chain runs, newest first."""
    return [probe.evm_version for probe in PROBES if runs(provider, probe)]


def newest(ran: list[str], shipped: tuple[str, ...]) -> str | None:
    """The newest of ``shipped`` (newest first) a chain that runs the probed versions ``ran`` runs, or None when it
    runs none of them. A version with no probe here is older than every probed one (``PROBES`` must name each newer
    one): any chain runs it."""
    probed = {probe.evm_version for probe in PROBES}
    for version in shipped:
        if version in ran or version not in probed:
            return version
    return None


def requirement(version: str) -> str:
    """What a chain needs to run bytecode of ``version``, for messages."""
    for probe in PROBES:
        if probe.evm_version == version:
            return f"{probe.opcode}, from {version.capitalize()} on"
    return version
