"""One mapping of task parameters: the command line, the API and the party nodes read and write the same config."""

from __future__ import annotations

import json
import math

import pytest

from fgbdt_chain.api import models as m
from fgbdt_chain.api.service import config_of, parameters_of, request_parameters
from fgbdt_chain.deploy.demo import task_request
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import TaskParameters, label_scale
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tx_size import TooWideForTransaction
from fgbdt_chain.node.privacy.accountant import plan


def test_the_api_and_the_command_line_give_identical_configs() -> None:
    """Reals go through ``reference.to_fixed`` on both paths (truncating 0.07 gives another integer than rounding)."""
    params = TrainParams(trees=7, depth=4, bins=12, learning_rate=0.07, lam=0.3, min_rows=9, alpha=0.25)
    protocol = {"min_parties": 3, "max_parties": 5, "step_blocks": 30, "refusal_rate": 3e-7, "overlap_threshold": 0.07}
    cli = params.task(**protocol).config()
    api = config_of(request_parameters(params.task(**protocol)))
    assert cli == api
    assert cli.learning_rate == ref.to_fixed(0.07) == 70000000000000008


@pytest.mark.parametrize(
    "task",
    [
        TaskParameters(),
        TaskParameters(
            hessian="count",
            tie_break="index",
            objective="regression",
            endorse="overlap",
            lam=0.0,
            label_min=-2.5,
            label_max=29.0,
        ),
        TaskParameters(epsilon=0.7, delta=1e-6),
        TaskParameters(voted_trees=0),
        TaskParameters(voted_trees=ref.ALL_TREES_VOTED),
    ],
)
def test_parameters_round_trip_through_the_config(task: TaskParameters) -> None:
    assert TaskParameters.of(task.config()) == task
    out = parameters_of(task.config())
    assert request_parameters(task).model_dump() == out.model_dump()


def test_a_task_states_its_label_range_where_the_loss_does_not_fix_it() -> None:
    """Every party's PSD splits the label over the task's range, so all must read the same one from the chain: a
    binary task's is [0, 1]; a regression task without one is refused before anything is sent, with the reason."""
    assert TaskParameters().config().label_max == ref.ONE
    with pytest.raises(ValueError, match="binary task's labels are 0 and 1"):
        TaskParameters(label_min=0.0, label_max=2.0).config()
    with pytest.raises(ValueError, match="regression task needs its label's range"):
        TaskParameters(objective="regression").config()
    with pytest.raises(ValueError, match="label_min <= label_max"):
        TaskParameters(objective="regression", label_min=3.0, label_max=1.0).config()
    with pytest.raises(ValueError, match="regression task needs its label's range"):
        m.TaskParameters(objective="regression", label_max=4.0)
    cfg = config_of(m.TaskParameters(objective="regression", label_min=1.0, label_max=29.0))
    assert (cfg.label_min, cfg.label_max) == (ref.ONE, 29 * ref.ONE)


@pytest.mark.parametrize(
    ("low", "high", "scale"),
    [
        (0.0, 1.0, 1.0),
        (2.0, 29.0, 32.0),
        (0.0, 32.0, 32.0),
        (0.0, 33.0, 64.0),
        (-5e6, 1e6, 2.0**23),
        (0.0, 0.0, 1.0),
        (1e-9, 3e-9, 2.0**-28),
    ],
)
def test_the_label_scale_is_the_power_of_two_at_or_above_the_largest(low: float, high: float, scale: float) -> None:
    assert label_scale(low, high) == scale
    assert TaskParameters(objective="regression", label_min=low, label_max=high).label_scale == scale
    if scale != 1.0 or high != 0.0:
        assert max(abs(low), abs(high)) <= scale < 2 * max(abs(low), abs(high))


def test_a_party_reads_the_gbdt_parameters_the_requester_wrote() -> None:
    params = TrainParams(
        trees=3, depth=5, learning_rate=0.3, lam=0.7, hessian="count", tie_break="index", voted_trees=2
    )
    read = TrainParams.of_task(TaskParameters.of(params.task().config()), delta=params.delta)
    assert read == params
    assert read.contract_params() == params.contract_params()


def test_a_private_task_through_the_api_gets_the_noise_floor_of_lambda_as_the_command_line() -> None:
    """``fgbdt train`` raises a private task's lambda to its noise floor (``PrivacyPlan.regularisation``) in
    ``prepare``; the API does the same to the same parameters, so both create the same config."""
    task = TaskParameters(trees=5, depth=3, lam=0.1, max_parties=4, min_parties=4, epsilon=1.0, delta=1e-5)
    floor = plan(1.0, 1e-5, 5, 3).regularisation(0.1, 4)
    cfg = config_of(request_parameters(task))
    assert floor > 1.0 and cfg.lam == ref.to_fixed(floor) and cfg.epsilon == ref.to_fixed(1.0)
    assert config_of(request_parameters(TaskParameters.of(cfg))) == cfg  # idempotent


@pytest.mark.parametrize("epsilon", [math.inf, 1.5], ids=["public", "private"])
def test_the_demo_posts_a_request_the_api_accepts(epsilon: float) -> None:
    """``fgbdt demo`` creates its task through the API: its body must pass the API's own validation (a public task's
    epsilon is inf in ``TaskParameters`` and null in the API) and map to the config the command line would send."""
    task = TrainParams(trees=3, depth=2).task(min_parties=2, max_parties=2, epsilon=epsilon)
    body = json.loads(json.dumps(task_request([0.0, -1.0], [1.0, 2.0], task), allow_nan=False))
    request = m.CreateTaskRequest.model_validate(body)
    assert request.parameters.epsilon == (None if math.isinf(epsilon) else epsilon)
    assert config_of(request.parameters) == config_of(request_parameters(task))


def test_a_task_whose_node_cannot_resolve_in_a_transaction_is_refused_by_every_surface() -> None:
    """The defaults fit at any depth; 64 parties at 16 bins do not, and the command line's path (``config``) and the
    API's request model both refuse them, naming what fits."""
    for depth in (1, 6, 8):
        TaskParameters(depth=depth).config()
    TaskParameters(max_parties=64, bins=8, depth=8).config()
    with pytest.raises(TooWideForTransaction, match="at most 8 bins at 64 parties or at most 36 parties at 16 bins"):
        TaskParameters(max_parties=64, bins=16, depth=8).config()
    with pytest.raises(ValueError, match="at most 36 parties at 16 bins"):
        m.TaskParameters(max_parties=64, bins=16, depth=8)
    assert m.TaskParameters(max_parties=64, bins=8, depth=8).max_parties == 64
