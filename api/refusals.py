"""Why a party's histograms were not taken at a level, as far as the chain shows it: the timeline's refusals.

What the chain holds: a party that declines says only that it declines (``HistogramsDeclined``), and one that sends
nothing leaves no event at all. A party node declines for one of two reasons (``node.party.level_work``): fewer
than the quorum of the other parties endorsed its histograms, or the contract refused them. The contract's refusal
shows on chain where the transaction was mined and reverted (sent with a gas limit from earlier receipts rather than
an estimate), or where a relayer's batch ran the party's request and recorded its failure
(``ExecutedForwardRequest`` with ``success`` false): that transaction is replayed as a call on the state before its
block to read the contract's error, as the chain client names a failed transaction's error. A decline with no such
transaction is the verifiers' refusal; their reasons are statistics of their own rows, which they keep in their own
logs (``node.party.endorsing``), so the timeline states the quorum the party missed. A party that voted (or took
part, where candidates are drawn) and sent nothing before the step closed is listed as silent: the level went on
without it and it takes no further part.

Why only around refusals: reading blocks and receipts is the costly part, so only the blocks of a level that has a
refusal are read, and only the transactions of the refused parties in them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from eth_utils import function_abi_to_4byte_selector, to_checksum_address

from fgbdt_chain.api import dashboard_models as m
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert, revert_data_of
from fgbdt_chain.ledger.spec.reference import endorsement_quorum
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder

SENT_FUNCTIONS = frozenset({"submitHistograms", "commitHistograms", "submitVotes", "declineHistograms"})
"""The calls of a party's share of a level whose revert explains why its histograms were not taken."""


def contract_refusals(
    task: TaskContract,
    forwarder: Forwarder | None,
    task_id: int,
    step: tuple[int, int],
    parties: Iterable[str],
    first: int,
    last: int,
) -> dict[str, tuple[str, str]]:
    """``{party: (the contract's reason, transaction hash)}``: the last reverted call of the level ``step`` (tree,
    level) sent by or for each of ``parties`` in blocks ``first`` to ``last``, replayed for its error."""
    client = task.client
    wanted = {p.lower(): p for p in parties}
    names = _selectors(task)
    found: dict[str, tuple[str, str]] = {}
    for number in range(first, last + 1):
        block = client.w3.eth.get_block(number, full_transactions=True)
        for item in block["transactions"]:
            tx: Any = item  # full transactions (TxData), not their hashes
            sender, to = str(tx["from"]).lower(), str(tx.get("to") or "").lower()
            if sender not in wanted or to != task.address.lower():
                continue
            data = bytes(tx["input"])
            name = names.get(data[:4], "")
            if name not in SENT_FUNCTIONS or _step_of(data) != (task_id, *step):
                continue
            if int(client.w3.eth.get_transaction_receipt(tx["hash"])["status"]) == 1:
                continue
            call = {"from": tx["from"], "to": tx["to"], "data": "0x" + data.hex(), "value": int(tx.get("value", 0))}
            found[wanted[sender]] = (_reason(client, call, number, name), _hash(tx["hash"]))
    if forwarder is not None:
        found.update(_relayed(task, forwarder, (task_id, *step), wanted, names, first, last))
    return found


def _relayed(
    task: TaskContract,
    forwarder: Forwarder,
    step: tuple[int, int, int],
    wanted: dict[str, str],
    names: dict[bytes, str],
    first: int,
    last: int,
) -> dict[str, tuple[str, str]]:
    """The requests of ``wanted`` parties that a relayer's batch ran and that failed, replayed as the forwarder
    runs them (from the forwarder, the signer appended to the calldata)."""
    client = task.client
    found: dict[str, tuple[str, str]] = {}
    failed = [
        e
        for e in client.logs(forwarder.contract, ["ExecutedForwardRequest"], None, first, last)
        if not e.args["success"] and str(e.args["signer"]).lower() in wanted
    ]
    for ev in failed:
        signer = str(ev.args["signer"]).lower()
        tx = client.w3.eth.get_transaction(ev.tx_hash)  # type: ignore[arg-type]
        _, args = forwarder.contract.decode_function_input(tx["input"])
        requests = args.get("requests") or [args.get("request")]
        for req in requests:
            fields = req.values() if isinstance(req, dict) else req  # web3 decodes a struct as a dict or a tuple
            sender, to, value, gas, _, data, _ = fields
            data = bytes(data)
            name = names.get(data[:4], "")
            if str(sender).lower() != signer or str(to).lower() != task.address.lower() or name not in SENT_FUNCTIONS:
                continue
            if _step_of(data) != step:
                continue
            suffixed = data + bytes.fromhex(signer.removeprefix("0x"))
            call = {"from": forwarder.address, "to": task.address, "data": "0x" + suffixed.hex(), "gas": int(gas)}
            call["value"] = int(value)
            found[wanted[signer]] = (_reason(client, call, ev.block_number, name), _hash(ev.tx_hash))
    return found


def _reason(client: ChainClient, call: dict[str, Any], number: int, function: str) -> str:
    """The contract's error of ``call`` mined in block ``number``: replayed on the state before the block, and if it
    passes there on the state after it (a transaction before it in the block changed what it saw)."""
    for block in (number - 1, number):
        try:
            client.w3.eth.call(call, block)  # type: ignore[arg-type]
        except Exception as exc:
            data = revert_data_of(exc)
            err: ContractRevert = (
                client.decoder.decode(data, function)
                if data is not None
                else ContractRevert("Unknown", (), b"", function)
            )
            return f"its {function} reverted: {err.name}{_args(err.args_)}"
    return f"its {function} failed in block {number} (out of gas, or a state its replay does not reproduce)"


def _args(args: Sequence[Any]) -> str:
    return "(" + ", ".join(str(a) for a in args) + ")"


def _selectors(task: TaskContract) -> dict[bytes, str]:
    abi: list[Any] = list(task.contract.abi)
    return {function_abi_to_4byte_selector(i): str(i["name"]) for i in abi if i.get("type") == "function"}


def _step_of(data: bytes) -> tuple[int, ...]:
    """The first three arguments of a level's call: task id, tree and level."""
    return tuple(int.from_bytes(data[4 + 32 * i : 36 + 32 * i], "big") for i in range(3)) if len(data) >= 100 else ()


def _hash(value: Any) -> str:
    text = value.hex() if isinstance(value, bytes | bytearray) else str(value)
    return text if text.startswith("0x") else "0x" + text


def verifier_refusal(parties: int, quorum_num: int, quorum_den: int) -> str:
    """The reason of a decline the chain shows no contract refusal for."""
    need = endorsement_quorum(parties, quorum_num, quorum_den)
    return (
        f"short of the verifiers' quorum: {need} of the {parties - 1} other parties must endorse its "
        "histograms (each verifier's reasons are statistics of its own rows and stay in its log)"
    )


def silent(step: str, block: int) -> str:
    """The reason of a party that sent nothing at a step."""
    return f"sent no {step} before the step closed (block {block}): the level went on without it"


def refusal(party: str, kind: str, reason: str, source: str | None, tx: str | None = None) -> m.Refusal:
    """One refusal of the timeline."""
    return m.Refusal.model_validate(
        {"party": to_checksum_address(party), "kind": kind, "reason": reason, "source": source, "transaction": tx}
    )
