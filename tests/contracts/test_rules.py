"""The exact histogram rules, continuity and credits on a real EVM, each against ``ledger`` (the reference)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from chain_helpers import Federation, Replay, RowSource, open_task, params_of, random_hist
from eth_account.signers.local import LocalAccount

from fgbdt_chain.ledger.rpc.client import ChainClient
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.encoding import node_block
from fgbdt_chain.ledger.spec.histogram_rules import HistogramRuleError, Sides, bounds_of, check_level
from fgbdt_chain.ledger.spec.reference import ONE, NodeHistograms
from fgbdt_chain.ledger.wrappers.contracts import Phase, TaskConfig, TaskContract
from fgbdt_chain.ledger.wrappers.federation import run_level

pytestmark = pytest.mark.chain

CFG = TaskConfig(trees=2, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=ONE, step_blocks=40)


def _submit_outcome(fed: Federation, party: LocalAccount, hists: list[NodeHistograms]) -> str:
    """What ``submitHistograms`` says to ``hists`` (endorsed by everyone else): "ok" or the custom error's name.
    An ``eth_call``, so nothing is submitted."""
    st = fed.task.state(fed.task_id)
    endorsers = [q for q in fed.parties if q.address != party.address]
    ends = [fed.task.endorse(q, fed.task_id, st.tree, st.level, party.address, hists) for q in endorsers]
    data = [x for h in hists for x in node_block(h)]
    try:
        fed.task.client.call(
            fed.task.contract,
            "submitHistograms",
            fed.task_id,
            st.tree,
            st.level,
            data,
            [e.as_tuple() for e in ends],
            sender=party.address,
        )
    except ContractRevert as exc:
        return exc.name
    return "ok"


def _reference_outcome(
    hists: list[NodeHistograms], nodes: list[int], objective: int, first_tree: bool, sides: dict[int, Sides] | None
) -> str:
    try:
        check_level(hists, nodes, objective, first_tree, sides)
    except HistogramRuleError as exc:
        return exc.name
    except ref.FixedPointOverflow:
        return "Panic"
    return "ok"


def _vote(fed: Federation, parties: list[LocalAccount], votes: list[int]) -> None:
    for p in parties:
        fed.task.submit_votes(p, fed.task_id, *_step(fed), votes)
    assert fed.task.state(fed.task_id).phase == Phase.HISTOGRAMS  # the last vote closed the step


def _step(fed: Federation) -> tuple[int, int]:
    st = fed.task.state(fed.task_id)
    return st.tree, st.level


def _edit(hist: NodeHistograms, field: str, rank: int, slot: int, delta: int) -> NodeHistograms:
    rows = [list(r) for r in getattr(hist, field)]
    rows[rank][slot] += delta
    values = {f: getattr(hist, f) for f in ("g", "h", "n")}
    values[field] = tuple(map(tuple, rows))
    return NodeHistograms(hist.features, values["g"], values["h"], values["n"])


def _fullest(hist: NodeHistograms, rank: int) -> int:
    return max(range(len(hist.n[rank])), key=lambda b: hist.n[rank][b])


def _moved(hist: NodeHistograms, field: str, frm: int, to: int, amount: int) -> NodeHistograms:
    """``amount`` of ``field`` moved between two slots of both candidates: the totals stay equal."""
    out = hist
    for rank in range(2):
        out = _edit(_edit(out, field, rank, frm, -amount), field, rank, to, amount)
    return out


def test_each_rule_reverts_with_its_name_as_the_reference_raises(chain: ChainClient, task_contract: TaskContract):
    """One submission per rule, broken in the way that rule alone catches: the contract reverts with the rule's
    custom error and the reference raises the same, so the two agree on which rule broke."""
    fed = open_task(chain, task_contract, CFG, 3)
    p = fed.parties[0]
    _vote(fed, fed.parties, [0])
    base = random_hist(random.Random(1), (0, 1), CFG.bins + 1)  # the first tree: rows at score 0
    assert _submit_outcome(fed, p, [base]) == "ok"
    n0 = base.n[0]
    full = max(range(len(n0)), key=lambda b: n0[b])
    empty = min(range(len(n0)), key=lambda b: n0[b])
    cases: dict[str, NodeHistograms] = {
        "CandidateTotalsMismatch": _edit(base, "n", 1, 0, 1),
        "CountOutOfRange": _moved(base, "n", empty, full, n0[empty] + 1),
        "GradientOutOfRange": _moved(base, "g", full, empty, (n0[empty] + 1) * ONE),
        "HessianOutOfRange": _moved(base, "h", empty, full, base.h[0][empty] + 1),
        "FirstTreeLabels": _edit(_edit(base, "h", 0, full, -1), "h", 1, _fullest(base, 1), -1),
    }
    for name, hist in cases.items():
        assert _reference_outcome([hist], [1], 0, True, None) == name
        assert _submit_outcome(fed, p, [hist]) == name, name
    # the concavity bound: four rows whose gradients sum to 3 cannot hold a hessian sum of 1
    g = (0, 3 * ONE, 0, 0)
    bound = NodeHistograms((0, 1), (g, g), ((0, ONE, 0, 0),) * 2, ((0, 4, 0, 0),) * 2)
    assert _reference_outcome([bound], [1], 0, False, None) == "LogisticBound"
    assert _submit_outcome(fed, p, [bound]) in ("LogisticBound",)


def test_random_edits_get_the_same_verdict_from_contract_and_reference(
    anvil_client: ChainClient, task_contract_anvil: TaskContract
) -> None:
    """Random one-slot edits of valid histograms, at the first tree and past it: the contract's verdict (accept or
    the named revert) is the reference's, edit after edit."""
    rng = random.Random(7)
    fed = open_task(anvil_client, task_contract_anvil, CFG, 3)
    p = fed.parties[0]
    _vote(fed, fed.parties, [0])
    verdicts: set[str] = set()
    for _ in range(60):
        hist = random_hist(rng, (0, 1), CFG.bins + 1, first_tree=True)
        field = rng.choice(("g", "h", "n"))
        scale = ONE if field != "n" else 1
        edited = _edit(hist, field, rng.randrange(2), rng.randrange(CFG.bins + 1), rng.randint(-3, 3) * scale)
        if rng.random() < 0.5:  # keep the totals equal, so the bin rules are reached
            edited = _moved(
                hist, field, rng.randrange(CFG.bins + 1), rng.randrange(CFG.bins + 1), rng.randint(0, 3) * scale
            )
        want = _reference_outcome([edited], [1], 0, True, None)
        assert _submit_outcome(fed, p, [edited]) == want
        verdicts.add(want)
    assert {"ok", "CandidateTotalsMismatch", "FirstTreeLabels"} <= verdicts


