"""``fgbdt audit``: an honest task audits OK; tampered storage and tampered records are caught at the right place.

One small task is trained once per module on anvil (two trees of depth 2, four parties, a silent histogram sender
and a silent voter after deadlines, a node that cannot split, an extra ``fund`` deposit, one party relaying its votes
and histograms through the ERC-2771 forwarder); the unit-level tests tamper copies of its decoded record, the storage
tests tamper anvil's storage with ``anvil_setStorageAt`` and restore it.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from chain_helpers import EDGES, Federation, RowSource, open_task, random_votes
from eth_abi import encode as abi_encode
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.deploy.cli import main
from fgbdt_chain.ledger.audit.replay import (
    AuditInput,
    SubmitCall,
    audit_chain,
    audit_events,
    find_submit_calls,
    read_task,
)
from fgbdt_chain.ledger.devnet.anvil import free_port
from fgbdt_chain.ledger.rpc.abi_codec import canonical_type
from fgbdt_chain.ledger.rpc.client import ChainClient, Event, TxResult
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.encoding import endorsement_digest, merkle_root, node_block, sign_endorsement, words
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.ledger.wrappers.contracts import Endorsement, Status, TaskConfig, TaskContract, level_nodes
from fgbdt_chain.ledger.wrappers.federation import quorum, run_level

pytestmark = pytest.mark.chain

ZERO_ADDRESS = "0x" + "00" * 20
REWARD = 3 * 10**18
TOP_UP = 10**17


try:  # the ERC-2771 relay (ledger.forwarder) is being added concurrently: relay through it when it is there
    from fgbdt_chain.ledger.wrappers.forwarder import Forwarder
except ImportError:  # pragma: no cover - older trees
    Forwarder = None  # type: ignore[assignment,misc]


def deploy_task_contract(client: ChainClient) -> TaskContract:
    """Deploy FGBDTChain with its trusted forwarder (ERC-2771 builds), or with none on builds without one."""
    abi = client.artifacts["FGBDTChain"].abi
    ctor = next((i for i in abi if i.get("type") == "constructor"), None)
    if ctor and ctor["inputs"] and "FGBDTForwarder" in client.artifacts:
        return TaskContract.deploy(client, client.new_account(10**21))
    args = [ZERO_ADDRESS for _ in ctor["inputs"]] if ctor else []
    return TaskContract(client, client.deploy("FGBDTChain", client.new_account(10**21), *args))


class RelayingTask(TaskContract):
    """Sends one party's votes and histograms through the trusted ERC-2771 forwarder, as the REST API does: the
    transaction comes from a relayer, the calldata is the forwarder's ``execute``, and only the events name the party.
    The audit must recover endorsements from such transactions too."""

    def __init__(self, base: TaskContract, relayed: str, relayer: LocalAccount) -> None:
        super().__init__(base.client, base.contract)
        self.relayed, self.relayer = relayed, relayer
        self.forwarder = Forwarder.of(base) if Forwarder is not None else None
        self.relayed_txs: list[str] = []

    def _relay(self, sender: LocalAccount, function: str, *args: Any) -> TxResult | None:
        if self.forwarder is None or sender.address != self.relayed:
            return None
        res = self.forwarder.relay_call(self.relayer, sender, self, function, *args, gas=20_000_000)
        self.relayed_txs.append(res.tx_hash)
        return res

    def submit_votes(self, sender: LocalAccount, task_id: int, tree: int, level: int, votes: Sequence[int]) -> TxResult:
        res = self._relay(sender, "submitVotes", task_id, tree, level, list(votes))
        return res if res is not None else super().submit_votes(sender, task_id, tree, level, votes)

    def submit_histograms(
        self,
        sender: LocalAccount,
        task_id: int,
        tree: int,
        level: int,
        hists: Sequence[NodeHistograms],
        endorsements: Sequence[Endorsement],
    ) -> TxResult:
        data = [x for h in hists for x in node_block(h)]
        res = self._relay(sender, "submitHistograms", task_id, tree, level, data, [e.as_tuple() for e in endorsements])
        if res is not None:
            return res
        return super().submit_histograms(sender, task_id, tree, level, hists, endorsements)


@dataclasses.dataclass
class Trained:
    """The module's honest task."""

    client: ChainClient
    fed: Federation
    block: int
    cfg: TaskConfig
    relayed_txs: list[str]


