"""Faults a deployment meets, each survived with nothing lost: played by ``bench.faults`` on a small task, with the
parties as separate processes on anvil (a block per transaction, the requester's block clock between).

A party killed mid-level and restarted, and the chain's node restarted, are played by
``tests/e2e/test_train_on_chain.py`` (``test_killed_party_resumes_from_chain_state``,
``test_training_survives_an_anvil_restart``); here: a party cut off from everyone, the requester's process killed
during the joins and again mid-training and taken up by ``fgbdt train --resume``, and a party that never comes back.
``bench.faults`` measures all five with their recovery times."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from bench.faults import ChainPlan, FaultPlan, play
from fgbdt_chain.deploy.cli import main as cli_main
from fgbdt_chain.deploy.deployment import write_key
from fgbdt_chain.ledger.audit.replay import audit_events, read_task
from fgbdt_chain.ledger.devnet.anvil import Anvil, start_anvil
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskContract
from fgbdt_chain.node.data.loaders import load_train_test
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.sim.experiment import Prepared, PrepConfig, prepare, run

pytestmark = [pytest.mark.chain, pytest.mark.slow]

PARAMS = TrainParams(trees=6, depth=2, bins=8, min_rows=5)
"""Six trees: a level takes a fraction of a second on an automining chain, and the fault must strike mid-task."""
CONFIG = PrepConfig(parties=4, theta=0.8, seed=0, psd_max_rows=40, dp_noise="seeded")
"""Four parties: with one gone, each of the others still has the quorum of endorsements (2 of its 3 others)."""


@pytest.fixture(scope="module")
def prepared(toy_csv: Path) -> tuple[Prepared, Model]:
    train, test = load_train_test(toy_csv, seed=0)
    prep = prepare(train, test, PARAMS, CONFIG)
    _, model, _ = run(prep, "fvtree")
    assert model is not None
    return prep, model


def _survived(row: dict[str, Any], excluded: list[int]) -> None:
    """Completed, audited OK, every wei of the deposit owed to someone and withdrawn, ``excluded`` left out."""
    assert row["completed"] and row["audit_ok"] and row["audit_completed"], row
    assert row["excluded"] == excluded, row
    assert row["deposit_owed"] and row["withdrawn_all"], row


def test_a_party_cut_off_from_everyone_comes_back_and_the_task_is_simulates(
    prepared: tuple[Prepared, Model], tmp_path: Path
) -> None:
    """15 s of a partition, longer than the others wait for an unreachable verifier (10 s) and for a relayer (4.5 s):
    its connections held, new ones waiting, within the step's deadline (400 blocks of at least 0.25 s)."""
    prep, model = prepared
    plan = FaultPlan("party-cut-off", party=1, tree=1, level=0, seconds=15.0)
    row = play(prep, plan, ChainPlan(block_time=None, step_blocks=400, timeout_seconds=300), tmp_path, model)
    _survived(row, [])
    assert row["model_equals_simulate"], row
    assert row["exit_codes"] == [0, 0, 0, 0]
    assert row["fault_seconds"] >= 15.0 and row["recovery_seconds"] is not None


TRAIN = ["--parties", "3", "--trees", "2", "--depth", "2", "--bins", "8", "--min-rows", "5", "--psd-max-rows", "40"]
"""The requester-restart task: small, as ``fgbdt train`` and ``fgbdt simulate`` are both given it."""


