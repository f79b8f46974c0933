"""Random cases and the reference's answers, for forge's differential tests (``tests/foundry/Differential.t.sol``).

    python tests/foundry/reference_vectors.py KIND COUNT SEED   # prints the ABI-encoded cases as 0x-hex

forge calls this once per property (its ``ffi`` cheatcode), decodes the cases and runs each through the contract:
``ledger.spec.reference`` and ``ledger.spec.histogram_rules`` answer for the contract's ``FGBDTMath`` and
``FGBDTRules``. Why one call per property rather than one per fuzz run: a Python start costs about 0.3 s of CPU, so
10,000 runs through ``ffi`` would cost nearly an hour per property, and these cases cost seconds; a file written ahead
of the test would go stale where this cannot (the cases come from the reference as it is when forge runs).

Values are drawn near the limits of every field: around 2^e for the widths where the arithmetic changes (fixed point,
the square root of int256's range, int256's ends), zero and one, and ordinary fixed-point sums. The expected outcome
is the reference's value, or the revert the contract must raise: Solidity's overflow panic (0x11) where the reference
raises ``FixedPointOverflow``, the named custom error for a malformed call (the library's guards, as documented).
One allowance, documented in ``FGBDTMathLib.splitShapley``: its accumulators are checked at other intermediates than
the reference's, so where a coalition's utility may exceed 2^190 the contract may panic although the reference
returns a value (``allow_panic``); below, where no accumulator can reach 2^255 (16 parties, weights under 2^42), the
two must agree exactly.
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from math import isqrt
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from eth_abi import encode
from eth_utils import keccak

from fgbdt_chain.ledger.spec import histogram_rules as rules
from fgbdt_chain.ledger.spec import reference as ref
from fgbdt_chain.ledger.spec.reference import INT256_MAX, INT256_MIN, ONE, FixedPointOverflow
from fgbdt_chain.ledger.spec.shapley_estimate import split_shapley_estimate

PANIC_OVERFLOW = keccak(text="Panic(uint256)")[:4] + (0x11).to_bytes(32, "big")
MAX_SHAPLEY_PARTIES = 16
SHAPLEY_EXACT_BOUND = 1 << 190
"""Below this bound on every coalition's utility the contract's Shapley accumulators cannot overflow (module
docstring), so contract and reference must agree exactly."""
SQRT_MAX = isqrt(INT256_MAX)

outcomes: Counter[str] = Counter()
"""What the cases expect, by kind (printed to stderr: each error must be reached)."""


def error(signature: str, *args: Any) -> bytes:
    """A custom error's revert data."""
    types = signature[signature.index("(") + 1 : -1]
    return keccak(text=signature)[:4] + (encode(types.split(","), list(args)) if types else b"")


