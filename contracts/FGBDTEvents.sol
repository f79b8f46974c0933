// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTConfigLib} from "./FGBDTConfig.sol";
import {Status, Phase} from "./FGBDTTask.sol";

/// @title IFGBDTEvents
/// @notice The events and errors of the task contract (`FGBDTChain`), declared once: the contract inherits them (its
///         ABI lists them) and its linked libraries emit and raise them by this name, running in its context by
///         DELEGATECALL, so a log or a revert reads the same whichever code produced it.
interface IFGBDTEvents {
    // ------------------------------------------------------------------ errors

    /// @notice No task has this id.
    /// @param taskId The id asked for.
    error UnknownTask(uint256 taskId);
    /// @notice Only the task's requester may call this.
    /// @param taskId The task.
    /// @param caller Who called.
    error NotRequester(uint256 taskId, address caller);
    /// @notice The task is not in the status the call needs.
    /// @param taskId The task.
    /// @param actual Its status.
    error WrongStatus(uint256 taskId, Status actual);
    /// @notice The current level is not in the step the call needs (or a ballot ahead has no level to go to).
    /// @param taskId The task.
    /// @param actual The level's step.
    error WrongPhase(uint256 taskId, Phase actual);
    /// @notice The join window closed.
    /// @param taskId The task.
    /// @param deadline The window's last block.
    error JoinWindowClosed(uint256 taskId, uint64 deadline);
    /// @notice The party already asked to join.
    /// @param taskId The task.
    /// @param party The party.
    error AlreadyJoined(uint256 taskId, address party);
    /// @notice The party is not waiting for approval.
    /// @param taskId The task.
    /// @param party The party.
    error NotPending(uint256 taskId, address party);
    /// @notice The task has its most parties.
    /// @param taskId The task.
    /// @param maxParties Its `Config.maxParties`.
    error PartyLimitReached(uint256 taskId, uint256 maxParties);
    /// @notice Too few approved parties to start.
    /// @param taskId The task.
    /// @param approved The approved parties.
    /// @param required Its `Config.minParties`.
    error NotEnoughParties(uint256 taskId, uint256 approved, uint256 required);
    /// @notice The caller never asked to join the task.
    /// @param taskId The task.
    /// @param caller Who called.
    error NotMember(uint256 taskId, address caller);
    /// @notice The caller is not an approved party of the task.
    /// @param taskId The task.
    /// @param caller Who called.
    error NotApproved(uint256 taskId, address caller);
    /// @notice The call names another tree or level than the current one (a stale transaction).
    /// @param taskId The task.
    /// @param tree The current tree.
    /// @param level The current level.
    error WrongStep(uint256 taskId, uint256 tree, uint256 level);
    /// @notice The party already voted at this step (or sent its ballot ahead).
    /// @param taskId The task.
    /// @param party The party.
    error AlreadyVoted(uint256 taskId, address party);
    /// @notice Only a voter of the step may send histograms.
    /// @param taskId The task.
    /// @param party The party.
    error DidNotVote(uint256 taskId, address party);
    /// @notice The party already submitted or declined at this step.
    /// @param taskId The task.
    /// @param party The party.
    error AlreadySubmitted(uint256 taskId, address party);
    /// @notice An argument's length is not the one the step needs.
    /// @param expected The length needed.
    /// @param actual The length sent.
    error LengthMismatch(uint256 expected, uint256 actual);
    /// @notice A resolution in the task's seed block: the Shapley seed is the hash of that block, read from the next
    ///         block on.
    /// @param taskId The task.
    /// @param seedBlock The seed block (the block of `start`, unless its hash expired unread).
    error ShapleySeedPending(uint256 taskId, uint256 seedBlock);
    /// @notice A vote is neither -1 (abstain) nor a feature index.
    /// @dev Raised by `FGBDTBallotLib.store` (same selector); declared here so that the contract's ABI decodes it.
    /// @param index The vote's position.
    /// @param vote The vote.
    error InvalidVote(uint256 index, int256 vote);
    /// @notice The step's deadline passed.
    /// @param taskId The task.
    /// @param deadline The step's last block.
    error StepDeadlinePassed(uint256 taskId, uint64 deadline);
    /// @notice The step can be closed only once complete or after its deadline.
    /// @param taskId The task.
    /// @param deadline The step's last block.
    error StepStillOpen(uint256 taskId, uint64 deadline);
    /// @notice An endorsement's signer is not an approved party of the task.
    /// @param signer The recovered signer.
    error EndorserNotMember(address signer);
    /// @notice A party endorsed its own histograms.
    /// @param signer The party.
    error SelfEndorsement(address signer);
    /// @notice Two endorsements have the same signer.
    /// @param signer The signer.
    error DuplicateEndorsement(address signer);
    /// @notice Fewer endorsements than the quorum.
    /// @param valid The endorsements sent.
    /// @param required `ceil(quorumNum (M - 1) / quorumDen)`.
    error InsufficientEndorsements(uint256 valid, uint256 required);
    /// @notice The node is not an open, unresolved node of the current level.
    /// @param taskId The task.
    /// @param node The heap id.
    error NodeNotOpen(uint256 taskId, uint256 node);
    /// @notice The task owes the account nothing.
    /// @param taskId The task.
    /// @param account The account.
    error NothingToWithdraw(uint256 taskId, address account);
    /// @notice The transfer of a withdrawal failed.
    /// @param to The account.
    /// @param amount The amount in wei.
    error TransferFailed(address to, uint256 amount);
    /// @notice The bin edges do not have the encoding's header (magic "FGBE", version 2) or do not hash to the
    ///         hash fixed at creation.
    /// @param taskId The task.
    /// @param expected The hash fixed at creation (zero: none).
    /// @param got The hash of the edges sent.
    error BinEdgesMismatch(uint256 taskId, bytes32 expected, bytes32 got);
    /// @notice The party takes no part in the step: its histograms were not accepted at an earlier one.
    /// @param taskId The task.
    /// @param party The party.
    error Excluded(uint256 taskId, address party);

