"""Response models of the dashboard's reads: a task's timeline, the calldata of a request to sign, the common bin
edges, and the list's event stream (the request and response models of the rest of the API are ``api.models``)."""

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
    """A party that declined to submit at a level, and why when its endpoint says (the verifiers' or the contract's
    reason; the chain records only that it declined)."""

    party: str
    reason: str | None = Field(default=None, description="Why, as the party's endpoint reports it; null: unknown.")
    source: Literal["verifiers", "contract"] | None = Field(
        default=None, description="Who refused: the verifiers (short of a quorum of endorsements) or the contract."
    )


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
