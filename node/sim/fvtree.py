"""FV-tree federated training (Algorithm 3), simulated: M parties in one process, batched per tree level.

Party-side computation (gradients, refitted histograms, votes, quantised candidate histograms, applying splits)
runs one compiled kernel per party and level over all the level's open nodes (``node.kernels.histogram``), each
party a ``node.protocol.local_party.LocalParty``, the code a party node runs; the coordinator side (top-2, best
split, leaf values, split Shapley values, voting contributions) is exactly what the contract computes, the
``ledger.spec.reference`` functions on the quantised messages (batched per level by ``node.protocol.resolve``, whose
results equal ``reference.resolve_node``'s node by node). The model produced here is therefore the model the chain
produces from the same messages.

Algorithms:
``fvtree``      votes on refitted histograms (gradients weighted by the PSD distribution weights w*) for the first
                ``TrainParams.voted_trees`` trees, then draws the candidates as ``drawn`` does (below; the default
                switch is ``ledger.spec.parameters.DEFAULT_VOTED_TREES``, all trees vote from ``ref.ALL_TREES_VOTED``);
``pvtree``      votes on the raw local histograms (PV-tree, no refit), with the same switch;
``allfeatures`` no voting: the candidates are the two best features of the aggregated float histograms of all
                features, so its difference to ``fvtree`` is the cost of voting.
``drawn``       no voting: each node's two candidates are drawn from a public seed (the contract's ``top2`` of
                empty votes, ranked by the hashed tie key of (tree, node, feature)), so no party's rows choose them.
                Votes make the model fit each party's own rows better than others' rows of the same label, which
                breaks the endorsement test's premise in long tasks (``bench.endorse_drift``); drawn candidates
                keep the model blind to the parties at the same histogram traffic, without the vote round. They
                learn slower (a random pair of features per node), so ``fvtree`` votes first and draws later: the
                drift then stops where the votes stop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np
from numba import njit

from fgbdt_chain.ledger.spec import centred, loo, scaled
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.histogram_rules import HistogramRuleError, Sides, bounds_of, check_level
from fgbdt_chain.ledger.spec.parameters import default
from fgbdt_chain.ledger.spec.shapley_estimate import estimated, node_seed
from fgbdt_chain.ledger.spec.train_params import TrainParams
from fgbdt_chain.ledger.spec.tree_carry import Carry, CarryError, applies, next_score_bound
from fgbdt_chain.node.attacks.histograms import Attack
from fgbdt_chain.node.kernels import party_kernels
from fgbdt_chain.node.kernels.frozen_heap import frozen_heap
from fgbdt_chain.node.kernels.histogram import BinnedRows, FixedSums
from fgbdt_chain.node.kernels.parallel import PartyThreads
from fgbdt_chain.node.kernels.party_kernels import PartyKernels, TreeLevels
from fgbdt_chain.node.model.trees import Tree
from fgbdt_chain.node.privacy.accountant import NO_PRIVACY, PrivacyPlan
from fgbdt_chain.node.protocol.endorsement import EndorsementRule, choose, decide, quorum, statistical_verdict
from fgbdt_chain.node.protocol.local_party import LocalParty, messages_of
from fgbdt_chain.node.protocol.messages import level_traffic
from fgbdt_chain.node.protocol.resolve import level_of, resolve_level_view, top2_level
from fgbdt_chain.node.protocol.resolved_level import Inherited, ResolvedLevel, grow_level
from fgbdt_chain.node.protocol.verify import Claims, Measurement, PartyEstimator, Verdict, VerifierLevel, measure_many

T = TypeVar("T")

ALGORITHMS = ("fvtree", "pvtree", "allfeatures", "drawn")
"""What the simulator trains; ``ledger.spec.modes.ON_CHAIN_ALGORITHMS`` are those a task on chain runs (``pvtree``
and ``allfeatures`` are ``simulate``'s comparisons: which histograms a party votes on, or pooled float histograms,
no contract can check)."""
VOTING = ("fvtree", "pvtree")
"""The algorithms whose parties vote for the candidates of the first ``voted_trees`` trees (a vote round on chain,
voting contributions)."""


QUORUM: tuple[int, int] = (default("quorum_num"), default("quorum_den"))
"""The task's endorsement quorum (``quorumNum``, ``quorumDen``) unless told: ``ledger.spec.parameters``'s."""

_UNREAD = Claims(np.zeros(0), np.zeros(0), np.zeros(0))
"""Stands for claims no verifier reads at a level (below a tree's root under the statistical rule)."""


@dataclass
class LevelRecord:
    """Everything a level put on chain and what the contract made of it (the audit trail of the simulation)."""

    tree: int
    level: int
    nodes: list[int]
    votes: list[list[int]]  # [party][node]
    candidates: list[tuple[int, ...]]
    results: ResolvedLevel
    """Every open node's ``NodeResult`` (made when read), and what training reads of them."""
    submitters: list[int] = field(default_factory=list)
    """The parties whose histograms the level resolved, in party order: ``results``' per-party entries follow it."""


@dataclass(frozen=True)
class LevelView:
    """What the parties hold during one level, for observers (the endorsement benchmark), one entry per party:
    the rows' positions among the open nodes, the gradients and hessians, the histograms about to be sent as the
    verifiers read them, whether the party still takes part, and the verdicts on it (verifier -> verdict; empty
    when endorsement is not modelled or the party no longer takes part)."""

    tree: int
    level: int
    k_of_row: list[np.ndarray]
    candidates: list[tuple[int, ...]]
    g: list[np.ndarray]
    h: list[np.ndarray]
    claims: list[Claims]
    active: list[bool]
    verdicts: list[dict[int, Verdict]]
    measurements: list[dict[int, Measurement]] = field(default_factory=list)
    """Per party, each verifier's statistics of its level (statistical rule, at a tree's root or with
    ``Federation.measure_every_level``): what the benchmark derives the verdicts on stretched histograms from
    (``Measurement.scaled``)."""
    roots: list[ref.Totals] = field(default_factory=list)
    """At a tree's root, every party's exact totals as sent (empty below the root or when no carry applies)."""
    carries: list[Carry | None] = field(default_factory=list)
    """At a tree's root, what every party's previous tree allows of them (``ledger.spec.tree_carry``)."""


@dataclass(frozen=True)
class Refusal:
    """A party that stopped taking part: where, and why (an exact rule, or too few endorsements)."""

    party: int
    tree: int
    level: int
    reason: str


@dataclass
class TrainResult:
    """The trained trees with everything the protocol recorded along the way."""

    trees: list[Tree]
    phi: list[int]
    kappa: list[int]
    total: list[int]
    per_tree_total: list[list[int]]
    comm_bytes: list[int]
    comm_bytes_per_tree: list[float]
    levels: list[LevelRecord] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the training time went: party-side phases and the contract-side resolution (``ledger.spec.reference``)."""
    refusals: list[Refusal] = field(default_factory=list)
    """Parties that stopped taking part, in the order it happened (none when everyone stays honest)."""
    credits: list[list[ref.Credit]] = field(default_factory=list)
    """Per tree, every party's credit multipliers (``NEUTRAL`` for parties out of the tree)."""
    finished: list[bool] = field(default_factory=list)
    """Whether each party still takes part after the last tree grown (empty: everyone)."""
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    """``seconds``' phases in CPU time (``time.process_time``: every thread of the process): on a machine shared
    with other work the wall time of a phase includes waiting for a core, its CPU time what it computed."""
    withheld: bool = False
    """Whether negative totals are withheld from the reward (``scaled.withheld_shares``, the ``scaled`` measure)
    rather than left out of the positive ones' division (``reference.reward_shares``)."""

    def shares(self) -> list[float]:
        """Each party's share of the reward (``reference.reward_shares``): of the positive contributions, and 0 for a
        party that left the task (its amount goes back to the requester); under ``withheld``, of every contribution's
        magnitude (``scaled.withheld_shares``)."""
        finished = self.finished or [True] * len(self.total)
        if self.withheld:
            return scaled.withheld_shares(self.total, finished)
        return ref.reward_shares(self.total, finished)


class Federation:
    """M simulated parties trained level by level, with the contract's side computed by ``ledger.spec.reference``.

    Each party's rows start a tree as one group and are partitioned with every split (``BinnedRows.split_groups``),
    which also keeps their node ids and positions, instead of routing every row and regrouping it every level.

    With ``endorsement`` (the verifiers' rule) and ``estimators`` (``estimators[j][m]``: verifier j's view of party
    m) every level plays the chain's endorsement round: each taking part party's histograms must keep the exact
    rules the contract checks (``ledger.spec.histogram_rules``) and win the quorum of signatures
    (``node.protocol.endorsement``; ``quorum_fraction`` is the task's ``quorumNum`` / ``quorumDen``);
    a party that fails either takes no further part, as on chain, and a tree's root endorsements fix each party's
    credit for the tree. Without them every party's histograms are accepted as sent, at neutral credit.
    """

    def __init__(
        self,
        party_slots: Sequence[np.ndarray],
        party_y: Sequence[np.ndarray],
        params: TrainParams,
        *,
        algo: str = "fvtree",
        party_weights: Sequence[np.ndarray] | None = None,
        keep_levels: bool = False,
        endorsement: EndorsementRule | None = None,
        estimators: Sequence[Sequence[PartyEstimator]] | None = None,
        attacks: dict[int, Attack] | None = None,
        privacy: PrivacyPlan = NO_PRIVACY,
        noise_seed: int | None = None,
        widths: np.ndarray | None = None,
        threads: int | None = None,
        quorum_fraction: tuple[int, int] = QUORUM,
        exact_rules_only: bool = False,
        shapley_seed: int = 0,
    ) -> None:
        if algo not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")
        if len(party_slots) != len(party_y) or not party_slots:
            raise ValueError("need one label array per party and at least one party")
        if len(party_slots) > ref.MAX_PARTIES:
            raise ValueError(f"{len(party_slots)} parties: a task on chain accepts at most {ref.MAX_PARTIES} parties")
        if not 0 <= shapley_seed < 2**256:
            raise ValueError(f"shapley_seed {shapley_seed} is not a uint256 (the task's seed)")
        if algo == "fvtree" and party_weights is None:
            raise ValueError("fvtree needs the parties' distribution weights w*")
        if (
            endorsement is not None
            and not exact_rules_only
            and (estimators is None or len(estimators) != len(party_slots))
        ):
            raise ValueError("modelling endorsement needs every party's view of every other party (estimators)")
        self.params = params
        self.algo = algo
        self.m = len(party_slots)
        self.keep_levels = keep_levels
        self.n_features = party_slots[0].shape[1]
        weights = list(party_weights) if algo == "fvtree" and party_weights is not None else [None] * self.m
        self.privacy = privacy
        self.parties = [
            LocalParty(s, y, params, w, privacy=privacy, noise_seed=noise_seed, index=i, widths=widths)
            for i, (s, y, w) in enumerate(zip(party_slots, party_y, weights, strict=True))
        ]
        self.party_threads = PartyThreads([party.n_rows for party in self.parties], threads)
        """Where the verifiers' work of a root runs (``node.kernels.parallel``): on ``threads`` threads, by default
        every core, 1 for a plain loop; the results are the same either way."""
        self.kernels = PartyKernels([party.rows for party in self.parties], self.party_threads.threads)
        """The parties' votes, candidate histograms and partitions of a level, one call each on as many cores."""
        for i, attack in (attacks or {}).items():
            if not 0 <= i < self.m:
                raise ValueError(f"attacking party {i} is not one of the {self.m} parties")
            self.parties[i].attack = attack
        # all-features aggregates every party's rows in one search: a baseline, never run on chain
        self.pooled = BinnedRows(np.vstack(party_slots), params.nbins) if algo == "allfeatures" else None
        self.cparams = params.contract_params()
        self.quorum = quorum(self.m, *quorum_fraction)
        self.endorsement = endorsement
        self.estimators = estimators
        self.shapley_seed = shapley_seed
        """The task's seed of the estimated split Shapley values (``ledger.spec.shapley_estimate``; on chain the
        ``ShapleySeedFixed`` event's), used above ``EXACT_MAX_PARTIES`` accepted parties."""
        self.exact_rules_only = exact_rules_only
        """Under a privacy budget: endorse on the exact rules only, every party that keeps them at neutral credit.
        The verifiers' statistics, credits and reasons are computed from each verifier's exact rows, which no
        mechanism of the budget covers, so none is computed nor released (``node.privacy.inventory``)."""
        self.active = [True] * self.m
        self.refusals: list[Refusal] = []
        self.done_trees = 0
        self.record = TrainResult([], [0] * self.m, [0] * self.m, [0] * self.m, [], [0] * self.m, [], [], {}, [], [])
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self._cpu_clock = 0.0
        self.level_observer: Callable[[LevelView], None] | None = None
        self.measure_every_level = False
        """Whether observers also get the verifiers' statistics below a tree's root, where no verdict rests on them
        (``node.protocol.endorsement.decide``): the benchmark's view of why."""
        self._carries: list[Carry | None] = [None] * self.m
        self._carry_source: _CarrySource | None = None
        """What the last tree leaves for ``carries``, which are only computed when read."""
        self.score_bound = 0
        """Bound on every row's |score| so far, in fixed-point units (``tree_carry.next_score_bound``)."""

    @property
    def score(self) -> np.ndarray:
        """All parties' raw scores, in party order (in labels / ``params.label_scale``)."""
        return np.concatenate([p.score for p in self.parties])

    @property
    def y(self) -> np.ndarray:
        """All parties' labels as trained (divided by ``params.label_scale``), in party order: ``score``'s units."""
        return np.concatenate([p.y for p in self.parties])

    def _tick(self, phase: str, since: float) -> float:
        now, cpu = time.perf_counter(), time.process_time()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - since
        self.cpu_seconds[phase] = self.cpu_seconds.get(phase, 0.0) + cpu - self._cpu_clock
        self._cpu_clock = cpu
        return now

    def train(self, progress: Callable[[int], None] | None = None, until: int | None = None) -> TrainResult:
        """Grow the trees up to ``until`` (default: all ``params.trees``), continuing where an earlier call stopped;
        ``progress(t)`` is called after each tree. Returns the whole record so far.

        Stopping part-way lets an experiment copy the federation (``copy.deepcopy``) and continue the copies
        differently, e.g. with one party turning greedy from that tree on."""
        p = self.params
        end = p.trees if until is None else until
        if not self.done_trees <= end <= p.trees:
            raise ValueError(f"cannot train up to tree {end}: {self.done_trees} of {p.trees} trees are grown")
        rec = self.record
        with frozen_heap():
            self._train_trees(end, progress)
        return TrainResult(
            list(rec.trees),
            list(rec.phi),
            list(rec.kappa),
            list(rec.total),
            list(rec.per_tree_total),
            list(rec.comm_bytes),
            [c / max(self.done_trees, 1) for c in rec.comm_bytes],
            list(rec.levels),
            dict(self.seconds),
            list(self.refusals),
            list(rec.credits),
            list(self.active),
            dict(self.cpu_seconds),
            withheld=p.contribution == scaled.SCALED,
        )

    def _train_trees(self, end: int, progress: Callable[[int], None] | None) -> None:
        """Grows trees ``done_trees .. end - 1`` into the record."""
        rec = self.record
        for t in range(self.done_trees, end):
            tree, tree_total, tree_levels, traffic, tree_credits = self._grow_tree(t)
            loo_paid = self.params.contribution in scaled.JUDGED
            for level in tree_levels:
                phi, kappa = level.results.phi_sums, level.results.kappa_sums
                for k, i in enumerate(level.submitters):
                    if not loo_paid:
                        rec.phi[i] += phi[k]
                    rec.kappa[i] += kappa[k]  # under loo recorded, not paid: a vote counts once per identity
            if loo_paid:  # the tree's leave-one-out values are its whole contribution
                for i in range(self.m):
                    rec.phi[i] += tree_total[i]
            for i in range(self.m):
                rec.total[i] += tree_total[i]
                rec.comm_bytes[i] += traffic[i]
            rec.per_tree_total.append(tree_total)
            rec.trees.append(tree)
            rec.credits.append(tree_credits)
            if self.keep_levels:
                rec.levels.extend(tree_levels)
            self.done_trees = t + 1
            if progress is not None:
                progress(t)

    def _exclude(self, party: int, tree: int, level: int, reason: str) -> None:
        self.active[party] = False
        self.refusals.append(Refusal(party, tree, level, reason))

    def _each(self, fn: Callable[[int], T]) -> list[T]:
        """``[fn(i) for i in range(self.m)]``, blocks of parties on the cores at once (``node.kernels.parallel``):
        ``fn`` must change nothing but party ``i``'s own state."""
        return self.party_threads.map(fn)

    def _submissions(
        self,
        t: int,
        level: int,
        open_nodes: list[int],
        cands: list[tuple[int, ...]],
        sums: list[FixedSums],
        k_of_rows: list[np.ndarray],
        grads: Sequence[tuple[np.ndarray, ...]],
        sides: dict[int, dict[int, Sides]],
    ) -> tuple[list[int], dict[int, ref.Credit], list[Claims], list[dict[int, Verdict]], list[dict[int, Measurement]]]:
        """Which taking-part parties' histograms the contract accepts at this level, and the credit the root's
        endorsements give each; also every party's claims and verdicts, for observers.

        The exact rules are checked first, then every verifier decides on every party that keeps them (one task
        per verifier, on the cores when the verifiers measure or compare rows: below a root under the statistical
        rule a verdict costs nothing), and the refusals are recorded last, in party order."""
        cand_arr = np.asarray(cands, dtype=np.int64)
        rule = self.endorsement
        # the verifiers read the claims where they test them (a root under the statistical rule, every level under
        # the overlap rule); observers get them at every level
        read = rule is not None and (rule.rule != ref.ENDORSE_STATISTICAL or level == 0 or self.measure_every_level)
        if read or self.level_observer is not None:
            claims = [Claims.from_limbs(s.g_hi, s.g_lo, s.h_hi, s.h_lo, s.n) for s in sums]
        else:
            claims = [_UNREAD] * len(sums)
        verdicts: list[dict[int, Verdict]] = [{} for _ in range(self.m)]
        measured: list[dict[int, Measurement]] = [{} for _ in range(self.m)]
        taking_part = [i for i in range(self.m) if self.active[i]]
        if rule is None:
            return taking_part, {}, claims, verdicts, measured
        broken = {
            i: why for i in taking_part if (why := self._broken_rule(t, level, open_nodes, cands, sums, sides, i))
        }
        checked = [i for i in taking_part if i not in broken]
        if self.exact_rules_only:
            for i in broken:
                self._exclude(i, t, level, broken[i])
            return checked, {i: ref.NEUTRAL for i in checked}, claims, verdicts, measured
        assert self.estimators is not None
        estimators = self.estimators
        measuring = rule.rule == ref.ENDORSE_STATISTICAL and (level == 0 or self.measure_every_level)
        if rule.rule == ref.ENDORSE_STATISTICAL and not measuring and self.level_observer is None:
            # below a root every verifier signs what keeps the exact rules (``decide``), all M - 1 of them, and the
            # quorum never asks for more: every checked party is accepted at neutral credit, with no verdict to
            # record for anyone (the loop below would find the same, at 12 decisions a level)
            for i in broken:
                self._exclude(i, t, level, broken[i])
            return checked, {i: ref.NEUTRAL for i in checked}, claims, verdicts, measured

        def verify(j: int) -> dict[int, tuple[Verdict, Measurement | None]]:
            """Verifier ``j``'s verdict on every checked party but itself (measuring nothing)."""
            rows, k_of_row, (g, h) = self.parties[j].rows, k_of_rows[j], grads[j][:2]
            return {
                i: decide(rule, rows, k_of_row, cand_arr, g, h, estimators[j][i], claims[i], level == 0)
                for i in checked
                if i != j
            }

        if measuring:
            decided = self._measured(level, checked, cand_arr, k_of_rows, grads, claims)
        elif rule.rule == ref.ENDORSE_OVERLAP:  # each verifier's estimates of every node: on the cores
            decided = self._each(verify)
        else:
            decided = [verify(j) for j in range(self.m)]
        accepted: list[int] = []
        credit: dict[int, ref.Credit] = {}
        for i in taking_part:
            if i in broken:
                self._exclude(i, t, level, broken[i])
                continue
            for j in range(self.m):
                if j != i:
                    verdicts[i][j], m = decided[j][i]
                    if m is not None:
                        measured[i][j] = m
            chosen = choose(verdicts[i], self.quorum)
            if chosen is None:
                refusals = "; ".join(f"party {j}: {', '.join(v.reasons)}" for j, v in verdicts[i].items() if not v.sign)
                self._exclude(i, t, level, f"{self.quorum} endorsements needed, refused by {refusals}")
                continue
            accepted.append(i)
            credit[i] = chosen[1]
        return accepted, credit, claims, verdicts, measured

    def _measured(
        self,
        level: int,
        checked: Sequence[int],
        cand_arr: np.ndarray,
        k_of_rows: Sequence[np.ndarray],
        grads: Sequence[tuple[np.ndarray, ...]],
        claims: Sequence[Claims],
    ) -> list[dict[int, tuple[Verdict, Measurement | None]]]:
        """Under the statistical rule where it is measured: every verifier's statistics of every checked party but
        itself, in one call on the cores (``measure_many``), and the verdicts ``decide`` gives on them."""
        rule = self.endorsement
        assert rule is not None and self.estimators is not None
        sides: dict[int, VerifierLevel] = {}
        checks = []
        pairs = [(j, i) for j in range(self.m) for i in checked if i != j]
        for j, i in pairs:
            if j not in sides:  # the verifier's side of the level is the same whichever party it checks
                party, (g, h) = self.parties[j], grads[j][:2]
                sides[j] = VerifierLevel.of(party.rows, k_of_rows[j], cand_arr, g, h, cache=self.kernels.row_lists)
            checks.append((sides[j], self.estimators[j][i], claims[i]))
        root = level == 0
        measured = measure_many(
            checks, root=root, noise_sd=rule.noise_sd, threads=self.kernels.now, cache=self.kernels.row_lists
        )
        decided: list[dict[int, tuple[Verdict, Measurement | None]]] = [{} for _ in range(self.m)]
        for (j, i), m in zip(pairs, measured, strict=True):
            decided[j][i] = statistical_verdict(rule, m if root else None), m
        return decided

    def _broken_rule(
        self,
        t: int,
        level: int,
        open_nodes: list[int],
        cands: list[tuple[int, ...]],
        sums: list[FixedSums],
        sides: dict[int, dict[int, Sides]],
        i: int,
    ) -> str | None:
        """Why party ``i``'s histograms of the level break an exact rule (the contract's or the verifiers' carry),
        or None. Only an attacker can break one: an honest party's sums keep every one of them by construction
        (tests check it on random data), and checking them costs more than the level."""
        if self.parties[i].attacks(t) is None:
            return None
        try:
            check_level(
                messages_of(sums[i], cands),
                open_nodes,
                bounds_of(ref.OBJECTIVES[self.params.objective], int(self.privacy.private)),
                t == 0,
                None if level == 0 else sides[i],
            )
        except HistogramRuleError as exc:
            return f"the contract refuses the histograms: {exc}"
        carry = self.carries[i]  # None unless the rule applies (``_carrying``) and from the second tree
        if level == 0 and carry is not None:
            try:
                carry.check(_node_totals(sums[i], [0])[0])
            except CarryError as exc:
                return f"the verifiers refuse the histograms: {exc}"
        return None

    def _grow_tree(self, t: int) -> tuple[Tree, list[int], list[LevelRecord], list[int], list[ref.Credit]]:
        clock, self._cpu_clock = time.perf_counter(), time.process_time()
        p = self.params
        # on the cores: the votes and the verifiers' statistics (``_each``). The gradients here, the candidate
        # histograms and the splits' partitions below stay on this thread: tens of microseconds per party, which a
        # hand-over to another thread and the interpreter lock passed to and fro cost more than they save
        # each party's rows: node id, position among the level's open nodes (-1: in a leaf), and the rows of
        # every open node, all kept up to date by the splits instead of being recomputed every level
        plain = self._logistic_tree(t)
        if plain is not None:
            grads, rows = plain
        else:
            grads = [party.gradients() for party in self.parties]
            vote_grads = [party.vote_gradients(g, hv) for party, (g, _, hv) in zip(self.parties, grads, strict=True)]
            fixed_rows = [party.fixed_rows(g, h, t) for party, (g, h, _) in zip(self.parties, grads, strict=True)]
            rows = self.kernels.tree([v[0] for v in vote_grads], [v[1] for v in vote_grads], fixed_rows)
        node_ids, k_of_rows = self.kernels.node_id, self.kernels.group_of_row
        tree = Tree()
        leaf_value = np.zeros(1 << (p.depth + 1), dtype=np.float64)
        inherited = Inherited.roots()
        open_nodes = [1]
        tree_total = [0] * self.m
        tree_credit = [ref.NEUTRAL] * self.m
        records: list[LevelRecord] = []
        traffic = [0] * self.m
        sides: dict[int, dict[int, Sides]] = {}
        carrying = self._carrying()
        roots: list[ref.Totals] = []
        carry_levels: list[tuple[ResolvedLevel, list[FixedSums], list[int], bool]] = []
        before = 0  # the open nodes of the level before
        judged = [0] * self.m  # under loo: each party's judged marginals summed over the tree's splits
        judges = [0] * self.m  # and its rows at the root, which judge the others
        fits = scaled.TreeFits(self.m) if p.contribution == scaled.SCALED else None  # under scaled: the tree's fits
        private = self.privacy.private
        attackers = [i for i, party in enumerate(self.parties) if party.attacks(t) is not None]
        # the sums each party sends are its exact sums unless an attack or privacy noise changes them
        # (``LocalParty.sent_sums``): asked only then, not four times a level
        as_computed = not private and not attackers
        for level in range(p.depth):
            if not open_nodes:
                break
            k = len(open_nodes)
            clock = self._tick("party: gradients, routing, applying splits", clock)
            if self.algo == "allfeatures":
                votes, cands = self._allfeatures_candidates(k_of_rows, k, grads)
            elif self.algo == "drawn" or (self.algo in VOTING and ref.draws(t, p.voted_trees)):
                votes = np.full((self.m, k), ref.ABSTAIN, dtype=np.int64)
                cands = top2_level(votes, self.n_features, ref.TIE_HASHED, t, open_nodes)
            else:
                votes = self._votes(t, level, rows)
                cands = top2_level(votes, self.n_features, ref.TIE_RULES[p.tie_break], t, open_nodes)
            clock = self._tick("party: votes (refitted histograms, local search)", clock)
            cand_arr = np.asarray(cands, dtype=np.int64)
            taking_part = [i for i in range(self.m) if self.active[i]]
            exact = FixedSums(*rows.candidates_fixed(cand_arr))  # every party's, stacked
            raw = [
                FixedSums(exact.g_hi[i], exact.g_lo[i], exact.h_hi[i], exact.h_lo[i], exact.n[i]) for i in range(self.m)
            ]
            sums = (
                raw
                if as_computed
                else [
                    party.sent_sums(
                        raw[i],
                        cand_arr,
                        t,
                        level,
                        _released_totals(sides.get(i), open_nodes, level) if private else None,
                    )
                    for i, party in enumerate(self.parties)
                ]
            )
            clock = self._tick("party: candidate histograms", clock)
            accepted, credit, claims, verdicts, measured = self._submissions(
                t, level, open_nodes, cands, sums, k_of_rows, grads, sides
            )
            clock = self._tick("verifiers: endorsement checks", clock)
            if level == 0:
                for i in accepted:
                    tree_credit[i] = credit.get(i, ref.NEUTRAL)
                if carrying:
                    roots = [sides[0].left for sides in _parties_sides(sums, [0], [0], [sums[0].n.shape[2] - 1])]
            if self.level_observer is not None:
                positions = [kr.copy() for kr in k_of_rows]  # the observer may keep them; the splits update ours
                active = [i in taking_part for i in range(self.m)]
                self.level_observer(
                    LevelView(
                        t,
                        level,
                        positions,
                        cands,
                        [g[0] for g in grads],
                        [g[1] for g in grads],
                        claims,
                        active,
                        verdicts,
                        measured,
                        roots if level == 0 else [],
                        list(self.carries) if level == 0 else [],
                    )
                )
            last = level == p.depth - 1
            everyone = len(accepted) == self.m
            # the accepted parties' votes, node by node ((nodes, accepted) as the resolution takes them)
            sub_votes = votes.T if everyone else votes[accepted].T
            sub_credits = [tree_credit[i] for i in accepted]
            as_sent = everyone and all(s is r for s, r in zip(sums, raw, strict=True))
            results = self._resolve(
                [sums[i] for i in accepted],
                cands,
                sub_votes,
                inherited,
                last,
                sub_credits,
                exact if as_sent else None,
                cand_arr,
                self._seeds(t, open_nodes, len(accepted)),
            )
            next_open: list[int] = []
            next_sides: dict[int, dict[int, Sides]] = {i: {} for i in accepted}
            # sides kept where a rule can break (an attacker) or a private party projects onto them
            keep_sides = accepted if private else [i for i in accepted if i in attackers]
            if p.contribution in scaled.JUDGED:
                if level == 0:
                    for i in accepted:
                        judges[i] = int(sums[i].n[0, 0].sum())
                for q, v in enumerate(self._loo_level([sums[i] for i in accepted], results, accepted, fits)):
                    judged[accepted[q]] += v
            else:
                for q, i in enumerate(accepted):
                    tree_total[i] += results.contribution_sums[q]
            for j, nid, rank, _, threshold in grow_level(tree, leaf_value, open_nodes, results, last):
                if not last:
                    next_open += [2 * nid, 2 * nid + 1]
                    for i in keep_sides:
                        next_sides[i][nid] = _sides(sums[i], [j], [rank], [threshold])[0]
            inherited = results.children()
            sides = next_sides
            if carrying:
                carry_levels.append((results, sums, accepted, last))
            voting = self.algo in VOTING and not ref.draws(t, p.voted_trees)
            ncand = self.n_features if self.algo == "allfeatures" else 2
            # below a root the votes went ahead with the level before's resolution: two per node of that level
            ahead_of = before if level > 0 else None
            level_bytes = _level_bytes(k, ncand, p.nbins, self.m, self.quorum, voting, ahead_of)
            for i in taking_part:
                traffic[i] += level_bytes
            clock = self._tick("contract: top-2, best split, leaves, Shapley (ledger.reference)", clock)
            rows.split(results.feature, results.threshold)
            if self.keep_levels:
                records.append(LevelRecord(t, level, list(open_nodes), votes.tolist(), cands, results, accepted))
            else:
                records.append(LevelRecord(t, level, [], [], [], results, accepted))
            open_nodes, before = next_open, k
        for party, ids in zip(self.parties, node_ids, strict=True):
            party.score += leaf_value[ids]
        if p.contribution in scaled.JUDGED:
            tree_total = loo.per_judged_row(judged if fits is None else fits.values(), judges)
        if carrying:
            values = [v for rec in records for v in rec.results.leaf_values()]
            self.score_bound = next_score_bound(self.score_bound, values)
            self._carry_source = _CarrySource(roots, carry_levels, self.score_bound, list(self.active))
        self._tick("party: gradients, routing, applying splits", clock)
        return tree, tree_total, records, traffic, tree_credit

    def _loo_level(
        self,
        sums: Sequence[FixedSums],
        results: ResolvedLevel,
        accepted: Sequence[int] = (),
        fits: scaled.TreeFits | None = None,
    ) -> list[int]:
        """Each accepted party's judged marginals summed over the level's splits (``loo.node_values`` on every
        accepted party's sums as sent, at each split's own cut); 0 where a node stays a leaf. With the tree's
        ``fits`` (``scaled``): each split added to them instead, in party order (``accepted``: the sums' parties,
        zeros for the others), and zeros returned."""
        out = [0] * len(sums)
        leaves = results.leaves()
        cuts = [(j, rank, threshold) for j, (rank, _, threshold, *_) in enumerate(results.ints.tolist())]
        cuts = [c for c in cuts if leaves[c[0]] is None]
        if not cuts or not sums:
            return out
        hm, lam = self.cparams.hessian_mode, self.cparams.lam
        per_party = _parties_sides(sums, [c[0] for c in cuts], [c[1] for c in cuts], [c[2] for c in cuts])
        for k in range(len(cuts)):
            sides = [
                loo.Sides(
                    s[k].left.g,
                    ref.hessian_of(s[k].left.h, s[k].left.n, hm),
                    s[k].right.g,
                    ref.hessian_of(s[k].right.h, s[k].right.n, hm),
                )
                for s in per_party
            ]
            if fits is not None:
                every = [loo.Sides(0, 0, 0, 0)] * self.m
                for q, i in enumerate(accepted):
                    every[i] = sides[q]
                fits.add(every, lam)
                continue
            for q, v in enumerate(centred.NODE_VALUES[self.params.contribution](sides, lam)):
                out[q] += v
        return out

    def _logistic_tree(self, t: int) -> tuple[list[tuple[np.ndarray, ...]], TreeLevels] | None:
        """The tree's start in one compiled call (``PartyKernels.logistic_tree``) where it makes what the parties'
        own steps would: the logistic loss with hessians as hessians, no privacy, no attack this tree, and no
        observer (which may keep the gradients, here buffers the next tree writes again); None otherwise."""
        p = self.params
        if (
            p.objective != "binary"
            or p.hessian == "count"
            or self.privacy.private
            or self.level_observer is not None
            or any(party.attacks(t) is not None for party in self.parties)
        ):
            return None
        weights = [party.w for party in self.parties]
        if any(w is None for w in weights) and any(w is not None for w in weights):
            return None
        made = self.kernels.logistic_tree(
            [party.score for party in self.parties],
            [party.y for party in self.parties],
            None if weights[0] is None else [w for w in weights if w is not None],
        )
        if made is None:
            return None
        pairs, rows = made
        return [(g, h, h) for g, h in pairs], rows

    def _votes(self, t: int, level: int, rows: TreeLevels) -> np.ndarray:
        """Every party's vote for each of the level's open nodes, shape (parties, nodes): abstentions from a party
        out of the task (no vote on chain)."""
        lam, min_rows = self.params.lam, self.parties[0].vote_min_rows
        if self.privacy.private:
            best = rows.best_gains(lam, min_rows, self.active)
            k = best.shape[1]

            def floor(i: int) -> np.ndarray | None:  # the party's one-sided gains (LocalParty.vote_floor)
                g, _, h_vote = self.parties[i].gradients()
                return self.parties[i].vote_floor(
                    self.kernels.group_of_row[i], k, *self.parties[i].vote_gradients(g, h_vote)
                )

            votes = np.array(
                [
                    party.votes_from(best[i], t, level, floor(i))
                    if self.active[i]
                    else np.full(k, ref.ABSTAIN, dtype=np.int64)
                    for i, party in enumerate(self.parties)
                ]
            )
        else:  # each party's ``votes_from`` (``votes_from_gains``), taken in the gains' own call
            votes = rows.votes(lam, min_rows, self.active)
            votes[~np.asarray(self.active)] = ref.ABSTAIN
        return votes

    @property
    def carries(self) -> list[Carry | None]:
        """Per party, what its previous tree allows of its next root (``ledger.spec.tree_carry``; None before the second
        tree, in a private task, under the overlap rule, or once the party left).

        Only an attacker's root is checked against its carry, or an observer reads them, so they are computed when
        read, from the sums the last tree kept, instead of after every tree of an honest run."""
        source = self._carry_source
        if source is not None:
            leaf_sums: list[list[tuple[int, ref.Totals]]] = [[] for _ in range(self.m)]
            for results, sums, accepted, last in source.levels:
                self._leaf_sums(leaf_sums, results, sums, accepted, last)
            objective = ref.OBJECTIVES[self.params.objective]
            self._carries = [
                Carry.of(objective, source.roots[i], leaf_sums[i], source.score_bound) if source.active[i] else None
                for i in range(self.m)
            ]
            self._carry_source = None
        return list(self._carries)

    def _carrying(self) -> bool:
        """Whether the verifiers' carry rule (``ledger.spec.tree_carry``) is played: under the statistical rule, in a
        task without differential privacy. Every tree keeps what every party's carry needs (``carries``), also while
        everyone is honest, so that a federation copied part-way and continued with an attacker (``train``) checks
        the first attacked root as the chain would."""
        rule = self.endorsement
        objective = ref.OBJECTIVES[self.params.objective]
        return rule is not None and applies(rule.rule, objective, self.privacy.private)

    def _leaf_sums(
        self,
        out: list[list[tuple[int, ref.Totals]]],
        results: Sequence[ref.NodeResult],
        sums: Sequence[FixedSums],
        accepted: Sequence[int],
        last: bool,
    ) -> None:
        """Adds each accepted party's (leaf value, totals) at the level's leaves to ``out``: its node totals where a
        node became a leaf, its side sums where a split of the last level made two (``tree_carry.leaf_sums``, which
        the chain's verifiers and the audit compute from the submitted histograms)."""
        stops = [(j, res.leaf) for j, res in enumerate(results) if res.leaf is not None]
        cuts = [(j, res) for j, res in enumerate(results) if res.split is not None] if last else []
        splits = [res.split for _, res in cuts if res.split is not None]
        if not (stops or cuts) or not accepted:
            return
        # every accepted party's sums at the same cuts, in one call: a node's totals are its candidate 0 cut after
        # the last slot (``_node_totals``), a split's sides its cut
        whole = sums[accepted[0]].n.shape[2] - 1
        nodes = [j for j, _ in stops] + [j for j, _ in cuts]
        ranks = [0] * len(stops) + [s.rank for s in splits]
        at = [whole] * len(stops) + [s.threshold for s in splits]
        for i, sides in zip(accepted, _parties_sides([sums[i] for i in accepted], nodes, ranks, at), strict=True):
            out[i] += [(leaf, side.left) for (_, leaf), side in zip(stops, sides, strict=False)]
            for (_, res), side in zip(cuts, sides[len(stops) :], strict=True):
                assert res.left_leaf is not None and res.right_leaf is not None
                out[i] += [(res.left_leaf, side.left), (res.right_leaf, side.right)]

    def _resolve(
        self,
        sums: Sequence[FixedSums],
        cands: list[tuple[int, ...]],
        votes: np.ndarray,
        inherited: Inherited,
        last: bool,
        credits: Sequence[ref.Credit],
        stacked: FixedSums | None = None,
        cand_arr: np.ndarray | None = None,
        seeds: list[int] | None = None,
    ) -> ResolvedLevel:
        """The contract's resolution of the level from the accepted parties' sums (``stacked``: the same, stacked
        by party) and their ``votes`` (nodes, parties): on exact limbs when they carry the sums, else on the
        messages as Python integers (where the contract would revert, this raises). ``cand_arr``: ``cands`` as an
        array, which the compiled path takes without converting them again."""
        level = level_of(sums, stacked)
        if level is not None:
            with contextlib.suppress(ref.FixedPointOverflow):
                at = cands if cand_arr is None else cand_arr
                return resolve_level_view(level, at, votes, inherited, last, self.cparams, credits, seeds)
        node_votes = np.asarray(votes).tolist()
        hists = [messages_of(s, cands) for s in sums]
        results, totals = [], []
        for j, node_totals in enumerate(inherited.totals):
            node_hists = [h[j] for h in hists]
            seed = seeds[j] if seeds is not None else None
            results.append(ref.resolve_node(node_hists, node_votes[j], node_totals, last, self.cparams, credits, seed))
            if node_totals is None:  # the root: the sums of its candidate 0, as resolve_node takes them
                node_totals = (
                    ref.Totals(*(sum(getattr(ref.aggregate(node_hists), f)[0]) for f in ("g", "h", "n")))
                    if node_hists
                    else ref.Totals(0, 0, 0)
                )
            totals.append(node_totals)
        return ResolvedLevel.of_results(results, totals, len(sums), last)

    def _seeds(self, tree: int, open_nodes: Sequence[int], parties: int) -> list[int] | None:
        """Each open node's seed of its estimated split Shapley values (``shapley_estimate.node_seed``), or None
        where the level's ``parties`` accepted parties get exact values."""
        if not estimated(parties):
            return None
        return [node_seed(self.shapley_seed, tree, nid) for nid in open_nodes]

    def _allfeatures_candidates(
        self, k_of_rows: Sequence[np.ndarray], k: int, grads: Sequence[tuple[np.ndarray, ...]]
    ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """No votes (all abstain); each node's candidates are the two best features of the pooled float
        histograms of all features."""
        assert self.pooled is not None
        best = self.pooled.best_gains(
            np.concatenate(k_of_rows),
            k,
            np.concatenate([gr[0] for gr in grads]),
            np.concatenate([gr[2] for gr in grads]),
            self.params.lam,
            self.params.min_rows,
        )
        order = np.argsort(-best, axis=1, kind="stable")
        votes = np.full((self.m, k), ref.ABSTAIN, dtype=np.int64)
        top: list[tuple[int, ...]] = [(int(order[j, 0]), int(order[j, 1])) for j in range(k)]
        return votes, top


@dataclass(frozen=True)
class _CarrySource:
    """A tree's part of every party's carry (``Federation.carries``): its roots' totals, its levels' results and
    accepted sums, the score bound after it and who was still taking part."""

    roots: list[ref.Totals]
    levels: list[tuple[ResolvedLevel, list[FixedSums], list[int], bool]]
    score_bound: int
    active: list[bool]


@lru_cache(maxsize=1024)
def _level_bytes(
    k: int, candidates: int, nbins: int, parties: int, quorum: int, voting: bool, ahead_of: int | None
) -> int:
    """``level_traffic``'s total, remembered: a task's levels come back to a few shapes, and the sum of its parts
    cost 5 us a level."""
    return level_traffic(k, candidates, nbins, parties, quorum, voting=voting, ahead_of=ahead_of).total


def _released_totals(
    sides: dict[int, Sides] | None, open_nodes: Sequence[int], level: int
) -> list[tuple[int, int, int]] | None:
    """A party's totals of a level's open nodes as it released them at the parents (None at a root or when the
    party keeps no sides: a public task, whose totals are its exact sums)."""
    if level == 0 or sides is None:
        return None
    out = []
    for nid in open_nodes:
        side = sides[nid // 2]
        t = side.left if nid % 2 == 0 else side.right
        out.append((t.g, t.h, t.n))
    return out


@njit(cache=True, nogil=True)
def _side_limbs(  # pragma: no cover - compiled
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    n: np.ndarray,
    nodes: np.ndarray,
    ranks: np.ndarray,
    cuts: np.ndarray,
) -> np.ndarray:
    """The limb sums (planes g hi, g lo, h hi, h lo, n) of slots ``0..cut`` and of every slot of candidate
    ``rank`` at each node, shape (2, 5, len(nodes)): left, then whole. Integer sums in slot order, the values numpy's
    cumulative sums give (wrapping alike, were they to overflow)."""
    s, b = nodes.shape[0], n.shape[2]
    out = np.zeros((2, 5, s), dtype=np.int64)
    for k in range(s):
        j, r, t = nodes[k], ranks[k], cuts[k]
        if t < 0:
            t += b
        a0, a1, a2, a3, a4 = 0, 0, 0, 0, 0
        for x in range(b):
            a0 += g_hi[j, r, x]
            a1 += g_lo[j, r, x]
            a2 += h_hi[j, r, x]
            a3 += h_lo[j, r, x]
            a4 += n[j, r, x]
            if x == t:
                out[0, 0, k], out[0, 1, k], out[0, 2, k], out[0, 3, k], out[0, 4, k] = a0, a1, a2, a3, a4
        out[1, 0, k], out[1, 1, k], out[1, 2, k], out[1, 3, k], out[1, 4, k] = a0, a1, a2, a3, a4
    return out


def _sides(sums: FixedSums, nodes: Sequence[int], ranks: Sequence[int], thresholds: Sequence[int]) -> list[Sides]:
    """A party's exact (g, h, n) sums left and right of a cut of candidate ``rank`` after bin ``threshold``, at each
    of the level's ``nodes`` (its children's totals if the node splits there). Cut after the last bin, the left side
    is the node's totals. In compiled sums of the limbs (each bin's low limb is below 2^32, so no sum overflows),
    joined into Python integers once per side: :func:`_parties_sides` of the one party."""
    return _parties_sides([sums], nodes, ranks, thresholds)[0]


def _sides_of(limbs: list[list[list[int]]]) -> list[Sides]:
    """The sides of ``_side_limbs``' sums (as nested lists), joined into Python integers."""
    out = []
    for (lg_hi, lg_lo, lh_hi, lh_lo, ln), (wg_hi, wg_lo, wh_hi, wh_lo, wn) in zip(
        zip(*limbs[0], strict=True), zip(*limbs[1], strict=True), strict=True
    ):
        lt = ref.Totals((lg_hi << 32) + lg_lo, (lh_hi << 32) + lh_lo, ln)
        out.append(Sides(lt, ref.Totals((wg_hi << 32) + wg_lo - lt.g, (wh_hi << 32) + wh_lo - lt.h, wn - ln)))
    return out


@njit(cache=True, nogil=True)
def _side_limbs_parties(  # pragma: no cover - compiled
    g_hi: np.ndarray,
    g_lo: np.ndarray,
    h_hi: np.ndarray,
    h_lo: np.ndarray,
    n: np.ndarray,
    nodes: np.ndarray,
    ranks: np.ndarray,
    cuts: np.ndarray,
) -> np.ndarray:
    """``_side_limbs`` of every party's sums (inputs (parties, nodes, C, nbins)), shape (parties, 2, 5, len(nodes))."""
    out = np.zeros((n.shape[0], 2, 5, nodes.shape[0]), dtype=np.int64)
    for p in range(n.shape[0]):
        out[p] = _side_limbs(g_hi[p], g_lo[p], h_hi[p], h_lo[p], n[p], nodes, ranks, cuts)
    return out


def _parties_sides(
    sums: Sequence[FixedSums], nodes: Sequence[int], ranks: Sequence[int], thresholds: Sequence[int]
) -> list[list[Sides]]:
    """``_sides`` of several parties' sums at the same cuts, in one compiled call."""
    g_hi, g_lo, h_hi, h_lo, n = (
        np.stack([np.asarray(getattr(s, f), dtype=np.int64) for s in sums])
        for f in ("g_hi", "g_lo", "h_hi", "h_lo", "n")
    )
    limbs = _side_limbs_parties(
        g_hi,
        g_lo,
        h_hi,
        h_lo,
        n,
        np.asarray(nodes, dtype=np.int64),
        np.asarray(ranks, dtype=np.int64),
        np.asarray(thresholds, dtype=np.int64),
    ).tolist()
    return [_sides_of(party) for party in limbs]


def _node_totals(sums: FixedSums, nodes: Sequence[int]) -> list[ref.Totals]:
    """A party's exact totals at each of the level's ``nodes`` (its candidate 0's bins, all of them)."""
    last = sums.n.shape[2] - 1
    return [s.left for s in _sides(sums, nodes, [0] * len(nodes), [last] * len(nodes))]


def params_dict(params: TrainParams) -> dict[str, Any]:
    """The parameters as a plain dict (for JSON reports and saved models)."""
    return asdict(params)


def warm_up(simulator: bool = True) -> None:
    """Load (or compile) this module's kernel on a tiny level, so that a timed run measures training; with
    ``simulator``, also the federation's one-call kernels (``node.kernels.party_kernels``), which a party node never
    runs."""
    one = np.ones((1, 1, 2), dtype=np.int64)
    if simulator:
        party_kernels.warm_up()
    _node_totals(FixedSums(one, one, one, one, one), [0])
    _parties_sides([FixedSums(one, one, one, one, one)] * 2, [0], [0], [1])
