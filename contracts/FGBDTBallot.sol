// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {popcount} from "./FGBDTBits.sol";

/// @title FGBDTBallotLib
/// @notice A party's ballot of a level: one vote per open node in increasing id, packed 2 bytes each (feature + 1,
///         0 abstains), as `FGBDTMathLib.levelTop2` reads ballots; and a ballot sent ahead, while the level before
///         resolves, cut to the nodes that opened. Mirrored by `ledger/spec/reference.py` (`ahead_ballot`).
/// @dev `store` and `takeAhead` are public: the library is deployed once and linked, and the packing loops and the
///      copies into storage live here rather than in `FGBDTChain`, which must stay under EIP-170's 24 KB.
library FGBDTBallotLib {
    /// @notice A packed ballot, in a struct so that a public function of the library can write it in the caller's
    ///         storage (a `bytes storage` parameter can be read, not assigned).
    struct Ballot {
        bytes packed;
    }

    /// @notice A vote is neither -1 (abstain) nor a feature index.
    /// @param index The vote's position.
    /// @param vote The vote.
    error InvalidVote(uint256 index, int256 vote);

    /// @notice Store `votes` (a feature index or -1 each) as a packed ballot.
    /// @param ballot Where the ballot is kept.
    /// @param votes One vote per entry.
    /// @param numFeatures The task's feature count: a vote is below it or -1.
    function store(Ballot storage ballot, int256[] calldata votes, uint256 numFeatures) public {
        uint256 k = votes.length;
        bytes memory packed = new bytes(2 * k);
        for (uint256 i = 0; i < k; ++i) {
            int256 v = votes[i];
            // converted only once v < 0 was ruled out (the || short-circuits)
            // forge-lint: disable-next-line(unsafe-typecast)
            if (v != -1 && (v < 0 || uint256(v) >= numFeatures)) revert InvalidVote(i, v);
            // v >= -1 here, so the code is 0 (abstain) or feature + 1
            // forge-lint: disable-next-line(unsafe-typecast)
            uint256 code = uint256(v + 1);
            // the code's two bytes, big-endian: it is below 2^16 (features < 2^16 - 1), so nothing is cut
            // forge-lint: disable-next-line(unsafe-typecast)
            packed[2 * i] = bytes1(uint8(code >> 8));
            // forge-lint: disable-next-line(unsafe-typecast)
            packed[2 * i + 1] = bytes1(uint8(code));
        }
        ballot.packed = packed;
    }

    /// @notice Store the ballot sent ahead as the ballot of the level that opened (`aheadBallot`), if it has that
    ///         level's form: 2 bytes per child of every node of `previous`, or 2 bytes for a root (`previous` 0).
    ///         A party that sent the next tree's root while its tree went on (or the reverse) guessed wrong: its
    ///         ballot is left, and it votes in the level's round.
    /// @param ballot Where the level's ballot is kept.
    /// @param ahead The ballot sent ahead.
    /// @param previous The open mask of `level - 1`; 0 when a tree's root opened.
    /// @param mask The open mask of `level`.
    /// @param level The level that opened.
    /// @return taken Whether the ballot had the level's form and is now its ballot.
    function takeAhead(Ballot storage ballot, Ballot storage ahead, uint256 previous, uint256 mask, uint256 level)
        public
        returns (bool taken)
    {
        bytes memory sent = ahead.packed;
        if (sent.length != (previous == 0 ? 2 : 4 * popcount(previous))) return false;
        ballot.packed = aheadBallot(sent, previous, mask, level);
        return true;
    }

    /// @dev A ballot sent ahead holds 2 bytes per child of every node open at `level - 1` (increasing parent id, left
    ///      child first); the children open at `level` (`mask`, bit b = node 2^level + b) keep theirs, in increasing
    ///      id. A child's bit is 2b or 2b + 1 for its parent's bit b, so parents in increasing order give the children
    ///      in increasing order. A root's ballot (level 0) is its one vote, as sent.
    /// @return ballot 2 bytes per node open at `level`.
    function aheadBallot(bytes memory ahead, uint256 previous, uint256 mask, uint256 level)
        internal
        pure
        returns (bytes memory ballot)
    {
        if (level == 0) return ahead;
        // 2^(level - 1), the nodes of the level before
        // forge-lint: disable-next-line(incorrect-shift)
        uint256 parents = 1 << (level - 1);
        ballot = new bytes(2 * popcount(mask));
        uint256 i = 0;
        uint256 o = 0;
        for (uint256 b = 0; b < parents; ++b) {
            if ((previous >> b) & 1 == 0) continue;
            for (uint256 c = 0; c < 2; ++c) {
                if ((mask >> (2 * b + c)) & 1 == 1) {
                    ballot[o] = ahead[4 * i + 2 * c];
                    ballot[o + 1] = ahead[4 * i + 2 * c + 1];
                    o += 2;
                }
            }
            ++i;
        }
    }
}
