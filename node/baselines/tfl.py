"""TFL, the tree-based federated baseline SimFL compares against (Zhao et al., "InPrivate Digging: Enabling Tree-based
Distributed Data Mining with Differential Privacy", INFOCOM 2018), as SimFL's section 6 runs it: their framework
without its differential-privacy noise.

Each party in turn boosts on its own rows only: it computes its rows' gradients under the shared ensemble, grows a
tree on them and sends the tree to the others. Nothing about a party's rows leaves it but its trees, and no tree
sees more than one party's rows, which is why SimFL finds it worse than a party alone under label skew.

Turns are blocks of consecutive trees by default (Zhao et al. pass the model from party to party), or round robin,
as ``node.baselines.simfl.builder_of``; trees are grown on the federation's
bins with the matched LightGBM parameters (``node.baselines.local_trees``).
"""

from __future__ import annotations

import numpy as np

from fgbdt_chain.node.baselines.local_trees import fit_tree, party_dataset
from fgbdt_chain.node.baselines.seed_systems import SeedInputs, SeedResult
from fgbdt_chain.node.baselines.simfl import REAL_BYTES, builder_of
from fgbdt_chain.node.model.objective import gradients
from fgbdt_chain.node.model.trees import Tree, tree_values


def train_tfl(inputs: SeedInputs, *, turns: str = "blocks") -> SeedResult:
    """``params.trees`` trees, each grown by one party on its own rows and gradients. Communication: the builder
    sends the tree (``8 (2^D - 1)`` bytes, SimFL's model of a tree) to each other party."""
    p = inputs.params
    parties = len(inputs.party_slots)
    if parties < 1 or len(inputs.party_y) != parties:
        raise ValueError("need each party's slots and labels, and at least one party")
    builder_data = [party_dataset(s, p) for s in inputs.party_slots]
    scores = [np.zeros(len(y)) for y in inputs.party_y]
    trees: list[Tree] = []
    sent = np.zeros(parties)
    for t in range(p.trees):
        m = builder_of(t, p.trees, parties, turns)
        g, h = gradients(p.objective, inputs.party_y[m], scores[m])
        tree = fit_tree(builder_data[m], g, h, p, seed=inputs.seed + t, threads=inputs.threads)
        trees.append(tree)
        for i, slots in enumerate(inputs.party_slots):
            scores[i] += tree_values(tree, slots)
        sent[m] += 2 * REAL_BYTES * (2**p.depth - 1) * (parties - 1)
    test = np.zeros(inputs.test_slots.shape[0])
    for tree in trees:
        test += tree_values(tree, inputs.test_slots)
    return SeedResult(
        test_pred=1.0 / (1.0 + np.exp(-test)) if p.objective == "binary" else test,
        comm_bytes_per_party_per_tree=[float(s) / p.trees for s in sent],
        comm_formula="each tree, 8 (2^D - 1) bytes (SimFL's model of a tree) from its builder to each other party",
        trees=trees,
        details={"turns": turns},
    )
