// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {popcount} from "./FGBDTBits.sol";
import {FGBDTBallotLib} from "./FGBDTBallot.sol";

/// @title FGBDTMathLib
/// @notice The contract math of FGBDT-Chain: equation 7 gains, leaf values, top-2 voting, best split and exact split
///         Shapley values. Every function mirrors `ledger/spec/reference.py` bit for bit: int256 fixed point with 18
///         decimals, divisions truncating toward zero (Solidity's native `/`), checked arithmetic reverting where the
///         reference raises `FixedPointOverflow`.
/// @dev Histograms of one node are flattened: candidate `k`, slot `b` lives at index `k * nbins + b`.
library FGBDTMathLib {
    int256 internal constant ONE = 1e18;
    int256 internal constant ABSTAIN = -1;
    uint256 internal constant MAX_SHAPLEY_PARTIES = 16;

    /// @notice The per-party arrays handed to a Shapley computation do not have the same length.
    error ShapleyLengthMismatch();
    /// @notice More parties than the exact Shapley computation supports.
    /// @param parties The parties given.
    /// @param max The most supported.
    error TooManyShapleyParties(uint256 parties, uint256 max);
    /// @notice A histogram array is empty or its length is not a multiple of the slot count.
    /// @param length The array's length.
    /// @param nbins The slot count.
    error BadHistogramShape(uint256 length, uint256 nbins);
    /// @notice A vote is neither ABSTAIN nor a feature index.
    /// @param index The vote's position.
    /// @param vote The vote.
    error InvalidVote(uint256 index, int256 vote);
    /// @notice No features to rank.
    error NoFeatures();

    /// @notice A node's best split, with the aggregated side sums (raw hessians, not count-substituted).
    struct Split {
        uint256 rank;
        uint256 threshold;
        int256 gain;
        int256 gLeft;
        int256 hLeft;
        int256 nLeft;
        int256 gRight;
        int256 hRight;
        int256 nRight;
    }

    /// @dev `g^2 / (h + lambda)`, 0 when the denominator is not positive (reference `side_score`).
    function sideScore(int256 g, int256 h, int256 lam) internal pure returns (int256) {
        int256 d = h + lam;
        if (d <= 0) return 0;
        return (g * g) / d;
    }

    /// @dev Equation 7: left score plus right score, no 1/2 and no parent term (reference `split_gain`).
    function splitGain(int256 gL, int256 hL, int256 gR, int256 hR, int256 lam) internal pure returns (int256) {
        return sideScore(gL, hL, lam) + sideScore(gR, hR, lam);
    }

    /// @dev `-G * lr / (H + lambda)`, 0 for an empty leaf with lambda 0 (reference `leaf_value`).
    function leafValue(int256 g, int256 h, int256 lam, int256 lr) internal pure returns (int256) {
        int256 d = h + lam;
        if (d <= 0) return 0;
        return (-g * lr) / d;
    }

    /// @dev The hessian or, in count mode (1), the row count times ONE (reference `hessian_of`).
    function hessianOf(int256 h, int256 n, uint8 mode) internal pure returns (int256) {
        return mode == 1 ? n * ONE : h;
    }

    /// @dev Tie rule of `top2`: equal vote counts go to the lower feature index, the ranking as the protocol states it.
    uint8 internal constant TIE_LOWER_INDEX = 0;
    /// @dev Tie rule of `top2`: equal vote counts go to the lower `tieKey`, a fixed pseudo-random order of the
    ///      features that differs from node to node, so that no feature is favoured by its position.
    uint8 internal constant TIE_HASHED = 1;

    /// @notice A tie rule other than TIE_LOWER_INDEX or TIE_HASHED.
    /// @param rule The rule given.
    error UnknownTieRule(uint8 rule);

    /// @dev The rank of `feature` among equally voted features of node `node` in tree `tree`; lower ranks first
    ///      (reference `tie_key`). TIE_HASHED applies the SplitMix64 finaliser, a bijection of 64-bit words, to
    ///      `tree << 40 | node << 16 | feature` (truncated to 64 bits), so features of one node never share a key
    ///      while feature < 2^16 and tree, node < 2^24 (the task's limits); `tree` counts from 0, `node` is the heap
    ///      id (root 1). On equal keys the scan below keeps the lower index.
    ///      Arithmetic hashing instead of keccak keeps the off-chain simulator's compiled kernel exact and cheap.
    function tieKey(uint8 rule, uint256 tree, uint256 node, uint256 feature) internal pure returns (uint256) {
        if (rule == TIE_LOWER_INDEX) return feature;
        if (rule != TIE_HASHED) revert UnknownTieRule(rule);
        unchecked {
            // the key is defined on the low 64 bits (reference tie_key masks the same), so the truncation is the rule
            // forge-lint: disable-next-line(unsafe-typecast)
            uint64 z = uint64((tree << 40) | (node << 16) | feature);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
            return uint256(z ^ (z >> 31));
        }
    }

    /// @dev Top-2 features by vote count, ties by `tieKey`, abstentions ignored (reference `top2`).
    function top2(
        int256[] memory votes,
        uint256 numFeatures,
        uint8 rule,
        uint256 tree,
        uint256 node
    ) internal pure returns (uint256 first, uint256 second) {
        if (numFeatures == 0) revert NoFeatures();
        uint256[] memory counts = new uint256[](numFeatures);
        for (uint256 i = 0; i < votes.length; ++i) {
            int256 v = votes[i];
            if (v == ABSTAIN) continue;
            // converted only once v < 0 was ruled out (the || short-circuits)
            // forge-lint: disable-next-line(unsafe-typecast)
            if (v < 0 || uint256(v) >= numFeatures) revert InvalidVote(i, v);
            // a feature index here: 0 <= v < numFeatures
            // forge-lint: disable-next-line(unsafe-typecast)
            counts[uint256(v)] += 1;
        }
        return top2FromCounts(counts, rule, tree, node);
    }

    /// @notice Every open node's top-2 at one level from the parties' packed ballots, as the task contract fixes
    ///         them when voting closes and when a drawn tree's level opens (no ballots: each node's two lowest tie
    ///         keys, reference `top2` of empty votes).
    /// @dev Ballots hold 2 bytes per open node in increasing id (feature + 1, 0 abstains), one after the other in
    ///      one flat byte string, which is cheaper to pass than an array of them. A public library function, called
    ///      by DELEGATECALL, so that the task contract stays under EIP-170's size limit.
    /// @param ballots The ballots, back to back.
    /// @param numFeatures The task's feature count.
    /// @param rule The tie rule (`TIE_LOWER_INDEX` or `TIE_HASHED`).
    /// @param tree The tree (the hashed rule's key).
    /// @param level The level.
    /// @param mask The level's open nodes (bit b = node 2^level + b).
    /// @return fixed_ Per open node in increasing id, `node << 32 | first << 16 | second` (one packed word keeps the
    ///         caller's decoding small).
    function levelTop2(
        bytes memory ballots,
        uint256 numFeatures,
        uint8 rule,
        uint256 tree,
        uint256 level,
        uint256 mask
    ) public pure returns (uint256[] memory fixed_) {
        if (numFeatures == 0) revert NoFeatures();
        // 2^level, the level's first heap id
        // forge-lint: disable-next-line(incorrect-shift)
        uint256 base = 1 << level;
        uint256 k = popcount(mask);
        fixed_ = new uint256[](k);
        uint256 i = 0;
        for (uint256 b = 0; b < base; ++b) {
            if ((mask >> b) & 1 == 0) continue;
            uint256[] memory counts = new uint256[](numFeatures);
            for (uint256 q = 2 * i; q < ballots.length; q += 2 * k) {
                uint256 code = (uint256(uint8(ballots[q])) << 8) | uint256(uint8(ballots[q + 1]));
                if (code != 0) counts[code - 1] += 1;
            }
            (uint256 first, uint256 second) = top2FromCounts(counts, rule, tree, base + b);
            fixed_[i] = ((base + b) << 32) | (first << 16) | second;
            ++i;
        }
    }

    /// @dev The ranking step of `top2` on ready vote counts: the two best by (count descending, key ascending).
    ///      A feature with fewer votes than the current runner-up is skipped before its key is computed.
    function top2FromCounts(
        uint256[] memory counts,
        uint8 rule,
        uint256 tree,
        uint256 node
    ) internal pure returns (uint256 first, uint256 second) {
        uint256 f = counts.length;
        if (rule > TIE_HASHED) revert UnknownTieRule(rule);
        if (f == 1) return (0, 0);
        uint256 c1 = 0;
        uint256 k1 = type(uint256).max;
        uint256 c2 = 0;
        uint256 k2 = type(uint256).max;
        for (uint256 i = 0; i < f; ++i) {
            uint256 c = counts[i];
            if (c < c2) continue;
            uint256 k = tieKey(rule, tree, node, i);
            if (c > c1 || (c == c1 && k < k1)) {
                (second, c2, k2) = (first, c1, k1);
                (first, c1, k1) = (i, c, k);
            } else if (c > c2 || (c == c2 && k < k2)) {
                (second, c2, k2) = (i, c, k);
            }
        }
    }

    /// @notice Best split over the candidates (reference `best_split`).
    /// @param g Gradient sums per candidate and slot (`k * nbins + b`).
    /// @param h Hessian sums, same layout.
    /// @param n Row counts, same layout.
    /// @param nbins Slots per candidate.
    /// @param lam L2 regularisation (fixed point).
    /// @param minRows Minimum rows on each side.
    /// @param mode 0: hessian sums; 1: counts times 1e18.
    /// @return found False when the node becomes a leaf.
    /// @return best The split (candidate rank, threshold, gain and raw side sums).
    function bestSplit(
        int256[] memory g,
        int256[] memory h,
        int256[] memory n,
        uint256 nbins,
        int256 lam,
        int256 minRows,
        uint8 mode
    ) public pure returns (bool found, Split memory best) {
        if (nbins == 0 || g.length == 0 || g.length % nbins != 0 || h.length != g.length || n.length != g.length) {
            revert BadHistogramShape(g.length, nbins);
        }
        uint256 nc = g.length / nbins;
        int256 bestParent = 0;
        for (uint256 k = 0; k < nc; ++k) {
            uint256 off = k * nbins;
            int256 gTot = 0;
            int256 hTot = 0;
            int256 nTot = 0;
            for (uint256 b = 0; b < nbins; ++b) {
                gTot += g[off + b];
                hTot += h[off + b];
                nTot += n[off + b];
            }
            int256 gl = 0;
            int256 hl = 0;
            int256 nl = 0;
            for (uint256 t = 0; t + 1 < nbins; ++t) {
                gl += g[off + t];
                hl += h[off + t];
                nl += n[off + t];
                int256 nr = nTot - nl;
                if (nl < minRows || nr < minRows) continue;
                int256 gain = splitGain(gl, hessianOf(hl, nl, mode), gTot - gl, hessianOf(hTot - hl, nr, mode), lam);
                if (!found || gain > best.gain) {
                    found = true;
                    best = Split(k, t, gain, gl, hl, nl, gTot - gl, hTot - hl, nr);
                    bestParent = sideScore(gTot, hessianOf(hTot, nTot, mode), lam);
                }
            }
        }
        if (found && best.gain <= bestParent) found = false;
    }

    /// @notice Exact split Shapley values (equation 8) of M parties at a fixed split, and the grand coalition's gain.
    /// @dev Mirrors reference `split_shapley`. Coalition sums are built in Gray-code order (one
    ///      party in or out per step, no per-coalition sum arrays); every phi is accumulated times M! and divided once.
    ///      phi_p = (sum over S containing p of (w[|S|-1] + [S != all] w[|S|]) U(S) - sum over S != all of w[|S|] U(S)) / M!
    ///      which is the reference's sum of w[|B|] (U(B + p) - U(B)) regrouped over exact integers. The M * 2^M core is
    ///      written in assembly for gas, with Solidity's checked-arithmetic semantics: any signed overflow of an
    ///      intermediate panics with code 0x11 (where the reference raises FixedPointOverflow or, for the
    ///      accumulators, where a checked Solidity implementation would revert as well).
    /// @param gL Per-party gradient sums of the left side (fixed point).
    /// @param hL Per-party hessian sums (or counts times 1e18) of the left side.
    /// @param gR Per-party gradient sums of the right side.
    /// @param hR Per-party hessian sums (or counts times 1e18) of the right side.
    /// @param lam L2 regularisation.
    /// @return gain Equation 7 of the summed sides (no 1/2, no parent term).
    /// @return phi The parties' Shapley values, in input order, truncated toward zero.
    function splitShapley(
        int256[] memory gL,
        int256[] memory hL,
        int256[] memory gR,
        int256[] memory hR,
        int256 lam
    ) public pure returns (int256 gain, int256[] memory phi) {
        uint256 m = gL.length;
        if (hL.length != m || gR.length != m || hR.length != m) revert ShapleyLengthMismatch();
        phi = new int256[](m);
        if (m == 0) return (0, phi);
        if (m > MAX_SHAPLEY_PARTIES) revert TooManyShapleyParties(m, MAX_SHAPLEY_PARTIES);
        // 2^M coalitions (M <= MAX_SHAPLEY_PARTIES, checked above)
        // forge-lint: disable-next-line(incorrect-shift)
        uint256 size = 1 << m;
        int256[] memory u = new int256[](size);
        // each coalition's size, one byte per mask, counted as the Gray code adds and removes one party at a time
        bytes memory sizes = new bytes(size);
        int256[] memory w = new int256[](m + 1);
        {
            int256[] memory fact = new int256[](m + 1);
            fact[0] = 1;
            // s <= M <= 16
            // forge-lint: disable-next-line(unsafe-typecast)
            for (uint256 s = 1; s <= m; ++s) fact[s] = fact[s - 1] * int256(s);
            for (uint256 s = 0; s < m; ++s) w[s] = fact[s] * fact[m - s - 1];
            w[m] = fact[m]; // total, M!
        }
        assembly ("memory-safe") {
            function panic() {
                mstore(0, shl(224, 0x4e487b71))
                mstore(4, 0x11)
                revert(0, 0x24)
            }
            function addc(x, y) -> z {
                z := add(x, y)
                if and(eq(slt(x, 0), slt(y, 0)), iszero(eq(slt(z, 0), slt(x, 0)))) {
                    panic()
                }
            }
            function subc(x, y) -> z {
                z := sub(x, y)
                if and(iszero(eq(slt(x, 0), slt(y, 0))), iszero(eq(slt(z, 0), slt(x, 0)))) {
                    panic()
                }
            }
            function mulc(x, y) -> z {
                z := mul(x, y)
                if or(
                    and(eq(x, not(0)), eq(y, shl(255, 1))),
                    and(iszero(iszero(x)), iszero(eq(sdiv(z, x), y)))
                ) {
                    panic()
                }
            }
            function side(g, h, l) -> r {
                let d := addc(h, l)
                if sgt(d, 0) {
                    r := sdiv(mulc(g, g), d)
                }
            }
            let uData := add(u, 0x20)
            let sizesData := add(sizes, 0x20)
            {
                let c := 0
                let a1 := 0
                let a2 := 0
                let a3 := 0
                let a4 := 0
                for {
                    let i := 1
                } lt(i, size) {
                    i := add(i, 1)
                } {
                    let p := 0
                    for {
                        let x := i
                    } iszero(and(x, 1)) {
                        x := shr(1, x)
                    } {
                        p := add(p, 1)
                    }
                    let o := add(0x20, shl(5, p))
                    let gray := xor(i, shr(1, i))
                    switch and(shr(p, gray), 1)
                    case 1 {
                        c := add(c, 1)
                        a1 := addc(a1, mload(add(gL, o)))
                        a2 := addc(a2, mload(add(hL, o)))
                        a3 := addc(a3, mload(add(gR, o)))
                        a4 := addc(a4, mload(add(hR, o)))
                    }
                    default {
                        c := sub(c, 1)
                        a1 := subc(a1, mload(add(gL, o)))
                        a2 := subc(a2, mload(add(hL, o)))
                        a3 := subc(a3, mload(add(gR, o)))
                        a4 := subc(a4, mload(add(hR, o)))
                    }
                    mstore(add(uData, shl(5, gray)), addc(side(a1, a2, lam), side(a3, a4, lam)))
                    mstore8(add(sizesData, gray), c)
                }
            }
            let full := sub(size, 1)
            let wData := add(w, 0x20)
            let phiData := add(phi, 0x20)
            let sumOut := 0
            for {
                let mask := 1
            } lt(mask, size) {
                mask := add(mask, 1)
            } {
                let um := mload(add(uData, shl(5, mask)))
                if um {
                    let c := byte(0, mload(add(sizesData, mask)))
                    let coef := mload(add(wData, shl(5, sub(c, 1))))
                    if iszero(eq(mask, full)) {
                        let wc := mload(add(wData, shl(5, c)))
                        sumOut := addc(sumOut, mulc(wc, um))
                        coef := addc(coef, wc)
                    }
                    let term := mulc(coef, um)
                    for {
                        let p := 0
                    } lt(p, m) {
                        p := add(p, 1)
                    } {
                        if and(shr(p, mask), 1) {
                            let slot := add(phiData, shl(5, p))
                            mstore(slot, addc(mload(slot), term))
                        }
                    }
                }
            }
            let total := mload(add(wData, shl(5, m)))
            for {
                let p := 0
            } lt(p, m) {
                p := add(p, 1)
            } {
                let slot := add(phiData, shl(5, p))
                mstore(slot, sdiv(subc(mload(slot), sumOut), total))
            }
            gain := mload(add(uData, shl(5, full)))
        }
    }
}

