"""The requester's approvals (``Requester.wait_for_joins``): each party approved as its join is seen, in party
(launch) order whatever order the joins land in, and a party that never joins named in the error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fgbdt_chain.deploy.requester import Requester


def _requester(batches: list[list[str]]) -> tuple[Requester, list[str]]:
    """A requester whose chain serves the ``JoinRequested`` events of ``batches``, one more batch at each read."""
    req = object.__new__(Requester)
    req.accounts = [SimpleNamespace(address=a) for a in ("0xA", "0xB", "0xC")]  # type: ignore[misc]
    req.task = SimpleNamespace(contract="contract")  # type: ignore[assignment]
    req.task_id, req.start_block = 7, 40
    req._check_parties_alive = lambda: None  # type: ignore[method-assign]
    reads = iter(batches)
    seen: list[str] = []

    def logs(contract: Any, names: list[str], task_id: int, from_block: int) -> list[Any]:
        assert (contract, names, task_id, from_block) == ("contract", ["JoinRequested"], 7, 40)  # from its creation
        seen.extend(next(reads, []))
        return [SimpleNamespace(args={"party": p, "psd": p.encode()}) for p in seen]

    req.client = SimpleNamespace(logs=logs)  # type: ignore[assignment]
    return req, seen


def test_each_party_is_approved_as_its_join_is_seen_in_party_order() -> None:
    req, _ = _requester([["0xB"], ["0xC"], ["0xA"]])  # the first party joins last
    approved: list[str] = []
    payloads = req.wait_for_joins(timeout=10.0, on_join=approved.append)
    assert approved == ["0xA", "0xB", "0xC"]
    assert payloads == {"0xA": b"0xA", "0xB": b"0xB", "0xC": b"0xC"}
    req, _ = _requester([["0xA"], [], ["0xB", "0xC"]])
    approved.clear()
    req.wait_for_joins(timeout=10.0, on_join=approved.append)
    assert approved == ["0xA", "0xB", "0xC"]


def test_a_party_that_never_joins_is_named_and_the_ones_after_it_wait() -> None:
    req, _ = _requester([["0xA", "0xC"]])
    approved: list[str] = []
    with pytest.raises(RuntimeError, match=r"only 2 of 3 parties joined .* party 1 \(0xB\) did not"):
        req.wait_for_joins(timeout=0.1, on_join=approved.append)
    assert approved == ["0xA"]  # 0xC joined, but waits for 0xB's approval: party order is approval order
