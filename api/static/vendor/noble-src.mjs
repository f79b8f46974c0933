// The entry of vendor/noble.js (`npm run build:dashboard`): secp256k1 signing and keccak-256, all the page needs to
// sign an EIP-712 request with a key file, from the audited @noble libraries, bundled into one ES module.
export { secp256k1 } from "@noble/curves/secp256k1.js";
export { keccak_256 } from "@noble/hashes/sha3.js";
