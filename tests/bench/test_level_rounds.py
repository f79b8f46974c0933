"""The chain benchmark's per-level figure: the parties' moments lined up into each level's three rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.level_rounds import level_rounds, party_moments, sentence, summary
from fgbdt_chain.node.party.level_clock import LevelClock


def test_rounds_of_each_level_from_every_partys_moments() -> None:
    # level (0, 0): parties open at 10.0 and 10.1, the relayer (party 1) sends at 10.5 and has its receipt at 10.6;
    # level (0, 1) opens at 10.7 (party 0), 10.65 (party 1); its receipt comes after party 0 opened (1, 0): the chain
    # round ends at the opening; the last level has no next one and no rounds
    p0 = {(0, 0): {"open": 10.0}, (0, 1): {"open": 10.7}, (1, 0): {"open": 11.4}}
    p1 = {
        (0, 0): {"open": 10.1, "sending": 10.5, "mined": 10.6},
        (0, 1): {"open": 10.65, "sending": 11.1, "mined": 11.5},
        (1, 0): {"open": 11.45},
    }
    rounds = level_rounds([p0, p1])
    assert set(rounds) == {(0, 0), (0, 1)}
    assert rounds[0, 0] == pytest.approx({"parties": 0.5, "chain": 0.1, "hand-on": 0.05})
    assert rounds[0, 1] == pytest.approx({"parties": 0.45, "chain": 0.3, "hand-on": 0.0})


def test_a_level_without_a_relayed_batch_has_no_rounds() -> None:
    parties = [{(0, 0): {"open": 1.0}, (0, 1): {"open": 2.0}}]
    assert level_rounds(parties) == {}
    assert summary({}, 1.0) == {}
    assert sentence({}) == "No level's rounds were recorded."


def test_the_floor_is_each_rounds_fastest_at_the_levels_depth() -> None:
    rounds = {
        (0, 0): {"parties": 0.010, "chain": 0.004, "hand-on": 0.002},
        (1, 0): {"parties": 0.020, "chain": 0.006, "hand-on": 0.001},
        (0, 1): {"parties": 0.030, "chain": 0.008, "hand-on": 0.004},
        (1, 1): {"parties": 0.040, "chain": 0.007, "hand-on": 0.003},
    }
    s = summary(rounds, anvil_cpu=0.02)
    assert s["levels"] == 4
    assert s["mean_ms"] == pytest.approx({"parties": 25.0, "chain": 6.25, "hand-on": 2.5})
    # depth 0: 10, 4, 1 ms; depth 1: 30, 7, 3 ms; two levels of each
    assert s["floor_ms"] == pytest.approx({"parties": 20.0, "chain": 5.5, "hand-on": 2.0})
    assert s["wall_ms"] == pytest.approx(33.75) and s["floor_total_ms"] == pytest.approx(27.5)
    assert s["anvil_cpu_ms"] == pytest.approx(5.0)
    assert "Per level (4 levels): 33.8 ms" in sentence(s) and "anvil's CPU over the run 5.0 ms a level" in sentence(s)


def test_party_logs_are_read_from_their_last_level_times_line(tmp_path: Path) -> None:
    clock = LevelClock()
    clock.mark(0, 0, "open")
    log = tmp_path / "party-0.log"
    log.write_text(f"07:51:40.309 [0xd190C8] task completed\n07:51:40.333 [0xd190C8] {clock.log_line()}\n")
    silent = tmp_path / "party-1.log"
    silent.write_text("07:51:40.309 [0xd190C8] stopped before training\n")
    assert party_moments([log, silent]) == [clock.times, {}]
