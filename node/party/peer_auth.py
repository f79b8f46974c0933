"""Who is asking: every request to a party's endpoints is signed by the member it claims to come from.

Why: a party's endpoints check histograms against the party's own rows and sign what passes. Answered to anyone who
can reach the port, anyone could post histograms in a member's name as often as it liked and learn from the answers
how the verifier's rows compare with them. So a request (an HTTP call, or one message on a WebSocket stream) carries
its asker's EIP-191 signature, by the key the asker joined the task with, over:

- the scheme (``fgbdt-party-request-v1``), the method (``POST``, or ``WS`` for a stream message) and the path;
- the chain id, the task id, the asker's address and the address of the party asked (a request signed for one verifier
  is refused by every other);
- a fresh random nonce and the asker's clock (Unix seconds);
- the keccak-256 hash of the body, which names the tree and the level.

The endpoint (:class:`PeerGuard`) checks, before it parses the body or does any work: the size (413), the
signature and the clock (401: missing, malformed, signed by another key, or more than ``skew_seconds`` from the
endpoint's clock), membership (403: the signer is not an approved party of the task), the asker's rate (429: a token
bucket per member) and the nonce (401: seen within the clock window; each member's nonces are kept until their
timestamps leave it, at most ``nonces_per_peer`` of them). The route then refuses a body whose claimed party is not
the signer (403). Recovering the signer costs about 0.6 ms, against milliseconds for the check it guards.

An HTTP request carries its credentials in the headers ``X-FGBDT-Signer``, ``X-FGBDT-Nonce``, ``X-FGBDT-Time`` and
``X-FGBDT-Signature``; a stream message is one line of JSON with the same four fields, a newline, then the body.
"""

from __future__ import annotations

import json
import secrets
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.spec.encoding import personal_hash, recover_hash_signer, sign_hash

SCHEME = "fgbdt-party-request-v1"
HEADERS = {
    "signer": "x-fgbdt-signer",
    "nonce": "x-fgbdt-nonce",
    "time": "x-fgbdt-time",
    "signature": "x-fgbdt-signature",
}
"""The HTTP headers that carry a request's credentials, by field."""


def request_text(
    method: str, path: str, chain_id: int, task: int, signer: str, audience: str, nonce: str, at: int, body: bytes
) -> bytes:
    """The text a request's signature is over (EIP-191 ``personal_sign``: any wallet can sign it)."""
    lines = [
        SCHEME,
        method.upper(),
        path,
        str(chain_id),
        str(task),
        signer.lower(),
        audience.lower(),
        nonce,
        str(at),
        "0x" + keccak(body).hex(),
    ]
    return "\n".join(lines).encode()


@dataclass(frozen=True)
class Credentials:
    """Who signed a request, its nonce, its time and the signature."""

    signer: str
    nonce: str
    at: int
    signature: str

    def headers(self) -> dict[str, str]:
        return {
            HEADERS["signer"]: self.signer,
            HEADERS["nonce"]: self.nonce,
            HEADERS["time"]: str(self.at),
            HEADERS["signature"]: self.signature,
        }

    def line(self) -> str:
        """The first line of a stream message."""
        return json.dumps({"signer": self.signer, "nonce": self.nonce, "time": self.at, "signature": self.signature})

    @classmethod
    def of_headers(cls, headers: Mapping[str, str]) -> Credentials | None:
        """The credentials of an HTTP request, None when any header is missing or malformed."""
        fields = {k: headers.get(h) for k, h in HEADERS.items()}
        return cls._of(fields)

    @classmethod
    def split_message(cls, message: str | bytes) -> tuple[Credentials | None, bytes]:
        """(credentials, body) of a stream message: its first line, and the rest as bytes."""
        raw = message.encode() if isinstance(message, str) else message
        head, newline, body = raw.partition(b"\n")
        if not newline:
            return None, raw
        try:
            fields = json.loads(head)
        except ValueError:
            return None, body
        return (cls._of(fields) if isinstance(fields, dict) else None), body

    @classmethod
    def _of(cls, fields: Mapping[str, object]) -> Credentials | None:
        signer, nonce, at, signature = (fields.get(k) for k in ("signer", "nonce", "time", "signature"))
        if not all(isinstance(v, str) for v in (signer, nonce, signature)) or len(str(nonce)) > 64:
            return None
        try:
            when = int(str(at))
        except ValueError:
            return None
        return cls(str(signer), str(nonce), when, str(signature))


class RequestSigner:
    """Signs this party's requests to the other parties' endpoints with its task key."""

    def __init__(self, account: LocalAccount, chain_id: Callable[[], int], task_id: int) -> None:
        self.account, self.chain_id, self.task_id = account, chain_id, task_id

    def sign(self, method: str, path: str, body: bytes, audience: str) -> Credentials:
        nonce, at = secrets.token_hex(16), int(time.time())
        text = request_text(
            method, path, self.chain_id(), self.task_id, self.account.address, audience, nonce, at, body
        )
        signature = sign_hash(self.account.key, personal_hash(text))  # eth-account's sign_message, same bytes
        return Credentials(self.account.address, nonce, at, "0x" + signature.hex())


