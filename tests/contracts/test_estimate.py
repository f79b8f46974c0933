"""``FGBDTEstimateLib`` on a real EVM: the same estimated split Shapley values as ``ledger.spec.shapley_estimate``,
bit for bit, on both of its paths (the one whose sums cannot overflow and the checked one), the same revert where the
reference raises, and the constants the reference derives."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from chain_helpers import open_task
from eth_account.signers.local import LocalAccount
from web3.contract import Contract

from fgbdt_chain.ledger.audit.replay import audit_chain
from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec import shapley_estimate as se
from fgbdt_chain.ledger.wrappers.contracts import Status, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import RowSource, run_level

pytestmark = pytest.mark.chain

ONE = ref.ONE
SOURCE = Path(__file__).resolve().parents[2] / "contracts" / "FGBDTEstimate.sol"


@pytest.fixture(scope="module")
def estimate_lib(anvil_client: ChainClient) -> Contract:
    account: LocalAccount = anvil_client.new_account(10**22)
    return anvil_client.deploy("FGBDTEstimateLib", account)


def sides(m: int, seed: int, scale: int = ONE) -> tuple[list[int], ...]:
    rng = random.Random(seed)
    return tuple([rng.randint(-1000, 1000) * scale // (3 if q % 2 == 0 else -4) for _ in range(m)] for q in range(4))


def test_constants_are_the_references() -> None:
    text = SOURCE.read_text()
    assert re.findall(r"EXACT_MAX_PARTIES = (\d+);", text) == [str(se.EXACT_MAX_PARTIES)]
    assert re.findall(r"PERMUTATIONS = (\d+);", text) == [str(se.PERMUTATIONS)]


@pytest.mark.parametrize("m", [1, 3, 17, 40])
def test_estimate_matches_the_reference(anvil_client: ChainClient, estimate_lib: Contract, m: int) -> None:
    gl, hl, gr, hr = sides(m, m)
    hl, hr = [abs(v) for v in hl], [abs(v) for v in hr]
    for task_seed, lam in ((5, ONE // 10), (6, 0)):
        seed = se.node_seed(task_seed, 2, 5)
        gain, phi = anvil_client.call(estimate_lib, "splitShapleyEstimate", gl, hl, gr, hr, lam, seed, 50)
        assert (gain, list(phi)) == se.split_shapley_estimate(gl, hl, gr, hr, lam, seed, 50)


def test_the_checked_path_matches_and_reverts_where_the_reference_raises(
    anvil_client: ChainClient, estimate_lib: Contract
) -> None:
    # gradients of 2^126 each: their sum leaves the unchecked path's bound, their squares still fit one at a time
    big = [2**126, -(2**125), 2**124]
    h = [ONE, 2 * ONE, 3 * ONE]
    got = anvil_client.call(estimate_lib, "splitShapleyEstimate", big, h, [0, 0, 0], h, ONE, 9, 20)
    assert (got[0], list(got[1])) == se.split_shapley_estimate(big, h, [0, 0, 0], h, ONE, 9, 20)
    huge = [2**128, 2**128, 2**128]
    with pytest.raises(ref.FixedPointOverflow):
        se.split_shapley_estimate(huge, h, [0, 0, 0], h, ONE, 9, 20)
    with pytest.raises(ContractRevert, match="Panic\\(17"):
        anvil_client.call(estimate_lib, "splitShapleyEstimate", huge, h, [0, 0, 0], h, ONE, 9, 20)


def test_a_task_above_the_exact_size_trains_within_the_bound_and_audits(anvil_client: ChainClient) -> None:
    """One party more than the exact size, one tree of depth 2: every split's contributions are the reference's
    estimate from the node's seed (the task seed of ``ShapleySeedFixed``, fixed by the first transaction after
    ``start``), within the stated bound of the exact values, and the audit replays the task."""
    m = se.EXACT_MAX_PARTIES + 1
    task = TaskContract.deploy(anvil_client, anvil_client.new_account(10**22))
    cfg = TaskConfig(trees=1, depth=2, bins=4, min_parties=m, max_parties=m, min_rows=1, step_blocks=10**6, lam=ONE)
    fed = open_task(anvil_client, task, cfg, m)
    assert task.shapley_seed(fed.task_id) is None  # not known at start
    rng = random.Random(m)
    source = RowSource(rng, [p.address for p in fed.parties], 60, 4, cfg.bins + 1)
    source.start_tree(0)
    splits = 0
    while task.state(fed.task_id).status == Status.TRAINING:
        nodes = task.state(fed.task_id).open_nodes()
        votes: dict[str, list[int]] = {p.address: [rng.randint(0, 3) for _ in nodes] for p in fed.parties}
        out = run_level(task, fed.task_id, fed.parties, votes, source, fed.resolver)
        source.follow(out)
        seeded = task.shapley_seed(fed.task_id)
        assert seeded is not None
        task_seed = seeded.seed
        for j, nd in enumerate(out.open_nodes):
            if not out.resolutions[nd].events_named("NodeSplit"):
                continue
            split = out.node_event(nd, "NodeSplit")
            rank = list(out.candidates[nd]).index(int(split.args["feature"]))
            threshold = int(split.args["threshold"])
            sides = [ref.party_side_sums(out.hists[party][j], rank, threshold, 0) for party in out.submitters]
            gl, hl, gr, hr = ([s[q] for s in sides] for q in range(4))
            got = [int(v) for v in out.node_event(nd, "ContributionsAdded").args["phi"]]
            seed = se.node_seed(task_seed, out.tree, nd)
            assert got == se.split_shapley_estimate(gl, hl, gr, hr, ONE, seed)[1]
            gain, exact = ref.split_shapley(gl, hl, gr, hr, ONE)
            width = se.marginal_range(gl, hl, gr, hr, ONE)
            assert width is not None
            assert max(abs(a - b) for a, b in zip(got, exact, strict=True)) <= se.error_bound(m, width)
            assert got != exact  # estimated, not exact
            assert abs(sum(got) - gain) <= m
            splits += 1
    assert splits >= 1
    report = audit_chain(anvil_client, task.address, fed.task_id)
    assert report.ok, str(report)
