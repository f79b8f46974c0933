"""A resolved level as the simulator keeps it: the contract's ``NodeResult`` of every open node, made when read.

Why: ``node.kernels.resolve_kernel`` resolves a level on 256-bit digits. Turning every node's twenty-odd values into
Python
integers cost about what computing them did, and training reads few of them: a split's feature, threshold and gain,
a leaf's value, the row counts, and each party's sums of phi, kappa and contribution. ``ResolvedLevel`` gives those
directly and builds a node's full ``NodeResult`` only when it is read (an observer, the audit trail, the verifiers'
carry, a test). A level resolved on Python integers (the fallback where the digits' bounds do not hold) is held in
the same form, so the simulator reads both alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.node.kernels import resolve_kernel as rk
from fgbdt_chain.node.kernels import wide_int as wi
from fgbdt_chain.node.model.trees import Node, Tree

_WIDTH = 4 * wi.DIGITS
"""Bytes of one value's digits, as little-endian 32-bit words."""


def wide_ints(digits: np.ndarray) -> list[int]:
    """The Python integers of values held as digits (..., DIGITS), flattened in C order."""
    raw = np.ascontiguousarray(digits, dtype=np.uint64).astype("<u4").tobytes()
    return [int.from_bytes(raw[i : i + _WIDTH], "little", signed=True) for i in range(0, len(raw), _WIDTH)]


_EMPTY = np.zeros((0, 0, wi.DIGITS), dtype=np.uint64)
"""A level's digits before it is filled (never written)."""


def _digits_of(values: Sequence[int]) -> np.ndarray:
    """``wide_ints``' inverse, (len(values), DIGITS); OverflowError outside int256."""
    if not values:
        return np.zeros((0, wi.DIGITS), dtype=np.uint64)
    return np.stack([wi.to_digits(v) for v in values])


