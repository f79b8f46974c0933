"""One table of task parameters: every surface that takes them has the table's defaults, ranges and names."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
from pydantic import ValidationError

from fgbdt_chain.api import models as m
from fgbdt_chain.api.service import config_of, parameters_of
from fgbdt_chain.deploy.cli import build_parser
from fgbdt_chain.deploy.cmd_simulate import TRAIN_DEPTH, TRAIN_TREES, prep_config, shape_defaults, training_params
from fgbdt_chain.ledger.spec import fixed_point, modes
from fgbdt_chain.ledger.spec import parameters as P
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import TaskConfig, TaskParameters
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.model import trees
from fgbdt_chain.node.protocol import endorsement
from fgbdt_chain.node.sim import fvtree
from fgbdt_chain.node.sim.engine import PARAMS, parse_params
from fgbdt_chain.node.sim.experiment import PrepConfig
from fgbdt_chain.node.sim.sklearn import FGBDTClassifier, FGBDTRegressor

ROOT = Path(__file__).resolve().parents[3]

TRAIN_FIELDS = {
    "trees": "trees",
    "depth": "depth",
    "bins": "bins",
    "learning_rate": "learning_rate",
    "lam": "lam",
    "min_rows": "min_rows",
    "refit_delta": "delta",
    "alpha": "alpha",
    "hessian": "hessian",
    "objective": "objective",
    "tie_break": "tie_break",
    "voted_trees": "voted_trees",
}
"""Each ``TrainParams`` field by the table's name (the refit degree is ``delta`` there)."""

CLI_DESTS = {"lam": "lam", "learning_rate": "lr", "refit_delta": "delta", "delta": "dp_delta"}
"""The ``argparse`` attribute of each parameter whose option is not named after it."""

PREP_FIELDS = {
    "endorse": "endorse",
    "refusal_rate": "refusal_rate",
    "overlap_threshold": "overlap_threshold",
    "quorum_num": "quorum_num",
    "quorum_den": "quorum_den",
    "epsilon": "epsilon",
    "delta": "dp_delta",
}
"""Each protocol parameter's ``PrepConfig`` field (what the simulator models of the task)."""


def test_the_defaults_are_the_simulators_documented_shape() -> None:
    """100 trees of depth 6, lambda 0.1, 20 rows per leaf, alpha 1: the shape whose accuracy the benchmarks page
    reports."""
    got = {name: P.default(name) for name in ("trees", "depth", "lam", "learning_rate", "min_rows", "alpha", "bins")}
    assert got == {"trees": 100, "depth": 6, "lam": 0.1, "learning_rate": 0.1, "min_rows": 20, "alpha": 1.0, "bins": 16}
    assert (P.DEFAULT_TREES, P.DEFAULT_DEPTH) == (100, 6)


def test_the_task_and_its_config_have_the_tables_defaults() -> None:
    task = TaskParameters()
    for p in P.PARAMETERS:
        if p.config is not None:
            assert getattr(task, p.name) == p.default, p.name
    cfg = task.config()
    assert cfg == TaskConfig()
    for p in P.PARAMETERS:
        if p.config is not None and p.name not in ("voted_trees", "epsilon", "delta", "label_min", "label_max"):
            assert getattr(cfg, p.config) == p.encode(p.default), p.name
    assert (cfg.epsilon, cfg.delta, cfg.label_min, cfg.label_max) == (0, 0, 0, ref.ONE)  # no privacy, binary
    assert TaskParameters.of(cfg) == task  # decoded back: the same defaults


def test_the_simulator_and_the_parties_have_the_tables_defaults() -> None:
    params = TrainParams()
    for name, field in TRAIN_FIELDS.items():
        assert getattr(params, field) == P.default(name), name
    assert TrainParams.of_task(TaskParameters()) == params  # a party of a default task trains the same
    prep = PrepConfig()
    for name, field in PREP_FIELDS.items():
        assert getattr(prep, field) == P.default(name), name
    assert (P.default("quorum_num"), P.default("quorum_den")) == fvtree.QUORUM