@pytest.fixture(scope="module")
def task_contract_anvil(anvil_client: ChainClient) -> TaskContract:
    return TaskContract.deploy(anvil_client, anvil_client.new_account(10**21))


def test_children_must_carry_the_parents_side_sums(chain: ChainClient, task_contract: TaskContract) -> None:
    """Below the root a party's node totals are its own side sums at the parent's split: moving one row's worth
    between siblings (each node's candidates still equal) is refused, and so is stretching a whole level."""
    fed = open_task(chain, task_contract, CFG, 3)
    rows = RowSource(random.Random(3), [p.address for p in fed.parties], 40, fed.num_features, CFG.bins + 1)
    rows.start_tree(0)
    rows.follow(
        run_level(fed.task, fed.task_id, fed.parties, {a.address: [0] for a in fed.parties}, rows, fed.resolver)
    )
    nodes = fed.task.state(fed.task_id).open_nodes()
    assert nodes == [2, 3]
    _vote(fed, fed.parties, [1, 1])
    p = fed.parties[0]
    st = fed.task.state(fed.task_id)
    recs = [fed.task.node(fed.task_id, st.tree, n) for n in nodes]
    cands = [(r.cand0, r.cand1) for r in recs]
    good = [rows(p.address, n, c) for n, c in zip(nodes, cands, strict=True)]
    assert _submit_outcome(fed, p, good) == "ok"
    # one of its rows sent to the other child: every bin is still a sum of real rows, but not the parent's sides
    ids = rows.node[p.address]
    ids[int(next(i for i in range(ids.size) if ids[i] == 2))] = 3
    moved = [rows(p.address, n, c) for n, c in zip(nodes, cands, strict=True)]
    assert (
        _reference_outcome(moved, nodes, 0, True, {1: Sides.of(*_root_side(fed, p, rows))}) == "InheritedTotalsMismatch"
    )
    assert _submit_outcome(fed, p, moved) == "InheritedTotalsMismatch"
    stretched = [NodeHistograms(h.features, tuple(tuple(2 * x for x in r) for r in h.g), h.h, h.n) for h in good]
    assert _submit_outcome(fed, p, stretched) != "ok"


