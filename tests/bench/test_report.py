"""The benchmarks page is what the results give, and every result says where it comes from.

``docs/benchmarks.md`` is generated (``python -m bench.report``) from ``bench/results/*.json``; these tests hold the
committed page and plots to the committed results, so that a result recorded without regenerating the page, or a
page edited by hand, fails here rather than misleading a reader.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import provenance, report
from bench.record import RESULTS, merge, read

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generated() -> tuple[str, dict[Path, object]]:
    return report.page()


def test_the_committed_page_is_what_the_results_give(generated: tuple[str, dict[Path, object]]) -> None:
    text, _ = generated
    assert report.PAGE.read_text() == text, "docs/benchmarks.md is stale: run python -m bench.report"


def test_every_plot_the_page_shows_exists_and_no_other(generated: tuple[str, dict[Path, object]]) -> None:
    text, plots = generated
    shown = {report.PAGE.parent / link for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)}
    assert shown == set(plots)
    assert all(path.is_file() and path.stat().st_size > 0 for path in plots)
    assert set(report.IMAGES.glob("*")) == set(plots), "a plot in docs/img/benchmarks that the page does not show"
    assert not list((ROOT / "docs").glob("*.png")), "plots belong under docs/img/"


def test_a_plot_is_the_same_bytes_when_drawn_again(generated: tuple[str, dict[Path, object]], tmp_path: Path) -> None:
    _, plots = generated
    draw, runs = next(v for k, v in sorted(plots.items()) if k.name.startswith("speed"))  # type: ignore[misc]
    draw(runs, tmp_path / "a.png")
    draw(runs, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert b"Software" not in (tmp_path / "a.png").read_bytes()


def test_every_run_of_every_results_file_has_its_provenance() -> None:
    files = sorted(RESULTS.glob("*.json"))
    assert {path.stem for path in files} >= {"speed", "accuracy", "gas", "chain"}
    assert {path.suffix for path in RESULTS.iterdir()} == {".json"}, "one JSON file per benchmark, nothing else"
    for path in files:
        doc = read(path)
        assert doc["bench"] == path.stem
        assert doc["runs"], f"{path.name}: no runs"
        for run in doc["runs"]:
            p = run["provenance"]
            assert set(provenance.FIELDS) <= set(p), f"{path.name}: {sorted(set(provenance.FIELDS) - set(p))}"
            assert p["command"].startswith(f"python -m bench.{path.stem}"), p["command"]
            assert isinstance(run["parameters"], dict) and isinstance(run["results"], dict)
            if p.get("provenance") == provenance.CONVERTED:
                assert p["commit"] is None and p["machine"] is None
            else:
                assert re.fullmatch(r"[0-9a-f]{40}", p["commit"]), f"{path.name}: commit {p['commit']!r}"
                assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["date"])
                assert p["machine"]["cores"] >= 1 and p["machine"]["python"] and p["load_average"]


def test_the_benchmarks_this_page_exists_for_were_measured_with_provenance() -> None:
    for bench in ("speed", "accuracy", "gas", "chain"):
        runs = read(RESULTS / f"{bench}.json")["runs"]
        assert any(r["provenance"].get("provenance") != provenance.CONVERTED for r in runs), bench


def _entry(parameters: dict[str, object], code: str | None, date: str, value: int) -> dict[str, object]:
    prov = {"command": "python -m bench.x", "code": code, "date": date}
    return {"provenance": prov, "parameters": parameters, "complete": True, "results": {"value": value}}


def test_a_run_repeats_runs_of_its_code_and_supersedes_the_rest() -> None:
    same, other = {"trees": 50}, {"trees": 500}
    runs = [
        _entry(same, None, "2026-01-01T00:00:00Z", 1),  # converted: superseded by any run of its parameters
        _entry(same, "old", "2026-01-02T00:00:00Z", 2),  # other code: superseded
        _entry(same, "new", "2026-01-03T00:00:00Z", 3),  # same code: a repetition, kept
        _entry(other, "old", "2026-01-04T00:00:00Z", 4),  # other parameters: another question, kept
    ]
    merged = merge(runs, _entry(same, "new", "2026-01-05T00:00:00Z", 5))
    assert [r["results"]["value"] for r in merged] == [3, 4, 5]  # type: ignore[index]


def test_saving_a_run_again_replaces_its_earlier_save() -> None:
    partial = _entry({"trees": 50}, "c", "2026-01-01T00:00:00Z", 1)
    partial["complete"] = False
    done = _entry({"trees": 50}, "c", "2026-01-01T00:00:00Z", 2)
    assert merge([partial], done) == [done]


def test_a_file_from_before_the_format_is_refused_by_name(tmp_path: Path) -> None:
    old = tmp_path / "speed.json"
    old.write_text(json.dumps({"command": "python -m bench.speed", "results": []}))
    with pytest.raises(ValueError, match=r"speed\.json: not a benchmark results file"):
        read(old)


def test_a_group_title_names_what_sets_it_apart_and_the_keys_a_bench_always_shows() -> None:
    found = [
        report.Group({"data": "a", "seeds": "0-4"}, []),
        report.Group({"data": "b", "seeds": "0-4", "contribution": "scaled"}, []),
        report.Group({"data": "c", "seeds": "0-4", "contribution": "scaled"}, []),
    ]
    assert report.group_title(found[0], found) == "data a"
    assert report.group_title(found[1], found) == "data b"  # scaled is what most groups have
    always = {"contribution": "shapley"}  # runs made before the option existed measured shapley
    assert report.group_title(found[0], found, always) == "data a; contribution shapley"
    assert report.group_title(found[1], found, always) == "data b; contribution scaled"
