"""Reading a task's record from a node: its events, the ``submitHistograms`` calls in its transactions' inputs and
the contract's views, all at one block.

Why at one pinned block: events and storage read at different heights would disagree on a live task. Why the calls
are searched for anywhere in a transaction's input: signatures are not in the events, and a request relayed by an
ERC-2771 forwarder carries the call inside the forwarder's ``execute`` payload; senders are taken from the events'
arguments (the contract emits ``_msgSender()``), never from ``tx.from``, so relayed requests audit like direct ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.audit.record import AuditInput, ChainState, NodeState, SubmitCall, checksum, tx_key
from fgbdt_chain.ledger.audit.report import AuditError
from fgbdt_chain.ledger.rpc.abi_codec import canonical_type
from fgbdt_chain.ledger.rpc.client import ChainClient, Event
from fgbdt_chain.ledger.spec import reference as ref


def submit_abi(abi: Iterable[dict[str, Any]]) -> tuple[bytes, list[str]]:
    """``submitHistograms``'s selector and canonical argument types, from the contract's ABI."""
    for item in abi:
        if item.get("type") == "function" and item.get("name") == "submitHistograms":
            types = [canonical_type(i) for i in item["inputs"]]
            return keccak(text=f"submitHistograms({','.join(types)})")[:4], types
    raise AuditError("the FGBDTChain ABI has no submitHistograms function")


def find_submit_calls(tx_input: bytes, selector: bytes, types: Sequence[str]) -> list[SubmitCall]:
    """Every decodable ``submitHistograms`` call inside a transaction input: at offset 0 for a direct call, deeper
    for a relayed one (an ERC-2771 forwarder's request carries the call, with the signer appended, as ``bytes``)."""
    out: list[SubmitCall] = []
    pos = tx_input.find(selector)
    while pos >= 0:
        try:
            task_id, tree, level, data, endorsements = abi_decode(list(types), tx_input[pos + 4 :])
            call = SubmitCall(
                int(task_id),
                int(tree),
                int(level),
                tuple(data),
                tuple(bytes(e[0]) for e in endorsements),
                tuple(ref.Credit(int(e[1]), int(e[2]), int(e[3])) for e in endorsements),
            )
        except Exception:  # the selector bytes occurred by chance inside other data, or credits out of range
            pass
        else:
            out.append(call)
        pos = tx_input.find(selector, pos + 1)
    return out


def read_task(client: ChainClient, address: str, task_id: int, block: int | None = None) -> AuditInput:
    """Read a task's events, ``submitHistograms`` calldata and contract views, all at one block (default: latest)."""
    w3 = client.w3
    try:
        code = w3.eth.get_code(to_checksum_address(address))
    except ValueError as exc:
        raise AuditError(f"invalid contract address {address!r}: {exc}") from exc
    if len(code) == 0:
        raise AuditError(f"no contract code at {address} on chain {client.chain_id}")
    contract = client.register("FGBDTChain", address)
    latest = client.block_number
    if block is not None and not 0 <= block <= latest:
        raise AuditError(f"block {block} is not in the chain (latest is {latest})")
    at = latest if block is None else block
    events = client.logs(contract, (), task_id, to_block=at)
    names = {e.name for e in events}
    if "TaskCreated" not in names:
        raise AuditError(f"unknown task {task_id} at {contract.address}")
    if "TrainingStarted" not in names:
        state = "was cancelled" if "TaskCancelled" in names else "has not started training"
        raise AuditError(f"task {task_id} {state}: nothing to audit")
    selector, types = submit_abi(client.artifacts["FGBDTChain"].abi)
    calls: dict[str, list[SubmitCall]] = {}
    for ev in events:
        if ev.name == "HistogramsSubmitted" and tx_key(ev.tx_hash) not in calls:
            tx = w3.eth.get_transaction(ev.tx_hash)  # type: ignore[arg-type]
            calls[tx_key(ev.tx_hash)] = find_submit_calls(bytes(tx["input"]), selector, types)
    return AuditInput(
        client.chain_id, contract.address, task_id, events, calls, read_state(contract, task_id, events, at)
    )


def read_state(contract: Any, task_id: int, events: list[Event], at: int) -> ChainState:
    """The views the audit compares with its replay: state, config, members, nodes and owed amounts."""

    def view(fn: str, *args: Any) -> Any:
        return getattr(contract.functions, fn)(*args).call(block_identifier=at)

    st = view("getState", task_id)
    cfg_abi = next(i for i in contract.abi if i.get("type") == "function" and i.get("name") == "getConfig")
    names = [c["name"] for c in cfg_abi["outputs"][0]["components"]]
    cfg_raw = view("getConfig", task_id)
    config = {
        k: int(v) for k, v in (cfg_raw.items() if isinstance(cfg_raw, dict) else zip(names, cfg_raw, strict=True))
    }
    parties: list[str] = []
    seed_block_hash: bytes | None = None
    requester = checksum(st[0])
    accounts = {requester}
    nodes: set[tuple[int, int]] = set()
    for ev in events:
        if ev.name == "TrainingStarted":
            parties = [checksum(p) for p in ev.args["parties"]]
        elif ev.name == "ShapleySeedFixed" and ev.block_number > 0:
            seed_block_hash = bytes(contract.w3.eth.get_block(int(ev.args["seedBlock"]))["hash"])
        elif ev.name in ("RewardAssigned", "Withdrawn"):
            accounts.add(checksum(ev.args["account"]))
        elif ev.name in ("CandidatesFixed", "NodeSplit", "LeafSet"):
            t, nd = int(ev.args["tree"]), int(ev.args["node"])
            nodes.add((t, nd))
            if ev.name == "NodeSplit":
                nodes.update({(t, 2 * nd), (t, 2 * nd + 1)})
    accounts.update(parties)
    contributions = {p: int(view("getMember", task_id, p)[3]) for p in parties}
    owed = {a: int(view("owed", task_id, a)) for a in sorted(accounts)}
    node_states = {}
    kept = int(st[3]) - 1  # getState's tree: the chain keeps its nodes and the previous tree's (getNode)
    for t, nd in sorted(nodes):
        if t < kept:
            continue
        rec = view("getNode", task_id, t, nd)
        values = rec.values() if isinstance(rec, dict) else rec
        node_states[(t, nd)] = NodeState(*(int(x) for x in values))
    return ChainState(int(st[1]), int(st[8]), config, contributions, owed, node_states, seed_block_hash)
