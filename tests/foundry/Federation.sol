// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {FGBDTChain} from "../../contracts/FGBDTChain.sol";
import {FGBDTConfigLib} from "../../contracts/FGBDTConfig.sol";
import {FGBDTEndorseLib} from "../../contracts/FGBDTEndorse.sol";
import {Status, Phase, Node} from "../../contracts/FGBDTTask.sol";
import {vm} from "./Vm.sol";

/// @notice Honest play of tasks on one `FGBDTChain`, written from the protocol's description rather than from the
///         contract's code: each party holds rows (a slot per feature, a gradient and a hessian each) and builds its
///         histograms of a node from the rows that reach it, so every exact rule holds by construction (equal
///         candidate totals, a child's totals equal to the party's own sides at its parent, the loss's per-bin
///         bounds); endorsements are EIP-712 signatures made here with the parties' keys; resolutions replay the
///         histograms with Merkle proofs computed here. The guard tests and the invariant handler drive tasks
///         through it, and it checks every transition it observes (`_violation`).
abstract contract Federation {
    int256 internal constant ONE = 1e18;
    bytes5 internal constant EDGES_MAGIC = 0x4647424502;
    bytes32 internal constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant ENDORSEMENT_TYPEHASH =
        keccak256(
            "Endorsement(uint256 taskId,uint256 tree,uint256 level,address party,bytes32 histogramRoot,"
            "uint256 creditG,uint256 creditH,uint256 creditN)"
        );

    FGBDTChain internal chain;

    /// @dev One task as its requester and parties see it. Party arrays are in party (approval) order.
    struct Fed {
        uint256 taskId;
        address requester;
        FGBDTConfigLib.Config cfg;
        uint256 features;
        uint256 slots;
        uint256 rows;
        uint256 seed;
        uint256 joinDeadline;
        uint256 reward;
        // applicants: key and state (0 none, 1 pending, 2 approved, 3 refused)
        uint256[] candKeys;
        uint8[] candState;
        // approved parties
        address[] parties;
        uint256[] keys;
        bytes[] bins; // rows * features slots, row-major
        int256[][] rowG;
        uint256[][] rowAt; // each row's node in the current tree
        uint256[] lastSub; // step of the last accepted histograms
        bytes32[][] leavesAt; // the node-block hashes of the last accepted histograms, which their proofs go up from
        uint256[] votedAt;
        uint256[] declinedAt;
        uint256[] aheadAt;
        bool[] aheadRoot;
        int256[][] ahead;
        int256[][] ballot; // the current step's ballot, one vote per open node by rank
        uint256[3][] credit; // the current tree's credit multipliers
        // the chain as last observed
        Status status;
        Phase phase;
        uint256 tree;
        uint256 level;
        uint256 step;
        uint256 openMask;
        uint256 deadline;
    }

    Fed[] internal feds;

    // ------------------------------------------------------------------ hooks

    /// @dev An observed transition that the protocol forbids.
    function _violation(string memory why) internal virtual;

    // ------------------------------------------------------------------ set-up

    function _deployChain() internal {
        chain = new FGBDTChain(address(0xF0F0));
    }

    function _domainSeparator() internal view returns (bytes32) {
        return keccak256(
            abi.encode(DOMAIN_TYPEHASH, keccak256("FGBDTChain"), keccak256("1"), block.chainid, address(chain))
        );
    }

    /// @dev A valid configuration drawn from `seed`: small enough that a task completes in a few hundred calls.
    function _config(uint256 seed) internal pure returns (FGBDTConfigLib.Config memory c) {
        c.trees = uint16(1 + _pick(seed, 1, 2));
        c.depth = uint8(1 + _pick(seed, 2, 3));
        c.bins = uint16(2 + _pick(seed, 3, 2));
        c.hessianMode = uint8(_pick(seed, 4, 2));
        c.tieBreak = uint8(_pick(seed, 5, 2));
        c.votedTrees = uint16(_pick(seed, 6, uint256(c.trees) + 2));
        c.objective = uint8(_pick(seed, 7, 2));
        c.endorseRule = uint8(_pick(seed, 8, 2));
        c.quorumDen = uint16(1 + _pick(seed, 9, 3));
        c.quorumNum = uint16(_pick(seed, 10, uint256(c.quorumDen) + 1));
        c.maxParties = uint16(2 + _pick(seed, 11, 3));
        c.minParties = uint16(1 + _pick(seed, 12, c.maxParties));
        c.joinBlocks = uint64(60 + _pick(seed, 13, 60));
        c.stepBlocks = uint64(8 + _pick(seed, 14, 30));
        c.lambda = int256(_pick(seed, 15, 3)) * ONE / 2;
        c.learningRate = ONE / int256(1 + _pick(seed, 16, 10));
        c.minRows = int256(1 + _pick(seed, 17, 3));
        c.alpha = ONE / int256(1 + _pick(seed, 18, 4));
        c.refusalRate = ONE / 20;
        c.overlapThreshold = ONE / 2;
        if (c.objective == 0 && _pick(seed, 19, 3) == 0) {
            c.epsilon = ONE;
            c.delta = ONE / 1_000_000;
        }
        (c.labelMin, c.labelMax) = c.objective == 0 ? (int256(0), ONE) : (-ONE, ONE);
    }

    function _pick(uint256 seed, uint256 salt, uint256 n) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(seed, salt))) % n;
    }

    /// @dev Open a task from `requester` with `value` and `candidates` would-be parties (keys from `seed`).
    function _open(
        FGBDTConfigLib.Config memory cfg,
        uint256 features,
        uint256 candidates,
        address requester,
        uint256 value,
        uint256 seed
    ) internal returns (uint256 index) {
        int256[] memory fmin = new int256[](features);
        int256[] memory fmax = new int256[](features);
        for (uint256 i = 0; i < features; ++i) fmax[i] = ONE;
        vm.deal(requester, requester.balance + value);
        vm.prank(requester);
        uint256 taskId = chain.createTask{value: value}(cfg, fmin, fmax, bytes32(0));
        index = feds.length;
        Fed storage f = feds.push();
        f.taskId = taskId;
        f.requester = requester;
        f.cfg = cfg;
        f.features = features;
        f.rows = 4 + _pick(seed, 100, 9);
        f.seed = seed;
        f.joinDeadline = block.number + cfg.joinBlocks;
        f.reward = value;
        for (uint256 i = 0; i < candidates; ++i) {
            f.candKeys.push(uint256(keccak256(abi.encode("party", seed, i))) % (2 ** 200) + 1);
            f.candState.push(0);
        }
        _sync(f);
    }

    function _candidate(Fed storage f, uint256 i) internal view returns (address) {
        return vm.addr(f.candKeys[i]);
    }

    function _join(Fed storage f, uint256 i) internal {
        vm.prank(_candidate(f, i));
        chain.join(f.taskId, abi.encodePacked("psd", i), "http://party");
        f.candState[i] = 1;
    }

    function _approve(Fed storage f, uint256 i) internal {
        address a = _candidate(f, i);
        vm.prank(f.requester);
        chain.approve(f.taskId, a);
        f.candState[i] = 2;
        uint256 p = f.parties.length;
        f.parties.push(a);
        f.keys.push(f.candKeys[i]);
        bytes memory b = new bytes(f.rows * f.features);
        f.rowG.push();
        f.rowAt.push();
        for (uint256 r = 0; r < f.rows; ++r) {
            uint256 h = uint256(keccak256(abi.encode("row", f.seed, p, r)));
            for (uint256 j = 0; j < f.features; ++j) b[r * f.features + j] = bytes1(uint8(h >> (8 * j)));
            int256 g = f.cfg.objective == 0
                ? (h >> 200) & 1 == 0 ? ONE / 2 : -ONE / 2
                : int256((h >> 128) % 8e18) - 4e18;
            f.rowG[p].push(g);
            f.rowAt[p].push(1);
        }
        f.bins.push(b);
        f.lastSub.push(0);
        f.leavesAt.push();
        f.votedAt.push(0);
        f.declinedAt.push(0);
        f.aheadAt.push(0);
        f.aheadRoot.push(false);
        f.ahead.push();
        f.ballot.push();
        f.credit.push([uint256(1e18), uint256(1e18), uint256(1e18)]);
    }

    function _refuse(Fed storage f, uint256 i) internal {
        address a = _candidate(f, i);
        vm.prank(f.requester);
        chain.refuse(f.taskId, a);
        f.candState[i] = 3;
    }

    /// @dev Start with `slots` histogram slots (3 to bins + 1), then move on a block: the task's Shapley seed is the
    ///      hash of `start`'s block, which a resolution needs (`ShapleySeedPending` in that block itself).
    function _start(Fed storage f, uint256 slots) internal {
        _startInBlock(f, slots);
        vm.roll(block.number + 1);
    }

    /// @dev Start with `slots` histogram slots, staying in `start`'s block; each row's slots are then taken modulo it.
    function _startInBlock(Fed storage f, uint256 slots) internal {
        f.slots = slots;
        for (uint256 p = 0; p < f.parties.length; ++p) {
            bytes storage b = f.bins[p];
            for (uint256 i = 0; i < b.length; ++i) b[i] = bytes1(uint8(uint8(b[i]) % slots));
        }
        vm.prank(f.requester);
        chain.start(f.taskId, _edges(slots));
        _sync(f);
    }

    function _edges(uint256 slots) internal pure returns (bytes memory) {
        return abi.encodePacked(EDGES_MAGIC, bytes4(0), uint16(slots), bytes3(0));
    }

    // ------------------------------------------------------------------ what a party knows

    function _drawn(Fed storage f) internal view returns (bool) {
        return f.tree >= f.cfg.votedTrees;
    }

    function _active(Fed storage f, uint256 p) internal view returns (bool) {
        return f.step == 1 || f.lastSub[p] == f.step - 1;
    }

    /// @dev Whether party `p` may send histograms at this step (a voter, or with drawn candidates a party taking part).
    function _takesPart(Fed storage f, uint256 p) internal view returns (bool) {
        return _drawn(f) ? _active(f, p) : f.votedAt[p] == f.step;
    }

    function _done(Fed storage f, uint256 p) internal view returns (bool) {
        return f.lastSub[p] == f.step || f.declinedAt[p] == f.step;
    }

    function _openCount(Fed storage f) internal view returns (uint256 k) {
        for (uint256 x = f.openMask; x != 0; x &= x - 1) ++k;
    }

    /// @dev The open nodes' heap ids in increasing order.
    function _openNodes(Fed storage f) internal view returns (uint256[] memory nodes) {
        nodes = new uint256[](_openCount(f));
        uint256 base = 1 << f.level;
        uint256 i;
        for (uint256 b = 0; b < base; ++b) if ((f.openMask >> b) & 1 == 1) nodes[i++] = base + b;
    }

    function _rank(Fed storage f, uint256 node) internal view returns (uint256 r) {
        uint256 below = f.openMask & ((1 << (node - (1 << f.level))) - 1);
        for (; below != 0; below &= below - 1) ++r;
    }

    function _hessian(Fed storage f) internal view returns (int256) {
        return f.cfg.objective == 0 ? ONE / 4 : ONE;
    }

    /// @dev Party `p`'s node block at `node`: g, h, n of both candidates over the rows that reach it.
    function _block(Fed storage f, uint256 p, uint256 node) internal view returns (int256[] memory blk) {
        Node memory nd = chain.getNode(f.taskId, f.tree, node);
        uint256 s = f.slots;
        blk = new int256[](6 * s);
        int256 h = _hessian(f);
        bytes storage bins = f.bins[p];
        for (uint256 r = 0; r < f.rows; ++r) {
            if (f.rowAt[p][r] != node) continue;
            int256 g = f.rowG[p][r];
            for (uint256 k = 0; k < 2; ++k) {
                uint256 feature = k == 0 ? nd.cand0 : nd.cand1;
                uint256 i = k * s + uint8(bins[r * f.features + feature]);
                blk[i] += g;
                blk[2 * s + i] += h;
                blk[4 * s + i] += 1;
            }
        }
    }

    /// @dev Party `p`'s node blocks of the open nodes from rank `first` on.
    function _levelData(Fed storage f, uint256 p, uint256 first, uint256 end) internal view returns (int256[] memory d) {
        uint256[] memory nodes = _openNodes(f);
        uint256 w = 6 * f.slots;
        d = new int256[]((end - first) * w);
        for (uint256 i = first; i < end; ++i) {
            int256[] memory blk = _block(f, p, nodes[i]);
            for (uint256 j = 0; j < w; ++j) d[(i - first) * w + j] = blk[j];
        }
    }

    function _leaves(Fed storage f, uint256 p) internal view returns (bytes32[] memory leaves) {
        uint256[] memory nodes = _openNodes(f);
        leaves = new bytes32[](nodes.length);
        for (uint256 i = 0; i < nodes.length; ++i) leaves[i] = keccak256(abi.encodePacked(_block(f, p, nodes[i])));
    }

    /// @dev The Merkle root over `leaves` padded with zero leaves to a power of two, and the proof of leaf `index`.
    function _merkle(bytes32[] memory leaves, uint256 index)
        internal
        pure
        returns (bytes32 root, bytes32[] memory proof)
    {
        uint256 size = 1;
        uint256 depth;
        while (size < leaves.length) (size, depth) = (size * 2, depth + 1);
        bytes32[] memory layer = new bytes32[](size);
        for (uint256 i = 0; i < leaves.length; ++i) layer[i] = leaves[i];
        proof = new bytes32[](depth);
        for (uint256 d = 0; d < depth; ++d) {
            proof[d] = layer[index ^ 1];
            size /= 2;
            for (uint256 i = 0; i < size; ++i) layer[i] = keccak256(abi.encodePacked(layer[2 * i], layer[2 * i + 1]));
            index /= 2;
        }
        root = layer[0];
    }

    function _endorsement(Fed storage f, uint256 signerKey, address party, bytes32 root, uint256[3] memory credit)
        internal
        view
        returns (FGBDTEndorseLib.Endorsement memory e)
    {
        bytes32 structHash = keccak256(
            abi.encode(
                ENDORSEMENT_TYPEHASH, f.taskId, f.tree, f.level, party, root, credit[0], credit[1], credit[2]
            )
        );
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", _domainSeparator(), structHash));
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(signerKey, digest);
        e = FGBDTEndorseLib.Endorsement(abi.encodePacked(r, s, v), credit[0], credit[1], credit[2]);
    }

    function _quorum(Fed storage f) internal view returns (uint256) {
        uint256 others = f.parties.length - 1;
        return (uint256(f.cfg.quorumNum) * others + f.cfg.quorumDen - 1) / f.cfg.quorumDen;
    }

    /// @dev `count` endorsements of party `p`'s `root` by the next approved parties after it; at a tree's root they
    ///      attest credits drawn from `seed` (between half and all of what was sent), the least of which is recorded.
    function _endorsements(Fed storage f, uint256 p, bytes32 root, uint256 count, uint256 seed)
        internal
        view
        returns (FGBDTEndorseLib.Endorsement[] memory es, uint256[3] memory least)
    {
        es = new FGBDTEndorseLib.Endorsement[](count);
        least = [uint256(1e18), uint256(1e18), uint256(1e18)];
        for (uint256 i = 0; i < count; ++i) {
            uint256 q = (p + 1 + i) % f.parties.length;
            uint256[3] memory credit = [uint256(1e18), uint256(1e18), uint256(1e18)];
            if (f.level == 0 && seed % 2 == 1) {
                for (uint256 j = 0; j < 3; ++j) credit[j] = 5e17 + _pick(seed, 10 * i + j, 5e17 + 1);
            }
            es[i] = _endorsement(f, f.keys[q], f.parties[p], root, credit);
            for (uint256 j = 0; j < 3; ++j) if (i == 0 || credit[j] < least[j]) least[j] = credit[j];
        }
    }

    // ------------------------------------------------------------------ steps

    /// @dev Party `p` votes `votes` (one per open node) at the current step.
    function _vote(Fed storage f, uint256 p, int256[] memory votes) internal {
        vm.prank(f.parties[p]);
        chain.submitVotes(f.taskId, f.tree, f.level, votes);
        f.votedAt[p] = f.step;
        f.ballot[p] = votes;
        _sync(f);
    }

    function _randomVotes(Fed storage f, uint256 count, uint256 seed) internal view returns (int256[] memory votes) {
        votes = new int256[](count);
        for (uint256 i = 0; i < count; ++i) votes[i] = int256(_pick(seed, i, f.features + 1)) - 1;
    }

    /// @dev Party `p` sends its ballot ahead: for the next level's nodes, or with `root` the next tree's root.
    function _voteAhead(Fed storage f, uint256 p, bool root, uint256 seed) internal {
        int256[] memory votes = _randomVotes(f, root ? 1 : 2 * _openCount(f), seed);
        vm.prank(f.parties[p]);
        chain.submitVotes(f.taskId, root ? f.tree + 1 : f.tree, root ? 0 : f.level + 1, votes);
        f.aheadAt[p] = f.step + 1;
        f.aheadRoot[p] = root;
        f.ahead[p] = votes;
        _sync(f);
    }

    /// @dev Whether party `p` may send a ballot ahead now, and of which form.
    function _mayVoteAhead(Fed storage f, uint256 p) internal view returns (bool level, bool root) {
        if (f.status != Status.Training || f.phase != Phase.Resolving) return (false, false);
        if (f.lastSub[p] != f.step || f.aheadAt[p] == f.step + 1) return (false, false);
        level = f.level + 1 < f.cfg.depth && !_drawn(f);
        root = f.tree + 1 < f.cfg.votedTrees && f.tree + 1 < f.cfg.trees;
    }

    /// @dev Party `p` sends its histograms with `count` endorsements, first committing the nodes before rank
    ///      `committed` (0: none) in a separate transaction.
    function _submit(Fed storage f, uint256 p, uint256 committed, uint256 count, uint256 seed) internal {
        uint256 k = _openCount(f);
        if (committed > 0) {
            int256[] memory part = _levelData(f, p, 0, committed);
            // (every argument is computed before the prank: it applies to the very next call, views included)
            vm.prank(f.parties[p]);
            chain.commitHistograms(f.taskId, f.tree, f.level, part);
        }
        bytes32[] memory leaves = _leaves(f, p);
        (bytes32 root, ) = _merkle(leaves, 0);
        int256[] memory data = _levelData(f, p, committed, k);
        (FGBDTEndorseLib.Endorsement[] memory es, uint256[3] memory least) = _endorsements(f, p, root, count, seed);
        vm.prank(f.parties[p]);
        chain.submitHistograms(f.taskId, f.tree, f.level, data, es);
        f.lastSub[p] = f.step;
        f.leavesAt[p] = leaves;
        if (f.level == 0) f.credit[p] = least;
        _sync(f);
    }

    function _decline(Fed storage f, uint256 p) internal {
        vm.prank(f.parties[p]);
        chain.declineHistograms(f.taskId, f.tree, f.level);
        f.declinedAt[p] = f.step;
        _sync(f);
    }

    /// @dev The submitters of the current step, in party order.
    function _submitters(Fed storage f) internal view returns (uint256[] memory subs) {
        uint256 s;
        for (uint256 p = 0; p < f.parties.length; ++p) if (f.lastSub[p] == f.step) ++s;
        subs = new uint256[](s);
        s = 0;
        for (uint256 p = 0; p < f.parties.length; ++p) if (f.lastSub[p] == f.step) subs[s++] = p;
    }

    /// @dev `resolveNode`'s arguments for `node`: the submitters' replayed blocks and their Merkle proofs.
    function _resolveArgs(Fed storage f, uint256 node)
        internal
        view
        returns (int256[] memory g, int256[] memory h, int256[] memory n, bytes32[] memory proofs)
    {
        uint256[] memory subs = _submitters(f);
        uint256 w = 2 * f.slots;
        uint256 rank = _rank(f, node);
        g = new int256[](subs.length * w);
        h = new int256[](subs.length * w);
        n = new int256[](subs.length * w);
        uint256 proofLen;
        while ((1 << proofLen) < _openCount(f)) ++proofLen;
        proofs = new bytes32[](subs.length * proofLen);
        for (uint256 i = 0; i < subs.length; ++i) {
            int256[] memory blk = _block(f, subs[i], node);
            for (uint256 j = 0; j < w; ++j) {
                g[i * w + j] = blk[j];
                h[i * w + j] = blk[w + j];
                n[i * w + j] = blk[2 * w + j];
            }
            // the leaves as submitted: a node of the level resolved before this one has its rows moved on
            (, bytes32[] memory proof) = _merkle(f.leavesAt[subs[i]], rank);
            for (uint256 j = 0; j < proofLen; ++j) proofs[i * proofLen + j] = proof[j];
        }
    }

    /// @dev Resolve `node` (anyone may), then move the rows of a split node to its children.
    function _resolve(Fed storage f, uint256 node, address caller) internal {
        (int256[] memory g, int256[] memory h, int256[] memory n, bytes32[] memory proofs) = _resolveArgs(f, node);
        uint256 tree = f.tree;
        vm.prank(caller);
        chain.resolveNode(f.taskId, node, g, h, n, proofs);
        _moveRows(f, tree, node);
        _sync(f);
    }

    /// @dev Resolve `nodes` in one `resolveNodes` call, then move the rows of the split ones.
    function _resolveNodes(Fed storage f, uint256[] memory nodes, address caller) internal {
        uint256 tree = f.tree;
        bytes32[][] memory proofParts = new bytes32[][](nodes.length);
        int256[][] memory gs = new int256[][](nodes.length);
        int256[][] memory hs = new int256[][](nodes.length);
        int256[][] memory ns = new int256[][](nodes.length);
        for (uint256 i = 0; i < nodes.length; ++i) (gs[i], hs[i], ns[i], proofParts[i]) = _resolveArgs(f, nodes[i]);
        (int256[] memory g, int256[] memory h, int256[] memory n) = (_concat(gs), _concat(hs), _concat(ns));
        bytes32[] memory proofs = new bytes32[](nodes.length * proofParts[0].length);
        uint256 o;
        for (uint256 i = 0; i < nodes.length; ++i) {
            for (uint256 j = 0; j < proofParts[i].length; ++j) proofs[o++] = proofParts[i][j];
        }
        vm.prank(caller);
        chain.resolveNodes(f.taskId, nodes, g, h, n, proofs);
        for (uint256 i = 0; i < nodes.length; ++i) _moveRows(f, tree, nodes[i]);
        _sync(f);
    }

    /// @dev The open nodes of the level that no resolution took yet.
    function _unresolved(Fed storage f) internal view returns (uint256[] memory out) {
        (, , , , , , uint256 resolvedMask, , ) = chain.getState(f.taskId);
        uint256[] memory nodes = _openNodes(f);
        uint256 count;
        for (uint256 i = 0; i < nodes.length; ++i) if ((resolvedMask >> (nodes[i] - (1 << f.level))) & 1 == 0) ++count;
        out = new uint256[](count);
        count = 0;
        for (uint256 i = 0; i < nodes.length; ++i) {
            if ((resolvedMask >> (nodes[i] - (1 << f.level))) & 1 == 0) out[count++] = nodes[i];
        }
    }

    function _concat(int256[][] memory xs) internal pure returns (int256[] memory out) {
        uint256 total;
        for (uint256 i = 0; i < xs.length; ++i) total += xs[i].length;
        out = new int256[](total);
        uint256 o;
        for (uint256 i = 0; i < xs.length; ++i) for (uint256 j = 0; j < xs[i].length; ++j) out[o++] = xs[i][j];
    }

    function _moveRows(Fed storage f, uint256 tree, uint256 node) internal {
        Node memory nd = chain.getNode(f.taskId, tree, node);
        if (nd.kind != 2) return;
        for (uint256 p = 0; p < f.parties.length; ++p) {
            for (uint256 r = 0; r < f.rows; ++r) {
                if (f.rowAt[p][r] != node) continue;
                bool left = uint8(f.bins[p][r * f.features + nd.feature]) <= nd.threshold;
                f.rowAt[p][r] = left ? 2 * node : 2 * node + 1;
            }
        }
    }

    function _closeStep(Fed storage f, address caller) internal {
        vm.prank(caller);
        chain.closeStep(f.taskId);
        _sync(f);
    }

    /// @dev Whether `closeStep` may close the current step now (complete, or past its deadline).
    function _closable(Fed storage f) internal view returns (bool) {
        if (f.status != Status.Training || f.phase == Phase.Resolving) return false;
        return block.number > f.deadline || (f.phase == Phase.Voting ? _votingComplete(f) : _histogramsComplete(f));
    }

    function _votingComplete(Fed storage f) internal view returns (bool) {
        for (uint256 p = 0; p < f.parties.length; ++p) if (_active(f, p) && f.votedAt[p] != f.step) return false;
        return true;
    }

    function _histogramsComplete(Fed storage f) internal view returns (bool) {
        for (uint256 p = 0; p < f.parties.length; ++p) if (_takesPart(f, p) && !_done(f, p)) return false;
        return true;
    }

    // ------------------------------------------------------------------ observing the chain

    /// @dev Read the task's state and check the transition from what was last observed: status, tree, level and
    ///      phase only move forward, voting closes only with every ballot in or after its deadline, the histogram
    ///      step only with every expected submission in or after its deadline. A new level starts a step; its ballots
    ///      sent ahead are taken when they have its form.
    function _sync(Fed storage f) internal {
        (, Status status, Phase phase, uint256 tree, uint256 level, uint256 openMask, , uint256 deadline, ) =
            chain.getState(f.taskId);
        Status was = f.status;
        bool sameTask = was == Status.Training && status == Status.Training;
        if (status != was) {
            bool ok = (was == Status.None && status == Status.Open) ||
                (was == Status.Open && (status == Status.Training || status == Status.Cancelled)) ||
                (was == Status.Training && status == Status.Completed);
            if (!ok) _violation("status moved backwards or skipped");
        }
        bool newLevel = status == Status.Training && (!sameTask || tree != f.tree || level != f.level);
        if (sameTask && (tree < f.tree || (tree == f.tree && level < f.level))) _violation("level moved backwards");
        if (sameTask && !newLevel && phase < f.phase) _violation("phase moved backwards");
        if (sameTask && !newLevel && f.phase == Phase.Voting && phase != Phase.Voting) {
            if (!_votingComplete(f) && block.number <= f.deadline) _violation("voting closed without every ballot");
        }
        if (sameTask && f.phase == Phase.Histograms && (newLevel || phase == Phase.Resolving)) {
            if (!_histogramsComplete(f) && block.number <= f.deadline) {
                _violation("histogram step closed without every submission");
            }
        }
        if (sameTask && newLevel && f.phase != Phase.Resolving) _violation("a level opened before its resolution");
        if (was == Status.Training && status == Status.Completed && f.phase != Phase.Resolving) {
            _violation("completed outside a resolution");
        }
        if (newLevel) {
            uint256 previous = sameTask && tree == f.tree ? f.openMask : 0;
            if (!sameTask || tree != f.tree) {
                for (uint256 p = 0; p < f.parties.length; ++p) {
                    for (uint256 r = 0; r < f.rows; ++r) f.rowAt[p][r] = 1;
                }
            }
            f.step += 1;
            f.tree = tree;
            f.level = level;
            f.openMask = openMask;
            if (tree < f.cfg.votedTrees) _takeAhead(f, previous);
            if (phase != Phase.Voting && !_drawn(f) && !_votingComplete(f)) {
                _violation("ballots sent ahead closed voting without every party");
            }
        }
        f.status = status;
        f.phase = phase;
        f.deadline = deadline;
    }

    /// @dev The ballots sent ahead for the level that just opened become their parties' ballots when they have its
    ///      form (a root's one vote at level 0; two per node open before, left child first, otherwise).
    function _takeAhead(Fed storage f, uint256 previous) internal {
        uint256[] memory nodes = _openNodes(f);
        for (uint256 p = 0; p < f.parties.length; ++p) {
            if (f.aheadAt[p] != f.step || f.aheadRoot[p] != (previous == 0)) continue;
            int256[] memory ballot = new int256[](nodes.length);
            if (previous == 0) {
                ballot[0] = f.ahead[p][0];
            } else {
                for (uint256 i = 0; i < nodes.length; ++i) {
                    uint256 parentBit = (nodes[i] >> 1) - (1 << (f.level - 1));
                    uint256 parentRank;
                    for (uint256 x = previous & ((1 << parentBit) - 1); x != 0; x &= x - 1) ++parentRank;
                    ballot[i] = f.ahead[p][2 * parentRank + (nodes[i] & 1)];
                }
            }
            f.ballot[p] = ballot;
            f.votedAt[p] = f.step;
        }
    }
}
