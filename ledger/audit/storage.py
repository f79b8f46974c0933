"""The contract's storage, read through its views, against the replay: what it keeps and pays from must be what its
own events, recomputed, say it should be.

Why besides the events: events are what the contract *said*; a record whose events are right but whose storage is
not (a buggy upgrade, a tampered node) pays from the storage.
"""

from __future__ import annotations

from fgbdt_chain.ledger.audit.record import STATUS_COMPLETED, STATUS_TRAINING, ChainState, NodeState, checksum
from fgbdt_chain.ledger.audit.report import fail
from fgbdt_chain.ledger.audit.state import Replay


def check_storage(rp: Replay, st: ChainState) -> None:
    """Config, status, deposit, contribution totals, every node read and the owed amounts."""
    task = rp.task
    rp.counts.state_checked = True
    if st.config != task.cfg:
        diff = sorted(k for k in set(st.config) | set(task.cfg) if st.config.get(k) != task.cfg.get(k))
        name = diff[0]
        fail(f"stored config {name}", task.cfg.get(name), st.config.get(name))
    want_status = STATUS_COMPLETED if rp.completed else STATUS_TRAINING
    if st.status != want_status:
        fail("stored task status", want_status, st.status)
    if st.reward != task.reward:
        fail("stored reward", task.reward, st.reward)
    for p in task.parties:
        want = rp.totals.get(p, 0)
        got = st.contributions.get(p)
        if got != want:
            fail("stored contribution total (getMember)", want, got, party=p)
    for key in sorted(rp.nodes):
        want_node, got_node = rp.nodes[key], st.nodes.get(key)
        if got_node is None:
            continue  # not read from the chain (the reader reads every node the replay knows)
        tree, nd = key
        for name in NodeState.__dataclass_fields__:
            a, b = getattr(want_node, name), getattr(got_node, name)
            if a != b:
                fail(f"stored node {name} (getNode)", a, b, tree=tree, level=nd.bit_length() - 1, node=nd)
    owed: dict[str, int] = {}
    for ev in rp.events.named("RewardAssigned"):
        a = checksum(ev.args["account"])
        owed[a] = owed.get(a, 0) + int(ev.args["amount"])
    for ev in rp.events.named("Withdrawn"):
        a = checksum(ev.args["account"])
        owed[a] = owed.get(a, 0) - int(ev.args["amount"])
    for a in sorted(set(owed) | set(st.owed)):
        if a in st.owed and st.owed[a] != owed.get(a, 0):
            fail("stored owed (assigned minus withdrawn)", owed.get(a, 0), st.owed[a], party=a)
