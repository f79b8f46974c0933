// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTMathLib} from "../../contracts/FGBDTMath.sol";
import {FGBDTPayoutLib} from "../../contracts/FGBDTPayout.sol";
import {Member} from "../../contracts/FGBDTMember.sol";
import {vm} from "./Vm.sol";

/// @notice Symbolic checks (halmos: every input symbolic, every path explored, no sampling) of the arithmetic that
///         must neither overflow nor lose precision within the ranges the histogram rules admit. The ranges: a
///         node holds at most 2^40 rows (a trillion); a row's gradient is at most 2^20 in magnitude and its hessian
///         at most 1 (logistic loss: |g| <= 1, h <= 1/4; squared error: h = 1; count mode: 1 per row), so a side's
///         |G| <= 2^60 * 1e18 < 2^120 and 0 <= H <= 2^40 * 1e18 < 2^100; lambda up to 2^100, a learning rate up to
///         2^64 (18.4); rewards below 2^128 wei (`createTask` refuses more). A revert (overflow panic 0x11, division
///         by zero 0x12) counts as a failure (`--panic-error-codes`), as does a failed `assert`.
///         A gradient sum enters as a magnitude and a sign (`_signed`), so that every path has a term of known sign
///         to square, and the references in the assertions are computed without checked multiplication (each
///         product is below 2^256 by the ranges, argued where it is made), so the only checked multiplications the
///         solver meets are the contract's own (tests/foundry/halmos_solver.py says how its queries are proven).
///         `make test` runs squareLemma (without the solver's squaring step, which rests on it), then sideScore,
///         splitGain, leafValue, payout and splitShapley2 (docs/contract-checks.md).
contract SymbolicTest {
    int256 internal constant ONE = 1e18;
    int256 internal constant MAX_G = 2 ** 120;
    int256 internal constant MAX_H = 2 ** 100;
    int256 internal constant MAX_LAMBDA = 2 ** 100;
    int256 internal constant MAX_LR = 2 ** 64;

    mapping(address => Member) internal members;
    address[] internal parties;
    mapping(address => uint256) internal owed;

    function _side(int256 g, int256 h) internal pure {
        vm.assume(g >= -MAX_G && g <= MAX_G && h >= 0 && h <= MAX_H);
    }

    /// @dev A gradient sum of magnitude `a` and the sign `negative`: each path of a check sees `a` or `-a`, a term of
    ///      known sign, which the solver's integer encoding reasons about where a term of either sign defeats it.
    function _signed(uint256 a, bool negative) internal pure returns (int256) {
        vm.assume(a <= uint256(MAX_G));
        return negative ? -int256(a) : int256(a);
    }

    /// @dev `h + lambda` within the ranges, below 2^101.
    function _denominator(int256 h, int256 lam) internal pure returns (uint256) {
        vm.assume(h >= 0 && h <= MAX_H && lam >= 0 && lam <= MAX_LAMBDA);
        return uint256(h + lam);
    }

    /// @notice A side's score `g^2 / (h + lambda)` does not overflow, is not negative and is the exact square divided
    ///         by `d = h + lambda` (the EVM's division: the floor, both being non-negative), 0 when `d` is 0. The
    ///         reference `a * a` is exact: `a <= 2^120` squares below 2^240.
    function check_sideScore(uint256 a, bool negative, int256 h, int256 lam) public pure {
        int256 g = _signed(a, negative);
        uint256 d = _denominator(h, lam);
        int256 s = FGBDTMathLib.sideScore(g, h, lam);
        unchecked {
            assert(d == 0 ? s == 0 : s >= 0 && s == int256(a * a) / int256(d));
        }
    }

    /// @notice Equation 7 of a split does not overflow and is the sum of both sides' exact squares, each divided by
    ///         its `h + lambda` (0 where that is 0), whatever the signs of the two gradient sums.
    function check_splitGain(uint256 aL, bool negL, int256 hL, uint256 aR, bool negR, int256 hR, int256 lam)
        public
        pure
    {
        int256 gL = _signed(aL, negL);
        int256 gR = _signed(aR, negR);
        uint256 dL = _denominator(hL, lam);
        uint256 dR = _denominator(hR, lam);
        int256 gain = FGBDTMathLib.splitGain(gL, hL, gR, hR, lam);
        unchecked {
            int256 left = dL == 0 ? int256(0) : int256(aL * aL) / int256(dL);
            int256 right = dR == 0 ? int256(0) : int256(aR * aR) / int256(dR);
            // each below 2^240, so the sum is exact
            assert(left >= 0 && right >= 0 && gain == left + right);
        }
    }

    /// @notice A leaf value `-G * lr / (H + lambda)` does not overflow, has the sign opposite to G's and is the
    ///         exact product `-G * lr` divided by `d` (the EVM's signed division: truncated toward zero), 0 when `d`
    ///         is 0. The reference `a * lr` is exact: below 2^120 * 2^64 = 2^184.
    function check_leafValue(uint256 a, bool negative, int256 h, int256 lam, int256 lr) public pure {
        int256 g = _signed(a, negative);
        uint256 d = _denominator(h, lam);
        vm.assume(lr > 0 && lr <= MAX_LR);
        int256 v = FGBDTMathLib.leafValue(g, h, lam, lr);
        unchecked {
            int256 num = negative ? int256(a * uint256(lr)) : -int256(a * uint256(lr));
            assert(d == 0 ? v == 0 : v == num / int256(d) && (negative ? v >= 0 : v <= 0));
        }
    }

    /// @notice The squaring lemma the solver applies to every other check's queries (tests/foundry/halmos_solver.py,
    ///         which `make symbolic` runs on this check without it): a `t` with `|t| <= 2^121` squares without
    ///         overflow to at most 2^242, not negative, 0 only for `t = 0`, and `(t * t) / t == t` for `t != 0`.
    ///         Every such `t` is `a` or `-a` for an `a <= 2^121`, so the check over both covers the whole range.
    function check_squareLemma(uint256 a, bool negative) public pure {
        vm.assume(a <= 2 ** 121);
        int256 t = negative ? -int256(a) : int256(a);
        int256 s = t * t;
        assert(s >= 0 && s <= 2 ** 242 && (t != 0 || s == 0));
        if (t != 0) assert(s / t == t);
    }

    /// @notice Two parties' exact split Shapley values do not overflow, sum to the grand coalition's gain within
    ///         one unit each (each is truncated once), and the gain is equation 7 of the summed sides. Every sum the
    ///         contract squares is a coalition's gradient sum, at most 2^121 in magnitude: the squaring lemma's. The
    ///         coalition loops run three times each (2^2 - 1 coalitions), which `--loop 4` unrolls in full. halmos's
    ///         branching solver (z3) gets 10 ms per branch instead of 1: it then drops most infeasible overflow
    ///         branches itself (about 1,100 paths instead of 3,600), each of which would otherwise be a query to
    ///         prove; a branch it cannot decide in that time is still explored, so no path is lost.
    /// @custom:halmos --loop 4 --solver-timeout-branching 10ms
    function check_splitShapley2(
        int256 gL0,
        int256 hL0,
        int256 gR0,
        int256 hR0,
        int256 gL1,
        int256 hL1,
        int256 gR1,
        int256 hR1,
        int256 lam
    ) public pure {
        _side(gL0, hL0);
        _side(gR0, hR0);
        _side(gL1, hL1);
        _side(gR1, hR1);
        vm.assume(lam >= 0 && lam <= MAX_LAMBDA);
        int256[] memory gl = new int256[](2);
        int256[] memory hl = new int256[](2);
        int256[] memory gr = new int256[](2);
        int256[] memory hr = new int256[](2);
        (gl[0], hl[0], gr[0], hr[0], gl[1], hl[1], gr[1], hr[1]) = (gL0, hL0, gR0, hR0, gL1, hL1, gR1, hR1);
        (int256 gain, int256[] memory phi) = FGBDTMathLib.splitShapley(gl, hl, gr, hr, lam);
        assert(gain == FGBDTMathLib.splitGain(gL0 + gL1, hL0 + hL1, gR0 + gR1, hR0 + hR1, lam));
        int256 gap = phi[0] + phi[1] - gain;
        assert(gap > -2 && gap < 2);
    }

    /// @notice The reward split of two parties: no overflow, nobody paid more than its share, nothing paid beyond
    ///         the reward, and (while the positive total stays below 2^128, so no shift) less than one wei per party
    ///         lost to rounding; a party that left is paid nothing and the requester gets the rest. With the total
    ///         shifted right by `s` so that it fits 128 bits, a party's share is `c >> s` of `total >> s`, and its
    ///         amount is that share of the reward, rounded down. Contributions below 2^129 each make at most two
    ///         shifts, which `--loop 3` unrolls in full; the differential test `test_payout` covers totals up to
    ///         int256's ends.
    ///         Two parties lose nothing of the rule: `payout` treats every party alike, its amount depending only on
    ///         its own contribution, the positive total and the shift; party 1 takes each role (paid, nothing to be
    ///         paid, left) beside a party 0 of either sign, and the reward's bound, the one property over several
    ///         parties, is the same sum of rounded-down shares, whose shares add up to at most the total, for any
    ///         number of parties.
    /// @dev Two lemmas come first, each proven on its own and then a fact of the path: the shifted shares add up to
    ///      at most the shifted total (bit arithmetic, no product), and each amount times the shifted total is within
    ///      one shifted total below the reward times its shifted share (the floor of the quotient). The reward's
    ///      bound then follows from their sum without the solver dividing again. The reference arithmetic is
    ///      unchecked: every value is below 2^130 and both factors of each product are below 2^128 (an amount is
    ///      asserted at most the reward), so no product reaches 2^256.
    /// @custom:halmos --loop 3
    function check_payout(int256 c0, int256 c1, uint256 reward, bool left1) public {
        vm.assume(reward < 2 ** 128);
        vm.assume(c0 < 2 ** 129 && c1 < 2 ** 129 && c0 > -(2 ** 129) && c1 > -(2 ** 129));
        int256[2] memory c = [c0, c1];
        delete parties;
        for (uint256 p = 0; p < 2; ++p) {
            address a = address(uint160(0x1000 + p));
            parties.push(a);
            members[a].contribution = c[p];
            members[a].histStep = p == 1 && left1 ? 1 : 2;
        }
        address requester = address(0x2000);
        FGBDTPayoutLib.payout(members, parties, owed, 1, reward, requester, 2);
        unchecked {
            // the shares are of every positive total, a forfeited one's included
            uint256 positive;
            for (uint256 p = 0; p < 2; ++p) {
                if (c[p] > 0) positive += uint256(c[p]);
            }
            uint256 shift;
            while ((positive >> shift) >= 2 ** 128) ++shift;
            uint256 total = positive >> shift;
            uint256 shares;
            for (uint256 p = 0; p < 2; ++p) {
                if (c[p] > 0) shares += uint256(c[p]) >> shift;
            }
            assert(shares <= total && (positive == 0 || total > 0));
            uint256 paid;
            for (uint256 p = 0; p < 2; ++p) {
                uint256 amount = owed[parties[p]];
                if (c[p] <= 0 || (p == 1 && left1)) {
                    assert(amount == 0);
                    continue;
                }
                uint256 exact = reward * (uint256(c[p]) >> shift);
                uint256 back = amount * total;
                assert(amount <= reward && back <= exact && exact - back < total);
                paid += amount;
            }
            assert(paid + owed[requester] == reward);
        }
    }
}
