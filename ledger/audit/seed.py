"""The task's Shapley seed (``ShapleySeedFixed``) as the contract derives it (``FGBDTChain._fixSeed``).

Why checked: the seed draws the orders of the estimated split Shapley values (``ledger.spec.shapley_estimate``), so
whoever could choose it could choose the contributions. The contract takes keccak256 of the hash of the block that
holds ``start`` (which its sender cannot know when sending it) and the task id, read by the first task transaction in
a later block; a record whose seed comes from another block, from a block fixed too late or too early, or from
another derivation, is named here.
"""

from __future__ import annotations

from fgbdt_chain.ledger.audit.record import AuditInput, EventIndex
from fgbdt_chain.ledger.audit.report import fail
from fgbdt_chain.ledger.rpc.client import Event
from fgbdt_chain.ledger.spec.shapley_estimate import task_seed

SEED_HASH_BLOCKS = 256
"""How far back the EVM's ``blockhash`` reads: a seed block's hash is unreadable (zero) after 256 blocks."""

RESOLUTION_EVENTS = ("NodeSplit", "LeafSet")


def check_seed(inp: AuditInput, events: EventIndex, started: Event) -> int:
    """The task's Shapley seed (0 while none is fixed), checked: one ``ShapleySeedFixed`` at most, and one before the
    first resolution (every resolution needs it); its seed block ``start``'s own, or one more than 256 blocks after
    it (a transaction that found the hash expired made its own block the seed block); fixed within the 256 blocks
    after its seed block, by the first task transaction after it (no event of the task in between); and the seed
    keccak256 of the seed block's hash and the task id, where the audit could read that hash."""
    seeds = events.named("ShapleySeedFixed")
    resolutions = sorted(
        (ev for name in RESOLUTION_EVENTS for ev in events.named(name)), key=lambda e: (e.block_number, e.log_index)
    )
    if len(seeds) > 1 or (resolutions and not seeds):
        fail("number of ShapleySeedFixed events (one, before the first resolution)", 1, len(seeds))
    if not seeds:
        return 0
    ev = seeds[0]
    at = (ev.block_number, ev.log_index)
    first = (resolutions[0].block_number, resolutions[0].log_index) if resolutions else at
    if first < at:
        fail("ShapleySeedFixed before the first resolution", at, first)
    anchor = int(ev.args["seedBlock"])
    if anchor != started.block_number and anchor <= started.block_number + SEED_HASH_BLOCKS:
        fail("Shapley seed block (start's, or one after its hash expired)", started.block_number, anchor)
    if not anchor < ev.block_number <= anchor + SEED_HASH_BLOCKS:
        fail(f"ShapleySeedFixed's block (within {SEED_HASH_BLOCKS} after the seed block)", anchor + 1, ev.block_number)
    between = [e for e in inp.events if anchor < e.block_number < ev.block_number]
    if between:
        first_after = between[0].block_number
        fail("ShapleySeedFixed by the first task transaction after the seed block", ev.block_number, first_after)
    block_hash = inp.state.seed_block_hash if inp.state is not None else None
    seed = int(ev.args["seed"])
    if block_hash is not None and seed != (want := task_seed(block_hash, inp.task_id)):
        fail("Shapley seed (keccak of the seed block's hash and the task id)", want, seed)
    return seed
