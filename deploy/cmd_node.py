"""``fgbdt node``: run one party of a task: join, train on chain, endorse the others.

Where it runs on its own host, its options can come from a TOML file (``--config FILE``): ``task``, ``key``,
``data``, ``listen``, ``public-url``, ``rpc``, ``contract`` or ``deployment``, ``devnet-dir``, ``tls-cert``,
``tls-key``, ``tls-ca``, ``plain-http`` and ``block-time``, named as the long options; an option on the command line
wins over the file, and a relative path in the file is taken from the file's folder.

In place of ``data``, the file may give a ``[parquet]`` table: the party's rows are then a Parquet dataset, read chunk
by chunk (``node.protocol.parquet_party.ParquetParty``: ``rows``, ``slots``, optionally ``chunk_rows`` and
``label``, and a Dask ``scheduler`` with the ``parts`` its workers hold), so that they need not fit in the node's
memory.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fgbdt_chain.deploy.attack_args import add_attack_arguments, attack_of
from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.deployment import add_chain_arguments, chain_target, read_key
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.parameters import parameter
from fgbdt_chain.ledger.spec.task_params import TaskParameters
from fgbdt_chain.ledger.wrappers.contracts import TaskContract
from fgbdt_chain.node.data.loaders import DataFormatError, load_dataset
from fgbdt_chain.node.party.endorse_server import EndorsementServer
from fgbdt_chain.node.party.party_node import NodeError, NodeSettings, PartyNode
from fgbdt_chain.node.party.session import PartyData
from fgbdt_chain.node.protocol.parquet_party import ParquetParty


def register(sub: Any) -> None:
    p = sub.add_parser("node", help="run one party of an on-chain task", description=__doc__)
    p.add_argument("--config", help="TOML file of options (the long options' names as keys; the command line wins)")
    p.add_argument("--task", type=int, help="task id (required, here or in --config)")
    p.add_argument("--key", help="file holding this party's private key (hex; required, here or in --config)")
    p.add_argument(
        "--data",
        help="this party's rows (libsvm or CSV, label first, or .npz with X and y; required unless --config gives a "
        "[parquet] table)",
    )
    p.add_argument("--listen", help=f"HOST:PORT of the party's endpoint (default {DEFAULT_LISTEN})")
    p.add_argument(
        "--public-url",
        help="the URL the other parties reach the endpoint at, registered on chain (default: from --listen)",
    )
    p.add_argument("--tls-cert", help="certificate chain (PEM) to serve the endpoint over HTTPS, with --tls-key")
    p.add_argument("--tls-key", help="the certificate's private key (PEM)")
    p.add_argument("--tls-ca", help="CA certificates (PEM) the other parties' https endpoints are verified against")
    p.add_argument(
        "--plain-http",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the endpoint over plain HTTP (without --tls-cert, required: the exchange is then unencrypted)",
    )
    add_chain_arguments(p)
    p.add_argument(
        "--block-time",
        type=float,
        help="seconds between the chain's blocks: how long relayed requests live (default: the deployment file's "
        "block_time where it has one, else measured from the chain's latest blocks when training starts)",
    )
    p.add_argument("--delta", type=float, default=parameter("refit_delta").default, help=parameter("refit_delta").help)
    p.add_argument("--psd-depth", type=int, default=8)
    p.add_argument("--psd-max-rows", type=int, default=500)
    p.add_argument("--psd-epsilon", type=float, default=1.0)
    p.add_argument("--psd-label-first", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--binning-epsilon", type=float, default=1.0)
    p.add_argument("--binning-resolution", type=int, default=64)
    p.add_argument("--seed", type=int, help="reproducible DP noise (experiments only: a known seed is no secret)")
    p.add_argument("--party-index", type=int, default=0, help="with --seed: whose noise stream to use")
    add_attack_arguments(p, node=True)
    p.add_argument(
        "--resolve-batch",
        type=int,
        default=NodeSettings.resolve_batch,
        help="nodes resolved per transaction (bounded by the chain's block gas limit)",
    )
    p.set_defaults(func=run_node, parquet=None)


DEFAULT_LISTEN = "127.0.0.1:0"
REQUIRED = ("task", "key")
FROM_CONFIG: dict[str, type] = {
    "task": int,
    "key": Path,
    "data": Path,
    "listen": str,
    "public-url": str,
    "tls-cert": Path,
    "tls-key": Path,
    "tls-ca": Path,
    "plain-http": bool,
    "rpc": str,
    "contract": str,
    "deployment": Path,
    "devnet-dir": Path,
    "block-time": float,
}
"""The options a ``--config`` file may set, by name, and their kind (a path is taken from the file's folder)."""


def apply_config(args: argparse.Namespace) -> None:
    """Fill the options not given on the command line from ``--config``'s TOML file; UserError for a file that
    cannot be read, a key that is not an option, a value of the wrong kind, or a required option given nowhere."""
    if args.config:
        path = Path(args.config)
        try:
            config = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"--config {path}: {exc}") from exc
        unknown = sorted(set(config) - set(FROM_CONFIG) - {"parquet"})
        if unknown:
            raise UserError(f"--config {path}: not options of fgbdt node: {', '.join(unknown)}")
        if "parquet" in config:
            args.parquet = parquet_party(config.pop("parquet"), path)
        for name, value in config.items():
            kind = FROM_CONFIG[name]
            expected = str if kind is Path else kind
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)  # TOML writes 5 for 5.0
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise UserError(f"--config {path}: {name} must be a {expected.__name__}, got {value!r}")
            dest = name.replace("-", "_")
            if getattr(args, dest) is None:
                setattr(args, dest, str(path.parent / str(value)) if kind is Path else value)
    parquet = getattr(args, "parquet", None)
    if parquet is not None and args.data is not None:
        raise UserError("--data and a [parquet] table in --config: this party's rows come from one of them")
    missing = [f"--{name}" for name in REQUIRED if getattr(args, name) is None]
    if args.data is None and parquet is None:
        missing.append("--data")
    if missing:
        raise UserError(
            f"the following arguments are required (here or in --config): {', '.join(missing)}"
            + (" (or a [parquet] table in --config)" if "--data" in missing else "")
        )
    if args.listen is None:
        args.listen = DEFAULT_LISTEN


