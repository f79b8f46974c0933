"""Request and response models of the REST API (pydantic v2), with the examples the OpenAPI document shows.

Why typed models everywhere: FastAPI turns every field constraint into a field-level 422 and into the OpenAPI schema,
so bad input never reaches the chain and the property-based test (schemathesis) can check responses against the
documented shapes. Real-valued task parameters travel as JSON numbers and are converted to the contract's 18-decimal
fixed point by ``ledger.spec.task_params`` (``reference.to_fixed``, as the command line does), so a client that signs a
request computes the same calldata as the API, and an API task's config equals the CLI's for the same parameters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from fgbdt_chain.ledger.spec import modes
from fgbdt_chain.ledger.spec.edges import EdgesFormatError, decode_edges
from fgbdt_chain.ledger.spec.fixed_point import ONE, from_fixed, to_fixed
from fgbdt_chain.ledger.spec.parameters import parameter
from fgbdt_chain.ledger.spec.task_params import label_range
from fgbdt_chain.ledger.spec.tx_size import check_resolution_fits

__all__ = ["ONE", "from_fixed", "to_fixed"]

MAX_REAL = 1e30
"""Bound on real-valued inputs: their fixed-point form must stay far inside int256."""

Address = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{40}$")]
Hex = Annotated[str, StringConstraints(pattern=r"^0x([0-9a-fA-F]{2})*$", max_length=2 + 2 * 262_144)]
Hash32 = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{64}$")]
Real = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_REAL, le=MAX_REAL)]
Uint256 = Annotated[int, Field(ge=0, lt=2**256)]

EXAMPLE_ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
EXAMPLE_SIGNATURE = "0x" + "ab" * 65


class SignedAuth(BaseModel):
    """The caller's EIP-712 signature of the ``ForwardRequest`` (OpenZeppelin ERC2771Forwarder) that the API relays.

    The API rebuilds the request from the endpoint and its body: ``from = signer``, ``to`` = the FGBDTChain contract,
    ``value = 0``, ``gas``, ``nonce``, ``deadline`` as given here and ``data`` = the ABI calldata of the call the
    endpoint makes. ``GET /v1/signing`` returns the domain and types; ``GET /v1/nonces/{address}`` the nonce.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "signer": EXAMPLE_ADDRESS,
                "nonce": 0,
                "deadline": 1_900_000_000,
                "gas": 5_000_000,
                "signature": EXAMPLE_SIGNATURE,
            }
        }
    )

    signer: Address = Field(description="The ForwardRequest's `from`: the caller's address.")
    nonce: Uint256 = Field(description="The forwarder's current nonce of `signer`.")
    deadline: int = Field(ge=0, le=2**48 - 1, description="Unix time after which the request is void (uint48).")
    gas: int = Field(ge=21_000, le=30_000_000, description="Gas granted to the inner call.")
    signature: str = Field(max_length=200, description="65-byte EIP-712 signature, 0x-prefixed hex.")


class Signed(BaseModel):
    """Base of every state-changing request body: ``auth`` is required (401 when missing or bad)."""

    auth: SignedAuth | None = Field(default=None, description="Signature of the ForwardRequest; required.")


