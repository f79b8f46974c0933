"""Writes ``reference/python.md``: the Python API, rendered by mkdocstrings from the docstrings.

Why a list here: the page documents what a user calls (``fgbdt_chain.train``, ``Model``, the scikit-learn
estimators) and the modules a developer extends (an algorithm, an attack, a verifier rule, a command, an API route),
not every module of the package. Each entry is an mkdocstrings directive (``::: dotted.path``) under a heading.
"""

from __future__ import annotations

import mkdocs_gen_files

PAGE = "reference/python.md"

INTRO = """# Python API

`import fgbdt_chain` gives the training API in LightGBM's shape: `fgbdt_chain.train(params, parties)` returns a
`Model` (`predict`, `save`/`load`, `contributions`), and `FGBDTClassifier` and `FGBDTRegressor` are scikit-learn
estimators over it. `params` takes LightGBM's names and their usual aliases: the accepted keys are listed on the
[task parameters](parameters.md) page. The second half of this page documents the modules a developer extends.
This page is generated from the docstrings when the site is built.
"""

SECTIONS: tuple[tuple[str, str, tuple[tuple[str, dict[str, object]], ...]], ...] = (
    (
        "Training",
        "`fgbdt_chain.train` is `fgbdt_chain.node.sim.engine.train`; it runs the federation in this process, with "
        "the protocol and defaults of `fgbdt simulate`.",
        (("fgbdt_chain.node.sim.engine.train", {}),),
    ),
    (
        "The model",
        "`fgbdt_chain.Model` is `fgbdt_chain.node.model.trees.Model`: what `train` returns, `fgbdt predict` and "
        "`fgbdt export` read, and the chain's model is read back as.",
        (("fgbdt_chain.node.model.trees.Model", {}),),
    ),
    (
        "scikit-learn estimators",
        "`fgbdt_chain.FGBDTClassifier` and `fgbdt_chain.FGBDTRegressor` (`fgbdt_chain.node.sim.sklearn`).",
        (
            ("fgbdt_chain.node.sim.sklearn.FGBDTClassifier", {}),
            ("fgbdt_chain.node.sim.sklearn.FGBDTRegressor", {}),
        ),
    ),
    (
        "Simulator: the protocol and its parties",
        "A variant of the protocol is a name in `ALGORITHMS` that `Federation` trains; `LocalParty` is one party's "
        "side of a level (histograms, votes), the same in the simulator and the party node; `TrainParams` holds "
        "what a run trains with. See the [development guide](../development.md#adding-an-algorithm).",
        (
            ("fgbdt_chain.node.sim.fvtree.ALGORITHMS", {}),
            ("fgbdt_chain.ledger.spec.train_params.TrainParams", {}),
            ("fgbdt_chain.node.protocol.local_party.LocalParty", {}),
            ("fgbdt_chain.node.sim.fvtree.Federation", {}),
        ),
    ),
    (
        "Algorithms",
        "Every algorithm the simulator trains is registered here, with its trainer and what it needs and reports; "
        "`fgbdt simulate --algo` and `node.sim.experiment.run` read the registry.",
        (
            ("fgbdt_chain.node.sim.algorithms.Algorithm", {}),
            ("fgbdt_chain.node.sim.algorithms.register", {}),
            ("fgbdt_chain.node.sim.algorithms.Job", {}),
            ("fgbdt_chain.node.sim.algorithms.Trained", {}),
        ),
    ),
    (
        "Experiments",
        "`prepare` turns a data set into parties (partition, common bins, PSDs, weights) and `run` trains one "
        "algorithm on them: what `fgbdt simulate`, the benchmarks and `fgbdt_chain.train` share.",
        (
            ("fgbdt_chain.node.sim.experiment.PrepConfig", {}),
            ("fgbdt_chain.node.sim.experiment.prepare", {}),
            ("fgbdt_chain.node.sim.experiment.run", {}),
            ("fgbdt_chain.node.sim.algorithms", {"members": ["Algorithm", "Job", "Trained", "register", "algorithm"]}),
        ),
    ),
    (
        "Attacks",
        "What a greedy party may do to its histograms, in `simulate` and on chain alike.",
        (("fgbdt_chain.node.attacks.histograms", {"members": ["ATTACK_KINDS", "Attack"]}),),
    ),
    (
        "Task parameters",
        "Every parameter's type, range, default and meaning is one `Parameter` of `ledger.spec.parameters` (the "
        "[task parameters](parameters.md) page lists them); `TaskParameters` names a task's parameters and maps "
        "them to the contract's `Config`.",
        (
            ("fgbdt_chain.ledger.spec.parameters.Parameter", {}),
            ("fgbdt_chain.ledger.spec.task_params.TaskParameters", {}),
            ("fgbdt_chain.ledger.spec.task_params.TaskConfig", {}),
        ),
    ),
    (
        "Audit",
        "Anyone can replay a task from the chain and recompute it with the Python reference.",
        (
            ("fgbdt_chain.ledger.audit.replay", {"members": ["audit_chain", "audit_events"]}),
            ("fgbdt_chain.ledger.audit.report.AuditReport", {}),
            ("fgbdt_chain.ledger.audit.report.Mismatch", {}),
        ),
    ),
    (
        "Command line and REST API",
        "A command is a module with `register(subparsers)` listed in `COMMAND_MODULES`; the API is assembled by "
        "`create_app` from one router per resource.",
        (
            ("fgbdt_chain.deploy.cli", {"members": ["COMMAND_MODULES", "build_parser", "main", "UserError"]}),
            ("fgbdt_chain.api.app.create_app", {}),
            ("fgbdt_chain.api.service.Backend", {"members": False}),
        ),
    ),
)


def directive(path: str, options: dict[str, object]) -> str:
    lines = [f"::: {path}"]
    if options:
        lines.append("    options:")
        for key, value in options.items():
            shown = "false" if value is False else "true" if value is True else value
            lines.append(f"      {key}: {shown}")
    return "\n".join(lines) + "\n"


def page() -> str:
    out = [INTRO]
    for title, lead, entries in SECTIONS:
        out.append(f"## {title}\n\n{lead}\n")
        out += [directive(path, options) for path, options in entries]
    return "\n".join(out)


with mkdocs_gen_files.open(PAGE, "w") as f:
    f.write(page())
