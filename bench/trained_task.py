"""A completed task driven through the contract with synthetic rows: the long-lived task the API benchmarks read.

One definition for ``bench.api_load`` (its reads phase) and ``bench.dashboard`` (the 500-tree page), so that both
read a task built the same way: two parties, the in-process federation driver (``ledger.wrappers.federation``:
every level's votes, endorsed histograms and resolution sent as the party nodes send them), rows from
``RowSource`` so that every submission keeps the contract's exact rules.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.spec.edges import encode_edges
from fgbdt_chain.ledger.spec.reference import ONE
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import RowSource, run_level

FEATURES = 3


def trained_task(
    client: ChainClient,
    task: TaskContract,
    trees: int,
    depth: int,
    rows: int = 200,
    progress: Callable[[int, float], None] | None = None,
) -> int:
    """A completed task of ``trees`` trees of ``depth`` between two parties of ``rows`` rows each, with a reward;
    ``progress(tree, seconds)`` is told as each tree starts."""
    rng = random.Random(0)
    cfg = TaskConfig(trees=trees, depth=depth, bins=4, min_parties=2, max_parties=2, lam=ONE, step_blocks=5)
    requester = client.new_account(10**21)
    parties = [client.new_account(10**21) for _ in range(2)]
    resolver = client.new_account(10**21)
    tid, _ = task.create_task(requester, cfg, [0] * FEATURES, [ONE] * FEATURES, reward=10**18)
    for i, p in enumerate(parties):
        task.join(p, tid, b"psd" + bytes([i]), f"http://p{i}.example")
        task.approve(requester, tid, p.address)
    task.start(requester, tid, encode_edges([[0.25, 0.5, 0.75]] * FEATURES))
    source = RowSource(rng, [p.address for p in parties], rows, FEATURES, cfg.bins + 1, "binary")
    started = time.monotonic()
    while task.state(tid).status == 2:
        st = task.state(tid)
        if st.level == 0:
            source.start_tree(st.tree)
            if progress is not None:
                progress(st.tree, time.monotonic() - started)
        nodes = st.open_nodes()
        votes: dict[str, list[int]] = {p.address: [rng.randint(0, FEATURES - 1) for _ in nodes] for p in parties}
        source.follow(run_level(task, tid, parties, votes, source, resolver, endorsers=parties))
    return tid