class FeatureSchema(BaseModel):
    """The data schema: per-feature [min, max] of the values (the PSDs and bins are built on these ranges)."""

    feature_min: list[Real] = Field(min_length=1, max_length=4096)
    feature_max: list[Real] = Field(min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _ranges(self) -> FeatureSchema:
        if len(self.feature_min) != len(self.feature_max):
            raise ValueError("feature_min and feature_max must have the same length")
        for i, (lo, hi) in enumerate(zip(self.feature_min, self.feature_max, strict=True)):
            if lo > hi:
                raise ValueError(f"feature {i}: min {lo} > max {hi}")
        return self


def _table(name: str, **given: Any) -> Any:
    """The request field of task parameter ``name``: the table's default, range and meaning
    (``ledger.spec.parameters``); a real is finite and within ``MAX_REAL`` where the table leaves it unbounded (one
    ``Field`` for both: pydantic keeps only the last of two lower bounds on a field); ``given`` adds to them."""
    p = parameter(name)
    bounds: dict[str, Any] = p.bounds()
    if p.kind is float:
        bounds = {"ge": -MAX_REAL, "le": MAX_REAL, "allow_inf_nan": False, **bounds}
        if "gt" in bounds:
            del bounds["ge"]
        if "lt" in bounds:
            del bounds["le"]
    return Field(**{"default": p.default, "description": p.help, **bounds, **given})


class TaskParameters(BaseModel):
    """GBDT, quorum, party-limit and deadline parameters (``FGBDTChain.Config``); real values as numbers. Defaults,
    ranges and meanings are ``ledger.spec.parameters``'s, so a task created with none trains what ``fgbdt simulate``
    trains with none."""

    trees: int = _table("trees")
    depth: int = _table("depth")
    bins: int = _table("bins")
    hessian: modes.HessianModeName = _table("hessian")
    tie_break: modes.TieRuleName = _table("tie_break")
    voted_trees: int = _table("voted_trees")
    quorum_num: int = _table("quorum_num")
    quorum_den: int = _table("quorum_den")
    min_parties: int = _table("min_parties")
    max_parties: int = _table("max_parties")
    join_blocks: int = _table("join_blocks")
    step_blocks: int = _table("step_blocks")
    lam: float = _table("lam")
    learning_rate: float = _table("learning_rate")
    min_rows: int = _table("min_rows")
    alpha: float = _table("alpha")
    objective: modes.ObjectiveName = _table("objective")
    endorse: modes.EndorseRuleName = _table("endorse")
    refusal_rate: float = _table("refusal_rate")
    overlap_threshold: float = _table("overlap_threshold")
    epsilon: float | None = _table(
        "epsilon",
        default=None,
        description=f"{parameter('epsilon').help} JSON has no inf: null is the default, no privacy noise.",
    )
    delta: float = _table("delta")
    label_min: float | None = _table("label_min")
    label_max: float | None = _table("label_max")

    @model_validator(mode="after")
    def _consistent(self) -> TaskParameters:
        if self.quorum_num > self.quorum_den:
            raise ValueError("quorum_num must not exceed quorum_den")
        if self.min_parties > self.max_parties:
            raise ValueError("min_parties must not exceed max_parties")
        check_resolution_fits(self.max_parties, self.bins, self.depth)
        if to_fixed(self.learning_rate) <= 0:
            raise ValueError("learning_rate is below the fixed-point resolution (1e-18)")
        label_range(self.objective, self.label_min, self.label_max)
        if self.epsilon is not None and self.objective != "binary":
            # a task on chain trains FV-tree, whose noise rests on the logistic loss's bounded gradients
            raise ValueError(
                "a task with a privacy budget (epsilon) trains FV-tree on chain, whose noise is calibrated to the "
                "binary objective's bounded gradients; private regression with a declared label_min and label_max "
                "trains random-split trees, in the simulator (fgbdt simulate --label-min --label-max, "
                "fgbdt_chain.train)"
            )
        return self


class CreateTaskRequest(Signed):
    """Open a task. The reward is not part of it: deposit it afterwards with a direct ``fund(taskId)`` transaction
    (a relayed request cannot carry the requester's ether)."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "task_schema": {"feature_min": [0.0, 0.0], "feature_max": [1.0, 100.0]},
                "parameters": {"trees": 10, "depth": 4, "bins": 16, "min_parties": 2, "max_parties": 4},
                "bin_edges_hash": None,
                "auth": SignedAuth.model_config["json_schema_extra"]["example"],  # type: ignore[index]
            }
        }
    )

    task_schema: FeatureSchema
    parameters: TaskParameters = Field(default_factory=TaskParameters)
    bin_edges_hash: Hash32 | None = Field(default=None, description="Hash of the bin edges, or null to fix at start.")


class JoinRequest(Signed):
    """Ask to join: the party's serialised PSD and the URL where it answers endorsement requests."""

    model_config = ConfigDict(
        json_schema_extra={"example": {"psd": "0x01020304", "endpoint": "http://party1.example:9000", "auth": None}}
    )

    psd: Hex = Field(description="Serialised differentially private spatial decomposition, hex.")
    endpoint: str = Field(max_length=512, description="Endorsement endpoint of the party.")


class StartRequest(Signed):
    """Start training, publishing the encoded common bin edges (``ledger.spec.edges.encode_edges``)."""

    model_config = ConfigDict(json_schema_extra={"example": {"bin_edges": "0x4647424502...", "auth": None}})

    bin_edges: Hex = Field(min_length=4, description="Encoded bin edges, hex (``ledger.spec.edges``, version 2).")

    @field_validator("bin_edges")
    @classmethod
    def _readable(cls, value: str) -> str:
        """Refused before any transaction: a task started with edges the parties cannot decode (another version, a
        histogram width that is not the edges') could never train, and a started task cannot be cancelled."""
        try:
            decode_edges(bytes.fromhex(value[2:]))
        except EdgesFormatError as exc:
            raise ValueError(f"not readable bin edges: {exc}") from exc
        return value


class EmptySigned(Signed):
    """A signed request with no parameters besides the path (approve, refuse, cancel, withdraw)."""


class TxResponse(BaseModel):
    """A relayed request, mined."""

    model_config = ConfigDict(
        json_schema_extra={"example": {"tx_hash": "0x" + "12" * 32, "block": 42, "gas_used": 120000, "task_id": 1}}
    )

    tx_hash: str
    block: int
    gas_used: int
    task_id: int


class CreatedTask(TxResponse):
    """A created task, and how to fund its reward."""

    fund: str = Field(description="How to deposit the reward: a direct transaction to the contract.")


class ErrorResponse(BaseModel):
    """Every non-422 error: a message and, for contract reverts, the custom error's name."""

    model_config = ConfigDict(json_schema_extra={"example": {"detail": "task 7 does not exist", "error": None}})

    detail: str
    error: str | None = None


TaskStatusName = Literal["open", "training", "completed", "cancelled"]
PhaseName = Literal["voting", "histograms", "resolving"]
MembershipName = Literal["none", "pending", "approved", "refused"]


class TaskSummary(BaseModel):
    """One line of the task list."""

    task_id: int
    requester: str
    status: TaskStatusName
    reward_wei: int
    trees: int
    depth: int
    parties: int
    trees_completed: int = Field(description="Trees whose every node is resolved.")


class TaskList(BaseModel):
    """A page of tasks, newest first."""

    total: int
    offset: int
    tasks: list[TaskSummary]


class MemberInfo(BaseModel):
    """A party that asked to join."""

    address: str
    status: MembershipName
    index: int | None = Field(description="Party order (approval order) when approved.")
    psd_hash: str
    endpoint: str
    contribution: int = Field(description="Contribution total, fixed point (1e18 = 1.0).")


class Progress(BaseModel):
    """Where training is: the current tree and level, and how much is done."""

    phase: PhaseName | None
    tree: int
    level: int
    trees: int
    depth: int
    trees_completed: int
    levels_started: int
    open_nodes: list[int]
    resolved_nodes: list[int]
    step_deadline: int


class GasInfo(BaseModel):
    """Gas of every transaction that emitted an event of the task."""

    transactions: int
    total_gas_used: int


class SchemaOut(BaseModel):
    """The data schema as recorded on chain."""

    feature_min: list[float]
    feature_max: list[float]


class ParametersOut(BaseModel):
    """Task parameters as recorded on chain (real values converted from fixed point)."""

    trees: int
    depth: int
    bins: int
    hessian: modes.HessianModeName
    tie_break: modes.TieRuleName
    voted_trees: int
    quorum_num: int
    quorum_den: int
    min_parties: int
    max_parties: int
    join_blocks: int
    step_blocks: int
    lam: float
    learning_rate: float
    min_rows: int
    alpha: float
    objective: modes.ObjectiveName
    endorse: modes.EndorseRuleName
    refusal_rate: float
    overlap_threshold: float
    epsilon: float | None = Field(description="The privacy budget per party; null: no privacy noise.")
    delta: float
    label_min: float | None = Field(description="The label's range in the schema; null for a binary task (0 and 1).")
    label_max: float | None


class TaskDetail(BaseModel):
    """A task: state, schema, parameters, members, progress and gas."""

    task_id: int
    requester: str
    status: TaskStatusName
    reward_wei: int
    task_schema: SchemaOut
    parameters: ParametersOut
    bin_edges_hash: str
    members: list[MemberInfo]
    progress: Progress
    gas: GasInfo


class JoinRequestList(BaseModel):
    """Every join request of a task with its current status."""

    task_id: int
    requests: list[MemberInfo]


class PredictRequest(BaseModel):
    """Rows to score: one list of feature values per row (null = missing); the width must match the model."""

    model_config = ConfigDict(json_schema_extra={"example": {"rows": [[0.5, 12.0], [None, 3.5]]}})

    rows: list[list[Real | None]] = Field(min_length=1, max_length=10_000)


class PredictResponse(BaseModel):
    """Predictions of the posted rows under the task's loss."""

    rows: int
    features: int
    trees: int
    objective: modes.ObjectiveName
    predictions: list[float] = Field(description="Per row: P(class 1) for a binary task, the predicted value else.")
    probabilities: list[float] | None = Field(description="P(class 1) per row (binary tasks; null otherwise).")
    labels: list[int] | None = Field(description="The predicted class per row (binary tasks; null otherwise).")


class PartyContribution(BaseModel):
    """A party's contribution and reward."""

    party: str
    total: int = Field(description="Contribution total, fixed point.")
    total_float: float
    per_tree: list[int] = Field(description="Contribution per tree (fixed point), index = tree.")
    share: float = Field(
        description="Share of the reward: of the positive (clipped) contributions, paid pro rata to the parties that "
        "take part to the last step; 0 for a party that left the task (refused, declined or silent once), whose "
        "amount is forfeited to the requester."
    )
    reward_assigned_wei: int
    reward_forfeited_wei: int = Field(
        description="Left the task before its last step (refused, declined or silent): this amount went back to the "
        "requester (RewardForfeited)."
    )
    reward_due_wei: int = Field(description="Still withdrawable.")
    withdrawn_wei: int


class ContributionsResponse(BaseModel):
    """Contributions per party, with per-tree breakdown and rewards."""

    task_id: int
    status: TaskStatusName
    reward_wei: int
    positive_total: int
    parties: list[PartyContribution]
    requester_due_wei: int
    requester_withdrawn_wei: int


class AuditResponse(BaseModel):
    """The audit's verdict: does replaying the task's transactions reproduce the recorded model and credits?"""

    task_id: int
    ok: bool
    first_mismatch: str | None
    summary: str | None = None
    report: dict[str, object] = Field(default_factory=dict)


class SigningInfo(BaseModel):
    """What a client needs to sign a request: EIP-712 domain and types, the target and the relayer."""

    chain_id: int
    forwarder: str
    contract: str
    relayer: str | None
    domain: dict[str, object]
    types: dict[str, list[dict[str, str]]]
    primary_type: str


class NonceResponse(BaseModel):
    """The nonce the next request of ``address`` must carry."""

    address: str
    nonce: int


class HealthResponse(BaseModel):
    """The chain the API talks to."""

    chain_id: int
    block: int
    contract: str
    forwarder: str
    relayer: str | None
    relayer_balance_wei: int | None
