"""Asking the verifiers: this party's level histograms sent to every other party at once, until a quorum of
signatures is in (``node.protocol.endorsement``: the endorsements with the largest credit are submitted)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.wrappers.contracts import Endorsement
from fgbdt_chain.node.party.endorse_client import NoEndorsementStream, VerifierUnreachable
from fgbdt_chain.node.party.following import ChainFollower
from fgbdt_chain.node.party.level_state import LevelContext
from fgbdt_chain.node.party.session import PartySession
from fgbdt_chain.node.party.wire import node_blocks
from fgbdt_chain.node.protocol.endorsement import choose
from fgbdt_chain.node.protocol.verify import Verdict


def hurry_from(deadline: int, session: PartySession) -> int:
    """The block from which a party with a quorum of endorsements stops waiting for the other verifiers' answers:
    half of the step's blocks before its ``deadline``."""
    return deadline - max(1, session.cfg.step_blocks // 2)


class EndorsementAsker:
    """This party's side of the endorsement round: it asks, the others' endpoints answer."""

    def __init__(self, session: PartySession, chain: ChainFollower) -> None:
        self.s, self.chain = session, chain
        self._asking: ThreadPoolExecutor | None = None
        """The threads that ask the verifiers at once, one per other party, kept from level to level."""
        self.gone: set[str] = set()
        """The verifiers unreachable when the last collection ended: once a quorum is in they are not waited for (a
        party gone for good cost every other party the whole patience at every level); one that answers again is
        waited for again."""

    def close(self) -> None:
        """Stop the asking threads (the node is stopping)."""
        if self._asking is not None:
            self._asking.shutdown(wait=False, cancel_futures=True)

    def collect(
        self, ctx: LevelContext, hists: list[ref.NodeHistograms], need: int, deadline: int
    ) -> tuple[list[Endorsement] | None, list[str]]:
        """Ask every other party until ``need`` signatures arrive; parties not yet at this step are asked again.
        Returns the endorsements to submit (``node.protocol.endorsement.choose``: the ``need`` with the largest
        credit), or None short of the quorum, and the refusals' reasons."""
        parties = self.s.parties
        body = {
            "task": self.s.task_id,
            "tree": ctx.tree,
            "level": ctx.level,
            "party": self.s.address,
            "nodes": [[str(v) for v in block] for block in node_blocks(hists)],
        }
        message = json.dumps(body)  # once for every verifier (a wide level's is about 100 KB of JSON)
        others = [p for p in parties if p != self.s.address]
        answers: dict[str, tuple[bytes, ref.Credit]] = {}
        final: dict[str, str] = {}
        started = time.monotonic()
        if self._asking is None:
            self._asking = ThreadPoolExecutor(max_workers=max(1, len(others)), thread_name_prefix="endorse-ask")
        pool = self._asking
        unreachable: set[str] = set()
        while True:
            pending = [p for p in others if p not in answers and p not in final]
            for p, (answer, reason, retry) in pool.map(lambda p: (p, self.ask(p, message)), pending):
                unreachable.discard(p)
                if answer is not None:
                    answers[p] = answer
                elif not retry:
                    final[p] = f"party {parties.index(p)}: {reason}"
                elif reason.startswith("unreachable"):
                    unreachable.add(p)
            # every verifier's answer is awaited, since the credit is the quorum-th best attestation; a
            # verifier that cannot be reached is given up on once a quorum is in and the patience is spent, or
            # half of the step's blocks passed: the submission must still land before the deadline (a step of 20
            # blocks at a block every 0.25 s is 5 s, and a party waiting the 10 s patience for a verifier that was
            # gone missed it, as every other party did); and at once where every verifier missing was unreachable
            # at the last level too (``gone``)
            if len(answers) + len(final) == len(others) or len(others) - len(final) < need:
                break
            waited = time.monotonic() - started
            latest = self.chain.latest_block()
            missing = {p for p in others if p not in answers and p not in final}
            if latest > deadline or (
                len(answers) >= need
                and (
                    waited > self.s.settings.endorse_patience_seconds
                    or latest >= hurry_from(deadline, self.s)
                    or missing <= (unreachable & self.gone)
                )
            ):
                break
            time.sleep(self.s.settings.poll_seconds * 4)
        self.gone = unreachable
        index = {p: parties.index(p) for p in answers}
        verdicts = {index[p]: Verdict(True, (), credit) for p, (_, credit) in answers.items()}
        chosen = choose(verdicts, need)
        if chosen is None:
            return None, list(final.values())
        by_index = {index[p]: p for p in answers}
        return [Endorsement(answers[by_index[i]][0], answers[by_index[i]][1]) for i in chosen[0]], list(final.values())

    def ask(self, party: str, body: str) -> tuple[tuple[bytes, ref.Credit] | None, str, bool]:
        """((signature, credit), reason, retry later) from one verifier."""
        try:
            status, answer = self.s.verifiers.ask(self.s.endpoints[party], body, audience=party)
        except NoEndorsementStream as exc:
            return None, str(exc), False
        except VerifierUnreachable as exc:
            return None, f"unreachable ({exc})", True
        if status == 200:
            credit = ref.Credit(*(int(answer["credit"][q]) for q in ("g", "h", "n")))
            return (bytes.fromhex(answer["signature"].removeprefix("0x")), credit), "", False
        return None, str(answer.get("detail", answer)), status in (409, 429)  # not yet, or slower: ask again
