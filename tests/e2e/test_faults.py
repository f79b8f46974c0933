"""Faults a deployment meets, each survived with nothing lost: played by ``bench.faults`` on a small task, with the
parties as separate processes on anvil (a block per transaction, the requester's block clock between).

A party killed mid-level and restarted, and the chain's node restarted, are played by
``tests/e2e/test_train_on_chain.py`` (``test_killed_party_resumes_from_chain_state``,
``test_training_survives_an_anvil_restart``); here: a party cut off from everyone, the requester restarted while the
parties join, and a party that never comes back. ``bench.faults`` measures all five with their recovery times."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bench.faults import ChainPlan, FaultPlan, play
from fgbdt_chain.ledger.spec.train_params import TrainParams
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


def test_a_requester_restarted_during_the_joins_takes_the_task_up(
    prepared: tuple[Prepared, Model], tmp_path: Path
) -> None:
    """Half of the parties approved, the requester gone for 2 s, a new one reads the task and its working folder:
    the rest approved in party order, training started, the model the simulator's."""
    prep, model = prepared
    plan = FaultPlan("requester-restarted", seconds=2.0)
    row = play(prep, plan, ChainPlan(block_time=None, timeout_seconds=300), tmp_path, model)
    _survived(row, [])
    assert row["model_equals_simulate"], row
    assert row["exit_codes"] == [0, 0, 0, 0]


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
