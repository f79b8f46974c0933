"""Where a benchmark figure comes from: the command, the code, the date, the machine and how busy it was.

A figure without its provenance cannot be compared with the next one: the same work took 3.7-4.0 s one day and
2.5-3.0 s another on the two cores these benchmarks share with other work, and the code changes between runs. So
every run records, at its start (``capture``):

* ``command``: the command line, as ``python -m bench.<name> ...``;
* ``commit``: ``git rev-parse HEAD`` of this checkout, and ``dirty``: whether the sources a benchmark runs (the
  package's folders and ``bench/``, not the docs or tests) differed from that commit;
* ``code``: a fingerprint of those sources as run (the commit's trees plus any uncommitted change to them): two runs
  with the same fingerprint ran the same code, whatever was committed elsewhere in between (``bench.record``
  groups repetitions by it);
* ``date``: the start, UTC, ISO 8601;
* ``load_average``: the machine's 1-, 5- and 15-minute load averages at the start (``load_average_end`` is added
  when the run is saved), since other work on the same cores slows a run down;
* ``machine``: cores, CPU model (``/proc/cpuinfo``), operating system, and the versions of Python, numpy, LightGBM,
  numba, web3 and anvil (when ``ledger.devnet.anvil`` finds it).

A result made before provenance was recorded is kept with ``commit`` null and ``provenance``
``"converted; not re-run"`` (``converted``), so that no page presents it as a current measurement.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CODE_PATHS = ("node", "ledger", "api", "deploy", "contracts", "bench", "fgbdt_chain", "pyproject.toml")
"""The sources a benchmark runs; ``bench/results`` is excluded, as are the docs and tests."""
PACKAGES = ("numpy", "lightgbm", "numba", "web3")
CONVERTED = "converted; not re-run"


def _git(*args: str) -> str | None:
    """A git command's output in this checkout, or None where git or the repository is missing."""
    try:
        # no optional locks: other work in the same checkout may be committing while a benchmark starts
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _code_state() -> tuple[str | None, bool | None, str | None]:
    """(commit, dirty, code fingerprint) of the benchmarked sources; Nones outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return None, None, None
    trees = _git("ls-tree", "HEAD", "--", *CODE_PATHS) or ""
    bench = _git("ls-tree", "HEAD", "bench/") or ""
    # bench/ as its entries without results/: a new result must not change the fingerprint of the code that made it
    kept = [
        line for line in (trees + bench).splitlines() if not line.endswith("\tbench") and "\tbench/results" not in line
    ]
    diff = _git("diff", "HEAD", "--", *CODE_PATHS, ":(exclude)bench/results") or ""
    fingerprint = hashlib.sha256("\n".join([*sorted(kept), diff]).encode()).hexdigest()[:16]
    return commit.strip(), bool(diff), fingerprint


def cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (None where there is no such file or line)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return None


def os_name() -> str:
    """The distribution's name where ``/etc/os-release`` gives it, with the kernel."""
    pretty = None
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    kernel = f"{platform.system()} {platform.release()}"
    return f"{pretty} ({kernel})" if pretty else kernel


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def anvil_version() -> str | None:
    """``anvil --version``'s first line, or None when ``ledger.devnet.anvil`` finds no anvil."""
    try:
        from fgbdt_chain.ledger.devnet.anvil import AnvilNotFound, anvil_binary

        binary = anvil_binary()
    except (ImportError, AnvilNotFound):
        return None
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def cores() -> int:
    """The cores this process may run on (its affinity), which is what a benchmark's threads get."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def machine() -> dict[str, Any]:
    """The machine and software a run measured."""
    return {
        "cores": cores(),
        "cpu": cpu_model(),
        "os": os_name(),
        "python": platform.python_version(),
        **{package: _version(package) for package in PACKAGES},
        "anvil": anvil_version(),
    }


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def now() -> str:
    """The time in UTC, ISO 8601 to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def command_line(module: str | None = None, argv: list[str] | None = None) -> str:
    """``python -m <module> <arguments>`` of this process (the module from ``sys.argv[0]`` when not given)."""
    args = sys.argv[1:] if argv is None else argv
    if module is None:
        path = Path(sys.argv[0]).resolve()
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts) if path.is_relative_to(ROOT) else path.name
    return " ".join(["python -m", module, *(shlex.quote(a) for a in args)])


def capture(module: str | None = None, argv: list[str] | None = None) -> dict[str, Any]:
    """The provenance of a run starting now (module docstring for the fields)."""
    commit, dirty, code = _code_state()
    return {
        "command": command_line(module, argv),
        "commit": commit,
        "dirty": dirty,
        "code": code,
        "date": now(),
        "load_average": load_average(),
        "machine": machine(),
    }


def converted(command: str | None, recorded: str | None, note: str | None = None) -> dict[str, Any]:
    """The provenance of a result made before runs recorded theirs: its command, no commit and no machine (neither
    was written down), and the date its result was committed (``recorded``), which is when it was last measured."""
    out: dict[str, Any] = {
        "command": command,
        "commit": None,
        "dirty": None,
        "code": None,
        "date": recorded,
        "load_average": None,
        "machine": None,
        "provenance": CONVERTED,
    }
    if note:
        out["note"] = note
    return out


FIELDS = ("command", "commit", "dirty", "code", "date", "load_average", "machine")
"""The fields every run's provenance has (null where unknown)."""
