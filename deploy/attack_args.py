"""The greedy-party flags (``node.attacks.histograms``, ``node.attacks.data``) shared by ``simulate``, ``train`` and
``node``.

Kept apart from ``cmd_simulate`` so that ``fgbdt node`` does not import the simulator and its baselines (scikit-learn,
LightGBM): that import was most of a party process's start-up, and the bench's four parties start together.
"""

from __future__ import annotations

import argparse

from fgbdt_chain.deploy.cli import UserError
from fgbdt_chain.node.attacks.data import DATA_ATTACK_KINDS, DataAttack
from fgbdt_chain.node.attacks.histograms import ATTACK_KINDS, Attack


def add_attack_arguments(parser: argparse.ArgumentParser, *, node: bool = False) -> None:
    """Greedy-party experiments: the same flags for ``simulate``, ``train`` and ``node``. A node attacks its
    histograms only (``node.attacks.histograms``); ``simulate`` and ``train`` also manipulate the greedy party's rows
    before it joins (``node.attacks.data``: the requester writes the manipulated shard)."""
    if not node:
        parser.add_argument("--greedy", type=int, help="index of the party that attacks its histograms or rows")
    parser.add_argument(
        "--attack",
        choices=ATTACK_KINDS if node else (*ATTACK_KINDS, *DATA_ATTACK_KINDS),
        default="gradients",
        help="what the greedy party does (with --inflate): stretch its histograms ("
        + ", ".join(ATTACK_KINDS)
        + ")"
        + (
            ""
            if node
            else "; or change its rows before joining (duplicate: copies, jitter, fitted: synthetic rows, "
            "split: join as several parties, clone: several parties each with a copy of its rows, fresh-clone: the "
            "same with labels drawn afresh), --inflate the copies, rows multiple or identities"
        ),
    )
    parser.add_argument("--inflate", type=float, default=2.0 if not node else None, help="the attack's factor")
    parser.add_argument("--attack-from-tree", type=int, default=0, help="first tree the greedy party attacks")


def attack_of(args: argparse.Namespace, party: int) -> Attack | None:
    """The attack a party plays, from the attack flags (None for an honest party)."""
    greedy = getattr(args, "greedy", party)
    if greedy is None or greedy != party or args.inflate is None or args.attack in DATA_ATTACK_KINDS:
        return None
    try:
        return Attack(args.attack, args.inflate, seed=args.seed or 0, start_tree=args.attack_from_tree)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def data_attack_of(args: argparse.Namespace) -> DataAttack | None:
    """The greedy party's manipulation of its rows, from the attack flags (None without one)."""
    if getattr(args, "greedy", None) is None or args.attack not in DATA_ATTACK_KINDS:
        return None
    if args.attack_from_tree:
        raise UserError("--attack-from-tree is for histogram attacks: a party's rows are changed before it joins")
    try:
        return DataAttack(args.attack, args.inflate, seed=args.seed or 0)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
