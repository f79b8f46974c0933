"""``fgbdt simulate``: train one algorithm on simulated parties, with a progress bar and a summary table."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fgbdt_chain.deploy.attack_args import add_attack_arguments, attack_of, data_attack_of
from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.parameters import parameter
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.attacks.data import DataAttack, apply_to_dataset, manipulation_report
from fgbdt_chain.node.baselines.seed_systems import refusal
from fgbdt_chain.node.data.loaders import DataFormatError, Dataset, DataWarning, load_train_test
from fgbdt_chain.node.model.trees import slot_widths
from fgbdt_chain.node.privacy.accountant import NOISE_SOURCES, check_colluders, plan
from fgbdt_chain.node.privacy.binning import BINNING_METHODS
from fgbdt_chain.node.protocol.shapley_cost import shapley_seconds, slow_shapley_message
from fgbdt_chain.node.sim.algorithms import (
    ALGORITHMS,
    PROTOCOL,
    REGISTRY,
    SUMMARY_BASELINES,
    algorithm,
    budget_refusal,
)
from fgbdt_chain.node.sim.experiment import (
    Prepared,
    PrepConfig,
    check_label_range,
    declared_label_range,
    default_algorithm,
    default_shape,
    partition,
    prepare,
    privacy_of,
    run,
)
from fgbdt_chain.node.sim.random_split import DEFAULT_DEPTH as RANDOM_SPLIT_DEPTH
from fgbdt_chain.node.sim.random_split import DEFAULT_TREES as RANDOM_SPLIT_TREES
from fgbdt_chain.node.sim.random_split import TREE_FEATURES, splittable

TRAIN_TREES, TRAIN_DEPTH = 20, 5
"""``fgbdt train``'s and the demo's shape when none is given: on chain every level is a round of transactions, so
tasks that finish in minutes, smaller than the table's default (``ledger.spec.parameters``), which ``simulate``
trains."""

_DESTS = {"lam": "lam", "learning_rate": "lr", "refit_delta": "delta", "delta": "dp_delta"}
"""The ``args`` attribute of the parameters whose option is not named after them (``--lambda``, ``--lr``, ``--delta``,
``--dp-delta``)."""


def table_option(parser: argparse.ArgumentParser, name: str, **given: Any) -> None:
    """Add parameter ``name``'s option (``Parameter.cli``) with the table's type, choices, default and help
    (``ledger.spec.parameters``); ``given`` overrides any of them."""
    p = parameter(name)
    assert p.cli is not None, f"{name} has no command-line option"
    help_text = p.help if p.choices else f"{p.help} Range {p.range_text()}."
    kwargs: dict[str, Any] = {"dest": _DESTS.get(name, name), "default": p.default, "help": help_text}
    if p.choices:
        kwargs["choices"] = p.choices
    else:
        kwargs["type"] = p.kind
    parser.add_argument(p.cli, **{**kwargs, **given})


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The data, partition and GBDT options shared by ``simulate`` and the chain's ``train``."""
    parser.add_argument(
        "--data", required=True, help="training file (libsvm or CSV, plain or .gz, or .npz with X and y)"
    )
    parser.add_argument("--test", help="test file; default: a seeded 75/25 split of --data")
    parser.add_argument("--label-column", help="CSV label column (index or header name; default: first)")
    parser.add_argument("--drop-columns", default="", help="comma-separated CSV columns to ignore (e.g. an ID)")
    parser.add_argument("--task", choices=("auto", *ref.OBJECTIVES), default="auto")
    parser.add_argument("--parties", type=int, default=4, help="number of parties M")
    parser.add_argument("--theta", type=float, default=0.8, help="skew ratio theta (0.5 = balanced)")
    # None: the command's and algorithm's own (simulate: shape_defaults; train: its set_defaults)
    table_option(
        parser,
        "trees",
        default=None,
        help=f"{parameter('trees').help} Range {parameter('trees').range_text()}. Default: {TrainParams.trees} "
        f"(simulate with --algo randomsplit: {RANDOM_SPLIT_TREES}; train: {TRAIN_TREES}).",
    )
    table_option(
        parser,
        "depth",
        default=None,
        help=f"{parameter('depth').help} Range {parameter('depth').range_text()}. Default: {TrainParams.depth} "
        f"(simulate with --algo randomsplit: {RANDOM_SPLIT_DEPTH}; train: {TRAIN_DEPTH}).",
    )
    for name in ("bins", "learning_rate", "lam", "min_rows", "refit_delta", "alpha", "hessian", "tie_break"):
        table_option(parser, name)
    table_option(parser, "voted_trees")
    parser.add_argument("--binning", choices=BINNING_METHODS, default="dp", help="how the common bin edges are made")
    table_option(
        parser,
        "epsilon",
        help=f"{parameter('epsilon').help} Split and accounted in node/privacy/accountant.py.",
    )
    table_option(parser, "delta")
    for name in ("label_min", "label_max"):
        table_option(parser, name, help=parameter(name).help)
    parser.add_argument("--binning-epsilon", type=float, default=1.0, help="the bin sketch's epsilon without --epsilon")
    parser.add_argument("--psd-depth", type=int, default=8)
    parser.add_argument("--psd-max-rows", type=int, default=500)
    parser.add_argument(
        "--psd-epsilon", type=float, default=1.0, help="the PSD's epsilon without --epsilon (inf: no noise)"
    )
    parser.add_argument(
        "--psd-label-first",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every PSD splits the label at its root (default: on; see docs/how-it-works.md)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--shapley-seed",
        type=int,
        default=0,
        help="the task seed of the estimated split Shapley values above 12 parties (on chain: the ShapleySeedFixed "
        "event's seed), to reproduce a task's contributions",
    )
    table_option(parser, "refusal_rate")
    table_option(parser, "overlap_threshold")
    add_attack_arguments(parser)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "simulate",
        help="train with simulated parties in one process (no chain)",
        description="Train FV-tree or a baseline on simulated parties; the same math the contracts run.",
    )
    add_training_arguments(parser)
    parser.add_argument(
        "--algo",
        choices=ALGORITHMS,
        default=None,
        help="what to train (default: fvtree; with --epsilon, randomsplit, the private model: see docs/privacy.md): "
        + "; ".join(f"{a.name} ({a.summary})" for a in REGISTRY.values()),
    )
    parser.add_argument(
        "--tree-features",
        choices=TREE_FEATURES,
        default="auto",
        help="randomsplit: features a tree splits on (one: they take turns; all: any node any feature; auto: one "
        "under --epsilon when there are at least as many trees as features, else all)",
    )
    parser.add_argument(
        "--dp-colluders",
        type=int,
        default=None,
        help="randomsplit with --epsilon: how many other parties may pool their rows and noise against one party with "
        "its guarantee intact; the leaf sums are added by secure aggregation and each party adds its share of the "
        "noise (default: half of the others rounded down, at least one; parties - 1: each party's noise alone)",
    )
    parser.add_argument(
        "--dp-noise",
        choices=NOISE_SOURCES,
        default=None,
        help="where the privacy noise (and the secure sums' keys) come from: the operating system's entropy (the "
        "default with --epsilon) or seeded from --seed, an experiment that repeats (whoever knows the seed can remove "
        "the noise; the guarantee line says so)",
    )
    parser.add_argument(
        "--endorse",
        choices=("none", *ref.ENDORSE_RULES),
        default=parameter("endorse").default,
        help=f"{parameter('endorse').help} none: accept every histogram (no verifiers modelled).",
    )
    parser.add_argument(
        "--baselines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train LightGBM for the summary (default: on): standalone per party and centralized on the "
        "federation's bins, with its own binning of the raw values (lightgbm), and with all its defaults",
    )
    parser.add_argument("--threads", type=int, default=1, help="LightGBM threads for the baselines")
    parser.add_argument("--json", dest="json_out", help="write the report as JSON here")
    parser.add_argument("--model", dest="model_out", help="save the model as JSON here (federated algorithms)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=simulate)


def load_data(args: argparse.Namespace) -> tuple[Any, Any]:
    """Train and test sets from the command's data options, with user errors made readable.

    The loader's :class:`DataWarning` s (a dropped index column, a renamed unnamed column, ...) go to stderr as one
    ``fgbdt COMMAND: warning: ...`` line each, not as Python's two-line warning with a source location."""
    label: int | str | None = None
    if args.label_column is not None:
        label = int(args.label_column) if args.label_column.lstrip("-").isdigit() else args.label_column
    drop = [int(c) if c.lstrip("-").isdigit() else c for c in args.drop_columns.split(",") if c]
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DataWarning)
            return load_train_test(
                args.data, args.test, seed=args.seed, label_column=label, drop_columns=drop, task=args.task
            )
    except DataFormatError as exc:
        raise UserError(str(exc)) from exc
    except OSError as exc:
        raise UserError(f"cannot read data: {exc}") from exc
    finally:
        print_warnings(args, caught)


