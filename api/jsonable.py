"""JSON-ready values from what the chain returns (event arguments, audit reports).

Why: event arguments and audit findings hold ``bytes`` (hashes, PSDs) and tuples, which JSON cannot carry; they
travel as 0x-hex strings and lists, the same spelling the request bodies use.
"""

from __future__ import annotations

from typing import Any


def jsonable(v: Any) -> Any:
    """``v`` with bytes as 0x-hex, tuples as lists, recursively; other values unchanged."""
    if isinstance(v, bytes | bytearray):
        return "0x" + bytes(v).hex()
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v
