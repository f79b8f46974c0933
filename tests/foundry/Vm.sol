// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The few forge cheatcodes the contract checks use, declared here rather than imported from forge-std (npm's
///         only copy of forge-std is years old, and these signatures are all the tests need).
interface Vm {
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    function addr(uint256 privateKey) external pure returns (address);
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);
    function prank(address sender) external;
    function roll(uint256 newHeight) external;
    function deal(address account, uint256 newBalance) external;
    function assume(bool condition) external pure;
    function ffi(string[] calldata command) external returns (bytes memory result);
    function envOr(string calldata name, uint256 defaultValue) external view returns (uint256 value);
    function envOr(string calldata name, string calldata defaultValue) external view returns (string memory value);
    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory logs);
    function toString(uint256 value) external pure returns (string memory);
    function writeLine(string calldata path, string calldata data) external;
}

/// @dev The cheatcode address: `address(uint160(uint256(keccak256("hevm cheat code"))))`.
Vm constant vm = Vm(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);

/// @notice forge's console (the `console.log` address), for the campaigns' summaries under `-vv`.
library console {
    address internal constant CONSOLE = 0x000000000000000000636F6e736F6c652e6c6f67;

    function log(string memory label, uint256 value) internal view {
        (bool ok, ) = CONSOLE.staticcall(abi.encodeWithSignature("log(string,uint256)", label, value));
        ok;
    }
}
