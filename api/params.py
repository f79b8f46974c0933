"""Typed path parameters shared by the routers: what a task id and a party address look like.

Why typed: FastAPI validates them (422 with the field's location) and documents them in the OpenAPI schema from
these definitions, so every route that takes a task id accepts exactly the same ones.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

TaskId = Annotated[int, Path(ge=1, lt=2**63, description="Task id (1..taskCount).", examples=[1])]
PartyPath = Annotated[str, Path(pattern=r"^0x[0-9a-fA-F]{40}$", description="Party address.")]
