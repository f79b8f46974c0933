// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTMathLib} from "./FGBDTMath.sol";
import {FGBDTRulesLib} from "./FGBDTRules.sol";

/// @title FGBDTConfigLib
/// @notice A task's parameters and the rules they must keep, checked once when the task is created. Mirrored by
///         `ledger/wrappers/contracts.py` (`TaskConfig`, field for field) and `ledger/spec/task_params.py` (the mapping from the
///         command line and the API).
/// @dev `check` is public: the library is deployed once and linked, which keeps `FGBDTChain` under EIP-170's 24 KB.
library FGBDTConfigLib {
    /// @notice Task parameters fixed at creation. Real values are int256 fixed point (1e18 = 1.0). `epsilon` and
    ///         `delta` are every party's differential-privacy budget for all it releases (`node/privacy/accountant.py`:
    ///         sketch, PSD, votes, histograms); `epsilon` 0 is a task without privacy noise, whose histograms keep the
    ///         per-bin bounds of the loss exactly. A private task trains binary logistic loss (bounded gradients).
    ///         Trees before `votedTrees` fix each node's candidates by the parties' votes (the paper's FV-tree); later
    ///         trees draw them from a public seed when each level opens, with no vote round (0: every tree draws;
    ///         `trees` or more: every tree votes). `labelMin`..`labelMax` is the label's range in the task's schema:
    ///         every party's PSD splits the label inside it, and the labels are divided by the power of two at or
    ///         above its largest magnitude before training (`ledger/spec/task_params.py`); a binary task's is [0, 1e18].
    struct Config {
        uint16 trees;
        uint8 depth;
        uint16 bins;
        uint8 hessianMode;
        uint8 tieBreak;
        uint16 votedTrees;
        uint8 objective;
        uint8 endorseRule;
        uint16 quorumNum;
        uint16 quorumDen;
        uint16 minParties;
        uint16 maxParties;
        uint64 joinBlocks;
        uint64 stepBlocks;
        int256 lambda;
        int256 learningRate;
        int256 minRows;
        int256 alpha;
        int256 refusalRate;
        int256 overlapThreshold;
        int256 epsilon;
        int256 delta;
        int256 labelMin;
        int256 labelMax;
    }

    /// @notice The most parties a task may have (a submitter bit fits `Task.histMask`'s 64 bits). Split Shapley is
    ///         exact up to `FGBDTEstimateLib.EXACT_MAX_PARTIES` parties and estimated above.
    uint256 internal constant MAX_PARTIES = 64;
    /// @notice The deepest tree (a level's open nodes fit one 256-bit mask).
    uint256 internal constant MAX_DEPTH = 8;
    /// @notice The longest join window and step, in blocks (`ledger/spec/parameters.py`): a deadline is the block
    ///         number plus one of them in 64 bits, which a longer one could overflow (the task could then never open
    ///         or start).
    uint64 internal constant MAX_BLOCKS = 2 ** 32;
    /// @notice The most calldata a transaction may carry: geth relays none over 128 KiB, less 2 KiB for the signed
    ///         transaction's fields and a forwarder's envelope (`ledger/spec/tx_size.py`, `CALLDATA_LIMIT`).
    uint256 internal constant CALLDATA_LIMIT = 128 * 1024 - 2048;
    int256 private constant ONE = 1e18;
    /// @notice `Config.endorseRule`: verifiers run the statistical test of `node/protocol/verify.py` at `refusalRate`.
    uint8 internal constant ENDORSE_STATISTICAL = 0;
    /// @notice `Config.endorseRule`: verifiers compare the paper's equation 11 with `overlapThreshold`; credits
    ///         are neutral.
    uint8 internal constant ENDORSE_OVERLAP = 1;

    /// @notice A task parameter (or the schema) breaks its rule; `field` names it.
    /// @param field The parameter's name, as a left-aligned string.
    error InvalidConfig(bytes32 field);

    /// @notice One node's resolution at the task's deepest splitting level, every approved party submitting, would
    ///         carry `size` bytes of calldata, over the `limit` a transaction may carry: no real network would relay
    ///         it (`ledger/spec/tx_size.py`, `check_resolution_fits`, names the bins and parties that fit).
    error ResolutionTooLarge(uint256 size, uint256 limit);

    /// @notice Calldata of the largest single node resolution a task can need (`resolveNodes` of one node of level
    ///         `depth - 1`): selector, six head words, five lengths, the node's id, and per party its three arrays of
    ///         two candidates' `bins + 1` slots and a `depth - 1` hash Merkle proof.
    function widestResolutionBytes(uint256 parties, uint256 bins, uint256 depth) internal pure returns (uint256) {
        return 4 + 12 * 32 + parties * (6 * (bins + 1) + depth - 1) * 32;
    }

    /// @notice Reverts with `InvalidConfig` naming the first parameter out of its range.
    /// @param cfg The parameters.
    /// @param featureMin Each feature's smallest value in the schema.
    /// @param featureMax Each feature's largest value in the schema.
    function check(Config calldata cfg, int256[] calldata featureMin, int256[] calldata featureMax) public pure {
        uint256 f = featureMin.length;
        if (f == 0 || f != featureMax.length || f > type(uint16).max - 1) revert InvalidConfig("features");
        for (uint256 i = 0; i < f; ++i) if (featureMin[i] > featureMax[i]) revert InvalidConfig("min>max");
        if (cfg.trees == 0) revert InvalidConfig("trees");
        if (cfg.depth == 0 || cfg.depth > MAX_DEPTH) revert InvalidConfig("depth");
        if (cfg.bins == 0) revert InvalidConfig("bins");
        if (cfg.hessianMode > 1) revert InvalidConfig("hessianMode");
        if (cfg.tieBreak > FGBDTMathLib.TIE_HASHED) revert InvalidConfig("tieBreak");
        if (cfg.objective > FGBDTRulesLib.OBJECTIVE_SQUARED) revert InvalidConfig("objective");
        if (cfg.endorseRule > ENDORSE_OVERLAP) revert InvalidConfig("endorseRule");
        if (cfg.refusalRate <= 0 || cfg.refusalRate >= ONE) revert InvalidConfig("refusalRate");
        if (cfg.overlapThreshold < 0) revert InvalidConfig("overlapThreshold");
        if (cfg.quorumDen == 0 || cfg.quorumNum > cfg.quorumDen) revert InvalidConfig("quorum");
        if (cfg.minParties == 0 || cfg.minParties > cfg.maxParties || cfg.maxParties > MAX_PARTIES) {
            revert InvalidConfig("parties");
        }
        uint256 size = widestResolutionBytes(cfg.maxParties, cfg.bins, cfg.depth);
        if (size > CALLDATA_LIMIT) revert ResolutionTooLarge(size, CALLDATA_LIMIT);
        if (cfg.joinBlocks > MAX_BLOCKS) revert InvalidConfig("joinBlocks");
        if (cfg.stepBlocks == 0 || cfg.stepBlocks > MAX_BLOCKS) revert InvalidConfig("stepBlocks");
        if (cfg.lambda < 0 || cfg.learningRate <= 0 || cfg.minRows < 1) revert InvalidConfig("gbdt");
        if (cfg.alpha <= 0 || cfg.alpha > ONE) revert InvalidConfig("alpha");
        if (cfg.epsilon < 0 || (cfg.epsilon > 0 && (cfg.objective != 0 || cfg.delta <= 0 || cfg.delta >= ONE))) {
            revert InvalidConfig("privacy");
        }
        if (
            cfg.objective == FGBDTRulesLib.OBJECTIVE_BINARY
                ? cfg.labelMin != 0 || cfg.labelMax != ONE
                : cfg.labelMin > cfg.labelMax
        ) revert InvalidConfig("label");
    }
}
