"""Markdown helpers shared by the reference page generators (``docs/gen/*.py``).

Why escaping: the generators copy text written for other readers (argparse help, OpenAPI descriptions, NatSpec) into
Markdown, where a ``*``, ``_``, ``<`` or ``|`` outside a code span would turn into emphasis, HTML or a table column.
Code spans (backticks) are kept as written, since Markdown shows them literally.
"""

from __future__ import annotations

import re

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_SPECIAL = re.compile(r"([\\*_\[\]|#])")


def _escape(s: str) -> str:
    # Markdown has no backslash escape for < (nor raw HTML in these texts): entities for both angle brackets
    return _SPECIAL.sub(r"\\\1", s).replace("<", "&lt;").replace(">", "&gt;")


def text(s: str) -> str:
    """``s`` as Markdown that shows it as written: special characters escaped outside code spans, which are kept as
    they are (the table extension does not split a cell at a ``|`` inside one)."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(s):
        out.append(_escape(s[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_escape(s[pos:]))
    return "".join(out)


def cell(s: str) -> str:
    """``s`` for one table cell: escaped, on one line."""
    return " ".join(text(s).split())


def code(s: str) -> str:
    """``s`` as one code span (longer backtick fences when ``s`` holds backticks)."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table whose cells are already Markdown (escape them with :func:`cell`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def slug(s: str) -> str:
    """An anchor id of ``s``: lower case, runs of other characters as one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")
