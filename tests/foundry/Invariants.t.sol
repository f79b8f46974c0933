// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTChain} from "../../contracts/FGBDTChain.sol";
import {Status} from "../../contracts/FGBDTTask.sol";
import {TaskHandler} from "./TaskHandler.sol";

/// @notice Invariants of `FGBDTChain` under random play (`TaskHandler`: requesters, applicants, parties and outsiders
///         in random order), checked after every call of every sequence.
contract InvariantsTest {
    TaskHandler internal handler;
    FGBDTChain internal chain;

    function setUp() public {
        handler = new TaskHandler();
        chain = handler.chainUnderTest();
    }

    /// @dev forge's invariant fuzzer calls only the handler.
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    /// @dev forge's selector filter, as forge-std declares it.
    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// @dev The handler's summary is not an action: called by the fuzzer it would add lines that `bench.fuzz` sums.
    function excludeSelectors() public view returns (FuzzSelector[] memory excluded) {
        bytes4[] memory selectors = new bytes4[](1);
        selectors[0] = TaskHandler.summary.selector;
        excluded = new FuzzSelector[](1);
        excluded[0] = FuzzSelector(address(handler), selectors);
    }

    /// @dev After each sequence: what it did (shown under `-vv`).
    function afterInvariant() public {
        handler.summary();
    }

    /// @notice Ether is conserved: the contract holds what was deposited less what was withdrawn, and every task's
    ///         deposit is held (open or training), or owed to and withdrawn by its accounts (completed: the parties'
    ///         shares, the requester's remainder with every forfeit; cancelled: the requester).
    function invariant_etherIsConserved() public view {
        require(address(chain).balance == handler.deposits() - handler.withdrawn(), "balance != deposits - withdrawn");
        uint256 total;
        for (uint256 i = 0; i < handler.taskCount(); ++i) {
            (uint256 taskId, , uint256 reward) = handler.taskOf(i);
            (, Status status, , , , , , , uint256 deposit) = chain.getState(taskId);
            require(deposit == reward, "the task's deposit is not what was paid in");
            uint256 owedNow;
            address[] memory accounts = handler.accountsOf(i);
            for (uint256 a = 0; a < accounts.length; ++a) owedNow += chain.owed(taskId, accounts[a]);
            uint256 out = owedNow + handler.withdrawnFrom(taskId);
            if (status == Status.Open || status == Status.Training) require(out == 0, "owed before completion");
            else require(out == reward, "paid + owed + forfeited != deposit");
            total += reward;
        }
        require(total == handler.deposits(), "deposits unaccounted for");
    }

    /// @notice Each account is owed (or has withdrawn) exactly what the reference's payout rule entitles it to: no
    ///         party paid twice, none paid what a party that left forfeited, no applicant that was never approved paid.
    function invariant_payoutsAreTheReferences() public view {
        for (uint256 i = 0; i < handler.taskCount(); ++i) {
            (uint256 taskId, , ) = handler.taskOf(i);
            if (!handler.settled(taskId)) continue;
            address[] memory accounts = handler.accountsOf(i);
            for (uint256 a = 0; a < accounts.length; ++a) {
                uint256 got = chain.owed(taskId, accounts[a]) + handler.withdrawnBy(taskId, accounts[a]);
                require(got == handler.entitled(taskId, accounts[a]), "an account is owed other than its share");
            }
        }
    }

    /// @notice Every party's contribution total is the sum of what the resolutions credited it.
    function invariant_contributionsAreTheResolutions() public view {
        for (uint256 i = 0; i < handler.taskCount(); ++i) {
            (uint256 taskId, , ) = handler.taskOf(i);
            address[] memory parties = handler.partiesOf(i);
            for (uint256 p = 0; p < parties.length; ++p) {
                (, , , int256 c) = chain.getMember(taskId, parties[p]);
                require(c == handler.contributed(taskId, parties[p]), "contribution total != credited sum");
            }
        }
    }

    /// @notice No transition the handler observed broke the protocol: states move forward only, steps close only
    ///         complete or past their deadline, only approved parties take part, histograms need their quorum, and the
    ///         contributions of every resolved node sum to its credited split gain.
    function invariant_noViolation() public view {
        if (handler.violationCount() > 0) revert(handler.violations(0));
    }
}
