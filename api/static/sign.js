// Signed requests from the browser: the ERC-2771 `ForwardRequest` every state change of the API carries as `auth`
// (ledger/wrappers/forwarder.py), signed as EIP-712 typed data by a browser wallet (window.ethereum) or by a key
// file the user picks, which stays in this page's memory and is never sent anywhere.

import { keccak_256, secp256k1 } from "./vendor/noble.js";
import { get } from "./api.js";

const enc = new TextEncoder();
export const DEFAULT_GAS = 5_000_000; // as ledger.wrappers.forwarder.DEFAULT_GAS
export const DEFAULT_TTL = 600; // seconds a signed request stays valid

export const hex = (bytes) => "0x" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export function unhex(text) {
  const digits = text.startsWith("0x") ? text.slice(2) : text;
  if (digits.length % 2 || /[^0-9a-fA-F]/.test(digits)) throw new Error("not hex");
  const out = new Uint8Array(digits.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(digits.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export const keccak = (bytes) => keccak_256(typeof bytes === "string" ? enc.encode(bytes) : bytes);

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A 32-byte big-endian word of a non-negative integer. */
export function word(value) {
  let v = BigInt(value);
  const out = new Uint8Array(32);
  for (let i = 31; i >= 0 && v > 0n; i--, v >>= 8n) out[i] = Number(v & 0xffn);
  return out;
}

const addressWord = (address) => concat(new Uint8Array(12), unhex(address));

/** EIP-55 checksummed address. */
export function checksum(address) {
  const lower = address.toLowerCase().replace(/^0x/, "");
  const digest = hex(keccak(lower)).slice(2);
  return "0x" + [...lower].map((c, i) => (parseInt(digest[i], 16) >= 8 ? c.toUpperCase() : c)).join("");
}

// ------------------------------------------------------------------------------------------- ABI calldata

/** Calldata of `name(types)` with `args`: static words (uint256, address) and one trailing `bytes`. */
export function calldata(signature, args) {
  const types = signature.slice(signature.indexOf("(") + 1, -1).split(",").filter(Boolean);
  const head = [];
  const tail = [];
  types.forEach((type, i) => {
    if (type === "bytes") {
      const data = unhex(args[i]);
      head.push(word(32 * types.length + tail.reduce((n, t) => n + t.length, 0)));
      tail.push(concat(word(data.length), data, new Uint8Array((32 - (data.length % 32)) % 32)));
    } else if (type === "address") head.push(addressWord(args[i]));
    else head.push(word(args[i]));
  });
  return hex(concat(keccak(signature).slice(0, 4), ...head, ...tail));
}

/** The contract call each signed endpoint makes (api/client.py's WRITE_CALLS). */
export const CALLS = {
  approve: "approve(uint256,address)",
  refuse: "refuse(uint256,address)",
  start: "start(uint256,bytes)",
  cancel: "cancel(uint256)",
  withdraw: "withdraw(uint256)",
};

// ------------------------------------------------------------------------------------------- EIP-712

function typeString(types, name) {
  return `${name}(${types[name].map((f) => `${f.type} ${f.name}`).join(",")})`;
}

function encodeValue(type, value) {
  if (type === "string") return keccak(value);
  if (type === "bytes") return keccak(unhex(value));
  if (type === "address") return addressWord(value);
  if (/^uint\d*$/.test(type)) return word(value);
  throw new Error(`EIP-712 type ${type} is not supported here`);
}

function hashStruct(types, name, value) {
  const fields = types[name].map((f) => encodeValue(f.type, value[f.name]));
  return keccak(concat(keccak(typeString(types, name)), ...fields));
}

/** The EIP-712 digest of typed data (only the flat types the forwarder's request uses). */
export function typedDataDigest({ types, domain, primaryType, message }) {
  return keccak(
    concat(new Uint8Array([0x19, 0x01]), hashStruct(types, "EIP712Domain", domain), hashStruct(types, primaryType, message)),
  );
}

// ------------------------------------------------------------------------------------------- signers

let signer = null; // {kind: "key" | "wallet", address, sign(typedData) -> hex signature}
const listeners = new Set();

export const currentSigner = () => signer;
export const onSignerChange = (fn) => listeners.add(fn);

function setSigner(next) {
  signer = next;
  for (const fn of listeners) fn(signer);
}

/** A signer from a private key's text: 64 hex digits, optionally 0x-prefixed (as `fgbdt` writes key files). */
export function keySigner(text) {
  const digits = text.trim().replace(/^0x/, "");
  if (!/^[0-9a-fA-F]{64}$/.test(digits)) throw new Error("the file does not hold a 32-byte hex private key");
  const key = unhex(digits);
  if (!secp256k1.utils.isValidSecretKey(key)) throw new Error("not a valid secp256k1 private key");
  const pub = secp256k1.getPublicKey(key, false).slice(1);
  const address = checksum(hex(keccak(pub).slice(12)));
  return {
    kind: "key",
    address,
    async sign(typedData) {
      const rec = secp256k1.sign(typedDataDigest(typedData), key, { prehash: false, format: "recovered" });
      return hex(concat(rec.slice(1), new Uint8Array([27 + rec[0]]))); // r || s || v, as ecrecover takes it
    },
    /** A transaction described by the API, signed here; only the signed bytes leave the page. */
    async signTransaction(tx) {
      return signedTransaction(tx, key);
    },
  };
}

// ------------------------------------------------------------------------------------------- transactions

/** RLP of a byte string, an integer (minimal big-endian) or a list of these. */
export function rlp(item) {
  if (Array.isArray(item)) {
    const body = concat(...item.map(rlp));
    return concat(rlpLength(body.length, 0xc0), body);
  }
  const bytes = item instanceof Uint8Array ? item : intBytes(item);
  if (bytes.length === 1 && bytes[0] < 0x80) return bytes;
  return concat(rlpLength(bytes.length, 0x80), bytes);
}

function rlpLength(n, offset) {
  if (n < 56) return new Uint8Array([offset + n]);
  const len = intBytes(n);
  return concat(new Uint8Array([offset + 55 + len.length]), len);
}

function intBytes(value) {
  const w = word(value);
  const first = w.findIndex((b) => b !== 0);
  return first < 0 ? new Uint8Array(0) : w.slice(first);
}

/** r and s of a recovered signature as integers (RLP takes them without leading zeros). */
const rs = (rec) => [rec.slice(1, 33), rec.slice(33)].map((b) => BigInt(hex(b)));

/** The signed bytes of the transaction the API describes (``api.deposits``): EIP-1559 (type 2) or legacy with
 * EIP-155's chain id, signed by `key` (a 32-byte secret). */
function signedTransaction(tx, key) {
  const common = [BigInt(tx.nonce), null, BigInt(tx.gas), unhex(tx.to), BigInt(tx.value), unhex(tx.data)];
  const sign = (payload) => secp256k1.sign(keccak(payload), key, { prehash: false, format: "recovered" });
  if (tx.tx_type === 2) {
    const fields = [BigInt(tx.chain_id), BigInt(tx.nonce), BigInt(tx.max_priority_fee_per_gas), BigInt(tx.max_fee_per_gas), ...common.slice(2), []];
    const rec = sign(concat(new Uint8Array([2]), rlp(fields)));
    return hex(concat(new Uint8Array([2]), rlp([...fields, rec[0], ...rs(rec)])));
  }
  common[1] = BigInt(tx.gas_price);
  const rec = sign(rlp([...common, BigInt(tx.chain_id), 0, 0]));
  return hex(rlp([...common, BigInt(rec[0]) + 35n + 2n * BigInt(tx.chain_id), ...rs(rec)]));
}

export async function useKeyFile(file) {
  setSigner(keySigner(await file.text()));
  return signer;
}

/** The browser wallet's first account, signing with `eth_signTypedData_v4`. */
export async function useWallet() {
  const eth = window.ethereum;
  if (!eth) throw new Error("no browser wallet (window.ethereum) in this page");
  const [account] = await eth.request({ method: "eth_requestAccounts" });
  if (!account) throw new Error("the wallet gave no account");
  const address = checksum(account);
  setSigner({
    kind: "wallet",
    address,
    async sign(typedData) {
      const json = JSON.stringify(typedData, (_, v) => (typeof v === "bigint" ? v.toString() : v));
      return eth.request({ method: "eth_signTypedData_v4", params: [address, json] });
    },
  });
  return signer;
}

export const forgetSigner = () => setSigner(null);

/** `auth` for a request whose `ForwardRequest.data` is `data`, signed by the current signer. */
export async function authFor(data, { gas = DEFAULT_GAS, ttl = DEFAULT_TTL } = {}) {
  if (!signer) throw new Error("choose a signer first: a browser wallet or a key file (top of the page)");
  const info = await get("/v1/signing");
  const { nonce } = await get(`/v1/nonces/${signer.address}`);
  const deadline = Math.floor(Date.now() / 1000) + ttl;
  const message = { from: signer.address, to: info.contract, value: "0", gas: String(gas), nonce: String(nonce), deadline: String(deadline), data };
  const typedData = { types: info.types, primaryType: info.primary_type, domain: info.domain, message };
  const signature = await signer.sign(typedData);
  return { signer: signer.address, nonce, deadline, gas, signature };
}

/** The `auth` of one of the simple calls (CALLS) with its arguments. */
export const authForCall = (fn, args, opts) => authFor(calldata(CALLS[fn], args), opts);