class Inherited:
    """The totals each open node of a level inherits from its parent's split (None at a root), in the level's node
    order: as Python ``Totals`` for the reference's path and as digits for the compiled one, each made from the other
    when first asked for."""

    def __init__(
        self,
        totals: Sequence[ref.Totals | None] | None = None,
        digits: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        if (totals is None) == (digits is None):
            raise ValueError("inherited totals come as Python values or as digits, one of them")
        self._totals = None if totals is None else list(totals)
        self._digits = digits
        self._tried = digits is not None
        self._given = "totals" if totals is not None else "digits"

    def __getstate__(self) -> dict[str, object]:
        """The form it was made from only: a copy or a pickle does not depend on which form was read since."""
        if self._given == "totals":
            return {"_totals": self._totals, "_digits": None, "_tried": False, "_given": "totals"}
        return {"_totals": None, "_digits": self._digits, "_tried": True, "_given": "digits"}

    @classmethod
    def roots(cls, count: int = 1) -> Inherited:
        """Nodes without a parent: a tree's root."""
        return cls([None] * count)

    def __len__(self) -> int:
        return len(self._totals) if self._totals is not None else int(self._digits[0].shape[0])  # type: ignore[index]

    @property
    def totals(self) -> list[ref.Totals | None]:
        """Per node its inherited ``Totals``, None at a root."""
        if self._totals is None:
            assert self._digits is not None
            has, gh, n = self._digits
            values = wide_ints(gh)
            self._totals = [
                ref.Totals(values[2 * j], values[2 * j + 1], int(n[j])) if has[j] else None for j in range(has.shape[0])
            ]
        return list(self._totals)

    @property
    def digits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(has (K,), g and h (K, 2, DIGITS), n (K,)), or None where a value leaves int256 or a count int64 (the
        compiled path cannot take them; the reference's raises where the contract reverts)."""
        if not self._tried:
            self._tried = True
            assert self._totals is not None
            has = np.array([t is not None for t in self._totals], dtype=np.bool_)
            present = [t for t in self._totals if t is not None]
            try:
                gh = np.zeros((len(self._totals), 2, wi.DIGITS), dtype=np.uint64)
                gh[has] = _digits_of([v for t in present for v in (t.g, t.h)]).reshape(-1, 2, wi.DIGITS)
                n = np.zeros(len(self._totals), dtype=np.int64)
                n[has] = np.array([t.n for t in present], dtype=np.int64)
            except OverflowError:
                return None
            self._digits = has, gh, n
        return self._digits


class ResolvedLevel(Sequence[ref.NodeResult]):
    """Every open node's resolution (module docstring): ``node(j)`` or ``self[j]`` is ``resolve_node``'s result."""

    is_split: np.ndarray
    """(K,) whether each node splits."""
    ints: np.ndarray
    """(K, ``resolve_kernel.NUM_INTS``): a split's rank, feature, threshold, left and right counts; the node's count."""

    def __init__(self, num_parties: int, last_level: bool) -> None:
        self.m = num_parties
        self.last_level = last_level
        self.from_kernel = False
        """Whether ``node.kernels.resolve_kernel`` resolved the level (else the reference's path on Python integers)."""
        self._nodes: dict[int, ref.NodeResult] = {}
        # the reference's results (``of_results``), or the kernel's digits (``compiled``)
        self._results: list[ref.NodeResult] | None = None
        self._totals: list[ref.Totals] = []
        self._vals = self._phi = self._contrib = self._votes = _EMPTY
        self._sums: tuple[list[int], list[int], list[int]] = ([], [], [])
        self._gains: list[int] = []
        self._leaves: list[int | None] = []
        self._child_leaves: list[tuple[int, int] | None] = []
        self._children = Inherited([])

    @classmethod
    def compiled(
        cls,
        out: rk.LevelArrays,
        votes: np.ndarray,
        last_level: bool,
    ) -> ResolvedLevel:
        """From ``resolve_kernel.resolve_arrays``' results (``ok`` true) and the votes (K, M) it took."""
        _, is_split, ints, vals, phi, contrib, _, child_gh, child_n, read = out
        level = cls(votes.shape[1], last_level)
        level.from_kernel = True
        level.is_split, level.ints = is_split, ints
        level._vals, level._phi, level._contrib, level._votes = vals, phi, contrib, votes
        level._children = Inherited(digits=(np.ones(child_n.shape[0], dtype=np.bool_), child_gh, child_n))
        # what training reads, converted at once (the kernel's ``read``): a split's gain or a leaf's value per node,
        # a last level's splits' children's leaf values, the per-party sums
        flat = wide_ints(read)
        k, m = is_split.shape[0], level.m
        split = is_split.tolist()
        level._gains = [v if s else 0 for v, s in zip(flat[:k], split, strict=True)]
        level._leaves = [None if s else v for v, s in zip(flat[:k], split, strict=True)]
        kids = iter(flat[k : len(flat) - 3 * m])
        level._child_leaves = [(next(kids), next(kids)) if s and last_level else None for s in split]
        tail = flat[len(flat) - 3 * m :]
        level._sums = (tail[:m], tail[m : 2 * m], tail[2 * m :])
        return level

    @classmethod
    def of_results(
        cls, results: Sequence[ref.NodeResult], totals: Sequence[ref.Totals], num_parties: int, last_level: bool
    ) -> ResolvedLevel:
        """The same view of results the reference's path made (Python integers)."""
        level = cls(num_parties, last_level)
        k = len(results)
        level.is_split = np.array([r.split is not None for r in results], dtype=np.bool_)
        level.ints = np.zeros((k, rk.NUM_INTS), dtype=np.int64)
        for j, (res, tot) in enumerate(zip(results, totals, strict=True)):
            level.ints[j, rk.I_N] = tot.n
            if res.split is not None:
                s = res.split
                level.ints[j, : rk.I_N] = (s.rank, s.feature, s.threshold, s.n_left, s.n_right)
        level._results = list(results)
        level._totals = list(totals)
        level._gains = [r.split.gain if r.split is not None else 0 for r in results]
        level._leaves = [r.leaf for r in results]
        level._child_leaves = [
            (r.left_leaf, r.right_leaf) if r.left_leaf is not None and r.right_leaf is not None else None
            for r in results
        ]
        kids: list[ref.Totals | None] = []
        for r in results:
            if r.split is not None:
                kids += [r.left, r.right]
        level._children = Inherited(kids)
        phi, kappa, contribution = (
            [sum(getattr(r, name)[p] for r in results) for p in range(num_parties)]
            for name in ("phi", "kappa", "contribution")
        )
        level._sums = (phi, kappa, contribution)
        return level

    # -- what training reads -------------------------------------------------------------------------------------

    @property
    def feature(self) -> np.ndarray:
        """(K,) each split's feature (-1 at a leaf)."""
        return np.where(self.is_split, self.ints[:, rk.I_FEATURE], -1)

    @property
    def threshold(self) -> np.ndarray:
        """(K,) each split's threshold (0 at a leaf)."""
        return np.where(self.is_split, self.ints[:, rk.I_THRESHOLD], 0)

    def gains(self) -> list[int]:
        """Each node's split gain (0 at a leaf)."""
        return list(self._gains)

    def leaves(self) -> list[int | None]:
        """Each node's leaf value where it is a leaf, else None."""
        return list(self._leaves)

    def child_leaves(self) -> list[tuple[int, int] | None]:
        """At the last level, each split's two children's leaf values (left, right), else None."""
        return list(self._child_leaves)

    def leaf_values(self) -> list[int]:
        """Every leaf value the level sets: a leaf's own, a last level's split's two children's."""
        out = [v for v in self.leaves() if v is not None]
        for pair in self.child_leaves():
            if pair is not None:
                out += pair
        return out

    @property
    def phi_sums(self) -> list[int]:
        """Each submitting party's phi summed over the level's nodes."""
        return list(self._sums[rk.S_PHI])

    @property
    def kappa_sums(self) -> list[int]:
        return list(self._sums[rk.S_KAPPA])

    @property
    def contribution_sums(self) -> list[int]:
        return list(self._sums[rk.S_CONTRIBUTION])

    def children(self) -> Inherited:
        """The next level's inherited totals: each split's left then right child's, in node order."""
        return self._children

    def totals(self) -> list[ref.Totals]:
        """Each node's totals (inherited, or a root's from its candidate 0), as ``resolve_level`` returns them."""
        if self._results is not None:
            return list(self._totals)
        gh = wide_ints(self._vals[:, rk.V_TOTAL_G : rk.V_TOTAL_H + 1])
        return [ref.Totals(gh[2 * j], gh[2 * j + 1], int(n)) for j, n in enumerate(self.ints[:, rk.I_N].tolist())]

    # -- the full results ----------------------------------------------------------------------------------------

    def node(self, j: int) -> ref.NodeResult:
        """Node ``j``'s ``NodeResult``, as ``resolve_node`` makes it."""
        if self._results is not None:
            return self._results[j]
        res = self._nodes.get(j)
        if res is None:
            res = self._nodes[j] = self._make(j)
        return res

    def _make(self, j: int) -> ref.NodeResult:
        zeros = (0,) * self.m
        if not self.is_split[j]:
            return ref.NodeResult(
                None, wide_ints(self._vals[j, rk.V_LEAF])[0], None, None, None, None, zeros, zeros, zeros
            )
        v = wide_ints(self._vals[j])
        rank, feature, threshold, n_left, n_right, _ = self.ints[j].tolist()
        split = ref.Split(
            rank,
            feature,
            threshold,
            v[rk.V_GAIN],
            v[rk.V_G_LEFT],
            v[rk.V_H_LEFT],
            n_left,
            v[rk.V_G_RIGHT],
            v[rk.V_H_RIGHT],
            n_right,
        )
        left = ref.Totals(v[rk.V_G_LEFT], v[rk.V_H_LEFT], n_left)
        right = ref.Totals(v[rk.V_G_RIGHT], v[rk.V_H_RIGHT], n_right)
        left_leaf = v[rk.V_LEFT_LEAF] if self.last_level else None
        right_leaf = v[rk.V_RIGHT_LEAF] if self.last_level else None
        gain = v[rk.V_CREDITED_GAIN]
        kappa = tuple(ref.voting_contribution(int(vote), feature, gain) for vote in self._votes[j])
        phi = tuple(wide_ints(self._phi[j]))
        contribution = tuple(wide_ints(self._contrib[j]))
        return ref.NodeResult(split, None, left, right, left_leaf, right_leaf, phi, kappa, contribution, gain)

    def __len__(self) -> int:
        return int(self.is_split.shape[0])

    def __getstate__(self) -> dict[str, object]:
        """Without the nodes made so far: a copy or a pickle does not depend on which nodes were read."""
        return {k: v for k, v in self.__dict__.items() if k != "_nodes"}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._nodes = {}

    @overload
    def __getitem__(self, j: int) -> ref.NodeResult: ...

    @overload
    def __getitem__(self, j: slice) -> list[ref.NodeResult]: ...

    def __getitem__(self, j: int | slice) -> ref.NodeResult | list[ref.NodeResult]:
        if isinstance(j, slice):
            return [self.node(i) for i in range(len(self))[j]]
        if not -len(self) <= j < len(self):
            raise IndexError(f"node {j} of a level of {len(self)}")
        return self.node(j % len(self))

    def __iter__(self) -> Iterator[ref.NodeResult]:
        return (self.node(j) for j in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to another level, or a list, of the same node results (however each was made)."""
        if isinstance(other, ResolvedLevel | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable caches; equality is by value


def grow_level(
    tree: Tree, leaf_value: np.ndarray, open_nodes: Sequence[int], results: ResolvedLevel, last: bool
) -> list[tuple[int, int, int, int, int]]:
    """Write a resolved level into the tree being grown: each open node a leaf or a split, and on the last level
    both children of each split as leaves; ``leaf_value`` (by heap id) takes every leaf's value. Returns the splits
    as ``(j, node id, rank, feature, threshold)`` (``j`` the node's place in ``open_nodes``), for what the caller
    keeps per split. One place for the simulator and a task trained party by party, which must grow the same
    trees."""
    gains, leaves = results.gains(), results.leaves()
    child_leaves = results.child_leaves() if last else []
    splits: list[tuple[int, int, int, int, int]] = []
    for j, (nid, (rank, feature, threshold, n_left, n_right, count)) in enumerate(
        zip(open_nodes, results.ints.tolist(), strict=True)
    ):
        leaf = leaves[j]
        if leaf is not None:
            tree.nodes[nid] = Node.leaf(leaf, count)
            leaf_value[nid] = leaf / ref.ONE
            continue
        tree.nodes[nid] = Node.split(feature, threshold, gains[j], n_left + n_right)
        splits.append((j, nid, rank, feature, threshold))
        if last:
            pair = child_leaves[j]
            assert pair is not None
            tree.nodes[2 * nid] = Node.leaf(pair[0], n_left)
            tree.nodes[2 * nid + 1] = Node.leaf(pair[1], n_right)
            leaf_value[2 * nid] = pair[0] / ref.ONE
            leaf_value[2 * nid + 1] = pair[1] / ref.ONE
    return splits