@dataclass(frozen=True)
class PeerLimits:
    """What one endpoint takes from each member."""

    rate: float = 100.0
    """Requests per second per member, sustained. A party sends each verifier one endorsement request per level and
    its relayer one or two hand-overs; a level takes 50 ms at the fastest measured (four parties on a devnet)."""
    burst: int = 400
    """Requests a member may send at once above ``rate``: a relayer gets three a level from each party (its
    endorsement request and two hand-overs), so a run of fast levels stays within it. An asker told 429 asks again
    later."""
    skew_seconds: int = 30
    """How far a request's time may be from the endpoint's clock; nonces are kept as long."""
    nonces_per_peer: int = 8192
    """The most nonces kept per member: above ``rate`` times twice the skew window, so that a member within its rate
    never meets it."""


def request_limit(depth: int, nbins: int) -> int:
    """The largest request body a task's parties send: a level of ``2^(depth-1)`` open nodes of ``6 * nbins``
    integers, each a decimal string of up to 78 digits with sign, quotes and comma, and 64 KiB for the rest."""
    return (1 << max(depth - 1, 0)) * 6 * nbins * 82 + 65536


class Refused(Exception):
    """A request the endpoint does not serve: its HTTP status and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class PeerGuard:
    """Admits a request before any work is done on it, or refuses it (:class:`Refused`)."""

    def __init__(
        self,
        chain_id: Callable[[], int],
        task_id: int,
        me: str,
        members: Callable[[], Collection[str]],
        max_bytes: Callable[[], int],
        limits: PeerLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.chain_id, self.task_id, self.me = chain_id, task_id, me
        self.members, self.max_bytes = members, max_bytes
        self.limits = limits or PeerLimits()
        self.clock = clock
        self._lock = threading.Lock()
        self._nonces: dict[str, OrderedDict[str, float]] = {}
        self._buckets: dict[str, tuple[float, float]] = {}
        """Per member: (tokens, when counted)."""
        self.refused: dict[int, int] = {}
        """Requests refused, by status (for the node's log and the tests)."""

    def admit(self, method: str, path: str, body: bytes, creds: Credentials | None) -> str:
        """The signer (checksummed) of a request to serve; :class:`Refused` for any other."""
        try:
            self.size(len(body))
            return self._admit(method, path, body, creds)
        except Refused as refusal:
            with self._lock:
                self.refused[refusal.status] = self.refused.get(refusal.status, 0) + 1
            raise

    def size(self, size: int) -> None:
        """:class:`Refused` (413) for a body larger than the task's widest level needs."""
        limit = self.max_bytes()
        if size > limit:
            raise Refused(413, f"a request of {size} bytes: this endpoint takes at most {limit}")

    def _admit(self, method: str, path: str, body: bytes, creds: Credentials | None) -> str:
        if creds is None:
            raise Refused(401, "unsigned: a request carries its member's signature (node.party.peer_auth)")
        now = self.clock()
        skew = self.limits.skew_seconds
        if abs(creds.at - now) > skew:
            raise Refused(
                401, f"the request's time is {creds.at - now:+.0f} s from this endpoint's clock (at most {skew})"
            )
        members = set(self.members())
        if not members:
            raise Refused(409, "this party does not know the task's members yet: ask again once training starts")
        try:
            signer = to_checksum_address(creds.signer)
            text = request_text(
                method, path, self.chain_id(), self.task_id, signer, self.me, creds.nonce, creds.at, body
            )
            recovered = recover_hash_signer(personal_hash(text), bytes.fromhex(creds.signature.removeprefix("0x")))
        except Exception:  # eth-keys raises its own errors for malformed signatures and addresses
            raise Refused(401, "bad signature") from None
        if recovered != signer:
            raise Refused(401, "bad signature: not signed by the claimed member for this endpoint, task and body")
        if signer not in members:
            raise Refused(403, f"{signer} is not an approved member of task {self.task_id}")
        if signer == self.me:
            raise Refused(403, "a party does not ask itself")
        with self._lock:
            tokens, then = self._buckets.get(signer, (float(self.limits.burst), now))
            tokens = min(float(self.limits.burst), tokens + (now - then) * self.limits.rate)
            if tokens < 1.0:
                self._buckets[signer] = (tokens, now)
                raise Refused(429, f"more than {self.limits.rate:g} requests a second from {signer}: slow down")
            self._buckets[signer] = (tokens - 1.0, now)
            seen = self._nonces.setdefault(signer, OrderedDict())
            while seen and next(iter(seen.values())) < now:
                seen.popitem(last=False)
            if creds.nonce in seen:
                raise Refused(401, "replayed: this nonce was used already")
            if len(seen) >= self.limits.nonces_per_peer:
                raise Refused(429, f"{len(seen)} requests from {signer} within {2 * skew} s: slow down")
            seen[creds.nonce] = max(creds.at + skew, now)
        return signer


def tls_client_context(ca_file: str | None) -> ssl.SSLContext | None:
    """The context a party verifies the others' ``https``/``wss`` endpoints with: against ``ca_file`` (PEM) where
    given, else None (the system's CAs)."""
    return None if ca_file is None else ssl.create_default_context(cafile=ca_file)
