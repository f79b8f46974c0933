"""When each level reached each of its dependent rounds, as this party saw it: the chain benchmark's per-level figure.

Why: a level on chain is a chain of dependent rounds (the parties' histograms and endorsements, the hand-over to the
level's relayer, the relayer's batch, its block, every party noticing the next level), and where its wall time goes
is only seen by putting the parties' clocks side by side. The parties of one host share its wall clock
(``time.time``), so the benchmark lines up the moments every party records here (``bench.chain``); a party on its
own host records them just the same, to be read against its own clock.
"""

from __future__ import annotations

import json
import time

MOMENTS = ("open", "sending", "mined")
"""A level's moments, in order: this party first acted on its histogram step (``open``) and, as the level's relayer,
sent the batch of every party's histograms and ballots (``sending``) and had its receipt (``mined``)."""

LOG_PREFIX = "level times: "
"""The log line that carries the record (one JSON object) when the node stops."""


class LevelClock:
    """The first time each moment of each (tree, level) happened; a moment seen again keeps its first time."""

    def __init__(self) -> None:
        self.times: dict[tuple[int, int], dict[str, float]] = {}

    def mark(self, tree: int, level: int, moment: str) -> None:
        """Record ``moment`` of (tree, level) now, unless it was recorded before."""
        if moment not in MOMENTS:
            raise ValueError(f"unknown level moment {moment!r}: one of {', '.join(MOMENTS)}")
        self.times.setdefault((tree, level), {}).setdefault(moment, time.time())

    def log_line(self) -> str:
        """The record as one log line: ``LOG_PREFIX`` then {"tree,level": {moment: seconds since the epoch}}."""
        return LOG_PREFIX + json.dumps({f"{t},{lv}": m for (t, lv), m in sorted(self.times.items())})


def parse_line(line: str) -> dict[tuple[int, int], dict[str, float]]:
    """A ``log_line`` back as {(tree, level): {moment: time}}; ValueError on a line that is not one."""
    if not line.startswith(LOG_PREFIX):
        raise ValueError(f"not a level-times line: {line[:40]!r}")
    raw = json.loads(line[len(LOG_PREFIX) :])
    out: dict[tuple[int, int], dict[str, float]] = {}
    for key, moments in raw.items():
        tree, level = (int(x) for x in key.split(","))
        unknown = set(moments) - set(MOMENTS)
        if unknown:
            raise ValueError(f"unknown level moments {sorted(unknown)} at tree {tree} level {level}")
        out[(tree, level)] = {m: float(v) for m, v in moments.items()}
    return out