def test_the_rest_api_has_the_tables_defaults_and_ranges() -> None:
    request = m.TaskParameters()
    for p in P.PARAMETERS:
        if p.config is None:
            continue
        got = getattr(request, p.name)
        want = None if p.name == "epsilon" else p.default  # JSON has no inf: null is no privacy
        assert got == want, p.name
        field = m.TaskParameters.model_fields[p.name]
        assert field.description is not None and p.help in field.description
    assert config_of(request) == TaskConfig()
    assert parameters_of(TaskConfig()).model_dump() == {**request.model_dump(), "epsilon": None}
    for name in ("trees", "depth", "bins", "min_rows", "alpha", "refusal_rate", "lam", "learning_rate", "delta"):
        p = P.parameter(name)
        if p.minimum is not None:
            with pytest.raises(ValidationError, match=name):
                m.TaskParameters(**{name: p.minimum - (0 if p.min_open else 1)})
        if p.maximum is not None:
            with pytest.raises(ValidationError, match=name):
                m.TaskParameters(**{name: p.maximum + (0 if p.max_open else 1)})
            if not p.max_open:
                # the most bins fit a transaction's node resolution only with few parties (tx_size)
                few = {"max_parties": 2} if name == "bins" else {}
                assert getattr(m.TaskParameters(**{name: p.maximum}, **few), name) == p.maximum


def test_the_command_lines_have_the_tables_defaults() -> None:
    """``simulate`` fills trees and depth from the table; ``train`` trains its explicit smaller shape on chain, with
    every other default the table's."""
    simulate = build_parser("simulate").parse_args(["simulate", "--data", "rows.csv"])
    shape_defaults(simulate)
    assert training_params(simulate, "binary") == TrainParams()
    train = build_parser("train").parse_args(["train", "--data", "rows.csv"])
    assert (train.trees, train.depth) == (TRAIN_TREES, TRAIN_DEPTH) < (P.DEFAULT_TREES, P.DEFAULT_DEPTH)
    assert training_params(train, "binary") == TrainParams(trees=TRAIN_TREES, depth=TRAIN_DEPTH)
    for p in P.PARAMETERS:
        if p.cli is None or p.name in ("trees", "depth"):
            continue
        dest = CLI_DESTS.get(p.name, p.name)
        assert getattr(train, dest) == p.default, p.name
        if p.name != "step_blocks":  # the chain's only: simulate has no deadlines
            assert getattr(simulate, dest) == p.default, p.name


def test_the_python_api_and_the_estimators_have_the_tables_defaults() -> None:
    settings = parse_params({})
    assert settings.train_params() == TrainParams()
    assert settings.prep_config(4) == PrepConfig(parties=4)
    for estimator, objective in ((FGBDTClassifier(), "binary"), (FGBDTRegressor(), "regression")):
        given = parse_params(estimator._train_params())
        assert given.train_params() == TrainParams(objective=objective)
        assert given.prep_config(4) == PrepConfig(parties=4)


def test_one_depth_limit_the_contracts() -> None:
    """The contract's ``MAX_DEPTH`` (a level's open nodes fit one 256-bit mask) bounds every surface alike."""
    sources = "\n".join(p.read_text() for p in sorted((ROOT / "contracts").glob("*.sol")))
    assert [int(v) for v in re.findall(r"\bMAX_DEPTH\s*=\s*(\d+)", sources)] == [P.MAX_DEPTH] == [8]
    assert [int(v) for v in re.findall(r"\bMAX_PARTIES\s*=\s*(\d+)", sources)] == [P.MAX_PARTIES]
    assert P.parameter("depth").maximum == P.MAX_DEPTH == trees.MAX_DEPTH
    TrainParams(depth=P.MAX_DEPTH)
    with pytest.raises(ValueError, match=r"depth must be in \[1, 8\], got 9"):
        TrainParams(depth=P.MAX_DEPTH + 1)
    with pytest.raises(ValidationError, match="depth"):
        m.TaskParameters(depth=P.MAX_DEPTH + 1)
    with pytest.raises(ValueError, match="depth must be in"):
        parse_params({"max_depth": P.MAX_DEPTH + 1}).train_params()
    deep = trees.Tree({1: trees.Node.leaf(0, 1), 1 << (P.MAX_DEPTH + 1): trees.Node.leaf(0, 1)})
    with pytest.raises(trees.ModelFormatError, match="deeper than the maximum depth 8"):
        deep.validate(1, [[0.5]])


def test_the_config_fields_are_the_contracts() -> None:
    """Every ``Config`` field of the table is a ``TaskConfig`` field, named as the contract's struct names it, and
    every ``TaskConfig`` field has its parameter."""
    doc = json.loads((ROOT / "ledger" / "artifacts" / "contracts.json").read_text())
    create = next(f for f in doc["contracts"]["FGBDTChain"]["abi"] if f.get("name") == "createTask")
    struct = [c["name"] for c in create["inputs"][0]["components"]]
    config = [p for p in P.PARAMETERS if p.config is not None]
    assert [p.contract_field for p in config] == struct
    assert [p.config for p in config] == list(TaskConfig.__dataclass_fields__)


