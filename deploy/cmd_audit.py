"""``fgbdt audit``: recompute a task from the public chain record and report the first mismatch.

Why a command: the audit is what lets a party, a requester or an outsider check the contract's splits,
contributions and payouts without trusting anybody's node; it needs nothing but an RPC URL and the task id. Exit
codes make it scriptable: 0 the record matches the reference, 1 a mismatch (printed), 2 the audit could not run
(bad arguments, unreachable chain, unknown or unstarted task).
"""

from __future__ import annotations

import argparse
from typing import Any

from web3.exceptions import Web3Exception

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.deploy.deployment import add_chain_arguments, chain_target
from fgbdt_chain.ledger.audit.replay import AuditError, audit_chain
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.toolchain.compile import CompileError


def register(subparsers: Any) -> None:
    """Add the ``audit`` command to the ``fgbdt`` parser."""
    parser = subparsers.add_parser(
        "audit",
        help="replay a task's events and recompute every signature, split, contribution and payout",
        description="Replay a task from the chain and recompute it with the Python reference. Prints OK and a "
        "summary, or the first mismatch. Exit 0 when the record matches, 1 on a mismatch, 2 when the audit "
        "cannot run.",
    )
    parser.add_argument("--task", required=True, type=int, help="task id")
    add_chain_arguments(parser)
    parser.add_argument("--block", default=None, type=int, help="audit the state at this block (default: latest)")
    parser.set_defaults(func=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    """Resolve the chain and contract, run the audit, print the verdict; 0 OK, 1 mismatch."""
    target = chain_target(args)
    url, address = target.rpc_url, target.contract
    if args.task < 1:
        raise UserError(f"task ids start at 1, got {args.task}")
    try:
        client = ChainClient.connect(url, timeout=60.0)
    except CompileError as exc:
        raise UserError(f"contracts do not compile (the ABI is needed to decode events): {exc}") from exc
    except Exception as exc:
        raise UserError(f"chain unreachable at {url}: {type(exc).__name__}") from exc
    expected = target.deployment.chain_id if target.deployment else None
    if expected is not None and expected != client.chain_id:
        raise UserError(f"deployment file is for chain {expected}, {url} serves chain {client.chain_id}")
    try:
        report = audit_chain(client, address, args.task, args.block)
    except AuditError as exc:
        raise UserError(str(exc)) from exc
    except (ConnectionError, OSError) as exc:
        raise UserError(f"chain connection failed at {url}: {exc}") from exc
    except Web3Exception as exc:  # the node answered with an error (e.g. pruned history for --block)
        raise UserError(f"RPC error from {url}: {exc}") from exc
    print(report.summary())
    return 0 if report.ok else 1