def print_warnings(args: argparse.Namespace, caught: list[warnings.WarningMessage]) -> None:
    """The data warnings as one stderr line each; other warnings are re-issued untouched (call it after leaving the
    ``catch_warnings`` block that recorded them, or they would be recorded again)."""
    for w in caught:
        if issubclass(w.category, DataWarning):
            print(f"fgbdt {getattr(args, 'command', None) or 'simulate'}: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def check_party_count(parties: int, algo: str = "fvtree", counted: str | None = None) -> None:
    """Refuse a federation the contract would not accept (``ledger.spec.reference.MAX_PARTIES``).

    Only the federated algorithms compute split Shapley values and model the contract, so the standalone and
    centralized LightGBM baselines take any M. ``counted`` names what makes the count when it is not ``--parties``
    alone (a data attack's identities)."""
    if parties < 1:
        raise UserError(f"--parties must be at least 1, got {parties}")
    if algorithm(algo).contributions and parties > ref.MAX_PARTIES:
        what = f"--parties {parties}" if counted is None else f"{counted} make {parties} parties"
        fewer = f"--parties {ref.MAX_PARTIES} or fewer" if counted is None else "fewer parties or identities"
        raise UserError(
            f"{what}: a federated task accepts at most {ref.MAX_PARTIES} parties (the contract's MAX_PARTIES); use "
            f"{fewer} (the LightGBM baselines --algo standalone/centralized/lightgbm/lightgbm-defaults take any M)"
        )


def warn_if_slow(args: argparse.Namespace, algo: str = "fvtree") -> float:
    """One stderr line with the estimated exact-Shapley seconds when above :data:`SLOW_SHAPLEY_SECONDS`.

    Printed before data is even read, so that a user can stop and pick a smaller run. Returns the estimate (0 for
    the LightGBM baselines, which compute no Shapley values)."""
    if not algorithm(algo).contributions:
        return 0.0
    message = slow_shapley_message(args.parties, args.trees, args.depth)
    if message:
        command = getattr(args, "command", None) or "simulate"
        print(f"fgbdt {command}: warning: {message}; fewer --parties, --trees or --depth run faster", file=sys.stderr)
    return shapley_seconds(args.parties, args.trees, args.depth)


def training_params(args: argparse.Namespace, objective: ref.ObjectiveName) -> TrainParams:
    try:
        return TrainParams(
            trees=args.trees,
            depth=args.depth,
            bins=args.bins,
            learning_rate=args.lr,
            lam=args.lam,
            min_rows=args.min_rows,
            delta=args.delta,
            alpha=args.alpha,
            hessian=args.hessian,
            objective=objective,
            tie_break=args.tie_break,
            voted_trees=args.voted_trees,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def check_shapley_seed(args: argparse.Namespace) -> None:
    """Refuse a ``--shapley-seed`` no task can have (the contract's seed is a uint256)."""
    if not 0 <= getattr(args, "shapley_seed", 0) < 2**256:
        raise UserError(f"--shapley-seed must be a uint256, got {args.shapley_seed}")


def prep_config(args: argparse.Namespace) -> PrepConfig:
    check_party_count(args.parties, getattr(args, "algo", "fvtree"))
    if not 0.0 <= args.theta <= 1.0:
        raise UserError(f"--theta must be in [0, 1], got {args.theta}")
    if not 0.0 < args.refusal_rate < 1.0:
        raise UserError(f"--refusal-rate must be in (0, 1), got {args.refusal_rate}")
    if args.greedy is not None and not 0 <= args.greedy < args.parties:
        raise UserError(f"--greedy must be a party index in [0, {args.parties})")
    if not args.epsilon > 0:
        raise UserError(f"--epsilon must be positive (inf: no privacy noise), got {args.epsilon}")
    if math.isfinite(args.epsilon) and not 0 < args.dp_delta < 1:
        raise UserError(f"--dp-delta must be in (0, 1), got {args.dp_delta}")
    label = getattr(args, "label_min", None), getattr(args, "label_max", None)
    if (label[0] is None) != (label[1] is None):
        raise UserError("--label-min and --label-max declare the label range together; give both")
    try:
        label_range = None if label[0] is None else declared_label_range(label)
    except ValueError as exc:
        raise UserError(f"--label-min/--label-max: {exc}") from exc
    check_shapley_seed(args)
    return PrepConfig(
        parties=args.parties,
        theta=args.theta,
        seed=args.seed,
        shapley_seed=getattr(args, "shapley_seed", 0),
        binning=args.binning,
        binning_epsilon=args.binning_epsilon,
        psd_depth=args.psd_depth,
        psd_max_rows=args.psd_max_rows,
        psd_epsilon=args.psd_epsilon,
        psd_label_first=args.psd_label_first,
        endorse=getattr(args, "endorse", "statistical"),
        refusal_rate=args.refusal_rate,
        overlap_threshold=args.overlap_threshold,
        epsilon=args.epsilon,
        dp_delta=args.dp_delta,
        tree_features=getattr(args, "tree_features", "auto"),
        colluders=getattr(args, "dp_colluders", None),
        dp_noise=getattr(args, "dp_noise", None),
        label_range=label_range,
    )


@dataclasses.dataclass(frozen=True)
class Manipulation:
    """The greedy party's data attack as played: the attack, the holder and the identities it joined as."""

    attack: DataAttack
    holder: int
    identities: list[int]

    def report(self, contributions: Any) -> dict[str, Any]:
        return manipulation_report(self.attack, self.holder, self.identities, contributions)


def prepare_parties(
    train: Dataset, test: Dataset, params: TrainParams, args: argparse.Namespace
) -> tuple[Prepared, Manipulation | None]:
    """``prepare`` over the command's partition, with the greedy party's rows manipulated first when the attack is a
    data attack (``node.attacks.data``): its bin sketch, PSD and histograms then come from the manipulated rows, and
    on chain its shard holds them. ``split`` adds parties after the last."""
    config = prep_config(args)
    data_attack = data_attack_of(args)
    if data_attack is None:
        return prepare(train, test, params, config), None
    names = len(data_attack.identities(args.parties, args.greedy))
    # refused before any manipulated row is made (a fresh-clone fits label models first)
    check_party_count(
        args.parties + names - 1,
        getattr(args, "algo", "fvtree"),
        f"--attack {data_attack.kind} --inflate {data_attack.factor:g}: the holder's {names} identities",
    )
    try:
        pooled, parts, identities = apply_to_dataset(train, partition(train, config), args.greedy, data_attack)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    prep = prepare(pooled, test, params, dataclasses.replace(config, parties=len(parts)), parts=parts)
    prep.given_parts = False  # theta and the feature skew made the parties; the attack changed only the holder's
    return prep, Manipulation(data_attack, args.greedy, identities)


def objective_of(y: Any, task: str = "auto") -> ref.ObjectiveName:
    """Binary when the loaded labels are {0, 1}, else regression; ``--task regression`` stays regression even on
    0/1 labels (the loader keeps them as numbers then)."""
    if task == "regression":
        return "regression"
    values = set(map(float, set(y.tolist())))
    return "binary" if values <= {0.0, 1.0} else "regression"


def shape_defaults(args: argparse.Namespace) -> None:
    """Fill what the user left unset with the defaults of ``node.sim.experiment``: the algorithm
    (``default_algorithm``: random splits under a budget, saying so on stderr) and its trees and depth
    (``default_shape``)."""
    if args.algo is None:
        args.algo = default_algorithm(args.epsilon)
        if args.algo == "randomsplit":
            print(
                "fgbdt simulate: note: with --epsilon and no --algo, simulate trains random-split trees with private "
                "leaves (--algo randomsplit), the measured best private model; they report no contributions "
                "(--algo fvtree: the protocol, whose per-level histograms carry much more noise)",
                file=sys.stderr,
            )
    trees, depth = default_shape(args.algo)
    if args.trees is None:
        args.trees = trees
    if args.depth is None:
        args.depth = depth


def note_private_releases(args: argparse.Namespace, command: str = "simulate") -> None:
    """One stderr line before a private FV-tree task: how often each party releases its histograms and the noise
    that costs per bin, so that a user sees why the model may be poor before waiting for it (on chain, where the
    random splits do not run, before minutes of transactions)."""
    if algorithm(args.algo).privacy != PROTOCOL or not math.isfinite(args.epsilon) or args.epsilon <= 0:
        return
    try:
        p = plan(args.epsilon, args.dp_delta, args.trees, args.depth)
    except ValueError:
        return  # prep_config says what is wrong with the budget
    instead = (
        "--algo randomsplit releases once per tree"
        if command == "simulate"
        else "random splits, which release once per tree, run in simulate and the Python API only"
    )
    print(
        f"fgbdt {command}: note: each party releases its histograms {p.releases} times ({args.trees} trees x "
        f"{args.depth} levels), so at epsilon {args.epsilon:g} a bin's gradient sum carries noise of standard "
        f"deviation {p.noise_sd('g'):.3g} per party; {instead}",
        file=sys.stderr,
    )


def simulate(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    given_shape = {"trees": args.trees is not None, "depth": args.depth is not None}
    shape_defaults(args)
    # before any work: a federation no task on chain accepts is refused before its data is read
    check_party_count(args.parties, args.algo)
    check_shapley_seed(args)
    warn_if_slow(args, args.algo)
    spec = algorithm(args.algo)
    refused = budget_refusal(args.algo, args.epsilon)
    if refused:
        raise UserError(f"{refused}; leave --epsilon at inf")
    if args.tree_features != "auto" and args.algo != "randomsplit":
        raise UserError(f"--tree-features is for --algo randomsplit; {args.algo} chooses its splits' features")
    if args.dp_colluders is not None:
        if args.algo != "randomsplit" or not math.isfinite(args.epsilon):
            raise UserError(
                "--dp-colluders is for --algo randomsplit with --epsilon: FV-tree's verifiers read each party's "
                "histograms, so each party's noise alone carries its guarantee"
            )
        try:
            check_colluders(args.parties, args.dp_colluders)
        except ValueError as exc:
            raise UserError(f"--dp-{exc}") from exc
    if spec.own_shape and (given_shape["trees"] or given_shape["depth"]):
        raise UserError(f"--algo {args.algo} trains {spec.own_shape}; drop --trees/--depth")
    train, test = load_data(args)
    params = training_params(args, objective_of(train.y, args.task))
    try:
        check_label_range(args.algo, prep_config(args), params.objective, "--label-min and --label-max")
    except ValueError as exc:
        raise UserError(f"--epsilon on {train.name}: {exc}") from exc
    note_private_releases(args)
    why = refusal(args.algo, args.parties, train.n_features, params.trees)
    if why:
        raise UserError(why)
    try:
        prep, manipulation = prepare_parties(train, test, params, args)
        # the budget calibrated for the mechanisms this algorithm runs, before any training: a refusal names why
        privacy_of(args.algo, prep.config, prep.params)
        if spec.draws_edges:
            splittable(slot_widths(prep.edges))  # a data set without an edge gives random splits nothing to draw
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if args.model_out and spec.no_model:
        raise UserError(spec.no_model)
    reports = []
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet,
        transient=False,
    ) as bar:
        task = bar.add_task(f"{args.algo} on {train.name}", total=params.trees)
        attack = attack_of(args, args.greedy) if args.greedy is not None else None
        report, model, _ = run(
            prep,
            args.algo,
            progress=lambda t: bar.update(task, completed=t + 1),
            with_standalone=args.baselines,
            threads=args.threads,
            attacks={args.greedy: attack} if attack is not None else None,
        )
        bar.update(task, completed=params.trees)
    if manipulation is not None:
        report["manipulation"] = manipulation.report(report.get("contributions"))
    reports.append(report)
    if args.baselines:
        # every cost in the summary and the JSON, so that none hides (node.sim.algorithms.SUMMARY_BASELINES)
        for algo in SUMMARY_BASELINES:
            if algo == args.algo:
                continue
            baseline, _, _ = run(prep, algo, threads=args.threads)
            report[algo.replace("-", "_")] = {
                k: baseline[k] for k in ("test_error", "test_auc", "test_rmse", "train_seconds") if k in baseline
            }
            reports.append(baseline)
    print_summary(Console(), report, reports)
    for target in (args.json_out, args.model_out):
        if target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2, allow_nan=True) + "\n")
    if args.model_out and model is not None:
        model.save(args.model_out)
    return 0


