"""Calldata and event-log coding straight through ``eth_abi``, for the large integer arrays of a training level.

Why not web3's contract objects here: before and after calling ``eth_abi`` they walk every argument and every decoded
value through a chain of recursive normalisers (ENS names, hex strings to bytes, address checksums). For a level's
histogram transaction (thousands of int256) and its events that walk cost more CPU than everything else a party does
(profiled with py-spy: 36% of a party's time in ``map_abi_data`` alone). This module keeps the same ABI encoding and
decoding, done by ``ledger.rpc.fast_abi`` (the same bytes, without eth_abi's per-value encoder objects, which cost more
than the transaction itself for a wide level) or else by web3's own codec, and applies only the normalisation web3
applies to what comes out: checksummed addresses and structs keyed by field name.
Anything these fast paths do not cover (overloaded functions, arguments the codec rejects) is handed back to web3.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eth_abi.codec import ABICodec
from eth_utils import keccak, to_checksum_address

from fgbdt_chain.ledger.rpc import fast_abi


def canonical_type(t: dict[str, Any]) -> str:
    """The ABI type string of one input (tuples spelled out), as in signatures."""
    typ: str = t["type"]
    if typ.startswith("tuple"):
        return "(" + ",".join(canonical_type(c) for c in t["components"]) + ")" + typ[len("tuple") :]
    return typ


def _normalised(item: dict[str, Any], value: Any, named: bool = True) -> Any:
    """``value`` decoded as ABI parameter ``item`` the way web3 returns it: addresses checksummed, structs as dicts
    keyed by component name in events (``named``) and as tuples in call results, arrays element-wise; everything
    else as the codec gives it."""
    typ: str = item["type"]
    if typ.endswith("]"):
        if "address" not in typ and not typ.startswith("tuple"):
            return value
        element = {**item, "type": typ[: typ.rindex("[")]}
        return tuple(_normalised(element, v, named) for v in value)
    if typ == "address":
        return checksummed(value)
    if typ == "tuple":
        parts = [(c["name"], _normalised(c, v, named)) for c, v in zip(item["components"], value, strict=True)]
        return dict(parts) if named else tuple(v for _, v in parts)
    return value


@functools.lru_cache(maxsize=1024)
def checksummed(address: str) -> str:
    """EIP-55 form of an address, cached: a task's few parties recur in every event and relayed request, and each
    checksum is a Keccak hash."""
    return to_checksum_address(address)


@dataclass(frozen=True)
class FunctionCoder:
    """Selector and input types of one (non-overloaded) function."""

    selector: bytes
    types: tuple[str, ...]
    outputs: tuple[dict[str, Any], ...]
    output_types: tuple[str, ...]

    def encode(self, codec: ABICodec, args: Sequence[Any]) -> bytes:
        try:
            return self.selector + fast_abi.encode(self.types, args)
        except fast_abi.Unsupported:
            return self.selector + codec.encode(list(self.types), list(args))

    def decode_result(self, codec: ABICodec, data: bytes) -> Any:
        """The call's return data as web3 gives it: the value itself for one output, else a tuple of them."""
        values = _decode(codec, self.output_types, data)
        out = tuple(_normalised(o, v, named=False) for o, v in zip(self.outputs, values, strict=True))
        return out[0] if len(out) == 1 else out


@dataclass(frozen=True)
class EventCoder:
    """Names and types of one event's indexed (topics) and data fields, in declaration order."""

    name: str
    inputs: tuple[dict[str, Any], ...]
    indexed: tuple[tuple[dict[str, Any], str], ...]
    """(input, type) of the fields in the topics, in order."""
    plain: tuple[tuple[dict[str, Any], str], ...]
    """(input, type) of the fields in the data, in order."""

    def decode(self, codec: ABICodec, topics: Sequence[bytes], data: bytes) -> dict[str, Any]:
        if len(topics) != len(self.indexed) + 1:
            raise ValueError(f"{self.name}: {len(topics) - 1} topics for {len(self.indexed)} indexed fields")
        out: dict[str, Any] = {}
        for (item, t), topic in zip(self.indexed, topics[1:], strict=True):
            # dynamic indexed values are stored as their hash: keep the 32 bytes, as web3 does
            out[item["name"]] = _normalised(item, _decode(codec, (t,), bytes(topic))[0]) if _static(t) else bytes(topic)
        values = _decode(codec, tuple(t for _, t in self.plain), bytes(data))
        for (item, _), v in zip(self.plain, values, strict=True):
            out[item["name"]] = _normalised(item, v)
        return {i["name"]: out[i["name"]] for i in self.inputs}


def _decode(codec: ABICodec, types: Sequence[str], data: bytes) -> tuple[Any, ...]:
    """``fast_abi`` where it applies, else the codec (which also reports malformed data in its own words)."""
    try:
        return fast_abi.decode(types, data)
    except fast_abi.Unsupported:
        return tuple(codec.decode(list(types), data))


def _static(typ: str) -> bool:
    return not (typ in ("bytes", "string") or typ.endswith("[]") or typ.startswith("("))


def function_coders(abi: Sequence[dict[str, Any]]) -> dict[str, FunctionCoder]:
    """Coders of the functions of ``abi`` that have one signature (overloads are left to web3)."""
    seen: dict[str, int] = {}
    for item in abi:
        if item.get("type") == "function":
            seen[item["name"]] = seen.get(item["name"], 0) + 1
    out = {}
    for item in abi:
        if item.get("type") != "function" or seen[item["name"]] != 1:
            continue
        types = tuple(canonical_type(i) for i in item["inputs"])
        selector = keccak(text=f"{item['name']}({','.join(types)})")[:4]
        outputs = tuple(item.get("outputs", []))
        out[item["name"]] = FunctionCoder(selector, types, outputs, tuple(canonical_type(o) for o in outputs))
    return out


def event_coders(abi: Sequence[dict[str, Any]]) -> dict[bytes, EventCoder]:
    """Coders of the (non-anonymous) events of ``abi``, by topic 0."""
    out = {}
    for item in abi:
        if item.get("type") != "event" or item.get("anonymous"):
            continue
        types = [canonical_type(i) for i in item["inputs"]]
        topic = keccak(text=f"{item['name']}({','.join(types)})")
        fields = list(zip(item["inputs"], types, strict=True))
        out[topic] = EventCoder(
            item["name"],
            tuple(item["inputs"]),
            tuple(f for f in fields if f[0].get("indexed")),
            tuple(f for f in fields if not f[0].get("indexed")),
        )
    return out
