// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTEndorseLib} from "../FGBDTEndorse.sol";

/// @title EndorseDigestHarness
/// @notice Test-only: exposes `FGBDTEndorseLib.digest` as `FGBDTChain` computes it (by DELEGATECALL, so the digest
///         binds this contract's address), for the bit-for-bit check against `ledger/spec/encoding.py`. `FGBDTChain` has
///         no view of its own for the digest: its bytecode is at EIP-170's limit, and endorsers compute the digest
///         off chain.
contract EndorseDigestHarness {
    /// @notice `FGBDTEndorseLib.digest` with this contract as the task contract.
    function digest(
        uint256 taskId,
        uint256 tree,
        uint256 level,
        address party,
        bytes32 root,
        uint256[3] memory credit
    ) external view returns (bytes32) {
        return FGBDTEndorseLib.digest(taskId, tree, level, party, root, credit);
    }
}
