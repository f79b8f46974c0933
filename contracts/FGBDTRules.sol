// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title FGBDTRulesLib
/// @notice The exact rules a party's histograms must keep, checked in the transaction that submits them. They are
///         identities that hold for every honest party on any data (parties quantise each row once, so every sum is
///         an exact integer sum of the same row values), mirrored bit for bit by `ledger/spec/histogram_rules.py`:
///         a node's two candidate histograms have equal totals; binary logistic loss bounds every bin
///         (`|G| <= n`, `0 <= H <= n/4`, `H <= |G|(1 - |G|/n)` when `|G| > n/2`, and at the first tree, where every
///         score is 0, `H = n/4` and `n/2 - G` an integer count of positive labels); squared error has `H = n`.
///         A differentially private task's histograms carry noise, which no bin bound survives: there only the
///         totals identities hold (the parties project their noisy bins onto noisy totals, post-processing).
/// @dev A node block is `g[2*nbins] | h[2*nbins] | n[2*nbins]` in calldata, candidate `k`'s bin `b` at `k*nbins + b`.
///      Real values are int256 fixed point with 18 decimals; counts are plain integers. `checkLevel` is public: the
///      library is deployed once and linked, which keeps `FGBDTChain` under the 24 KB code-size limit (EIP-170).
library FGBDTRulesLib {
    int256 internal constant ONE = 1e18;
    /// @dev Fixed-point units per row by which a bin's hessian may exceed the concavity bound: the float error of
    ///      computing g and h from the same probability, and their rounding to 18 decimals (`ROW_SLACK`).
    int256 internal constant ROW_SLACK = 1000;
    uint8 internal constant OBJECTIVE_BINARY = 0;
    uint8 internal constant OBJECTIVE_SQUARED = 1;
    /// @dev `checkLevel`'s `bounds` for a differentially private task: no per-bin bound, the totals only.
    uint8 internal constant BOUNDS_NONE = 2;

    /// @notice A node's candidate histograms do not hold the same totals.
    /// @param node The node.
    error CandidateTotalsMismatch(uint256 node);
    /// @notice A bin's row count is negative.
    /// @param node The node.
    /// @param slot The bin's slot in the node's two candidate histograms (`k * nbins + b`).
    error CountOutOfRange(uint256 node, uint256 slot);
    /// @notice A bin's gradient sum exceeds what its rows can carry (`|G| <= n` for logistic loss).
    /// @param node The node.
    /// @param slot The bin's slot in the node's two candidate histograms (`k * nbins + b`).
    error GradientOutOfRange(uint256 node, uint256 slot);
    /// @notice A bin's hessian sum is outside `[0, n/4]` (logistic loss) or not `n` (squared error).
    /// @param node The node.
    /// @param slot The bin's slot in the node's two candidate histograms (`k * nbins + b`).
    error HessianOutOfRange(uint256 node, uint256 slot);
    /// @notice A bin's hessian sum exceeds `|G|(1 - |G|/n)` although `|G| > n/2` (logistic loss).
    /// @param node The node.
    /// @param slot The bin's slot in the node's two candidate histograms (`k * nbins + b`).
    error LogisticBound(uint256 node, uint256 slot);
    /// @notice At the first tree a bin's sums are not those of rows at score 0 (`H = n/4`, `n/2 - G` integral).
    /// @param node The node.
    /// @param slot The bin's slot in the node's two candidate histograms (`k * nbins + b`).
    error FirstTreeLabels(uint256 node, uint256 slot);
    /// @notice A node's totals differ from the submitting party's own side sums at the parent's split.
    /// @param node The node.
    error InheritedTotalsMismatch(uint256 node);

    /// @notice Checks every node block of a level, in increasing node id (reference `check_node` per node), and
    ///         returns each node's candidate-0 totals, three words per node (g, h, n).
    /// @param data The level's node blocks, `6 * nbins` words each.
    /// @param nbins Slots per candidate histogram.
    /// @param base The level's first heap id (`2^level`).
    /// @param mask The level's open nodes (bit b is node `base + b`).
    /// @param bounds The per-bin bounds that apply: the objective's (0 binary logistic, 1 squared error), or
    ///        `BOUNDS_NONE` (2) for a differentially private task.
    /// @param firstTree Whether the level belongs to the first tree (every score 0).
    /// @return totals Each checked node's candidate-0 totals (g, h, n).
    function checkLevel(
        int256[] calldata data,
        uint256 nbins,
        uint256 base,
        uint256 mask,
        uint8 bounds,
        bool firstTree
    ) public pure returns (int256[] memory totals) {
        uint256 block_ = 6 * nbins;
        // three words per whole node block: the division counts the blocks and is meant to truncate
        // slither-disable-next-line divide-before-multiply
        totals = new int256[]((data.length / block_) * 3); // forge-lint: disable-line(divide-before-multiply)
        uint256 i = 0;
        for (uint256 b = 0; b < base; ++b) {
            if ((mask >> b) & 1 == 0) continue;
            (totals[3 * i], totals[3 * i + 1], totals[3 * i + 2]) = checkNode(
                data,
                i * block_,
                nbins,
                base + b,
                bounds,
                firstTree
            );
            ++i;
        }
    }

    /// @dev Checks one node block and returns its candidate-0 totals (reference `check_node`).
    function checkNode(
        int256[] calldata data,
        uint256 offset,
        uint256 nbins,
        uint256 node,
        uint8 bounds,
        bool firstTree
    ) internal pure returns (int256 g, int256 h, int256 n) {
        uint256 width = 2 * nbins;
        (g, h, n) = _totals(data, offset, width, 0, nbins);
        (int256 g1, int256 h1, int256 n1) = _totals(data, offset, width, nbins, nbins);
        if (g1 != g || h1 != h || n1 != n) revert CandidateTotalsMismatch(node);
        if (bounds == BOUNDS_NONE) return (g, h, n);
        for (uint256 s = 0; s < width; ++s) {
            _checkBin(data[offset + s], data[offset + width + s], data[offset + 2 * width + s], node, s, bounds, firstTree);
        }
    }

    /// @dev The (g, h, n) sums of `len` slots of a node block starting at slot `from`.
    function _totals(
        int256[] calldata data,
        uint256 offset,
        uint256 width,
        uint256 from,
        uint256 len
    ) private pure returns (int256 g, int256 h, int256 n) {
        for (uint256 b = from; b < from + len; ++b) {
            g += data[offset + b];
            h += data[offset + width + b];
            n += data[offset + 2 * width + b];
        }
    }

    /// @dev One bin's bounds (reference `check_bins`).
    function _checkBin(
        int256 g,
        int256 h,
        int256 n,
        uint256 node,
        uint256 slot,
        uint8 objective,
        bool firstTree
    ) private pure {
        if (n < 0) revert CountOutOfRange(node, slot);
        int256 nOne = n * ONE;
        if (objective == OBJECTIVE_SQUARED) {
            if (h != nOne) revert HessianOutOfRange(node, slot);
            return;
        }
        int256 a = g < 0 ? -g : g;
        if (a > nOne) revert GradientOutOfRange(node, slot);
        if (h < 0 || 4 * h > nOne) revert HessianOutOfRange(node, slot);
        if (2 * a > nOne && h * nOne > a * (nOne - a) + ROW_SLACK * n * nOne) revert LogisticBound(node, slot);
        if (firstTree && (4 * h != nOne || (nOne / 2 - g) % ONE != 0)) revert FirstTreeLabels(node, slot);
    }
}