/// @title FGBDTMath
/// @notice Public, stateless entry points to the FGBDT-Chain contract math, for auditors and differential tests.
///         Deploys without constructor arguments; every function is `pure`.
contract FGBDTMath {
    /// @notice Exact split Shapley values (equation 8) of M parties at a fixed split, and the grand coalition's gain.
    /// @param gL Per-party gradient sums of the left side (fixed point).
    /// @param hL Per-party hessian sums (or counts times 1e18) of the left side.
    /// @param gR Per-party gradient sums of the right side.
    /// @param hR Per-party hessian sums (or counts times 1e18) of the right side.
    /// @param lambda L2 regularisation (fixed point).
    /// @return gain Equation 7 of the summed sides (no 1/2, no parent term).
    /// @return phi The parties' Shapley values, in input order, truncated toward zero.
    function splitShapley(
        int256[] calldata gL,
        int256[] calldata hL,
        int256[] calldata gR,
        int256[] calldata hR,
        int256 lambda
    ) external pure returns (int256 gain, int256[] memory phi) {
        return FGBDTMathLib.splitShapley(gL, hL, gR, hR, lambda);
    }

    /// @notice Equation 7 gain of one split.
    /// @param gL Left gradient sum.
    /// @param hL Left hessian sum (or count times 1e18).
    /// @param gR Right gradient sum.
    /// @param hR Right hessian sum (or count times 1e18).
    /// @param lambda L2 regularisation.
    /// @return The left score plus the right score.
    function splitGain(int256 gL, int256 hL, int256 gR, int256 hR, int256 lambda) external pure returns (int256) {
        return FGBDTMathLib.splitGain(gL, hL, gR, hR, lambda);
    }

    /// @notice Leaf value `-G * lr / (H + lambda)`.
    /// @param g Gradient sum of the leaf.
    /// @param h Hessian sum (or count times 1e18) of the leaf.
    /// @param lambda L2 regularisation.
    /// @param learningRate Learning rate (fixed point).
    /// @return The leaf value in fixed point.
    function leafValue(int256 g, int256 h, int256 lambda, int256 learningRate) external pure returns (int256) {
        return FGBDTMathLib.leafValue(g, h, lambda, learningRate);
    }

    /// @notice The two candidate features of one node from the parties' votes (-1 abstains).
    /// @param votes One vote per party: a feature index or -1.
    /// @param numFeatures Number of features.
    /// @param rule Tie rule: 0 lower index, 1 hashed per node.
    /// @param tree The tree, from 0 (only the hashed rule reads it).
    /// @param node The heap node id, root 1 (only the hashed rule reads it).
    /// @return first The most voted feature.
    /// @return second The runner-up.
    function top2(
        int256[] calldata votes,
        uint256 numFeatures,
        uint8 rule,
        uint256 tree,
        uint256 node
    ) external pure returns (uint256 first, uint256 second) {
        return FGBDTMathLib.top2(votes, numFeatures, rule, tree, node);
    }

    /// @notice A ballot sent ahead of its level as the ballot of the nodes that opened (`FGBDTBallotLib.aheadBallot`).
    /// @param ahead 4 bytes per node open at `level - 1` (2 per child, left first), increasing id; at a root, its
    ///        2 bytes.
    /// @param previous The open mask of `level - 1` (0 at a root).
    /// @param mask The open mask of `level`.
    /// @param level The level that opened.
    /// @return ballot 2 bytes per node open at `level`, increasing id.
    function aheadBallot(bytes calldata ahead, uint256 previous, uint256 mask, uint256 level)
        external
        pure
        returns (bytes memory ballot)
    {
        return FGBDTBallotLib.aheadBallot(ahead, previous, mask, level);
    }

    /// @notice Best split of a node over its candidates' aggregated histograms (flattened `k * nbins + b`).
    /// @param g Gradient sums per candidate and slot.
    /// @param h Hessian sums per candidate and slot.
    /// @param n Row counts per candidate and slot.
    /// @param nbins Slots per candidate (bins + 1, slot 0 = missing values).
    /// @param lambda L2 regularisation.
    /// @param minRows Minimum rows on each side.
    /// @param hessianMode 0: hessian sums; 1: counts times 1e18.
    /// @return found False when the node becomes a leaf.
    /// @return split The split (rank, threshold, gain and side sums); zero when not found.
    function bestSplit(
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n,
        uint256 nbins,
        int256 lambda,
        int256 minRows,
        uint8 hessianMode
    ) external pure returns (bool found, FGBDTMathLib.Split memory split) {
        (found, split) = FGBDTMathLib.bestSplit(g, h, n, nbins, lambda, minRows, hessianMode);
        if (!found) delete split;
    }
}
