"""The API's view of the chain: a lazy connection, the signed-request pipeline, and the read models.

Why apart from the routes: the routes only translate HTTP to calls of this module and back. Everything that touches
the chain (and so can fail because the node is down) lives here, raising :class:`~api.errors.ApiError` with the HTTP
status the client must see; :mod:`api.error_handlers` maps it, contract reverts and chain outages to responses.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_typing import HexStr
from eth_utils import to_checksum_address
from web3 import Web3
from web3.exceptions import Web3RPCError
from web3.types import RPCEndpoint

from fgbdt_chain.api import models as m
from fgbdt_chain.api.errors import CONNECTION_ERRORS, ApiError, ChainUnavailable
from fgbdt_chain.api.finished import FinishedTasks
from fgbdt_chain.api.limits import Limits, Slots, StreamGate
from fgbdt_chain.ledger.rpc.client import ChainClient, Event, TxResult
from fgbdt_chain.ledger.rpc.errors import ContractRevert
from fgbdt_chain.ledger.rpc.http_transport import KeepAliveHTTPProvider
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.task_params import TaskParameters
from fgbdt_chain.ledger.toolchain.compile import Artifact
from fgbdt_chain.ledger.wrappers.chain_model import model_from_chain
from fgbdt_chain.ledger.wrappers.contracts import Membership, Status, TaskConfig, TaskContract, TaskState, level_nodes
from fgbdt_chain.ledger.wrappers.forwarder import Forwarder, ForwardRequest, calldata, create_task_args
from fgbdt_chain.node.model.trees import Model
from fgbdt_chain.node.privacy.accountant import plan

T = TypeVar("T")

STATUS_NAMES: dict[Status, m.TaskStatusName] = {
    Status.OPEN: "open",
    Status.TRAINING: "training",
    Status.COMPLETED: "completed",
    Status.CANCELLED: "cancelled",
}
PHASE_NAMES: tuple[m.PhaseName, ...] = ("voting", "histograms", "resolving")
MEMBER_NAMES: tuple[m.MembershipName, ...] = ("none", "pending", "approved", "refused")

FINISHED = (Status.COMPLETED, Status.CANCELLED)
NOT_FOUND_ERRORS = {"UnknownTask"}
FORBIDDEN_ERRORS = {"NotRequester", "NotMember", "NotApproved", "NothingToWithdraw"}

__all__ = ["CONNECTION_ERRORS", "ApiError", "Backend", "ChainUnavailable", "CheckedRequest", "Settings", "SignedCall"]


@dataclass(frozen=True)
class SignedCall:
    """A state change a client asks for: the contract call its endpoint makes, built from the path and the body, and
    the client's signature of it (``task_id``: the task it acts on, None for ``createTask``)."""

    function: str
    args: tuple[Any, ...]
    auth: m.SignedAuth | None
    task_id: int | None = None


@dataclass(frozen=True)
class CheckedRequest:
    """A signed call that passed every check: the ``ForwardRequest`` to relay and its signature."""

    request: ForwardRequest
    signature: bytes
    task_id: int | None


@dataclass(frozen=True)
class Settings:
    """Where the chain and the contracts are, and the relayer's key (None: a read-only API); what a client may ask
    of the server (``limits``); how many finished tasks' reads are kept and how often they are checked against the
    chain (``api.finished``)."""

    rpc_url: str
    contract: str
    forwarder: str | None = None
    relayer_key: str | None = None
    rpc_timeout: float = 10.0
    retry_after: int = 5
    limits: Limits = field(default_factory=Limits)
    finished_tasks: int = 256
    recheck: float = 0.1


