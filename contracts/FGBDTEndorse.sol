// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title FGBDTEndorseLib
/// @notice Endorsements of a party's level histograms: the digest a verifier signs and the recovery of its signer.
///         Mirrored by `ledger/spec/encoding.py` (`endorsement_digest`, `sign_endorsement`) and `ledger/audit/replay.py`
///         (`recover_endorser`). Who may endorse (approved members, not the party, each once, a quorum) is the
///         task's business and stays in `FGBDTChain`.
/// @dev Public functions: the library is deployed once and linked, which keeps `FGBDTChain` under EIP-170's 24 KB.
///      Called by DELEGATECALL, so `address(this)` in the digest is the calling `FGBDTChain`.
library FGBDTEndorseLib {
    /// @notice One verifier's endorsement of a party's level: its signature over `digest`, which binds the credit
    ///         multipliers it attests (fixed point, 1e18 = credited as sent; see `FGBDTChain.Member.creditG`).
    struct Endorsement {
        bytes signature;
        uint256 creditG;
        uint256 creditH;
        uint256 creditN;
    }

    bytes32 internal constant TAG = keccak256("FGBDTChain.Endorsement.v2");
    uint256 private constant SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    /// @notice Endorsement `index` is not a 65-byte low-s signature (v in {0, 1, 27, 28}) that recovers a signer.
    error InvalidSignature(uint256 index);
    /// @notice Endorsement `index` attests a credit that does not fit 80 bits.
    error CreditOutOfRange(uint256 index);

    /// @notice The digest an endorser signs (before the EIP-191 prefix): it binds the chain, the contract, the
    ///         task's step, the endorsed party, its histogram commitment and the attested credits.
    function digest(
        uint256 taskId,
        uint256 tree,
        uint256 level,
        address party,
        bytes32 root,
        uint256[3] memory credit
    ) public view returns (bytes32) {
        return
            keccak256(
                abi.encode(TAG, block.chainid, address(this), taskId, tree, level, party, root, credit[0], credit[1], credit[2])
            );
    }

    /// @notice The signer of every endorsement, in order, and the smallest credits they attest (1e18 each when
    ///         there is none); reverts naming the first endorsement that is malformed.
    function signers(
        uint256 taskId,
        uint256 tree,
        uint256 level,
        address party,
        bytes32 root,
        Endorsement[] calldata endorsements
    ) public view returns (address[] memory out, uint256[3] memory credit) {
        credit = [uint256(1e18), uint256(1e18), uint256(1e18)];
        out = new address[](endorsements.length);
        for (uint256 i = 0; i < endorsements.length; ++i) {
            Endorsement calldata e = endorsements[i];
            uint256 maxCredit = type(uint80).max;
            if (e.creditG > maxCredit || e.creditH > maxCredit || e.creditN > maxCredit) revert CreditOutOfRange(i);
            bytes32 hsh = keccak256(
                abi.encodePacked(
                    "\x19Ethereum Signed Message:\n32",
                    digest(taskId, tree, level, party, root, [e.creditG, e.creditH, e.creditN])
                )
            );
            bytes calldata sig = e.signature;
            if (sig.length != 65) revert InvalidSignature(i);
            bytes32 rr = bytes32(sig[0:32]);
            bytes32 ss = bytes32(sig[32:64]);
            uint8 v = uint8(sig[64]);
            if (v < 27) v += 27;
            if ((v != 27 && v != 28) || uint256(ss) > SECP256K1_HALF_N) revert InvalidSignature(i);
            out[i] = ecrecover(hsh, v, rr, ss);
            if (out[i] == address(0)) revert InvalidSignature(i);
            if (i == 0 || e.creditG < credit[0]) credit[0] = e.creditG;
            if (i == 0 || e.creditH < credit[1]) credit[1] = e.creditH;
            if (i == 0 || e.creditN < credit[2]) credit[2] = e.creditN;
        }
    }
}
