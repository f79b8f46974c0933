"""Training on chain with separate party processes: equal to the simulator, robust to greed, crashes and restarts."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from eth_account import Account

from bench.level_rounds import level_rounds, party_moments
from fgbdt_chain.deploy.cli import main as cli_main
from fgbdt_chain.deploy.requester import BlockClock, ChainSetup, Requester, run_task
from fgbdt_chain.ledger.audit.replay import audit_events, read_task
from fgbdt_chain.ledger.devnet.anvil import Anvil, start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.shapley_estimate import EXACT_MAX_PARTIES
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskContract
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.data.loaders import load_train_test
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare, run

pytestmark = [pytest.mark.chain, pytest.mark.slow]

PARAMS = TrainParams(trees=3, depth=3, bins=8, min_rows=5)
CONFIG = PrepConfig(parties=3, theta=0.8, seed=0, psd_max_rows=40, dp_noise="seeded")


LONGER = dataclasses.replace(PARAMS, trees=12)
"""For the tests that break something at tree 1: a level takes about 50 ms on chain, so 3 trees could end before a
poll every 0.2 s saw tree 1 and the break came."""


def _prep(csv: Path, config: PrepConfig = CONFIG, params: TrainParams = PARAMS) -> Prepared:
    train, test = load_train_test(csv, seed=0)
    return prepare(train, test, params, config)


def _setup(url: str, contract: str, workdir: Path, **kw: Any) -> ChainSetup:
    client = ChainClient.connect(url)
    requester = Account.create()
    client.fund(requester.address, 10**21)
    return ChainSetup(rpc=url, contract=contract, requester=requester, workdir=workdir, **kw)


def _to(task: TaskContract, tx_hash: str) -> str:
    return str(task.client.w3.eth.get_transaction(tx_hash)["to"])


@pytest.mark.parametrize(
    ("epsilon", "voted_trees"),
    [(math.inf, PARAMS.trees), (2.0, PARAMS.trees), (math.inf, 1)],
    ids=["public", "private", "switch"],
)
def test_chain_model_equals_simulate(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path, epsilon: float, voted_trees: int
) -> None:
    """The chain trains the simulator's model bit for bit, with the same votes and contributions; with differential
    privacy too, where the party processes draw the seeded noise the simulator draws
    (``node.privacy.accountant.noise_rng``)
    and the audit reports the guarantee; and with the candidate switch, where the first tree votes and the later
    trees draw their candidates with no vote round."""
    prep = _prep(toy_csv, dataclasses.replace(CONFIG, epsilon=epsilon))
    prep = dataclasses.replace(prep, params=dataclasses.replace(prep.params, voted_trees=voted_trees))
    report = run_task(prep, _setup(anvil_node.url, e2e_contract, tmp_path))
    sim_report, sim_model, sim = run(prep, "fvtree", keep_levels=True)
    assert sim_model is not None and sim is not None
    chain = model_from_chain(TaskContract.at(ChainClient.connect(anvil_node.url), e2e_contract), report["task"])
    assert chain.edges == sim_model.edges
    for t, (a, b) in enumerate(zip(chain.trees, sim_model.trees, strict=True)):
        got = {k: (v.feature, v.threshold, v.gain_fixed, v.value_fixed) for k, v in a.nodes.items()}
        want = {k: (v.feature, v.threshold, v.gain_fixed, v.value_fixed) for k, v in b.nodes.items()}
        assert got == want, f"tree {t} differs"
    assert chain.trees == sim_model.trees  # row counts too, a root leaf's included
    assert [c["total_fixed"] for c in report["contributions"]] == [str(t) for t in sim.total]
    assert report["test_error"] == sim_report["test_error"]
    assert report["rejected_histograms"] == [0, 0, 0]
    # every vote on chain is the simulator's vote
    task = TaskContract.at(ChainClient.connect(anvil_node.url), e2e_contract)
    parties = task.parties(report["task"])
    chain_votes = {
        (int(e.args["tree"]), int(e.args["level"]), parties.index(str(e.args["party"]))): [
            int(v) for v in e.args["votes"]
        ]
        for e in task.client.logs(task.contract, ["VotesSubmitted"], report["task"])
    }
    for rec in sim.levels:
        for i in range(CONFIG.parties):
            if rec.tree >= voted_trees:  # nobody votes on chain; the simulator's parties abstain
                assert (rec.tree, rec.level, i) not in chain_votes and set(rec.votes[i]) == {-1}
            else:
                assert chain_votes[(rec.tree, rec.level, i)] == rec.votes[i]
    # a voted tree after one that reached its last level by depth: every party's root ballot is sent with that last
    # level's resolution, before the root opens (one that lands after another party's resolution ended the tree
    # counts as the party's vote in the root's round, a race the mechanism tolerates)
    started = {
        (int(e.args["tree"]), int(e.args["level"])): (e.block_number, e.log_index)
        for e in task.client.logs(task.contract, ["LevelStarted"], report["task"])
    }
    roots_ahead = [t for t in range(1, min(voted_trees, PARAMS.trees)) if (t - 1, PARAMS.depth - 1) in started]
    assert len(roots_ahead) == min(voted_trees, PARAMS.trees) - 1  # the toy trees reach their depth
    before_root = 0
    for t in roots_ahead:
        root_votes = [
            (e.block_number, e.log_index)
            for e in task.client.logs(task.contract, ["VotesSubmitted"], report["task"])
            if (int(e.args["tree"]), int(e.args["level"])) == (t, 0)
        ]
        assert len(root_votes) == CONFIG.parties  # once each: none sent again in the root's round
        assert all(started[(t - 1, PARAMS.depth - 1)] < at for at in root_votes)
        before_root += sum(at < started[(t, 0)] for at in root_votes)
    assert before_root >= 1 or not roots_ahead
    # the ballots sent ahead came relayed (node.relay): in transactions to the forwarder, several in each
    ahead = [
        e
        for e in task.client.logs(task.contract, ["VotesSubmitted"], report["task"])
        if (int(e.args["tree"]), int(e.args["level"])) in started
        and (e.block_number, e.log_index) < started[(int(e.args["tree"]), int(e.args["level"]))]
    ]
    fwd = Forwarder.of(task).address
    if voted_trees > 0:
        relayed_in = {e.tx_hash for e in ahead}
        assert ahead and len(relayed_in) < len(ahead)
        assert all(_to(task, h) == fwd for h in relayed_in)
    # so did every party's histograms, and, once each relayer knew what a node costs, the resolutions that open levels
    submissions = task.client.logs(task.contract, ["HistogramsSubmitted"], report["task"])
    batches = {e.tx_hash for e in submissions}
    assert len(batches) < len(submissions) and all(_to(task, h) == fwd for h in batches)
    openings = task.client.logs(task.contract, ["LevelStarted"], report["task"])
    assert sum(_to(task, e.tx_hash) == fwd for e in openings) >= len(openings) // 2
    # every party logged when each level reached its rounds: each level but the last splits into them, none negative
    rounds = level_rounds(party_moments(sorted(tmp_path.glob("party-*.log"))))
    assert set(rounds) == set(started) - {max(started)}
    assert all(seconds >= 0 for level in rounds.values() for seconds in level.values())
    audit = audit_events(read_task(task.client, e2e_contract, report["task"]))
    assert audit.ok, audit.first_mismatch
    assert audit.counts.ahead_sets >= before_root
    assert (audit.privacy is None) == math.isinf(epsilon)
    if audit.privacy is not None:
        assert audit.privacy["epsilon"] == epsilon == report["privacy"]["epsilon"]
    # the report's chain counters, recounted from the raw transactions since the task's creation
    eth = task.client.w3.eth
    first = task.client.logs(task.contract, ["TaskCreated"], report["task"])[0].block_number
    raw = [
        len(eth.get_raw_transaction(h))
        for b in range(first, task.client.block_number + 1)
        for h in eth.get_block(b)["transactions"]
    ]
    assert report["tx_count"] == len(raw) and report["max_tx_bytes"] == max(raw)
    assert 0 < report["blocks"] <= report["tx_count"] and report["calldata_bytes"] < sum(raw)
    sent = task.client.logs(task.contract, ["HistogramsSubmitted"], report["task"])
    assert report["max_tx_gas"] >= max(int(eth.get_transaction_receipt(e.tx_hash)["gasUsed"]) for e in sent)
    assert report["fits_geth_pool"] and report["fits_30m_block"]  # the toy task's transactions are small


def test_a_task_above_the_exact_size_pays_the_simulators_estimates(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path
) -> None:
    """One party process more than the exact size: their split Shapley values are estimated on chain from the task
    seed (the hash of ``start``'s block, fixed by a later transaction), and the simulator given the same seed
    (``PrepConfig.shapley_seed``) trains the same model and the same contributions, bit for bit; the audit replays
    the task."""
    params = dataclasses.replace(PARAMS, trees=1, depth=2)
    prep = _prep(toy_csv, dataclasses.replace(CONFIG, parties=EXACT_MAX_PARTIES + 1), params)
    report = run_task(prep, _setup(anvil_node.url, e2e_contract, tmp_path))
    client = ChainClient.connect(anvil_node.url)
    task = TaskContract.at(client, e2e_contract)
    fixed = task.shapley_seed(report["task"])
    assert fixed is not None
    (started,) = client.logs(task.contract, ["TrainingStarted"], report["task"])
    assert fixed.seed_block == started.block_number < fixed.block_number  # start's own block, read after it
    seeded = dataclasses.replace(prep, config=dataclasses.replace(prep.config, shapley_seed=fixed.seed))
    _, sim_model, sim = run(seeded, "fvtree")
    assert sim_model is not None and sim is not None
    assert model_from_chain(task, report["task"]).trees == sim_model.trees
    assert [c["total_fixed"] for c in report["contributions"]] == [str(t) for t in sim.total]
    _, _, other = run(prep, "fvtree")  # another seed: other estimates
    assert other is not None and other.total != sim.total
    audit = audit_events(read_task(client, e2e_contract, report["task"]))
    assert audit.ok and audit.completed, audit.first_mismatch


def test_a_tree_that_stops_short_of_its_depth_sends_the_next_roots_ballots_ahead(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path
) -> None:
    """With many rows needed per side the toy trees stop at level 2 of depth 4 (no split there): each party, having
    computed from the level's submissions that nothing splits, sends the next root's ballot with that level's
    resolution, the chain counts it, and the model and every vote are still the simulator's."""
    params = dataclasses.replace(PARAMS, trees=3, depth=4, min_rows=600)
    prep = _prep(toy_csv, params=params)
    report = run_task(prep, _setup(anvil_node.url, e2e_contract, tmp_path))
    sim_report, sim_model, sim = run(prep, "fvtree", keep_levels=True)
    assert sim_model is not None and sim is not None
    task = TaskContract.at(ChainClient.connect(anvil_node.url), e2e_contract)
    assert model_from_chain(task, report["task"]).trees == sim_model.trees
    assert report["test_error"] == sim_report["test_error"]
    last = {rec.tree: rec.level for rec in sim.levels}
    assert all(level < params.depth - 1 for level in last.values())  # every tree stops short of its depth
    started = {
        (int(e.args["tree"]), int(e.args["level"])): (e.block_number, e.log_index)
        for e in task.client.logs(task.contract, ["LevelStarted"], report["task"])
    }
    parties = task.parties(report["task"])
    votes = task.client.logs(task.contract, ["VotesSubmitted"], report["task"])
    root_votes = {rec.tree: rec.votes for rec in sim.levels if rec.level == 0}
    ahead = 0
    for t in range(1, params.trees):
        roots = [e for e in votes if (int(e.args["tree"]), int(e.args["level"])) == (t, 0)]
        assert len(roots) == CONFIG.parties  # one each: none sent again in the root's round
        for e in roots:
            assert [int(v) for v in e.args["votes"]] == root_votes[t][parties.index(str(e.args["party"]))]
        ahead += sum(started[(t - 1, last[t - 1])] < (e.block_number, e.log_index) < started[(t, 0)] for e in roots)
    assert ahead >= 1
    audit = audit_events(read_task(task.client, e2e_contract, report["task"]))
    assert audit.ok and audit.completed, audit.first_mismatch
    assert audit.counts.ahead_sets >= ahead


@pytest.mark.parametrize(
    ("attack", "refusal"),
    [
        (Attack("gradients", 4.0), "the contract refuses these histograms"),  # the first tree's exact rules
        # phantom rows keep every bound past the first tree: the verifiers' carry rule sees them, read from the chain
        (Attack("counts", 2.0, start_tree=1), "the verifiers refuse these histograms: CarriedCountMismatch"),
    ],
    ids=["exact-rules", "verifiers-carry"],
)
def test_greedy_party_is_refused_and_earns_nothing_extra(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path, attack: Attack, refusal: str
) -> None:
    prep = _prep(toy_csv)
    greedy = run_task(prep, _setup(anvil_node.url, e2e_contract, tmp_path, greedy=1, attack=attack, step_blocks=24))
    _, _, honest = run(prep, "fvtree")
    sim_report, _, sim = run(prep, "fvtree", attacks={1: attack})
    assert honest is not None and sim is not None
    rejected = greedy["rejected_histograms"]
    assert rejected == [0, 1, 0]  # refused once, then out of the task
    contributions = [int(c["total_fixed"]) for c in greedy["contributions"]]
    assert contributions[1] < honest.total[1]  # stretching did not pay
    assert contributions == sim.total  # the simulator plays the same attack and refusal
    # paid on completion: the refused party forfeits, on chain as in simulate
    assert [c["finished"] for c in greedy["contributions"]] == sim.finished == [True, False, True]
    assert [c["share"] for c in greedy["contributions"]] == sim.shares() and sim.shares()[1] == 0.0
    assert int(greedy["contributions"][1]["owed_wei"]) == 0
    assert [(r.party, r.tree, r.level) for r in sim.refusals] == [(1, attack.start_tree, 0)]
    assert greedy["test_error"] == sim_report["test_error"] < 0.2  # the others trained a useful model without it
    log = (tmp_path / "party-1.log").read_text()
    assert refusal in log and "declining" in log
    # it stepped aside, so no level waited for its deadline; the audit accepts the decline and the exclusion
    client = ChainClient.connect(anvil_node.url)
    record = read_task(client, e2e_contract, greedy["task"])
    assert len([e for e in record.events if e.name == "HistogramsDeclined"]) == 1
    report = audit_events(record)
    assert report.ok, report.first_mismatch


def test_killed_party_resumes_from_chain_state(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path
) -> None:
    prep = _prep(toy_csv, params=LONGER)
    req = Requester(prep, _setup(anvil_node.url, e2e_contract, tmp_path, step_blocks=60))

    def kill_and_restart_party_2() -> None:
        req.procs[2].send_signal(signal.SIGKILL)
        req.procs[2].wait()
        req.restart_party(2)

    _train_breaking_at_tree_1(req, kill_and_restart_party_2)
    log = (tmp_path / "party-2.log").read_text()
    assert log.count("endorsement endpoint") == 2 and "already joined" in log
    # it listens where it joined (the others ask the endpoint on chain), so nobody waits out a deadline for it
    first, again = (
        line.split("endorsement endpoint ")[1].split(";")[0]
        for line in log.splitlines()
        if "endorsement endpoint" in line
    )
    assert first == again
    assert not any("declin" in p.read_text() for p in req.log_paths[:2])
    # it never tried to send a vote or histogram the chain already had (votes sent ahead may miss the level's opening,
    # a race the others' resolution can win: the party then votes as before)
    assert "vote not taken" not in log and "histograms not taken" not in log
    report = req.report(0.0)
    assert req.task.state(req.task_id).status == Status.COMPLETED
    assert report["test_error"] < 0.2
    _audited_and_simulates(req)


def test_training_survives_an_anvil_restart(toy_csv: Path, tmp_path: Path) -> None:
    state = tmp_path / "anvil-state.json"
    node = start_anvil(state=state)
    port = node.port
    try:
        client = ChainClient.connect(node.url)
        contract = TaskContract.deploy(client, client.new_account(10**22)).address
        prep = _prep(toy_csv, params=LONGER)
        req = Requester(prep, _setup(node.url, contract, tmp_path, step_blocks=60))

        def restart_anvil() -> None:
            nonlocal node
            node.stop()  # anvil writes its state on shutdown
            time.sleep(2.0)
            node = start_anvil(port=port, state=state)

        _train_breaking_at_tree_1(req, restart_anvil)
        logs = "".join(p.read_text() for p in req.log_paths)
        assert "chain unreachable" in logs and "chain reachable again" in logs
        assert req.task.state(req.task_id).status == Status.COMPLETED
        _audited_and_simulates(req)
    finally:
        node.stop()


def _audited_and_simulates(req: Requester) -> None:
    """Nothing lost to the fault: the audit replays the task OK to its completion, and the model is the simulator's."""
    audit = audit_events(read_task(req.client, req.task.address, req.task_id))
    assert audit.ok and audit.completed, audit.first_mismatch
    _, sim_model, _ = run(req.prep, "fvtree")
    assert sim_model is not None
    chain = model_from_chain(req.task, req.task_id)
    assert chain.edges == sim_model.edges and chain.trees == sim_model.trees


def _train_breaking_at_tree_1(req: Requester, breaking: Callable[[], None]) -> None:
    """Open, start and follow the task, with ``breaking`` called once tree 1 is reached; every party must end well,
    and is stopped either way."""
    try:
        req.open_task()
        with BlockClock(req.client, 0.25):
            req.launch_parties()
            req.approve_and_start()
            _wait(lambda: req.task.state(req.task_id).tree >= 1, 120)
            breaking()
            req.follow()
        assert req.wait_parties() == [0, 0, 0]
    finally:
        req.stop_parties()


def _wait(condition: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("condition not reached")
        time.sleep(0.2)


def test_a_regression_task_trains_on_chain_and_reads_back_as_regression(
    anvil_node: Anvil, e2e_contract: str, tmp_path: Path
) -> None:
    """A squared-error task: each party node reads its labels as real values (the task's loss, from its config on
    chain), and the model read back from the chain is a regression model, evaluated by RMSE. Before, a party node
    refused any label but 0/1 and the chain's model was read as binary. The trees are the simulator's bit for bit: a
    party's PSD splits the label over the task's label range from the chain (before, over [0, 1] whatever the task,
    so a regression task's w* and votes differed below the root). The labels are prices in the millions, which
    trained only once a task divided its labels by a power of two from its range (``label_scale``)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(3000, 5))
    # prices in dollars: beyond the 1.2e6 a row's fixed-point gradient carries, unless the task scales its labels
    y = np.round(1.5e6 + 2.5e5 * (3.0 * X[:, 0] - 2.0 * X[:, 1] + rng.normal(size=3000)))
    rows = (f"{yi:.0f}," + ",".join(f"{v:.6f}" for v in r) + "\n" for yi, r in zip(y, X, strict=True))
    csv = tmp_path / "reg.csv"
    csv.write_text("label,a,b,c,d,e\n" + "".join(rows))
    train, test = load_train_test(csv, seed=0, task="regression")
    prep = prepare(train, test, dataclasses.replace(PARAMS, objective="regression"), CONFIG)
    report = run_task(prep, _setup(anvil_node.url, e2e_contract, tmp_path))
    _, sim_model, _ = run(prep, "fvtree")
    assert sim_model is not None
    chain_model = model_from_chain(TaskContract.at(ChainClient.connect(anvil_node.url), e2e_contract), report["task"])
    assert chain_model.objective == "regression" and "test_error" not in report
    assert prep.label_range == (float(np.min(train.y)), float(np.max(train.y)))
    assert chain_model.trees == sim_model.trees and chain_model.label_scale == sim_model.label_scale == 2.0**23
    audit = audit_events(read_task(ChainClient.connect(anvil_node.url), e2e_contract, report["task"]))
    assert audit.ok and audit.completed, audit.first_mismatch  # the replay holds for a squared-error task too
    # it learned: below the raw score 0 it starts from (the protocol has no boost from the average)
    assert report["test_rmse"] < 0.8 * float(np.sqrt(np.mean(test.y**2)))


def test_fgbdt_train_runs_a_regression_task(anvil_node: Anvil, e2e_contract: str, tmp_path: Path) -> None:
    """``fgbdt train`` on a real-valued label, not only binary classification: the report
    gives the test RMSE and the saved model predicts in the labels' units (its label scale from the chain)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(900, 3))
    y = np.round(80.0 + 10.0 * X[:, 0] + rng.normal(size=900), 2)
    csv = tmp_path / "reg.csv"
    lines = (f"{v:.2f},{r[0]:.5f},{r[1]:.5f},{r[2]:.5f}\n" for v, r in zip(y, X, strict=True))
    csv.write_text("y,a,b,c\n" + "".join(lines))
    out, model_file = tmp_path / "report.json", tmp_path / "model.json"
    flags = ["--parties", "2", "--trees", "3", "--depth", "2", "--bins", "8", "--psd-max-rows", "40", "--quiet"]
    chain = ["--rpc", anvil_node.url, "--contract", e2e_contract, "--workdir", str(tmp_path / "w")]
    assert cli_main(["train", "--data", str(csv), *flags, *chain, "--json", str(out), "--model", str(model_file)]) == 0
    report = json.loads(out.read_text())
    model = Model.load(model_file)
    assert "test_error" not in report and 0 < report["test_rmse"] < float(np.sqrt(np.mean(y**2)))
    assert model.objective == "regression" and model.label_scale == 128.0  # labels from 45 to 105, most above 64


@pytest.mark.parametrize(("kind", "parties"), [("duplicate", 3), ("split", 4), ("clone", 4), ("fresh-clone", 4)])
def test_fgbdt_train_plays_a_data_attack_as_simulate_does(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path, kind: str, parties: int
) -> None:
    """The greedy party's shard holds its manipulated rows (``node.attacks.data``) before its node starts; nothing is
    refused, and the chain pays the shares the simulator computes for the same manipulation."""
    flags = ["--data", str(toy_csv), "--parties", "3", "--trees", "3", "--depth", "3", "--bins", "8", "--min-rows", "5"]
    flags += ["--psd-max-rows", "40", "--quiet", "--greedy", "1", "--attack", kind, "--inflate", "2"]
    chain = ["--rpc", anvil_node.url, "--contract", e2e_contract, "--workdir", str(tmp_path / "w")]
    on_chain, simulated = tmp_path / "chain.json", tmp_path / "sim.json"
    assert cli_main(["train", *flags, *chain, "--step-blocks", "24", "--json", str(on_chain)]) == 0
    assert cli_main(["simulate", *flags, "--no-baselines", "--json", str(simulated)]) == 0
    report, sim = json.loads(on_chain.read_text()), json.loads(simulated.read_text())
    assert report["parties"] == parties and report["rejected_histograms"] == [0] * parties
    assert report["manipulation"]["identities"] == sim["manipulation"]["identities"]
    assert [c["share"] for c in report["contributions"]] == [c["share"] for c in sim["contributions"]]
    assert report["manipulation"]["holder_share"] == sim["manipulation"]["holder_share"]
    shard_rows = {i: len(np.load(tmp_path / "w" / f"party-{i}.npz")["y"]) for i in range(parties)}
    assert [shard_rows[i] for i in range(parties)] == [pp["rows"] for pp in sim["per_party"]]
