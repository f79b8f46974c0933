"""``fgbdt train``: train on chain with one party node process per party, as the model requester."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from eth_account import Account
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.cmd_simulate import (
    TRAIN_DEPTH,
    TRAIN_TREES,
    add_training_arguments,
    attack_of,
    load_data,
    note_private_releases,
    objective_of,
    prepare_parties,
    table_option,
    training_params,
)
from fgbdt_chain.deploy.deployment import ChainTarget, add_chain_arguments, chain_target, read_key, write_key
from fgbdt_chain.deploy.party_forks import PartyForks, fork_available
from fgbdt_chain.deploy.requester import (
    ETHER,
    REQUESTER_KEY,
    ChainSetup,
    ResumeError,
    TaskRecord,
    resume_task,
    run_task,
)
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ChainRefused
from fgbdt_chain.ledger.spec.modes import ON_CHAIN_ALGORITHMS
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tx_size import TooWideForTransaction, check_resolution_fits
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.privacy.accountant import check_private_objective


def register(sub: Any) -> None:
    p = sub.add_parser("train", help="train on chain: requester plus one node process per party", description=__doc__)
    add_training_arguments(p)
    # on chain every level is a round of transactions: a shape that finishes in minutes (the demo's), smaller than
    # simulate's (ledger.spec.parameters.DEFAULT_TREES x DEFAULT_DEPTH); every other default is the table's
    p.set_defaults(trees=TRAIN_TREES, depth=TRAIN_DEPTH)
    add_chain_arguments(p)
    p.add_argument(
        "--algo",
        choices=ON_CHAIN_ALGORITHMS,
        default="fvtree",
        help="fvtree: the parties vote for each node's candidates in the first --voted-trees trees, the contract draws "
        "them from a public seed afterwards; drawn: every tree draws. simulate --algo X trains the same model",
    )
    p.add_argument("--key", help="requester's private key file (default: a fresh key, funded as the parties are)")
    p.add_argument(
        "--funder-key",
        help="file holding a funded key that pays the parties' (and a fresh requester's) ether: on a chain without "
        "unlocked accounts (default: the node's first unlocked account, as a devnet has)",
    )
    p.add_argument(
        "--party-fund",
        type=float,
        default=ChainSetup.party_fund_wei / ETHER,
        help="ether each party is given for its gas (default %(default)g)",
    )
    p.add_argument("--reward", type=float, default=1.0, help="reward deposited with the task, in ETH")
    table_option(p, "endorse")
    table_option(p, "step_blocks")
    p.add_argument("--tick", type=float, default=0.25, help="seconds between blocks of the devnet's block clock")
    p.add_argument(
        "--workdir",
        help="where the task's record, shards, keys and party logs go (default: a temporary folder); the parties "
        "run on should this command end early, and --resume takes their task up from here",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="take up the task --workdir records, after the requester's process ended before the task did: "
        "approve the parties not approved yet, start training if not started, follow it to the end and report. "
        "Give the chain and the data and training arguments of the run that opened it (and its --key, if it had "
        "one); no party is started, the task's own still run",
    )
    p.add_argument("--json", dest="json_out", help="write the report as JSON here")
    p.add_argument("--model", dest="model_out", help="save the model read back from the chain here")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=train)


def train(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    if args.binning != "dp":
        raise UserError(
            f"--binning {args.binning}: on chain the common bin edges are merged from the parties' private sketches "
            "(--binning dp, the default); the other methods are simulate's comparisons"
        )
    if args.resume and not args.workdir:
        raise UserError("--resume takes up the task of a working folder: give it with --workdir")
    if args.resume:
        if not Path(args.workdir).is_dir():
            raise UserError(f"--workdir {args.workdir}: no such folder, so no task to resume")
        try:
            TaskRecord.read(Path(args.workdir))  # before the data is read: a folder without a task fails at once
        except ResumeError as exc:
            raise UserError(str(exc)) from exc
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fgbdt-train-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # the party nodes' host loads a node (imports and compiled kernels, about 1.5 s of one core) while the data is
    # read and split and the chain is reached, instead of after the task is opened; a resumed requester starts none
    forks = PartyForks(workdir / "fork-server.log") if fork_available() and not args.resume else None
    done = False
    try:
        code = _train(args, console, workdir, forks)
        done = True
        return code
    finally:
        if forks is not None:
            forks.close()  # run_task closed it already, unless the command failed before it
        if not done and not args.workdir and not any(workdir.glob("party-*.log")):
            shutil.rmtree(workdir, ignore_errors=True)  # failed before any party ran: no logs worth keeping


def _train(args: argparse.Namespace, console: Console, workdir: Path, forks: PartyForks | None) -> int:
    train_set, test_set = load_data(args)
    params = training_params(args, objective_of(train_set.y))
    try:  # every node must resolve in one transaction a real network relays: refused before the chain is touched
        check_resolution_fits(args.parties, params.bins, params.depth)
    except TooWideForTransaction as exc:
        raise UserError(str(exc)) from exc
    try:  # on chain every task trains FV-tree, whose noise is calibrated to the logistic loss: refused before any work
        check_private_objective(args.epsilon, params.objective)
    except ValueError as exc:
        raise UserError(f"{exc}; private regression runs in fgbdt simulate with --label-min and --label-max") from exc
    note_private_releases(args, "train")
    try:
        prep, manipulation = prepare_parties(train_set, test_set, params, args)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    target = chain_target(args)
    try:
        client = ChainClient.connect(target.rpc_url)
    except OSError as exc:
        raise UserError(f"the chain at {target.rpc_url} does not answer (start one with `fgbdt devnet up`)") from exc
    funder = read_key(args.funder_key, "funder key") if args.funder_key else None
    client.funder = funder
    if args.key:
        requester = read_key(args.key, "requester key")
    elif args.resume:
        if not (workdir / REQUESTER_KEY).is_file():
            raise UserError(f"no {REQUESTER_KEY} in {workdir}: the run that opened the task had --key; give it again")
        requester = read_key(workdir / REQUESTER_KEY, "the working folder's requester key")
    else:
        requester = Account.create()
        write_key(workdir / REQUESTER_KEY, requester)  # the task's deposit and approvals are its: kept to resume
    if not args.key and not args.resume:
        try:
            client.fund(requester.address, int((args.reward + 10) * ETHER))
        except ChainRefused as exc:
            raise UserError(f"cannot fund the requester: {exc}") from exc
    setup = ChainSetup(
        rpc=target.rpc_url,
        contract=target.contract,
        requester=requester,
        workdir=workdir,
        funder=funder,
        party_fund_wei=int(args.party_fund * ETHER),
        algo=args.algo,
        reward_wei=int(args.reward * ETHER),
        step_blocks=args.step_blocks,
        tick_seconds=args.tick,
        block_time=_block_time(target),
        endorse=args.endorse,
        refusal_rate=args.refusal_rate,
        overlap_threshold=args.overlap_threshold,
        greedy=args.greedy,
        attack=attack_of(args, args.greedy) if args.greedy is not None else None,
    )
    with on_chain_progress(console, params, disable=args.quiet) as progress:
        try:
            report = resume_task(prep, setup, progress) if args.resume else run_task(prep, setup, progress, forks)
        except ResumeError as exc:
            raise UserError(str(exc)) from exc
        except (RuntimeError, ChainRefused) as exc:
            raise UserError(f"{exc} (party logs in {workdir})") from exc
    model = report.pop("model")
    if manipulation is not None:
        report["manipulation"] = manipulation.report(report["contributions"])
    print_report(Console(), report)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    if args.model_out:
        Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
        Model.from_json_dict(model).save(args.model_out)
    return 0


def _block_time(target: ChainTarget) -> float | None:
    """The devnet's block interval as ``fgbdt devnet up --block-time`` recorded it (None: a block per transaction)."""
    value = target.deployment.extra.get("block_time") if target.deployment is not None else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


