"""The task as its opening events fix it: configuration, parties in order, quorum, deposit and the histogram width.

Why checked before any level: every later check reads these (who may vote, how many endorsements, how wide a node's
histograms are), so a record whose opening is inconsistent (parties approved in another order than training
started with, a deposit that does not add up, a blob whose stored hash is not its hash) is named first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_utils import keccak

from fgbdt_chain.ledger.audit.record import AuditInput, EventIndex, checksum
from fgbdt_chain.ledger.audit.report import AuditError, fail
from fgbdt_chain.ledger.audit.seed import check_seed
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.edges import EdgesFormatError, decode_edges, histogram_slots
from fgbdt_chain.ledger.spec.histogram_rules import bounds_of


@dataclass(frozen=True)
class Task:
    """What the replay needs of the task, read once from ``TaskCreated``, ``TrainingStarted`` and the deposits."""

    created: Event
    cfg: dict[str, int]
    params: ref.Params
    depth: int
    trees: int
    tie_break: int
    objective: int
    bounds: int
    """The exact rules' per-bin bounds (``ledger.spec.histogram_rules.bounds_of``)."""
    num_features: int
    requester: str
    parties: list[str]
    """The approved parties in the contract's order (``TrainingStarted``)."""
    party_set: frozenset[str]
    quorum: int
    reward: int
    nbins: int
    """Histogram slots per feature, from the fixed bin edges."""
    shapley_seed: int = 0
    """The seed of the estimated split Shapley values (``ShapleySeedFixed``; ``ledger.spec.shapley_estimate``), 0
    while none is fixed (no resolution yet); checked by ``ledger.audit.seed``."""

    def is_vote(self, v: int) -> bool:
        """A vote the contract takes: a feature or ``ABSTAIN``."""
        return v == ref.ABSTAIN or 0 <= v < self.num_features

    @property
    def vote_range(self) -> str:
        return f"[-1, {self.num_features})"

    def privacy(self) -> dict[str, Any] | None:
        """The recorded privacy budget, through the accountant (``node.privacy.accountant.plan``)."""
        from fgbdt_chain.node.privacy.accountant import plan  # the parties' side; the audit only reports it

        eps = self.cfg.get("epsilon", 0)
        if eps <= 0:
            return None
        return plan(ref.from_fixed(eps), ref.from_fixed(self.cfg["delta"]), self.trees, self.depth).report()


def open_task(inp: AuditInput, events: EventIndex) -> Task:
    """The task from its opening events; :class:`AuditError` when it does not exist or has not started (nothing to
    audit), a mismatch where the opening is inconsistent."""
    created = events.named("TaskCreated")
    if not created:
        raise AuditError(f"unknown task {inp.task_id}: no TaskCreated event")
    if not events.named("TrainingStarted"):
        if events.named("TaskCancelled"):
            raise AuditError(f"task {inp.task_id} was cancelled before training started")
        raise AuditError(f"task {inp.task_id} has not started training yet")
    ev = created[0]
    cfg = {k: int(v) for k, v in dict(ev.args["cfg"]).items()}
    params = ref.Params(cfg["lambda"], cfg["learningRate"], cfg["minRows"], cfg["alpha"], cfg["hessianMode"])
    bounds = bounds_of(cfg["objective"], cfg.get("epsilon", 0))
    num_features = len(ev.args["featureMin"])
    requester = checksum(ev.args["requester"])
    started = events.named("TrainingStarted")
    if len(started) != 1:
        fail("number of TrainingStarted events", 1, len(started))
    parties = [checksum(p) for p in started[0].args["parties"]]
    approved = sorted(events.named("PartyApproved"), key=lambda e: int(e.args["index"]))
    recorded_order = [checksum(e.args["party"]) for e in approved]
    if recorded_order != parties:
        fail("party order (PartyApproved vs TrainingStarted)", recorded_order, parties)
    quorum = ref.endorsement_quorum(len(parties), cfg["quorumNum"], cfg["quorumDen"])
    reward = _reward(ev, events)
    nbins = _check_hashes(ev, events)
    shapley_seed = check_seed(inp, events, started[0])
    return Task(
        created=ev,
        cfg=cfg,
        params=params,
        depth=cfg["depth"],
        trees=cfg["trees"],
        tie_break=cfg["tieBreak"],
        objective=cfg["objective"],
        bounds=bounds,
        num_features=num_features,
        requester=requester,
        parties=parties,
        party_set=frozenset(parties),
        quorum=quorum,
        reward=reward,
        nbins=nbins,
        shapley_seed=shapley_seed,
    )


def _reward(created: Event, events: EventIndex) -> int:
    """The deposit: ``createTask``'s value plus every ``fund`` (each ``TaskFunded`` states the new total)."""
    reward = int(created.args["reward"])
    for ev in events.named("TaskFunded"):
        want = reward + int(ev.args["amount"])
        if int(ev.args["reward"]) != want:
            fail("reward after TaskFunded", want, int(ev.args["reward"]), party=checksum(ev.args["funder"]))
        reward = want
    return reward


def _check_hashes(created: Event, events: EventIndex) -> int:
    """The stored hashes of published blobs: each PSD, and the bin edges (against the hash fixed at creation).
    Returns the histogram width the contract took from the edges' header, which must be what the edges need."""
    for ev in events.named("JoinRequested"):
        want = keccak(bytes(ev.args["psd"]))
        if bytes(ev.args["psdHash"]) != want:
            fail("PSD hash (keccak of the PSD)", want, bytes(ev.args["psdHash"]), party=checksum(ev.args["party"]))
    fixed = events.named("BinEdgesFixed")
    if len(fixed) != 1:
        fail("number of BinEdgesFixed events", 1, len(fixed))
    want = keccak(bytes(fixed[0].args["binEdges"]))
    if bytes(fixed[0].args["binEdgesHash"]) != want:
        fail("bin edges hash (keccak of the edges)", want, bytes(fixed[0].args["binEdgesHash"]))
    at_creation = bytes(created.args["binEdgesHash"])
    if at_creation != b"\x00" * 32 and at_creation != want:
        fail("bin edges hash (fixed at createTask)", at_creation, want)
    try:
        return histogram_slots(decode_edges(bytes(fixed[0].args["binEdges"])))
    except EdgesFormatError as exc:
        fail("bin edges encoding", "a canonical encoding", str(exc))
