"""``fgbdt serve``: run the REST API (``api/``) against a chain with the FGBDT-Chain contracts deployed.

Why the flags: the API needs the RPC URL, the contract addresses (from the deployment file that ``fgbdt devnet up``
writes) and a relayer key, the account that pays the gas of relayed, user-signed requests. The key comes from a file,
never from the command line (it would show in ``ps`` and shell history). Without a relayer key (``--relayer-key``, or
the one ``devnet up`` wrote and recorded in its deployment file) the API is read-only: state-changing requests answer
503. The limits flags bound what one client may ask of the server (``api.limits``; their defaults are
``api.limits.Limits``'s, written out in the help).
"""

from __future__ import annotations

import argparse
from typing import Any

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.deployment import FORWARDER_CONTRACT, add_chain_arguments, chain_target, read_key

DEFAULT_PORT: int = 8000


def register(subparsers: Any) -> None:
    """Add the ``serve`` command to the ``fgbdt`` parser."""
    p = subparsers.add_parser(
        "serve",
        help="run the REST API (FastAPI, /v1) against a deployed FGBDT-Chain contract",
        description="Serve the FGBDT-Chain REST API; state changes are signed ERC-2771 requests relayed by the API.",
    )
    add_chain_arguments(p)
    p.add_argument(
        "--relayer-key",
        default=None,
        help="file holding the relayer's private key (hex; default: the deployment's, from `devnet up`)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    from fgbdt_chain.api.limits import LIMIT_HELP, Limits

    limits = p.add_argument_group("limits", "what one client may ask of the server; past a limit: a 4xx naming it")
    for name, help_text in LIMIT_HELP.items():
        default = getattr(Limits(), name)
        flag = "--" + name.replace("_", "-")
        limits.add_argument(flag, type=type(default), default=default, help=f"{help_text} (default {default})")
    p.set_defaults(func=run_serve)


def settings_from_args(args: argparse.Namespace) -> Any:
    """The API settings of the command line (checked, with clear errors): the chain as every chain command finds
    it (``deploy.deployment``), and the relayer key from ``--relayer-key`` or the one ``devnet up`` recorded."""
    from fgbdt_chain.api.limits import LIMIT_HELP, Limits
    from fgbdt_chain.api.service import Settings

    target = chain_target(args)
    forwarder = target.deployment.contracts.get(FORWARDER_CONTRACT) if target.deployment else None
    key_file = args.relayer_key or (target.deployment.relayer_key if target.deployment else None)
    key = "0x" + bytes(read_key(key_file, "relayer key").key).hex() if key_file else None
    try:
        limits = Limits(**{name: getattr(args, name) for name in LIMIT_HELP})
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    return Settings(
        rpc_url=target.rpc_url, contract=target.contract, forwarder=forwarder, relayer_key=key, limits=limits
    )


def run_serve(args: argparse.Namespace) -> int:
    """Build the app and serve it with uvicorn until interrupted."""
    import uvicorn

    from fgbdt_chain.api.app import create_app
    from fgbdt_chain.api.service import Backend
    from fgbdt_chain.ledger.toolchain.compile import CompileError, load_artifacts

    settings = settings_from_args(args)
    try:
        artifacts = load_artifacts()  # now, not on the first request (an edited contract compiles for seconds)
    except CompileError as exc:
        raise UserError(f"contracts do not compile: {exc}") from exc
    app = create_app(Backend(settings, artifacts))
    base = f"http://{args.host}:{args.port}"
    print(f"fgbdt serve: dashboard {base}/, API {base}/docs (chain {settings.rpc_url}, contract {settings.contract})")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
