// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTConfigLib} from "../../contracts/FGBDTConfig.sol";
import {FGBDTEndorseLib} from "../../contracts/FGBDTEndorse.sol";
import {IFGBDTEvents} from "../../contracts/FGBDTEvents.sol";
import {FGBDTCommitLib} from "../../contracts/FGBDTCommit.sol";
import {FGBDTRulesLib} from "../../contracts/FGBDTRules.sol";
import {Membership} from "../../contracts/FGBDTMember.sol";
import {Status, Phase} from "../../contracts/FGBDTTask.sol";
import {ReentrantRequester} from "../../contracts/test/ReentrantRequester.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {Federation} from "./Federation.sol";
import {Vm, vm} from "./Vm.sol";

/// @notice A requester whose address takes no ether: its refund cannot be sent.
contract Rejector {
    function openAndCancel(FGBDTChainLike target, FGBDTConfigLib.Config calldata cfg) external payable {
        int256[] memory lo = new int256[](1);
        int256[] memory hi = new int256[](1);
        hi[0] = 1e18;
        uint256 taskId = target.createTask{value: msg.value}(cfg, lo, hi, bytes32(0));
        target.cancel(taskId);
    }

    function withdraw(FGBDTChainLike target, uint256 taskId) external {
        target.withdraw(taskId);
    }
}

interface FGBDTChainLike {
    function createTask(FGBDTConfigLib.Config calldata, int256[] calldata, int256[] calldata, bytes32)
        external
        payable
        returns (uint256);
    function cancel(uint256) external;
    function withdraw(uint256) external;
}