@pytest.fixture(scope="module")
def trained(anvil_client: ChainClient) -> Trained:
    client = anvil_client
    task = deploy_task_contract(client)
    cfg = TaskConfig(trees=2, depth=2, bins=3, min_parties=4, max_parties=4, lam=ONE, min_rows=16, step_blocks=4)
    fed = open_task(client, task, cfg, 4, num_features=4, reward=REWARD, start=False)
    has_fund = any(i.get("name") == "fund" for i in client.artifacts["FGBDTChain"].abi)
    if has_fund:  # a second deposit, so the audit's reward is createTask's value plus TaskFunded
        client.transact(task.contract, "fund", fed.task_id, sender=fed.parties[3], value=TOP_UP)
    task.start(fed.requester, fed.task_id, EDGES)
    has_forwarder = any(i.get("name") == "trustedForwarder" for i in client.artifacts["FGBDTChain"].abi)
    relaying = RelayingTask(task, fed.parties[0].address, fed.resolver) if has_forwarder else None
    rng = random.Random(5)
    silent = {0: ((), (1,)), 1: ((2,), ())}  # level 0: party 1 sends no histograms; level 1: party 2 does not vote
    rows = RowSource(rng, [p.address for p in fed.parties], 60, fed.num_features, cfg.bins + 1)
    taking_part = list(fed.parties)  # a silent party takes no further part (it still endorses)
    step = 0
    while task.state(fed.task_id).status == Status.TRAINING:
        st = task.state(fed.task_id)
        if st.level == 0:
            rows.start_tree(st.tree)
        votes = random_votes(rng, taking_part, len(st.open_nodes()), fed.num_features)
        sv, sh = silent.get(step, ((), ()))
        out = run_level(
            relaying or task,
            fed.task_id,
            taking_part,
            votes,
            rows,
            fed.resolver,
            silent_votes={fed.parties[i].address for i in sv},
            silent_hists={fed.parties[i].address for i in sh},
            endorsers=fed.parties,
        )
        rows.follow(out)
        taking_part = [p for p in fed.parties if p.address in out.submitters]
        step += 1
    task.withdraw(fed.requester, fed.task_id)  # a Withdrawn event: owed must be assigned minus withdrawn
    return Trained(client, fed, client.block_number, cfg, relaying.relayed_txs if relaying else [])


@pytest.fixture(scope="module")
def record(trained: Trained) -> AuditInput:
    return read_task(trained.client, trained.fed.task.address, trained.fed.task_id)


def _cli(trained: Trained, *extra: str) -> list[str]:
    return ["audit", "--rpc", trained.client.w3.provider.endpoint_uri, "--task", str(trained.fed.task_id), *extra]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------------ honest task


