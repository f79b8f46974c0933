"""Does the devnet's chain slow down as it grows? Block time at block 1,000, 10,000 and 50,000 per anvil setting.

anvil 1.7.1 (the newest on npm) slows down as the chain grows under its default hardfork (Prague): upstream traced
it to the EIP-2935 block-hash history contract and fixed it after 1.7.1
(https://github.com/foundry-rs/foundry/pull/15715). The devnet's hardfork and pruning
(``ledger.devnet.anvil.anvil_command``) are chosen by this measurement.

For every setting: a fresh anvil, then at each checkpoint (empty blocks mined up to it with ``anvil_mine``, whose
time is reported too) ``--blocks`` blocks of one transaction each (automine: a value transfer between two dev
accounts, one block per ``eth_sendTransaction``), timed from the request to its answer. Median and 90th percentile
in milliseconds.

    python -m bench.anvil_blocks                      # bench/results/anvil_blocks.json (bench.record)
    python -m bench.anvil_blocks --checkpoints 1000,5000 --blocks 50 --out /tmp/blocks.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx

from bench.record import Run, parameters_of
from fgbdt_chain.ledger.devnet.anvil import HARDFORK, anvil_binary, free_port, stop_process, wait_until_ready

SETTINGS: dict[str, list[str]] = {
    "default (Prague), history kept": [],
    "default (Prague), --prune-history 64": ["--prune-history", "64"],
    f"--hardfork {HARDFORK}, history kept": ["--hardfork", HARDFORK],
    f"--hardfork {HARDFORK} --prune-history 64 (devnet)": ["--hardfork", HARDFORK, "--prune-history", "64"],
}


class Rpc:
    def __init__(self, url: str) -> None:
        self.http, self.url, self.id = httpx.Client(timeout=600), url, 0

    def __call__(self, method: str, *params: Any) -> Any:
        self.id += 1
        answer = self.http.post(self.url, json={"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        body = answer.json()
        if "error" in body:
            raise RuntimeError(f"{method}: {body['error']}")
        return body["result"]


def measure(flags: list[str], checkpoints: list[int], blocks: int) -> list[dict[str, Any]]:
    port = free_port()
    cmd = [str(anvil_binary()), "--port", str(port), "--host", "127.0.0.1", "--quiet", *flags]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    out = []
    try:
        wait_until_ready(proc, url, "anvil", 30.0)
        rpc = Rpc(url)
        a, b = rpc("eth_accounts")[:2]
        for target in checkpoints:
            height = before = int(rpc("eth_blockNumber"), 16)
            start = time.perf_counter()
            while height < target:  # anvil_mine in chunks: one call for 50,000 blocks can outlast a timeout
                step = min(5_000, target - height)
                rpc("anvil_mine", hex(step))
                height += step
            mine_seconds = time.perf_counter() - start
            times = []
            for _ in range(blocks):
                t = time.perf_counter()
                rpc("eth_sendTransaction", {"from": a, "to": b, "value": "0x1"})
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            out.append(
                {
                    "block": target,
                    "median_ms": statistics.median(times),
                    "p90_ms": times[int(0.9 * (len(times) - 1))],
                    "mine_seconds": mine_seconds,
                    "empty_block_ms": 1000 * mine_seconds / max(1, target - before),
                }
            )
            print(json.dumps({"flags": flags, **out[-1]}), file=sys.stderr, flush=True)
    finally:
        stop_process(proc)
    return out


def tables(runs: list[dict[str, Any]]) -> str:
    """Markdown of a recorded run (the last)."""
    doc = runs[-1]["results"]
    checkpoints = doc["checkpoints"]
    lines = [
        f"{doc['anvil']}; {doc['blocks']} one-transaction blocks per checkpoint.",
        "",
        "One-transaction block, median ms (90th percentile) at block:",
        "",
        "| setting | " + " | ".join(f"{c:,}" for c in checkpoints) + " | empty blocks mined, ms each (last stretch) |",
        "|---|" + "---|" * (len(checkpoints) + 1),
    ]
    for name, rows in doc["results"].items():
        cells = [f"{r['median_ms']:.1f} ({r['p90_ms']:.1f})" for r in rows]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {rows[-1]['empty_block_ms']:.2f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", default="1000,10000,50000")
    ap.add_argument("--blocks", type=int, default=200, help="one-transaction blocks timed at each checkpoint")
    ap.add_argument("--settings", help="a subset of the settings, by index (0-3), comma separated")
    ap.add_argument("--out", help="results file (default bench/results/anvil_blocks.json, bench.record)")
    args = ap.parse_args()
    record = Run("anvil_blocks", parameters_of(args), args.out)
    checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    names = list(SETTINGS)
    chosen = [names[int(i)] for i in args.settings.split(",")] if args.settings else names
    version = subprocess.run([str(anvil_binary()), "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    doc: dict[str, Any] = {
        "anvil": version.strip(),
        "checkpoints": checkpoints,
        "blocks": args.blocks,
        "results": {name: measure(SETTINGS[name], checkpoints, args.blocks) for name in chosen},
    }
    record.save(doc)
    print(tables([{"parameters": record.parameters, "results": doc}]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
