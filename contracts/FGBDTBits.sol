// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The number of set bits of `x`: the open nodes of a level's mask, the nodes before one in it.
/// @dev Clears the lowest set bit per round (Kernighan), so it costs one round per set bit: a level has at most 128
///      open nodes, and the loop is the smallest code for a contract that must stay under EIP-170's 24 KB.
/// @param x The mask.
/// @return c How many bits of `x` are set.
function popcount(uint256 x) pure returns (uint256 c) {
    unchecked {
        while (x != 0) {
            x &= x - 1;
            ++c;
        }
    }
}
