"""The client's direct ABI coding (ledger.abi_codec) gives exactly what web3's contract objects give.

Every transaction and event of a small trained task is coded both ways: the calldata bytes must be equal, and every
decoded event argument must be equal in value and type (checksummed addresses, tuples, bytes).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from chain_helpers import RowSource, open_task, random_hist

from fgbdt_chain.ledger.rpc.abi_codec import function_coders
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract, resolution_calldata
from fgbdt_chain.ledger.wrappers.federation import run_level

pytestmark = pytest.mark.chain


def _web3_args(value: Any) -> Any:
    """web3's AttributeDict / list values as plain dicts and tuples, for comparison with the codec's output."""
    if isinstance(value, list | tuple):
        return tuple(_web3_args(v) for v in value)
    if hasattr(value, "items"):
        return {k: _web3_args(v) for k, v in value.items()}
    return value


def test_events_decode_as_web3_does(anvil_client: ChainClient, artifacts: dict) -> None:
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    cfg = TaskConfig(trees=1, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=0)
    fed = open_task(anvil_client, task, cfg, 3, reward=10**18)
    rng = random.Random(3)
    source = RowSource(rng, [p.address for p in fed.parties], 40, fed.num_features, cfg.bins + 1)
    source.start_tree(0)
    while task.state(fed.task_id).tree == 0 and task.state(fed.task_id).status.name == "TRAINING":
        width = len(task.state(fed.task_id).open_nodes())
        out = run_level(
            task, fed.task_id, fed.parties, {p.address: [0] * width for p in fed.parties}, source, fed.resolver
        )
        source.follow(out)
    raw = anvil_client.w3.eth.get_logs({"address": task.address, "fromBlock": 0, "toBlock": "latest"})
    names = set()
    for log in raw:
        [ours] = anvil_client.decode_events([log])
        theirs = getattr(task.contract.events, ours.name)().process_log(log)["args"]
        assert set(ours.args) == set(theirs)
        for key, value in theirs.items():
            assert ours.args[key] == _web3_args(value), (ours.name, key)
            assert type(ours.args[key]) is type(_web3_args(value)), (ours.name, key)
        names.add(ours.name)
    assert {"TaskCreated", "JoinRequested", "HistogramsSubmitted", "NodeSplit", "ContributionsAdded"} <= names


def test_calldata_encodes_as_web3_does(anvil_client: ChainClient) -> None:
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))
    acct = anvil_client.new_account(0)
    rng = random.Random(9)
    hists = [[random_hist(rng, (0, 2), 5) for _ in range(3)] for _ in range(2)]
    g, h, n, proofs = resolution_calldata([5, 4], [4, 5, 6], hists)
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("createTask", (TaskConfig().as_tuple(), [0, 1, 2], [5, 6, 7], b"\x01" * 32)),
        ("join", (3, b"psd bytes", "http://party.example:8080/")),
        ("approve", (3, acct.address)),
        ("submitVotes", (1, 2, 3, [-1, 0, 5, 122])),
        (
            "submitHistograms",
            (1, 0, 2, [-(2**255), 2**255 - 1, 0, -1], [(b"\x02" * 65, 1, 2**80 - 1, 0), (b"\x03" * 65, 5, 6, 7)]),
        ),
        ("resolveNodes", (1, [5, 4], g, h, n, proofs)),
        ("resolveNode", (1, 4, g[: len(g) // 2], h[: len(h) // 2], n[: len(n) // 2], proofs[: len(proofs) // 2])),
    ]
    assert {name for name, _ in calls} <= set(function_coders(task.contract.abi))
    for name, args in calls:
        ours = anvil_client.encode_call(task.contract, name, args)
        theirs = getattr(task.contract.functions, name)(*args)._encode_transaction_data()
        assert ours == theirs, name
    # arguments the codec does not take as given fall back to web3 (a hex string for bytes32)
    hexroot = "0x" + "ab" * 32
    args = (1, 2, 3, acct.address, hexroot, [4, 5, 6])
    harness = anvil_client.deploy("EndorseDigestHarness", anvil_client.new_account(10**21))
    ours = anvil_client.encode_call(harness, "digest", args)
    assert ours == harness.functions.digest(*args)._encode_transaction_data()


def test_view_calls_decode_as_web3_does(chain: ChainClient) -> None:
    """Every view the ledger reads, through the client and through web3, on a started task (both chains)."""
    task = TaskContract.deploy(chain, chain.new_account(10**21))
    cfg = TaskConfig(trees=1, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=0)
    fed = open_task(chain, task, cfg, 3, reward=10**18)
    p = fed.parties[1].address
    views: list[tuple[str, tuple[Any, ...]]] = [
        ("getState", (fed.task_id,)),
        ("getConfig", (fed.task_id,)),
        ("getParties", (fed.task_id,)),
        ("getMember", (fed.task_id, p)),
        ("getNode", (fed.task_id, 0, 1)),
        ("owed", (fed.task_id, p)),
        ("taskCount", ()),
        ("trustedForwarder", ()),
    ]
    for name, args in views:
        ours = chain.call(task.contract, name, *args)
        theirs = getattr(task.contract.functions, name)(*args).call()
        assert _web3_args(ours) == _web3_args(theirs), name
        assert type(ours) in (type(theirs), tuple), name
    with pytest.raises(ContractRevert) as exc:
        chain.call(task.contract, "getState", 999)
    assert exc.value.name == "UnknownTask"
