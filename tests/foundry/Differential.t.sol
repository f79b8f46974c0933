// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTEstimateLib} from "../../contracts/FGBDTEstimate.sol";
import {FGBDTMath, FGBDTMathLib} from "../../contracts/FGBDTMath.sol";
import {FGBDTRulesLib} from "../../contracts/FGBDTRules.sol";
import {FGBDTPayoutLib} from "../../contracts/FGBDTPayout.sol";
import {Member} from "../../contracts/FGBDTMember.sol";
import {vm, console} from "./Vm.sol";

/// @notice Differential tests of `FGBDTMath`, `FGBDTRules` and the payout rule against the Python reference
///         (`ledger/spec/reference.py`, `ledger/spec/histogram_rules.py`): each test asks
///         `tests/foundry/reference_vectors.py` (through `ffi`) for random cases near the limits of every field with
///         the reference's answers, runs each through the contract and requires the same value, or exactly the revert
///         the reference's error stands for. `FGBDT_DIFF_CASES` cases per property (300 by default), from
///         `FGBDT_DIFF_SEED`.
/// @notice The linked estimate library behind an external call, so that a test sees its outcome and revert data.
contract EstimateHarness {
    function splitShapleyEstimate(
        int256[] memory gL,
        int256[] memory hL,
        int256[] memory gR,
        int256[] memory hR,
        int256 lam,
        uint256 seed,
        uint256 permutations
    ) external pure returns (int256, int256[] memory) {
        return FGBDTEstimateLib.splitShapleyEstimate(gL, hL, gR, hR, lam, seed, permutations);
    }
}

