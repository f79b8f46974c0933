"""The ``fgbdt`` command line.

Each command lives in its own module exposing ``register(subparsers)``, which adds its parser and sets
``func`` (taking the parsed namespace, returning an exit code). Keeping commands apart lets the engine, the chain
tooling and the API grow without one module knowing every option.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
    "fgbdt_chain.deploy.cmd_simulate",
    "fgbdt_chain.deploy.cmd_model",
    "fgbdt_chain.deploy.devnet",
    "fgbdt_chain.deploy.cmd_deploy",
    "fgbdt_chain.deploy.cmd_node",
    "fgbdt_chain.deploy.cmd_train",
    "fgbdt_chain.deploy.cmd_audit",
    "fgbdt_chain.deploy.cmd_serve",
    "fgbdt_chain.deploy.demo",
)

COMMAND_OF: dict[str, str] = {
    "simulate": "fgbdt_chain.deploy.cmd_simulate",
    "export": "fgbdt_chain.deploy.cmd_model",
    "predict": "fgbdt_chain.deploy.cmd_model",
    "devnet": "fgbdt_chain.deploy.devnet",
    "deploy": "fgbdt_chain.deploy.cmd_deploy",
    "node": "fgbdt_chain.deploy.cmd_node",
    "train": "fgbdt_chain.deploy.cmd_train",
    "audit": "fgbdt_chain.deploy.cmd_audit",
    "serve": "fgbdt_chain.deploy.cmd_serve",
    "demo": "fgbdt_chain.deploy.demo",
}
"""The module of each command, so that one command's run imports that module only: every module for ``fgbdt node``
took a party process 2-9 s to start (the simulator's baselines), four of them at once on two cores."""


class UserError(Exception):
    """An error caused by the user's input: printed as one clear line, exit code 2, no traceback."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` only (a known command's run: ``main``)."""
    from fgbdt_chain import __version__

    parser = argparse.ArgumentParser(prog="fgbdt", description="Fair, auditable federated gradient boosting.")
    parser.add_argument("--version", action="version", version=f"fgbdt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (COMMAND_OF[command],) if command in COMMAND_OF else COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(given)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"fgbdt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fgbdt {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # run through the package module so that command modules and this script share one UserError class
    from fgbdt_chain.deploy.cli import main as _main

    sys.exit(_main())
