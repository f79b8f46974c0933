"""Models of what the dashboard adds to the API: a task's timeline, the calldata of a request to sign, the common bin
edges, and a reward deposit signed by the client (the request and response models of the rest of the API are
``api.models``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Submission(BaseModel):
    """A party's histograms at a level: submitted with ``endorsements`` signatures (null: a wide level's part,
    committed ahead of its last)."""

    party: str
    block: int
    endorsements: int | None


class Refusal(BaseModel):
    """A party whose histograms the level did not take, and why as far as the chain shows it (``api.refusals``)."""

    party: str
    kind: Literal["declined", "silent"] = Field(
        description="declined: the party stepped aside (HistogramsDeclined); silent: it sent nothing in time."
    )
    reason: str = Field(description="Why: the contract's error where a call of the party reverted, else the quorum.")
    source: Literal["verifiers", "contract"] | None = Field(
        default=None,
        description="Who refused: the contract (a reverted call on chain) or the verifiers (a decline without one); "
        "null for a silent party with no reverted call.",
    )
    transaction: str | None = Field(default=None, description="The reverted transaction, where there is one.")


class NodeOutcome(BaseModel):
    """What the level did to one node: its candidate features drawn or voted, a split, or a leaf."""

    node: int
    kind: Literal["candidates", "split", "leaf"]
    feature: int | None = None
    threshold: int | None = Field(default=None, description="The split's threshold slot (left: slot <= threshold).")
    gain: float | None = None
    value: float | None = None
    candidates: list[int] | None = None


class TimelineLevel(BaseModel):
    """One level of one tree: who voted, who submitted with how many endorsements, who declined, what resolved."""

    tree: int
    level: int
    started_block: int
    deadline: int
    open_nodes: list[int]
    voters: list[str]
    voting_closed_block: int | None
    submissions: list[Submission]
    declined: list[Refusal]
    closed_block: int | None
    submitters: list[str] | None = Field(description="The parties whose histograms the level resolves.")
    nodes: list[NodeOutcome]
    blocks: int = Field(description="Blocks from the level's start to its last event.")


class Timeline(BaseModel):
    """Levels of trees ``from_tree`` to ``to_tree - 1``, in order."""

    task_id: int
    trees: int
    depth: int
    from_tree: int
    to_tree: int
    parties: list[str]
    levels: list[TimelineLevel]


class Calldata(BaseModel):
    """The contract call a request body makes: what the ``ForwardRequest``'s ``data`` must be."""

    function: str
    to: str
    data: str


class BinEdges(BaseModel):
    """The common bin edges merged from the approved parties' sketches, encoded as ``start`` takes them."""

    task_id: int
    parties: int
    bin_edges: str
    bin_edges_hash: str


class DepositTransaction(BaseModel):
    """The unsigned ``fund(taskId)`` transaction a client signs to deposit a reward: EIP-1559 (``tx_type`` 2, with
    its fee cap and tip) where the chain's blocks have a base fee, else legacy (``tx_type`` 0, with its gas price;
    signed with EIP-155's chain id)."""

    task_id: int
    chain_id: int
    sender: str
    nonce: int = Field(description="The sender's next transaction nonce (pending transactions counted).")
    to: str
    value: int = Field(description="The deposit in wei.")
    data: str
    gas: int
    tx_type: Literal[0, 2]
    max_fee_per_gas: int | None = None
    max_priority_fee_per_gas: int | None = None
    gas_price: int | None = None


class DepositRequest(BaseModel):
    """A signed ``fund(taskId)`` transaction, as ``eth_sendRawTransaction`` takes it."""

    raw_transaction: str = Field(pattern=r"^0x([0-9a-fA-F]{2})+$", max_length=4096)


class DepositResult(BaseModel):
    """A deposit, mined: who sent how much, and the task's reward after it."""

    tx_hash: str
    block: int
    gas_used: int
    task_id: int
    sender: str
    amount_wei: int
    reward_wei: int
