"""The benchmarks page, ``docs/benchmarks.md``, and its plots, from the results files alone.

    python -m bench.report            # writes docs/benchmarks.md and docs/img/benchmarks/*.png
    python -m bench.report --check    # exit 1 when the committed page differs from what the results give

Every figure on the page comes from ``bench/results/<bench>.json`` (``bench.record``) with the command that made it,
the commit, the date, the machine and its load (``bench.provenance``); a result made before runs recorded their
provenance says so. The tables are each benchmark's own (``tables(runs)`` of ``bench.<name>``), given the runs of one
setting on one code: where a setting ran several times the tables give the mean and standard error over the runs.
Nothing here measures, and nothing depends on the time it runs: the same results give the same page and the same
PNG bytes (``bench.plots``), so a test can hold the committed page to the results.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import provenance
from bench.record import RESULTS, read

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
IMAGES = ROOT / "docs" / "img" / "benchmarks"

Plotter = Callable[[list[dict[str, Any]], Path], None]


@dataclass(frozen=True)
class Section:
    bench: str
    title: str


SECTIONS = (
    Section("speed", "Speed: FV-tree in the simulator against LightGBM"),
    Section("simulate_floor", "Where the simulator's time goes: kernels and the rest"),
    Section("curves", "Scaling: time and memory against rows, parties, depth and trees"),
    Section("accuracy", "Accuracy against centralized LightGBM and the parties alone"),
    Section("figures", "The paper's figures 6 to 8"),
    Section("default_shape", "The default shape of a task"),
    Section("binning", "Private bin edges"),
    Section("seeds", "Seed systems in the same harness"),
    Section("seed_fedxgbllr", "FedXGBllr against its paper"),
    Section("privacy", "Privacy and accuracy"),
    Section("privacy_audit", "Privacy audit: canaries against the released model"),
    Section("endorse", "Endorsement: false refusals and detection"),
    Section("manipulation", "Data manipulation: what changed rows and identities earn"),
    Section("comm", "Communication"),
    Section("gas", "Gas"),
    Section("chain", "Training on chain"),
    Section("block_interval", "Training on chain at fixed block intervals"),
    Section("embedded_evm", "The embedded chain's EVM"),
    Section("fuzz", "The contract checks at bench size"),
    Section("faults", "Faults: recovery and what the audit says"),
    Section("shapley_cost", "The cost of exact split Shapley"),
    Section("shapley_estimate", "Split Shapley beyond 12 parties: the estimate"),
    Section("scale", "A party beyond one machine: Parquet and Dask"),
    Section("api_load", "The REST API under load"),
    Section("dashboard", "The dashboard at scale"),
)
"""The page's sections in order; a results file of any other benchmark follows them under its module's name."""


@dataclass
class Group:
    """The runs of one setting on one code: repetitions of each other."""

    parameters: dict[str, Any]
    runs: list[dict[str, Any]]


def groups(runs: list[dict[str, Any]]) -> list[Group]:
    """Runs grouped by (parameters, code), in the order of each group's first run. Converted results (code unknown)
    group by their parameters."""
    out: dict[str, Group] = {}
    for run in runs:
        key = repr((sorted(run["parameters"].items()), run["provenance"].get("code")))
        out.setdefault(key, Group(run["parameters"], [])).runs.append(run)
    return list(out.values())


class Machines:
    """The machines the page's figures ran on, numbered in the order the page meets them."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def label(self, machine: dict[str, Any]) -> str:
        if machine not in self.seen:
            self.seen.append(machine)
        return f"machine {self.seen.index(machine) + 1}"

    def table(self) -> str:
        keys = ("cores", "cpu", "os", "python", *provenance.PACKAGES, "anvil")
        names = ("cores", "CPU", "OS", "Python", "numpy", "LightGBM", "numba", "web3", "anvil")
        lines = ["| machine | " + " | ".join(names) + " |", "|---|" + "---|" * len(keys)]
        for i, m in enumerate(self.seen, 1):
            lines.append(f"| {i} | " + " | ".join(str(m.get(k) if m.get(k) is not None else "-") for k in keys) + " |")
        return "\n".join(lines)


