"""The protocol's fixed point: 18 decimals, as the contracts' ``int256`` reals (``1e18`` is 1.0).

Why one module: the contract, the reference, the party kernels, the model and the task parameters all convert between
reals and these integers; each conversion done by its own copy of the constant or the rounding would be one more
place for "the chain equals the simulator" to break. Every module reads them from here, the compiled kernels too
(``ONE_FLOAT`` is a module-level constant numba freezes into the code).
"""

from __future__ import annotations

ONE: int = 10**18
"""Fixed-point 1.0 (18 decimals)."""

ONE_FLOAT: float = float(ONE)
"""``ONE`` as a double (exact: 10^18 is a multiple of a power of two that fits 53 bits), for the float kernels that
quantise (``rint(v * ONE_FLOAT)``) or compare in fixed-point units."""


def tdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero, exactly as Solidity's ``a / b`` on signed integers (Python's ``//``
    floors, which differs for negative quotients)."""
    if b == 0:
        raise ZeroDivisionError("division by zero (the contract would panic)")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def to_fixed(x: float) -> int:
    """Quantise a real value to fixed point (round half to even, as ``round``); done once, by the party."""
    return round(x * ONE)


def from_fixed(q: int) -> float:
    """Real value of a fixed-point integer (Python's correctly rounded int division, so every reader gets the same
    double); for reports and the model, never fed back into contract math."""
    return q / ONE
