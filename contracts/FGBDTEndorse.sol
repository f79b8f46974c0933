// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title FGBDTEndorseLib
/// @notice Endorsements of a party's level histograms: the EIP-712 typed data a verifier signs and the recovery of
///         its signer. Mirrored by `ledger/spec/encoding.py` (`endorsement_digest`, `endorsement_typed_data`,
///         `sign_endorsement`) and `ledger/audit/replay.py` (`recover_endorser`). Who may endorse (approved members,
///         not the party, each once, a quorum) is the task's business and stays in `FGBDTChain`.
/// @dev Typed data (EIP-712) rather than a bare hash, so that a wallet shows the task, step, party, histogram root
///      and credits it signs. The domain is `FGBDTChain`'s (OpenZeppelin's `EIP712`: name `DOMAIN_NAME`, version
///      `DOMAIN_VERSION`, the chain id and the task contract as verifying contract), passed in as its separator.
///      Public functions: the library is deployed once and linked, which keeps `FGBDTChain` under EIP-170's 24 KB.
library FGBDTEndorseLib {
    /// @notice One verifier's endorsement of a party's level: its signature over `digest`, which binds the credit
    ///         multipliers it attests (fixed point, 1e18 = credited as sent; see `Member.creditG`).
    struct Endorsement {
        bytes signature;
        uint256 creditG;
        uint256 creditH;
        uint256 creditN;
    }

    /// @notice The EIP-712 domain name of the task contract's endorsements.
    string internal constant DOMAIN_NAME = "FGBDTChain";
    /// @notice The EIP-712 domain version of the task contract's endorsements.
    string internal constant DOMAIN_VERSION = "1";
    /// @notice The EIP-712 type hash of the signed struct.
    bytes32 internal constant ENDORSEMENT_TYPEHASH =
        keccak256(
            "Endorsement(uint256 taskId,uint256 tree,uint256 level,address party,bytes32 histogramRoot,"
            "uint256 creditG,uint256 creditH,uint256 creditN)"
        );

    /// @notice Endorsement `index` is not a 65-byte low-s signature (v 27 or 28) that recovers a signer.
    /// @param index The endorsement's position in the submitted list.
    error InvalidSignature(uint256 index);
    /// @notice Endorsement `index` attests a credit that does not fit 80 bits.
    /// @param index The endorsement's position in the submitted list.
    error CreditOutOfRange(uint256 index);

    /// @notice The EIP-712 digest an endorser signs: the typed `Endorsement` under the task contract's domain. It
    ///         binds the chain and the contract (the domain), the task's step, the endorsed party, its histogram
    ///         commitment and the attested credits.
    /// @param domainSeparator The task contract's EIP-712 domain separator.
    /// @param taskId The task.
    /// @param tree The tree of the step.
    /// @param level The level of the step.
    /// @param party The party whose histograms are endorsed.
    /// @param root The party's histogram commitment (`FGBDTCommitLib.root`) of the level.
    /// @param credit The attested credit multipliers (g, h, n; fixed point).
    /// @return The hash the signature recovers from (`keccak256("\x19\x01" || domainSeparator || structHash)`).
    function digest(
        bytes32 domainSeparator,
        uint256 taskId,
        uint256 tree,
        uint256 level,
        address party,
        bytes32 root,
        uint256[3] memory credit
    ) public pure returns (bytes32) {
        bytes32 structHash = keccak256(
            abi.encode(ENDORSEMENT_TYPEHASH, taskId, tree, level, party, root, credit[0], credit[1], credit[2])
        );
        return MessageHashUtils.toTypedDataHash(domainSeparator, structHash);
    }

    /// @notice The signer of every endorsement, in order, and the smallest credits they attest (1e18 each when
    ///         there is none); reverts naming the first endorsement that is malformed.
    /// @dev Recovery by OpenZeppelin's `ECDSA` (65 bytes, low s, v 27 or 28); any failure is `InvalidSignature`.
    /// @param domainSeparator The task contract's EIP-712 domain separator.
    /// @param taskId The task.
    /// @param tree The tree of the step.
    /// @param level The level of the step.
    /// @param party The party whose histograms are endorsed.
    /// @param root The party's histogram commitment of the level.
    /// @param endorsements The signatures with the credits they attest.
    /// @return out The signer of each endorsement.
    /// @return credit The least credit attested, quantity by quantity.
    function signers(
        bytes32 domainSeparator,
        uint256 taskId,
        uint256 tree,
        uint256 level,
        address party,
        bytes32 root,
        Endorsement[] calldata endorsements
    ) public pure returns (address[] memory out, uint256[3] memory credit) {
        credit = [uint256(1e18), uint256(1e18), uint256(1e18)];
        out = new address[](endorsements.length);
        for (uint256 i = 0; i < endorsements.length; ++i) {
            Endorsement calldata e = endorsements[i];
            uint256 maxCredit = type(uint80).max;
            if (e.creditG > maxCredit || e.creditH > maxCredit || e.creditN > maxCredit) revert CreditOutOfRange(i);
            bytes32 hsh = digest(domainSeparator, taskId, tree, level, party, root, [e.creditG, e.creditH, e.creditN]);
            // the third value only details the error, and every error is refused alike (InvalidSignature)
            // slither-disable-next-line unused-return
            (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecoverCalldata(hsh, e.signature);
            if (err != ECDSA.RecoverError.NoError) revert InvalidSignature(i);
            out[i] = signer;
            if (i == 0 || e.creditG < credit[0]) credit[0] = e.creditG;
            if (i == 0 || e.creditH < credit[1]) credit[1] = e.creditH;
            if (i == 0 || e.creditN < credit[2]) credit[2] = e.creditN;
        }
    }
}