def _load(values: list[float] | None) -> str:
    return f"{values[0]:.2f}" if values else "?"


def provenance_line(run: dict[str, Any], machines: Machines) -> str:
    """Where one run's figures come from, in a line."""
    p = run["provenance"]
    command = f"`{p['command']}`"
    if p.get("provenance") == provenance.CONVERTED:
        date = (p.get("date") or "?")[:10]
        note = f"; {p['note']}" if p.get("note") else ""
        return (
            f"{command}: measured before runs recorded their provenance and not re-run (commit and machine not "
            f"recorded; result recorded on {date}){note}"
        )
    commit = (p.get("commit") or "?")[:10]
    dirty = " with uncommitted changes" if p.get("dirty") else ""
    date = p["date"].replace("T", " ").replace("Z", " UTC")
    load = f"load {_load(p.get('load_average'))} at the start, {_load(p.get('load_average_end'))} at the end"
    partial = "" if run.get("complete", True) else "; stopped before the end (partial)"
    return f"{command}: commit `{commit}`{dirty}, {date}, {machines.label(p['machine'])}, {load}{partial}"


def first_paragraph(doc: str | None) -> str:
    """A module docstring's first paragraph on one line: what the benchmark measures, in its own words."""
    text = (doc or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in text.splitlines())


def _value(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


def group_title(group: Group, found: list[Group], always: Mapping[str, Any] | None = None) -> str:
    """What sets a group apart from the other groups of its benchmark: its part, or the parameters where it departs
    from what most groups have (all of them where no value is the most common). ``always`` (a benchmark's
    ``TITLE_KEYS``) names parameters every title shows, with the value a run made before the option existed measured."""
    if "part" in group.parameters:
        return str(group.parameters["part"])
    always = always or {}
    keys = []
    for key, value in group.parameters.items():
        counts = Counter(repr(g.parameters.get(key)) for g in found)
        top = max(counts.values())
        if key not in always and (counts[repr(value)] < top or (len(counts) > 1 and len(set(counts.values())) == 1)):
            keys.append(key)
    parts = [f"{k.replace('_', ' ')} {_value(group.parameters[k])}" for k in keys]
    parts += [f"{k.replace('_', ' ')} {_value(group.parameters.get(k, v))}" for k, v in always.items()]
    return "; ".join(parts) or "the others' setting"


def plot_name(bench: str, group: Group, index: int, count: int) -> str:
    """A plot's file name: the bench, and the group's part (or its number when the bench has several groups)."""
    if "part" in group.parameters:
        return f"{bench}-{group.parameters['part']}.png"
    return f"{bench}.png" if count == 1 else f"{bench}-{index + 1}.png"


def plotter(module: Any, bench: str) -> Plotter | None:
    """A bench's plot from a group's runs, where it draws one."""
    if bench in ("figures", "privacy"):
        return lambda runs, path: module.plot(
            runs[0]["parameters"]["part"], [row for run in runs for row in run["results"]["rows"]], path
        )
    if bench == "speed":
        return speed_plot
    if bench == "curves":
        return module.plot
    return None


def speed_plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Train seconds of each run of ``bench.speed`` (mean with standard error over the repetitions)."""
    from bench.plots import pyplot, save_figure
    from bench.stats import mean_se

    measurements = [m for run in runs for m in run["results"]["measurements"]]
    names = list(dict.fromkeys(m["run"] for m in measurements))
    stats = [mean_se(m["train_seconds"] for m in measurements if m["run"] == n) for n in names]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.barh(names, [s[0] for s in stats], xerr=[s[1] for s in stats], color=[f"C{i}" for i in range(len(names))])
    ax.invert_yaxis()
    ax.set_xlabel("train seconds (mean ± SE)")
    p = runs[0]["parameters"]
    ax.set_title(f"{p['data']}, M = {p['parties']}, {p['trees']} trees of depth {p['depth']}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


def section(bench: str, title: str, runs: list[dict[str, Any]], machines: Machines, plots: dict[Path, Any]) -> str:
    """One benchmark's part of the page; the plots it shows are added to ``plots`` (path -> drawing)."""
    module = importlib.import_module(f"bench.{bench}")
    found = groups(runs)
    draw = plotter(module, bench)
    lines = [
        f"## {title}",
        "",
        first_paragraph(module.__doc__),
        "",
        f"Results: `bench/results/{bench}.json`.",
    ]
    for i, group in enumerate(found):
        if len(found) > 1:
            lines += ["", f"### {group_title(group, found, getattr(module, 'TITLE_KEYS', None))}"]
        lines.append("")
        if len(group.runs) > 1:
            lines.append(f"{len(group.runs)} runs of this setting on the same code:")
            lines.append("")
            lines += [f"- {provenance_line(run, machines)}" for run in group.runs]
        else:
            lines.append(provenance_line(group.runs[0], machines))
        lines += ["", module.tables(group.runs).strip()]
        if draw is not None:
            name = plot_name(bench, group, i, len(found))
            plots[IMAGES / name] = (draw, group.runs)
            alt = f"{title}: {group.parameters['part']}" if "part" in group.parameters else title
            lines += ["", f"![{alt}](img/benchmarks/{name})"]
    if hasattr(module, "across_runs") and (text := module.across_runs(runs).strip()):
        lines += ["", text]  # what the runs say together, after each run's own tables
    return "\n".join(lines)


def page() -> tuple[str, dict[Path, Any]]:
    """The page's markdown, and the plots it shows (path -> (drawing, runs))."""
    files = {path.stem: path for path in sorted(RESULTS.glob("*.json"))}
    machines = Machines()
    plots: dict[Path, Any] = {}
    listed = [(s.bench, s.title) for s in SECTIONS if s.bench in files]
    listed += [(name, f"bench.{name}") for name in files if name not in {s.bench for s in SECTIONS}]
    body = [section(bench, title, read(files[bench])["runs"], machines, plots) for bench, title in listed]
    head = [
        "# Benchmarks",
        "",
        "<!-- generated by `python -m bench.report` from bench/results/*.json: edit the benchmarks, not this page -->",
        "",
        "Every figure below comes with the command that measured it, the commit it ran at, the date, the machine and "
        "the machine's load (the 1-minute load average at the start and end of the run: these benchmarks share two "
        "cores with other work, and a busy machine slows every timing down). A figure measured before runs recorded "
        "their provenance says so and was not re-run. Where a setting ran several times on the same code, the tables "
        "give the mean and standard error over the runs; a run on changed code replaces the runs of its setting "
        "(`bench.record`). To measure again, run the command shown; "
        "`python -m bench.report` then rebuilds this page and its plots from `bench/results/`.",
        "",
        "Contents: " + ", ".join(f"[{title}](#{anchor(title)})" for _, title in listed) + ", [machines](#machines).",
    ]
    tail = ["## Machines", "", machines.table() if machines.seen else "No run on this page recorded its machine."]
    return "\n\n".join(["\n".join(head), *body, "\n".join(tail)]) + "\n", plots


def anchor(title: str) -> str:
    """The heading's anchor as MkDocs makes it (Python-Markdown's ``toc.slugify``)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only compare the committed page with the results")
    args = ap.parse_args(argv)
    text, plots = page()
    if args.check:
        current = PAGE.read_text() if PAGE.exists() else ""
        missing = [p for p in plots if not p.exists()]
        if current != text or missing:
            print(f"{PAGE} is not what bench/results gives: run python -m bench.report", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text)
    for path, (draw, runs) in plots.items():
        draw(runs, path)
    for stale in sorted(IMAGES.glob("*.png")):
        if stale not in plots:
            stale.unlink()  # a plot no result draws any more
    print(f"{PAGE.relative_to(ROOT)}: {len(plots)} plots in {IMAGES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
