// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title FGBDTCommitLib
/// @notice The Merkle commitment of a party's level histograms: one leaf per open node (keccak256 of its node block
///         `g[2*nbins] | h[2*nbins] | n[2*nbins]`), the root over the leaves padded to a power of two with zero
///         leaves, and the check that a resolution's replayed node blocks are the committed ones. Mirrored by
///         `ledger/spec/encoding.py` (`node_hash`, `merkle_root`, `merkle_proof`).
/// @dev Public functions: the library is deployed once and linked, which keeps `FGBDTChain` under EIP-170's 24 KB.
library FGBDTCommitLib {
    /// @notice A party's replayed histograms do not hash to its commitment.
    /// @param taskId The task.
    /// @param party The party whose proof failed.
    error HistogramMismatch(uint256 taskId, address party);

    /// @notice The leaf of each node block of `data` (`blockWords` words each), in order.
    /// @param data Node blocks, back to back.
    /// @param blockWords Words per node block (`6 * nbins`).
    /// @return out keccak256 of each node block.
    function leaves(int256[] calldata data, uint256 blockWords) public pure returns (bytes32[] memory out) {
        out = new bytes32[](data.length / blockWords);
        for (uint256 i = 0; i < out.length; ++i) {
            bytes32 hsh;
            assembly ("memory-safe") {
                let ptr := mload(0x40)
                let len := mul(blockWords, 32)
                calldatacopy(ptr, add(data.offset, mul(mul(i, blockWords), 32)), len)
                hsh := keccak256(ptr, len)
            }
            out[i] = hsh;
        }
    }

    /// @notice The Merkle root of `leaves_`, padded with zero leaves to a power of two (one leaf: itself).
    /// @param leaves_ The node hashes in increasing node id.
    /// @return The root; parents are `keccak256(left || right)`.
    function root(bytes32[] memory leaves_) public pure returns (bytes32) {
        uint256 size = 1;
        while (size < leaves_.length) size <<= 1;
        bytes32[] memory layer = new bytes32[](size);
        for (uint256 i = 0; i < leaves_.length; ++i) layer[i] = leaves_[i];
        while (size > 1) {
            size >>= 1;
            for (uint256 i = 0; i < size; ++i) layer[i] = keccak256(abi.encodePacked(layer[2 * i], layer[2 * i + 1]));
        }
        return layer[0];
    }

    /// @notice Checks each submitter's replayed node block against its commitment and returns the bin-wise sums
    ///         over the submitters.
    /// @param taskId The task (named in a mismatch).
    /// @param subs The submitters, party-major order of the arrays.
    /// @param roots Each submitter's committed root.
    /// @param width Slots per array and party (`2 * nbins`).
    /// @param rank The node's rank among the level's open nodes (its leaf index).
    /// @param g Gradient sums, party-major, `width` each (lengths checked by the caller).
    /// @param h Hessian sums, same layout.
    /// @param n Row counts, same layout.
    /// @param proofs Merkle proofs, party-major, `proofs.length / subs.length` hashes each.
    /// @return aG The bin-wise gradient sums over the submitters.
    /// @return aH The bin-wise hessian sums.
    /// @return aN The bin-wise row counts.
    function verifyAndAggregate(
        uint256 taskId,
        address[] memory subs,
        bytes32[] memory roots,
        uint256 width,
        uint256 rank,
        int256[] calldata g,
        int256[] calldata h,
        int256[] calldata n,
        bytes32[] calldata proofs
    ) public pure returns (int256[] memory aG, int256[] memory aH, int256[] memory aN) {
        uint256 w = width;
        aG = new int256[](w);
        aH = new int256[](w);
        aN = new int256[](w);
        // hashes per submitter: the division counts them and is meant to truncate (the caller checked the length)
        // slither-disable-next-line divide-before-multiply
        uint256 proofLen = subs.length == 0 ? 0 : proofs.length / subs.length;
        for (uint256 p = 0; p < subs.length; ++p) {
            uint256 off = p * w;
            bytes32 leaf;
            assembly ("memory-safe") {
                let ptr := mload(0x40)
                let len := mul(w, 32)
                let src := mul(off, 32)
                calldatacopy(ptr, add(g.offset, src), len)
                calldatacopy(add(ptr, len), add(h.offset, src), len)
                calldatacopy(add(ptr, mul(len, 2)), add(n.offset, src), len)
                leaf := keccak256(ptr, mul(len, 3))
            }
            uint256 idx = rank;
            for (uint256 j = 0; j < proofLen; ++j) {
                bytes32 sib = proofs[p * proofLen + j];
                leaf = idx & 1 == 1 ? keccak256(abi.encodePacked(sib, leaf)) : keccak256(abi.encodePacked(leaf, sib));
                idx >>= 1;
            }
            if (leaf != roots[p]) revert HistogramMismatch(taskId, subs[p]);
            // Bin-wise sums, the hot loop of a resolution: assembly with Solidity's checked-add semantics (panic
            // 0x11 on signed overflow). The calldata reads are in bounds: the lengths were checked by the caller.
            assembly ("memory-safe") {
                function addc(x, y) -> z {
                    z := add(x, y)
                    if and(eq(slt(x, 0), slt(y, 0)), iszero(eq(slt(z, 0), slt(x, 0)))) {
                        mstore(0, shl(224, 0x4e487b71))
                        mstore(4, 0x11)
                        revert(0, 0x24)
                    }
                }
                let src := shl(5, off)
                for {
                    let b := 0
                } lt(b, w) {
                    b := add(b, 1)
                } {
                    let o := shl(5, b)
                    let dst := add(add(aG, 0x20), o)
                    mstore(dst, addc(mload(dst), calldataload(add(g.offset, add(src, o)))))
                    dst := add(add(aH, 0x20), o)
                    mstore(dst, addc(mload(dst), calldataload(add(h.offset, add(src, o)))))
                    dst := add(add(aN, 0x20), o)
                    mstore(dst, addc(mload(dst), calldataload(add(n.offset, add(src, o)))))
                }
            }
        }
    }
}