/// @notice Every external function's guards under fuzzed callers, states and arguments. Each test computes, from the
///         task's state as its parties know it and the guard order the functions document, the one named error the
///         call must revert with (or none), makes the call and compares the revert data byte for byte: every custom
///         error is reached (`tests/contracts/test_contract_checks.py` checks each is named here) and nothing else
///         reverts (no panic, no other error).
contract GuardsTest is Federation {
    /// @notice The call did not revert as the guards say it must.
    error Unexpected(bytes want, bytes got);

    uint256 internal constant UNKNOWN = 1000;
    address internal constant OUTSIDER = address(0xBEEF);
    address internal constant REQUESTER = address(0xA11CE);

    // fixtures: one task per state, by kind
    uint256 internal constant OPEN = 0; // 1 approved (of 2 needed), 2 pending, 1 refused
    uint256 internal constant FULL = 1; // 4 approved (the most), 1 pending, 1 refused
    uint256 internal constant HASHED = 2; // open, 2 approved, its bin edges' hash fixed at creation
    uint256 internal constant VOTING = 3; // tree 0 level 0, party 0 voted
    uint256 internal constant HIST = 4; // tree 0 level 0 histograms, party 0 sent them
    uint256 internal constant RESOLVING = 5; // tree 0 level 0 resolving
    uint256 internal constant VOTING1 = 6; // tree 0 level 1 voting, party 2 left after level 0, party 0 voted
    uint256 internal constant HIST1 = 7; // tree 0 level 1 histograms (2 nodes), party 2 left
    uint256 internal constant DRAWN = 8; // tree 1 (drawn) level 0 histograms
    uint256 internal constant DONE = 9; // completed
    uint256 internal constant CANCELLED = 10;
    uint256 internal constant BINARY = 11; // binary logistic loss, tree 0 level 0 histograms
    uint256 internal constant FIXTURES = 12;

    /// @dev `testFuzz_shapleySeed`'s seed block, kept in storage: under viaIR a local copy of `block.number` may be
    ///      read again after `vm.roll`.
    uint256 internal seedBlock;

    function _violation(string memory why) internal pure override {
        revert(why);
    }

    function _guardConfig() internal pure returns (FGBDTConfigLib.Config memory c) {
        c.trees = 2;
        c.depth = 2;
        c.bins = 3;
        c.tieBreak = 1;
        c.votedTrees = 1;
        c.objective = 1;
        c.quorumNum = 1;
        c.quorumDen = 2;
        c.minParties = 2;
        c.maxParties = 4;
        c.joinBlocks = 50;
        c.stepBlocks = 10;
        c.lambda = ONE;
        c.learningRate = ONE / 10;
        c.minRows = 1;
        c.alpha = ONE / 2;
        c.refusalRate = ONE / 20;
        c.overlapThreshold = ONE / 2;
        c.labelMin = -ONE;
        c.labelMax = ONE;
    }

    function setUp() public {
        _deployChain();
        for (uint256 kind = 0; kind < FIXTURES; ++kind) _fixture(kind);
    }

    function _fixture(uint256 kind) internal {
        FGBDTConfigLib.Config memory cfg = _guardConfig();
        if (kind == BINARY) (cfg.objective, cfg.labelMin, cfg.labelMax) = (0, 0, ONE);
        uint256 i = _open(cfg, 3, 6, REQUESTER, 5 ether, 7 + kind);
        Fed storage f = feds[i];
        if (kind == HASHED) {
            // a second task, whose creation fixed the edges' hash, takes this fixture's place
            int256[] memory lo = new int256[](3);
            int256[] memory hi = new int256[](3);
            vm.deal(REQUESTER, 5 ether);
            vm.prank(REQUESTER);
            f.taskId = chain.createTask{value: 5 ether}(cfg, lo, hi, keccak256(_edges(3)));
            _sync(f);
        }
        for (uint256 c = 0; c < 5; ++c) _join(f, c);
        uint256 approved = kind == OPEN ? 1 : kind == FULL ? 4 : kind == HASHED ? 2 : 3;
        for (uint256 c = 0; c < approved; ++c) _approve(f, c);
        if (kind != FULL) _refuse(f, 4);
        if (kind <= HASHED) return;
        if (kind == CANCELLED) {
            vm.prank(REQUESTER);
            chain.cancel(f.taskId);
            _sync(f);
            return;
        }
        _start(f, 4);
        if (kind == VOTING) {
            _vote(f, 0, _randomVotes(f, 1, 1));
            return;
        }
        _allVote(f);
        if (kind == HIST || kind == BINARY) {
            _submit(f, 0, 0, 1, 0);
            return;
        }
        if (kind == RESOLVING || kind == VOTING1 || kind == HIST1) {
            _submit(f, 0, 0, 1, 0);
            _submit(f, 1, 0, 1, 0);
            if (kind == RESOLVING) _submit(f, 2, 0, 1, 0);
            else _decline(f, 2);
            if (kind == RESOLVING) return;
            _resolveNodes(f, _unresolved(f), OUTSIDER);
            require(f.level == 1 && f.phase == Phase.Voting, "the fixture's root did not split");
            if (kind == VOTING1) _vote(f, 0, _randomVotes(f, 2, 2));
            else _allVote(f);
            return;
        }
        while (f.tree == 0 || (kind == DONE && f.status == Status.Training)) _stepAll(f);
    }

    function _allVote(Fed storage f) internal {
        for (uint256 p = 0; p < f.parties.length && f.phase == Phase.Voting; ++p) {
            if (_active(f, p) && f.votedAt[p] != f.step) _vote(f, p, _randomVotes(f, _openCount(f), p + 10 * f.step));
        }
    }

    /// @dev Every party does its part of the current step (votes, histograms), or the level resolves.
    function _stepAll(Fed storage f) internal {
        if (f.phase == Phase.Voting) {
            _allVote(f);
            return;
        }
        if (f.phase == Phase.Histograms) {
            for (uint256 p = 0; p < f.parties.length && f.phase == Phase.Histograms; ++p) {
                if (_takesPart(f, p) && !_done(f, p)) _submit(f, p, 0, _quorum(f), p);
            }
            return;
        }
        _resolveNodes(f, _unresolved(f), OUTSIDER);
    }

    // ------------------------------------------------------------------ helpers

    /// @dev Make `call` as `caller` (with `value`); it must revert with exactly `want`, or succeed when `want` is empty.
    function _expect(address caller, uint256 value, bytes memory call, bytes memory want) internal returns (bool) {
        vm.deal(caller, caller.balance + value);
        vm.prank(caller);
        (bool ok, bytes memory got) = address(chain).call{value: value}(call);
        if (want.length == 0 ? !ok : ok || keccak256(got) != keccak256(want)) revert Unexpected(want, got);
        return ok;
    }

    function _fx(uint256 which) internal view returns (Fed storage f, bool unknown) {
        f = feds[which % FIXTURES];
        unknown = which % (FIXTURES + 1) == FIXTURES;
    }

    function _id(Fed storage f, bool unknown) internal view returns (uint256) {
        return unknown ? UNKNOWN : f.taskId;
    }

    /// @dev An applicant (0..5), the requester (6) or an outsider (7), with its membership and party index.
    function _caller(Fed storage f, uint256 who)
        internal
        view
        returns (address a, Membership m, uint256 party)
    {
        who %= 8;
        party = type(uint256).max;
        if (who == 6) return (f.requester, Membership.None, party);
        if (who == 7) return (OUTSIDER, Membership.None, party);
        a = _candidate(f, who);
        m = Membership(f.candState[who]);
        for (uint256 p = 0; p < f.parties.length; ++p) if (f.parties[p] == a) party = p;
    }

    function _err(bytes4 selector, uint256 taskId, address who) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, taskId, who);
    }

    function _wrongStatus(uint256 taskId, Status s) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IFGBDTEvents.WrongStatus.selector, taskId, s);
    }

    function _config(bytes32 field) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(FGBDTConfigLib.InvalidConfig.selector, field);
    }

    // ------------------------------------------------------------------ task lifecycle

    /// @notice `createTask` refuses the first parameter out of its range (in `FGBDTConfigLib.check`'s order), then a
    ///         reward of 2^128 wei or more; any other task opens.
    function testFuzz_createTask(uint8 field, int256 raw, uint8 field2, int256 raw2, uint8 features, bool swap, uint8 big)
        public
    {
        FGBDTConfigLib.Config memory c = _guardConfig();
        _mutate(c, field, raw);
        _mutate(c, field2, raw2);
        uint256 f = features % 4;
        int256[] memory lo = new int256[](f);
        int256[] memory hi = new int256[](swap && f > 0 ? f : f + (features >> 6) % 2);
        for (uint256 i = 0; i < hi.length; ++i) hi[i] = ONE;
        if (swap && f > 0) lo[f - 1] = 2 * ONE;
        uint256 value = big % 4 == 0 ? (1 << 128) - 1 + uint256(big) / 4 : uint256(big);
        bytes memory want = _configError(c, lo, hi);
        if (want.length == 0 && value >= 1 << 128) want = _config("reward");
        _expect(REQUESTER, value, abi.encodeCall(chain.createTask, (c, lo, hi, bytes32(0))), want);
    }

    /// @dev Set one parameter to a value near its bounds (drawn from `raw`).
    function _mutate(FGBDTConfigLib.Config memory c, uint8 field, int256 raw) internal pure {
        uint256 u = uint256(raw);
        int256 near = int256(u % 5) - 2; // -2..2
        field %= 24;
        if (field == 0) c.trees = uint16(u % 3);
        else if (field == 1) c.depth = uint8(u % 11);
        else if (field == 2) c.bins = uint16(u % 2 == 0 ? u % 3 : 200 + (u >> 8) % 55);
        else if (field == 3) c.hessianMode = uint8(u % 4);
        else if (field == 4) c.tieBreak = uint8(u % 4);
        else if (field == 5) c.objective = uint8(u % 4);
        else if (field == 6) c.endorseRule = uint8(u % 4);
        else if (field == 7) c.refusalRate = (u % 2 == 0 ? int256(0) : ONE) + near;
        else if (field == 8) c.overlapThreshold = near;
        else if (field == 9) (c.quorumNum, c.quorumDen) = (uint16(u % 4), uint16((u >> 8) % 4));
        else if (field == 10) (c.minParties, c.maxParties) = (uint16(u % 5), uint16((u >> 8) % 19));
        else if (field == 11) c.stepBlocks = uint64(u % 2 == 0 ? u % 3 : 2 ** 32 - 1 + (u >> 8) % 3);
        else if (field == 12) c.lambda = near;
        else if (field == 13) c.learningRate = near;
        else if (field == 14) c.minRows = near + 1;
        else if (field == 15) c.alpha = (u % 2 == 0 ? int256(0) : ONE) + near;
        else if (field == 16) (c.epsilon, c.delta) = (near, (u % 2 == 0 ? int256(0) : ONE) + int256((u >> 8) % 5) - 2);
        else if (field == 17) (c.objective, c.labelMin, c.labelMax) = (uint8(u % 2), near, ONE + int256((u >> 8) % 3) - 1);
        else if (field == 18) (c.labelMin, c.labelMax) = (near, int256((u >> 8) % 5) - 2);
        else if (field == 19) c.votedTrees = uint16(u);
        else if (field == 20) c.joinBlocks = uint64(u % 2 == 0 ? u : 2 ** 32 - 1 + (u >> 8) % 3);
        else if (field == 21) c.lambda = raw;
        else if (field == 22) c.learningRate = raw;
        else c.alpha = raw;
    }

    /// @dev The first parameter out of its range, as the task parameters' documentation orders them.
    function _configError(FGBDTConfigLib.Config memory c, int256[] memory lo, int256[] memory hi)
        internal
        pure
        returns (bytes memory)
    {
        if (lo.length == 0 || lo.length != hi.length) return _config("features");
        for (uint256 i = 0; i < lo.length; ++i) if (lo[i] > hi[i]) return _config("min>max");
        if (c.trees == 0) return _config("trees");
        if (c.depth == 0 || c.depth > 8) return _config("depth");
        if (c.bins == 0) return _config("bins");
        if (c.hessianMode > 1) return _config("hessianMode");
        if (c.tieBreak > 1) return _config("tieBreak");
        if (c.objective > 1) return _config("objective");
        if (c.endorseRule > 1) return _config("endorseRule");
        if (c.refusalRate <= 0 || c.refusalRate >= ONE) return _config("refusalRate");
        if (c.overlapThreshold < 0) return _config("overlapThreshold");
        if (c.quorumDen == 0 || c.quorumNum > c.quorumDen) return _config("quorum");
        if (c.minParties == 0 || c.minParties > c.maxParties || c.maxParties > 64) return _config("parties");
        // a node's widest resolution must fit a transaction (`ledger/spec/tx_size.py`, `check_resolution_fits`)
        uint256 size = 4 + 12 * 32 + uint256(c.maxParties) * (6 * (uint256(c.bins) + 1) + c.depth - 1) * 32;
        if (size > 128 * 1024 - 2048) {
            return abi.encodeWithSelector(FGBDTConfigLib.ResolutionTooLarge.selector, size, 128 * 1024 - 2048);
        }
        if (c.joinBlocks > 2 ** 32) return _config("joinBlocks");
        if (c.stepBlocks == 0 || c.stepBlocks > 2 ** 32) return _config("stepBlocks");
        if (c.lambda < 0 || c.learningRate <= 0 || c.minRows < 1) return _config("gbdt");
        if (c.alpha <= 0 || c.alpha > ONE) return _config("alpha");
        if (c.epsilon < 0 || (c.epsilon > 0 && (c.objective != 0 || c.delta <= 0 || c.delta >= ONE))) {
            return _config("privacy");
        }
        if (c.objective == 0 ? c.labelMin != 0 || c.labelMax != ONE : c.labelMin > c.labelMax) return _config("label");
        return "";
    }

    /// @notice `fund`: an unknown task, one not open, a reward reaching 2^128 wei; anyone else adds to it.
    function testFuzz_fund(uint8 which, uint256 value, bool outsider) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        value = value % 4 == 0 ? (1 << 128) - 5 ether - 2 + value % 5 : value % 100 ether;
        bytes memory want;
        if (unknown) want = _err(IFGBDTEvents.UnknownTask.selector, id);
        else if (f.status != Status.Open) want = _wrongStatus(id, f.status);
        else if (f.reward + value >= 1 << 128) want = _config("reward");
        if (_expect(outsider ? OUTSIDER : REQUESTER, value, abi.encodeCall(chain.fund, (id)), want)) {
            (, , , , , , , , uint256 reward) = chain.getState(id);
            require(reward == f.reward + value, "fund did not add to the reward");
        }
    }

    function _err(bytes4 selector, uint256 taskId) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, taskId);
    }

    /// @notice `join`: an unknown task, one not open, a closed window, an address that already asked.
    function testFuzz_join(uint8 which, uint8 who, uint8 wait, bytes calldata psd) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address a, Membership m, ) = _caller(f, who);
        vm.roll(block.number + wait % 100);
        bytes memory want;
        if (unknown) want = _err(IFGBDTEvents.UnknownTask.selector, id);
        else if (f.status != Status.Open) want = _wrongStatus(id, f.status);
        else if (block.number > f.joinDeadline) {
            want = abi.encodeWithSelector(IFGBDTEvents.JoinWindowClosed.selector, id, uint64(f.joinDeadline));
        } else if (m != Membership.None) want = _err(IFGBDTEvents.AlreadyJoined.selector, id, a);
        _expect(a, 0, abi.encodeCall(chain.join, (id, psd, "http://party")), want);
    }

    /// @notice `approve` and `refuse`: an unknown task, a caller not its requester, a task not open, an address not
    ///         pending, and (approve) a task that has its most parties.
    function testFuzz_approveRefuse(uint8 which, uint8 caller, uint8 target, bool approving) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address by, , ) = _caller(f, caller);
        (address a, Membership m, ) = _caller(f, target);
        bytes memory want = _requesterGuards(f, unknown, by);
        if (want.length == 0 && m != Membership.Pending) want = _err(IFGBDTEvents.NotPending.selector, id, a);
        if (want.length == 0 && approving && f.parties.length >= f.cfg.maxParties) {
            want = abi.encodeWithSelector(IFGBDTEvents.PartyLimitReached.selector, id, f.cfg.maxParties);
        }
        bytes memory call = approving ? abi.encodeCall(chain.approve, (id, a)) : abi.encodeCall(chain.refuse, (id, a));
        if (_expect(by, 0, call, want)) {
            (Membership now_, , , ) = chain.getMember(id, a);
            require(now_ == (approving ? Membership.Approved : Membership.Refused), "membership not recorded");
        }
    }

    function _requesterGuards(Fed storage f, bool unknown, address by) internal view returns (bytes memory) {
        uint256 id = _id(f, unknown);
        if (unknown) return _err(IFGBDTEvents.UnknownTask.selector, id);
        if (by != f.requester) return _err(IFGBDTEvents.NotRequester.selector, id, by);
        if (f.status != Status.Open) return _wrongStatus(id, f.status);
        return "";
    }

    /// @notice `start`: the requester guards, too few approved parties, edges without the encoding's header or not
    ///         those whose hash was fixed, a slot count outside 3..bins + 1.
    function testFuzz_start(uint8 which, uint8 caller, uint8 slots, uint8 edgesKind) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address by, , ) = _caller(f, caller);
        slots %= 6;
        bytes memory edges = _edges(slots);
        uint256 kind = edgesKind % 4;
        if (kind == 1) edges = abi.encodePacked(bytes10(edges));
        if (kind == 2) edges[0] = "X";
        if (kind == 3) edges = abi.encodePacked(edges, "tail");
        bytes memory want = _requesterGuards(f, unknown, by);
        if (want.length == 0 && f.parties.length < f.cfg.minParties) {
            want = abi.encodeWithSelector(
                IFGBDTEvents.NotEnoughParties.selector, id, f.parties.length, f.cfg.minParties
            );
        }
        bytes32 fixedHash = which % FIXTURES == HASHED && !unknown ? keccak256(_edges(3)) : bytes32(0);
        if (
            want.length == 0 &&
            (kind == 1 || kind == 2 || (fixedHash != 0 && keccak256(edges) != fixedHash))
        ) {
            want = abi.encodeWithSelector(IFGBDTEvents.BinEdgesMismatch.selector, id, fixedHash, keccak256(edges));
        }
        if (want.length == 0 && (slots < 3 || slots > f.cfg.bins + 1)) want = _config("slots");
        if (_expect(by, 0, abi.encodeCall(chain.start, (id, edges)), want)) {
            (, Status s, Phase phase, , , , , , ) = chain.getState(id);
            require(s == Status.Training && phase == Phase.Voting, "start did not open voting");
        }
    }

    /// @notice `cancel`: the requester guards; an open task is cancelled and its deposit owed back.
    function testFuzz_cancel(uint8 which, uint8 caller) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address by, , ) = _caller(f, caller);
        uint256 before = unknown ? 0 : chain.owed(id, f.requester);
        if (_expect(by, 0, abi.encodeCall(chain.cancel, (id)), _requesterGuards(f, unknown, by))) {
            require(chain.owed(id, f.requester) == before + f.reward, "the deposit is not owed back");
        }
    }

    /// @notice The views refuse an unknown task.
    function testFuzz_views(uint256 taskId) public view {
        bool known = taskId >= 1 && taskId <= chain.taskCount();
        bytes memory want = known ? bytes("") : _err(IFGBDTEvents.UnknownTask.selector, taskId);
        bytes[3] memory calls = [
            abi.encodeCall(chain.getConfig, (taskId)),
            abi.encodeCall(chain.getState, (taskId)),
            abi.encodeCall(chain.getParties, (taskId))
        ];
        for (uint256 i = 0; i < 3; ++i) {
            (bool ok, bytes memory got) = address(chain).staticcall(calls[i]);
            if (known ? !ok : ok || keccak256(got) != keccak256(want)) revert Unexpected(want, got);
        }
    }

    // ------------------------------------------------------------------ votes and steps

    /// @notice `submitVotes`: the task and membership guards, then either a ballot ahead (only while the level
    ///         resolves, for a level that votes, from a party whose histograms the step accepted, once) or one for the
    ///         current step (its tree and level, in voting, from a party taking part, once, before the deadline); then
    ///         one vote per node, each a feature or -1.
    function testFuzz_submitVotes(
        uint8 which,
        uint8 who,
        uint8 treeSel,
        uint8 levelSel,
        uint8 countSel,
        int8 badVote,
        uint8 wait
    ) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address a, Membership m, uint256 p) = _caller(f, who);
        uint256 tree = f.tree + treeSel % 3 - (treeSel % 3 == 2 && f.tree > 0 ? 2 : 0);
        uint256 level = levelSel % 3;
        vm.roll(block.number + wait % 16);
        uint256 k = _openCount(f);
        bool root = level == 0 && tree == f.tree + 1;
        bool ahead = f.phase == Phase.Resolving && (root || (tree == f.tree && level == f.level + 1));
        bytes memory want;
        if (unknown) want = _err(IFGBDTEvents.UnknownTask.selector, id);
        else if (f.status != Status.Training) want = _wrongStatus(id, f.status);
        else if (m == Membership.None) want = _err(IFGBDTEvents.NotMember.selector, id, a);
        else if (m != Membership.Approved) want = _err(IFGBDTEvents.NotApproved.selector, id, a);
        else if (ahead) {
            if (root ? tree >= f.cfg.votedTrees || tree >= f.cfg.trees : level >= f.cfg.depth || _drawn(f)) {
                want = abi.encodeWithSelector(IFGBDTEvents.WrongPhase.selector, id, f.phase);
            } else if (f.lastSub[p] != f.step) want = _err(IFGBDTEvents.Excluded.selector, id, a);
            else if (f.aheadAt[p] == f.step + 1) want = _err(IFGBDTEvents.AlreadyVoted.selector, id, a);
            k = root ? 1 : 2 * k;
        } else if (tree != f.tree || level != f.level) {
            want = abi.encodeWithSelector(IFGBDTEvents.WrongStep.selector, id, f.tree, f.level);
        } else if (f.phase != Phase.Voting) {
            want = abi.encodeWithSelector(IFGBDTEvents.WrongPhase.selector, id, f.phase);
        } else if (!_active(f, p)) want = _err(IFGBDTEvents.Excluded.selector, id, a);
        else if (f.votedAt[p] == f.step) want = _err(IFGBDTEvents.AlreadyVoted.selector, id, a);
        else if (block.number > f.deadline) {
            want = abi.encodeWithSelector(IFGBDTEvents.StepDeadlinePassed.selector, id, uint64(f.deadline));
        }
        uint256 count = countSel % 8 == 0 ? countSel / 8 % 5 : k;
        int256[] memory votes = _randomVotes(f, count, countSel);
        if (want.length == 0 && count != k) {
            want = abi.encodeWithSelector(IFGBDTEvents.LengthMismatch.selector, k, count);
        }
        if (count > 0 && (badVote < -1 || (badVote >= 0 && uint8(badVote) >= 3 * f.features))) {
            // a vote below -1, or a feature the task does not have (valid values stay valid)
            votes[count - 1] = badVote < -1 ? int256(badVote) : int256(f.features) + int256(badVote) % 3;
            if (want.length == 0) {
                want = abi.encodeWithSelector(IFGBDTEvents.InvalidVote.selector, count - 1, votes[count - 1]);
            }
        }
        _expect(a, 0, abi.encodeCall(chain.submitVotes, (id, tree, level, votes)), want);
    }

    /// @notice `closeStep`: an unknown task, one not training, a level resolving, a step incomplete before its
    ///         deadline; otherwise the step closes.
    function testFuzz_closeStep(uint8 which, uint8 wait) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        vm.roll(block.number + wait % 24);
        bytes memory want;
        if (unknown) want = _err(IFGBDTEvents.UnknownTask.selector, id);
        else if (f.status != Status.Training) want = _wrongStatus(id, f.status);
        else if (f.phase == Phase.Resolving) want = abi.encodeWithSelector(IFGBDTEvents.WrongPhase.selector, id, f.phase);
        else if (!_closable(f)) {
            want = abi.encodeWithSelector(IFGBDTEvents.StepStillOpen.selector, id, uint64(f.deadline));
        }
        Phase before = f.phase;
        if (_expect(OUTSIDER, 0, abi.encodeCall(chain.closeStep, (id)), want)) {
            _sync(f);
            require(f.phase > before, "the step did not close");
        }
    }

    // ------------------------------------------------------------------ histograms

    /// @notice `commitHistograms`, `submitHistograms` and `declineHistograms`: the task, step and membership guards
    ///         (a voter of the step, or with drawn candidates a party taking part; once; before the deadline), then the
    ///         part's length, the exact rules (`FGBDTRulesLib`, which the differential tests hold to the reference),
    ///         the inherited totals, and the endorsements (well formed, from distinct approved parties other than the
    ///         sender, a quorum of them).
    function testFuzz_histograms(
        uint8 which,
        uint8 who,
        uint8 fn,
        uint8 stepSel,
        uint8 wait,
        uint16 dataSel,
        int128 delta,
        uint16 endorseSel
    ) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address a, Membership m, uint256 p) = _caller(f, who);
        (uint256 tree, uint256 level) = (f.tree, f.level);
        if (stepSel % 4 == 1) tree += 1;
        if (stepSel % 4 == 2) level += 1;
        vm.roll(block.number + wait % 16);
        bytes memory want = _stepGuards(f, unknown, a, m, p, tree, level);
        fn %= 3;
        if (fn == 2) {
            _expect(a, 0, abi.encodeCall(chain.declineHistograms, (id, tree, level)), want);
            return;
        }
        HistCase memory hc;
        if (want.length == 0) hc = _histCase(f, p, fn == 1, dataSel, delta);
        else hc.data = new int256[](6 * 4 * (dataSel % 3));
        if (want.length == 0) want = hc.want;
        if (fn == 0) {
            _expect(a, 0, abi.encodeCall(chain.commitHistograms, (id, tree, level, hc.data)), want);
            return;
        }
        FGBDTEndorseLib.Endorsement[] memory es;
        (es, want) = _endorsementCase(f, p, hc.root, endorseSel, want);
        _expect(a, 0, abi.encodeCall(chain.submitHistograms, (id, tree, level, hc.data, es)), want);
    }

    function _stepGuards(
        Fed storage f,
        bool unknown,
        address a,
        Membership m,
        uint256 p,
        uint256 tree,
        uint256 level
    ) internal view returns (bytes memory) {
        uint256 id = _id(f, unknown);
        if (unknown) return _err(IFGBDTEvents.UnknownTask.selector, id);
        if (f.status != Status.Training) return _wrongStatus(id, f.status);
        if (tree != f.tree || level != f.level) {
            return abi.encodeWithSelector(IFGBDTEvents.WrongStep.selector, id, f.tree, f.level);
        }
        if (f.phase != Phase.Histograms) return abi.encodeWithSelector(IFGBDTEvents.WrongPhase.selector, id, f.phase);
        if (m == Membership.None) return _err(IFGBDTEvents.NotMember.selector, id, a);
        if (m != Membership.Approved) return _err(IFGBDTEvents.NotApproved.selector, id, a);
        if (_drawn(f) ? !_active(f, p) : f.votedAt[p] != f.step) {
            return _err(_drawn(f) ? IFGBDTEvents.Excluded.selector : IFGBDTEvents.DidNotVote.selector, id, a);
        }
        if (_done(f, p)) return _err(IFGBDTEvents.AlreadySubmitted.selector, id, a);
        if (block.number > f.deadline) {
            return abi.encodeWithSelector(IFGBDTEvents.StepDeadlinePassed.selector, id, uint64(f.deadline));
        }
        return "";
    }

    struct HistCase {
        int256[] data;
        bytes32 root;
        bytes want;
    }

    /// @dev The party's honest level data, cut to a part (commit) or the whole level (submit), with one mutation:
    ///      a length off by some words, a value changed, moved between two slots of a candidate (totals kept), or
    ///      added to both candidates' same slot (candidate totals equal, the node's totals changed).
    function _histCase(Fed storage f, uint256 p, bool last, uint16 sel, int128 delta)
        internal
        view
        returns (HistCase memory hc)
    {
        uint256 k = _openCount(f);
        uint256 w = 6 * f.slots;
        uint256 end = last ? k : (f.level == 0 ? 1 : 2 * (1 + (sel >> 4) % (k / 2)));
        if (!last && sel % 16 == 15) end = f.level == 0 ? 2 : 1; // past the level, or splitting two siblings
        hc.data = _levelData(f, p, 0, end > k ? k : end);
        if (end > k) hc.data = _padded(hc.data, (end - k) * w);
        uint256 kind = sel % 8;
        int256 d = delta == 0 ? int256(1) : int256(delta);
        uint256 pos = (sel >> 3) % (hc.data.length == 0 ? 1 : hc.data.length);
        if (kind == 1) {
            uint256 cut = 1 + (sel >> 8) % w;
            if (cut > hc.data.length) cut = hc.data.length;
            int256[] memory shorter = new int256[](hc.data.length - cut);
            for (uint256 i = 0; i < shorter.length; ++i) shorter[i] = hc.data[i];
            hc.data = shorter;
        } else if (kind == 2 && hc.data.length > 0) {
            hc.data[pos] += d;
        } else if (kind == 3 && hc.data.length > 0) {
            uint256 other = pos - pos % f.slots + (pos % f.slots + 1) % f.slots;
            hc.data[pos] -= d;
            hc.data[other] += d;
        } else if (kind == 4 && hc.data.length > 0) {
            uint256 inBlock = pos % w;
            uint256 twin = pos - inBlock + (inBlock / (2 * f.slots)) * 2 * f.slots + inBlock % f.slots;
            hc.data[twin] += d;
            hc.data[twin + f.slots] += d;
        }
        uint256 first;
        uint256 got = hc.data.length / w;
        uint256 endNow = first + got;
        if (last ? endNow != k : (endNow <= first || endNow > k || (f.level > 0 && endNow % 2 == 1))) {
            hc.want = abi.encodeWithSelector(IFGBDTEvents.LengthMismatch.selector, (k - first) * w, hc.data.length);
            return hc;
        }
        if (hc.data.length % w != 0) {
            hc.want = abi.encodeWithSelector(IFGBDTEvents.LengthMismatch.selector, endNow * w, hc.data.length);
            return hc;
        }
        hc.want = _rulesVerdict(f, hc.data, endNow);
        if (hc.want.length == 0) hc.want = _inheritedVerdict(f, p, hc.data, endNow);
        if (last) {
            bytes32[] memory leaves = new bytes32[](k);
            for (uint256 i = 0; i < k; ++i) {
                int256[] memory blk = new int256[](w);
                for (uint256 j = 0; j < w; ++j) blk[j] = hc.data[i * w + j];
                leaves[i] = keccak256(abi.encodePacked(blk));
            }
            (hc.root, ) = _merkle(leaves, 0);
        }
    }

    /// @dev What the rules library says of `data` (empty when the data keeps every rule).
    function _rulesVerdict(Fed storage f, int256[] memory data, uint256 end) internal view returns (bytes memory) {
        uint256 mask;
        uint256 rank;
        for (uint256 b = 0; rank < end; ++b) {
            if ((f.openMask >> b) & 1 == 0) continue;
            mask |= 1 << b;
            ++rank;
        }
        uint8 bounds = f.cfg.epsilon > 0 ? FGBDTRulesLib.BOUNDS_NONE : f.cfg.objective;
        try this.checkLevel(data, f.slots, 1 << f.level, mask, bounds, f.tree == 0) {
            return "";
        } catch (bytes memory err) {
            return err;
        }
    }

    function checkLevel(int256[] calldata data, uint256 nbins, uint256 base, uint256 mask, uint8 bounds, bool first)
        external
        pure
        returns (int256[] memory)
    {
        return FGBDTRulesLib.checkLevel(data, nbins, base, mask, bounds, first);
    }

    /// @dev Below the root, each pair of siblings' candidate-0 totals must be the party's own sides at their parent:
    ///      its honest totals, which the mutations above change or keep.
    function _inheritedVerdict(Fed storage f, uint256 p, int256[] memory data, uint256 end)
        internal
        view
        returns (bytes memory)
    {
        if (f.level == 0) return "";
        int256[] memory honest = _levelData(f, p, 0, end);
        uint256[] memory nodes = _openNodes(f);
        uint256 s = f.slots;
        uint256 w = 6 * s;
        for (uint256 i = 0; i < end; i += 2) {
            for (uint256 j = i; j < i + 2; ++j) {
                for (uint256 q = 0; q < 3; ++q) {
                    int256 a;
                    int256 b;
                    for (uint256 bin = 0; bin < s; ++bin) {
                        a += data[j * w + q * 2 * s + bin];
                        b += honest[j * w + q * 2 * s + bin];
                    }
                    if (a != b) return abi.encodeWithSelector(FGBDTRulesLib.InheritedTotalsMismatch.selector, nodes[i]);
                }
            }
        }
        return "";
    }

    /// @dev Endorsements of `root`: a quorum from the parties after `p`, then one change drawn from `sel` (one fewer,
    ///      the sender's own, a stranger's, a duplicate, a malformed signature, a credit over 80 bits, another
    ///      root signed); and the error the first broken check gives, unless an earlier guard failed already.
    function _endorsementCase(Fed storage f, uint256 p, bytes32 root, uint16 sel, bytes memory want)
        internal
        view
        returns (FGBDTEndorseLib.Endorsement[] memory es, bytes memory)
    {
        uint256 parties = f.parties.length;
        uint256 need = parties == 0 ? 0 : _quorum(f);
        uint256 count = need + (sel >> 4) % (parties > need ? parties - need : 1);
        uint256 kind = sel % 8;
        if (kind == 1 && count > 0) count -= 1;
        if (kind >= 2 && count == 0) count = 1;
        if (p >= parties) p = 0; // a non-party's call failed earlier; any endorsements do
        if (parties == 0) return (new FGBDTEndorseLib.Endorsement[](0), want);
        (es, ) = _endorsements(f, p, root, count, sel);
        uint256 pos = (sel >> 8) % (count == 0 ? 1 : count);
        address[] memory signers = new address[](count);
        for (uint256 i = 0; i < count; ++i) signers[i] = f.parties[(p + 1 + i) % parties];
        bytes memory malformed;
        if (kind == 2) {
            es[pos] = _endorsement(f, f.keys[p], f.parties[p], root, [uint256(1e18), 1e18, 1e18]);
            signers[pos] = f.parties[p];
        } else if (kind == 3) {
            uint256 key = 0xDEAD + uint256(sel);
            es[pos] = _endorsement(f, key, f.parties[p], root, [uint256(1e18), 1e18, 1e18]);
            signers[pos] = vm.addr(key);
        } else if (kind == 4 && count >= 1) {
            uint256 q = (p + 1) % parties;
            es[pos] = _endorsement(f, f.keys[q], f.parties[p], root, [uint256(1e18), 1e18, 1e18]);
            signers[pos] = f.parties[q];
        } else if (kind == 5) {
            uint256 how = (sel >> 12) % 3;
            if (how == 0) es[pos].signature = abi.encodePacked(bytes32(0), bytes32(0)); // 64 bytes
            if (how == 1) es[pos].signature[64] = bytes1(uint8(29)); // v neither 27 nor 28
            if (how == 2) {
                // s in the upper half of the curve order: the malleable twin OpenZeppelin refuses
                bytes memory sig = es[pos].signature;
                uint256 s;
                assembly ("memory-safe") {
                    s := mload(add(sig, 64))
                }
                s = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141 - s;
                assembly ("memory-safe") {
                    mstore(add(sig, 64), s)
                }
                sig[64] = bytes1(uint8(sig[64]) == 27 ? 28 : 27);
            }
            malformed = abi.encodeWithSelector(FGBDTEndorseLib.InvalidSignature.selector, pos);
        } else if (kind == 6) {
            es[pos].creditH = uint256(type(uint80).max) + 1 + (sel >> 12);
            malformed = abi.encodeWithSelector(FGBDTEndorseLib.CreditOutOfRange.selector, pos);
        } else if (kind == 7) {
            FGBDTEndorseLib.Endorsement memory other =
                _endorsement(f, f.keys[(p + 1) % parties], f.parties[p], keccak256("another root"), [uint256(1e18), 1e18, 1e18]);
            es[pos].signature = other.signature;
            signers[pos] = _recover(f, p, root, es[pos]);
        }
        if (want.length > 0) return (es, want);
        if (malformed.length > 0 && count > 0) return (es, malformed);
        uint256 seen;
        for (uint256 i = 0; i < count; ++i) {
            (Membership m, uint256 index, , ) = chain.getMember(f.taskId, signers[i]);
            if (m != Membership.Approved) return (es, _signerErr(IFGBDTEvents.EndorserNotMember.selector, signers[i]));
            if (signers[i] == f.parties[p]) return (es, _signerErr(IFGBDTEvents.SelfEndorsement.selector, signers[i]));
            if (seen & (1 << index) != 0) return (es, _signerErr(IFGBDTEvents.DuplicateEndorsement.selector, signers[i]));
            seen |= 1 << index;
        }
        if (count < need) {
            return (es, abi.encodeWithSelector(IFGBDTEvents.InsufficientEndorsements.selector, count, need));
        }
        return (es, "");
    }

    function _signerErr(bytes4 selector, address signer) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, signer);
    }

    /// @dev Who the contract will find signed `e` over `root` (ecrecover of the typed digest).
    function _recover(Fed storage f, uint256 p, bytes32 root, FGBDTEndorseLib.Endorsement memory e)
        internal
        view
        returns (address)
    {
        bytes32 structHash = keccak256(
            abi.encode(
                ENDORSEMENT_TYPEHASH, f.taskId, f.tree, f.level, f.parties[p], root, e.creditG, e.creditH, e.creditN
            )
        );
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", _domainSeparator(), structHash));
        bytes memory sig = e.signature;
        bytes32 r;
        bytes32 s;
        assembly ("memory-safe") {
            r := mload(add(sig, 32))
            s := mload(add(sig, 64))
        }
        return ecrecover(digest, uint8(sig[64]), r, s);
    }

    // ------------------------------------------------------------------ resolution

    /// @notice `resolveNode` and `resolveNodes`: the task and phase guards, the batch's lengths, a node that is not
    ///         open or already resolved, each submitter's lengths and proofs, and its replayed histograms against its
    ///         commitment (`HistogramMismatch` names the first submitter, in party order, whose data does not hash to
    ///         it); honest replays resolve.
    function testFuzz_resolve(uint8 which, uint8 nodeSel, uint16 mutation, int128 delta, bool batch) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        bytes memory want;
        if (unknown) want = _err(IFGBDTEvents.UnknownTask.selector, id);
        else if (f.status != Status.Training) want = _wrongStatus(id, f.status);
        else if (f.phase != Phase.Resolving) want = abi.encodeWithSelector(IFGBDTEvents.WrongPhase.selector, id, f.phase);
        uint256 node = (1 << f.level) + nodeSel % 3;
        if (nodeSel % 16 == 15) node = 0;
        int256[] memory g;
        int256[] memory h;
        int256[] memory n;
        bytes32[] memory proofs;
        if (f.status == Status.Training) (g, h, n, proofs) = _resolveArgs(f, (1 << f.level));
        bool open = node >= (1 << f.level) && node < (2 << f.level) && (f.openMask >> (node - (1 << f.level))) & 1 == 1;
        if (open) (g, h, n, proofs) = _resolveArgs(f, node);
        uint256 kind = mutation % 8;
        uint256[] memory subs = f.status == Status.Training ? _submitters(f) : new uint256[](0);
        uint256 w = 2 * f.slots;
        int256 d = delta == 0 ? int256(1) : int256(delta);
        if (kind == 1 && g.length > 0) {
            uint256 pos = (mutation >> 3) % g.length;
            [g, h, n][(mutation >> 12) % 3][pos] += d;
        } else if (kind == 2 && proofs.length > 0) {
            proofs[(mutation >> 3) % proofs.length] ^= bytes32(uint256(1));
        } else if (kind == 3) {
            g = _shorter(g);
        } else if (kind == 4) {
            proofs = new bytes32[](proofs.length + 1);
        }
        if (want.length == 0 && !batch) want = _nodeVerdict(f, id, node, open, subs, w, g, proofs, kind, mutation);
        if (want.length == 0 && batch) {
            if (g.length != h.length) want = abi.encodeWithSelector(IFGBDTEvents.LengthMismatch.selector, g.length, h.length);
            else want = _nodeVerdict(f, id, node, open, subs, w, g, proofs, kind, mutation);
        }
        uint256[] memory nodes = new uint256[](1);
        nodes[0] = node;
        bytes memory call = batch
            ? abi.encodeCall(chain.resolveNodes, (id, nodes, g, h, n, proofs))
            : abi.encodeCall(chain.resolveNode, (id, node, g, h, n, proofs));
        _expect(OUTSIDER, 0, call, want);
    }

    function _padded(int256[] memory xs, uint256 extra) internal pure returns (int256[] memory out) {
        out = new int256[](xs.length + extra);
        for (uint256 i = 0; i < xs.length; ++i) out[i] = xs[i];
    }

    function _shorter(int256[] memory xs) internal pure returns (int256[] memory out) {
        if (xs.length == 0) return xs;
        out = new int256[](xs.length - 1);
        for (uint256 i = 0; i < out.length; ++i) out[i] = xs[i];
    }

    function _nodeVerdict(
        Fed storage f,
        uint256 id,
        uint256 node,
        bool open,
        uint256[] memory subs,
        uint256 w,
        int256[] memory g,
        bytes32[] memory proofs,
        uint256 kind,
        uint256 mutation
    ) internal view returns (bytes memory) {
        if (!open) return abi.encodeWithSelector(IFGBDTEvents.NodeNotOpen.selector, id, node);
        uint256 s = subs.length;
        if (g.length != s * w) return abi.encodeWithSelector(IFGBDTEvents.LengthMismatch.selector, s * w, g.length);
        uint256 proofLen;
        while ((1 << proofLen) < _openCount(f)) ++proofLen;
        if (proofs.length != s * proofLen) {
            return abi.encodeWithSelector(IFGBDTEvents.LengthMismatch.selector, s * proofLen, proofs.length);
        }
        uint256 bad = type(uint256).max;
        if (kind == 1 && g.length > 0) bad = ((mutation >> 3) % g.length) / w;
        if (kind == 2 && proofs.length > 0) bad = ((mutation >> 3) % proofs.length) / proofLen;
        if (bad < s) return abi.encodeWithSelector(FGBDTCommitLib.HistogramMismatch.selector, id, f.parties[subs[bad]]);
        return "";
    }

    // ------------------------------------------------------------------ the Shapley seed

    /// @notice A resolution needs the task's Shapley seed, the hash of `start`'s block: in that block itself (every
    ///         vote and submission of the level sent in it too) it reverts `ShapleySeedPending`; a later one fixes
    ///         the seed (`ShapleySeedFixed`: keccak256 of that hash and the task id) and resolves. One that finds the
    ///         hash expired (over 256 blocks on) makes its own block the seed block and resolves nothing, emitting
    ///         nothing; another in that block reverts `ShapleySeedPending` with it, and the next block's fixes the
    ///         seed from its hash and resolves.
    function testFuzz_shapleySeed(uint16 wait, bool batch) public {
        Fed storage f = feds[_open(_guardConfig(), 3, 3, REQUESTER, 1 ether, 77)];
        for (uint256 c = 0; c < 3; ++c) {
            _join(f, c);
            _approve(f, c);
        }
        _startInBlock(f, 4);
        seedBlock = block.number;
        _allVote(f);
        for (uint256 p = 0; p < 3; ++p) _submit(f, p, 0, _quorum(f), p);
        require(f.phase == Phase.Resolving && block.number == seedBlock, "the fixture left start's block");
        bytes memory call = _rootResolution(f, batch);
        _expect(OUTSIDER, 0, call, abi.encodeWithSelector(IFGBDTEvents.ShapleySeedPending.selector, f.taskId, seedBlock));
        vm.roll(seedBlock + 1 + uint256(wait) % 400);
        if (block.number > seedBlock + 256) {
            vm.recordLogs();
            _expect(OUTSIDER, 0, call, "");
            require(vm.getRecordedLogs().length == 0, "a resolution that moved the seed block emitted");
            require(_unresolved(f).length == 1, "a resolution that moved the seed block resolved");
            seedBlock = block.number;
            bytes memory pending = abi.encodeWithSelector(IFGBDTEvents.ShapleySeedPending.selector, f.taskId, seedBlock);
            _expect(OUTSIDER, 0, call, pending);
            vm.roll(block.number + 1);
        }
        uint256 want = uint256(keccak256(abi.encode(blockhash(seedBlock), f.taskId)));
        vm.recordLogs();
        if (batch) _resolveNodes(f, _unresolved(f), OUTSIDER);
        else _resolve(f, 1, OUTSIDER);
        Vm.Log[] memory logs = vm.getRecordedLogs();
        bytes32 fixedSig = keccak256("ShapleySeedFixed(uint256,uint256,uint256)");
        require(logs.length > 1 && logs[0].topics[0] == fixedSig, "the resolution did not fix the seed first");
        require(logs[0].topics[1] == bytes32(f.taskId), "the seed fixed for another task");
        (uint256 seed, uint256 block_) = abi.decode(logs[0].data, (uint256, uint256));
        require(seed == want && block_ == seedBlock, "a seed not derived from its seed block's hash");
        require(f.phase != Phase.Resolving || f.level != 0, "the root did not resolve");
    }

    /// @dev The root's resolution as `resolveNodes` (`batch`) or `resolveNode` calldata.
    function _rootResolution(Fed storage f, bool batch) internal view returns (bytes memory) {
        (int256[] memory g, int256[] memory h, int256[] memory n, bytes32[] memory proofs) = _resolveArgs(f, 1);
        uint256[] memory nodes = new uint256[](1);
        nodes[0] = 1;
        return batch
            ? abi.encodeCall(chain.resolveNodes, (f.taskId, nodes, g, h, n, proofs))
            : abi.encodeCall(chain.resolveNode, (f.taskId, 1, g, h, n, proofs));
    }

    // ------------------------------------------------------------------ withdrawals

    /// @notice `withdraw`: an account owed nothing, a receiver that refuses ether, and a receiver that re-enters
    ///         (OpenZeppelin's `ReentrancyGuardReentrantCall`); an account owed something is paid it, once.
    function testFuzz_withdraw(uint8 which, uint8 who, uint96 value) public {
        (Fed storage f, bool unknown) = _fx(which);
        uint256 id = _id(f, unknown);
        (address a, , ) = _caller(f, who);
        uint256 owed = chain.owed(id, a);
        uint256 before = a.balance;
        bytes memory nothing = _err(IFGBDTEvents.NothingToWithdraw.selector, id, a);
        if (_expect(a, 0, abi.encodeCall(chain.withdraw, (id)), owed == 0 ? nothing : bytes(""))) {
            require(a.balance == before + owed, "withdrawal paid another amount");
            _expect(a, 0, abi.encodeCall(chain.withdraw, (id)), nothing);
        }
        FGBDTConfigLib.Config memory cfg = _guardConfig();
        uint256 v = 1 + uint256(value) % 1 ether;
        Rejector rejector = new Rejector();
        vm.deal(address(this), v);
        rejector.openAndCancel{value: v}(FGBDTChainLike(address(chain)), cfg);
        uint256 rejected = chain.taskCount();
        bytes memory failed = abi.encodeWithSelector(IFGBDTEvents.TransferFailed.selector, address(rejector), v);
        _expect(address(rejector), 0, abi.encodeCall(chain.withdraw, (rejected)), failed);
        ReentrantRequester attacker = new ReentrantRequester(chain);
        vm.deal(address(this), v);
        attacker.openAndCancel{value: v}(cfg);
        attacker.attack();
        require(attacker.received() == v && !attacker.reentered(), "a re-entered withdrawal paid");
        bytes memory reentry = abi.encodeWithSelector(ReentrancyGuard.ReentrancyGuardReentrantCall.selector);
        require(keccak256(attacker.innerError()) == keccak256(reentry), "re-entry not refused by the guard");
    }
}
