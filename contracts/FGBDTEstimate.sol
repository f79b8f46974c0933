// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTMathLib} from "./FGBDTMath.sol";

/// @title FGBDTEstimateLib
/// @notice Split Shapley values beyond the exact size, estimated from random orders of the parties, exactly
///         `ledger/spec/shapley_estimate.py` (`split_shapley_estimate`, `node_seed`, `permutation`): in each of
///         `PERMUTATIONS` orders every party is credited its marginal gain `u(B + p) - u(B)` (B the parties before it),
///         and its value is the sum over the orders divided by their number, truncated toward zero. The marginals of
///         one order add up to the grand coalition's gain, so the values keep efficiency up to M units; Hoeffding's
///         inequality bounds every party's error by `S * sqrt(ln(2M / delta) / (2K))` with probability `1 - delta`
///         (`S` the width of the marginals' range; the Python module states and derives it).
/// @dev Public: deployed once and linked (the task contract must stay under EIP-170's 24 KB). The orders come from
///      keccak256 of the node's seed, itself keccak256 of the task's seed (the hash of the block that holds `start`,
///      unknown to whoever sends it, after every party committed its data; `FGBDTChain._fixSeed`), the tree and the
///      node: nobody who sends a transaction can steer them, and every verifier and the audit draw the same ones.
library FGBDTEstimateLib {
    /// @notice The largest federation whose split Shapley values are exact (`FGBDTMathLib.splitShapley`).
    uint256 internal constant EXACT_MAX_PARTIES = 12;
    /// @notice K, the orders each estimated split draws: `ceil(ln(2 * 64 / 0.01) / (2 * 0.115^2))`, Hoeffding's count
    ///         for delta = 0.01 and a tolerance of 0.115 of the marginals' range at the largest federation (64).
    uint256 internal constant PERMUTATIONS = 358;

    /// @notice The seed of one node's orders: `uint256(keccak256(abi.encode(taskSeed, tree, node)))`.
    function nodeSeed(uint256 taskSeed, uint256 tree, uint256 node) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(taskSeed, tree, node)));
    }

    /// @notice Estimated split Shapley values of M parties at a fixed split, and the grand coalition's gain.
    /// @dev Order k is Fisher-Yates over 0..M-1: position i (from M - 1 down to 1) swaps with
    ///      `uint256(keccak256(abi.encode(seed, k, i))) % (i + 1)`. Every sum is checked (a revert where the reference
    ///      raises `FixedPointOverflow`).
    /// @param gL Per-party gradient sums of the left side (fixed point).
    /// @param hL Per-party hessian sums (or counts times 1e18) of the left side.
    /// @param gR Per-party gradient sums of the right side.
    /// @param hR Per-party hessian sums (or counts times 1e18) of the right side.
    /// @param lam L2 regularisation.
    /// @param seed The node's seed (`nodeSeed`).
    /// @param permutations K, the number of orders (at least one).
    /// @return gain Equation 7 of the summed sides.
    /// @return phi The parties' estimated Shapley values, in input order, truncated toward zero.
    function splitShapleyEstimate(
        int256[] memory gL,
        int256[] memory hL,
        int256[] memory gR,
        int256[] memory hR,
        int256 lam,
        uint256 seed,
        uint256 permutations
    ) public pure returns (int256 gain, int256[] memory phi) {
        uint256 m = gL.length;
        if (hL.length != m || gR.length != m || hR.length != m) revert FGBDTMathLib.ShapleyLengthMismatch();
        phi = new int256[](m);
        if (m == 0) return (0, phi);
        uint256[] memory order = new uint256[](m);
        // each party's four sums side by side (gL, hL, gR, hR): one pointer per party in the loop below, which keeps
        // fewer variables live (measured: 1% less gas than four arrays at M = 64)
        int256[] memory sides = new int256[](4 * m);
        for (uint256 p = 0; p < m; ++p) {
            (sides[4 * p], sides[4 * p + 1], sides[4 * p + 2], sides[4 * p + 3]) = (gL[p], hL[p], gR[p], hR[p]);
        }
        // below these bounds no coalition's gradient square (|G| < 2^127), hessian plus lambda (< 2^253) or score
        // (< 2^254 per side) can leave int256, so the loop below skips those checks (same values, same reverts)
        bool safe = _below(gL, 2 ** 127) &&
            _below(gR, 2 ** 127) &&
            _below(hL, 2 ** 252) &&
            _below(hR, 2 ** 252) &&
            lam > -(2 ** 252) &&
            lam < 2 ** 252;
        // in assembly: the same checked int256 steps as Solidity 0.8's (a panic 0x11 where it would overflow), at a
        // sixth of the gas of the checked Solidity loop (measured 2,700 gas per party and order at M = 64)
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
            let ord := add(order, 0x20)
            let end := add(ord, shl(5, m))
            let sd := add(sides, 0x20)
            let pd := add(phi, 0x20)
            // scratch for keccak256(abi.encode(seed, k, i)): the free memory, which nothing allocates from here on
            let scratch := mload(0x40)
            mstore(scratch, seed)
            for {
                let k := 0
            } lt(k, permutations) {
                k := add(k, 1)
            } {
                for {
                    let q := ord
                } lt(q, end) {
                    q := add(q, 0x20)
                } {
                    mstore(q, shr(5, sub(q, ord)))
                }
                mstore(add(scratch, 0x20), k)
                for {
                    let i := sub(m, 1)
                } gt(i, 0) {
                    i := sub(i, 1)
                } {
                    mstore(add(scratch, 0x40), i)
                    let j := mod(keccak256(scratch, 0x60), add(i, 1))
                    let a := add(ord, shl(5, i))
                    let b := add(ord, shl(5, j))
                    let v := mload(a)
                    mstore(a, mload(b))
                    mstore(b, v)
                }
                let a1 := 0
                let a2 := 0
                let a3 := 0
                let a4 := 0
                let before := 0
                switch safe
                case 0 {
                    for {
                        let q := ord
                    } lt(q, end) {
                        q := add(q, 0x20)
                    } {
                        let p := mload(q)
                        let base := add(sd, shl(7, p))
                        a1 := addc(a1, mload(base))
                        a2 := addc(a2, mload(add(base, 0x20)))
                        a3 := addc(a3, mload(add(base, 0x40)))
                        a4 := addc(a4, mload(add(base, 0x60)))
                        let u := addc(side(a1, a2, lam), side(a3, a4, lam))
                        // u and before are both in [0, 2^255 - 1]: their difference cannot overflow
                        let slot := add(pd, shl(5, p))
                        mstore(slot, addc(mload(slot), sub(u, before)))
                        before := u
                    }
                }
                default {
                    // every coalition's |sums| below the bounds `safe` checked: no sum, square or score can
                    // overflow, so only the accumulators are checked
                    for {
                        let q := ord
                    } lt(q, end) {
                        q := add(q, 0x20)
                    } {
                        let p := mload(q)
                        let base := add(sd, shl(7, p))
                        a1 := add(a1, mload(base))
                        a2 := add(a2, mload(add(base, 0x20)))
                        a3 := add(a3, mload(add(base, 0x40)))
                        a4 := add(a4, mload(add(base, 0x60)))
                        let u := 0
                        let d := add(a2, lam)
                        if sgt(d, 0) {
                            u := sdiv(mul(a1, a1), d)
                        }
                        d := add(a4, lam)
                        if sgt(d, 0) {
                            u := add(u, sdiv(mul(a3, a3), d))
                        }
                        let slot := add(pd, shl(5, p))
                        let x := mload(slot)
                        let y := sub(u, before)
                        let z := add(x, y)
                        if and(eq(slt(x, 0), slt(y, 0)), iszero(eq(slt(z, 0), slt(x, 0)))) {
                            panic()
                        }
                        mstore(slot, z)
                        before := u
                    }
                }
                gain := before
            }
        }
        // permutations is a count of orders the caller fixes (PERMUTATIONS), far below 2^255
        // forge-lint: disable-next-line(unsafe-typecast)
        int256 k = int256(permutations);
        for (uint256 p = 0; p < m; ++p) phi[p] = phi[p] / k;
    }

    /// @dev Whether the magnitudes of `xs` add up to less than `bound` (at most 2^252).
    function _below(int256[] memory xs, uint256 bound) private pure returns (bool) {
        uint256 total = 0;
        for (uint256 i = 0; i < xs.length; ++i) {
            int256 x = xs[i];
            if (x == type(int256).min) return false;
            // |x| < 2^255 and total < bound <= 2^252: the sum fits
            total += uint256(x < 0 ? -x : x);
            if (total >= bound) return false;
        }
        return true;
    }
}
