"""``fgbdt serve``: run the REST API (``api/``) against a chain with the FGBDT-Chain contracts deployed.

Why the flags: the API needs the RPC URL, the contract addresses (from the deployment file that ``fgbdt devnet up``
writes) and a relayer key, the account that pays the gas of relayed, user-signed requests. The key comes from a file,
never from the command line (it would show in ``ps`` and shell history). Without ``--relayer-key`` the API is
read-only: state-changing requests answer 503.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fgbdt_chain.deploy.cli import UserError

DEFAULT_PORT: int = 8000


def register(subparsers: Any) -> None:
    """Add the ``serve`` command to the ``fgbdt`` parser."""
    p = subparsers.add_parser(
        "serve",
        help="run the REST API (FastAPI, /v1) against a deployed FGBDT-Chain contract",
        description="Serve the FGBDT-Chain REST API; state changes are signed ERC-2771 requests relayed by the API.",
    )
    p.add_argument("--rpc", default=None, help="JSON-RPC URL of the chain (default: the deployment file's rpc_url)")
    p.add_argument("--deployment", required=True, help="deployment JSON (as written by `fgbdt devnet up`)")
    p.add_argument("--relayer-key", default=None, help="file holding the relayer's private key (hex); omit: read-only")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=run_serve)


def read_key(path: str) -> str:
    """A private key from a file: 64 hex digits, optionally 0x-prefixed, surrounding whitespace ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UserError(f"cannot read the relayer key file {path}: {exc.strerror}") from exc
    digits = text.removeprefix("0x")
    if len(digits) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise UserError(f"{path} does not hold a 32-byte hex private key")
    return "0x" + digits


def settings_from_args(args: argparse.Namespace) -> Any:
    """The API settings of the command line (checked, with clear errors)."""
    from fgbdt_chain.api.service import Settings

    try:
        info = json.loads(Path(args.deployment).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read the deployment file {args.deployment}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UserError(f"{args.deployment} is not JSON: {exc}") from exc
    contracts = info.get("contracts", {}) if isinstance(info, dict) else {}
    contract = contracts.get("FGBDTChain")
    if not contract:
        raise UserError(f"{args.deployment} names no FGBDTChain contract")
    rpc = args.rpc or info.get("rpc_url")
    if not rpc:
        raise UserError("no RPC URL: pass --rpc or use a deployment file with rpc_url")
    key = read_key(args.relayer_key) if args.relayer_key else None
    return Settings(rpc_url=rpc, contract=contract, forwarder=contracts.get("FGBDTForwarder"), relayer_key=key)


def run_serve(args: argparse.Namespace) -> int:
    """Build the app and serve it with uvicorn until interrupted."""
    import uvicorn

    from fgbdt_chain.api.app import create_app
    from fgbdt_chain.api.service import Backend
    from fgbdt_chain.ledger.compile import CompileError, load_artifacts

    settings = settings_from_args(args)
    try:
        artifacts = load_artifacts()  # now, not on the first request (an edited contract compiles for seconds)
    except CompileError as exc:
        raise UserError(f"contracts do not compile: {exc}") from exc
    app = create_app(Backend(settings, artifacts))
    print(f"fgbdt serve: http://{args.host}:{args.port}/docs (chain {settings.rpc_url}, contract {settings.contract})")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
