"""Writes ``reference/parameters.md``: every task parameter from ``fgbdt_chain.ledger.spec.parameters``.

Why generated: the table there is the one place a parameter's type, range, default, unit and meaning are written; the
command line, the Python API, the REST API and the contract encoding read them from it, and so does this page.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _md import cell, code, table

from fgbdt_chain.ledger.spec.parameters import MAX_DEPTH, PARAMETERS, markdown_table
from fgbdt_chain.node.sim.engine import PARAMS

PAGE = "reference/parameters.md"

ENCODINGS = {"integer": "integer", "fixed": "18-decimal fixed point", "mode": "mode code"}

# the engine's fields that are not named as the table's parameters
_ENGINE_FIELDS = {"delta": "refit_delta", "dp_delta": "delta"}


def surfaces() -> str:
    """Where each parameter is set: its ``Config`` field and encoding, its command-line option and its key in
    ``fgbdt_chain.train``'s ``params`` (with LightGBM's aliases)."""
    keys: dict[str, str] = {}
    for p in PARAMS:
        if p.target in ("train", "prep"):
            keys[_ENGINE_FIELDS.get(p.field, p.field)] = ", ".join(code(n) for n in (p.name, *p.aliases))
    rows = [
        [
            code(p.name),
            f"{code(f'Config.{p.contract_field}')} ({ENCODINGS[p.encoding]})" if p.config else "each party's own",
            code(p.cli) if p.cli else "",
            keys.get(p.name, ""),
        ]
        for p in PARAMETERS
    ]
    return table(["parameter", "contract field", "command line", "`fgbdt_chain.train` key"], rows)


def page() -> str:
    return "\n".join(
        [
            "# Task parameters\n",
            cell(
                "Every parameter of a task, from the one table the command line, the Python API, the REST API and "
                "the contract encoding read (`fgbdt_chain.ledger.spec.parameters`): a task created with no "
                "parameters, through any of them, trains what `fgbdt simulate` trains with none. The REST API takes "
                "them by these names in `parameters` (`epsilon` null for no privacy, as JSON has no inf); "
                "`fgbdt train` and `fgbdt demo` train 20 trees of depth 5 unless told, a shape that finishes on chain "
                "in minutes. This page is generated when the site is built."
            )
            + "\n",
            markdown_table(),
            "## The depth limit\n",
            cell(
                f"A tree has at most {MAX_DEPTH} levels, the contract's `MAX_DEPTH`: it keeps a level's open nodes "
                "as one 256-bit mask over heap ids, and level d's nodes are 2^d to 2^(d+1) - 1, so the last level "
                f"that splits in a tree of depth {MAX_DEPTH} is the deepest whose nodes fit. The simulator, the "
                "Python API and the model format refuse deeper trees too."
            )
            + "\n",
            "## The label range\n",
            cell(
                "A regression task declares its label's range with `label_min` and `label_max` (`--label-min` and "
                "`--label-max`, `fgbdt_chain.train`'s keys of the same names, the REST API's `parameters`), from the "
                "label's documented domain. On chain every regression task needs it: each party's PSD splits the "
                "label over it. Under a privacy budget it also bounds every row's gradient by half its width around "
                "the scores' start at its midpoint, which sets the noise, so a private regression task without it is "
                "refused by the parameters' names; it is never read from the parties' rows, whose extremes it would "
                "leak. The parties' labels are clipped to it. See [Privacy](../privacy.md)."
            )
            + "\n",
            "## Where each parameter is set\n",
            surfaces(),
        ]
    )


with mkdocs_gen_files.open(PAGE, "w") as f:
    f.write(page())