def _train(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``fgbdt train`` as a user starts it: its own process (and process group, to clean up after a failure)."""
    command = [sys.executable, "-m", "fgbdt_chain.deploy.cli", "train", *args]
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(what: str, done: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert proc.poll() is None, f"fgbdt train ended (code {proc.returncode}) before {what}: {log.read_text()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s: {log.read_text()}"
        time.sleep(0.05)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # the requester's process only: its parties run on, as on other hosts
    proc.wait()


def test_a_requester_killed_during_the_joins_and_mid_training_is_resumed_by_fgbdt_train_resume(
    toy_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fgbdt train``'s process killed (SIGKILL) once it approved a party and before it started training, then
    ``fgbdt train --resume`` killed in turn mid-training, then resumed again: the task completes, each party approved
    once and the deposit paid once, the audit replays it, and the model is ``fgbdt simulate``'s. Blocks every 0.5 s
    leave at least a block between two approvals to strike in."""
    anvil = start_anvil(block_time=0.5)
    groups: list[int] = []
    try:
        client = ChainClient.connect(anvil.url)
        task = TaskContract.at(client, TaskContract.deploy(client, client.new_account(10**22)).address)
        work, log = tmp_path / "w", tmp_path / "train.log"
        report_file, model_file, sim_file = tmp_path / "report.json", tmp_path / "model.json", tmp_path / "sim.json"
        args = ["--data", str(toy_csv), *TRAIN, "--rpc", anvil.url, "--contract", task.address, "--tick", "2"]
        args += ["--workdir", str(work), "--quiet", "--json", str(report_file), "--model", str(model_file)]

        def approvals() -> list[str]:
            return [str(e.args["party"]) for e in client.logs(task.contract, ["PartyApproved"], task_id(), 0)]

        def task_id() -> int:
            return int(json.loads((work / "task.json").read_text())["task"])

        first = _train(args, log)
        groups.append(first.pid)
        _wait("a task record", lambda: (work / "task.json").is_file(), first, log)
        _wait("an approval", lambda: len(approvals()) >= 1, first, log)
        _kill(first)
        assert task.state(task_id()).status == Status.OPEN  # killed during the joins
        struck_at = len(approvals())
        assert struck_at < 3

        second = _train([*args, "--resume"], log)
        groups.append(second.pid)
        _wait("training", lambda: task.state(task_id()).status == Status.TRAINING, second, log)
        _wait("tree 1", lambda: task.state(task_id()).tree >= 1, second, log)
        _kill(second)
        assert task.state(task_id()).status == Status.TRAINING  # killed mid-training

        third = _train([*args, "--resume"], log)
        groups.append(third.pid)
        assert third.wait(timeout=300) == 0, log.read_text()

        assert task.state(task_id()).status == Status.COMPLETED
        parties = task.parties(task_id())
        assert sorted(approvals()) == sorted(parties) and len(parties) == 3  # each approved once
        created = client.logs(task.contract, ["TaskCreated"], None, 0)
        assert len(created) == 1  # one task, one deposit
        report = json.loads(report_file.read_text())
        assert report["task"] == task_id() and json.loads((work / "report.json").read_text())["task"] == task_id()
        requester = json.loads((work / "task.json").read_text())["requester"]
        owed = [int(c["owed_wei"]) for c in report["contributions"]] + [task.owed(task_id(), requester)]
        assert sum(owed) == 10**18 and min(owed[:3]) > 0  # the 1 ETH deposit, paid out once (the rounding's back)
        audit = audit_events(read_task(client, task.address, task_id()))
        assert audit.ok and audit.completed, audit.first_mismatch
        assert cli_main(["simulate", "--data", str(toy_csv), *TRAIN, "--no-baselines", "--model", str(sim_file)]) == 0
        chain_model, sim_model = Model.load(model_file), Model.load(sim_file)
        assert chain_model.edges == sim_model.edges and chain_model.trees == sim_model.trees

        assert cli_main(["train", *args, "--resume"]) == 2
        assert "is completed: nothing to resume" in capsys.readouterr().err
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)  # whatever a failed run left: its fork server and parties
        anvil.stop()


def test_fgbdt_train_resume_names_what_it_cannot_take_up(
    anvil_node: Anvil, e2e_contract: str, toy_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A working folder with no task, and one whose task is on another contract, are refused by name."""
    chain = ["--data", str(toy_csv), *TRAIN, "--rpc", anvil_node.url, "--contract", e2e_contract, "--resume"]

    def refused(*more: str) -> str:
        assert cli_main(["train", *chain, *more]) == 2
        return capsys.readouterr().err

    assert "give it with --workdir" in refused()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert re.search(r"no task to resume in .*task\.json is missing", refused("--workdir", str(empty)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    client = ChainClient.connect(anvil_node.url)
    requester = Account.create()
    write_key(elsewhere / "requester.key", requester)
    record = {"task": 0, "contract": "0x" + "11" * 20, "chain_id": client.chain_id, "requester": requester.address}
    (elsewhere / "task.json").write_text(json.dumps({**record, "start_block": 0}))
    assert re.search(
        r"task 0 of contract 0x1111.* not of contract .*: give the chain", refused("--workdir", str(elsewhere))
    )


def test_a_party_that_never_comes_back_is_left_out_and_the_deposit_is_paid_out(
    prepared: tuple[Prepared, Model], tmp_path: Path
) -> None:
    """Killed at tree 1 and not started again: the step's deadline (20 blocks) passes without it, the contract
    excludes it, the others complete the task; the trees before it left are the simulator's, its share goes back to
    the requester, and every wei of the deposit is withdrawn."""
    prep, model = prepared
    plan = FaultPlan("party-lost", party=2, tree=1, level=0)
    row = play(prep, plan, ChainPlan(block_time=None, step_blocks=20, timeout_seconds=300), tmp_path, model)
    _survived(row, [2])
    assert row["trees_equal_simulate"] >= 1
    assert not row["model_equals_simulate"]  # trained on by three parties after it left
    owed = [int(w) for w in row["owed_wei"]]
    assert owed[2] == 0 and owed[-1] > 0  # the lost party forfeits; the requester gets its share back


def test_a_fault_plan_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="unknown fault 'party-eaten'"):
        FaultPlan("party-eaten")
    with pytest.raises(ValueError, match="non-negative"):
        dataclasses.replace(FaultPlan("party-cut-off"), seconds=-1.0)