def _root_side(fed: Federation, party: LocalAccount, rows: RowSource) -> tuple[NodeHistograms, int, int]:
    """The party's root histograms (as it sent them) with the root's chosen split rank and threshold."""
    rec = fed.task.node(fed.task_id, 0, 1)
    ids = rows.node[party.address].copy()
    rows.node[party.address][:] = 1
    root = rows(party.address, 1, (rec.cand0, rec.cand1))
    rows.node[party.address][:] = ids
    rank = 0 if rec.feature == rec.cand0 else 1
    return root, rank, rec.threshold


def test_a_party_out_of_a_step_is_out_of_the_task(chain: ChainClient, task_contract: TaskContract) -> None:
    """Silent at one step, a party cannot vote at the next (``Excluded``); the step closes as soon as the parties
    still taking part voted, and the excluded party's endorsements still count."""
    fed = open_task(chain, task_contract, CFG, 3)
    rows = RowSource(random.Random(4), [p.address for p in fed.parties], 40, fed.num_features, CFG.bins + 1)
    rows.start_tree(0)
    silent = fed.parties[2]
    out = run_level(
        fed.task,
        fed.task_id,
        fed.parties,
        {a.address: [0] for a in fed.parties},
        rows,
        fed.resolver,
        silent_hists={silent.address},
    )
    rows.follow(out)
    assert out.submitters == [p.address for p in fed.parties[:2]]
    tree, level = _step(fed)
    with pytest.raises(ContractRevert) as exc:
        fed.task.submit_votes(silent, fed.task_id, tree, level, [0, 0])
    assert exc.value.name == "Excluded"
    before = fed.task.state(fed.task_id)
    for p in fed.parties[:2]:  # no deadline to wait for: the second vote completes the step and closes it
        closing = fed.task.submit_votes(p, fed.task_id, tree, level, [0, 0]).events_named("VotingClosed")
    assert closing and int(closing[0].args["voters"]) == 2
    assert fed.task.client.block_number <= before.step_deadline
    assert fed.task.state(fed.task_id).phase == Phase.HISTOGRAMS
    # the excluded party endorses the others' level
    p = fed.parties[0]
    cands = [(r.cand0, r.cand1) for r in (fed.task.node(fed.task_id, tree, n) for n in before.open_nodes())]
    hists = [rows(p.address, n, c) for n, c in zip(before.open_nodes(), cands, strict=True)]
    endorsements = [fed.task.endorse(q, fed.task_id, tree, level, p.address, hists) for q in (silent, fed.parties[1])]
    res = fed.task.submit_histograms(p, fed.task_id, tree, level, hists, endorsements)
    assert res.event("HistogramsSubmitted").args["endorsements"] == 2