class Backend:
    """Lazily connected chain access for the API (reconnects after the node comes back)."""

    def __init__(self, settings: Settings, artifacts: dict[str, Artifact] | None = None) -> None:
        self.settings = settings
        self._artifacts = artifacts
        self._lock = threading.Lock()
        self._client: ChainClient | None = None
        self._task: TaskContract | None = None
        self._forwarder: Forwarder | None = None
        self._receipts: dict[str, int] = {}
        self.relayer: LocalAccount | None = (
            Account.from_key(settings.relayer_key) if settings.relayer_key is not None else None
        )
        self.finished = FinishedTasks(
            lambda: self.client().block_number, self._task_changed, settings.finished_tasks, settings.recheck
        )
        self.streams = StreamGate(settings.limits)
        self.audits = Slots(settings.limits.max_audits, "audits", "--max-audits")
        self._relaying: set[tuple[str, int]] = set()
        """(signer, forwarder nonce) of the signed requests being checked and relayed now."""

    # ------------------------------------------------------------------ connection

    def client(self) -> ChainClient:
        """The chain client, connecting on first use; raises :class:`ChainUnavailable` when the node is down."""
        with self._lock:
            if self._client is None:
                # libcurl, one kept-alive connection per server thread (ledger.rpc.http_transport): requests'
                # transport cost about 0.8 ms a call here, and a read makes 4 to 11 calls
                provider = KeepAliveHTTPProvider(
                    self.settings.rpc_url,
                    timeout=self.settings.rpc_timeout,
                    cache_allowed_requests=True,
                    cacheable_requests={RPCEndpoint("eth_chainId")},
                )
                w3 = Web3(provider)
                try:
                    client = ChainClient(w3, self._artifacts)
                except CONNECTION_ERRORS as exc:
                    raise ChainUnavailable(f"chain node at {self.settings.rpc_url} unreachable") from exc
                task = TaskContract.at(client, self.settings.contract)
                fw_address = self.settings.forwarder or task.trusted_forwarder()
                self._forwarder = Forwarder.at(client, fw_address)
                self._task = task
                self._client = client
            return self._client

    def task(self) -> TaskContract:
        """The FGBDTChain contract."""
        self.client()
        assert self._task is not None
        return self._task

    def forwarder(self) -> Forwarder:
        """The trusted forwarder."""
        self.client()
        assert self._forwarder is not None
        return self._forwarder

    # ------------------------------------------------------------------ reads

    def state(self, task_id: int) -> TaskState:
        """``getState``, with an unknown task as 404; a finished task's from memory (``api.finished``: its state
        no longer changes, and the head read after it bounds the events its other reads are checked for)."""
        entry = self.finished.entry(task_id)
        if entry is not None and "state" in entry.reads:
            kept: TaskState = entry.reads["state"]
            return kept
        try:
            st = self.task().state(task_id)
        except ContractRevert as exc:
            if exc.name in NOT_FOUND_ERRORS:
                raise ApiError(404, f"task {task_id} does not exist", exc.name) from exc
            raise
        if st.status in FINISHED:
            self.finished.finished(task_id, self.client().block_number).reads["state"] = st
        return st

    def kept(self, task_id: int, kind: str, compute: Callable[[], T]) -> T:
        """The ``kind`` read of the task: from memory while the task is finished and nothing new happened to it
        (``api.finished``), else ``compute()`` from the chain."""
        value = self.finished.read(task_id, kind, compute)
        return compute() if value is None else value

    def _task_changed(self, task_id: int, first: int, last: int) -> bool:
        task = self.task()
        return bool(task.client.logs(task.contract, (), task_id, from_block=first, to_block=last))

    def model(self, task_id: int) -> Model:
        """The model the chain recorded (complete trees); ``ModelNotReady`` before the first."""
        return self.kept(task_id, "model", lambda: model_from_chain(self.task(), task_id))

    def logs(self, task_id: int, names: Sequence[str] = (), from_block: int = 0) -> list[Event]:
        """The task's events."""
        task = self.task()
        return task.client.logs(task.contract, names, task_id, from_block=from_block)

    def summary(self, task_id: int) -> m.TaskSummary:
        """One line of the task list."""
        st = self.state(task_id)
        return self.kept(task_id, "summary", lambda: self._summary(task_id, st))

    def _summary(self, task_id: int, st: TaskState) -> m.TaskSummary:
        cfg = self.task().config(task_id)
        return m.TaskSummary(
            task_id=task_id,
            requester=st.requester,
            status=STATUS_NAMES[st.status],
            reward_wei=st.reward,
            trees=cfg.trees,
            depth=cfg.depth,
            parties=len(self.task().parties(task_id)),
            trees_completed=trees_completed(st, cfg),
        )

    def list_tasks(self, offset: int, limit: int) -> m.TaskList:
        """Tasks newest first."""
        total = self.task().task_count()
        ids = list(range(total - offset, max(total - offset - limit, 0), -1))
        return m.TaskList(total=total, offset=offset, tasks=[self.summary(i) for i in ids])

    def members(self, task_id: int) -> list[m.MemberInfo]:
        """Every party that asked to join, in request order, with its current membership."""
        return self.kept(task_id, "members", lambda: self._members(task_id))

    def _members(self, task_id: int) -> list[m.MemberInfo]:
        task = self.task()
        out = []
        for ev in self.logs(task_id, ["JoinRequested"]):
            party = str(ev.args["party"])
            status, index, psd_hash, contribution = task.member(task_id, party)
            out.append(
                m.MemberInfo(
                    address=party,
                    status=MEMBER_NAMES[int(status)],
                    index=index if status == Membership.APPROVED else None,
                    psd_hash="0x" + psd_hash.hex(),
                    endpoint=str(ev.args["endpoint"]),
                    contribution=contribution,
                )
            )
        return out

    def _gas(self, events: Sequence[Event]) -> m.GasInfo:
        w3 = self.client().w3
        total = 0
        hashes = {e.tx_hash for e in events if e.tx_hash}
        for h in hashes:
            if h not in self._receipts:
                tx = HexStr(h if h.startswith("0x") else "0x" + h)
                self._receipts[h] = int(w3.eth.get_transaction_receipt(tx)["gasUsed"])
            total += self._receipts[h]
        return m.GasInfo(transactions=len(hashes), total_gas_used=total)

    def detail(self, task_id: int, st: TaskState | None = None) -> m.TaskDetail:
        """Everything about one task (``st``: its state if the caller has read it already)."""
        read = st if st is not None else self.state(task_id)
        return self.kept(task_id, "detail", lambda: self._detail(task_id, read))

    def _detail(self, task_id: int, st: TaskState) -> m.TaskDetail:
        cfg = self.task().config(task_id)
        events = self.logs(task_id)
        created = next(e for e in events if e.name == "TaskCreated")
        levels = [e for e in events if e.name == "LevelStarted"]
        done = trees_completed(st, cfg)
        progress = m.Progress(
            phase=PHASE_NAMES[int(st.phase)] if st.status == Status.TRAINING else None,
            tree=st.tree,
            level=st.level,
            trees=cfg.trees,
            depth=cfg.depth,
            trees_completed=done,
            levels_started=len(levels),
            open_nodes=st.open_nodes() if st.status == Status.TRAINING else [],
            resolved_nodes=level_nodes(st.level, st.resolved_mask) if st.status == Status.TRAINING else [],
            step_deadline=st.step_deadline,
        )
        fixed = [e for e in events if e.name == "BinEdgesFixed"]
        edges_hash = fixed[-1].args["binEdgesHash"] if fixed else created.args["binEdgesHash"]
        return m.TaskDetail(
            task_id=task_id,
            requester=st.requester,
            status=STATUS_NAMES[st.status],
            reward_wei=st.reward,
            task_schema=m.SchemaOut(
                feature_min=[m.from_fixed(int(x)) for x in created.args["featureMin"]],
                feature_max=[m.from_fixed(int(x)) for x in created.args["featureMax"]],
            ),
            parameters=parameters_of(cfg),
            bin_edges_hash="0x" + bytes(edges_hash).hex(),
            members=self.members(task_id),
            progress=progress,
            gas=self._gas(events),
        )

    def taking_part(self, task_id: int, status: Status, parties: Sequence[str]) -> set[str]:
        """The ``parties`` the contract counts as taking part (its ``_active``): whoever sent histograms at the step
        before the current one (every party at the first step), and once the task completed, at its last step, the
        parties it pays (``reference.payouts``). Only the last two steps' histogram events are read."""
        starts = self.logs(task_id, ["LevelStarted"]) if status in (Status.TRAINING, Status.COMPLETED) else []
        last = 1 if status == Status.COMPLETED else 2
        if len(starts) < last:
            return set(parties)
        step = starts[-last]
        key = (int(step.args["tree"]), int(step.args["level"]))
        sent = self.logs(task_id, ["HistogramsSubmitted"], from_block=step.block_number)
        return {str(e.args["party"]) for e in sent if (int(e.args["tree"]), int(e.args["level"])) == key}

    def contributions(self, task_id: int, st: TaskState | None = None) -> m.ContributionsResponse:
        """Totals, per tree, shares and rewards of every approved party (``st``: the task's state, if read)."""
        read = st if st is not None else self.state(task_id)
        return self.kept(task_id, "contributions", lambda: self._contributions(task_id, read))

    def _contributions(self, task_id: int, st: TaskState) -> m.ContributionsResponse:
        task = self.task()
        cfg = task.config(task_id)
        parties = task.parties(task_id)
        per_tree: dict[str, list[int]] = {p: [0] * cfg.trees for p in parties}
        assigned: dict[str, int] = {}
        forfeited: dict[str, int] = {}
        withdrawn: dict[str, int] = {}
        for ev in self.logs(task_id, ["ContributionsAdded", "RewardAssigned", "RewardForfeited", "Withdrawn"]):
            a = ev.args
            if ev.name == "ContributionsAdded":
                for party, c in zip(a["parties"], a["contribution"], strict=True):
                    per_tree.setdefault(str(party), [0] * cfg.trees)[int(a["tree"])] += int(c)
            elif ev.name == "RewardAssigned":
                assigned[str(a["account"])] = assigned.get(str(a["account"]), 0) + int(a["amount"])
            elif ev.name == "RewardForfeited":
                forfeited[str(a["party"])] = int(a["amount"])
            else:
                withdrawn[str(a["account"])] = withdrawn.get(str(a["account"]), 0) + int(a["amount"])
        totals = {p: task.contribution(task_id, p) for p in parties}
        positive = sum(c for c in totals.values() if c > 0)
        staying = self.taking_part(task_id, st.status, parties)
        shares = ref.reward_shares([totals[p] for p in parties], [p in staying for p in parties])
        rows = [
            m.PartyContribution(
                party=p,
                total=totals[p],
                total_float=m.from_fixed(totals[p]),
                per_tree=per_tree[p],
                share=share,
                reward_assigned_wei=assigned.get(p, 0),
                reward_forfeited_wei=forfeited.get(p, 0),
                reward_due_wei=task.owed(task_id, p),
                withdrawn_wei=withdrawn.get(p, 0),
            )
            for p, share in zip(parties, shares, strict=True)
        ]
        return m.ContributionsResponse(
            task_id=task_id,
            status=STATUS_NAMES[st.status],
            reward_wei=st.reward,
            positive_total=positive,
            parties=rows,
            requester_due_wei=task.owed(task_id, st.requester),
            requester_withdrawn_wei=withdrawn.get(st.requester, 0),
        )

    # ------------------------------------------------------------------ signed requests

    @contextmanager
    def checked(self, call: SignedCall) -> Iterator[CheckedRequest]:
        """:meth:`check` the call and hold its signer's nonce while the caller relays it: a request signed with the
        same nonce and arriving meanwhile is refused at once (409 ``NonceInUse``) rather than checked against a
        nonce about to be used, relayed, and refused by the forwarder (a transaction the relayer pays for)."""
        checked = self.check(call)
        key = (checked.request.sender, checked.request.nonce)
        try:
            yield checked
        finally:
            with self._lock:
                self._relaying.discard(key)

    def check(self, call: SignedCall) -> CheckedRequest:
        """Check a signed call before anything is relayed; the order of the checks fixes the status: 503 (no relayer
        key), 401 (signature, expiry), 409 (the nonce is used, ahead, or another request of the signer with it is
        being relayed), 404 (unknown task), 403 (on-chain role), 409 (the call would revert). A request that passes
        holds its (signer, nonce) in ``_relaying``, which :meth:`checked` releases."""
        if self.relayer is None:
            raise ApiError(503, "this API runs without a relayer key: state changes are disabled")
        auth = call.auth
        if auth is None:
            raise ApiError(401, "missing `auth`: state-changing requests must be signed (EIP-712 ForwardRequest)")
        task = self.task()
        fw = self.forwarder()
        req = ForwardRequest(
            sender=to_checksum_address(auth.signer),
            to=task.address,
            value=0,
            gas=auth.gas,
            nonce=auth.nonce,
            deadline=auth.deadline,
            data=calldata(task, call.function, *call.args),
        )
        try:
            sig = bytes.fromhex(auth.signature.removeprefix("0x"))
            if len(sig) != 65:
                raise ValueError("not 65 bytes")
            signer = fw.recover(req, sig)
        except Exception as exc:
            raise ApiError(401, f"malformed signature: {exc}") from exc
        if signer != req.sender:
            raise ApiError(401, "the signature does not match `signer` for this request (wrong key or body)")
        if auth.deadline < time.time():
            raise ApiError(401, f"the request expired at {auth.deadline}")
        key = (req.sender, req.nonce)
        with self._lock:
            if key in self._relaying:
                raise ApiError(
                    409,
                    f"another request of {req.sender} signed with nonce {req.nonce} is being relayed now: one "
                    "signed request per nonce",
                    "NonceInUse",
                )
            self._relaying.add(key)
        try:
            self._check_nonce(fw, req)
            if call.task_id is not None:
                self._check_role(call.task_id, call.function, req.sender)
            try:
                fw.simulate(req)
            except ContractRevert as exc:
                raise _revert_error(exc) from exc
        except BaseException:
            with self._lock:
                self._relaying.discard(key)
            raise
        return CheckedRequest(req, sig, call.task_id)

    @staticmethod
    def _check_nonce(fw: Forwarder, req: ForwardRequest) -> None:
        """409 unless ``req`` carries the nonce the forwarder expects of its signer, saying which it expects."""
        expected = fw.nonce(req.sender)
        if req.nonce < expected:
            raise ApiError(
                409,
                f"nonce {req.nonce} of {req.sender} was used by an earlier request: sign again with nonce {expected}",
                "NonceUsed",
            )
        if req.nonce > expected:
            raise ApiError(
                409,
                f"nonce {req.nonce} of {req.sender} is ahead of the forwarder's {expected}: requests of one signer "
                f"are relayed in nonce order, send the one with nonce {expected} first",
                "NonceAhead",
            )

    def execute(self, checked: CheckedRequest) -> TxResult:
        """Relay a checked request from the relayer key, which pays the gas (a revert here, e.g. a nonce another
        request used in between, maps like a simulated one)."""
        if self.relayer is None:  # check() refuses such a request first
            raise ApiError(503, "this API runs without a relayer key: state changes are disabled")
        try:
            try:
                return self.forwarder().execute(self.relayer, checked.request, checked.signature)
            except Web3RPCError as exc:
                if "nonce too low" not in str(exc).lower():
                    raise
                # the relayer's own transaction nonce moved under this server (its key relays elsewhere too): the
                # chain client reads it again, and the request, which did not land, is sent once more
                return self.forwarder().execute(self.relayer, checked.request, checked.signature)
        except ContractRevert as exc:
            if exc.name == "ERC2771ForwarderInvalidSigner":  # checked a moment ago: only its nonce can have moved
                raise ApiError(
                    409,
                    f"nonce {checked.request.nonce} of {checked.request.sender} was used by another request while "
                    "this one was relayed",
                    "NonceUsed",
                ) from exc
            raise _revert_error(exc) from exc
        finally:
            if checked.task_id is not None:
                self.finished.drop(checked.task_id)  # its reads change with this write

    def relay(self, checked: CheckedRequest) -> m.TxResponse:
        """Relay a checked request that acts on a task; the answer names its transaction and the task."""
        if checked.task_id is None:
            raise TypeError("relay() answers for a call on a task; createTask's answer names the new task")
        res = self.execute(checked)
        return m.TxResponse(tx_hash=res.tx_hash, block=res.block_number, gas_used=res.gas_used, task_id=checked.task_id)

    def _check_role(self, task_id: int, function: str, sender: str) -> None:
        st = self.state(task_id)
        if function in ("approve", "refuse", "start", "cancel") and sender != st.requester:
            raise ApiError(403, f"only the task's requester ({st.requester}) may {function}", "NotRequester")
        if function == "withdraw" and self.task().owed(task_id, sender) == 0:
            raise ApiError(403, f"{sender} is owed nothing by task {task_id}", "NothingToWithdraw")
        if function == "join":
            status = self.task().member(task_id, sender)[0]
            if status != Membership.NONE:
                raise ApiError(409, f"{sender} already asked to join (status {status.name.lower()})", "AlreadyJoined")


