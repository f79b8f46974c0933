"""Serving endorsements: another party's level histograms checked against this party's estimate of that party, and
signed when they pass; at a tree's root, also against what that party's previous tree allows (its carry).

What this party signed is kept (``endorsed``): it is what each party will submit, so the level's resolution and the
votes sent ahead need not read the submissions back from the chain.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import nullcontext, suppress
from typing import Any

import numpy as np

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.encoding import endorsement_digest, merkle_root, node_hash, sign_endorsement
from fgbdt_chain.ledger.spec.histogram_rules import HistogramRuleError, bounds_of, candidate_totals, check_node
from fgbdt_chain.ledger.spec.tree_carry import Carry, CarryError, ScoreBounds, applies, leaf_sums
from fgbdt_chain.ledger.wrappers.contracts import HISTOGRAM_EVENTS, Phase, Status, submitted_words
from fgbdt_chain.node.party.following import ChainFollower, ChainLag, candidates_block
from fgbdt_chain.node.party.level_state import LevelState
from fgbdt_chain.node.party.session import PartySession
from fgbdt_chain.node.party.wire import unblock
from fgbdt_chain.node.protocol.endorsement import decide, reads_claims
from fgbdt_chain.node.protocol.verify import Claims


class Endorser:
    """This party as a verifier of the others' histograms."""

    def __init__(self, session: PartySession, chain: ChainFollower, levels: LevelState) -> None:
        self.s, self.chain, self.levels = session, chain, levels
        self.endorsed: dict[tuple[int, int], dict[str, list[ref.NodeHistograms]]] = {}
        """Per (tree, level), the histograms this party endorsed, by party: what each will submit, so a resolution
        need not read the level's submissions back from the events (megabytes per level at depth 6)."""
        self.endorsed_roots: dict[tuple[int, int], dict[str, bytes]] = {}
        """The commitment root of each submission in ``endorsed``, as this party signed it: a tree's carry check
        compares it with the root submitted, where computing it again was a third of the check at a tree's root."""
        self.endorsed_changed = threading.Condition(session.lock)
        """Notified when this party endorses a submission (the votes sent early wait for the whole level)."""
        self._carries: dict[tuple[str, int], Carry] = {}
        self._prefetched: set[tuple[str, int]] = set()
        self._roots: dict[int, dict[tuple[str, int], bytes]] = {}
        """Per finished tree, every submission's root by (party, level), read once from the events' heads."""
        self._submitted: dict[int, dict[tuple[str, int], list[int]]] = {}
        """Per finished tree, every party's submitted histogram words by (party, level): one event read serves the
        carries of all the parties this node endorses."""
        self._score_bounds = ScoreBounds(lambda t: chain.trees.leaves.get(t, {}).values())
        self.checks = 0
        """Endorsement requests that reached the check (the endpoint refuses unsigned and outsiders' before it)."""

    def endorse(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Check another party's level histograms against this party's estimate; (HTTP status, JSON body)."""
        s = self.s
        self.checks += 1
        if s.party is None:
            return 409, {"detail": "this party has not started training yet"}
        if int(body.get("task", -1)) != s.task_id:
            return 422, {"detail": f"this node serves task {s.task_id} only"}
        party = str(body.get("party", ""))
        if party == s.address:
            return 422, {"detail": "a party cannot endorse itself"}
        if party not in s.parties:
            return 403, {"detail": f"{party} is not an approved member of task {s.task_id}"}
        tree, level = int(body.get("tree", -1)), int(body.get("level", -1))
        st = self.chain.histogram_step_state(tree, level)
        if st.status != Status.TRAINING or (st.tree, st.level) != (tree, level) or st.phase != Phase.HISTOGRAMS:
            return 409, {
                "detail": f"not the current step (the task is at tree {st.tree} level {st.level}, "
                f"phase {st.phase.name.lower()})"
            }
        try:
            ctx = self.levels.context(tree, level, st.open_nodes())
        except ChainLag as exc:
            return 409, {"detail": str(exc)}
        ctx.fixed_block = candidates_block(st, s.cfg.step_blocks)
        cands = self.chain.candidates(ctx)
        nb = s.params.nbins
        try:
            blocks = [list(map(int, block)) for block in body["nodes"]]
        except (KeyError, TypeError, ValueError):
            return 422, {"detail": "nodes must be a list of integer lists"}
        if len(blocks) != len(ctx.open_nodes) or any(len(b) != 6 * nb for b in blocks):
            return 422, {"detail": f"expected {len(ctx.open_nodes)} node blocks of {6 * nb} integers"}
        hists = unblock([v for b in blocks for v in b], cands, nb)
        try:  # nothing the contract would refuse is endorsed (the inherited totals it checks itself)
            for hist, node in zip(hists, ctx.open_nodes, strict=True):
                check_node(hist, node, bounds_of(s.cfg.objective, s.cfg.epsilon), tree == 0)
        except (HistogramRuleError, ref.FixedPointOverflow) as exc:
            return 422, {"detail": f"the contract refuses these histograms: {exc}"}
        if level == 0:
            try:
                carry = self.carry_of(party, tree)
            except ChainLag as exc:
                return 409, {"detail": str(exc)}
            try:
                if carry is not None:
                    carry.check(candidate_totals(hists[0], 0))
            except CarryError as exc:
                return 422, {"detail": f"the verifiers refuse these histograms: {exc}"}
        local = s.party
        assert local is not None
        # below a tree's root the statistical rule signs what keeps the exact rules: no claims to convert, and no
        # wait for the lock the main loop holds while it builds a context
        reads = reads_claims(s.rule, level == 0)
        with s.lock if reads else nullcontext():
            verdict, _ = decide(
                s.rule,
                local.rows,
                ctx.k_of_row,
                np.asarray(cands, dtype=np.int64),
                ctx.g,
                ctx.h,
                s.estimators[s.parties.index(party)],
                Claims.from_messages(hists) if reads else None,
                root=level == 0,
            )
        if not verdict.sign:  # the reasons hold statistics of this party's rows: they stay in its own log
            s.log(f"refused party {s.parties.index(party)}'s tree {tree} level {level}: {'; '.join(verdict.reasons)}")
            return 422, {"detail": "this verifier refuses these histograms"}
        root = merkle_root([node_hash(h) for h in hists])
        with s.lock:
            self.endorsed = {k: v for k, v in self.endorsed.items() if k[0] >= tree - 1}
            self.endorsed.setdefault((tree, level), {})[party] = hists
            self.endorsed_roots = {k: v for k, v in self.endorsed_roots.items() if k[0] >= tree - 1}
            self.endorsed_roots.setdefault((tree, level), {})[party] = root
            self.endorsed_changed.notify_all()
        digest = endorsement_digest(
            s.task.client.chain_id, s.task.address, s.task_id, tree, level, party, root, verdict.credit
        )
        return 200, {
            "signature": "0x" + sign_endorsement(s.account.key, digest).hex(),
            "credit": {"g": str(verdict.credit.g), "h": str(verdict.credit.h), "n": str(verdict.credit.n)},
        }

    # ------------------------------------------------------------------ carries

    def prefetch_carries(self, tree: int) -> None:
        """Read what every other party's previous tree allows of its root (``carry_of``) while the root's votes are
        out, once per party and tree: the first endorsement request of the tree then finds it cached, where reading
        the previous tree's submissions in the request was on the critical path of the level. A root whose ballots
        all came ahead has no vote round: its requests read the carries (a thread of their own for this measured
        within the noise)."""
        for p in self.s.parties:
            if p == self.s.address or (p, tree) in self._prefetched:
                continue
            self._prefetched = {k for k in self._prefetched if k[1] >= tree} | {(p, tree)}
            with suppress(ChainLag):  # the endorsement request reads it again
                self.carry_of(p, tree)

    def carry_of(self, party: str, tree: int) -> Carry | None:
        """What ``party``'s tree ``tree - 1`` allows of its root at ``tree`` (``ledger.spec.tree_carry``), from the
        chain's records: its submitted histograms of every level of that tree, the tree's splits and leaf values.
        None where the rule does not apply (the first tree, a private task, the overlap rule); cached per party and
        tree."""
        cfg = self.s.cfg
        if tree == 0 or not applies(self.s.rule.rule, cfg.objective, cfg.epsilon > 0):
            return None
        key = (party, tree)
        with self.s.lock:  # the main loop iterates the tree records this refreshes
            if key not in self._carries:
                self._carries = {k: v for k, v in self._carries.items() if k[1] >= tree}
                self._carries[key] = self._read_carry(party, tree)
            return self._carries[key]

    def _read_carry(self, party: str, tree: int) -> Carry:
        """``carry_of`` from the chain's records (the caller holds the lock): ``party``'s histograms of the previous
        tree as this party endorsed them where every level's endorsed root is the root ``party`` submitted (one read
        of the events' heads per tree), else as the events carry them (decoding every level's words)."""
        prev = tree - 1
        trees = self.chain.trees
        with self.s.timed("chain reads"):
            trees.refresh()
            splits = trees.splits.get(prev, {})
            leaves = trees.leaves.get(prev, {})
            levels = self.endorsed_levels(party, prev, splits, leaves)
            if levels is None:
                levels = self._submitted_levels(party, prev, splits, leaves)
            carry = Carry.of(
                self.s.cfg.objective,
                candidate_totals(levels[0][1], 0),
                leaf_sums(levels, splits, leaves),
                self._score_bounds.before(tree),
            )
        return carry

    def _tree_levels(
        self, tree: int, splits: dict[int, tuple[int, int]], leaves: dict[int, int]
    ) -> Iterator[tuple[int, list[int]]]:
        """(level, open nodes) of a finished tree, from its recorded splits and leaves; ChainLag where a node's
        record is not served yet."""
        depth = self.s.params.depth
        open_nodes = [1]
        for level in range(depth):
            if not open_nodes:
                return
            if any(n not in splits and n not in leaves for n in open_nodes):
                raise ChainLag(f"tree {tree} level {level}: the splits are not served yet")
            yield level, open_nodes
            last = level + 1 == depth
            open_nodes = [] if last else sorted(c for n in open_nodes if n in splits for c in (2 * n, 2 * n + 1))

    def endorsed_levels(
        self, party: str, tree: int, splits: dict[int, tuple[int, int]], leaves: dict[int, int]
    ) -> list[dict[int, ref.NodeHistograms]] | None:
        """``party``'s levels of ``tree`` as this party endorsed them, or None unless every level's endorsed root is
        the one ``party`` submitted: a party may submit histograms whose quorum came from others, so what this
        party signed is only used where the chain says it is what counted."""
        endorsed = [self.endorsed.get((tree, level), {}).get(party) for level in range(self.s.params.depth)]
        if endorsed[0] is None:
            return None
        roots = self._roots.get(tree)
        levels_known = {level for p, level in roots or {} if p == party}
        if roots is None or any(e is not None and level not in levels_known for level, e in enumerate(endorsed)):
            start = self.chain.level_block(tree, 0)
            roots = {
                (p, level): r
                for (p, t, level), r in self.s.task.submitted_roots(self.s.task_id, start).items()
                if t == tree
            }
            self._roots = {tree: roots}
        levels: list[dict[int, ref.NodeHistograms]] = []
        for level, open_nodes in self._tree_levels(tree, splits, leaves):
            hists = endorsed[level]
            if hists is None or len(hists) != len(open_nodes):
                return None
            signed = self.endorsed_roots.get((tree, level), {}).get(party)
            if signed is None or roots.get((party, level)) != signed:  # what this party signed
                return None
            levels.append(dict(zip(open_nodes, hists, strict=True)))
        return levels

    def _submitted_levels(
        self, party: str, tree: int, splits: dict[int, tuple[int, int]], leaves: dict[int, int]
    ) -> list[dict[int, ref.NodeHistograms]]:
        """``party``'s levels of ``tree`` from its ``HISTOGRAM_EVENTS`` (ChainLag while not all are served)."""
        words = self._submitted_words(tree, party)
        levels: list[dict[int, ref.NodeHistograms]] = []
        for level, open_nodes in self._tree_levels(tree, splits, leaves):
            if level not in words:
                self._submitted.pop(tree, None)  # read the events again next time
                raise ChainLag(f"tree {tree} level {level}: {party}'s histograms are not served yet")
            cands = self.chain.tree_candidates(tree, open_nodes)
            levels.append(dict(zip(open_nodes, unblock(words[level], cands, self.s.params.nbins), strict=True)))
        return levels

    def _submitted_words(self, tree: int, party: str) -> dict[int, list[int]]:
        """``party``'s histogram words of a finished tree by level, from the ``HistogramsSubmitted`` events, read
        once per tree for every party (again when a party's are not all served yet)."""
        known = self._submitted.get(tree)
        if known is None or not any(p == party for p, _ in known):
            known = {}
            task = self.s.task
            start = self.chain.level_block(tree, 0)
            events = task.client.logs(task.contract, list(HISTOGRAM_EVENTS), self.s.task_id, start)
            for (p, t, level), w in submitted_words(events).items():
                if t == tree:
                    known[(p, level)] = w
            self._submitted = {tree: known}
        return {level: w for (p, level), w in known.items() if p == party}
