// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC2771Forwarder} from "@openzeppelin/contracts/metatx/ERC2771Forwarder.sol";

/// @title FGBDTForwarder
/// @notice OpenZeppelin's ERC-2771 forwarder, unchanged, with a fixed EIP-712 domain name ("FGBDTForwarder",
///         version "1"), so that clients can sign `ForwardRequest`s for `FGBDTChain` without an extra lookup.
/// @dev The REST API relays a caller's signed request through `execute`; `FGBDTChain` trusts this contract and reads
///      the signer from the calldata suffix (`ERC2771Context._msgSender`).
contract FGBDTForwarder is ERC2771Forwarder {
    constructor() ERC2771Forwarder("FGBDTForwarder") {}
}
