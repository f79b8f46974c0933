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

    /// @notice A side's score `g^2 / (h + lambda)` does not overflow and is the exact floor of the quotient.
    function check_sideScore(int256 g, int256 h, int256 lam) public pure {
        _side(g, h);
        vm.assume(lam >= 0 && lam <= MAX_LAMBDA);
        int256 s = FGBDTMathLib.sideScore(g, h, lam);
        int256 d = h + lam;
        if (d == 0) {
            assert(s == 0);
        } else {
            assert(s >= 0 && s * d <= g * g && g * g - s * d < d);
        }
    }

    /// @notice Equation 7 of a split (both sides' scores) does not overflow and is their exact sum.
    function check_splitGain(int256 gL, int256 hL, int256 gR, int256 hR, int256 lam) public pure {
        _side(gL, hL);
        _side(gR, hR);
        vm.assume(lam >= 0 && lam <= MAX_LAMBDA);
        int256 gain = FGBDTMathLib.splitGain(gL, hL, gR, hR, lam);
        assert(gain == FGBDTMathLib.sideScore(gL, hL, lam) + FGBDTMathLib.sideScore(gR, hR, lam));
        assert(gain >= 0);
    }

    /// @notice A leaf value `-G * lr / (H + lambda)` does not overflow and is the quotient truncated toward zero.
    function check_leafValue(int256 g, int256 h, int256 lam, int256 lr) public pure {
        _side(g, h);
        vm.assume(lam >= 0 && lam <= MAX_LAMBDA && lr > 0 && lr <= MAX_LR);
        int256 v = FGBDTMathLib.leafValue(g, h, lam, lr);
        int256 d = h + lam;
        if (d == 0) {
            assert(v == 0);
        } else {
            int256 num = -g * lr;
            int256 rem = num - v * d;
            assert(rem > -d && rem < d);
            assert(rem == 0 || (rem > 0) == (num > 0));
        }
    }

    /// @notice Two parties' exact split Shapley values do not overflow, sum to the grand coalition's gain within
    ///         one unit each (each is truncated once), and the gain is equation 7 of the summed sides.
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

    /// @notice The reward split of three parties: no overflow, nobody paid more than its share, nothing paid beyond
    ///         the reward, and (while the positive totals stay below 2^128, so no shift) less than one wei per party
    ///         lost to rounding; a party that left is paid nothing and the requester gets the rest. Totals below 2^128
    ///         each keep the shift loop within halmos's unrolling bound (at most two shifts), so every path is
    ///         explored; the differential test `test_payout` covers totals up to int256's ends.
    function check_payout(int256 c0, int256 c1, int256 c2, uint256 reward, bool left1) public {
        vm.assume(reward < 2 ** 128);
        vm.assume(c0 < 2 ** 128 && c1 < 2 ** 128 && c2 < 2 ** 128);
        vm.assume(c0 > -(2 ** 128) && c1 > -(2 ** 128) && c2 > -(2 ** 128));
        int256[3] memory c = [c0, c1, c2];
        delete parties;
        for (uint256 p = 0; p < 3; ++p) {
            address a = address(uint160(0x1000 + p));
            parties.push(a);
            members[a].contribution = c[p];
            members[a].histStep = p == 1 && left1 ? 1 : 2;
        }
        address requester = address(0x2000);
        FGBDTPayoutLib.payout(members, parties, owed, 1, reward, requester, 2);
        uint256 positive;
        uint256 paid;
        for (uint256 p = 0; p < 3; ++p) {
            uint256 amount = owed[parties[p]];
            // the shares are of every positive total, a forfeited one's included
            if (c[p] > 0) positive += uint256(c[p]);
            if (c[p] <= 0 || (p == 1 && left1)) assert(amount == 0);
            paid += amount;
        }
        assert(paid + owed[requester] == reward);
        if (positive > 0 && positive < 2 ** 128) {
            for (uint256 p = 0; p < 3; ++p) {
                if (c[p] > 0 && !(p == 1 && left1)) {
                    uint256 exact = reward * uint256(c[p]);
                    assert(owed[parties[p]] * positive <= exact && exact - owed[parties[p]] * positive < positive);
                }
            }
        }
    }
}
