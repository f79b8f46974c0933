"""The results file every benchmark writes: ``bench/results/<bench>.json``, its current runs with their provenance.

    {"bench": "<name>", "runs": [{"provenance": {...}, "parameters": {...}, "complete": true, "results": {...}}, ...]}

One file per benchmark, so that a page (``bench.report``) reads the current figures from one place and never a
figure without its command, code and machine (``bench.provenance``). A new run is appended; the runs already there
with the same parameters are kept only when they ran the same code (the same ``code`` fingerprint: a repetition,
whose spread the page reports as a standard error) and dropped otherwise (the new code supersedes them, and git
keeps them). Runs with other parameters stay: they answer other questions.

A benchmark that writes as it goes (a long grid keeps what it measured if stopped) saves the same run again and
again: each save replaces the run's previous one, and ``complete`` says whether the run finished.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench import provenance

RESULTS = Path(__file__).resolve().parent / "results"
NOT_PARAMETERS = ("out", "jobs", "from_json", "update", "rescore")
"""Options that say where and how fast a run goes, not what it measures."""


def path_of(bench: str) -> Path:
    return RESULTS / f"{bench}.json"


def parameters_of(args: argparse.Namespace | Mapping[str, Any], drop: Iterable[str] = ()) -> dict[str, Any]:
    """A run's parameters from its parsed options, without those that do not change what is measured."""
    values = dict(vars(args) if isinstance(args, argparse.Namespace) else args)
    for key in (*NOT_PARAMETERS, *drop):
        values.pop(key, None)
    return normalised(values)


def normalised(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists, paths as strings), so that parameters compare as stored."""
    return json.loads(json.dumps(value, default=str))


def read(path: Path | str) -> dict[str, Any]:
    """A results file; an error names the file when it is not in this format."""
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or "bench" not in doc:
        raise ValueError(f"{path}: not a benchmark results file (no 'bench' and 'runs')")
    return doc


def runs_of(bench: str) -> list[dict[str, Any]]:
    """The recorded runs of a benchmark (none when it has no results file)."""
    path = path_of(bench)
    return read(path)["runs"] if path.exists() else []


def latest_results(path: Path | str) -> dict[str, Any]:
    """The results of a file's newest run; a file from a commit that predates this format is its own results (the
    A/B benchmarks read what an earlier commit's benchmark wrote)."""
    doc = json.loads(Path(path).read_text())
    if isinstance(doc, dict) and "bench" in doc and isinstance(doc.get("runs"), list):
        return dict(doc["runs"][-1]["results"])
    return dict(doc)


def same_run(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two entries are saves of one run (started at the same moment by the same command, same parameters)."""
    keys = ("date", "command")
    return all(a["provenance"].get(k) == b["provenance"].get(k) for k in keys) and a["parameters"] == b["parameters"]


def merge(runs: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """``runs`` with ``entry`` appended: its own earlier save dropped, and the runs of the same parameters on other
    code (or of unknown code: converted results) superseded."""
    code = entry["provenance"].get("code")
    kept = []
    for run in runs:
        if same_run(run, entry):
            continue
        if run["parameters"] == entry["parameters"] and (code is None or run["provenance"].get("code") != code):
            continue
        kept.append(run)
    return [*kept, entry]


def write(path: Path, bench: str, entry: dict[str, Any]) -> None:
    """Merge ``entry`` into the file at ``path`` under a lock on its folder (runs of several benchmarks may end at
    once) and replace the file whole, so that a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        runs = read(path)["runs"] if path.exists() else []
        doc = {"bench": bench, "runs": merge(runs, entry)}
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.stem}-", delete=False) as f:
            f.write(json.dumps(doc, indent=1) + "\n")
        os.replace(f.name, path)
    finally:
        os.close(folder)


class Run:
    """One run of a benchmark: its provenance, taken when it starts, and its parameters; ``save`` records it."""

    def __init__(
        self,
        bench: str,
        parameters: Mapping[str, Any],
        out: Path | str | None = None,
        argv: list[str] | None = None,
    ) -> None:
        self.bench = bench
        self.parameters = normalised(dict(parameters))
        self.path = Path(out) if out else path_of(bench)
        self.provenance = provenance.capture(f"bench.{bench}", argv)

    def save(self, results: Mapping[str, Any], complete: bool = True) -> Path:
        """Record (or, saved again, update) this run with ``results``; returns the file."""
        entry = {
            "provenance": {**self.provenance, "load_average_end": provenance.load_average()},
            "parameters": self.parameters,
            "complete": complete,
            "results": normalised(dict(results)),
        }
        write(self.path, self.bench, entry)
        return self.path