def test_credits_are_the_least_attested_and_pay_the_credited_sums(
    chain: ChainClient, task_contract: TaskContract
) -> None:
    """At a tree's root the contract keeps the least credit its endorsers attested, quantity by quantity, and pays
    every split of the tree on the credited sums, exactly as ``reference.resolve_node`` with those credits."""
    cfg = TaskConfig(trees=1, depth=2, bins=3, min_parties=3, max_parties=3, min_rows=1, lam=ONE, step_blocks=40)
    fed = open_task(chain, task_contract, cfg, 3)
    rows = RowSource(random.Random(6), [p.address for p in fed.parties], 50, fed.num_features, cfg.bins + 1)
    rows.start_tree(0)
    attest: dict[tuple[int, int], ref.Credit] = {
        (1, 0): ref.Credit(ONE // 2, ONE, 3 * ONE),
        (2, 0): ref.Credit(4 * ONE // 5, ONE // 4, ONE),
    }
    index = {p.address: i for i, p in enumerate(fed.parties)}
    credit: Callable[[str, str], ref.Credit] = lambda e, p: attest.get((index[e], index[p]), ref.NEUTRAL)  # noqa: E731
    replay = Replay(params_of(cfg), cfg.depth)
    out = run_level(
        fed.task, fed.task_id, fed.parties, {a.address: [0] for a in fed.parties}, rows, fed.resolver, credit=credit
    )
    submitted = {
        e.args["party"]: tuple(int(x) for x in e.args["credit"])
        for tx in out.txs
        for e in tx.events_named("HistogramsSubmitted")
    }
    assert submitted[fed.parties[0].address] == (ONE // 2, ONE // 4, ONE)
    assert submitted[fed.parties[1].address] == (ONE, ONE, ONE)
    credits = {fed.parties[0].address: ref.Credit(ONE // 2, ONE // 4, ONE)}
    replay.credits = credits
    replay.level(out, rows)
    ev = out.resolutions[1].event("ContributionsAdded").args
    assert tuple(ev["phi"]) == replay.results[(0, 1)].phi
    # the next level of the same tree keeps the root's credits, whatever its endorsers attest
    out = run_level(
        fed.task,
        fed.task_id,
        fed.parties,
        {a.address: [0, 0] for a in fed.parties},
        rows,
        fed.resolver,
        credit=lambda e, p: ref.Credit(ONE // 10, ONE // 10, ONE // 10),
    )
    replay.level(out, rows)
    for node in out.open_nodes:
        assert tuple(out.node_event(node, "ContributionsAdded").args["phi"]) == replay.results[(0, node)].phi


def test_a_private_task_checks_the_totals_only(chain: ChainClient, task_contract: TaskContract) -> None:
    """With differential privacy (``Config.epsilon`` > 0) every bin carries noise, so no bin bound is checked
    (``BOUNDS_NONE``); both candidates must still hold the same totals, and the contract agrees with the reference."""
    private = TaskConfig(**{**CFG.__dict__, "epsilon": ONE, "delta": ONE // 10**5})
    fed = open_task(chain, task_contract, private, 3)
    assert fed.task.config(fed.task_id).epsilon == ONE
    p = fed.parties[0]
    _vote(fed, fed.parties, [0])
    base = random_hist(random.Random(1), (0, 1), CFG.bins + 1)
    n0 = base.n[0]
    full = max(range(len(n0)), key=lambda b: n0[b])
    empty = min(range(len(n0)), key=lambda b: n0[b])
    noisy = _moved(_moved(base, "n", empty, full, n0[empty] + 5), "g", full, empty, 40 * ONE)  # negative count, |G| > n
    bounds = bounds_of(0, private.epsilon)
    assert _reference_outcome([noisy], [1], 0, True, None) == "CountOutOfRange"  # a public task refuses it
    assert _reference_outcome([noisy], [1], bounds, True, None) == "ok"
    assert _submit_outcome(fed, p, [noisy]) == "ok"
    unequal = _edit(noisy, "h", 1, 0, 7)
    assert _reference_outcome([unequal], [1], bounds, True, None) == "CandidateTotalsMismatch"
    assert _submit_outcome(fed, p, [unequal]) == "CandidateTotalsMismatch"


@pytest.mark.parametrize(
    ("epsilon", "delta", "objective"),
    [(-1, 0, 0), (ONE, 0, 0), (ONE, ONE, 0), (ONE, ONE // 10**5, 1)],
)
def test_a_private_config_needs_a_delta_in_0_1_and_the_binary_loss(
    chain: ChainClient, task_contract: TaskContract, epsilon: int, delta: int, objective: int
) -> None:
    bad = TaskConfig(**{**CFG.__dict__, "epsilon": epsilon, "delta": delta, "objective": objective})
    with pytest.raises(ContractRevert) as err:
        task_contract.create_task(chain.new_account(10**20), bad, [0, 0], [ONE, ONE])
    assert err.value.name == "InvalidConfig" and "privacy" in str(err.value)
