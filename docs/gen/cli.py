"""Writes ``reference/cli.md``: every ``fgbdt`` command and option, from the parsers the command line itself uses.

Why generated: the options live in ``deploy/cmd_*.py`` (``fgbdt_chain.deploy.cli.build_parser`` registers every
module of ``COMMAND_MODULES``); a page written by hand would drift from them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _md import cell, code, slug, table, text

from fgbdt_chain.deploy.cli import build_parser

PAGE = "reference/cli.md"


def prose(s: str | None) -> str:
    """A description (often a module docstring) as Markdown paragraphs: lines joined, blank lines kept."""
    if not s:
        return ""
    paragraphs = [" ".join(p.split()) for p in s.strip().split("\n\n")]
    return "\n\n".join(text(p) for p in paragraphs if p) + "\n"


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order they were registered."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def option_row(parser: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    """One table row: the option's names, its value, its default and what it does."""
    formatter = parser._get_formatter()
    names = ", ".join(code(s) for s in action.option_strings) or code(action.metavar or action.dest)
    if action.nargs == 0:
        value = ""
    elif action.choices is not None:
        value = "one of " + ", ".join(code(str(c)) for c in action.choices)
    else:
        value = code(formatter._format_args(action, action.dest.upper()))
    default = ""
    if action.nargs != 0 and action.default not in (None, argparse.SUPPRESS, [], "") and action.option_strings:
        default = code(str(action.default))
    meaning = cell(formatter._expand_help(action)) if action.help else ""
    if action.required and action.option_strings:
        meaning = "**required.** " + meaning
    return [names, value, default, meaning]


def options_section(parser: argparse.ArgumentParser) -> str:
    """The usage line and the options of ``parser``, one table per argument group."""
    parts = ["```text\n" + parser.format_usage().strip() + "\n```\n"]
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS
            and not isinstance(a, argparse._SubParsersAction | argparse._HelpAction | argparse._VersionAction)
        ]
        if not actions:
            continue
        if group.title not in ("options", "optional arguments"):
            parts.append(
                f"**{text(group.title or '')}**" + (f": {text(group.description)}" if group.description else "")
            )
        parts.append(table(["option", "value", "default", "meaning"], [option_row(parser, a) for a in actions]))
    return "\n".join(parts)


def command_section(prog: str, help_line: str, parser: argparse.ArgumentParser, level: int) -> str:
    """One command: its heading, description, options and its own subcommands one level down."""
    heading = "#" * level
    out = [f"{heading} `{prog}` {{#{slug(prog)}}}\n"]
    if help_line:
        out.append(f"*{text(help_line)}*\n")
    if parser.description and parser.description != help_line:
        out.append(prose(parser.description))
    out.append(options_section(parser))
    if parser.epilog:
        out.append(prose(parser.epilog))
    for name, sub_help, sub in subcommands(parser):
        out.append(command_section(f"{prog} {name}", sub_help, sub, level + 1))
    return "\n".join(out)


def page() -> str:
    os.environ["COLUMNS"] = "80"  # usage lines wrap at a fixed width whatever terminal builds the site
    root = build_parser()
    commands = subcommands(root)
    out = [
        "# Command line\n",
        'The `fgbdt` command is installed with the package (`pip install "./fgbdt-chain[chain]"`, or `make '
        "install` into `.venv`). `fgbdt --version` prints the version and `fgbdt COMMAND --help` the options of a "
        "command, as listed below. This page is generated from the command line's own parsers when the site is "
        "built.\n",
        prose(root.description),
        table(
            ["command", "what it does"],
            [[f"[`fgbdt {name}`](#{slug('fgbdt ' + name)})", cell(help_line)] for name, help_line, _ in commands],
        ),
        "Data files are libsvm or CSV, plain or gzip, dense or sparse, with or without a header, or NumPy `.npz` "
        "archives. Errors caused by the input print one line naming the command and the reason, and exit with "
        "status 2.\n",
    ]
    for name, help_line, sub in commands:
        out.append(command_section(f"fgbdt {name}", help_line, sub, 2))
    return "\n".join(out)


with mkdocs_gen_files.open(PAGE, "w") as f:
    f.write(page())
