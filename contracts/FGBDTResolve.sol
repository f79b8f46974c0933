// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {popcount} from "./FGBDTBits.sol";
import {FGBDTCommitLib} from "./FGBDTCommit.sol";
import {FGBDTConfigLib} from "./FGBDTConfig.sol";
import {FGBDTEstimateLib} from "./FGBDTEstimate.sol";
import {IFGBDTEvents} from "./FGBDTEvents.sol";
import {FGBDTMathLib} from "./FGBDTMath.sol";
import {Member} from "./FGBDTMember.sol";
import {Task, Node, nodeOf, openNode, drawn} from "./FGBDTTask.sol";

/// @title FGBDTResolveLib
/// @notice The resolution of one open node, exactly `reference.resolve_node` (`ledger/spec/reference.py`): the
///         submitters' replayed histograms checked against their commitments and summed, the best split or a leaf,
///         the children's totals (their leaf values at the last level), each submitter's side sums hashed for its
///         children's check, the split Shapley values over the credited sums, the voting contributions (kappa) from
///         the stored ballots, and the contribution totals.
/// @dev `resolve` is public: the library is deployed once and linked, and runs by DELEGATECALL in the task
///      contract's storage, which keeps `FGBDTChain` under EIP-170's 24 KB. Its events are `IFGBDTEvents`'.
library FGBDTResolveLib {
    int256 private constant ONE = 1e18;

    /// @dev Everything one node resolution needs, kept in memory to stay clear of stack limits.
    struct Resolution {
        uint256 taskId;
        uint256 node;
        uint256 nbins;
        uint256 width;
        uint256 rank;
        address[] subs;
        int256[] aggG;
        int256[] aggH;
        int256[] aggN;
    }

    /// @notice Resolve one open node of the task's current level: marks it resolved first (effects before the long
    ///         computation; a revert undoes all), checks the replayed histograms against every submitter's
    ///         commitment, then splits it or sets a leaf and credits the submitters.
    /// @param t The task (in its resolution step).
    /// @param members The task's member records.
    /// @param nodes The task's node records (`nodeOf`).
    /// @param sides The task's side-sum hashes: node => party index => hash of (step, its gL, hL, nL, gR, hR, nR).
    /// @param taskId The task's id (for the events).
    /// @param node Heap id of the node.
    /// @param g Gradient sums, party-major over the submitting parties in party order, 2*nbins each.
    /// @param h Hessian sums, same layout.
    /// @param n Row counts, same layout.
    /// @param proofs Merkle proofs, party-major, ceil(log2(open nodes)) hashes each.
    function resolve(
        Task storage t,
        mapping(address => Member) storage members,
        mapping(uint256 => mapping(uint256 => Node)) storage nodes,
        mapping(uint256 => mapping(uint256 => bytes32)) storage sides,
        uint256 taskId,
        uint256 node,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n,
        bytes32[] calldata proofs
    ) public {
        // a zeroed record whose every field is set below
        // slither-disable-next-line uninitialized-local
        Resolution memory r;
        r.taskId = taskId;
        r.node = node;
        {
            // 2^level, the level's first heap id: one shifted left by the level, as meant
            // forge-lint: disable-next-line(incorrect-shift)
            uint256 base = 1 << t.level;
            if (node < base || node >= 2 * base) revert IFGBDTEvents.NodeNotOpen(taskId, node);
            // the node's bit in the level's masks
            // forge-lint: disable-next-line(incorrect-shift)
            uint256 bit = 1 << (node - base);
            if (t.openMask & bit == 0 || t.resolvedMask & bit != 0) revert IFGBDTEvents.NodeNotOpen(taskId, node);
            t.resolvedMask |= bit;
            r.rank = popcount(t.openMask & (bit - 1));
        }
        r.nbins = t.slots;
        r.width = 2 * r.nbins;
        r.subs = _submitters(t, members);
        uint256 s = r.subs.length;
        if (g.length != s * r.width) revert IFGBDTEvents.LengthMismatch(s * r.width, g.length);
        if (h.length != s * r.width) revert IFGBDTEvents.LengthMismatch(s * r.width, h.length);
        if (n.length != s * r.width) revert IFGBDTEvents.LengthMismatch(s * r.width, n.length);
        uint256 proofLen;
        // ceil(log2(open nodes)): the smallest power of two at or above their count
        // forge-lint: disable-next-line(incorrect-shift)
        while ((1 << proofLen) < popcount(t.openMask)) ++proofLen;
        if (proofs.length != s * proofLen) revert IFGBDTEvents.LengthMismatch(s * proofLen, proofs.length);
        bytes32[] memory roots = new bytes32[](s);
        for (uint256 p = 0; p < s; ++p) roots[p] = members[r.subs[p]].histRoot;
        (r.aggG, r.aggH, r.aggN) = FGBDTCommitLib.verifyAndAggregate(
            taskId,
            r.subs,
            roots,
            r.width,
            r.rank,
            g,
            h,
            n,
            proofs
        );
        _resolve(t, members, nodes, sides, r, g, h, n);
    }

    /// @dev The parties whose histograms the current step accepted, in party order.
    function _submitters(Task storage t, mapping(address => Member) storage members)
        private
        view
        returns (address[] memory subs)
    {
        uint256 mCount = t.parties.length;
        subs = new address[](t.histCount);
        uint256 j = 0;
        uint32 step = t.step;
        for (uint256 p = 0; p < mCount; ++p) {
            address a = t.parties[p];
            if (members[a].histStep == step) subs[j++] = a;
        }
    }

    /// @dev Split or leaf from the aggregated histograms (a root takes its totals from them first).
    function _resolve(
        Task storage t,
        mapping(address => Member) storage members,
        mapping(uint256 => mapping(uint256 => Node)) storage nodes,
        mapping(uint256 => mapping(uint256 => bytes32)) storage sides,
        Resolution memory r,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n
    ) private {
        FGBDTConfigLib.Config storage c = t.cfg;
        uint256 tree = t.tree;
        Node storage nd = nodeOf(nodes, tree, r.node);
        uint256 s = r.subs.length;
        if (r.node == 1) {
            int256 gs = 0;
            int256 hs = 0;
            int256 ns = 0;
            for (uint256 b = 0; b < r.nbins; ++b) {
                gs += r.aggG[b];
                hs += r.aggH[b];
                ns += r.aggN[b];
            }
            (nd.g, nd.h, nd.n) = (gs, hs, ns);
        }
        bool found = false;
        // zero where no party submitted: the node is then a leaf and the split is never read
        // slither-disable-next-line uninitialized-local
        FGBDTMathLib.Split memory sp;
        if (s > 0) {
            (found, sp) = FGBDTMathLib.bestSplit(r.aggG, r.aggH, r.aggN, r.nbins, c.lambda, c.minRows, c.hessianMode);
        }
        if (!found) {
            int256 value = FGBDTMathLib.leafValue(
                nd.g,
                FGBDTMathLib.hessianOf(nd.h, nd.n, c.hessianMode),
                c.lambda,
                c.learningRate
            );
            nd.kind = 3;
            nd.value = value;
            emit IFGBDTEvents.LeafSet(r.taskId, tree, r.node, value);
            int256[] memory zeros = new int256[](s);
            emit IFGBDTEvents.ContributionsAdded(r.taskId, tree, r.node, r.subs, zeros, zeros, zeros);
            return;
        }
        uint256 feature = sp.rank == 0 ? nd.cand0 : nd.cand1;
        nd.kind = 2;
        // a candidate: a feature index below the task's feature count, which FGBDTConfigLib.check keeps under 2^16 - 1
        // forge-lint: disable-next-line(unsafe-typecast)
        nd.feature = uint16(feature);
        nd.threshold = uint16(sp.threshold);
        nd.value = sp.gain;
        emit IFGBDTEvents.NodeSplit(
            r.taskId,
            tree,
            r.node,
            feature,
            sp.threshold,
            sp.gain,
            [sp.gLeft, sp.hLeft, sp.nLeft, sp.gRight, sp.hRight, sp.nRight]
        );
        _credit(t, members, sides, r, sp, feature, g, h, n);
        _children(t, nodes, r, sp);
    }

    /// @dev Each submitter's sides at the split (hashed for its children's check below the last level), the split
    ///      Shapley values over the credited sides, kappa from the ballots, and the contributions added.
    function _credit(
        Task storage t,
        mapping(address => Member) storage members,
        mapping(uint256 => mapping(uint256 => bytes32)) storage sides,
        Resolution memory r,
        FGBDTMathLib.Split memory sp,
        uint256 feature,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n
    ) private {
        uint256 s = r.subs.length;
        int256[] memory gl = new int256[](s);
        int256[] memory hl = new int256[](s);
        int256[] memory gr = new int256[](s);
        int256[] memory hr = new int256[](s);
        bool inner = uint256(t.level) + 1 < t.cfg.depth;
        for (uint256 p = 0; p < s; ++p) {
            uint256 off = p * r.width + sp.rank * r.nbins;
            // the party's six side sums, accumulated from zero
            // slither-disable-next-line uninitialized-local
            int256[6] memory acc;
            for (uint256 b = 0; b < r.nbins; ++b) {
                uint256 i = b <= sp.threshold ? 0 : 3;
                acc[i] += g[off + b];
                acc[i + 1] += h[off + b];
                acc[i + 2] += n[off + b];
            }
            Member storage m = members[r.subs[p]];
            if (inner) {
                sides[r.node][m.index] = keccak256(abi.encode(t.step, acc[0], acc[1], acc[2], acc[3], acc[4], acc[5]));
            }
            (gl[p], hl[p], gr[p], hr[p]) = _creditedSides(acc, m, t.cfg.hessianMode);
        }
        (int256 creditedGain, int256[] memory phi) = s > FGBDTEstimateLib.EXACT_MAX_PARTIES
            ? FGBDTEstimateLib.splitShapleyEstimate(
                gl,
                hl,
                gr,
                hr,
                t.cfg.lambda,
                FGBDTEstimateLib.nodeSeed(t.shapleySeed, t.tree, r.node),
                FGBDTEstimateLib.PERMUTATIONS
            )
            : FGBDTMathLib.splitShapley(gl, hl, gr, hr, t.cfg.lambda);
        int256[] memory kappa = new int256[](s);
        int256[] memory contrib = new int256[](s);
        int256 alpha = t.cfg.alpha;
        bool voted = !drawn(t);
        for (uint256 p = 0; p < s; ++p) {
            Member storage m = members[r.subs[p]];
            if (voted) {
                bytes storage ballot = m.votes.packed;
                uint256 code = (uint256(uint8(ballot[2 * r.rank])) << 8) | uint256(uint8(ballot[2 * r.rank + 1]));
                if (code == feature + 1) kappa[p] = creditedGain;
            }
            contrib[p] = (alpha * kappa[p]) / ONE + phi[p];
            m.contribution += contrib[p];
        }
        emit IFGBDTEvents.ContributionsAdded(r.taskId, t.tree, r.node, r.subs, phi, kappa, contrib);
    }

    /// @dev A party's credited (gL, hL, gR, hR) from its raw sides (reference `credited_sides`).
    function _creditedSides(
        int256[6] memory acc,
        Member storage m,
        uint8 mode
    ) private view returns (int256 gL, int256 hL, int256 gR, int256 hR) {
        int256 cg = int256(uint256(m.creditG));
        gL = (acc[0] * cg) / ONE;
        gR = (acc[3] * cg) / ONE;
        if (mode == 1) {
            int256 cn = int256(uint256(m.creditN));
            hL = (acc[2] * ONE * cn) / ONE;
            hR = (acc[5] * ONE * cn) / ONE;
        } else {
            int256 ch = int256(uint256(m.creditH));
            hL = (acc[1] * ch) / ONE;
            hR = (acc[4] * ch) / ONE;
        }
    }

    /// @dev Open the split's children with its side totals: leaves at the last level, else marked for the next one.
    function _children(
        Task storage t,
        mapping(uint256 => mapping(uint256 => Node)) storage nodes,
        Resolution memory r,
        FGBDTMathLib.Split memory sp
    ) private {
        FGBDTConfigLib.Config storage c = t.cfg;
        uint256 tree = t.tree;
        Node storage left = nodeOf(nodes, tree, 2 * r.node);
        Node storage right = nodeOf(nodes, tree, 2 * r.node + 1);
        openNode(left, tree, sp.gLeft, sp.hLeft, sp.nLeft);
        openNode(right, tree, sp.gRight, sp.hRight, sp.nRight);
        if (uint256(t.level) + 1 == c.depth) {
            int256 lv = FGBDTMathLib.leafValue(
                sp.gLeft,
                FGBDTMathLib.hessianOf(sp.hLeft, sp.nLeft, c.hessianMode),
                c.lambda,
                c.learningRate
            );
            int256 rv = FGBDTMathLib.leafValue(
                sp.gRight,
                FGBDTMathLib.hessianOf(sp.hRight, sp.nRight, c.hessianMode),
                c.lambda,
                c.learningRate
            );
            (left.kind, left.value) = (3, lv);
            (right.kind, right.value) = (3, rv);
            emit IFGBDTEvents.LeafSet(r.taskId, tree, 2 * r.node, lv);
            emit IFGBDTEvents.LeafSet(r.taskId, tree, 2 * r.node + 1, rv);
        } else {
            // 2^(level + 1), the next level's first heap id
            // forge-lint: disable-next-line(incorrect-shift)
            uint256 childBase = 2 << t.level;
            // both children's bits (two set bits shifted to the left child's place)
            // forge-lint: disable-next-line(incorrect-shift)
            t.nextMask |= (3 << (2 * r.node - childBase));
        }
    }
}