@pytest.mark.parametrize("p", [p for p in P.PARAMETERS if p.config is not None], ids=lambda p: p.name)
def test_every_encoding_round_trips(p: P.Parameter) -> None:
    values: list[Any] = list(p.choices) or [v for v in (p.default, 0.07, 3) if v is not None and math.isfinite(v)]
    for value in values:
        if p.kind is int:
            value = int(value)
        assert p.decode(p.encode(value)) == value
    if p.encoding == "fixed":
        assert p.encode(0.07) == ref.to_fixed(0.07) == 70000000000000008  # rounded, never truncated
    if p.encoding == "mode":
        assert {p.encode(c) for c in p.choices} == set(range(len(p.choices)))


def test_each_mode_name_is_written_once() -> None:
    """The API's request and response types are the modes' own aliases, and the reference names the same tables."""
    fields = m.TaskParameters.model_fields
    assert fields["hessian"].annotation == modes.HessianModeName
    assert fields["tie_break"].annotation == modes.TieRuleName
    assert fields["objective"].annotation == modes.ObjectiveName
    assert fields["endorse"].annotation == modes.EndorseRuleName
    assert m.ParametersOut.model_fields["objective"].annotation == modes.ObjectiveName
    for names, codes in (
        (modes.HessianModeName, modes.HESSIAN_MODES),
        (modes.TieRuleName, modes.TIE_RULES),
        (modes.ObjectiveName, modes.OBJECTIVES),
        (modes.EndorseRuleName, modes.ENDORSE_RULES),
    ):
        assert set(get_args(names)) == set(codes)
    assert ref.TIE_RULES is modes.TIE_RULES and ref.ENDORSE_RULES is modes.ENDORSE_RULES
    assert P.parameter("objective").choices == tuple(modes.OBJECTIVES) == trees.OBJECTIVES


