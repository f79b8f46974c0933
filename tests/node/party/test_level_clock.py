"""A party's record of when each level reached each round: first times kept, one log line that reads back."""

from __future__ import annotations

import pytest

from fgbdt_chain.node.party.level_clock import LOG_PREFIX, LevelClock, parse_line


def test_a_moment_keeps_its_first_time_and_the_line_reads_back() -> None:
    clock = LevelClock()
    clock.mark(0, 1, "open")
    first = clock.times[0, 1]["open"]
    clock.mark(0, 1, "open")  # seen again at a later poll: still the first time
    clock.mark(0, 1, "sending")
    clock.mark(2, 0, "open")
    assert clock.times[0, 1]["open"] == first <= clock.times[0, 1]["sending"]
    line = clock.log_line()
    assert line.startswith(LOG_PREFIX)
    assert parse_line(line) == clock.times


def test_unknown_moments_and_foreign_lines_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown level moment 'closed'"):
        LevelClock().mark(0, 0, "closed")
    with pytest.raises(ValueError, match="not a level-times line"):
        parse_line("time split: relay 0.1 s (100%)")
    with pytest.raises(ValueError, match=r"unknown level moments \['late'\] at tree 3 level 2"):
        parse_line(LOG_PREFIX + '{"3,2": {"open": 1.0, "late": 2.0}}')