    // ------------------------------------------------------------------ events

    /// @notice A task was opened.
    /// @param taskId The new task.
    /// @param requester Who opened it.
    /// @param reward The deposit in wei.
    /// @param cfg Its parameters.
    /// @param featureMin Each feature's smallest value in the schema (fixed point).
    /// @param featureMax Each feature's largest value.
    /// @param binEdgesHash The hash of the bin edges, or zero to fix them at `start`.
    event TaskCreated(
        uint256 indexed taskId,
        address indexed requester,
        uint256 reward,
        FGBDTConfigLib.Config cfg,
        int256[] featureMin,
        int256[] featureMax,
        bytes32 binEdgesHash
    );
    /// @notice A party asked to join.
    /// @param taskId The task.
    /// @param party The party.
    /// @param psdHash keccak256 of its PSD (stored).
    /// @param psd Its serialised PSD.
    /// @param endpoint Where it answers endorsement requests.
    event JoinRequested(uint256 indexed taskId, address indexed party, bytes32 psdHash, bytes psd, string endpoint);
    /// @notice The requester approved a party.
    /// @param taskId The task.
    /// @param party The party.
    /// @param index Its place in the party order.
    event PartyApproved(uint256 indexed taskId, address indexed party, uint256 index);
    /// @notice The requester refused a party.
    /// @param taskId The task.
    /// @param party The party.
    event PartyRefused(uint256 indexed taskId, address indexed party);
    /// @notice The reward of an open task grew.
    /// @param taskId The task.
    /// @param funder Who paid.
    /// @param amount What it paid in wei.
    /// @param reward The reward now.
    event TaskFunded(uint256 indexed taskId, address indexed funder, uint256 amount, uint256 reward);
    /// @notice The requester cancelled a task before its start; the deposit is owed back to it.
    /// @param taskId The task.
    /// @param refund The deposit.
    event TaskCancelled(uint256 indexed taskId, uint256 refund);
    /// @notice Training started.
    /// @param taskId The task.
    /// @param parties The approved parties in party order.
    event TrainingStarted(uint256 indexed taskId, address[] parties);
    /// @notice The seed of the task's estimated split Shapley values (above 12 parties; `FGBDTEstimateLib`) was fixed,
    ///         by the first task transaction in a block after `seedBlock`.
    /// @param taskId The task.
    /// @param seed keccak256 of the hash of block `seedBlock` and the task id.
    /// @param seedBlock The block of `start`, or, where no task transaction came within 256 blocks of it (its hash
    ///        is then unreadable), the block of the one that found it expired.
    event ShapleySeedFixed(uint256 indexed taskId, uint256 seed, uint256 seedBlock);
    /// @notice The bin edges every party must use were fixed.
    /// @param taskId The task.
    /// @param binEdgesHash keccak256 of the encoded edges.
    /// @param binEdges The encoded edges (`ledger/spec/edges.py`).
    event BinEdgesFixed(uint256 indexed taskId, bytes32 binEdgesHash, bytes binEdges);
    /// @notice A level opened.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param level The level.
    /// @param openMask Its open nodes (bit b = node 2^level + b).
    /// @param deadline The last block of its first step.
    event LevelStarted(uint256 indexed taskId, uint256 tree, uint256 level, uint256 openMask, uint64 deadline);
    /// @notice A party voted (or sent its ballot ahead of the level).
    /// @param taskId The task.
    /// @param tree The tree voted on.
    /// @param level The level voted on.
    /// @param party The voter.
    /// @param votes A feature index or -1 per node (ahead: per child of every open node; one for a root).
    event VotesSubmitted(uint256 indexed taskId, uint256 tree, uint256 level, address indexed party, int256[] votes);
    /// @notice A node's two candidate features were fixed.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param node The heap id.
    /// @param first The candidate of rank 0.
    /// @param second The candidate of rank 1.
    event CandidatesFixed(uint256 indexed taskId, uint256 tree, uint256 node, uint256 first, uint256 second);
    /// @notice A level's voting closed and its histogram step opened.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param level The level.
    /// @param voters The ballots counted.
    /// @param deadline The last block of the histogram step.
    event VotingClosed(uint256 indexed taskId, uint256 tree, uint256 level, uint256 voters, uint64 deadline);
    /// @notice A party's endorsed histograms of a level were accepted.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param level The level.
    /// @param party The party.
    /// @param root The Merkle root over its node hashes (its commitment).
    /// @param endorsements The endorsements checked.
    /// @param credit The least credits attested (g, h, n; the party's credit for the tree at its root).
    /// @param data The node blocks of this transaction (the parts before it are in `HistogramsCommitted`).
    event HistogramsSubmitted(
        uint256 indexed taskId,
        uint256 tree,
        uint256 level,
        address indexed party,
        bytes32 root,
        uint256 endorsements,
        uint256[3] credit,
        int256[] data
    );
    /// @notice A part of a party's level histograms was committed ahead of its submission.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param level The level.
    /// @param party The party.
    /// @param first The rank of the part's first node among the level's open nodes.
    /// @param data The part's node blocks.
    event HistogramsCommitted(
        uint256 indexed taskId,
        uint256 tree,
        uint256 level,
        address indexed party,
        uint256 first,
        int256[] data
    );
    /// @notice A voter stepped aside for a level's histograms.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param level The level.
    /// @param party The party.
    event HistogramsDeclined(uint256 indexed taskId, uint256 tree, uint256 level, address indexed party);
    /// @notice A level's histogram step closed and its resolution opened.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param level The level.
    /// @param submitters The parties whose histograms are in.
    /// @param submitterMask Bit p set when `parties[p]`'s histograms are in, so that a party can tell exactly which
    ///        submissions the level resolves.
    event HistogramsClosed(
        uint256 indexed taskId, uint256 tree, uint256 level, uint256 submitters, uint256 submitterMask
    );
    /// @notice A node split.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param node The heap id.
    /// @param feature The split's feature.
    /// @param threshold The last bin of the left side.
    /// @param gain The split's gain (equation 7 of the aggregated sides).
    /// @param sides The aggregated gL, hL, nL, gR, hR, nR.
    event NodeSplit(
        uint256 indexed taskId,
        uint256 tree,
        uint256 node,
        uint256 feature,
        uint256 threshold,
        int256 gain,
        int256[6] sides
    );
    /// @notice A node became a leaf.
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param node The heap id.
    /// @param value The leaf value (fixed point).
    event LeafSet(uint256 indexed taskId, uint256 tree, uint256 node, int256 value);
    /// @notice A node's resolution credited the submitters (zeros at a leaf).
    /// @param taskId The task.
    /// @param tree The tree.
    /// @param node The heap id.
    /// @param parties The submitters in party order.
    /// @param phi Their split Shapley values.
    /// @param kappa Their voting contributions (the credited gain for a vote for the split's feature).
    /// @param contribution `alpha * kappa + phi` each, added to their totals.
    event ContributionsAdded(
        uint256 indexed taskId,
        uint256 tree,
        uint256 node,
        address[] parties,
        int256[] phi,
        int256[] kappa,
        int256[] contribution
    );
    /// @notice The task's last tree was resolved and the reward split.
    /// @param taskId The task.
    /// @param positiveTotal The sum of the positive contributions.
    event TaskCompleted(uint256 indexed taskId, int256 positiveTotal);
    /// @notice An amount of a completed task became owed to an account (a party's share, or the requester's rest).
    /// @param taskId The task.
    /// @param account Who may withdraw it.
    /// @param amount The amount in wei.
    event RewardAssigned(uint256 indexed taskId, address indexed account, uint256 amount);
    /// @notice A party that left the task before its last step (refused, declined or silent once) is not paid: its
    ///         pro-rata amount goes back to the requester, so that getting oneself refused never pays.
    /// @param taskId The task.
    /// @param party The party.
    /// @param amount Its pro-rata amount in wei.
    event RewardForfeited(uint256 indexed taskId, address indexed party, uint256 amount);
    /// @notice An account withdrew what a task owed it.
    /// @param taskId The task.
    /// @param account The account.
    /// @param amount The amount in wei.
    event Withdrawn(uint256 indexed taskId, address indexed account, uint256 amount);
}
