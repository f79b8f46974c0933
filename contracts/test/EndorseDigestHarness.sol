// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {FGBDTEndorseLib} from "../FGBDTEndorse.sol";

/// @title EndorseDigestHarness
/// @notice Test-only: the endorsement digest as `FGBDTChain` computes it (`FGBDTEndorseLib.digest` by DELEGATECALL
///         under the same EIP-712 domain, with this contract as verifying contract), for the bit-for-bit check
///         against `ledger/spec/encoding.py`. `FGBDTChain` has no view of its own for the digest: endorsers compute
///         it off chain, and its bytecode stays under EIP-170's limit.
contract EndorseDigestHarness is EIP712 {
    constructor() EIP712(FGBDTEndorseLib.DOMAIN_NAME, FGBDTEndorseLib.DOMAIN_VERSION) {}

    /// @notice `FGBDTEndorseLib.digest` under this contract's domain.
    /// @param taskId The task.
    /// @param tree The tree of the step.
    /// @param level The level of the step.
    /// @param party The endorsed party.
    /// @param root The party's histogram commitment.
    /// @param credit The attested credit multipliers (g, h, n).
    /// @return The EIP-712 digest an endorser signs.
    function digest(
        uint256 taskId,
        uint256 tree,
        uint256 level,
        address party,
        bytes32 root,
        uint256[3] memory credit
    ) external view returns (bytes32) {
        return FGBDTEndorseLib.digest(_domainSeparatorV4(), taskId, tree, level, party, root, credit);
    }
}
