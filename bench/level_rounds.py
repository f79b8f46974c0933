"""A level on chain against the floor of its dependent rounds, from the moments every party recorded.

A level is three dependent rounds: the parties' (each builds its histograms, has the others check and sign them,
computes its ballot of the next level and hands both to the level's relayer, who waits for all of them), the
chain's (the relayer's batch signed, sent, executed and mined) and the hand-on (every party notices the block and
starts the next level: new gradients and routing after a tree's last level). The parties' clocks are lined up
(``node.party.level_clock``: one host's wall clock), so each level's wall time splits into the three exactly.

The floor of a round is the least it took at that depth anywhere in the run (a level's size is set by its depth), so
the floor of the run is what the rounds would take if every level went as its fastest sibling did; the chain's round
has a second floor, anvil's CPU per level, which no waiting adds to.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fgbdt_chain.node.party.level_clock import LOG_PREFIX, parse_line

ROUNDS = ("parties", "chain", "hand-on")
"""A level's dependent rounds, in order (module docstring)."""


def party_moments(logs: Iterable[Path]) -> list[dict[tuple[int, int], dict[str, float]]]:
    """Each party log's recorded moments (its last level-times line; a log without one gives an empty record)."""
    out = []
    for log in logs:
        lines = [line.split("] ", 1)[-1] for line in log.read_text().splitlines() if LOG_PREFIX in line]
        out.append(parse_line(lines[-1]) if lines else {})
    return out


Moments = Mapping[tuple[int, int], Mapping[str, float]]
"""One party's record: {(tree, level): {moment: time}} (``node.party.level_clock``)."""


def level_rounds(parties: list[Moments]) -> dict[tuple[int, int], dict[str, float]]:
    """Per (tree, level) whose rounds are all seen: the seconds of each round (``ROUNDS``). A level opens when its
    first party acts on it, its parties' round ends when the relayer sends the batch, the chain's when the batch is
    mined, and the hand-on when the next level opens."""
    keys = sorted({k for p in parties for k in p})
    first: dict[tuple[int, int], float] = {}
    batch: dict[tuple[int, int], tuple[float, float]] = {}
    for key in keys:
        opens = [p[key]["open"] for p in parties if key in p and "open" in p[key]]
        if opens:
            first[key] = min(opens)
        relayed = [(p[key]["sending"], p[key]["mined"]) for p in parties if key in p and "mined" in p[key]]
        if relayed:
            batch[key] = min(relayed)
    out = {}
    for key, after in itertools.pairwise(keys):
        if key in first and key in batch and after in first:
            sending, mined = batch[key]
            mined = min(mined, first[after])  # a party may see the block before the relayer has its receipt
            out[key] = {
                "parties": sending - first[key],
                "chain": mined - sending,
                "hand-on": first[after] - mined,
            }
    return out


def summary(rounds: Mapping[tuple[int, int], Mapping[str, float]], anvil_cpu: float) -> dict[str, Any]:
    """Milliseconds per level: each round's mean, the floor of each round (its fastest at the level's depth, summed
    over the levels, per level), the wall per level and anvil's CPU over the run per level."""
    if not rounds:
        return {}
    fastest: dict[tuple[int, str], float] = {}
    for (_, depth), seconds in rounds.items():
        for r in ROUNDS:
            fastest[depth, r] = min(fastest.get((depth, r), seconds[r]), seconds[r])
    n = len(rounds)
    mean = {r: 1000 * sum(s[r] for s in rounds.values()) / n for r in ROUNDS}
    floor = {r: 1000 * sum(fastest[depth, r] for (_, depth) in rounds) / n for r in ROUNDS}
    return {
        "levels": n,
        "mean_ms": mean,
        "floor_ms": floor,
        "wall_ms": sum(mean.values()),
        "floor_total_ms": sum(floor.values()),
        "anvil_cpu_ms": 1000 * anvil_cpu / n,
    }


def sentence(s: Mapping[str, Any]) -> str:
    """The per-level figure in words, for the benchmarks page."""
    if not s:
        return "No level's rounds were recorded."
    mean, floor = s["mean_ms"], s["floor_ms"]
    parts = ", ".join(f"{r} {mean[r]:.1f} ms (fastest at its depth {floor[r]:.1f})" for r in ROUNDS)
    return (
        f"Per level ({s['levels']} levels): {s['wall_ms']:.1f} ms, of which {parts}; the floor of its dependent rounds "
        f"{s['floor_total_ms']:.1f} ms a level; anvil's CPU over the run {s['anvil_cpu_ms']:.1f} ms a level."
    )