PLAIN_PROGRESS_SECONDS = 10.0
"""Where the output is not a terminal (a log, a pipe, CI): a progress line at most this often, and at every tree."""


@contextlib.contextmanager
def on_chain_progress(
    console: Console, params: TrainParams, disable: bool = False
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A progress bar over the task's levels, fed by the requester's reports (tree, level, transactions, gas); where
    the console is not a terminal, where a bar would print nothing until the end, plain lines instead."""
    total = params.trees * params.depth
    if not disable and not console.is_terminal:
        yield _plain_progress(console, params)
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=disable,
    ) as bar:
        job = bar.add_task("training on chain", total=total)

        def progress(info: dict[str, Any]) -> None:
            done = total if info["status"] == "COMPLETED" else info["tree"] * params.depth + info["level"]
            bar.update(
                job,
                completed=done,
                description=f"tree {info['tree']} level {info['level']} | "
                f"{info['txs']} txs | {info['gas'] / 1e6:.0f}M gas",
            )

        yield progress


def _plain_progress(console: Console, params: TrainParams) -> Callable[[dict[str, Any]], None]:
    """Progress as lines ("tree 3/20 level 2/5, 15/100 levels, 412 txs, 380M gas, 41 s"): at each new tree, at the
    end, and otherwise at most every ``PLAIN_PROGRESS_SECONDS``."""
    total = params.trees * params.depth
    started = time.monotonic()
    last: dict[str, Any] = {"at": started, "tree": -1}

    def progress(info: dict[str, Any]) -> None:
        now = time.monotonic()
        finished = info["status"] == "COMPLETED"
        done = total if finished else info["tree"] * params.depth + info["level"]
        if not finished and info["tree"] == last["tree"] and now - last["at"] < PLAIN_PROGRESS_SECONDS:
            return
        last.update(at=now, tree=info["tree"])
        where = (
            "done" if finished else f"tree {info['tree'] + 1}/{params.trees} level {info['level'] + 1}/{params.depth}"
        )
        console.print(
            f"training on chain: {where}, {done}/{total} levels, {info['txs']} txs, {info['gas'] / 1e6:.0f}M gas, "
            f"{now - started:.0f} s",
            highlight=False,
            soft_wrap=True,
        )

    return progress


def print_report(console: Console, report: dict[str, Any]) -> None:
    quality = (
        f"test RMSE {report['test_rmse']:.4g}"
        if "test_rmse" in report  # a regression task
        else f"test error {report['test_error']:.4f}, AUC {report['test_auc']:.4f}"
    )
    console.print(
        f"task {report['task']} on {report['rpc']}: {quality}; {report['tx_count']} transactions in "
        f"{report['blocks']} blocks, {report['gas_used'] / 1e6:.1f}M gas, {report['wall_seconds']:.1f} s"
    )
    largest = report["max_tx_bytes"]
    console.print(
        f"largest transaction: {'?' if largest is None else f'{largest / 1024:.1f} KiB'}"
        f"{'' if report['fits_geth_pool'] is not False else ' (over the 128 KiB a geth pool relays)'}, "
        f"{report['max_tx_gas'] / 1e6:.2f}M gas{'' if report['fits_30m_block'] else ' (over a 30M-gas block)'}"
    )
    table = Table(title="contributions on chain (split Shapley phi + alpha * voting kappa)")
    for col in ("party", "phi", "kappa", "total", "share", "rejected histograms", "reward (ETH)"):
        table.add_column(col, justify="right")
    for c, rej in zip(report["contributions"], report["rejected_histograms"], strict=True):
        table.add_row(
            str(c["party"]),
            f"{c['phi']:.3f}",
            f"{c['kappa']:.3f}",
            f"{c['total']:.3f}",
            f"{c['share']:.3f}",
            str(rej),
            f"{int(c['owed_wei']) / ETHER:.6f}",
        )
    console.print(table)
    manipulated = report.get("manipulation")
    if manipulated and "holder_share" in manipulated:
        console.print(
            f"party {manipulated['holder']} played {manipulated['kind']} x{manipulated['factor']:g} as parties "
            f"{', '.join(map(str, manipulated['identities']))}: combined share {manipulated['holder_share']:.3f}"
        )
