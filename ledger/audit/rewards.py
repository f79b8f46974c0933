"""The payouts: the positive contribution total and every ``RewardAssigned`` / ``RewardForfeited``, recomputed from
the replayed contribution totals with the contract's ``_complete`` (``reference.payouts``).

Why only after the last level: the contract pays once, when the last tree's last level resolves; a payout event
before that, or none after it, is itself a mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence

from fgbdt_chain.ledger.audit.record import checksum
from fgbdt_chain.ledger.audit.report import fail, one
from fgbdt_chain.ledger.audit.state import Replay
from fgbdt_chain.ledger.spec import reference as ref


def expected_payouts(
    parties: Sequence[str], totals: dict[str, int], finished: set[str], reward: int, requester: str
) -> tuple[int, list[tuple[str, str, int]]]:
    """(positive total, the payout events ``(name, account, amount)`` in emission order) exactly as the contract's
    ``_complete`` (``reference.payouts``): in party order, each non-zero amount as ``RewardAssigned`` to a party that
    took part to the last step (``finished``) or ``RewardForfeited`` otherwise, then the remainder to the requester."""
    due = ref.payouts([totals.get(p, 0) for p in parties], [p in finished for p in parties], reward)
    events = [
        ("RewardAssigned", p, paid) if paid else ("RewardForfeited", p, lost)
        for p, paid, lost in zip(parties, due.paid, due.forfeited, strict=True)
        if paid or lost
    ]
    if due.requester > 0:
        events.append(("RewardAssigned", requester, due.requester))
    return due.positive, events


def check_payouts(rp: Replay) -> None:
    """``TaskCompleted`` and the payout events against :func:`expected_payouts` of the replay's totals."""
    task, events = rp.task, rp.events
    completed = events.named("TaskCompleted")
    assigned = events.named("RewardAssigned") + events.named("RewardForfeited")
    if not rp.completed:
        if completed or assigned:
            fail("payouts only after the last level", "no TaskCompleted/RewardAssigned/RewardForfeited", "present")
        return
    done = one("TaskCompleted", completed)
    if done is None:
        fail("TaskCompleted after the last level", "TaskCompleted", "none")
    finished = set(task.parties) if rp.active is None else rp.active
    positive, want = expected_payouts(task.parties, rp.totals, finished, task.reward, task.requester)
    if int(done.args["positiveTotal"]) != positive:
        fail("positive contribution total", positive, int(done.args["positiveTotal"]))
    emitted = sorted(assigned, key=lambda e: (e.block_number, e.log_index))
    got = [(e.name, checksum(e.args.get("account", e.args.get("party"))), int(e.args["amount"])) for e in emitted]
    for i in range(max(len(want), len(got))):
        w = want[i] if i < len(want) else None
        g = got[i] if i < len(got) else None
        if w != g:
            party = (w or g or ("?", "?", 0))[1]
            fail(f"payout #{i} (event, account, amount)", w, g, party=party)
        rp.counts.payouts += 1
