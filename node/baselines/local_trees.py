"""One party's tree from gradients it was given: what SimFL and TFL (``node.baselines.simfl``, ``node.baselines.tfl``)
build in turn.

Why LightGBM: a party of these systems grows an ordinary histogram tree on its own rows, only from gradients that
are not its own (SimFL's similarity-weighted sums) or from its own (TFL). LightGBM grows that tree on the
federation's bin slots with the same matched parameters as the ``centralized`` baseline
(``node.baselines.centralized``), so
the seed systems differ from the baselines only in what the papers change, and no second tree learner has to be
kept exact. The tree is converted to the project's heap ``Tree`` (slot thresholds, fixed-point leaves), so the model
is saved, exported and predicted like FV-tree's, and the scores that training adds are the model's, to the bit.
"""

from __future__ import annotations

import math
from typing import Any

import lightgbm as lgb
import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.node.baselines import centralized as baselines
from fgbdt_chain.node.model.trees import Node, Tree


def party_dataset(slots: np.ndarray, params: TrainParams) -> lgb.Dataset:
    """A party's rows for LightGBM, binned once (each slot value its own bin) and reused for every tree."""
    lp = baselines.lightgbm_params(params)
    data = lgb.Dataset(
        np.asarray(slots, dtype=np.float64),
        params={"max_bin": lp["max_bin"], "min_data_in_bin": 1, "verbose": -1},
        free_raw_data=False,
    )
    data.construct()
    return data


def fit_tree(
    data: lgb.Dataset, g: np.ndarray, h: np.ndarray, params: TrainParams, *, seed: int = 0, threads: int = 1
) -> Tree:
    """One depth-limited tree on ``data``'s rows for the per-row gradients ``g`` and hessians ``h``, with the
    task's lambda, learning rate and minimum rows per leaf (``node.baselines.centralized.lightgbm_params``)."""
    n = data.num_data()
    if g.shape != (n,) or h.shape != (n,):
        raise ValueError(f"need one gradient and hessian per row ({n}), got {g.shape} and {h.shape}")
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(h)) and np.all(h >= 0)):
        raise ValueError("gradients must be finite and hessians finite and non-negative")
    lp: dict[str, Any] = baselines.lightgbm_params(params, threads=threads, seed=seed)
    grad, hess = np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64)
    lp["objective"] = lambda _preds, _data: (grad, hess)
    booster = lgb.train(lp, data, num_boost_round=1)
    return tree_of(booster.dump_model()["tree_info"][0]["tree_structure"])


def tree_of(structure: dict[str, Any]) -> Tree:
    """LightGBM's dumped tree as a heap tree: rows with ``slot <= floor(threshold)`` go left (slots are integers,
    so LightGBM's threshold between two slot values splits them exactly there), leaves in fixed point."""
    nodes: dict[int, Node] = {}

    def walk(node: dict[str, Any], node_id: int) -> None:
        if "leaf_value" in node:
            nodes[node_id] = Node.leaf(ref.to_fixed(float(node["leaf_value"])), int(node.get("leaf_count", 0)))
            return
        if node.get("decision_type", "<=") != "<=":
            raise ValueError(f"unexpected LightGBM split {node.get('decision_type')!r}: slots are numeric")
        nodes[node_id] = Node.split(
            int(node["split_feature"]),
            math.floor(float(node["threshold"])),
            ref.to_fixed(max(float(node.get("split_gain", 0.0)), 0.0)),
            int(node.get("internal_count", 0)),
        )
        walk(node["left_child"], 2 * node_id)
        walk(node["right_child"], 2 * node_id + 1)

    walk(structure, 1)
    return Tree(nodes)
