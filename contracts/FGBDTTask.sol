// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTConfigLib} from "./FGBDTConfig.sol";

/// @notice Lifecycle of a task.
enum Status {
    None,
    Open,
    Training,
    Completed,
    Cancelled
}

/// @notice Step of the current tree level.
enum Phase {
    Voting,
    Histograms,
    Resolving
}

/// @notice Mutable state of a task.
/// @dev Declared at file level so that the linked libraries can take it in storage (`FGBDTResolveLib`).
struct Task {
    address requester;
    Status status;
    Phase phase;
    uint16 numFeatures;
    uint16 tree;
    uint8 level;
    uint32 step;
    uint16 voteCount;
    uint16 histCount;
    uint64 histMask;
    uint16 declineCount;
    uint16 activeCount;
    uint16 slots;
    uint64 joinDeadline;
    uint64 stepDeadline;
    /// @dev The block whose hash fixes `shapleySeed` while the seed is pending (`start`'s own, or a later one where
    ///      its hash had expired unread), 0 once the seed is fixed (`FGBDTChain._fixSeed`).
    uint64 seedBlock;
    uint256 openMask;
    uint256 nextMask;
    uint256 resolvedMask;
    uint256 reward;
    bytes32 schemaHash;
    bytes32 binEdgesHash;
    uint256 shapleySeed;
    FGBDTConfigLib.Config cfg;
    address[] parties;
}

/// @notice One node of a tree: candidates, totals (from its parent's split) and result.
/// @dev kind: 0 unknown, 1 open, 2 split, 3 leaf. `value` is the gain of a split node or the value of a leaf.
///      `tree` is the tree the record belongs to: records are kept for the current and the previous tree only
///      (slots by tree parity, every field written when the node opens), so the state does not grow with the
///      model; earlier trees are in the events (`CandidatesFixed`, `NodeSplit`, `LeafSet`).
struct Node {
    uint8 kind;
    uint16 cand0;
    uint16 cand1;
    uint16 feature;
    uint16 threshold;
    uint16 tree;
    int256 g;
    int256 h;
    int256 n;
    int256 value;
}

/// @notice A task's node records: tree parity => node id => record (see `Node.tree`).
/// @param nodes The task's records.
/// @param tree The tree.
/// @param node The heap id (root 1, children 2i and 2i + 1).
/// @return The storage slot of the node of `tree`, shared with tree - 2.
function nodeOf(mapping(uint256 => mapping(uint256 => Node)) storage nodes, uint256 tree, uint256 node)
    view
    returns (Node storage)
{
    return nodes[tree & 1][node];
}

/// @notice Open a node in `tree`: every field written, none left from the tree two before in the same slot.
/// @param nd The node's record.
/// @param tree The tree it opens in.
/// @param g Its gradient total (from its parent's split; 0 at a root, whose totals its resolution sets).
/// @param h Its hessian total.
/// @param n Its row count.
function openNode(Node storage nd, uint256 tree, int256 g, int256 h, int256 n) {
    // the tree is below cfg.trees, itself a uint16
    // forge-lint: disable-next-line(unsafe-typecast)
    (nd.kind, nd.cand0, nd.cand1, nd.feature, nd.threshold, nd.tree) = (1, 0, 0, 0, 0, uint16(tree));
    (nd.g, nd.h, nd.n, nd.value) = (g, h, n, 0);
}

/// @notice Whether the current tree draws its candidates instead of voting: trees from `Config.votedTrees` on.
/// @dev Each vote pulls the model towards the voter's own rows, so an honest party's sums drift away from what its
///      verifiers expect as voted trees accumulate; drawn candidates, fixed by a public seed, add no pull.
/// @param t The task.
/// @return Whether the current tree's candidates are drawn.
function drawn(Task storage t) view returns (bool) {
    return t.tree >= t.cfg.votedTrees;
}
