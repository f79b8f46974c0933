"""ABI encoding and decoding of the types this project's contracts use, without ``eth_abi``'s per-value machinery.

Why: a level's histogram transaction carries thousands of int256 (417 KB at depth 8), and every party decodes every
other party's ``HistogramsSubmitted`` event. ``eth_abi`` encodes each value through a chain of validating encoder
objects: 57 ms for 13,000 int256 where ``int.to_bytes`` takes 6 ms, and decoding is as slow, once per party per
event. This module writes and reads the same bytes (tested against ``eth_abi`` on every function and event of the
contracts, with random values) for: ``uintN``, ``intN``, ``address``, ``bool``, ``bytesN``, ``bytes``, ``string``,
tuples, and fixed and dynamic arrays of any of them. Values it does not take exactly as ``eth_abi`` would (a bool
where an integer is due, a number out of range, a numpy scalar) raise :class:`Unsupported`, and the caller hands
them to ``eth_abi``, whose errors users know; nothing is ever encoded differently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

from eth_utils import is_checksum_address

WORD = 32


class Unsupported(ValueError):
    """A type or value this module does not encode exactly as ``eth_abi`` does: use ``eth_abi``."""


@cache
def parse(typ: str) -> tuple[Any, ...]:
    """A type string as a tree: ("array", element, length or None), ("tuple", components), ("int"|"uint", bits),
    ("address",), ("bool",), ("fixedbytes", n), ("bytes",), ("string",)."""
    m = re.fullmatch(r"(.*)\[(\d*)\]", typ)
    if m:
        return ("array", parse(m.group(1)), int(m.group(2)) if m.group(2) else None)
    if typ.startswith("(") and typ.endswith(")"):
        return ("tuple", tuple(parse(t) for t in split_components(typ[1:-1])))
    m = re.fullmatch(r"(u?int)(\d*)", typ)
    if m:
        bits = int(m.group(2) or 256)
        if bits % 8 or not 8 <= bits <= 256:
            raise Unsupported(typ)
        return (m.group(1), bits)
    m = re.fullmatch(r"bytes(\d+)", typ)
    if m:
        if not 1 <= int(m.group(1)) <= 32:
            raise Unsupported(typ)
        return ("fixedbytes", int(m.group(1)))
    if typ in ("address", "bool", "bytes", "string"):
        return (typ,)
    raise Unsupported(typ)


def split_components(inner: str) -> list[str]:
    """The top-level comma-separated types of a tuple's inside."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(inner[start:i])
            start = i + 1
    if inner:
        out.append(inner[start:])
    return out


def is_dynamic(node: tuple[Any, ...]) -> bool:
    kind = node[0]
    if kind in ("bytes", "string"):
        return True
    if kind == "array":
        return node[2] is None or is_dynamic(node[1])
    if kind == "tuple":
        return any(is_dynamic(c) for c in node[1])
    return False


def _int_word(value: Any, signed: bool, bits: int) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Unsupported(f"not an integer: {value!r}")
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if not low <= value < high:
        raise Unsupported(f"{value} out of range")
    return value.to_bytes(WORD, "big", signed=signed)


def _ints(values: Sequence[Any], signed: bool, bits: int) -> bytes:
    """A run of integers: one ``to_bytes`` each (the bulk of a histogram transaction)."""
    if not all(type(v) is int for v in values):
        raise Unsupported("not all plain integers")
    try:
        if bits == 256:
            return b"".join([v.to_bytes(WORD, "big", signed=signed) for v in values])
        return b"".join([_int_word(v, signed, bits) for v in values])
    except OverflowError as exc:
        raise Unsupported(str(exc)) from exc


@lru_cache(maxsize=1024)
def _checksum_ok(address: str) -> bool:
    """Whether a mixed-case address carries its EIP-55 checksum, as ``eth_abi`` requires (a task has a few
    addresses, used in every call: each is checked once)."""
    return is_checksum_address(address)


def _static(node: tuple[Any, ...], value: Any) -> bytes:
    kind = node[0]
    if kind in ("int", "uint"):
        return _int_word(value, kind == "int", node[1])
    if kind == "bool":
        if not isinstance(value, bool):
            raise Unsupported(f"not a bool: {value!r}")
        return int(value).to_bytes(WORD, "big")
    if kind == "address":
        if not isinstance(value, str) or not re.fullmatch(r"0x[0-9a-fA-F]{40}", value):
            raise Unsupported(f"not a hex address: {value!r}")  # eth_abi also checks checksums: leave it to it
        if value[2:] != value[2:].lower() and value[2:] != value[2:].upper() and not _checksum_ok(value):
            raise Unsupported("mixed-case address with a wrong checksum: eth_abi says so in its words")
        return bytes(12) + bytes.fromhex(value[2:])
    if kind == "fixedbytes":
        if not isinstance(value, bytes) or len(value) > node[1]:
            raise Unsupported(f"not bytes{node[1]}: {value!r}")
        return value.ljust(WORD, b"\0")
    raise Unsupported(kind)


def _padded(data: bytes) -> bytes:
    return len(data).to_bytes(WORD, "big") + data + bytes(-len(data) % WORD)


