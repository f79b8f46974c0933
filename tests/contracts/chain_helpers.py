"""Helpers for the chain tests: task setup, random histograms, and the reference replay of a level."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.devnet.embedded_rpc import CLIENT_VERSION
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import encode_edges
from fgbdt_chain.ledger.wrappers.contracts import TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import LevelOutcome, RowSource

__all__ = ["RowSource"]
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms


def is_embedded(chain: ChainClient) -> bool:
    """Whether ``chain`` is the embedded py-evm chain (an order of magnitude slower per transaction than anvil)."""
    return str(chain.w3.client_version).startswith(CLIENT_VERSION.split("/")[0])


@dataclass
class Federation:
    """A started task: its requester, its approved parties (party order) and a resolver account."""

    task: TaskContract
    task_id: int
    cfg: TaskConfig
    requester: LocalAccount
    parties: list[LocalAccount]
    resolver: LocalAccount
    num_features: int


def open_task(
    chain: ChainClient,
    task: TaskContract,
    cfg: TaskConfig,
    num_parties: int,
    num_features: int = 4,
    reward: int = 10**18,
    start: bool = True,
    edges: bytes | None = None,
) -> Federation:
    """Create a task, have ``num_parties`` fresh accounts join, approve them all and (optionally) start with
    ``edges`` (default: ``edges_for(cfg.bins)``, histograms of ``bins + 1`` slots)."""
    requester = chain.new_account(10**21)
    parties = [chain.new_account(10**20) for _ in range(num_parties)]
    resolver = chain.new_account(10**20)
    task_id, _ = task.create_task(requester, cfg, [0] * num_features, [ONE] * num_features, reward=reward)
    for i, p in enumerate(parties):
        task.join(p, task_id, b"psd-" + bytes([i]), f"http://party{i}.example/endorse")
        task.approve(requester, task_id, p.address)
    if start:
        task.start(requester, task_id, edges if edges is not None else edges_for(cfg.bins))
    return Federation(task, task_id, cfg, requester, parties, resolver, num_features)


def reverts(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ContractRevert:
    """Call ``fn`` and check it reverts with the custom error ``name``."""
    with pytest.raises(ContractRevert) as exc:
        fn(*args, **kwargs)
    assert exc.value.name == name, exc.value
    return exc.value


def edges_for(bins: int, features: int = 5) -> bytes:
    """Encoded bin edges whose features use all ``bins`` value bins, so that a task of ``bins`` takes histograms of
    ``bins + 1`` slots (the width ``start`` reads from the encoding), as the tests build them."""
    return encode_edges([[(i + 1) / bins for i in range(bins - 1)]] * features)


EDGES = edges_for(3)
"""Encoded bin edges for the test tasks of 3 bins (the contract hashes and emits them; the chain model decodes them)."""


def random_hist(rng: random.Random, features: tuple[int, int], nbins: int, first_tree: bool = True) -> NodeHistograms:
    """Histograms that keep every exact rule (``ledger.spec.histogram_rules``) at a tree's root: the sums of a few
    random
    logistic rows (at score 0 in the first tree), the same rows in both candidates. For guards that need one valid
    submission."""
    rows = [
        (rng.randrange(nbins), rng.randrange(nbins), 0.5 if first_tree else rng.random(), rng.random() < 0.3)
        for _ in range(12)
    ]
    g = [[0] * nbins for _ in range(2)]
    h = [[0] * nbins for _ in range(2)]
    n = [[0] * nbins for _ in range(2)]
    for b0, b1, p, y in rows:
        qg, qh = ref.to_fixed(p - y), ref.to_fixed(p * (1 - p))
        for k, b in enumerate((b0, b1)):
            g[k][b] += qg
            h[k][b] += qh
            n[k][b] += 1
    return NodeHistograms(features, tuple(map(tuple, g)), tuple(map(tuple, h)), tuple(map(tuple, n)))


@dataclass
class Replay:
    """The reference's view of a task, level by level, to compare with the contract."""

    params: ref.Params
    depth: int
    totals: dict[tuple[int, int], ref.Totals] = field(default_factory=dict)
    contributions: dict[str, int] = field(default_factory=dict)
    results: dict[tuple[int, int], ref.NodeResult] = field(default_factory=dict)
    credits: dict[str, ref.Credit] = field(default_factory=dict)
    """Each party's credit for the current tree (neutral when absent)."""

    def level(self, out: LevelOutcome, rows: RowSource | None = None) -> None:
        """Resolve every open node of ``out`` with ``reference.resolve_node`` (routing ``rows`` along the splits)."""
        last = out.level == self.depth - 1
        for idx, node in enumerate(out.open_nodes):
            hists = [out.hists[a][idx] for a in out.submitters]
            votes = [out.votes[a][idx] for a in out.submitters]
            inherited = self.totals.get((out.tree, node)) if node != 1 else None
            credits = [self.credits.get(a, ref.NEUTRAL) for a in out.submitters]
            res = ref.resolve_node(hists, votes, inherited, last, self.params, credits)
            self.results[(out.tree, node)] = res
            if rows is not None and res.split is not None:
                rows.split(node, res.split.feature, res.split.threshold)
            if rows is not None:
                for leaf, value in ((node, res.leaf), (2 * node, res.left_leaf), (2 * node + 1, res.right_leaf)):
                    if value is not None:
                        rows.set_leaf(leaf, value)
            if res.left is not None and res.right is not None:
                self.totals[(out.tree, 2 * node)] = res.left
                self.totals[(out.tree, 2 * node + 1)] = res.right
            for a, c in zip(out.submitters, res.contribution, strict=True):
                self.contributions[a] = self.contributions.get(a, 0) + c


