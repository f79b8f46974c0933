"""The trained model as the chain recorded it: splits and leaf values from the task's events, edges from ``start``.

Anyone can rebuild the model without trusting a party: the API serves it, the audit compares it with its own
recomputation, and ``fgbdt train`` evaluates it. Feature names are not on chain; the caller may supply them.
"""

from __future__ import annotations

from collections.abc import Sequence

from fgbdt_chain.ledger.spec.edges import decode_edges, histogram_slots
from fgbdt_chain.ledger.spec.encoding import block_histograms
from fgbdt_chain.ledger.spec.fixed_point import from_fixed
from fgbdt_chain.ledger.spec.histogram_rules import candidate_totals
from fgbdt_chain.ledger.spec.task_params import TaskParameters
from fgbdt_chain.ledger.wrappers.contracts import HISTOGRAM_EVENTS, TaskContract, submitted_words
from fgbdt_chain.node.model.trees import Model, Node, Tree


class ModelNotReady(RuntimeError):
    """The task has no published bin edges or recorded trees yet."""


def task_edges(task: TaskContract, task_id: int) -> list[list[float]]:
    """The bin edges published by ``start``."""
    fixed = task.client.logs(task.contract, ["BinEdgesFixed"], task_id)
    if not fixed:
        raise ModelNotReady(f"task {task_id} has not started: no bin edges published")
    return decode_edges(bytes(fixed[-1].args["binEdges"]))


def model_from_chain(
    task: TaskContract,
    task_id: int,
    *,
    feature_names: Sequence[str] | None = None,
    complete_trees_only: bool = True,
) -> Model:
    """The model of ``task_id``: every tree whose leaves are all set (all recorded trees when training finished),
    with the task's loss as its config on chain records it (a regression task's model predicts raw scores)."""
    cfg = task.config(task_id)
    edges = task_edges(task, task_id)
    trees: dict[int, Tree] = {}
    child_rows: dict[tuple[int, int], int] = {}  # a node's rows, from its parent's split sums
    for ev in task.client.logs(task.contract, ["NodeSplit", "LeafSet"], task_id):
        a = ev.args
        t, node = int(a["tree"]), int(a["node"])
        tree = trees.setdefault(t, Tree())
        if ev.name == "NodeSplit":
            sides = [int(v) for v in a["sides"]]  # gL, hL, nL, gR, hR, nR
            child_rows[(t, 2 * node)], child_rows[(t, 2 * node + 1)] = sides[2], sides[5]
            tree.nodes[node] = Node.split(int(a["feature"]), int(a["threshold"]), int(a["gain"]), sides[2] + sides[5])
        elif node == 1:  # a root leaf has no parent split to count its rows
            tree.nodes[node] = Node.leaf(int(a["value"]), _root_rows(task, task_id, t, histogram_slots(edges)))
        else:
            tree.nodes[node] = Node.leaf(int(a["value"]), child_rows[(t, node)])
    ordered = [trees[t] for t in sorted(trees)]
    if complete_trees_only:
        ordered = [t for t in ordered if _complete(t)]
    names = list(feature_names) if feature_names is not None else [f"f{i}" for i in range(len(edges))]
    task_params = TaskParameters.of(cfg)
    return Model(
        objective=task_params.objective,
        feature_names=names,
        edges=edges,
        bins=int(cfg.bins),
        trees=ordered,
        label_scale=task_params.label_scale,
        params={
            "trees": cfg.trees,
            "depth": cfg.depth,
            "bins": cfg.bins,
            "learning_rate": from_fixed(cfg.learning_rate),
            "lam": from_fixed(cfg.lam),
            "min_rows": cfg.min_rows,
            "hessian_mode": cfg.hessian_mode,
            "tie_break": cfg.tie_break,
        },
        meta={"task": task_id, "contract": task.address},
    )


def _complete(tree: Tree) -> bool:
    """Every split node has both children recorded."""
    if 1 not in tree.nodes:
        return False
    return all(n.is_leaf or (2 * i in tree.nodes and 2 * i + 1 in tree.nodes) for i, n in tree.nodes.items())


def _root_rows(task: TaskContract, task_id: int, tree: int, nbins: int) -> int:
    """The rows at ``tree``'s root: the contract's root totals while it keeps the tree's nodes (the last two trees),
    else the same sum from the accepted level-0 histograms (every submitter's counts at the first candidate)."""
    rec = task.node(task_id, tree, 1)
    if rec.tree == tree and rec.kind != 0:
        return rec.n
    # the histogram events are the largest: read those of the tree's first level only, between its LevelStarted
    # and the next one
    levels = task.client.logs(task.contract, ["LevelStarted"], task_id)
    i = next(i for i, ev in enumerate(levels) if (int(ev.args["tree"]), int(ev.args["level"])) == (tree, 0))
    end: int | str = levels[i + 1].block_number if i + 1 < len(levels) else "latest"
    events = task.client.logs(task.contract, list(HISTOGRAM_EVENTS), task_id, levels[i].block_number, end)
    roots = [w for (_, t, level), w in submitted_words(events).items() if (t, level) == (tree, 0)]
    return sum(candidate_totals(block_histograms(w, (0, 0), nbins), 0).n for w in roots)  # no candidate in the counts
