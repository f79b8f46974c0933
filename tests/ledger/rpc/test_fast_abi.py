"""``ledger.rpc.fast_abi`` writes and reads exactly what ``eth_abi`` does, on every function and event of the
contracts."""

from __future__ import annotations

from typing import Any

import pytest
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fgbdt_chain.ledger.rpc import fast_abi
from fgbdt_chain.ledger.rpc.abi_codec import canonical_type
from fgbdt_chain.ledger.toolchain.compile import load_artifacts


def _signatures() -> list[tuple[str, tuple[str, ...]]]:
    """(where, types) of every function's inputs and outputs and every event's fields, over all contracts."""
    out = set()
    for name, art in load_artifacts().items():
        for item in art.abi:
            if item.get("type") in ("function", "event"):
                out.add((f"{name}.{item['name']}", tuple(canonical_type(i) for i in item["inputs"])))
            if item.get("type") == "function" and item.get("outputs"):
                out.add((f"{name}.{item['name']}->", tuple(canonical_type(o) for o in item["outputs"])))
    return sorted(out)


SIGNATURES = _signatures()


def values_of(typ: str) -> st.SearchStrategy[Any]:
    node = fast_abi.parse(typ)
    return _strategy(node)


def _strategy(node: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    kind = node[0]
    if kind == "uint":
        return st.integers(0, (1 << node[1]) - 1)
    if kind == "int":
        return st.integers(-(1 << (node[1] - 1)), (1 << (node[1] - 1)) - 1)
    if kind == "bool":
        return st.booleans()
    if kind == "address":
        return st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
    if kind == "fixedbytes":
        return st.binary(min_size=node[1], max_size=node[1])
    if kind == "bytes":
        return st.binary(max_size=80)
    if kind == "string":
        return st.text(max_size=20)
    if kind == "tuple":
        return st.tuples(*(_strategy(c) for c in node[1]))
    size = node[2]
    element = _strategy(node[1])
    if size is None:
        return st.lists(element, max_size=6).map(tuple)
    return st.lists(element, min_size=size, max_size=size).map(tuple)


def test_every_contract_signature_is_parsed() -> None:
    assert len(SIGNATURES) > 40
    for _, types in SIGNATURES:
        for t in types:
            fast_abi.parse(t)


@pytest.mark.parametrize(("where", "types"), SIGNATURES, ids=[w for w, _ in SIGNATURES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_and_values_as_eth_abi(where: str, types: tuple[str, ...], data: st.DataObject) -> None:
    values = data.draw(st.tuples(*(values_of(t) for t in types)))
    encoded = abi_encode(list(types), list(values))
    assert fast_abi.encode(types, values) == encoded, where
    assert fast_abi.decode(types, encoded) == abi_decode(list(types), encoded), where


def test_a_wide_histogram_array_round_trips() -> None:
    values = [(-1) ** i * (i << 200) for i in range(5000)] + [-(1 << 255), (1 << 255) - 1]
    encoded = abi_encode(["uint256", "int256[]"], [7, values])
    assert fast_abi.encode(["uint256", "int256[]"], [7, values]) == encoded
    assert fast_abi.decode(["uint256", "int256[]"], encoded) == (7, tuple(values))


@pytest.mark.parametrize(
    ("typ", "value"),
    [
        ("int256", True),  # eth_abi refuses a bool for an integer
        ("uint256", -1),
        ("int8", 128),
        ("int256[]", [1, 1 << 255]),
        ("uint256[]", [1.0]),
        ("address", "0x52908400098527886E0F7030069857D2E4169EE7"[:-1] + "e"),  # mixed case: a checksum to check
        ("bytes32", "0x00"),
        ("bool", 1),
    ],
)
def test_values_eth_abi_would_judge_are_left_to_it(typ: str, value: Any) -> None:
    with pytest.raises(fast_abi.Unsupported):
        fast_abi.encode([typ], [value])


def test_malformed_data_is_left_to_eth_abi() -> None:
    with pytest.raises(fast_abi.Unsupported):
        fast_abi.decode(["int256[]"], (5).to_bytes(32, "big") * 2)  # an array longer than the data
    with pytest.raises(fast_abi.Unsupported):
        fast_abi.decode(["bool"], (2).to_bytes(32, "big"))
    with pytest.raises(fast_abi.Unsupported):
        fast_abi.parse("fixed128x18")


def test_a_checksummed_address_is_encoded_as_eth_abi_encodes_it() -> None:
    """A mixed-case address with its EIP-55 checksum (every address web3 and eth-account give) is encoded here;
    only a wrong checksum is left to eth_abi, which refuses it."""
    good = "0x52908400098527886E0F7030069857D2E4169EE7"
    types = ["(address,address,uint256,uint256,uint48,bytes,bytes)[]", "address"]
    values = [[(good, good.lower(), 0, 5, 9, b"\x01" * 40, b"\x02" * 65)], good]
    assert fast_abi.encode(types, values) == abi_encode(types, values)
