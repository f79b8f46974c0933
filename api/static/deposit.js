// A reward deposit: `fund(taskId)` with ether from the signer's own account. A relayer cannot send it for the signer
// (the value would be the relayer's), so a browser wallet sends the transaction itself, and a key file signs the
// transaction the API describes (nonce, gas, fees) here; the API broadcasts the signed bytes (api/deposits.py).

import { get, post } from "./api.js";
import { calldata, currentSigner } from "./sign.js";

/** Wei of a decimal ether amount, exactly ("0.5" -> 5e17), or an error naming what is wrong. */
export function weiOf(text) {
  const t = String(text).trim();
  const m = t.match(/^(\d*)(?:\.(\d*))?$/);
  if (!t || !m || (m[1] === "" && !m[2])) throw new Error(`deposit: "${t}" is not an amount of ETH`);
  if ((m[2] || "").length > 18) throw new Error("deposit: at most 18 decimals (1 wei)");
  return BigInt(m[1] || "0") * 10n ** 18n + BigInt((m[2] || "").padEnd(18, "0"));
}

/** Deposit `etherText` ETH into task `taskId` from the current signer; resolves to a sentence saying what happened. */
export async function deposit(taskId, etherText) {
  const wei = weiOf(etherText);
  if (wei <= 0n) throw new Error("deposit: the amount must be more than 0");
  const me = currentSigner();
  if (!me) throw new Error("choose a signer first: a browser wallet or a key file (top of the page)");
  if (me.kind === "key") {
    const tx = await get(`/v1/tasks/${taskId}/deposit?sender=${me.address}&amount_wei=${wei}`);
    const raw = await me.signTransaction(tx);
    const res = await post(`/v1/tasks/${taskId}/deposit`, { raw_transaction: raw });
    return `Deposit of ${etherText} ETH to task ${taskId} mined in block ${res.block}.`;
  }
  const { chain_id: chainId, contract } = await get("/v1/signing");
  const walletChain = Number(await window.ethereum.request({ method: "eth_chainId" }));
  if (walletChain !== chainId) throw new Error(`the wallet is on chain ${walletChain}; the tasks are on chain ${chainId}`);
  const params = [{ from: me.address, to: contract, value: "0x" + wei.toString(16), data: calldata("fund(uint256)", [taskId]) }];
  const hash = await window.ethereum.request({ method: "eth_sendTransaction", params });
  return `Deposit of ${etherText} ETH to task ${taskId} sent by the wallet (${hash.slice(0, 10)}…); it shows once mined.`;
}