def near(rng: random.Random, signed: bool = True) -> int:
    """A value near a limit of int256 arithmetic, or an ordinary fixed-point one."""
    r = rng.random()
    if r < 0.3:
        x = rng.randint(0, 10 * ONE)
    elif r < 0.5:
        e = rng.choice((60, 64, 80, 100, 120, 126, 127, 128, 129, 160, 190, 200, 230, 250, 253, 254))
        x = (1 << e) + rng.randint(-3, 3)
    elif r < 0.6:
        x = SQRT_MAX + rng.randint(-3, 3)
    elif r < 0.7:
        x = INT256_MAX - rng.randint(0, 3)
    elif r < 0.8:
        x = rng.choice((0, 1, 2, ONE, ONE // 4, ONE // 2))
    else:
        x = rng.randint(0, 1 << rng.randint(1, 255))
    x = min(x, INT256_MAX)
    if signed and rng.random() < 0.5:
        x = -x if rng.random() < 0.9 else INT256_MIN
    return x


def hessian(rng: random.Random) -> int:
    """Mostly non-negative (a hessian, or a count times 1e18), sometimes not."""
    return near(rng, signed=rng.random() < 0.1)


def lam(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.choice((0, ONE // 10, ONE, 3 * ONE))
    if r < 0.9:
        return near(rng, signed=False)
    return -rng.randint(1, 2 * ONE)


def outcome(kind: str, fn: Callable[[], Any]) -> tuple[bytes, Any]:
    """Run the reference: (b"", its value), or the contract's revert for the error it raises."""
    try:
        value = fn()
    except FixedPointOverflow:
        outcomes[f"{kind}: overflow"] += 1
        return PANIC_OVERFLOW, None
    outcomes[f"{kind}: value"] += 1
    return b"", value


# ---------------------------------------------------------------------------------------------- cases by kind


def gain_case(rng: random.Random) -> tuple[Any, ...]:
    g_l, h_l, g_r, h_r, lm = near(rng), hessian(rng), near(rng), hessian(rng), lam(rng)
    err, value = outcome("gain", lambda: ref.split_gain(g_l, h_l, g_r, h_r, lm))
    return (g_l, h_l, g_r, h_r, lm, err, value or 0)


def leaf_case(rng: random.Random) -> tuple[Any, ...]:
    g, h, lm = near(rng), hessian(rng), lam(rng)
    lr = rng.choice((ONE // 10, ONE, 1)) if rng.random() < 0.6 else near(rng, signed=False) or 1
    err, value = outcome("leaf", lambda: ref.leaf_value(g, h, lm, lr))
    return (g, h, lm, lr, err, value or 0)


def shapley_case(rng: random.Random) -> tuple[Any, ...]:
    r = rng.random()
    m = rng.randint(0, 6) if r < 0.85 else rng.randint(7, 12) if r < 0.985 else rng.randint(13, MAX_SHAPLEY_PARTIES)
    small = rng.random() < 0.5  # ordinary sums of a few thousand rows, or values near the limits

    def side(h: bool) -> list[int]:
        if small:
            return [rng.randint(0 if h else -5000 * ONE, 5000 * ONE) for _ in range(m)]
        return [hessian(rng) if h else near(rng) for _ in range(m)]

    g_l, h_l, g_r, h_r, lm = side(False), side(True), side(False), side(True), lam(rng)
    if rng.random() < 0.03:
        [g_l, h_l, g_r, h_r][rng.randrange(4)].append(0)
        outcomes["shapley: ShapleyLengthMismatch"] += 1
        return (g_l, h_l, g_r, h_r, lm, error("ShapleyLengthMismatch()"), False, 0, [])
    if rng.random() < 0.02:
        k = MAX_SHAPLEY_PARTIES + rng.randint(1, 3)
        g_l, h_l, g_r, h_r = ([0] * k for _ in range(4))
        outcomes["shapley: TooManyShapleyParties"] += 1
        return (g_l, h_l, g_r, h_r, lm, error("TooManyShapleyParties(uint256,uint256)", k, 16), False, 0, [])
    bound = sum(map(abs, g_l)) ** 2 + sum(map(abs, g_r)) ** 2
    err, value = outcome("shapley", lambda: ref.split_shapley(g_l, h_l, g_r, h_r, lm))
    gain, phi = value if value is not None else (0, [])
    allow_panic = bound >= SHAPLEY_EXACT_BOUND and not err
    return (g_l, h_l, g_r, h_r, lm, err, allow_panic, gain, phi)


def estimate_case(rng: random.Random) -> tuple[Any, ...]:
    """``shapley_estimate.split_shapley_estimate`` (``FGBDTEstimateLib.splitShapleyEstimate``) on sides drawn as for
    the exact values, up to 24 parties, a random node seed and a few orders (each order costs the contract M steps)."""
    m = rng.randint(0, 6) if rng.random() < 0.7 else rng.randint(7, 24)
    small = rng.random() < 0.5

    def side(h: bool) -> list[int]:
        if small:
            return [rng.randint(0 if h else -5000 * ONE, 5000 * ONE) for _ in range(m)]
        return [hessian(rng) if h else near(rng) for _ in range(m)]

    g_l, h_l, g_r, h_r, lm = side(False), side(True), side(False), side(True), lam(rng)
    seed, k = rng.getrandbits(256), rng.randint(1, 6)
    if rng.random() < 0.03:
        [g_l, h_l, g_r, h_r][rng.randrange(4)].append(0)
        outcomes["estimate: ShapleyLengthMismatch"] += 1
        return (g_l, h_l, g_r, h_r, lm, seed, k, error("ShapleyLengthMismatch()"), 0, [])
    err, value = outcome("estimate", lambda: split_shapley_estimate(g_l, h_l, g_r, h_r, lm, seed, k))
    gain, phi = value if value is not None else (0, [])
    return (g_l, h_l, g_r, h_r, lm, seed, k, err, gain, phi)


def _row_histograms(rng: random.Random, nc: int, nbins: int) -> tuple[list[int], list[int], list[int]]:
    """Histograms of rows (each row one slot per candidate), as honest parties' sums are."""
    g, h, n = [0] * (nc * nbins), [0] * (nc * nbins), [0] * (nc * nbins)
    for _ in range(rng.randint(0, 40)):
        gv, hv = rng.randint(-ONE, ONE), rng.randint(0, ONE // 4)
        for k in range(nc):
            i = k * nbins + rng.randrange(nbins)
            g[i] += gv
            h[i] += hv
            n[i] += 1
    return g, h, n


def split_case(rng: random.Random) -> tuple[Any, ...]:
    nc, nbins = rng.randint(1, 3), rng.randint(1, 6)
    g, h, n = _row_histograms(rng, nc, nbins)
    if rng.random() < 0.4:  # values near the limits in a few slots
        for _ in range(rng.randint(1, 3)):
            arr = rng.choice((g, h, n))
            arr[rng.randrange(len(arr))] = near(rng)
    lm = lam(rng)
    min_rows = rng.choice((1, 1, 2, 3, 5)) if rng.random() < 0.9 else near(rng, signed=False) or 1
    mode = rng.randint(0, 1)
    if rng.random() < 0.05:  # malformed: an empty array, a length that is not a multiple, arrays of other lengths
        how = rng.randrange(4)
        if how == 1 and nbins == 1:  # every length is a multiple of one slot
            how = 2
        if how == 0:
            g = h = n = []
        elif how == 1:
            g, h, n = [*g, 0], [*h, 0], [*n, 0]
            if len(g) % nbins == 0:
                g, h, n = [*g, 0], [*h, 0], [*n, 0]
        elif how == 2:
            h = [*h, 0]
        else:
            nbins = 0
        outcomes["split: BadHistogramShape"] += 1
        err = error("BadHistogramShape(uint256,uint256)", len(g), nbins)
        return (g, h, n, nbins, lm, min_rows, mode, err, False, 0, 0, 0, [0] * 6)
    hist = ref.NodeHistograms(
        tuple(range(nc)),
        tuple(tuple(g[k * nbins : (k + 1) * nbins]) for k in range(nc)),
        tuple(tuple(h[k * nbins : (k + 1) * nbins]) for k in range(nc)),
        tuple(tuple(n[k * nbins : (k + 1) * nbins]) for k in range(nc)),
    )
    err, sp = outcome("split", lambda: ref.best_split(hist, lm, min_rows, mode))
    if sp is None:
        if not err:
            outcomes["split: leaf"] += 1
        return (g, h, n, nbins, lm, min_rows, mode, err, False, 0, 0, 0, [0] * 6)
    sides = [sp.g_left, sp.h_left, sp.n_left, sp.g_right, sp.h_right, sp.n_right]
    return (g, h, n, nbins, lm, min_rows, mode, b"", True, sp.rank, sp.threshold, sp.gain, sides)


def _feature(rng: random.Random, num_features: int) -> int:
    return rng.randrange(num_features) if num_features else 0


def top2_case(rng: random.Random) -> tuple[Any, ...]:
    num_features = rng.choice((0, 1, 2, 3, 5, 8, 40)) if rng.random() < 0.95 else rng.choice((300, 65535, 65536))
    votes = [rng.choice((-1, _feature(rng, num_features))) for _ in range(rng.randint(0, 12))]
    if votes and rng.random() < 0.05:
        votes[rng.randrange(len(votes))] = rng.choice((-2, num_features, num_features + 7, INT256_MIN, INT256_MAX))
    rule = rng.randint(0, 1) if rng.random() < 0.95 else rng.randint(2, 255)
    tree = rng.choice((0, 1, 7, (1 << 24) - 1, 1 << 24, (1 << 64) + 5)) if rng.random() < 0.3 else rng.randint(0, 500)
    node = rng.choice((1, 2, 255, (1 << 24) - 1, 1 << 30)) if rng.random() < 0.3 else rng.randint(1, 511)
    want = b""
    if num_features == 0:
        want = error("NoFeatures()")
    else:
        bad = next((i for i, v in enumerate(votes) if v != -1 and not 0 <= v < num_features), None)
        if bad is not None:
            want = error("InvalidVote(uint256,int256)", bad, votes[bad])
        elif rule > 1:
            want = error("UnknownTieRule(uint8)", rule)
    if want:
        name = "NoFeatures" if num_features == 0 else "InvalidVote" if rule < 2 else "UnknownTieRule"
        outcomes["top2: " + name] += 1
        return (votes, num_features, rule, tree, node, want, 0, 0)
    outcomes["top2: value"] += 1
    first, second = ref.top2(votes, num_features, rule, tree, node)
    return (votes, num_features, rule, tree, node, b"", first, second)


def level_top2_case(rng: random.Random) -> tuple[Any, ...]:
    level = rng.randint(0, 8)
    base = 1 << level
    mask = rng.getrandbits(base) if rng.random() < 0.9 else (1 << base) - 1
    nodes = [base + b for b in range(base) if mask >> b & 1]
    num_features = rng.choice((0, 1, 2, 3, 7, 40, 300))
    rule = rng.randint(0, 1) if rng.random() < 0.97 else rng.randint(2, 9)
    tree = rng.randint(0, 1 << 20)
    ballots = []
    for _ in range(rng.randint(0, 6)):
        ballots.append([rng.choice((-1, _feature(rng, num_features))) for _ in nodes])
    packed = b"".join((v + 1).to_bytes(2, "big") for ballot in ballots for v in ballot)
    if num_features == 0:
        outcomes["levelTop2: NoFeatures"] += 1
        return (packed, num_features, rule, tree, level, mask, error("NoFeatures()"), [])
    if rule > 1 and nodes:
        outcomes["levelTop2: UnknownTieRule"] += 1
        return (packed, num_features, rule, tree, level, mask, error("UnknownTieRule(uint8)", rule), [])
    fixed = []
    for i, node in enumerate(nodes):
        first, second = ref.top2([b[i] for b in ballots], num_features, rule, tree, node)
        fixed.append(node << 32 | first << 16 | second)
    outcomes["levelTop2: value"] += 1
    return (packed, num_features, rule, tree, level, mask, b"", fixed)


def _rule_error(exc: rules.HistogramRuleError) -> bytes:
    if exc.name in ("CandidateTotalsMismatch", "InheritedTotalsMismatch"):
        return error(f"{exc.name}(uint256)", exc.node)
    slot = int(re.search(r"slot (\d+)", str(exc)).group(1))  # type: ignore[union-attr]
    return error(f"{exc.name}(uint256,uint256)", exc.node, slot)


def rules_case(rng: random.Random) -> tuple[Any, ...]:
    nbins, level = rng.randint(2, 5), rng.randint(0, 3)
    base = 1 << level
    mask = rng.getrandbits(base) or 1
    nodes = [base + b for b in range(base) if mask >> b & 1]
    bounds = rng.choice((rules.OBJECTIVE_BINARY, rules.OBJECTIVE_SQUARED, rules.BOUNDS_NONE))
    first_tree = rng.random() < 0.4
    data: list[int] = []
    hists = []
    for _ in nodes:
        g, h, n = _rule_rows(rng, nbins, bounds, first_tree)
        if rng.random() < 0.35:  # one or two slots pushed to (or over) a bound, or near int256's limits
            for _ in range(rng.randint(1, 2)):
                _mutate_bin(rng, g, h, n, nbins)
        data += g + h + n
        hists.append(
            ref.NodeHistograms(
                (0, 1),
                (tuple(g[:nbins]), tuple(g[nbins:])),
                (tuple(h[:nbins]), tuple(h[nbins:])),
                (tuple(n[:nbins]), tuple(n[nbins:])),
            )
        )
    totals: list[int] = []
    try:
        for hist, node in zip(hists, nodes, strict=True):
            rules.check_node(hist, node, bounds, first_tree)
            t = rules.candidate_totals(hist, 0)
            totals += [t.g, t.h, t.n]
    except FixedPointOverflow:
        outcomes["rules: overflow"] += 1
        return (data, nbins, base, mask, bounds, first_tree, PANIC_OVERFLOW, [])
    except rules.HistogramRuleError as exc:
        outcomes[f"rules: {exc.name}"] += 1
        return (data, nbins, base, mask, bounds, first_tree, _rule_error(exc), [])
    outcomes["rules: value"] += 1
    return (data, nbins, base, mask, bounds, first_tree, b"", totals)


def _rule_rows(rng: random.Random, nbins: int, bounds: int, first_tree: bool) -> tuple[list[int], ...]:
    """A node's two candidate histograms from rows that keep the task's bounds."""
    g, h, n = [0] * (2 * nbins), [0] * (2 * nbins), [0] * (2 * nbins)
    for _ in range(rng.randint(0, 30)):
        if bounds == rules.OBJECTIVE_SQUARED:
            gv, hv = rng.randint(-5 * ONE, 5 * ONE), ONE
        elif first_tree:
            gv, hv = rng.choice((ONE // 2, -ONE // 2)), ONE // 4
        else:
            p = rng.randint(1, ONE - 1)
            y = rng.randint(0, 1)
            gv, hv = p - y * ONE, p * (ONE - p) // ONE
        for k in range(2):
            i = k * nbins + rng.randrange(nbins)
            g[i] += gv
            h[i] += hv
            n[i] += 1
    return g, h, n


def _mutate_bin(rng: random.Random, g: list[int], h: list[int], n: list[int], nbins: int) -> None:
    """Change one slot, or move an amount between two slots of a candidate (its totals kept)."""
    i = rng.randrange(2 * nbins)
    arr = rng.choice((g, h, n))
    if rng.random() < 0.5:
        j = (i // nbins) * nbins + rng.randrange(nbins)
        amount = rng.choice((1, ONE, near(rng)))
        if abs(arr[i] - amount) <= INT256_MAX and abs(arr[j] + amount) <= INT256_MAX:
            arr[i] -= amount
            arr[j] += amount
    else:
        arr[i] = rng.choice((near(rng), arr[i] + 1, arr[i] - 1, -1))


def payout_case(rng: random.Random) -> tuple[Any, ...]:
    m = rng.randint(0, 16)
    totals = [near(rng) if rng.random() < 0.5 else rng.randint(-10 * ONE, 100 * ONE) for _ in range(m)]
    finished = [rng.random() < 0.8 for _ in range(m)]
    reward = rng.choice((0, 1, 10**18, (1 << 128) - 1)) if rng.random() < 0.3 else rng.randint(0, (1 << 128) - 1)
    err, value = outcome("payout", lambda: ref.payouts(totals, finished, reward))
    if value is None:
        return (totals, finished, reward, err, [], 0)
    return (totals, finished, reward, b"", list(value.paid), value.requester)


KINDS: dict[str, tuple[str, Callable[[random.Random], tuple[Any, ...]]]] = {
    "gain": ("(int256,int256,int256,int256,int256,bytes,int256)[]", gain_case),
    "leaf": ("(int256,int256,int256,int256,bytes,int256)[]", leaf_case),
    "shapley": ("(int256[],int256[],int256[],int256[],int256,bytes,bool,int256,int256[])[]", shapley_case),
    "estimate": ("(int256[],int256[],int256[],int256[],int256,uint256,uint256,bytes,int256,int256[])[]", estimate_case),
    "split": (
        "(int256[],int256[],int256[],uint256,int256,int256,uint8,bytes,bool,uint256,uint256,int256,int256[6])[]",
        split_case,
    ),
    "top2": ("(int256[],uint256,uint8,uint256,uint256,bytes,uint256,uint256)[]", top2_case),
    "levelTop2": ("(bytes,uint256,uint8,uint256,uint256,uint256,bytes,uint256[])[]", level_top2_case),
    "rules": ("(int256[],uint256,uint256,uint256,uint8,bool,bytes,int256[])[]", rules_case),
    "payout": ("(int256[],bool[],uint256,bytes,uint256[],uint256)[]", payout_case),
}


def main(argv: list[str]) -> int:
    kind, count, seed = argv[0], int(argv[1]), int(argv[2])
    abi_type, make = KINDS[kind]
    rng = random.Random(f"{kind}/{seed}")
    cases = [make(rng) for _ in range(count)]
    sys.stdout.write("0x" + encode([abi_type], [cases]).hex())
    sys.stderr.write(f"{kind}: {count} cases, " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