def privacy_line(privacy: dict[str, Any] | None, parties: int) -> str | None:
    """Under the summary of a private task: the guarantee each party got with the conditions it holds under, so
    that the number in the table is read with its price (None without a budget). The conditions: the neighbouring
    relation (one row of the party added or removed; a replaced row is both, group privacy), delta, whom it holds
    against (the coalition of other parties, the aggregator of the secure sums), what a party dropping out does,
    where the schema came from, and whether the noise was seeded (an experiment) or drawn from entropy."""
    if not privacy or not math.isfinite(privacy["epsilon"]):
        return None
    eps, delta = privacy["epsilon"], privacy["delta"]
    line = (
        f"privacy: each party ({eps:g}, {delta:g})-DP for all it releases (accounted "
        f"{privacy['accounted_epsilon']:.4g}), datasets neighbouring by one row of the party added or removed "
        f"(a replaced row: ({2 * eps:g}, {(1 + math.exp(eps)) * delta:.3g})-DP by group privacy)"
    )
    if "colluders" not in privacy:  # FV-tree: every party's histograms are read one by one
        line += "; its own noise carries it, against all other parties and any reader, whoever pools what"
    else:
        others = parties - 1
        if privacy["colluders"] == others:
            line += f"; its own noise carries it, against all {others} other parties"
        else:
            line += (
                f"; against any {privacy['colluders']} of the {others} other parties pooling their views "
                f"(if all {others} pool: epsilon {privacy['all_others_epsilon']:.3g})"
            )
        line += (
            f"; against the aggregator epsilon {eps:g} (it reads masked vectors and their sum only); a party that "
            "drops out of a secure sum is recovered from a majority of the others' shares of its key (Bonawitz et "
            "al.) and takes no further part; with fewer than a majority left the task stops"
        )
    line += f"; ranges and integer flags: {privacy.get('schema', 'declared')}"
    if privacy.get("noise", "entropy") == "seeded":
        line += "; noise and secure-sum keys seeded by --seed (experiment): whoever knows the seed removes the noise"
    else:
        line += "; noise and secure-sum keys from the operating system's entropy"
    return line


