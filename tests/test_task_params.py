"""One mapping of task parameters: the command line, the API and the party nodes read and write the same config."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from fgbdt_chain.api import models as m
from fgbdt_chain.api.service import config_of, parameters_of
from fgbdt_chain.ledger import reference as ref
from fgbdt_chain.ledger.task_params import TaskParameters
from fgbdt_chain.node.fvtree import TrainParams


def test_the_api_and_the_command_line_give_identical_configs() -> None:
    """Reals go through ``reference.to_fixed`` on both paths (the API used to truncate 0.07 where the CLI rounded)."""
    params = TrainParams(trees=7, depth=4, bins=12, learning_rate=0.07, lam=0.3, min_rows=9, alpha=0.25)
    protocol = {"min_parties": 3, "max_parties": 5, "step_blocks": 30, "refusal_rate": 3e-7, "overlap_threshold": 0.07}
    cli = params.task(**protocol).config()
    api = config_of(m.TaskParameters(**asdict(params.task(**protocol))))
    assert cli == api
    assert cli.learning_rate == ref.to_fixed(0.07) == 70000000000000008


@pytest.mark.parametrize(
    "task",
    [
        TaskParameters(),
        TaskParameters(hessian="count", tie_break="index", objective="regression", endorse="overlap", lam=0.0),
    ],
)
def test_parameters_round_trip_through_the_config(task: TaskParameters) -> None:
    assert TaskParameters.of(task.config()) == task
    out = parameters_of(task.config())
    assert asdict(TaskParameters(**out.model_dump())) == asdict(task)


def test_a_party_reads_the_gbdt_parameters_the_requester_wrote() -> None:
    params = TrainParams(trees=3, depth=5, learning_rate=0.3, lam=0.7, hessian="count", tie_break="index")
    read = TrainParams.of_task(TaskParameters.of(params.task().config()), delta=params.delta)
    assert read == params
    assert read.contract_params() == params.contract_params()