def params_of(cfg: TaskConfig) -> ref.Params:
    """The reference parameters of a task config."""
    return ref.Params(cfg.lam, cfg.learning_rate, cfg.min_rows, cfg.alpha, cfg.hessian_mode)


def assert_level_matches(fed: Federation, replay: Replay, out: LevelOutcome) -> None:
    """The contract's node records and contribution events equal the reference's results, bit for bit."""
    task = fed.task
    for j, node in enumerate(out.open_nodes):
        if ref.draws(out.tree, fed.cfg.voted_trees):
            assert out.candidates[node] == ref.drawn_candidates(fed.num_features, out.tree, node)
        else:
            ballots = [out.votes[v][j] for v in out.voters]
            assert out.candidates[node] == ref.top2(ballots, fed.num_features, fed.cfg.tie_break, out.tree, node)
        want = replay.results[(out.tree, node)]
        rec = task.node(fed.task_id, out.tree, node)
        ev = out.node_event(node, "ContributionsAdded").args
        assert list(ev["parties"]) == out.submitters
        assert tuple(ev["phi"]) == want.phi
        assert tuple(ev["kappa"]) == want.kappa
        assert tuple(ev["contribution"]) == want.contribution
        if want.split is None:
            assert rec.kind == 3 and rec.value == want.leaf, (node, rec, want)
            continue
        assert rec.kind == 2, (node, rec, want)
        assert (rec.feature, rec.threshold, rec.value) == (want.split.feature, want.split.threshold, want.split.gain)
        assert out.candidates[node][want.split.rank] == want.split.feature
        assert want.left is not None and want.right is not None
        left = task.node(fed.task_id, out.tree, 2 * node)
        right = task.node(fed.task_id, out.tree, 2 * node + 1)
        assert (left.g, left.h, left.n) == (want.left.g, want.left.h, want.left.n)
        assert (right.g, right.h, right.n) == (want.right.g, want.right.h, want.right.n)
        if want.left_leaf is not None:
            assert (left.kind, left.value) == (3, want.left_leaf)
            assert (right.kind, right.value) == (3, want.right_leaf)
        else:
            assert left.kind == 1 and right.kind == 1


def random_votes(
    rng: random.Random, parties: Sequence[LocalAccount], nodes: int, features: int
) -> dict[str, list[int]]:
    """Random votes (abstentions included) per party."""
    return {p.address: [rng.randint(-1, features - 1) for _ in range(nodes)] for p in parties}
