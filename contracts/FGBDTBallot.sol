// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title FGBDTBallotLib
/// @notice A party's ballot of a level: one vote per open node in increasing id, packed 2 bytes each (feature + 1,
///         0 abstains), as `FGBDTMathLib.levelTop2` reads ballots; and a ballot sent ahead, while the level before
///         resolves, cut to the nodes that opened. Mirrored by `ledger/reference.py` (`ahead_ballot`).
/// @dev `store` and `takeAhead` are public: the library is deployed once and linked, and the packing loops and the
///      copies into storage live here rather than in `FGBDTChain`, which must stay under EIP-170's 24 KB.
library FGBDTBallotLib {
    /// @notice A packed ballot, in a struct so that a public function of the library can write it in the caller's
    ///         storage (a `bytes storage` parameter can be read, not assigned).
    struct Ballot {
        bytes packed;
    }

    /// @notice A vote is neither -1 (abstain) nor a feature index.
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
            if (v != -1 && (v < 0 || uint256(v) >= numFeatures)) revert InvalidVote(i, v);
            uint256 code = uint256(v + 1);
            packed[2 * i] = bytes1(uint8(code >> 8));
            packed[2 * i + 1] = bytes1(uint8(code));
        }
        ballot.packed = packed;
    }

    /// @notice Store the ballot sent ahead as the ballot of the level that opened (`aheadBallot`).
    /// @param ballot Where the level's ballot is kept.
    /// @param ahead The ballot sent ahead.
    /// @param previous The open mask of `level - 1`.
    /// @param mask The open mask of `level`.
    /// @param level The level that opened, at least 1.
    function takeAhead(Ballot storage ballot, Ballot storage ahead, uint256 previous, uint256 mask, uint256 level)
        public
    {
        ballot.packed = aheadBallot(ahead.packed, previous, mask, level);
    }

    /// @dev A ballot sent ahead holds 2 bytes per child of every node open at `level - 1` (increasing parent id, left
    ///      child first); the children open at `level` (`mask`, bit b = node 2^level + b) keep theirs, in increasing
    ///      id. A child's bit is 2b or 2b + 1 for its parent's bit b, so parents in increasing order give the children
    ///      in increasing order.
    /// @return ballot 2 bytes per node open at `level`.
    function aheadBallot(bytes memory ahead, uint256 previous, uint256 mask, uint256 level)
        internal
        pure
        returns (bytes memory ballot)
    {
        uint256 parents = 1 << (level - 1);
        uint256 k;
        for (uint256 b = 0; b < 2 * parents; ++b) if ((mask >> b) & 1 == 1) ++k;
        ballot = new bytes(2 * k);
        uint256 i;
        uint256 o;
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