contract DifferentialTest {
    /// @notice The contract and the reference disagree on case `index`.
    error Disagree(uint256 index, bytes want, bytes got);

    bytes internal constant PANIC_OVERFLOW = abi.encodeWithSignature("Panic(uint256)", 0x11);

    FGBDTMath internal math;
    EstimateHarness internal estimate;

    struct GainCase {
        int256 gL;
        int256 hL;
        int256 gR;
        int256 hR;
        int256 lam;
        bytes err;
        int256 want;
    }

    struct LeafCase {
        int256 g;
        int256 h;
        int256 lam;
        int256 lr;
        bytes err;
        int256 want;
    }

    struct ShapleyCase {
        int256[] gL;
        int256[] hL;
        int256[] gR;
        int256[] hR;
        int256 lam;
        bytes err;
        bool allowPanic;
        int256 gain;
        int256[] phi;
    }

    struct EstimateCase {
        int256[] gL;
        int256[] hL;
        int256[] gR;
        int256[] hR;
        int256 lam;
        uint256 seed;
        uint256 permutations;
        bytes err;
        int256 gain;
        int256[] phi;
    }

    struct SplitCase {
        int256[] g;
        int256[] h;
        int256[] n;
        uint256 nbins;
        int256 lam;
        int256 minRows;
        uint8 mode;
        bytes err;
        bool found;
        uint256 rank;
        uint256 threshold;
        int256 gain;
        int256[6] sides;
    }

    struct Top2Case {
        int256[] votes;
        uint256 numFeatures;
        uint8 rule;
        uint256 tree;
        uint256 node;
        bytes err;
        uint256 first;
        uint256 second;
    }

    struct LevelTop2Case {
        bytes ballots;
        uint256 numFeatures;
        uint8 rule;
        uint256 tree;
        uint256 level;
        uint256 mask;
        bytes err;
        uint256[] fixed_;
    }

    struct RulesCase {
        int256[] data;
        uint256 nbins;
        uint256 base;
        uint256 mask;
        uint8 bounds;
        bool firstTree;
        bytes err;
        int256[] totals;
    }

    struct PayoutCase {
        int256[] totals;
        bool[] finished;
        uint256 reward;
        bytes err;
        uint256[] paid;
        uint256 requester;
    }

    // the payout rule runs in this contract's storage (FGBDTPayoutLib takes the task's records by reference)
    mapping(address => Member) internal members;
    address[] internal parties;
    mapping(address => uint256) internal owed;

    function setUp() public {
        math = new FGBDTMath();
        estimate = new EstimateHarness();
    }

    function _cases(string memory kind) internal returns (bytes memory) {
        string[] memory cmd = new string[](5);
        cmd[0] = vm.envOr("FGBDT_PYTHON", string(".venv/bin/python"));
        cmd[1] = "tests/foundry/reference_vectors.py";
        cmd[2] = kind;
        cmd[3] = vm.toString(vm.envOr("FGBDT_DIFF_CASES", uint256(300)));
        cmd[4] = vm.toString(vm.envOr("FGBDT_DIFF_SEED", uint256(1)));
        return vm.ffi(cmd);
    }

    /// @dev The call's outcome as the cases state it: empty on success, else the revert data.
    function _check(uint256 i, bool ok, bytes memory got, bytes memory wantErr, bytes memory wantOut) internal pure {
        if (ok ? wantErr.length != 0 || keccak256(got) != keccak256(wantOut) : keccak256(got) != keccak256(wantErr)) {
            revert Disagree(i, wantErr.length != 0 ? wantErr : wantOut, got);
        }
    }

    /// @dev Memory the loop body allocated is given back after each case, so that thousands of cases cost no more
    ///      memory (and gas) than one.
    function _mark() internal pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := mload(0x40)
        }
    }

    function _release(uint256 p) internal pure {
        assembly ("memory-safe") {
            mstore(0x40, p)
        }
    }

    /// @notice Equation 7 (`splitGain`) as `reference.split_gain`.
    function test_splitGain() public {
        GainCase[] memory cs = abi.decode(_cases("gain"), (GainCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            GainCase memory c = cs[i];
            (bool ok, bytes memory got) =
                address(math).staticcall(abi.encodeCall(math.splitGain, (c.gL, c.hL, c.gR, c.hR, c.lam)));
            _check(i, ok, got, c.err, abi.encode(c.want));
            _release(m);
        }
        console.log("splitGain cases", cs.length);
    }

    /// @notice Leaf values (`leafValue`) as `reference.leaf_value`.
    function test_leafValue() public {
        LeafCase[] memory cs = abi.decode(_cases("leaf"), (LeafCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            LeafCase memory c = cs[i];
            (bool ok, bytes memory got) =
                address(math).staticcall(abi.encodeCall(math.leafValue, (c.g, c.h, c.lam, c.lr)));
            _check(i, ok, got, c.err, abi.encode(c.want));
            _release(m);
        }
        console.log("leafValue cases", cs.length);
    }

    /// @notice Exact split Shapley values (`splitShapley`) as `reference.split_shapley`; where a coalition's utility
    ///         may pass 2^190 the contract may also panic on an accumulator the reference does not check.
    function test_splitShapley() public {
        ShapleyCase[] memory cs = abi.decode(_cases("shapley"), (ShapleyCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            ShapleyCase memory c = cs[i];
            (bool ok, bytes memory got) =
                address(math).staticcall(abi.encodeCall(math.splitShapley, (c.gL, c.hL, c.gR, c.hR, c.lam)));
            if (!(c.allowPanic && !ok && keccak256(got) == keccak256(PANIC_OVERFLOW))) {
                _check(i, ok, got, c.err, abi.encode(c.gain, c.phi));
            }
            _release(m);
        }
        console.log("splitShapley cases", cs.length);
    }

    /// @notice Estimated split Shapley values (`FGBDTEstimateLib.splitShapleyEstimate`) as
    ///         `shapley_estimate.split_shapley_estimate`: the same values, or the overflow panic where the reference
    ///         raises, with no allowance.
    function test_splitShapleyEstimate() public {
        EstimateCase[] memory cs = abi.decode(_cases("estimate"), (EstimateCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            EstimateCase memory c = cs[i];
            (bool ok, bytes memory got) = address(estimate).staticcall(
                abi.encodeCall(
                    estimate.splitShapleyEstimate, (c.gL, c.hL, c.gR, c.hR, c.lam, c.seed, c.permutations)
                )
            );
            _check(i, ok, got, c.err, abi.encode(c.gain, c.phi));
            _release(m);
        }
        console.log("splitShapleyEstimate cases", cs.length);
    }

    /// @notice The best split (`bestSplit`) as `reference.best_split`.
    function test_bestSplit() public {
        SplitCase[] memory cs = abi.decode(_cases("split"), (SplitCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            SplitCase memory c = cs[i];
            (bool ok, bytes memory got) = address(math).staticcall(
                abi.encodeCall(math.bestSplit, (c.g, c.h, c.n, c.nbins, c.lam, c.minRows, c.mode))
            );
            FGBDTMathLib.Split memory want = FGBDTMathLib.Split(
                c.rank, c.threshold, c.gain, c.sides[0], c.sides[1], c.sides[2], c.sides[3], c.sides[4], c.sides[5]
            );
            _check(i, ok, got, c.err, abi.encode(c.found, want));
            _release(m);
        }
        console.log("bestSplit cases", cs.length);
    }

    /// @notice A node's two candidates from votes (`top2`, with its tie keys) as `reference.top2`.
    function test_top2() public {
        Top2Case[] memory cs = abi.decode(_cases("top2"), (Top2Case[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            Top2Case memory c = cs[i];
            (bool ok, bytes memory got) = address(math).staticcall(
                abi.encodeCall(math.top2, (c.votes, c.numFeatures, c.rule, c.tree, c.node))
            );
            _check(i, ok, got, c.err, abi.encode(c.first, c.second));
            _release(m);
        }
        console.log("top2 cases", cs.length);
    }

    /// @notice Every open node's candidates from packed ballots (`levelTop2`) as `reference.top2` node by node.
    function test_levelTop2() public {
        LevelTop2Case[] memory cs = abi.decode(_cases("levelTop2"), (LevelTop2Case[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            LevelTop2Case memory c = cs[i];
            (bool ok, bytes memory got) = address(FGBDTMathLib).staticcall(
                abi.encodeWithSelector(
                    FGBDTMathLib.levelTop2.selector, c.ballots, c.numFeatures, c.rule, c.tree, c.level, c.mask
                )
            );
            _check(i, ok, got, c.err, abi.encode(c.fixed_));
            _release(m);
        }
        console.log("levelTop2 cases", cs.length);
    }

    /// @notice A level's exact histogram rules (`checkLevel`) as `histogram_rules.check_node` node by node: the same
    ///         totals, or the same named error at the same node and slot.
    function test_checkLevel() public {
        RulesCase[] memory cs = abi.decode(_cases("rules"), (RulesCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            RulesCase memory c = cs[i];
            (bool ok, bytes memory got) = address(FGBDTRulesLib).staticcall(
                abi.encodeWithSelector(
                    FGBDTRulesLib.checkLevel.selector, c.data, c.nbins, c.base, c.mask, c.bounds, c.firstTree
                )
            );
            _check(i, ok, got, c.err, abi.encode(c.totals));
            _release(m);
        }
        console.log("checkLevel cases", cs.length);
    }

    /// @notice The payouts of a completed task (`FGBDTPayoutLib.payout`) as `reference.payouts`: each finished
    ///         party's pro-rata share, nothing for one that left, the rest to the requester.
    function test_payout() public {
        PayoutCase[] memory cs = abi.decode(_cases("payout"), (PayoutCase[]));
        for (uint256 i = 0; i < cs.length; ++i) {
            uint256 m = _mark();
            PayoutCase memory c = cs[i];
            (bool ok, bytes memory got) = address(this).call(abi.encodeCall(this.payoutCase, (i, c)));
            _check(i, ok, got, c.err, abi.encode(c.paid, c.requester));
            _release(m);
        }
        console.log("payout cases", cs.length);
    }

    /// @dev One payout case in this contract's storage, with addresses of its own: what each party and the requester
    ///      are owed.
    function payoutCase(uint256 index, PayoutCase calldata c) external returns (uint256[] memory paid, uint256 rest) {
        uint256 step = 9;
        delete parties;
        for (uint256 p = 0; p < c.totals.length; ++p) {
            address a = address(uint160(uint256(keccak256(abi.encode(index, p)))));
            parties.push(a);
            members[a].contribution = c.totals[p];
            members[a].histStep = c.finished[p] ? uint32(step) : uint32(step - 1);
        }
        address requester = address(uint160(uint256(keccak256(abi.encode(index, "requester")))));
        FGBDTPayoutLib.payout(members, parties, owed, index, c.reward, requester, step);
        paid = new uint256[](c.totals.length);
        for (uint256 p = 0; p < c.totals.length; ++p) paid[p] = owed[parties[p]];
        rest = owed[requester];
    }
}