def print_summary(console: Console, report: dict[str, Any], reports: list[dict[str, Any]]) -> None:
    metric = "test_error" if "test_error" in report else "test_rmse"
    one_feature = report["params"].get("tree_features") == "one"  # node.random_split: a leaf per bin, no depth
    shape = "one feature each, a leaf per bin" if one_feature else f"depth {report['depth'] or '-'}"
    table = Table(
        title=f"{report['dataset']}: M={report['parties']}, theta={report['theta']}, "
        f"{report['trees']} trees, {shape}, {report['bins']} bins, seed {report['seed']}"
    )
    for col in ("model", metric, "AUC", "train s", "KiB/party/tree"):
        table.add_column(col, justify="right" if col != "model" else "left")
    for r in reports:
        comm = r.get("comm_bytes_per_party_per_tree")
        table.add_row(
            REGISTRY[r["algo"]].summary_label or r["algo"],
            f"{r[metric]:.4f}",
            f"{r['test_auc']:.4f}" if "test_auc" in r else "-",
            f"{r['train_seconds']:.2f}",
            f"{sum(comm) / len(comm) / 1024:.1f}" if comm else "-",
        )
    for pp in report["per_party"]:
        key = f"standalone_{metric}"
        if key in pp:
            table.add_row(
                f"standalone party {pp['party']} ({pp['rows']} rows)",
                f"{pp[key]:.4f}",
                f"{pp.get('standalone_test_auc', math.nan):.4f}",
                "-",
                "-",
            )
    console.print(table)
    guarantee = privacy_line(report.get("privacy"), report["parties"])
    if guarantee:
        console.print(guarantee)
    if "contributions" in report:
        ct = Table(title="contributions (split Shapley phi + alpha * voting kappa)")
        for col in ("party", "rows", "phi", "kappa", "total", "share"):
            ct.add_column(col, justify="right")
        for c, pp in zip(report["contributions"], report["per_party"], strict=True):
            ct.add_row(
                str(c["party"]),
                str(pp["rows"]),
                f"{c['phi']:.3f}",
                f"{c['kappa']:.3f}",
                f"{c['total']:.3f}",
                f"{c['share']:.3f}",
            )
        console.print(ct)
    manipulated = report.get("manipulation")
    if manipulated and "holder_share" in manipulated:
        console.print(
            f"party {manipulated['holder']} played {manipulated['kind']} x{manipulated['factor']:g} as parties "
            f"{', '.join(map(str, manipulated['identities']))}: combined share {manipulated['holder_share']:.3f}"
        )
    for r in report.get("endorsement", {}).get("refusals", []):
        console.print(f"party {r['party']} out from tree {r['tree']} level {r['level']}: {r['reason']}")
