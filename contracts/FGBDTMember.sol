// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTBallotLib} from "./FGBDTBallot.sol";

/// @notice A party's membership in a task.
enum Membership {
    None,
    Pending,
    Approved,
    Refused
}

/// @notice A party's record in a task. `votes` packs the current level's votes, 2 bytes each (0 = abstain);
///         `aheadVotes` those it sent ahead for the next level (step `aheadStep`) while the level resolves.
///         `creditG/H/N` are the multipliers its split sums are credited at in the current tree (fixed point):
///         the smallest its endorsers attested for the tree's root, so a party that stretches its histograms
///         is credited as if it had not.
/// @dev Declared at file level so that the linked libraries can take it in storage (`FGBDTPayoutLib`,
///      `FGBDTResolveLib`).
struct Member {
    Membership status;
    uint16 index;
    uint32 votedStep;
    uint32 histStep;
    uint32 declinedStep;
    uint80 creditG;
    uint80 creditH;
    uint80 creditN;
    uint32 partStep;
    uint16 partNodes;
    uint32 aheadStep;
    bytes32 psdHash;
    bytes32 histRoot;
    int256 contribution;
    FGBDTBallotLib.Ballot votes;
    FGBDTBallotLib.Ballot aheadVotes;
}
