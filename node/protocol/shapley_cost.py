"""What exact split Shapley will cost: the warning ``simulate`` and ``fgbdt_chain.train`` give before a slow run.

Why here: the estimate belongs to the simulator (``node``), which both the command line and the Python API call;
the contract refuses more than ``ledger.spec.reference.MAX_PARTIES`` parties outright, this only says how long the
accepted ones will take.
"""

from __future__ import annotations

from fgbdt_chain.ledger.spec.shapley_estimate import PERMUTATIONS, estimated


class SlowShapleyWarning(UserWarning):
    """The run's exact split Shapley is estimated above :data:`SLOW_SHAPLEY_SECONDS`."""


SHAPLEY_COST: tuple[float, float] = (4.6e-7, 0.0)
"""``(a, b)``: one split's exact split Shapley takes about ``a * 2^M + b * M * 2^M`` seconds for M parties.

Fitted by ``python -m bench.shapley_cost`` on the compiled kernel the simulator runs for the splits within its bounds
(``node.kernels.shapley_kernel``; ``b >= 0``, and its per-party accumulators are too cheap to show, so ``b`` is 0),
figures in
``bench/results/shapley_cost.md``. The Python path, for splits outside the kernel's bounds, takes about twice as long
at M = 10 to 16. One core of the development machine: a slower machine takes longer, so the warning below is an order
of magnitude, not a promise."""

SLOW_SHAPLEY_SECONDS = 60.0
"""Above this estimated exact-Shapley time, ``simulate`` and ``train`` say so before they start."""


ESTIMATE_STEP_SECONDS: float = 3.9e-6
"""One party's step of one order of the estimated split Shapley values (``ledger.spec.shapley_estimate``, Python
integers): drawing its place in the order (one keccak256) and its marginal gain; measured by
``python -m bench.shapley_estimate`` at M = 16 to 64."""


def shapley_seconds(parties: int, trees: int, depth: int) -> float:
    """Estimated split Shapley time of a run: ``trees * (2^depth - 1)`` splits (every node of every tree split, an
    upper bound) at :data:`SHAPLEY_COST` per exact split, or ``K * M`` steps of :data:`ESTIMATE_STEP_SECONDS` per
    estimated one (above ``EXACT_MAX_PARTIES`` parties)."""
    a, b = SHAPLEY_COST
    splits = max(trees, 0) * (2 ** min(max(depth, 0), 64) - 1)  # TrainParams refuses absurd depths later
    if estimated(parties):
        return splits * PERMUTATIONS * parties * ESTIMATE_STEP_SECONDS
    return splits * (a + b * parties) * 2.0**parties


def slow_shapley_message(parties: int, trees: int, depth: int) -> str | None:
    """The warning for a run whose estimated exact-Shapley time exceeds :data:`SLOW_SHAPLEY_SECONDS`, else None."""
    seconds = shapley_seconds(parties, trees, depth)
    if seconds <= SLOW_SHAPLEY_SECONDS:
        return None
    splits = trees * (2**depth - 1)
    how = f"{PERMUTATIONS} orders, estimated" if estimated(parties) else f"2^{parties} coalitions"
    kind = "estimated" if estimated(parties) else "exact"
    return (
        f"{kind} split Shapley for {parties} parties takes about {seconds / splits * 1e3:.3g} ms per split "
        f"({how}); {trees} trees of depth {depth} have up to {splits:,} splits: up to about "
        f"{seconds:,.0f} s{_duration(seconds)}"
    )


def _duration(seconds: float) -> str:
    """Seconds in a unit a reader takes in at once, in parentheses (nothing under two minutes)."""
    if seconds < 120:
        return ""
    if seconds < 7200:
        return f" ({seconds / 60:.0f} min)"
    if seconds < 2 * 86400:
        return f" ({seconds / 3600:.1f} h)"
    return f" ({seconds / 86400:.1f} days)"
