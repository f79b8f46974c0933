// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {popcount} from "./FGBDTBits.sol";
import {FGBDTBallotLib} from "./FGBDTBallot.sol";
import {FGBDTCommitLib} from "./FGBDTCommit.sol";
import {FGBDTConfigLib} from "./FGBDTConfig.sol";
import {FGBDTEndorseLib} from "./FGBDTEndorse.sol";
import {IFGBDTEvents} from "./FGBDTEvents.sol";
import {FGBDTMathLib} from "./FGBDTMath.sol";
import {Member, Membership} from "./FGBDTMember.sol";
import {FGBDTPayoutLib} from "./FGBDTPayout.sol";
import {FGBDTResolveLib} from "./FGBDTResolve.sol";
import {FGBDTRulesLib} from "./FGBDTRules.sol";
import {Status, Phase, Task, Node, nodeOf, openNode, drawn} from "./FGBDTTask.sol";

/// @title FGBDTChain
/// @notice Federated gradient-boosted trees with on-chain fairness. A requester opens a task with a reward, approves
///         the parties that ask to join, and the parties build the model level by level: they vote for features (in
///         the first `votedTrees` trees; later trees draw them from a public seed), the contract fixes two candidates
///         per node, each party commits its endorsed candidate histograms, and anyone resolves the nodes by
///         replaying the histograms in calldata. Splits, leaves, split Shapley values and voting
///         contributions follow `ledger/spec/reference.py` bit for bit; rewards are paid pro rata to the clipped totals,
///         to the parties that took part to the last step (`RewardForfeited`).
/// @dev Histograms never touch storage: a party stores one Merkle root over its per-node histogram hashes per level
///      and emits the data; resolvers pass the data again with Merkle proofs. Node ids form a heap (root 1, children
///      2i and 2i+1); level l holds nodes 2^l .. 2^(l+1)-1, tracked as a bitmask (depth is at most 8).
///      Callers are identified by `_msgSender()` (ERC-2771): a direct transaction's sender, or the signer of a
///      request relayed by the trusted forwarder (OpenZeppelin's `ERC2771Forwarder`, used by the REST API).
///      Endorsements are EIP-712 typed data under this contract's domain (OpenZeppelin's `EIP712`, published by
///      `eip712Domain()`, ERC-5267), recovered by OpenZeppelin's `ECDSA` (`FGBDTEndorseLib`).
///      One concern per file: the records (`FGBDTTask.sol`, `FGBDTMember.sol`), the events and errors
///      (`IFGBDTEvents`), and the linked libraries this contract calls by DELEGATECALL, which keep it under EIP-170's
///      24,576 bytes: a node's resolution (`FGBDTResolveLib`), the payouts (`FGBDTPayoutLib`), the ballots
///      (`FGBDTBallotLib`), the histogram rules (`FGBDTRulesLib`), the commitments (`FGBDTCommitLib`), the
///      endorsements (`FGBDTEndorseLib`), the config check (`FGBDTConfigLib`) and the math (`FGBDTMathLib`).
contract FGBDTChain is IFGBDTEvents, ERC2771Context, EIP712, ReentrancyGuard {
    // ------------------------------------------------------------------ constants

    /// @notice Upper bound on approved parties (split Shapley is estimated above 12).
    uint256 public constant MAX_PARTIES = FGBDTConfigLib.MAX_PARTIES;
    /// @notice Upper bound on tree depth (a level's open nodes fit one 256-bit mask).
    uint256 public constant MAX_DEPTH = FGBDTConfigLib.MAX_DEPTH;
    /// @dev The bin edges' magic and format version (`ledger/spec/edges.py`): "FGBE", 2.
    bytes5 private constant EDGES_V2 = 0x4647424502;

    // ------------------------------------------------------------------ storage

    /// @notice Number of tasks created; task ids are 1..taskCount.
    uint256 public taskCount;
    mapping(uint256 => Task) private _tasks;
    mapping(uint256 => mapping(address => Member)) private _members;
    /// @dev task => tree parity => node id => record (see `Node.tree`).
    mapping(uint256 => mapping(uint256 => mapping(uint256 => Node))) private _nodes;
    /// @dev task => node => party index => keccak of (step, its gL, hL, nL, gR, hR, nR) at the node's split: what its
    ///      totals at the children must hash to in the next step (overwritten tree after tree).
    mapping(uint256 => mapping(uint256 => mapping(uint256 => bytes32))) private _sides;
    /// @dev Node hashes of the parts committed by `commitHistograms`, by task, party and open-node rank; valid for
    ///      the member's `partStep` only (overwritten, never cleared).
    mapping(uint256 => mapping(address => mapping(uint256 => bytes32))) private _committed;
    /// @notice Wei each address can withdraw from each task.
    mapping(uint256 => mapping(address => uint256)) public owed;

    // ------------------------------------------------------------------ construction

    /// @notice Deploy the task contract: it trusts `trustedForwarder`'s relayed requests, and its EIP-712 domain
    ///         (name `FGBDTChain`, version `1`, this chain and address) signs the endorsements.
    /// @param trustedForwarder The ERC-2771 forwarder whose relayed requests act for their signer (the API relays
    ///        requests signed by the caller's key through it; direct transactions keep working as before).
    constructor(address trustedForwarder)
        ERC2771Context(trustedForwarder)
        EIP712(FGBDTEndorseLib.DOMAIN_NAME, FGBDTEndorseLib.DOMAIN_VERSION)
    {}

    // ------------------------------------------------------------------ task lifecycle

    /// @notice Open a task; `msg.value` is the reward.
    /// @param cfg GBDT, quorum, party-limit and deadline parameters.
    /// @param featureMin Per-feature minimum of the data schema (fixed point); the length sets the feature count.
    /// @param featureMax Per-feature maximum (fixed point).
    /// @param binEdgesHash Hash of the bin edges every party must use, or zero to fix them at `start`.
    /// @return taskId The new task's id.
    function createTask(
        FGBDTConfigLib.Config calldata cfg,
        int256[] calldata featureMin,
        int256[] calldata featureMax,
        bytes32 binEdgesHash
    ) external payable returns (uint256 taskId) {
        FGBDTConfigLib.check(cfg, featureMin, featureMax);
        if (msg.value >= 1 << 128) revert FGBDTConfigLib.InvalidConfig("reward");
        taskId = ++taskCount;
        Task storage t = _tasks[taskId];
        t.requester = _msgSender();
        t.status = Status.Open;
        t.numFeatures = uint16(featureMin.length);
        t.joinDeadline = uint64(block.number) + cfg.joinBlocks;
        t.reward = msg.value;
        t.schemaHash = keccak256(abi.encode(featureMin, featureMax, binEdgesHash));
        t.binEdgesHash = binEdgesHash;
        t.cfg = cfg;
        emit TaskCreated(taskId, _msgSender(), msg.value, cfg, featureMin, featureMax, binEdgesHash);
    }

    /// @notice Add to an open task's reward (anyone). The API relays `createTask` with no value, because a relayed
    ///         request cannot carry the signer's ether: the requester deposits the reward with this direct call.
    /// @param taskId The task.
    function fund(uint256 taskId) external payable {
        Task storage t = _task(taskId);
        if (t.status != Status.Open) revert WrongStatus(taskId, t.status);
        uint256 reward = t.reward + msg.value;
        if (reward >= 1 << 128) revert FGBDTConfigLib.InvalidConfig("reward");
        t.reward = reward;
        emit TaskFunded(taskId, _msgSender(), msg.value, reward);
    }

    /// @notice Ask to join an open task, publishing the party's PSD and endorsement endpoint.
    /// @param taskId The task.
    /// @param psd The serialised differentially private spatial decomposition (emitted; its hash is stored).
    /// @param endpoint URL where the party answers endorsement requests.
    function join(uint256 taskId, bytes calldata psd, string calldata endpoint) external {
        Task storage t = _task(taskId);
        if (t.status != Status.Open) revert WrongStatus(taskId, t.status);
        if (block.number > t.joinDeadline) revert JoinWindowClosed(taskId, t.joinDeadline);
        Member storage m = _members[taskId][_msgSender()];
        if (m.status != Membership.None) revert AlreadyJoined(taskId, _msgSender());
        m.status = Membership.Pending;
        m.psdHash = keccak256(psd);
        emit JoinRequested(taskId, _msgSender(), m.psdHash, psd, endpoint);
    }

    /// @notice Approve a pending party (requester only). Approval order is the party order of the task.
    /// @param taskId The task.
    /// @param party The applicant.
    function approve(uint256 taskId, address party) external {
        Task storage t = _requesterTask(taskId);
        if (t.status != Status.Open) revert WrongStatus(taskId, t.status);
        Member storage m = _members[taskId][party];
        if (m.status != Membership.Pending) revert NotPending(taskId, party);
        if (t.parties.length >= t.cfg.maxParties) revert PartyLimitReached(taskId, t.cfg.maxParties);
        m.status = Membership.Approved;
        m.index = uint16(t.parties.length);
        t.parties.push(party);
        emit PartyApproved(taskId, party, m.index);
    }

    /// @notice Refuse a pending party (requester only).
    /// @param taskId The task.
    /// @param party The applicant.
    function refuse(uint256 taskId, address party) external {
        Task storage t = _requesterTask(taskId);
        if (t.status != Status.Open) revert WrongStatus(taskId, t.status);
        Member storage m = _members[taskId][party];
        if (m.status != Membership.Pending) revert NotPending(taskId, party);
        m.status = Membership.Refused;
        emit PartyRefused(taskId, party);
    }

    /// @notice Start training once at least `minParties` are approved (requester only), publishing the common bin
    ///         edges every party must use.
    /// @dev The edges are derived from the parties' noisy sketches (published with their PSDs), so they can only be
    ///      fixed here: with no hash given at creation this call fixes it, otherwise the edges must match it. The
    ///      encoding's header (magic "FGBE", version 2; bytes 9-10, `ledger/spec/edges.py`) names the histogram slots per
    ///      candidate: the missing
    ///      slot plus the most value bins any feature has, at most `bins + 1`. Histograms are that wide, not
    ///      `bins + 1`: slots above every feature's top bin hold no row on any data, and carrying them cost gas and
    ///      calldata in every submission and resolution. The parties refuse an encoding whose header is not the
    ///      one their own decoding of the edges gives.
    /// @param taskId The task.
    /// @param binEdges The encoded bin edges (emitted in `BinEdgesFixed`; only their hash and slot count are stored).
    function start(uint256 taskId, bytes calldata binEdges) external {
        Task storage t = _requesterTask(taskId);
        if (t.status != Status.Open) revert WrongStatus(taskId, t.status);
        if (t.parties.length < t.cfg.minParties) {
            revert NotEnoughParties(taskId, t.parties.length, t.cfg.minParties);
        }
        bytes32 edgesHash = keccak256(binEdges);
        if (
            binEdges.length < 11 ||
            bytes5(binEdges[0:5]) != EDGES_V2 ||
            (t.binEdgesHash != bytes32(0) && edgesHash != t.binEdgesHash)
        ) {
            revert BinEdgesMismatch(taskId, t.binEdgesHash, edgesHash);
        }
        uint16 slots = uint16(bytes2(binEdges[9:11]));
        // unchecked: a uint16 plus one in 256 bits cannot overflow
        unchecked {
            if (slots < 3 || slots > uint256(t.cfg.bins) + 1) revert FGBDTConfigLib.InvalidConfig("slots");
        }
        t.slots = slots;
        t.binEdgesHash = edgesHash;
        t.status = Status.Training;
        // the seed of the split Shapley estimates: the hash of this very block, which nobody knows when sending
        // `start` (every party committed its data, its PSD, when it joined), read by the first task transaction in
        // a later block (`_fixSeed`)
        t.seedBlock = uint64(block.number);
        emit BinEdgesFixed(taskId, edgesHash, binEdges);
        emit TrainingStarted(taskId, t.parties);
        _startTree(taskId, t, 0);
    }

    /// @notice Cancel a task that never started and credit the deposit back to the requester (requester only).
    /// @param taskId The task.
    function cancel(uint256 taskId) external {
        Task storage t = _requesterTask(taskId);
        if (t.status != Status.Open) revert WrongStatus(taskId, t.status);
        t.status = Status.Cancelled;
        uint256 refund = t.reward;
        owed[taskId][t.requester] += refund;
        emit TaskCancelled(taskId, refund);
    }

    // ------------------------------------------------------------------ training

    /// @notice Submit one vote per open node of the current level, in increasing node id (-1 abstains). The vote
    ///         that completes the step's ballots also closes it (`VotingClosed`, the candidates fixed).
    ///         Ahead: while the level before resolves, a party whose histograms it accepted may vote on the next
    ///         level of the same tree, one vote per child of every open node (two per node, left first, increasing
    ///         id); when that level opens, the votes of its nodes are the party's ballot, and ballots from every
    ///         party taking part close its voting at once. The votes then travel with the resolution instead of in
    ///         a round of their own. Likewise the next tree's root (level 0 of tree + 1, one vote), taken if the
    ///         resolving level ends the tree; a ballot whose form the opening level does not have is not taken.
    /// @param taskId The task.
    /// @param tree Current tree (guards against stale transactions), or the next one ahead of its root.
    /// @param level Current level, or ahead: the next one of the same tree, or 0 of the next tree.
    /// @param votes Feature index or -1 per open node (ahead: per child of every open node; one for a root).
    function submitVotes(uint256 taskId, uint256 tree, uint256 level, int256[] calldata votes) external {
        Task storage t = _task(taskId);
        if (t.status != Status.Training) revert WrongStatus(taskId, t.status);
        _fixSeed(taskId, t);
        Member storage m = _approved(taskId);
        uint256 k = popcount(t.openMask);
        bool root = level == 0 && tree == uint256(t.tree) + 1;
        bool ahead = t.phase == Phase.Resolving && (root || (tree == t.tree && level == uint256(t.level) + 1));
        if (ahead) {
            // the level must vote: within the depth and the trees, in a tree that does not draw its candidates
            if (root ? tree >= t.cfg.votedTrees || tree >= t.cfg.trees : level >= t.cfg.depth || drawn(t)) {
                revert WrongPhase(taskId, t.phase);
            }
            // taking part in the next step: the resolving step accepted its histograms
            if (m.histStep != t.step) revert Excluded(taskId, _msgSender());
            if (m.aheadStep == t.step + 1) revert AlreadyVoted(taskId, _msgSender());
            k = root ? 1 : 2 * k;
        } else {
            if (tree != t.tree || level != t.level) revert WrongStep(taskId, t.tree, t.level);
            if (t.phase != Phase.Voting) revert WrongPhase(taskId, t.phase);
            if (!_active(t, m)) revert Excluded(taskId, _msgSender());
            if (m.votedStep == t.step) revert AlreadyVoted(taskId, _msgSender());
            if (block.number > t.stepDeadline) revert StepDeadlinePassed(taskId, t.stepDeadline);
        }
        if (votes.length != k) revert LengthMismatch(k, votes.length);
        emit VotesSubmitted(taskId, tree, level, _msgSender(), votes);
        if (ahead) {
            FGBDTBallotLib.store(m.aheadVotes, votes, t.numFeatures);
            m.aheadStep = t.step + 1;
            return;
        }
        FGBDTBallotLib.store(m.votes, votes, t.numFeatures);
        m.votedStep = t.step;
        t.voteCount += 1;
        if (t.voteCount == t.activeCount) _closeVoting(taskId, t);
    }

    /// @notice Close the current step once its deadline passed (anyone may call): voting, fixing each node's top-2
    ///         from the ballots cast, or the histogram step, opening resolution without the voters (with drawn
    ///         candidates: the parties taking part) that neither submitted nor declined. A complete step closed itself.
    /// @param taskId The task.
    function closeStep(uint256 taskId) external {
        Task storage t = _task(taskId);
        if (t.status != Status.Training) revert WrongStatus(taskId, t.status);
        Phase phase = t.phase;
        if (phase == Phase.Resolving) revert WrongPhase(taskId, phase);
        bool voting = phase == Phase.Voting;
        bool complete = voting ? t.voteCount >= t.activeCount : _histogramsComplete(t);
        if (!complete && block.number <= t.stepDeadline) revert StepStillOpen(taskId, t.stepDeadline);
        _fixSeed(taskId, t);
        if (voting) _closeVoting(taskId, t);
        else _closeHistograms(taskId, t);
    }

    /// @dev Fix the top-2 of the step's ballots and open the histogram step: by `closeStep`, or by the vote that
    ///      completes the ballots, or by the resolution that opens a level whose every ballot came ahead (no separate
    ///      closing transaction, no extra block, on the happy path). The ballots go to `levelTop2` one after another
    ///      in one byte string.
    function _closeVoting(uint256 taskId, Task storage t) private {
        uint256 mCount = t.parties.length;
        uint256 step = t.step;
        // starts as the empty byte string every unassigned bytes memory is; the ballots are appended
        // slither-disable-next-line uninitialized-local
        bytes memory ballots;
        uint256 nb = 0;
        for (uint256 p = 0; p < mCount; ++p) {
            Member storage m = _members[taskId][t.parties[p]];
            if (m.votedStep == step) {
                ballots = bytes.concat(ballots, m.votes.packed);
                ++nb;
            }
        }
        _fixCandidates(taskId, t, ballots, t.cfg.tieBreak);
        t.stepDeadline = uint64(block.number) + t.cfg.stepBlocks;
        emit VotingClosed(taskId, t.tree, t.level, nb, t.stepDeadline);
    }

    /// @notice Commit the next node blocks of this level's histograms ahead of `submitHistograms`, so that no
    ///         transaction outgrows what a network relays (a geth pool takes 128 KiB at most): the exact rules are
    ///         checked on the part and its node hashes are stored; `submitHistograms` then carries the remaining
    ///         nodes and the endorsements of the whole level's commitment. A part never separates two siblings.
    /// @param taskId The task.
    /// @param tree Current tree.
    /// @param level Current level.
    /// @param data Node blocks of the open nodes that follow those already committed (increasing id), emitted.
    function commitHistograms(uint256 taskId, uint256 tree, uint256 level, int256[] calldata data) external {
        (Task storage t, Member storage m) = _histogramStep(taskId, tree, level);
        _fixSeed(taskId, t);
        (bytes32[] memory part, uint256 first) = _part(taskId, t, m, data, false);
        mapping(uint256 => bytes32) storage stored = _committed[taskId][_msgSender()];
        for (uint256 i = 0; i < part.length; ++i) stored[first + i] = part[i];
        m.partStep = t.step;
        // at most the level's open nodes: 128 at the deepest level (MAX_DEPTH 8)
        // forge-lint: disable-next-line(unsafe-typecast)
        m.partNodes = uint16(first + part.length);
        emit HistogramsCommitted(taskId, tree, level, _msgSender(), first, data);
    }

    /// @notice Commit this level's candidate histograms with endorsements of other approved parties. The
    ///         submission that completes the step also closes it (`HistogramsClosed`): resolution opens.
    /// @dev `data` holds, per open node in increasing id, g[2*nbins] | h[2*nbins] | n[2*nbins] (nbins = bins + 1),
    ///      from the first node not committed by `commitHistograms` at this step. First the exact rules
    ///      (`FGBDTRulesLib`): every node's candidate totals and bin bounds, then, below a tree's root, every pair of
    ///      siblings' totals against this party's own side sums at their parent. The commitment is
    ///      `FGBDTCommitLib.root` over every open node's hash. Each endorsement's signature is a 65-byte (r, s, v)
    ///      EIP-712 signature of the typed `Endorsement` (task, tree, level, party, root, credits) under this
    ///      contract's domain (`eip712Domain()`; `FGBDTEndorseLib.digest`); at a tree's root the smallest credits
    ///      attested become the party's credit for the tree.
    /// @param taskId The task.
    /// @param tree Current tree.
    /// @param level Current level.
    /// @param data The histograms (the level's last part), emitted but not stored.
    /// @param endorsements Signatures with the credits they attest; all must be valid, distinct, from other
    ///        approved parties.
    function submitHistograms(
        uint256 taskId,
        uint256 tree,
        uint256 level,
        int256[] calldata data,
        FGBDTEndorseLib.Endorsement[] calldata endorsements
    ) external {
        (Task storage t, Member storage m) = _histogramStep(taskId, tree, level);
        _fixSeed(taskId, t);
        (bytes32[] memory part, uint256 first) = _part(taskId, t, m, data, true);
        bytes32[] memory leaves = new bytes32[](first + part.length);
        mapping(uint256 => bytes32) storage stored = _committed[taskId][_msgSender()];
        for (uint256 i = 0; i < first; ++i) leaves[i] = stored[i];
        for (uint256 i = 0; i < part.length; ++i) leaves[first + i] = part[i];
        bytes32 root = FGBDTCommitLib.root(leaves);
        (uint256 valid, uint256[3] memory credit) = _checkEndorsements(taskId, t, tree, level, root, endorsements);
        m.histRoot = root;
        m.histStep = t.step;
        if (level == 0) (m.creditG, m.creditH, m.creditN) = (uint80(credit[0]), uint80(credit[1]), uint80(credit[2]));
        t.histCount += 1;
        // the party's bit: its index is below MAX_PARTIES (64), so the bit fits 64 bits
        // forge-lint: disable-next-line(incorrect-shift)
        t.histMask |= uint64(1 << m.index);
        emit HistogramsSubmitted(taskId, tree, level, _msgSender(), root, valid, credit, data);
        if (_histogramsComplete(t)) _closeHistograms(taskId, t);
    }

    /// @notice Step aside for this level's histograms (a voter whose histograms were refused endorsement), so the
    ///         step closes as soon as every other voter submitted (in the transaction that completes it) instead
    ///         of at its deadline. The party earns nothing for the level's nodes, exactly as if it had stayed silent.
    /// @param taskId The task.
    /// @param tree Current tree.
    /// @param level Current level.
    function declineHistograms(uint256 taskId, uint256 tree, uint256 level) external {
        (Task storage t, Member storage m) = _histogramStep(taskId, tree, level);
        _fixSeed(taskId, t);
        m.declinedStep = t.step;
        t.declineCount += 1;
        emit HistogramsDeclined(taskId, tree, level, _msgSender());
        if (_histogramsComplete(t)) _closeHistograms(taskId, t);
    }

    /// @dev Whether every voter (with drawn candidates: every party taking part) submitted or declined.
    function _histogramsComplete(Task storage t) private view returns (bool) {
        return t.histCount + t.declineCount == (drawn(t) ? t.activeCount : t.voteCount);
    }

    function _closeHistograms(uint256 taskId, Task storage t) private {
        t.phase = Phase.Resolving;
        emit HistogramsClosed(taskId, t.tree, t.level, t.histCount, t.histMask);
    }

    /// @notice Resolve one open node of the current level (anyone may call): replay the submitting parties'
    ///         histograms, check them against their commitments, then split or make a leaf and credit contributions
    ///         exactly as `reference.resolve_node`. The last resolution of a level advances the task. Not in the
    ///         block of `start` (`ShapleySeedPending`: the task's Shapley seed is that block's hash, `_seeded`);
    ///         one that finds that hash expired unread (256 blocks) resolves nothing and makes its own block the
    ///         seed block, and the next, a block later, resolves.
    /// @param taskId The task.
    /// @param node Heap id of the node.
    /// @param g Gradient sums, party-major over the submitting parties in party order, 2*nbins each.
    /// @param h Hessian sums, same layout.
    /// @param n Row counts, same layout.
    /// @param proofs Merkle proofs, party-major, ceil(log2(open nodes)) hashes each.
    function resolveNode(
        uint256 taskId,
        uint256 node,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n,
        bytes32[] calldata proofs
    ) external {
        Task storage t = _taskInPhase(taskId, Phase.Resolving);
        if (!_seeded(taskId, t)) return;
        _resolveAt(taskId, t, node, g, h, n, proofs);
        if (t.resolvedMask == t.openMask) _advance(taskId, t);
    }

    /// @notice Resolve open nodes of the current level (anyone may call): for each node, replay the submitting
    ///         parties' histograms, check them against their commitments, then split or make a leaf and credit
    ///         contributions exactly as `reference.resolve_node`. All or nothing; the last resolution of a level
    ///         advances the task. Block gas and transaction size bound how many nodes fit; callers cut larger
    ///         batches (`ledger/spec/tx_size.py`). Not in the block of `start`, and past its hash's expiry the first
    ///         call resolves nothing, as `resolveNode`.
    /// @param taskId The task.
    /// @param nodes Heap ids of the nodes, any order, each open and unresolved.
    /// @param g Per node in `nodes` order, its gradient sums, party-major over the submitting parties in party
    ///        order, 2*nbins each; concatenated.
    /// @param h Hessian sums, same layout.
    /// @param n Row counts, same layout.
    /// @param proofs Per node in `nodes` order, its Merkle proofs, party-major, ceil(log2(open nodes)) hashes each;
    ///        concatenated.
    function resolveNodes(
        uint256 taskId,
        uint256[] calldata nodes,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n,
        bytes32[] calldata proofs
    ) external {
        Task storage t = _taskInPhase(taskId, Phase.Resolving);
        if (!_seeded(taskId, t)) return;
        uint256 k = nodes.length;
        if (k == 0 || g.length % k != 0 || proofs.length % k != 0) revert LengthMismatch(k, g.length);
        uint256 w = g.length / k;
        uint256 pl = proofs.length / k;
        if (h.length != g.length) revert LengthMismatch(g.length, h.length);
        if (n.length != g.length) revert LengthMismatch(g.length, n.length);
        for (uint256 i = 0; i < k; ++i) {
            _resolveAt(
                taskId,
                t,
                nodes[i],
                g[i * w:(i + 1) * w],
                h[i * w:(i + 1) * w],
                n[i * w:(i + 1) * w],
                proofs[i * pl:(i + 1) * pl]
            );
        }
        if (t.resolvedMask == t.openMask) _advance(taskId, t);
    }

    /// @dev Fixes the task's Shapley seed once a block after its seed block has come (every task transaction in
    ///      training calls it): keccak256 of that block's hash and the task id. A pending seed has its seed block
    ///      set, a fixed one not (the slot is read with the step deadline's). The EVM reads a block's hash for 256
    ///      blocks: a transaction that finds it expired makes its own block the seed block, whose hash its sender
    ///      cannot know either, and the next task transaction in a later block fixes the seed.
    /// @return rebased Whether this call made its own block the seed block.
    function _fixSeed(uint256 taskId, Task storage t) private returns (bool rebased) {
        uint256 anchor = t.seedBlock;
        if (anchor == 0 || block.number <= anchor) return false;
        bytes32 h = blockhash(anchor);
        if (h == bytes32(0)) {
            t.seedBlock = uint64(block.number);
            return true;
        }
        uint256 seed = uint256(keccak256(abi.encode(h, taskId)));
        t.shapleySeed = seed;
        t.seedBlock = 0;
        emit ShapleySeedFixed(taskId, seed, anchor);
    }

    /// @dev Whether a resolution may go on: every resolution needs the seed, whatever the number of parties (one
    ///      rule for every task). Fixed here if it can be; in the seed block itself `ShapleySeedPending` (a retry a
    ///      block later passes). A resolution that finds the seed block's hash expired makes its own block the seed
    ///      block and resolves nothing, succeeding so that the new seed block holds; the next, a block later,
    ///      resolves.
    function _seeded(uint256 taskId, Task storage t) private returns (bool) {
        bool rebased = _fixSeed(taskId, t);
        if (t.seedBlock == 0) return true;
        if (!rebased) revert ShapleySeedPending(taskId, t.seedBlock);
        return false;
    }

    /// @dev One node's resolution (`FGBDTResolveLib.resolve`) in the task's storage.
    function _resolveAt(
        uint256 taskId,
        Task storage t,
        uint256 node,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n,
        bytes32[] calldata proofs
    ) private {
        FGBDTResolveLib.resolve(t, _members[taskId], _nodes[taskId], _sides[taskId], taskId, node, g, h, n, proofs);
    }

    // ------------------------------------------------------------------ rewards

    /// @notice Withdraw everything owed to the caller by a task (pull payment; checks, effects, then the transfer,
    ///         under OpenZeppelin's storage `ReentrancyGuard`: a re-entering call reverts
    ///         `ReentrancyGuardReentrantCall`).
    /// @param taskId The task.
    function withdraw(uint256 taskId) external nonReentrant {
        uint256 amount = owed[taskId][_msgSender()];
        if (amount == 0) revert NothingToWithdraw(taskId, _msgSender());
        owed[taskId][_msgSender()] = 0;
        emit Withdrawn(taskId, _msgSender(), amount);
        (bool ok, ) = payable(_msgSender()).call{value: amount}("");
        if (!ok) revert TransferFailed(_msgSender(), amount);
    }

    // ------------------------------------------------------------------ views

    /// @notice A task's parameters.
    /// @param taskId The task.
    /// @return The configuration fixed at creation.
    function getConfig(uint256 taskId) external view returns (FGBDTConfigLib.Config memory) {
        return _task(taskId).cfg;
    }

    /// @notice A task's progress.
    /// @param taskId The task.
    /// @return requester The requester.
    /// @return status Lifecycle status.
    /// @return phase Current step.
    /// @return tree Current tree.
    /// @return level Current level.
    /// @return openMask Open nodes of the level (bit b = node 2^level + b).
    /// @return resolvedMask Resolved nodes of the level.
    /// @return stepDeadline Last block of the current step.
    /// @return reward The deposit.
    function getState(uint256 taskId)
        external
        view
        returns (
            address requester,
            Status status,
            Phase phase,
            uint256 tree,
            uint256 level,
            uint256 openMask,
            uint256 resolvedMask,
            uint256 stepDeadline,
            uint256 reward
        )
    {
        Task storage t = _task(taskId);
        return (t.requester, t.status, t.phase, t.tree, t.level, t.openMask, t.resolvedMask, t.stepDeadline, t.reward);
    }

    /// @notice Approved parties in party order.
    /// @param taskId The task.
    /// @return The parties.
    function getParties(uint256 taskId) external view returns (address[] memory) {
        return _task(taskId).parties;
    }

    /// @notice A party's membership record.
    /// @param taskId The task.
    /// @param party The party.
    /// @return status Membership status.
    /// @return index Party index (approval order).
    /// @return psdHash Hash of its PSD.
    /// @return contribution Its contribution total (fixed point, may be negative).
    function getMember(uint256 taskId, address party)
        external
        view
        returns (Membership status, uint256 index, bytes32 psdHash, int256 contribution)
    {
        Member storage m = _members[taskId][party];
        return (m.status, m.index, m.psdHash, m.contribution);
    }

    /// @notice One node of a tree of the model, while the chain keeps it: the current and the previous tree's
    ///         nodes (earlier trees are in the events); a record the chain no longer holds reads as unknown (zero).
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param node Heap id of the node (root 1, children 2i and 2i + 1).
    /// @return nd The node record.
    function getNode(uint256 taskId, uint256 tree, uint256 node) external view returns (Node memory nd) {
        Node storage stored = nodeOf(_nodes[taskId], tree, node);
        if (stored.tree == tree) nd = stored;
    }

    // ------------------------------------------------------------------ internals

    function _task(uint256 taskId) private view returns (Task storage t) {
        t = _tasks[taskId];
        if (t.status == Status.None) revert UnknownTask(taskId);
    }

    function _requesterTask(uint256 taskId) private view returns (Task storage t) {
        t = _task(taskId);
        if (_msgSender() != t.requester) revert NotRequester(taskId, _msgSender());
    }

    function _trainingTask(uint256 taskId, uint256 tree, uint256 level, Phase phase)
        private
        view
        returns (Task storage t)
    {
        t = _task(taskId);
        if (t.status != Status.Training) revert WrongStatus(taskId, t.status);
        if (tree != t.tree || level != t.level) revert WrongStep(taskId, t.tree, t.level);
        if (t.phase != phase) revert WrongPhase(taskId, t.phase);
    }

    function _approved(uint256 taskId) private view returns (Member storage m) {
        m = _members[taskId][_msgSender()];
        if (m.status == Membership.None) revert NotMember(taskId, _msgSender());
        if (m.status != Membership.Approved) revert NotApproved(taskId, _msgSender());
    }

    /// @dev Whether a party takes part in the current step: every party at the first step, afterwards only those
    ///      whose histograms the previous step accepted (a party refused, declining or silent once is out for good:
    ///      its later histograms could no longer be tied to its earlier ones).
    function _active(Task storage t, Member storage m) private view returns (bool) {
        return t.step == 1 || m.histStep == t.step - 1;
    }

    /// @dev Who may send histograms: a voter of the step, or with drawn candidates (no vote round) every party
    ///      taking part in it.
    function _checkTakesPart(uint256 taskId, Task storage t, Member storage m) private view {
        if (drawn(t)) {
            if (!_active(t, m)) revert Excluded(taskId, _msgSender());
        } else if (m.votedStep != t.step) {
            revert DidNotVote(taskId, _msgSender());
        }
    }

    /// @dev A training task in `phase`: what the closing and resolving calls, which anyone may send, check first.
    function _taskInPhase(uint256 taskId, Phase phase) private view returns (Task storage t) {
        t = _task(taskId);
        if (t.status != Status.Training) revert WrongStatus(taskId, t.status);
        if (t.phase != phase) revert WrongPhase(taskId, t.phase);
    }

    /// @dev The task and the caller's membership at a histogram step the caller may still send to (or decline).
    function _histogramStep(uint256 taskId, uint256 tree, uint256 level)
        private
        view
        returns (Task storage t, Member storage m)
    {
        t = _trainingTask(taskId, tree, level, Phase.Histograms);
        m = _approved(taskId);
        _checkTakesPart(taskId, t, m);
        if (m.histStep == t.step || m.declinedStep == t.step) revert AlreadySubmitted(taskId, _msgSender());
        if (block.number > t.stepDeadline) revert StepDeadlinePassed(taskId, t.stepDeadline);
    }

    /// @dev Checks the caller's next part of its level histograms (open nodes from rank `first`, the count already
    ///      committed at this step) and returns its node hashes. `last`: the part must end the level; otherwise it
    ///      must end on a sibling boundary below the root.
    function _part(uint256 taskId, Task storage t, Member storage m, int256[] calldata data, bool last)
        private
        view
        returns (bytes32[] memory, uint256 first)
    {
        uint256 block_ = 6 * uint256(t.slots);
        uint256 k = popcount(t.openMask);
        if (m.partStep == t.step) first = m.partNodes;
        uint256 end = first + data.length / block_;
        if (last ? end != k : (end <= first || end > k || (t.level > 0 && end % 2 == 1))) {
            revert LengthMismatch((k - first) * block_, data.length);
        }
        if (data.length % block_ != 0) revert LengthMismatch(end * block_, data.length);
        uint256 mask = 0;
        uint256 rank = 0;
        for (uint256 b = 0; rank < end; ++b) {
            if ((t.openMask >> b) & 1 == 0) continue;
            // the open node's bit in the part's mask
            // forge-lint: disable-next-line(incorrect-shift)
            if (rank >= first) mask |= 1 << b;
            ++rank;
        }
        _checkRules(taskId, t, m.index, data, block_, mask);
        return (FGBDTCommitLib.leaves(data, block_), first);
    }

    /// @dev The endorsements' signers (recovered under this contract's EIP-712 domain) are distinct approved
    ///      parties other than the caller, and a quorum of the others; returns their count and least credits.
    function _checkEndorsements(
        uint256 taskId,
        Task storage t,
        uint256 tree,
        uint256 level,
        bytes32 root,
        FGBDTEndorseLib.Endorsement[] calldata endorsements
    ) private view returns (uint256 valid, uint256[3] memory credit) {
        address[] memory signers;
        (signers, credit) = FGBDTEndorseLib.signers(
            _domainSeparatorV4(),
            taskId,
            tree,
            level,
            _msgSender(),
            root,
            endorsements
        );
        uint256 seen;
        for (; valid < signers.length; ++valid) {
            address signer = signers[valid];
            Member storage em = _members[taskId][signer];
            if (em.status != Membership.Approved) revert EndorserNotMember(signer);
            if (signer == _msgSender()) revert SelfEndorsement(signer);
            // the endorser's bit among the task's parties
            // forge-lint: disable-next-line(incorrect-shift)
            uint256 bit = 1 << em.index;
            if (seen & bit != 0) revert DuplicateEndorsement(signer);
            seen |= bit;
        }
        uint256 others = t.parties.length - 1;
        uint256 need = (uint256(t.cfg.quorumNum) * others + t.cfg.quorumDen - 1) / t.cfg.quorumDen;
        if (valid < need) revert InsufficientEndorsements(valid, need);
    }

    /// @dev The exact rules of a submission (reference `histogram_rules.check_level`): each open node's candidate
    ///      totals and bin bounds in increasing node id, then (below the root) each pair of siblings' totals
    ///      against the party's side sums at their parent, stored with the previous step's resolution.
    function _checkRules(
        uint256 taskId,
        Task storage t,
        uint256 partyIndex,
        int256[] calldata data,
        uint256 block_,
        uint256 mask
    ) private view {
        // 2^level, the level's first heap id
        // forge-lint: disable-next-line(incorrect-shift)
        uint256 base = 1 << t.level;
        int256[] memory totals = FGBDTRulesLib.checkLevel(
            data,
            block_ / 6,
            base,
            mask,
            t.cfg.epsilon > 0 ? FGBDTRulesLib.BOUNDS_NONE : t.cfg.objective,
            t.tree == 0
        );
        if (t.level == 0) return;
        uint256 i = 0;
        for (uint256 b = 0; b < base; b += 2) {
            if ((mask >> b) & 1 == 0) continue;
            uint256 node = base + b;
            bytes32 got = keccak256(
                abi.encode(
                    t.step - 1,
                    totals[3 * i],
                    totals[3 * i + 1],
                    totals[3 * i + 2],
                    totals[3 * i + 3],
                    totals[3 * i + 4],
                    totals[3 * i + 5]
                )
            );
            if (got != _sides[taskId][node / 2][partyIndex]) revert FGBDTRulesLib.InheritedTotalsMismatch(node);
            i += 2;
        }
    }

    function _startTree(uint256 taskId, Task storage t, uint256 tree) private {
        // below cfg.trees, itself a uint16 (_advance opens tree + 1 only while it is below)
        // forge-lint: disable-next-line(unsafe-typecast)
        t.tree = uint16(tree);
        t.level = 0;
        openNode(nodeOf(_nodes[taskId], tree, 1), tree, 0, 0, 0);
        _startLevel(taskId, t, 1);
    }

    function _startLevel(uint256 taskId, Task storage t, uint256 mask) private {
        t.openMask = mask;
        t.nextMask = 0;
        t.resolvedMask = 0;
        t.phase = Phase.Voting;
        t.step += 1;
        t.voteCount = 0;
        t.histCount = 0;
        t.histMask = 0;
        t.declineCount = 0;
        uint256 active = 0;
        uint256 mCount = t.parties.length;
        for (uint256 p = 0; p < mCount; ++p) if (_active(t, _members[taskId][t.parties[p]])) ++active;
        // at most the task's parties (MAX_PARTIES, 64)
        // forge-lint: disable-next-line(unsafe-typecast)
        t.activeCount = uint16(active);
        t.stepDeadline = uint64(block.number) + t.cfg.stepBlocks;
        emit LevelStarted(taskId, t.tree, t.level, mask, t.stepDeadline);
        if (drawn(t)) _fixCandidates(taskId, t, "", FGBDTMathLib.TIE_HASHED);
    }

    /// @dev The ballots sent ahead for the level that just opened (`submitVotes`), each cut to its open nodes; when
    ///      every party taking part sent one, voting closes in the same transaction. Only a party whose histograms
    ///      the step before accepted could send one, so each is from a party taking part now.
    function _takeAhead(uint256 taskId, Task storage t, uint256 previous) private {
        uint256 step = t.step;
        uint256 mCount = t.parties.length;
        uint256 taken = 0;
        for (uint256 p = 0; p < mCount; ++p) {
            Member storage m = _members[taskId][t.parties[p]];
            if (m.aheadStep != step) continue;
            if (!FGBDTBallotLib.takeAhead(m.votes, m.aheadVotes, previous, t.openMask, t.level)) continue;
            // the task's step, itself a uint32
            // forge-lint: disable-next-line(unsafe-typecast)
            m.votedStep = uint32(step);
            ++taken;
        }
        // at most the task's parties (MAX_PARTIES, 64)
        // forge-lint: disable-next-line(unsafe-typecast)
        t.voteCount = uint16(taken);
        if (taken > 0 && taken == t.activeCount) _closeVoting(taskId, t);
    }

    /// @dev Fix and record every open node's two candidates: the top-2 of the level's ballots under `rule` (with
    ///      drawn candidates no ballots and the hashed key alone: the level goes straight to its histogram step).
    function _fixCandidates(uint256 taskId, Task storage t, bytes memory ballots, uint8 rule) private {
        uint256 tree = t.tree;
        uint256 mask = t.openMask;
        uint256[] memory fixed_ = FGBDTMathLib.levelTop2(ballots, t.numFeatures, rule, tree, t.level, mask);
        for (uint256 i = 0; i < fixed_.length; ++i) {
            uint256 x = fixed_[i];
            (uint256 node, uint256 first, uint256 second) = (x >> 32, (x >> 16) & 0xFFFF, x & 0xFFFF);
            Node storage nd = nodeOf(_nodes[taskId], tree, node);
            // features below the task's feature count, which FGBDTConfigLib.check keeps under 2^16 - 1
            // forge-lint: disable-next-line(unsafe-typecast)
            nd.cand0 = uint16(first);
            // forge-lint: disable-next-line(unsafe-typecast)
            nd.cand1 = uint16(second);
            emit CandidatesFixed(taskId, tree, node, first, second);
        }
        t.phase = Phase.Histograms;
    }

    /// @dev Open the next level, or the next tree's root, and take the ballots sent ahead for it (`previous` 0: the
    ///      root form); or complete the task after its last tree.
    function _advance(uint256 taskId, Task storage t) private {
        uint256 previous = t.openMask;
        if (t.nextMask != 0) {
            t.level += 1;
            _startLevel(taskId, t, t.nextMask);
        } else if (uint256(t.tree) + 1 < t.cfg.trees) {
            previous = 0;
            _startTree(taskId, t, uint256(t.tree) + 1);
        } else {
            _complete(taskId, t);
            return;
        }
        if (!drawn(t)) _takeAhead(taskId, t, previous);
    }

    function _complete(uint256 taskId, Task storage t) private {
        t.status = Status.Completed;
        int256 positive =
            FGBDTPayoutLib.payout(_members[taskId], t.parties, owed[taskId], taskId, t.reward, t.requester, t.step);
        emit TaskCompleted(taskId, positive);
    }
}
