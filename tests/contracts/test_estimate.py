"""``FGBDTEstimateLib`` on a real EVM: the same estimated split Shapley values as ``ledger.spec.shapley_estimate``,
bit for bit, on both of its paths (the one whose sums cannot overflow and the checked one), the same revert where the
reference raises, and the constants the reference derives."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount
from web3.contract import Contract

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec import shapley_estimate as se

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
