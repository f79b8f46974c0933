"""Every kernel loaded (or compiled) before a timed run, so that the clock measures training, not the JIT.

It sits above the kernels, the protocol steps and the simulator because it touches all of them; nothing below
imports it. What one party node runs is ``node.protocol.warmup``, which a party loads without the simulator."""

from __future__ import annotations

from fgbdt_chain.node.protocol import warmup as party_warmup
from fgbdt_chain.node.sim import fvtree


def warm_up(simulator: bool = True) -> None:
    """Load (or compile) the kernels on tiny inputs: a party's (``node.protocol.warmup``: the histograms', the
    contract side's, the verifiers') and the simulator's (``fvtree``); ``simulator=False`` leaves out the kernels
    that compute for every party at once (``node.kernels.party_kernels``, ``verify.measure_many``)."""
    party_warmup.warm_up(simulator)
    fvtree.warm_up(simulator)