def parquet_party(table: object, config: Path) -> ParquetParty:
    """The ``[parquet]`` table of the config file ``config`` as a ``ParquetParty`` (its ``rows`` and ``slots`` taken
    from the file's folder where relative); UserError naming what is wrong."""
    if not isinstance(table, dict):
        raise UserError(f"--config {config}: parquet must be a table ([parquet]), got {table!r}")
    settings = dict(table)
    for key in ("rows", "slots"):
        value = settings.get(key)
        if key in settings and not isinstance(value, str):
            raise UserError(f"--config {config}: [parquet] {key} must be a path (a string), got {value!r}")
        if isinstance(value, str):
            settings[key] = str(config.parent / value)
    try:
        party = ParquetParty.of(settings)
    except (TypeError, ValueError) as exc:
        raise UserError(f"--config {config}: [parquet]: {exc}") from exc
    if not party.rows.exists():
        raise UserError(f"--config {config}: [parquet] rows: no such file or folder: {party.rows}")
    return party


def _tls(args: argparse.Namespace) -> tuple[str, str] | None:
    """(certificate, key) to serve HTTPS with, or None for plain HTTP, which must be asked for."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UserError("--tls-cert and --tls-key go together")
    if args.tls_cert:
        if args.plain_http:
            raise UserError("--plain-http with --tls-cert: choose one")
        for f in (args.tls_cert, args.tls_key):
            if not Path(f).is_file():
                raise UserError(f"no such file: {f}")
        return args.tls_cert, args.tls_key
    if not args.plain_http:
        raise UserError(
            "the endpoint needs a certificate (--tls-cert FILE --tls-key FILE) or, unencrypted, --plain-http"
        )
    return None


def _serve(
    node: PartyNode, host: str, port: int, log: Callable[[str], None], tls: tuple[str, str] | None = None
) -> EndorsementServer:
    """The endorsement server, on ``port``; port 0 takes the port this party registered when it joined (a restart:
    the other parties ask the endpoint on chain), else any free one."""
    if port == 0:
        registered = urlsplit(node.registered_endpoint() or "")
        if registered.hostname == host and registered.port:
            server = EndorsementServer(node, host, registered.port, tls=tls)
            try:
                server.start()
                return server
            except RuntimeError:
                log(
                    f"cannot listen on {registered.geturl()} again, the endpoint this party joined with (in use?): "
                    "the others cannot ask it for endorsements"
                )
    server = EndorsementServer(node, host, port, tls=tls)
    server.start()
    return server


def run_node(args: argparse.Namespace) -> int:
    apply_config(args)
    tls = _tls(args)
    if args.tls_ca and not Path(args.tls_ca).is_file():
        raise UserError(f"no such file: {args.tls_ca}")
    account = read_key(args.key, "party key")
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--listen must be HOST:PORT, got {args.listen!r}")
    target = chain_target(args)
    if args.block_time is None and target.deployment is not None:
        recorded = target.deployment.extra.get("block_time")  # a devnet's fgbdt devnet up --block-time
        if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded > 0:
            args.block_time = float(recorded)
    try:
        client = ChainClient.connect(target.rpc_url)
    except OSError as exc:
        raise UserError(f"the chain at {target.rpc_url} does not answer ({type(exc).__name__})") from exc
    task = TaskContract.at(client, target.contract)
    data: PartyData
    if args.parquet is not None:
        data = args.parquet  # read chunk by chunk, its labels checked against the task's as the node starts
    else:
        try:  # the labels are read as the task's loss needs them: two classes, or any real value for squared error
            data = load_dataset(args.data, task=TaskParameters.of(task.config(args.task)).objective)
        except (DataFormatError, OSError) as exc:
            raise UserError(str(exc)) from exc
    settings = NodeSettings(
        delta=args.delta,
        psd_depth=args.psd_depth,
        psd_max_rows=args.psd_max_rows,
        psd_epsilon=args.psd_epsilon,
        psd_label_first=args.psd_label_first,
        binning_epsilon=args.binning_epsilon,
        binning_resolution=args.binning_resolution,
        seed=args.seed,
        party_index=args.party_index,
        attack=attack_of(args, args.party_index),
        resolve_batch=args.resolve_batch,
        tls_ca_file=args.tls_ca,
        block_seconds=args.block_time,
    )
    if args.block_time is not None and not 0 <= args.block_time < float("inf"):
        raise UserError(f"--block-time must be a non-negative number of seconds, got {args.block_time}")
    if args.resolve_batch < 1:
        raise UserError(f"--resolve-batch must be at least 1, got {args.resolve_batch}")
    tag = f"[{account.address[:8]}]"

    def log(message: str) -> None:
        now = time.time()
        print(f"{time.strftime('%H:%M:%S', time.localtime(now))}.{int(now % 1 * 1000):03d} {tag} {message}", flush=True)

    try:
        node = PartyNode(task, args.task, account, data, "", settings, log)
    except NodeError as exc:
        raise UserError(str(exc)) from exc
    server = _serve(node, host, int(port), log, tls)
    bound = server.server.servers[0].sockets[0].getsockname()[1]
    node.endpoint = args.public_url or f"{'https' if tls else 'http'}://{host}:{bound}"
    log(f"endorsement endpoint {node.endpoint}; chain {target.rpc_url}; task {args.task}")
    # SIGTERM (the requester stopping its parties) unwinds like an exit, so the node logs where its time went
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        node.run()
    except NodeError as exc:
        log(f"error: {exc}")
        print(f"fgbdt node: error: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop(wait=False)  # the process ends now: nothing is left to serve
    return 0
