// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IFGBDTEvents} from "./FGBDTEvents.sol";
import {Member} from "./FGBDTMember.sol";

/// @title FGBDTPayoutLib
/// @notice The reward of a completed task, split in proportion to the positive contributions, mirrored by
///         `ledger/spec/reference.py` (`payouts`). Public: the library is deployed once and linked, so the payout loop
///         lives outside `FGBDTChain`, which must stay under EIP-170's 24 KB.
library FGBDTPayoutLib {
    /// @notice Credit every party its share of `reward` and the requester the rest.
    /// @dev amount = reward * c_p / positive, exact while positive < 2^128; beyond that both are shifted right
    ///      together so the product cannot overflow (reward < 2^128 is enforced at creation). Paid on completion
    ///      only: a party whose histograms the last step (`step`) did not accept left the task and forfeits its
    ///      amount to the requester.
    /// @param members The task's member records.
    /// @param parties The approved parties.
    /// @param owed What each address can withdraw from the task.
    /// @param taskId The task (for the events).
    /// @param reward The deposit.
    /// @param requester Who gets the remainder.
    /// @param step The task's last step.
    /// @return positive The sum of the positive contributions.
    function payout(
        mapping(address => Member) storage members,
        address[] storage parties,
        mapping(address => uint256) storage owed,
        uint256 taskId,
        uint256 reward,
        address requester,
        uint256 step
    ) public returns (int256 positive) {
        uint256 mCount = parties.length;
        for (uint256 p = 0; p < mCount; ++p) {
            int256 cp = members[parties[p]].contribution;
            if (cp > 0) positive += cp;
        }
        uint256 paid = 0;
        if (positive > 0) {
            uint256 shift;
            // positive > 0 here, so its conversion keeps its value
            // forge-lint: disable-next-line(unsafe-typecast)
            while ((uint256(positive) >> shift) >= 1 << 128) ++shift;
            // forge-lint: disable-next-line(unsafe-typecast)
            uint256 denominator = uint256(positive) >> shift;
            for (uint256 p = 0; p < mCount; ++p) {
                address a = parties[p];
                Member storage m = members[a];
                int256 cp = m.contribution;
                if (cp <= 0) continue;
                // cp > 0 here (the loop skipped the others)
                // forge-lint: disable-next-line(unsafe-typecast)
                uint256 amount = (reward * (uint256(cp) >> shift)) / denominator;
                if (amount == 0) continue;
                if (m.histStep != step) {
                    emit IFGBDTEvents.RewardForfeited(taskId, a, amount);
                    continue;
                }
                owed[a] += amount;
                paid += amount;
                emit IFGBDTEvents.RewardAssigned(taskId, a, amount);
            }
        }
        if (reward > paid) {
            owed[requester] += reward - paid;
            emit IFGBDTEvents.RewardAssigned(taskId, requester, reward - paid);
        }
    }
}
