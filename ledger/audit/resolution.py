"""A node's resolution recomputed with the reference: split or leaf, the children's sums, every party's Shapley
value, voting contribution and contribution (``reference.resolve_node``), against the node's events.

Why from the accepted histograms alone: the contract resolves a node from the histograms it accepted, their
senders' ballots and root credits, and the sums the node inherited; all of it is in the record, so any difference is
the contract's (or the record's) and not an input the audit could not see.
"""

from __future__ import annotations

from typing import Any

from fgbdt_chain.ledger.audit.record import KIND_LEAF, KIND_OPEN, KIND_SPLIT, NodeState, changed, checksum
from fgbdt_chain.ledger.audit.report import fail, one
from fgbdt_chain.ledger.audit.state import Replay
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import Sides
from fgbdt_chain.ledger.spec.shapley_estimate import node_seed


def resolve(
    rp: Replay,
    tree: int,
    level: int,
    nd: int,
    j: int,
    accepted: list[str],
    hists: dict[str, list[ref.NodeHistograms]],
    votes: dict[str, list[int]],
    inherited: dict[tuple[int, int], ref.Totals],
    last: bool,
) -> bool | None:
    """Check the resolution of open node ``nd`` (the ``j``-th of its level); True when it split, False for a leaf,
    None when not resolved yet. ``inherited`` gains the children's sums."""
    where: dict[str, Any] = {"tree": tree, "level": level, "node": nd}
    events = rp.events
    contrib = one("ContributionsAdded", events.take_node(tree, nd, "ContributionsAdded"), **where)
    splits = events.take_node(tree, nd, "NodeSplit")
    leaves = events.take_node(tree, nd, "LeafSet")
    if contrib is None:
        if splits or leaves:
            fail("ContributionsAdded with the node's result", "one event", "none", **where)
        return None
    recorded_parties = [checksum(p) for p in contrib.args["parties"]]
    if recorded_parties != accepted:
        fail("accepted parties (histogram senders in party order)", accepted, recorded_parties, **where)
    try:
        res = ref.resolve_node(
            [hists[p][j] for p in accepted],
            [votes[p][j] for p in accepted],
            inherited.get((tree, nd)) if nd != 1 else None,
            last,
            rp.task.params,
            [rp.credits.get(p, ref.NEUTRAL) for p in accepted],
            node_seed(rp.task.shapley_seed, tree, nd),
        )
    except (ref.FixedPointOverflow, ZeroDivisionError, ValueError) as exc:
        fail("reference resolution (the contract would revert)", f"revert: {exc}", "resolved", **where)
    rp.counts.nodes += 1
    key = (tree, nd)
    if nd == 1:
        agg = ref.aggregate([hists[p][j] for p in accepted]) if accepted else None
        tot = (sum(agg.g[0]), sum(agg.h[0]), sum(agg.n[0])) if agg is not None else (0, 0, 0)
        rp.nodes[key] = changed(rp.nodes[key], g=tot[0], h=tot[1], n=tot[2])
    if res.split is None:
        if splits:
            fail("node result", "leaf", "split", **where)
        _leaf(rp, key, leaves, res.leaf, where)
    else:
        sp = res.split
        if leaves:
            fail("node result", "split", "leaf", **where)
        ns = one("NodeSplit", splits, **where)
        if ns is None:
            fail("NodeSplit", (sp.feature, sp.threshold, sp.gain), "none", **where)
        for fld, want, got in (
            ("split feature", sp.feature, int(ns.args["feature"])),
            ("split threshold", sp.threshold, int(ns.args["threshold"])),
            ("split gain", sp.gain, int(ns.args["gain"])),
            (
                "split sides (gL, hL, nL, gR, hR, nR)",
                [sp.g_left, sp.h_left, sp.n_left, sp.g_right, sp.h_right, sp.n_right],
                [int(x) for x in ns.args["sides"]],
            ),
        ):
            if want != got:
                fail(fld, want, got, **where)
        rp.nodes[key] = changed(
            rp.nodes[key], kind=KIND_SPLIT, feature=sp.feature, threshold=sp.threshold, value=sp.gain
        )
        assert res.left is not None and res.right is not None
        for p in accepted:
            rp.sides[p][nd] = Sides.of(hists[p][j], sp.rank, sp.threshold)
        for child, sums in ((2 * nd, res.left), (2 * nd + 1, res.right)):
            inherited[(tree, child)] = sums
            rp.nodes[(tree, child)] = NodeState(kind=0 if last else KIND_OPEN, tree=tree, g=sums.g, h=sums.h, n=sums.n)
        if last:
            for child, value in ((2 * nd, res.left_leaf), (2 * nd + 1, res.right_leaf)):
                w = {"tree": tree, "level": level + 1, "node": child}
                _leaf(rp, (tree, child), events.take_node(tree, child, "LeafSet"), value, w)
                rp.counts.nodes += 1
    for fld, want_all in (("phi", res.phi), ("kappa", res.kappa), ("contribution", res.contribution)):
        got_all = [int(x) for x in contrib.args[fld]]
        if len(got_all) != len(want_all):
            fail(f"number of {fld} values", len(want_all), len(got_all), **where)
        for p, want, got in zip(accepted, want_all, got_all, strict=True):
            if want != got:
                fail(fld, want, got, party=p, **where)
    for p, c in zip(accepted, res.contribution, strict=True):
        rp.totals[p] = rp.totals.get(p, 0) + c
    return res.split is not None


def _leaf(rp: Replay, key: tuple[int, int], events: list[Event], value: int | None, where: dict[str, Any]) -> None:
    """A node that became a leaf: its one ``LeafSet`` with the reference's value, recorded on the node."""
    leaf = one("LeafSet", events, **where)
    if leaf is None:
        fail("LeafSet", value, "none", **where)
    if int(leaf.args["value"]) != value:
        fail("leaf value", value, int(leaf.args["value"]), **where)
    rp.nodes[key] = changed(rp.nodes[key], kind=KIND_LEAF, value=int(value or 0))