def test_honest_task_is_ok(trained: Trained, record: AuditInput, capsys: pytest.CaptureFixture[str]) -> None:
    report = audit_events(record)
    assert report.ok, report.first_mismatch
    assert report.completed and report.first_mismatch is None
    c = report.counts
    assert c.trees == 2 and c.levels == 4 and c.state_checked
    submissions = [e for e in record.events if e.name == "HistogramsSubmitted"]
    assert c.histograms == len(submissions) and c.signatures == len(submissions) * quorum(4)
    assert c.vote_sets == len([e for e in record.events if e.name == "VotesSubmitted"])
    paid = [e for e in record.events if e.name in ("RewardAssigned", "RewardForfeited")]
    assert c.payouts == len(paid) >= 2
    assert c.nodes >= 2 * 3  # every tree resolves its root and at least the leaves below it
    fed = trained.fed
    # the silent parties are really absent from the record the audit accepted
    assert len({e.args["party"] for e in submissions if e.args["level"] == 0 and e.args["tree"] == 0}) == 3

    assert main([*_cli(trained), "--contract", fed.task.address]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK") and "2 trees, 4 levels" in out


def test_deployment_file_and_past_block(trained: Trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fed = trained.fed
    dep = tmp_path / "deployment.json"
    url = trained.client.w3.provider.endpoint_uri  # type: ignore[attr-defined]
    info = {"rpc_url": url, "chain_id": trained.client.chain_id, "contracts": {"FGBDTChain": fed.task.address}}
    dep.write_text(json.dumps(info))
    assert main(["audit", "--task", str(fed.task_id), "--deployment", str(dep)]) == 0
    assert capsys.readouterr().out.startswith("OK")
    # mid-training: the state right after the first level's histograms closed audits OK, as work in progress
    closed = fed.task.client.logs(fed.task.contract, ["HistogramsClosed"], fed.task_id)[0]
    report = audit_chain(trained.client, fed.task.address, fed.task_id, block=closed.block_number)
    assert report.ok and not report.completed, report.first_mismatch
    assert report.pending is not None and "tree 0, level 0" in report.pending and report.counts.nodes == 0


def test_usage_errors_exit_2(trained: Trained, capsys: pytest.CaptureFixture[str]) -> None:
    fed = trained.fed
    unknown = ["audit", "--rpc", _cli(trained)[2], "--task", "999", "--contract", fed.task.address]
    assert main(unknown) == 2
    assert "unknown task 999" in capsys.readouterr().err
    dead = ["audit", "--rpc", f"http://127.0.0.1:{free_port()}", "--task", "1", "--contract", fed.task.address]
    assert main(dead) == 2
    assert "chain unreachable" in capsys.readouterr().err
    assert main([*_cli(trained), "--contract", ZERO_ADDRESS]) == 2
    assert "no contract code" in capsys.readouterr().err
    assert main(_cli(trained)) == 2
    assert "no contract" in capsys.readouterr().err
    waiting = open_task(trained.client, fed.task, trained.cfg, 4, start=False)
    assert (
        main(["audit", "--rpc", _cli(trained)[2], "--task", str(waiting.task_id), "--contract", fed.task.address]) == 2
    )
    assert "has not started" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ storage tampering


def _storage(client: ChainClient, address: str, slot: int) -> int:
    return int.from_bytes(bytes(client.w3.eth.get_storage_at(to_checksum_address(address), slot)), "big")


def _set_storage(client: ChainClient, address: str, slot: int, value: int) -> None:
    word = "0x" + (value % 2**256).to_bytes(32, "big").hex()
    client.w3.provider.make_request("anvil_setStorageAt", [address, hex(slot), word])  # type: ignore[arg-type]


def _mapping_slot(key: int | str, slot: int) -> int:
    """Solidity's slot of ``mapping[key]`` whose mapping sits at ``slot``: keccak(pad(key) . pad(slot))."""
    k = int(key, 16) if isinstance(key, str) else key
    return int.from_bytes(keccak(k.to_bytes(32, "big") + slot.to_bytes(32, "big")), "big")


def _find_base(matches: Callable[[int], bool]) -> int:
    """The declaration slot of a mapping, found by probing: robust to state variables added by other changes (the
    layout rules fix everything else). ``matches(base)`` says whether the layout computed from ``base`` holds the
    values the views return."""
    found = [b for b in range(64) if matches(b)]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def restore_storage(trained: Trained) -> Iterator[list[tuple[int, int]]]:
    """Slots a test changes, restored afterwards so the module's task stays honest for the other tests."""
    changed: list[tuple[int, int]] = []
    yield changed
    for slot, value in reversed(changed):
        _set_storage(trained.client, trained.fed.task.address, slot, value)


def test_tampered_contribution_in_storage(
    trained: Trained, restore_storage: list[tuple[int, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    fed, client = trained.fed, trained.client
    party = fed.parties[2].address
    _, _, psd_hash, contribution = fed.task.member(fed.task_id, party)
    assert contribution != 0

    def member_slot(base: int) -> int:  # Member: two packed words, psdHash, histRoot, contribution, votes
        return _mapping_slot(party, _mapping_slot(fed.task_id, base))

    base = _find_base(
        lambda b: (
            _storage(client, fed.task.address, member_slot(b) + 2) == int.from_bytes(psd_hash, "big")
            and _storage(client, fed.task.address, member_slot(b) + 4) == contribution % 2**256
        )
    )
    slot = member_slot(base) + 4
    restore_storage.append((slot, contribution))
    _set_storage(client, fed.task.address, slot, contribution + 7)
    assert fed.task.contribution(fed.task_id, party) == contribution + 7
    report = audit_chain(client, fed.task.address, fed.task_id)
    assert not report.ok and report.mismatch is not None
    m = report.mismatch
    assert (m.field, m.party, m.expected, m.recorded) == (
        "stored contribution total (getMember)",
        party,
        contribution,
        contribution + 7,
    )
    assert main([*_cli(trained), "--contract", fed.task.address]) == 1
    assert capsys.readouterr().out.startswith(f"MISMATCH at party {party}: stored contribution total")


def test_tampered_node_value_in_storage(trained: Trained, restore_storage: list[tuple[int, int]]) -> None:
    fed, client = trained.fed, trained.client
    tree, node = 1, 1
    rec = fed.task.node(fed.task_id, tree, node)

    def node_slot(base: int) -> int:  # Node: packed kind/cand/feature/threshold, g, h, n, value
        return _mapping_slot(node, _mapping_slot(tree, _mapping_slot(fed.task_id, base)))

    base = _find_base(
        lambda b: (
            _storage(client, fed.task.address, node_slot(b) + 1) == rec.g % 2**256
            and _storage(client, fed.task.address, node_slot(b) + 4) == rec.value % 2**256
        )
    )
    slot = node_slot(base) + 4
    restore_storage.append((slot, rec.value))
    _set_storage(client, fed.task.address, slot, rec.value - 1)
    report = audit_chain(client, fed.task.address, fed.task_id)
    assert report.mismatch is not None
    m = report.mismatch
    assert (m.field, m.tree, m.level, m.node) == ("stored node value (getNode)", tree, 0, node)
    assert (m.expected, m.recorded) == (rec.value, rec.value - 1)


# ------------------------------------------------------------------------------------------------ record tampering


def _replace_event(inp: AuditInput, pick: Callable[[Event], bool], change: Callable[[dict[str, Any]], None]) -> Event:
    """Replace the first event ``pick`` accepts in ``inp.events`` (each test's own copy of the list) by a changed
    copy; returns the original event."""
    for i, ev in enumerate(inp.events):
        if pick(ev):
            args = {k: (list(v) if isinstance(v, list | tuple) else v) for k, v in ev.args.items()}
            change(args)
            inp.events[i] = dataclasses.replace(ev, args=args)
            return ev
    raise AssertionError("no event to tamper")


@pytest.fixture
def copy(record: AuditInput) -> AuditInput:
    return dataclasses.replace(record, events=list(record.events), calls={k: list(v) for k, v in record.calls.items()})


def _where(ev: Event) -> tuple[int, int]:
    return int(ev.args["tree"]), int(ev.args["node"])


def test_tampered_phi(copy: AuditInput) -> None:
    def pick(ev: Event) -> bool:
        return ev.name == "ContributionsAdded" and any(int(p) != 0 for p in ev.args["phi"])

    def bump(args: dict[str, Any]) -> None:
        args["phi"][-1] += 1

    ev = _replace_event(copy, pick, bump)
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "phi" and (m.tree, m.node) == _where(ev)
    assert m.party == to_checksum_address(ev.args["parties"][-1])
    assert m.recorded == int(ev.args["phi"][-1]) + 1 and m.expected == int(ev.args["phi"][-1])


def test_a_shapley_seed_not_derived_from_the_start_blocks_hash_is_caught(copy: AuditInput) -> None:
    assert copy.state is not None and copy.state.seed_block_hash is not None
    _replace_event(copy, lambda ev: ev.name == "ShapleySeedFixed", lambda args: args.update(seed=args["seed"] ^ 1))
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "Shapley seed (keccak of the seed block's hash and the task id)"


def test_a_seed_block_before_start_is_caught(copy: AuditInput) -> None:
    """The block before ``start`` has a hash its sender knew: a seed from it is a mismatch, whatever the seed."""
    _replace_event(
        copy, lambda ev: ev.name == "ShapleySeedFixed", lambda args: args.update(seedBlock=args["seedBlock"] - 1)
    )
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "Shapley seed block (start's, or one after its hash expired)"


def test_a_seed_not_fixed_by_the_first_transaction_after_its_block_is_caught(copy: AuditInput) -> None:
    """The seed is fixed by the first task transaction after its seed block: a record whose seed event comes after
    another of the task's transactions (here: moved to the first resolution's block) is a mismatch."""
    first = min(
        (e for e in copy.events if e.name in ("NodeSplit", "LeafSet")), key=lambda e: (e.block_number, e.log_index)
    )
    seed = next(e for e in copy.events if e.name == "ShapleySeedFixed")
    assert seed.block_number < first.block_number  # the votes fixed it, before any resolution
    copy.events[copy.events.index(seed)] = dataclasses.replace(seed, block_number=first.block_number, log_index=0)
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "ShapleySeedFixed by the first task transaction after the seed block"


def test_a_record_without_its_seed_is_caught(copy: AuditInput) -> None:
    copy.events[:] = [e for e in copy.events if e.name != "ShapleySeedFixed"]
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "number of ShapleySeedFixed events (one, before the first resolution)"


@pytest.mark.parametrize("which", ["resolved leaf", "child leaf"])
def test_tampered_leaf_value(record: AuditInput, which: str) -> None:
    """A node that could not split (its leaf value from inherited totals, zero contributions) and a last-level child
    (its leaf value from its parent's split sums) are two different code paths of the contract."""
    resolved = {_where(e) for e in record.events if e.name == "ContributionsAdded"}
    target = next(
        e for e in record.events if e.name == "LeafSet" and (_where(e) in resolved) == (which == "resolved leaf")
    )
    inp = dataclasses.replace(record, events=list(record.events))
    ev = _replace_event(inp, lambda e: e is target, lambda a: a.update(value=a["value"] + 1))
    m = audit_events(inp).mismatch
    assert m is not None and m.field == "leaf value" and (m.tree, m.node) == _where(ev)
    assert (m.expected, m.recorded) == (int(ev.args["value"]), int(ev.args["value"]) + 1)


def test_tampered_split_gain(copy: AuditInput) -> None:
    ev = _replace_event(copy, lambda e: e.name == "NodeSplit", lambda a: a.update(gain=a["gain"] - 1))
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "split gain" and (m.tree, m.node) == _where(ev)


def _vote_change(events: list[Event]) -> tuple[Event, int, int, tuple[int, int], tuple[int, int]]:
    """The first (vote event, node position, new vote) that changes a node's top-2, with the top-2 before/after."""
    by_level: dict[tuple[int, int], list[Event]] = {}
    open_nodes: dict[tuple[int, int], list[int]] = {}
    for e in events:
        if e.name == "VotesSubmitted":
            by_level.setdefault((int(e.args["tree"]), int(e.args["level"])), []).append(e)
        if e.name == "LevelStarted":
            tree, level = int(e.args["tree"]), int(e.args["level"])
            open_nodes[(tree, level)] = level_nodes(level, int(e.args["openMask"]))
    for (tree, level), evs in by_level.items():
        for target in evs:
            for j, old in enumerate(target.args["votes"]):
                node = open_nodes[(tree, level)][j]
                column = [int(e.args["votes"][j]) for e in evs]
                before = ref.top2(column, 4, ref.TIE_HASHED, tree, node)
                for new in range(-1, 4):
                    changed = [new if e is target else v for e, v in zip(evs, column, strict=True)]
                    after = ref.top2(changed, 4, ref.TIE_HASHED, tree, node)
                    if new != old and after != before:
                        return target, j, new, before, after
    raise AssertionError("no vote change alters a top-2")


def test_tampered_vote_changes_top2(copy: AuditInput) -> None:
    """Change one vote so that the node's top-2 changes: the recorded candidates no longer follow from the votes."""
    target, j, new, before, after = _vote_change(copy.events)

    def change(args: dict[str, Any]) -> None:
        args["votes"][j] = new

    _replace_event(copy, lambda e: e is target, change)
    m = audit_events(copy).mismatch
    tree, level = int(target.args["tree"]), int(target.args["level"])
    nodes = sorted(
        _where(e)[1]
        for e in copy.events
        if e.name == "CandidatesFixed" and _where(e)[0] == tree and _where(e)[1] >> level == 1
    )
    assert m is not None and m.field == "candidates (top-2 of the votes)"
    assert (m.tree, m.level, m.node, m.party) == (tree, level, nodes[j], None)
    assert (m.expected, m.recorded) == (after, before)


def _first_submission(inp: AuditInput) -> tuple[Event, str]:
    """The first histogram submission and the key of its transaction in ``inp.calls``."""
    ev = next(e for e in inp.events if e.name == "HistogramsSubmitted")
    return ev, ev.tx_hash.lower().removeprefix("0x")


def test_tampered_signature_byte(copy: AuditInput) -> None:
    ev, key = _first_submission(copy)
    call = copy.calls[key][0]
    sig = bytearray(call.signatures[0])
    sig[7] ^= 0x01
    copy.calls[key] = [dataclasses.replace(call, signatures=(bytes(sig), *call.signatures[1:]))]
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "endorsement 0 signer"
    # a credit other than the one signed recovers to another address as well
    better = (dataclasses.replace(call.credits[0], g=call.credits[0].g + 1), *call.credits[1:])
    copy.calls[key] = [dataclasses.replace(call, credits=better)]
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "endorsement 0 signer"
    assert (m.tree, m.level, m.party) == (0, 0, to_checksum_address(ev.args["party"]))


def test_missing_and_duplicate_signatures(copy: AuditInput) -> None:
    _, key = _first_submission(copy)
    call = copy.calls[key][0]
    copy.calls[key] = [_endorsed(call, call.signatures[:-1], call.credits[:-1])]
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "endorsements (quorum)" and m.recorded == quorum(4) - 1
    copy.calls[key] = [_endorsed(call, (*call.signatures, call.signatures[0]), (*call.credits, call.credits[0]))]
    m = audit_events(copy).mismatch
    assert m is not None and m.field == f"endorsement {len(call.signatures)} signer"
    assert m.expected == "no duplicate endorser"


def _endorsed(call: SubmitCall, signatures: Sequence[bytes], credits: Sequence[ref.Credit]) -> SubmitCall:
    return dataclasses.replace(call, signatures=tuple(signatures), credits=tuple(credits))


def test_digest_binds_chain_and_contract(record: AuditInput) -> None:
    for changed in (
        dataclasses.replace(record, chain_id=record.chain_id + 1),
        dataclasses.replace(record, contract=ZERO_ADDRESS),
    ):
        m = audit_events(changed).mismatch
        assert m is not None and m.field == "endorsement 0 signer" and (m.tree, m.level) == (0, 0)


def test_tampered_histogram_data(copy: AuditInput) -> None:
    def bump(args: dict[str, Any]) -> None:
        args["data"][3] += 1

    ev = _replace_event(copy, lambda e: e.name == "HistogramsSubmitted", bump)
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "histogram commitment (Merkle root of the data)"
    assert m.party == to_checksum_address(ev.args["party"]) and m.recorded == bytes(ev.args["root"])


def test_tampered_payout(copy: AuditInput) -> None:
    ev = _replace_event(copy, lambda e: e.name == "RewardAssigned", lambda a: a.update(amount=a["amount"] + 1))
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "payout #0 (event, account, amount)"
    assert m.party == to_checksum_address(ev.args["account"]) and m.recorded[2] == m.expected[2] + 1


def test_parties_that_left_are_not_paid(record: AuditInput, trained: Trained) -> None:
    """The silent parties (1 and 2) left before the last step: no payout reaches them, and what a positive total of
    theirs would have earned is forfeited (``RewardForfeited``) to the requester, as ``reference.payouts`` says."""
    fed = trained.fed
    left = {fed.parties[1].address, fed.parties[2].address}
    assigned = {to_checksum_address(e.args["account"]) for e in record.events if e.name == "RewardAssigned"}
    assert not assigned & left and to_checksum_address(fed.requester.address) in assigned
    totals = [fed.task.contribution(fed.task_id, p.address) for p in fed.parties]
    funded = sum(int(e.args["amount"]) for e in record.events if e.name == "TaskFunded")
    due = ref.payouts(totals, [p.address not in left for p in fed.parties], REWARD + funded)
    forfeited = [
        (to_checksum_address(e.args["party"]), int(e.args["amount"]))
        for e in record.events
        if e.name == "RewardForfeited"
    ]
    assert forfeited and forfeited == [(p.address, a) for p, a in zip(fed.parties, due.forfeited, strict=True) if a > 0]


def test_forged_forfeit(copy: AuditInput, trained: Trained) -> None:
    """A ``RewardForfeited`` the payout rule does not produce (here: one for a party that finished) is a mismatch."""
    template = next(e for e in copy.events if e.name == "RewardAssigned")
    finisher = trained.fed.parties[0].address
    args = {"taskId": template.args["taskId"], "party": finisher, "amount": 1}
    copy.events.append(dataclasses.replace(template, name="RewardForfeited", args=args, log_index=10**6))
    m = audit_events(copy).mismatch
    assert m is not None and m.field.startswith("payout #") and m.party == finisher
    assert m.expected is None and m.recorded == ("RewardForfeited", finisher, 1)


def test_payout_includes_top_up(record: AuditInput) -> None:
    """The payouts add up to the deposit plus every fund() top-up (the remainder goes to the requester)."""
    total = sum(int(e.args["amount"]) for e in record.events if e.name == "RewardAssigned")
    funded = sum(int(e.args["amount"]) for e in record.events if e.name == "TaskFunded")
    assert total == REWARD + funded


def test_submit_call_found_inside_relayed_calldata(record: AuditInput, trained: Trained) -> None:
    """A relayed request carries the call (with the signer appended, ERC-2771) inside an outer call's bytes."""
    call = next(iter(record.calls.values()))[0]
    abi = next(i for i in trained.client.artifacts["FGBDTChain"].abi if i.get("name") == "submitHistograms")
    types = [canonical_type(i) for i in abi["inputs"]]
    selector = keccak(text=f"submitHistograms({','.join(types)})")[:4]
    endorsements = [(s, c.g, c.h, c.n) for s, c in zip(call.signatures, call.credits, strict=True)]
    inner = selector + abi_encode(types, [call.task_id, call.tree, call.level, list(call.data), endorsements])
    outer = keccak(text="execute(bytes)")[:4] + abi_encode(["bytes"], [inner + b"\x11" * 20])
    assert find_submit_calls(outer, selector, types) == [call]
    assert isinstance(call, SubmitCall) and find_submit_calls(b"\x00" * 8, selector, types) == []


def test_relayed_submissions_are_audited(trained: Trained, record: AuditInput) -> None:
    """Votes and endorsed histograms relayed through the ERC-2771 forwarder: the transaction is the relayer's call of
    ``execute``, yet the audit finds the endorsements inside it and credits the party named by the events."""
    if not trained.relayed_txs:
        pytest.skip("this build of FGBDTChain has no trusted forwarder")
    relayed = {h.lower().removeprefix("0x") for h in trained.relayed_txs}
    party = trained.fed.parties[0].address
    subs = [e for e in record.events if e.name == "HistogramsSubmitted" and _txkey(e.tx_hash) in relayed]
    assert subs and all(to_checksum_address(e.args["party"]) == party for e in subs)
    for e in subs:
        tx = trained.client.w3.eth.get_transaction(e.tx_hash)  # type: ignore[arg-type]
        assert tx["from"] != party and tx["to"] != trained.fed.task.address  # really relayed
        assert len(record.calls[_txkey(e.tx_hash)]) == 1
    assert audit_events(record).ok


def _txkey(tx_hash: str) -> str:
    return tx_hash.lower().removeprefix("0x")


def test_tampered_psd(copy: AuditInput) -> None:
    ev = _replace_event(copy, lambda e: e.name == "JoinRequested", lambda a: a.update(psd=bytes(a["psd"]) + b"!"))
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "PSD hash (keccak of the PSD)"
    assert m.party == to_checksum_address(ev.args["party"])


def test_decoy_call_in_the_same_transaction(copy: AuditInput) -> None:
    """Bytes in a wrapper's input that decode as the same submission with a bad endorsement set do not hide the
    call that carried the valid set; a transaction with only bad sets is reported."""
    _, key = _first_submission(copy)
    call = copy.calls[key][0]
    decoy = _endorsed(call, call.signatures[:1], call.credits[:1])
    copy.calls[key] = [decoy, call]
    assert audit_events(copy).ok
    copy.calls[key] = [decoy]
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "endorsements (quorum)"


# ------------------------------------------------------------------------------------------------ the exact rules


def test_tampered_credit_is_caught(copy: AuditInput) -> None:
    """The credit the contract applied is the least its endorsements attest: a different record is a mismatch."""
    ev = _replace_event(
        copy,
        lambda e: e.name == "HistogramsSubmitted" and int(e.args["level"]) == 0,
        lambda a: a.update(credit=[a["credit"][0] + 1, a["credit"][1], a["credit"][2]]),
    )
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "credit (least of the endorsements')"
    assert m.party == to_checksum_address(ev.args["party"])


def test_a_vote_from_a_party_out_of_the_task_is_caught(copy: AuditInput, trained: Trained) -> None:
    """Party 1 sent no histograms at the first level, so its vote at the second breaks continuity."""
    silent = trained.fed.parties[1].address
    template = next(
        e for e in copy.events if e.name == "VotesSubmitted" and (int(e.args["tree"]), int(e.args["level"])) == (0, 1)
    )
    args = {**template.args, "party": silent}
    copy.events.insert(copy.events.index(template), dataclasses.replace(template, args=args))
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "voter took part in the previous step (continuity)" and m.party == silent


def test_histograms_breaking_a_rule_are_caught_even_when_endorsed(copy: AuditInput, trained: Trained) -> None:
    """A submission whose data break an exact rule, re-committed and re-endorsed by the same parties: signatures and
    commitment check out, the rule does not."""
    ev, key = _first_submission(copy)
    call = copy.calls[key][0]
    nbins = trained.cfg.bins + 1
    data = list(call.data)
    # one unit less hessian in the first bin holding rows, in both candidates: the totals stay equal, but at the
    # first tree every row's hessian is exactly 1/4
    width = 2 * nbins
    first = next(b for b in range(nbins) if data[4 * nbins + b] > 0)
    second = next(b for b in range(nbins) if data[5 * nbins + b] > 0)
    data[width + first] -= 1
    data[width + nbins + second] -= 1
    party = _reendorse(copy, trained, ev, key, data)
    m = audit_events(copy).mismatch
    assert m is not None and m.field == "exact histogram rules (the contract would revert)"
    assert m.party == party and "FirstTreeLabels" in str(m.recorded)


def _reendorse(copy: AuditInput, trained: Trained, ev: Event, key: str, data: list[int]) -> str:
    """Replaces a submission's data, re-committed and re-endorsed by the same number of other parties (a colluding
    quorum); returns the submitter."""
    call = copy.calls[key][0]
    nbins = trained.cfg.bins + 1
    blocks = [data[i : i + 6 * nbins] for i in range(0, len(data), 6 * nbins)]
    root = merkle_root([keccak(words(b)) for b in blocks])
    party = to_checksum_address(ev.args["party"])
    tree, level = int(ev.args["tree"]), int(ev.args["level"])
    keys = {p.address: p.key for p in trained.fed.parties}
    signers = [p for p in trained.fed.parties if p.address != party][: len(call.signatures)]
    digest = [
        endorsement_digest(copy.chain_id, copy.contract, copy.task_id, tree, level, party, root, credit)
        for credit in call.credits
    ]
    sigs = tuple(sign_endorsement(keys[s.address], d) for s, d in zip(signers, digest, strict=True))
    copy.calls[key] = [dataclasses.replace(call, data=tuple(data), signatures=sigs)]
    _replace_event(copy, lambda e: e is ev, lambda a: a.update(data=data, root=root))
    return party


def test_a_root_its_previous_tree_does_not_allow_is_caught_even_when_endorsed(
    copy: AuditInput, trained: Trained
) -> None:
    """The verifiers' carry rule (``ledger.spec.tree_carry``) replayed: a second tree's root with one phantom row in a
    bin of both candidates keeps every exact rule of the contract, but not the count the first tree left."""
    ev = next(
        e
        for e in copy.events
        if e.name == "HistogramsSubmitted" and (int(e.args["tree"]), int(e.args["level"])) == (1, 0)
    )
    key = _txkey(ev.tx_hash)
    nbins = trained.cfg.bins + 1
    data = [int(x) for x in copy.calls[key][0].data]
    data[4 * nbins] += 1
    data[5 * nbins] += 1
    party = _reendorse(copy, trained, ev, key, data)
    m = audit_events(copy).mismatch
    assert m is not None and m.party == party and (m.tree, m.level) == (1, 0)
    assert m.field.startswith("root totals within what the party's previous tree allows")
    assert "CarriedCountMismatch" in str(m.recorded)
