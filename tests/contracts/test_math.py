"""The contract math equals ``ledger.spec.reference`` bit for bit: Table 3, then randomised differential tests."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.ledger.wrappers.contracts import MathContract

pytestmark = pytest.mark.chain

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
BATCH = 20


def table3_sides(h2_scale: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Table 3 (the paper's worked example) at the split between the two bins, hessian = count, as (gL, hL, gR, hR)."""
    return [1 * ONE, -1 * h2_scale * ONE], [10 * ONE, 10 * ONE], [2 * ONE, 1 * h2_scale * ONE], [10 * ONE, 10 * ONE]


@pytest.mark.parametrize(
    ("scale", "gain", "phi"),
    [(1, 450, (375, 75)), (2, 850, (275, 575))],
)
def test_table3_split_shapley(math: MathContract, scale: int, gain: int, phi: tuple[int, int]) -> None:
    sides = table3_sides(scale)
    got_gain, got_phi = math.split_shapley(*sides, 0)
    assert got_gain == gain * ONE // 1000
    assert got_phi == [p * ONE // 1000 for p in phi]
    assert (got_gain, got_phi) == ref.split_shapley(*sides, 0)


def test_shapley_edge_cases(math: MathContract) -> None:
    assert math.split_shapley([], [], [], [], ONE) == (0, [])
    assert math.split_shapley([5 * ONE], [ONE], [-3 * ONE], [2 * ONE], 0) == ref.split_shapley(
        [5 * ONE], [ONE], [-3 * ONE], [2 * ONE], 0
    )
    with pytest.raises(ContractRevert) as exc:
        math.split_shapley([1, 2], [1], [1, 2], [1, 2], 0)
    assert exc.value.name == "ShapleyLengthMismatch"
    with pytest.raises(ContractRevert) as exc:
        n = 17
        math.split_shapley([1] * n, [1] * n, [1] * n, [1] * n, 0)
    assert exc.value.name == "TooManyShapleyParties"


def test_overflow_reverts_where_reference_raises(math: MathContract) -> None:
    big = 2**200
    with pytest.raises(ref.FixedPointOverflow):
        ref.split_gain(big, ONE, 0, ONE, 0)
    with pytest.raises(ContractRevert) as exc:
        math.split_gain(big, ONE, 0, ONE, 0)
    assert exc.value.name == "Panic" and exc.value.args_ == (0x11,)


# ------------------------------------------------------------------ strategies

fixed = st.integers(min_value=-(10**24), max_value=10**24)
hess = st.integers(min_value=-(10**19), max_value=10**24)  # a few non-positive denominators too
lam = st.sampled_from([0, 1, ONE // 10, ONE, 3 * ONE])


@st.composite
def shapley_case(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], list[int], int]:
    m = draw(st.integers(min_value=1, max_value=8))
    cols = [draw(st.lists(s, min_size=m, max_size=m)) for s in (fixed, hess, fixed, hess)]
    return cols[0], cols[1], cols[2], cols[3], draw(lam)


@st.composite
def node_hist(draw: st.DrawFn) -> tuple[NodeHistograms, int, int, int]:
    nbins = draw(st.integers(min_value=2, max_value=9))
    g = tuple(tuple(draw(st.lists(fixed, min_size=nbins, max_size=nbins))) for _ in range(2))
    h = tuple(tuple(draw(st.lists(st.integers(0, 10**22), min_size=nbins, max_size=nbins))) for _ in range(2))
    n = tuple(tuple(draw(st.lists(st.integers(0, 40), min_size=nbins, max_size=nbins))) for _ in range(2))
    feats = draw(st.tuples(st.integers(0, 20), st.integers(0, 20)))
    return NodeHistograms(feats, g, h, n), draw(lam), draw(st.integers(1, 30)), draw(st.sampled_from([0, 1]))


@pytest.fixture
def chain_math(anvil_math: MathContract) -> MathContract:
    return anvil_math


@SETTINGS
@given(st.lists(shapley_case(), min_size=BATCH, max_size=BATCH))
def test_split_shapley_matches_reference(anvil_math: MathContract, cases: list) -> None:
    got = anvil_math.split_shapley_many(cases)
    for case, (gain, phi) in zip(cases, got, strict=True):
        want_gain, want_phi = ref.split_shapley(*case)
        assert (gain, phi) == (want_gain, want_phi), case
        # efficiency (exact Shapley): the phi add up to the grand coalition's gain up to M units
        assert abs(sum(phi) - gain) <= len(phi)


@SETTINGS
@given(st.lists(node_hist(), min_size=BATCH, max_size=BATCH))
def test_best_split_matches_reference(anvil_math: MathContract, cases: list) -> None:
    got = anvil_math.best_split_many(cases)
    for (hist, lam_, min_rows, mode), split in zip(cases, got, strict=True):
        assert split == ref.best_split(hist, lam_, min_rows, mode), (hist, lam_, min_rows, mode)


@SETTINGS
@given(
    st.lists(
        st.integers(1, 12).flatmap(
            lambda f: st.tuples(
                st.lists(st.integers(-1, f - 1), min_size=0, max_size=12),
                st.just(f),
                st.sampled_from([ref.TIE_LOWER_INDEX, ref.TIE_HASHED]),
                st.integers(0, 2**16 - 1) | st.integers(0, 2**256 - 1),  # beyond 64 bits: truncation alike
                st.integers(0, 511) | st.integers(0, 2**256 - 1),
            )
        ),
        min_size=BATCH,
        max_size=BATCH,
    )
)
def test_top2_matches_reference(anvil_math: MathContract, cases: list) -> None:
    assert anvil_math.top2_many(cases) == [ref.top2(*case) for case in cases]


@SETTINGS
@given(fixed, hess, lam, st.integers(1, ONE))
def test_leaf_value_and_gain_match_reference(anvil_math: MathContract, g: int, h: int, lam_: int, lr: int) -> None:
    assert anvil_math.leaf_value(g, h, lam_, lr) == ref.leaf_value(g, h, lam_, lr)
    assert anvil_math.split_gain(g, h, -g // 3, h // 2, lam_) == ref.split_gain(g, h, -g // 3, h // 2, lam_)


def test_top2_equal_keys_go_to_the_lower_index(anvil_math: MathContract) -> None:
    """Beyond 2^16 features a feature's bits overlap the node's, so two features can share a hashed key; the
    contract's scan then keeps the lower index, and so must the reference (whatever order the votes came in)."""
    assert ref.tie_key(ref.TIE_HASHED, 0, 1, 65536) == ref.tie_key(ref.TIE_HASHED, 0, 1, 0)
    cases = [([65536, 0], 65537, ref.TIE_HASHED, 0, 1), ([0, 65536], 65537, ref.TIE_HASHED, 0, 1)]
    assert anvil_math.top2_many(cases) == [ref.top2(*c) for c in cases] == [(0, 65536), (0, 65536)]


def test_top2_rejects_invalid_vote_and_unknown_rule(math: MathContract) -> None:
    with pytest.raises(ContractRevert) as exc:
        math.top2([0, 3], 3, ref.TIE_HASHED)
    assert exc.value.name == "InvalidVote" and exc.value.args_ == (1, 3)
    with pytest.raises(ContractRevert) as exc:
        math.top2([0, 1], 3, 2)
    assert exc.value.name == "UnknownTieRule" and exc.value.args_ == (2,)
    # both wrong: the vote is reported first, by the contract and the reference alike
    with pytest.raises(ContractRevert) as exc:
        math.top2([0, 3], 3, 2)
    assert exc.value.name == "InvalidVote"
    with pytest.raises(ValueError, match="not a feature index"):
        ref.top2([0, 3], 3, 2)


def _packed(votes: list[int]) -> bytes:
    """Votes as the contract packs ballots: feature + 1 (0 abstains) in two big-endian bytes each."""
    return b"".join((v + 1).to_bytes(2, "big") for v in votes)


@st.composite
def ahead_cases(draw: st.DrawFn) -> tuple[int, list[int], list[int], list[int]]:
    """A level that opened (``level`` >= 1) from a random open set of the level before, and ballots sent ahead; or
    a tree's root (level 0, no level before) and its one vote sent ahead."""
    level = draw(st.integers(0, 8))
    if level == 0:
        return 0, [], [1], [draw(st.integers(-1, 299))]
    parents = draw(st.lists(st.integers(0, (1 << (level - 1)) - 1), min_size=1, unique=True))
    previous = sorted((1 << (level - 1)) + b for b in parents)
    children = [2 * p + c for p in previous for c in (0, 1)]
    opened = sorted(draw(st.lists(st.sampled_from(children), unique=True)))
    ahead = draw(st.lists(st.integers(-1, 299), min_size=2 * len(previous), max_size=2 * len(previous)))
    return level, previous, opened, ahead


def _mask(nodes: list[int], level: int) -> int:
    return sum(1 << (n - (1 << level)) for n in nodes)


@SETTINGS
@given(st.lists(ahead_cases(), min_size=BATCH, max_size=BATCH))
def test_ahead_ballot_matches_reference(anvil_math: MathContract, cases: list) -> None:
    """The ballot sent ahead, cut to the nodes that opened, is the reference's ``ahead_ballot``, byte for byte."""
    for level, previous, opened, ahead in cases:
        got = anvil_math.ahead_ballot(_packed(ahead), _mask(previous, level - 1), _mask(opened, level), level)
        assert got == _packed(ref.ahead_ballot(ahead, previous, opened))


def test_ahead_ballot_keeps_each_child_its_own_vote() -> None:
    """Nodes 2 and 3 open at level 1; at level 2 only 5 and 6 do: the right child of 2, the left child of 3."""
    assert ref.ahead_ballot([10, 11, 12, 13], [2, 3], [5, 6]) == [11, 12]
    assert ref.ahead_ballot([10, 11], [3], []) == []
    with pytest.raises(ValueError, match="two per node"):
        ref.ahead_ballot([10, 11, 12], [2, 3], [4])
    with pytest.raises(ValueError, match="not children"):
        ref.ahead_ballot([10, 11], [2], [6])


def test_ahead_ballot_of_a_root_is_its_one_vote() -> None:
    """A root's ballot sent ahead (while the tree before resolved its last level) is one vote, for node 1."""
    assert ref.ahead_ballot([7], [], [1]) == [7]
    assert ref.ahead_ballot([-1], [], [1]) == [-1]
    with pytest.raises(ValueError, match="one, for node 1"):
        ref.ahead_ballot([7, 8], [], [1])
    with pytest.raises(ValueError, match="one, for node 1"):
        ref.ahead_ballot([7], [], [2])
