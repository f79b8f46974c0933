// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTChain} from "../FGBDTChain.sol";
import {FGBDTConfigLib} from "../FGBDTConfig.sol";

/// @title ReentrantRequester
/// @notice Test-only attacker: opens and cancels a task, then withdraws the refund and tries to withdraw again from
///         its `receive` hook. The inner call's revert data is recorded so tests can check it is
///         OpenZeppelin's `ReentrancyGuardReentrantCall()`.
contract ReentrantRequester {
    FGBDTChain public immutable target;
    uint256 public taskId;
    uint256 public received;
    bytes public innerError;
    bool public reentered;

    /// @param target_ The task contract attacked.
    constructor(FGBDTChain target_) {
        target = target_;
    }

    /// @notice Open a minimal task with `msg.value` as reward and cancel it, so the refund is owed to this contract.
    /// @param cfg The task configuration.
    function openAndCancel(FGBDTConfigLib.Config calldata cfg) external payable {
        int256[] memory lo = new int256[](1);
        int256[] memory hi = new int256[](1);
        hi[0] = 1e18;
        taskId = target.createTask{value: msg.value}(cfg, lo, hi, bytes32(0));
        target.cancel(taskId);
    }

    /// @notice Withdraw the refund; `receive` tries to re-enter.
    function attack() external {
        target.withdraw(taskId);
    }

    receive() external payable {
        received += msg.value;
        try target.withdraw(taskId) {
            reentered = true;
        } catch (bytes memory reason) {
            innerError = reason;
        }
    }
}