def encode_one(node: tuple[Any, ...], value: Any) -> bytes:
    kind = node[0]
    if kind == "bytes":
        if not isinstance(value, bytes | bytearray):
            raise Unsupported(f"not bytes: {value!r}")
        return _padded(bytes(value))
    if kind == "string":
        if not isinstance(value, str):
            raise Unsupported(f"not a string: {value!r}")
        return _padded(value.encode("utf-8"))
    if kind == "tuple":
        if not isinstance(value, list | tuple) or len(value) != len(node[1]):
            raise Unsupported("tuple length")
        return encode_sequence(node[1], value)
    if kind == "array":
        element, length = node[1], node[2]
        if not isinstance(value, list | tuple) or (length is not None and len(value) != length):
            raise Unsupported("array length")
        prefix = b"" if length is not None else len(value).to_bytes(WORD, "big")
        if element[0] in ("int", "uint"):
            return prefix + _ints(value, element[0] == "int", element[1])
        return prefix + encode_sequence([element] * len(value), value)
    return _static(node, value)


def encode_sequence(nodes: Sequence[tuple[Any, ...]], values: Sequence[Any]) -> bytes:
    """Heads then tails, as a tuple of ``nodes`` is encoded."""
    if len(nodes) != len(values):
        raise Unsupported("argument count")
    heads: list[bytes | None] = []
    tails: list[bytes] = []
    for node, value in zip(nodes, values, strict=True):
        if is_dynamic(node):
            heads.append(None)
            tails.append(encode_one(node, value))
        else:
            heads.append(encode_one(node, value))
            tails.append(b"")
    head_size = sum(WORD if h is None else len(h) for h in heads)
    out, offset = [], head_size
    for h, t in zip(heads, tails, strict=True):
        if h is None:
            out.append(offset.to_bytes(WORD, "big"))
            offset += len(t)
        else:
            out.append(h)
    return b"".join(out + tails)


def encode(types: Sequence[str], values: Sequence[Any]) -> bytes:
    """The ABI encoding of ``values`` as ``types`` (function arguments, event data), or :class:`Unsupported`."""
    return encode_sequence([parse(t) for t in types], list(values))


def _word(data: bytes, pos: int) -> int:
    if pos + WORD > len(data):
        raise Unsupported("data too short")
    return int.from_bytes(data[pos : pos + WORD], "big")


def static_size(node: tuple[Any, ...]) -> int:
    if node[0] == "tuple":
        return sum(static_size(c) for c in node[1])
    if node[0] == "array":
        return node[2] * static_size(node[1])
    return WORD


def decode_one(node: tuple[Any, ...], data: bytes, pos: int) -> Any:
    """The value of ``node`` whose encoding starts at ``pos`` (its tail, for a dynamic type)."""
    kind = node[0]
    if kind in ("bytes", "string"):
        n = _word(data, pos)
        if pos + WORD + n > len(data):
            raise Unsupported("data too short")
        chunk = data[pos + WORD : pos + WORD + n]
        return chunk if kind == "bytes" else chunk.decode("utf-8")
    if kind == "tuple":
        return decode_sequence(node[1], data, pos)
    if kind == "array":
        element, length = node[1], node[2]
        if length is None:
            length, pos = _word(data, pos), pos + WORD
        if element[0] in ("int", "uint") and element[1] == 256:
            end = pos + WORD * length
            if end > len(data):
                raise Unsupported("data too short")
            signed = element[0] == "int"
            return tuple(int.from_bytes(data[p : p + WORD], "big", signed=signed) for p in range(pos, end, WORD))
        return decode_sequence([element] * length, data, pos)
    raw = _word(data, pos)
    if kind == "uint":
        if raw >> node[1]:
            raise Unsupported("value exceeds its type")
        return raw
    if kind == "int":
        value = int.from_bytes(data[pos : pos + WORD], "big", signed=True)
        if not -(1 << (node[1] - 1)) <= value < 1 << (node[1] - 1):
            raise Unsupported("value exceeds its type")
        return value
    if kind == "bool":
        if raw > 1:
            raise Unsupported("not a bool")
        return bool(raw)
    if kind == "address":
        if raw >> 160:
            raise Unsupported("not an address")
        return "0x" + data[pos + 12 : pos + WORD].hex()
    if kind == "fixedbytes":
        return data[pos : pos + node[1]]
    raise Unsupported(kind)


def decode_sequence(nodes: Sequence[tuple[Any, ...]], data: bytes, start: int) -> tuple[Any, ...]:
    out, pos = [], start
    for node in nodes:
        if is_dynamic(node):
            out.append(decode_one(node, data, start + _word(data, pos)))
            pos += WORD
        else:
            out.append(decode_one(node, data, pos))
            pos += static_size(node)
    return tuple(out)


def decode(types: Sequence[str], data: bytes) -> tuple[Any, ...]:
    """``eth_abi``'s ``decode(types, data)`` for well-formed data of the supported types, or :class:`Unsupported`."""
    return decode_sequence([parse(t) for t in types], bytes(data), 0)