def trees_completed(st: TaskState, cfg: TaskConfig) -> int:
    """Trees whose every node is resolved: all of a completed task's, those before the current one in training."""
    if st.status == Status.COMPLETED:
        return cfg.trees
    return st.tree if st.status == Status.TRAINING else 0


def create_call_args(body: m.CreateTaskRequest) -> tuple[Any, ...]:
    """``createTask`` arguments of a request body: the one definition the API and its clients share."""
    return create_task_args(
        config_of(body.parameters),
        [m.to_fixed(x) for x in body.task_schema.feature_min],
        [m.to_fixed(x) for x in body.task_schema.feature_max],
        bytes.fromhex(body.bin_edges_hash[2:]) if body.bin_edges_hash else b"\x00" * 32,
    )


def _revert_error(exc: ContractRevert) -> ApiError:
    if exc.name in NOT_FOUND_ERRORS:
        return ApiError(404, f"unknown task: {exc}", exc.name)
    if exc.name in FORBIDDEN_ERRORS:
        return ApiError(403, f"not allowed: {exc}", exc.name)
    if exc.name == "InvalidConfig":
        return ApiError(422, f"the contract rejects the parameters: {exc}", exc.name)
    return ApiError(409, f"the contract would revert: {exc}", exc.name)


def config_of(p: m.TaskParameters) -> TaskConfig:
    """The contract config of API parameters (``ledger.spec.task_params``, as the command line maps them); a private
    task's regularisation is raised to its noise floor as ``fgbdt train`` raises it (``PrivacyPlan.regularisation``)."""
    values = p.model_dump()
    values["epsilon"] = math.inf if values["epsilon"] is None else values["epsilon"]
    task = TaskParameters(**values)
    if task.private:
        privacy = plan(task.epsilon, task.delta, task.trees, task.depth)
        task = dataclasses.replace(task, lam=privacy.regularisation(task.lam, task.max_parties))
    return task.config()


def request_parameters(task: TaskParameters) -> m.TaskParameters:
    """The API's request model of named task parameters (the inverse of :func:`config_of`'s mapping): what a client
    sends to create the task ``fgbdt train`` would create."""
    values = asdict(task)
    values["epsilon"] = values["epsilon"] if math.isfinite(values["epsilon"]) else None
    return m.TaskParameters(**values)


def parameters_of(cfg: TaskConfig) -> m.ParametersOut:
    """API parameters of a contract config."""
    values = asdict(TaskParameters.of(cfg))
    values["epsilon"] = values["epsilon"] if math.isfinite(values["epsilon"]) else None
    return m.ParametersOut(**values)
