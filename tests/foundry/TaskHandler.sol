// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTChain} from "../../contracts/FGBDTChain.sol";
import {FGBDTConfigLib} from "../../contracts/FGBDTConfig.sol";
import {FGBDTEndorseLib} from "../../contracts/FGBDTEndorse.sol";
import {IFGBDTEvents} from "../../contracts/FGBDTEvents.sol";
import {Status, Phase, Node} from "../../contracts/FGBDTTask.sol";
import {Federation} from "./Federation.sol";
import {Vm, vm, console} from "./Vm.sol";

/// @notice The actors of the invariant campaign: requesters, applicants and parties, and outsiders, called by forge in
///         random order with random arguments. Each action does what its actor may do in the task's current state
///         (an action with nothing to do returns), so every call it makes must succeed (`fail_on_revert`); the calls
///         it makes to show a guard hold expect their named error. Ghost accounting (deposits, withdrawals, what the
///         reference's payout rule entitles each account to, each party's contributions as the resolutions reported
///         them) is what the invariants compare the contract with.
contract TaskHandler is Federation {
    uint256 internal constant MAX_TASKS = 2;

    address[3] internal requesters;
    address internal constant OUTSIDER = address(0xBEEF);
    /// @dev The block the campaign is at: forge does not carry a cheatcode's block number from one call to the next,
    ///      so every action rolls to it first.
    uint256 public currentBlock;

    uint256 public deposits;
    uint256 public withdrawn;
    mapping(uint256 => uint256) public withdrawnFrom;
    mapping(uint256 => mapping(address => uint256)) public withdrawnBy;
    mapping(uint256 => mapping(address => uint256)) public entitled;
    mapping(uint256 => bool) public settled;
    mapping(uint256 => mapping(address => int256)) public contributed;
    string[] public violations;
    /// @dev How often each kind of action did something, for the campaign's summary.
    mapping(bytes32 => uint256) public did;

    constructor() {
        _deployChain();
        for (uint256 i = 0; i < 3; ++i) requesters[i] = vm.addr(0xA11CE + i);
        currentBlock = block.number;
    }

    function _violation(string memory why) internal override {
        violations.push(why);
    }

    // ------------------------------------------------------------------ views for the invariants

    function chainUnderTest() external view returns (FGBDTChain) {
        return chain;
    }

    /// @dev What the sequence did: shown under `forge test -vv`, and appended as one line `kind=count ...` to
    ///      `FGBDT_INVARIANT_SUMMARY` when set (`bench.fuzz` sums them over the campaign).
    function summary() external {
        bytes32[18] memory kinds = [
            bytes32("createTask"), "join", "approve", "refuse", "start", "cancel", "vote", "voteAhead", "submit",
            "commitAndSubmit", "decline", "closeStep", "resolve", "completed", "withdraw", "shortOfQuorum", "poke",
            "stepStillOpen"
        ];
        string memory line;
        for (uint256 i = 0; i < kinds.length; ++i) {
            string memory kind = _name(kinds[i]);
            console.log(kind, did[kinds[i]]);
            line = string.concat(line, i == 0 ? "" : " ", kind, "=", vm.toString(did[kinds[i]]));
        }
        string memory path = vm.envOr("FGBDT_INVARIANT_SUMMARY", string(""));
        if (bytes(path).length > 0) vm.writeLine(path, line);
    }

    function _name(bytes32 kind) internal pure returns (string memory) {
        uint256 n;
        while (n < 32 && kind[n] != 0) ++n;
        bytes memory out = new bytes(n);
        for (uint256 i = 0; i < n; ++i) out[i] = kind[i];
        return string(out);
    }

    function violationCount() external view returns (uint256) {
        return violations.length;
    }

    function taskCount() external view returns (uint256) {
        return feds.length;
    }

    function taskOf(uint256 i) external view returns (uint256 taskId, address requester, uint256 reward) {
        Fed storage f = feds[i];
        return (f.taskId, f.requester, f.reward);
    }

    /// @dev Everyone the task may owe: its requester, then every applicant.
    function accountsOf(uint256 i) external view returns (address[] memory accounts) {
        Fed storage f = feds[i];
        accounts = new address[](f.candKeys.length + 1);
        accounts[0] = f.requester;
        for (uint256 c = 0; c < f.candKeys.length; ++c) accounts[c + 1] = _candidate(f, c);
    }

    function partiesOf(uint256 i) external view returns (address[] memory) {
        return feds[i].parties;
    }

    // ------------------------------------------------------------------ actions

    modifier act() {
        vm.roll(currentBlock);
        _;
    }

    /// @notice A requester opens a task with a random configuration and deposit.
    function createTask(uint256 seed, uint96 value) external act {
        if (feds.length >= MAX_TASKS) return;
        FGBDTConfigLib.Config memory cfg = _config(seed);
        uint256 v = uint256(value) % 100 ether;
        _open(cfg, 2 + (seed >> 128) % 2, uint256(cfg.maxParties) + 1, requesters[seed % 3], v, seed);
        deposits += v;
        did["createTask"] += 1;
    }

    /// @notice The requester or an outsider adds to an open task's reward.
    function fund(uint256 which, uint96 value, bool byOutsider) external act {
        if (feds.length == 0) return;
        Fed storage f = feds[which % feds.length];
        if (f.status != Status.Open) return;
        uint256 v = uint256(value) % 10 ether;
        address funder = byOutsider ? OUTSIDER : f.requester;
        vm.deal(funder, funder.balance + v);
        vm.prank(funder);
        chain.fund{value: v}(f.taskId);
        f.reward += v;
        deposits += v;
    }

    /// @notice An applicant asks to join an open task.
    function asApplicant(uint256 which, uint256 who) external act {
        if (feds.length == 0) return;
        Fed storage f = feds[which % feds.length];
        if (f.status != Status.Open || block.number > f.joinDeadline) return;
        for (uint256 j = 0; j < f.candKeys.length; ++j) {
            uint256 i = (who % f.candKeys.length + j) % f.candKeys.length;
            if (f.candState[i] != 0) continue;
            _join(f, i);
            did["join"] += 1;
            break;
        }
    }

    /// @notice The requester approves or refuses an applicant, starts the task, or (rarely) cancels it.
    function asRequester(uint256 which, uint256 who, uint256 choice) external act {
        if (feds.length == 0) return;
        Fed storage f = feds[which % feds.length];
        if (f.status != Status.Open) return;
        uint256 i = who % f.candKeys.length;
        for (uint256 j = 0; j < f.candKeys.length && f.candState[i] != 1; ++j) i = (who % f.candKeys.length + j) % f.candKeys.length;
        uint256 c = choice % 16;
        bool room = f.parties.length < f.cfg.maxParties;
        if (f.candState[i] == 1 && room && (c < 10 || f.parties.length < f.cfg.minParties)) {
            _approve(f, i);
            did["approve"] += 1;
        } else if (f.candState[i] == 1 && c < 12) {
            _refuse(f, i);
            did["refuse"] += 1;
        } else if (c < 15) {
            if (f.parties.length < f.cfg.minParties) return;
            _start(f, 3 + (choice >> 8) % (uint256(f.cfg.bins) - 1));
            currentBlock = block.number; // `_start` moved on a block past the seed block: later actions too
            did["start"] += 1;
        } else if ((choice >> 8) % 4 == 0) {
            did["cancel"] += 1;
            vm.prank(f.requester);
            chain.cancel(f.taskId);
            _sync(f);
            _settle(f);
        }
    }

    /// @notice An approved party does its part of the current step: votes, sends (or declines) its histograms, sends
    ///         its ballot ahead while the level resolves, or resolves a node.
    function asParty(uint256 which, uint256 who, uint256 choice) external act {
        if (feds.length == 0) return;
        Fed storage f = feds[which % feds.length];
        if (f.status != Status.Training || f.parties.length == 0) return;
        for (uint256 i = 0; i < f.parties.length; ++i) {
            uint256 p = (who % f.parties.length + i) % f.parties.length;
            if (f.phase == Phase.Voting) {
                if (!_active(f, p) || f.votedAt[p] == f.step || block.number > f.deadline) continue;
                _vote(f, p, _randomVotes(f, _openCount(f), choice));
                did["vote"] += 1;
            } else if (f.phase == Phase.Histograms) {
                if (!_takesPart(f, p) || _done(f, p) || block.number > f.deadline) continue;
                _histograms(f, p, choice);
            } else {
                (bool level, bool root) = _mayVoteAhead(f, p);
                if ((level || root) && choice % 4 != 0) {
                    _voteAhead(f, p, root && (!level || (choice >> 4) % 2 == 0), choice >> 8);
                    did["voteAhead"] += 1;
                } else {
                    _resolveSome(f, f.parties[p], choice);
                }
            }
            break;
        }
        _settle(f);
    }

    /// @dev Send, decline, or first try with one endorsement short of the quorum (which must be refused).
    function _histograms(Fed storage f, uint256 p, uint256 choice) internal {
        uint256 c = choice % 16;
        if (c == 0) {
            _decline(f, p);
            did["decline"] += 1;
            return;
        }
        uint256 need = _quorum(f);
        if (c == 1 && need > 0) _shortOfQuorum(f, p, need, choice);
        uint256 k = _openCount(f);
        uint256 committed;
        if (c < 6) committed = f.level == 0 ? 1 : 2 * (1 + (choice >> 8) % (k / 2));
        uint256 extra = (choice >> 16) % (f.parties.length - need);
        _submit(f, p, committed, need + extra, choice >> 24);
        did[committed > 0 ? bytes32("commitAndSubmit") : bytes32("submit")] += 1;
    }

    function _shortOfQuorum(Fed storage f, uint256 p, uint256 need, uint256 choice) internal {
        (bytes32 root, ) = _merkle(_leaves(f, p), 0);
        (FGBDTEndorseLib.Endorsement[] memory es, ) = _endorsements(f, p, root, need - 1, choice);
        int256[] memory data = _levelData(f, p, 0, _openCount(f));
        vm.prank(f.parties[p]);
        (bool ok, bytes memory ret) = address(chain).call(
            abi.encodeCall(chain.submitHistograms, (f.taskId, f.tree, f.level, data, es))
        );
        bytes memory want = abi.encodeWithSelector(IFGBDTEvents.InsufficientEndorsements.selector, need - 1, need);
        if (ok || keccak256(ret) != keccak256(want)) _violation("histograms accepted short of the quorum");
        did["shortOfQuorum"] += 1;
    }

    /// @notice An outsider closes a step that may close, resolves nodes, or tries what only members and the requester
    ///         may do (which must be refused).
    function asOutsider(uint256 which, uint256 choice) external act {
        if (feds.length == 0) return;
        Fed storage f = feds[which % feds.length];
        uint256 c = choice % 8;
        if (c == 0) {
            _poke(f, choice >> 8);
        } else if (f.status == Status.Training && f.phase == Phase.Resolving) {
            _resolveSome(f, OUTSIDER, choice >> 3);
        } else if (_closable(f)) {
            _closeStep(f, OUTSIDER);
            did["closeStep"] += 1;
        } else if (f.status == Status.Training) {
            // an incomplete step before its deadline stays open
            vm.prank(OUTSIDER);
            (bool ok, bytes memory ret) = address(chain).call(abi.encodeCall(chain.closeStep, (f.taskId)));
            bytes memory want = abi.encodeWithSelector(IFGBDTEvents.StepStillOpen.selector, f.taskId, f.deadline);
            if (ok || keccak256(ret) != keccak256(want)) _violation("an incomplete step closed before its deadline");
            did["stepStillOpen"] += 1;
        }
        _settle(f);
    }

    /// @dev A non-member (the outsider, or an applicant not approved) sends what only approved parties may.
    function _poke(Fed storage f, uint256 choice) internal {
        if (f.status != Status.Training) return;
        address who = OUTSIDER;
        bytes4 want = IFGBDTEvents.NotMember.selector;
        for (uint256 i = 0; i < f.candKeys.length; ++i) {
            if (f.candState[i] == 1 || f.candState[i] == 3) {
                if (choice % 2 == 0) (who, want) = (_candidate(f, i), IFGBDTEvents.NotApproved.selector);
                break;
            }
        }
        bytes memory call;
        if (f.phase == Phase.Voting) {
            call = abi.encodeCall(chain.submitVotes, (f.taskId, f.tree, f.level, new int256[](_openCount(f))));
        } else if (f.phase == Phase.Histograms) {
            FGBDTEndorseLib.Endorsement[] memory none;
            call = (choice >> 1) % 2 == 0
                ? abi.encodeCall(chain.declineHistograms, (f.taskId, f.tree, f.level))
                : abi.encodeCall(chain.submitHistograms, (f.taskId, f.tree, f.level, new int256[](0), none));
        } else {
            return;
        }
        vm.prank(who);
        (bool ok, bytes memory ret) = address(chain).call(call);
        if (ok || keccak256(ret) != keccak256(abi.encodeWithSelector(want, f.taskId, who))) {
            _violation("a non-member took part");
        }
        did["poke"] += 1;
    }

    /// @notice Anyone of a task's accounts withdraws what it is owed; a second withdrawal must find nothing.
    function withdraw(uint256 which, uint256 who) external act {
        if (feds.length == 0) return;
        Fed storage f = feds[which % feds.length];
        uint256 i = who % (f.candKeys.length + 1);
        address account = i == 0 ? f.requester : _candidate(f, i - 1);
        uint256 amount = chain.owed(f.taskId, account);
        if (amount > 0) {
            uint256 before = account.balance;
            vm.prank(account);
            chain.withdraw(f.taskId);
            if (account.balance != before + amount) _violation("a withdrawal paid another amount than owed");
            withdrawn += amount;
            withdrawnFrom[f.taskId] += amount;
            withdrawnBy[f.taskId][account] += amount;
            did["withdraw"] += 1;
        }
        vm.prank(account);
        (bool ok, bytes memory ret) = address(chain).call(abi.encodeCall(chain.withdraw, (f.taskId)));
        bytes memory want = abi.encodeWithSelector(IFGBDTEvents.NothingToWithdraw.selector, f.taskId, account);
        if (ok || keccak256(ret) != keccak256(want)) _violation("paid twice");
    }

    /// @notice Time passes.
    function wait(uint256 blocks) external {
        currentBlock += 1 + blocks % 4;
        vm.roll(currentBlock);
        did["wait"] += 1;
    }

    // ------------------------------------------------------------------ resolutions, checked

    /// @dev Resolve one unresolved node, or all of them in one `resolveNodes`, checking what each resolution
    ///      credits: the submitters in party order, their split Shapley values summing to the credited gain (within
    ///      one unit per party: each is truncated once), kappa the credited gain exactly for a vote for the split's
    ///      feature, and each contribution `alpha * kappa / 1e18 + phi`.
    function _resolveSome(Fed storage f, address caller, uint256 choice) internal {
        uint256[] memory open = _unresolved(f);
        uint256[] memory nodes;
        if (choice % 2 == 0) {
            nodes = open;
        } else {
            nodes = new uint256[](1);
            nodes[0] = open[(choice >> 1) % open.length];
        }
        Before memory b = _before(f, nodes);
        vm.recordLogs();
        if (nodes.length == 1 && choice % 4 == 1) _resolve(f, nodes[0], caller);
        else _resolveNodes(f, nodes, caller);
        Vm.Log[] memory logs = vm.getRecordedLogs();
        _checkCredits(f, b, logs);
        did["resolve"] += 1;
    }

    /// @dev What the resolution's checks need from before it (rows move and ballots change once it advances).
    struct Before {
        uint256 tree;
        bool drawn;
        uint256[] subs;
        uint256[] nodes;
        uint256[] ranks;
        int256[][][] blocks; // node => submitter => block
        int256[][] ballots; // submitter => ballot
        uint256[3][] credits;
    }

    function _before(Fed storage f, uint256[] memory nodes) internal view returns (Before memory b) {
        b.tree = f.tree;
        b.drawn = _drawn(f);
        b.subs = _submitters(f);
        b.nodes = nodes;
        b.ranks = new uint256[](nodes.length);
        b.blocks = new int256[][][](nodes.length);
        for (uint256 i = 0; i < nodes.length; ++i) {
            b.ranks[i] = _rank(f, nodes[i]);
            b.blocks[i] = new int256[][](b.subs.length);
            for (uint256 j = 0; j < b.subs.length; ++j) b.blocks[i][j] = _block(f, b.subs[j], nodes[i]);
        }
        b.ballots = new int256[][](b.subs.length);
        b.credits = new uint256[3][](b.subs.length);
        for (uint256 j = 0; j < b.subs.length; ++j) {
            b.ballots[j] = f.ballot[b.subs[j]];
            b.credits[j] = f.credit[b.subs[j]];
        }
    }

    function _checkCredits(Fed storage f, Before memory b, Vm.Log[] memory logs) internal {
        bytes32 added = IFGBDTEvents.ContributionsAdded.selector;
        bytes32 split = IFGBDTEvents.NodeSplit.selector;
        uint256 seen;
        for (uint256 l = 0; l < logs.length; ++l) {
            Vm.Log memory log = logs[l];
            if (log.emitter != address(chain) || log.topics[0] != added) continue;
            (, uint256 node, address[] memory who, int256[] memory phi, int256[] memory kappa, int256[] memory c) =
                abi.decode(log.data, (uint256, uint256, address[], int256[], int256[], int256[]));
            uint256 i = _indexOf(b.nodes, node);
            ++seen;
            if (who.length != b.subs.length) _violation("contributions not to the level's submitters");
            int256 gain;
            uint256 feature;
            bool splitNode;
            for (uint256 s = 0; s < logs.length; ++s) {
                if (logs[s].topics[0] != split || logs[s].emitter != address(chain)) continue;
                (, uint256 sNode, uint256 sFeature, uint256 threshold, , ) =
                    abi.decode(logs[s].data, (uint256, uint256, uint256, uint256, int256, int256[6]));
                if (sNode != node) continue;
                splitNode = true;
                feature = sFeature;
                gain = _creditedGain(f, b, i, sFeature, threshold);
            }
            int256 phiSum;
            for (uint256 j = 0; j < who.length && j < b.subs.length; ++j) {
                if (who[j] != f.parties[b.subs[j]]) _violation("contributions not in party order");
                phiSum += phi[j];
                bool hit = splitNode && !b.drawn && b.ballots[j][b.ranks[i]] == int256(feature);
                if (kappa[j] != (hit ? gain : int256(0))) _violation("kappa is not the credited gain of a hit");
                if (c[j] != (f.cfg.alpha * kappa[j]) / ONE + phi[j]) _violation("contribution is not alpha kappa + phi");
                contributed[f.taskId][who[j]] += c[j];
            }
            int256 gap = phiSum - gain;
            if (gap < 0) gap = -gap;
            if (who.length > 0 && uint256(gap) >= who.length) _violation("split Shapley values do not sum to the gain");
        }
        if (seen != b.nodes.length) _violation("a resolution credited no one");
    }

    /// @dev Equation 7 of the submitters' credited sides at the split (reference `credited_sides`, `split_gain`).
    function _creditedGain(Fed storage f, Before memory b, uint256 i, uint256 feature, uint256 threshold)
        internal
        view
        returns (int256)
    {
        Node memory nd = chain.getNode(f.taskId, b.tree, b.nodes[i]);
        uint256 rank = feature == nd.cand0 ? 0 : 1;
        uint256 s = f.slots;
        int256[4] memory sum;
        for (uint256 j = 0; j < b.subs.length; ++j) {
            int256[6] memory acc;
            for (uint256 bin = 0; bin < s; ++bin) {
                uint256 o = bin <= threshold ? 0 : 3;
                acc[o] += b.blocks[i][j][rank * s + bin];
                acc[o + 1] += b.blocks[i][j][2 * s + rank * s + bin];
                acc[o + 2] += b.blocks[i][j][4 * s + rank * s + bin];
            }
            uint256[3] memory cr = b.credits[j];
            sum[0] += (acc[0] * int256(cr[0])) / ONE;
            sum[2] += (acc[3] * int256(cr[0])) / ONE;
            if (f.cfg.hessianMode == 1) {
                sum[1] += (acc[2] * ONE * int256(cr[2])) / ONE;
                sum[3] += (acc[5] * ONE * int256(cr[2])) / ONE;
            } else {
                sum[1] += (acc[1] * int256(cr[1])) / ONE;
                sum[3] += (acc[4] * int256(cr[1])) / ONE;
            }
        }
        return _side(sum[0], sum[1], f.cfg.lambda) + _side(sum[2], sum[3], f.cfg.lambda);
    }

    function _side(int256 g, int256 h, int256 lam) internal pure returns (int256) {
        int256 d = h + lam;
        return d <= 0 ? int256(0) : (g * g) / d;
    }

    function _indexOf(uint256[] memory xs, uint256 x) internal pure returns (uint256) {
        for (uint256 i = 0; i < xs.length; ++i) if (xs[i] == x) return i;
        revert("resolution of a node not asked for");
    }

    // ------------------------------------------------------------------ payouts, as the reference rules

    /// @dev Once a task completes (or is cancelled), what each account is entitled to under the reference's payout
    ///      rule (`reference.payouts`): a positive total's pro-rata share of the reward, paid when the party took part
    ///      to the last step and forfeited to the requester otherwise; the requester gets the rest.
    function _settle(Fed storage f) internal {
        if (settled[f.taskId]) return;
        if (f.status == Status.Cancelled) {
            settled[f.taskId] = true;
            entitled[f.taskId][f.requester] = f.reward;
            return;
        }
        if (f.status != Status.Completed) return;
        settled[f.taskId] = true;
        uint256 positive;
        int256[] memory totals = new int256[](f.parties.length);
        for (uint256 p = 0; p < f.parties.length; ++p) {
            (, , , totals[p]) = chain.getMember(f.taskId, f.parties[p]);
            if (totals[p] > 0) positive += uint256(totals[p]);
        }
        uint256 paid;
        if (positive > 0) {
            uint256 shift;
            while ((positive >> shift) >= 1 << 128) ++shift;
            for (uint256 p = 0; p < f.parties.length; ++p) {
                if (totals[p] <= 0) continue;
                uint256 amount = (f.reward * (uint256(totals[p]) >> shift)) / (positive >> shift);
                if (f.lastSub[p] == f.step) {
                    entitled[f.taskId][f.parties[p]] = amount;
                    paid += amount;
                }
            }
        }
        entitled[f.taskId][f.requester] += f.reward - paid;
        did["completed"] += 1;
    }
}
