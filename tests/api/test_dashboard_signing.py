"""The page's own signing (``api/static/sign.js``) run by Node against eth-account: the transactions a key file signs
in the browser (a reward deposit, ``api.deposits``) are byte for byte the ones eth-account signs, EIP-1559 and legacy
(EIP-155), so the chain takes them as any wallet's. Node runs the module as the browser does (an ES module with the
bundled ``@noble`` library); the browser tests send such a deposit to a chain."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from eth_account import Account

from fgbdt_chain.api.dashboard import STATIC_DIR

KEY = "0x" + "4c" * 32
BASE: dict[str, Any] = {
    "nonce": 7,
    "to": "0x0e1104717acb3f94a1B6b73cEea5d17C27819cc4",
    "value": 3 * 10**17,
    "data": "0xca1d209d" + "00" * 31 + "03",
    "gas": 60_000,
    "chain_id": 31337,
}
CASES: list[dict[str, Any]] = [
    {**BASE, "tx_type": 2, "max_fee_per_gas": 2 * 10**9, "max_priority_fee_per_gas": 10**9},
    {**BASE, "tx_type": 0, "gas_price": 10**9},
    {**BASE, "nonce": 0, "value": 1, "tx_type": 0, "gas_price": 0, "chain_id": 1},
    {**BASE, "nonce": 300, "value": 10**24, "tx_type": 2, "max_fee_per_gas": 7, "max_priority_fee_per_gas": 0},
]


def _eth_account(tx: dict[str, Any]) -> str:
    fields = {"nonce": tx["nonce"], "to": tx["to"], "value": tx["value"], "data": tx["data"], "gas": tx["gas"]}
    fields["chainId"] = tx["chain_id"]
    if tx["tx_type"] == 2:
        fields |= {"maxFeePerGas": tx["max_fee_per_gas"], "maxPriorityFeePerGas": tx["max_priority_fee_per_gas"]}
    else:
        fields["gasPrice"] = tx["gas_price"]
    return "0x" + bytes(Account.from_key(KEY).sign_transaction(fields).raw_transaction).hex()


def test_a_key_file_signs_transactions_as_eth_account_does() -> None:
    node = shutil.which("node")
    assert node, "Node.js is needed (the npm tool chain installs it)"
    script = f"""
        import {{ keySigner }} from {json.dumps((STATIC_DIR / "sign.js").as_uri())};
        const signer = keySigner({json.dumps(KEY)});
        const cases = {json.dumps([{**c, "value": str(c["value"])} for c in CASES])};
        const out = [];
        for (const tx of cases) out.push(await signer.signTransaction(tx));
        console.log(JSON.stringify({{ address: signer.address, signed: out }}));
    """
    run = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["address"] == Account.from_key(KEY).address
    assert got["signed"] == [_eth_account(tx) for tx in CASES]
