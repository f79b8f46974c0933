"""Would Poisson subsampling of the rows per tree buy accuracy for the private leaves?

Sampling each row into a tree with probability q amplifies privacy, so each leaf release may carry less noise, but a
leaf then sums only a fraction q of its rows. What decides is the signal per unit of noise, ``q / z``, where ``z`` is
the leaf releases' noise multiplier that dp-accounting's RDP accountant calibrates to the budget (with the bin
sketch's share, as ``node.privacy.accountant.leaf_plan``). Nothing is trained: the accountant alone answers.

    python -m bench.subsampling   # 200 trees, epsilon 1 and 4, delta 1e-5; q from 1 to 0.05
"""

from __future__ import annotations

import logging

from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from fgbdt_chain.node.privacy.accountant import SPLIT, smallest_noise_multiplier

RATES = (1.0, 0.5, 0.25, 0.1, 0.05)


def accounted(z: float, q: float, trees: int, epsilon: float, delta: float) -> float:
    release: dp_event.DpEvent = dp_event.GaussianDpEvent(z)
    if q < 1.0:
        release = dp_event.PoissonSampledDpEvent(q, release)
    sketch = dp_event.ZCDpEvent((SPLIT["sketch"] * epsilon) ** 2 / 2)
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_event.ComposedDpEvent([sketch, dp_event.SelfComposedDpEvent(release, trees)]))
    return float(accountant.get_epsilon(delta))


def calibrate(q: float, trees: int, epsilon: float, delta: float = 1e-5) -> float:
    """The smallest noise multiplier whose composition stays within ``epsilon``, found as ``leaf_plan`` finds it."""
    return smallest_noise_multiplier(lambda z: accounted(z, q, trees, epsilon, delta), epsilon, f"sampling rate {q}")


def main() -> int:
    logging.getLogger("absl").setLevel(logging.ERROR)  # the accountant skips orders it cannot evaluate, noisily
    print("| epsilon | q | noise multiplier z | signal per noise q / z (relative to q = 1) |")
    print("|---|---|---|---|")
    for epsilon in (1.0, 4.0):
        full = 1.0 / calibrate(1.0, 200, epsilon)
        for q in RATES:
            z = calibrate(q, 200, epsilon)
            print(f"| {epsilon:g} | {q:g} | {z:.2f} | {q / z:.4f} ({q / z / full:.3f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
