"""Revert bytes read from each node's error shape, and decoded to the contract's custom error.

A party retries a step on a revert it knows (``WrongPhase``: another party closed the phase first), so a node whose
revert data is not read makes the party stop where another node's would make it wait: the shapes below are the ones
web3 hands over for anvil, Hardhat and geth (``{"data": "0x..."}``) and for ganache 7 (``{"result": "0x...",
"programCounter": ..}``).
"""

from __future__ import annotations

from eth_abi import encode
from eth_utils import keccak
from web3.exceptions import ContractLogicError

from fgbdt_chain.ledger.rpc.errors import ErrorDecoder, revert_data_of

ABI = [{"type": "error", "name": "WrongPhase", "inputs": [{"type": "uint256"}, {"type": "uint8"}]}]
DATA = keccak(text="WrongPhase(uint256,uint8)")[:4] + encode(["uint256", "uint8"], [7, 1])


def test_anvil_shape_is_read() -> None:
    exc = ContractLogicError("execution reverted", data="0x" + DATA.hex())
    assert revert_data_of(exc) == DATA


def test_ganache_shape_is_read_and_decoded() -> None:
    shape = {"hash": None, "programCounter": 4869, "result": "0x" + DATA.hex(), "reason": None, "message": "revert"}
    exc = ContractLogicError("execution reverted: VM Exception while processing transaction: revert", data=shape)
    assert revert_data_of(exc) == DATA
    revert = ErrorDecoder([ABI]).decode(revert_data_of(exc), "resolveNodes")
    assert (revert.name, revert.args_) == ("WrongPhase", (7, 1))


def test_no_revert_data_is_none() -> None:
    assert revert_data_of(ContractLogicError("execution reverted", data={"message": "revert"})) is None
    assert revert_data_of(ValueError("insufficient funds")) is None