def _written_out(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that write 10^18 out (``10**18``, ``1e18``, the integer) or define a ``to_fixed`` or
    ``from_fixed`` of one value; an assignment to ``ETHER`` (wei in one ether) is not fixed point."""
    ether = {
        id(n)
        for a in ast.walk(tree)
        if isinstance(a, ast.Assign)
        for t in a.targets
        if getattr(t, "id", "") == "ETHER"
        for n in ast.walk(a.value)
    }
    lines = []
    for node in ast.walk(tree):
        if id(node) in ether:
            continue
        power = (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Pow)
            and getattr(node.left, "value", None) == 10
            and getattr(node.right, "value", None) == 18
        )
        number = isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 10**18
        function = (
            isinstance(node, ast.FunctionDef) and node.name in ("to_fixed", "from_fixed") and len(node.args.args) == 1
        )
        if power or number or function:
            lines.append(node.lineno)
    return sorted(lines)


def test_fixed_point_is_defined_once() -> None:
    """``ONE``, ``to_fixed``, ``from_fixed`` and the truncating division live in ``ledger.spec.fixed_point``; no other
    module of the package writes 10^18 out again (the kernels read ``ONE_FLOAT``)."""
    assert ref.ONE is fixed_point.ONE and ref.to_fixed is fixed_point.to_fixed and ref.tdiv is fixed_point.tdiv
    assert trees.from_fixed is fixed_point.from_fixed and fixed_point.ONE_FLOAT == fixed_point.ONE
    assert fixed_point.tdiv(-7, 2) == -3 and fixed_point.from_fixed(fixed_point.to_fixed(0.3)) == 0.3
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("node", "ledger", "api", "deploy")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "fixed_point.py"
        for line in _written_out(ast.parse(path.read_text()))
    ]
    assert found == []
    assert _written_out(ast.parse("x = v * 1e18\ny = 10**18\ndef to_fixed(x): pass\nETHER = 10**18")) == [1, 2, 3]


def test_the_quorum_is_one_rule() -> None:
    """``ceil(num * (M - 1) / den)``, the contract's count, in one function the simulator, the party nodes and the
    audit call; by default two thirds of the other parties."""
    assert ref.endorsement_quorum is P.endorsement_quorum and endorsement.quorum is P.endorsement_quorum
    assert [P.endorsement_quorum(m) for m in range(1, 9)] == [0, 1, 2, 2, 3, 4, 4, 5]
    assert P.endorsement_quorum(7, 1, 2) == 3 and P.endorsement_quorum(5, 3, 3) == 4
    with pytest.raises(ValueError, match="fraction"):
        P.endorsement_quorum(4, 4, 3)
    fed = fvtree.Federation(
        [np.ones((4, 1), dtype=np.uint8)] * 4, [np.zeros(4)] * 4, TrainParams(trees=1, depth=1), algo="drawn"
    )
    assert fed.quorum == 2
    fed = fvtree.Federation(
        [np.ones((4, 1), dtype=np.uint8)] * 4,
        [np.zeros(4)] * 4,
        TrainParams(trees=1, depth=1),
        algo="drawn",
        quorum_fraction=(1, 1),
    )
    assert fed.quorum == 3
    inline = re.compile(r"quorum_?[Dd]en\W*\s*-\s*1|\(\s*2\s*\*\s*\(\w+\s*-\s*1\)")  # a ceiling written out again
    written = [
        str(path.relative_to(ROOT))
        for folder in ("node", "ledger", "api", "deploy")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if inline.search(path.read_text())
    ]
    assert written == []


def test_nothing_reads_the_parameters_through_the_simulator() -> None:
    """``TrainParams`` and the default shape live in the specification; the party node, the baselines, the command
    line and the benchmarks import them from there, not from ``node.sim.fvtree``."""
    moved = ("TrainParams", "task_voted_trees", "DEFAULT_TREES", "DEFAULT_DEPTH", "PAPER_TREES", "PAPER_DEPTH")
    importers = []
    for folder in ("node", "ledger", "api", "deploy", "bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "fgbdt_chain.node.sim.fvtree":
                    importers += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name in moved]
    assert importers == []


def test_the_docs_table_lists_every_parameter_with_its_default() -> None:
    table = P.markdown_table()
    lines = table.splitlines()
    assert lines[0] == "| name | type | range | default | unit | meaning |"
    assert len(lines) == 2 + len(P.PARAMETERS)
    for p, line in zip(P.PARAMETERS, lines[2:], strict=True):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        assert cells[0] == f"`{p.name}`" and len(cells) == 6
        assert cells[3] == f"`{p.default if isinstance(p.default, str) else repr(p.default)}`"
    assert "| `depth` | `int` | `[1, 8]` | `6` | levels |" in table
    assert "`(0, inf]`" in table  # epsilon: inf is no privacy


def test_the_label_range_is_the_tables_label_min_and_label_max_on_every_surface() -> None:
    """One declaration, the table's ``label_min``/``label_max``: the command line's options carry the table's help,
    ``train``'s keys and the estimators' arguments reach ``PrepConfig.label_range``, and the REST API's task (FV-tree
    on chain) names them when a regression task lacks them and refuses a budget on regression with its reason."""
    for name, option in (("label_min", "--label-min"), ("label_max", "--label-max")):
        assert P.parameter(name).cli == option
        for command in ("simulate", "train"):
            args = build_parser(command).parse_args([command, "--data", "r.csv", option, "2.5"])
            assert getattr(args, name) == 2.5
        assert P.parameter(name).help == next(p.help for p in PARAMS if p.name == name)
    simulate = build_parser("simulate").parse_args(
        ["simulate", "--data", "r.csv", "--label-min", "1", "--label-max", "29"]
    )
    shape_defaults(simulate)
    assert prep_config(simulate).label_range == (1.0, 29.0)
    assert parse_params({"label_min": 1, "label_max": 29}).prep_config(2).label_range == (1.0, 29.0)
    assert parse_params(FGBDTRegressor(label_min=1, label_max=29)._train_params()).prep_config(2).label_range == (1, 29)
    with pytest.raises(ValidationError, match=r"needs its label's range \(label_min, label_max\)"):
        m.TaskParameters(objective="regression", epsilon=1.0)
    with pytest.raises(ValidationError, match="trains FV-tree on chain"):
        m.TaskParameters(objective="regression", epsilon=1.0, label_min=1, label_max=29)
    task = m.TaskParameters(objective="regression", label_min=1, label_max=29)  # no budget: FV-tree on chain
    assert (config_of(task).label_min, config_of(task).label_max) == (fixed_point.to_fixed(1), fixed_point.to_fixed(29))
