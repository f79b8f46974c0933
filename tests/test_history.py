"""The repository speaks of the product, never of how it was made.

Every tracked text file (``git ls-files``) is read and each line that tells the project's history instead of the
product is listed as ``path:line``: numbered work sessions ("stop 24", "run 12's"), reviewer tags ("helper-3"), issue
numbers ("issue 12", "#41"), references to notes and papers kept outside the repository (``NOTES``, ``../shared``,
``shared/papers``), diary phrases ("this stop", "the stop's start", "the review's") and commit hashes in prose. A
decision is written as the decision, its reason and its measurement; a paper is cited by its authors and title.

Commit hashes are looked for in prose only (comments, docstrings, help texts, Markdown): in code and data a run of hex
digits is a value (keccak vectors, addresses, bytecode), and the data files that record a commit do so as provenance.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PENDING: frozenset[str] = frozenset()
"""Paths (a trailing ``/``: folders) not checked yet because another change rewrites them; remove each entry when
that change lands, so that the whole repository is checked."""

RULE_BOOK = "tests/test_history.py"
"""This file: it quotes what it forbids."""

DATA_FILES: tuple[str, ...] = ("ledger/artifacts/", "package-lock.json", "docs/benchmarks.md")
"""Generated data whose hex strings are values (bytecode, integrity hashes, and the commit each benchmark figure ran
at on the page ``bench.report`` generates from the results); like every JSON file (a result's commit field is
provenance), they have no prose to check for commit hashes."""

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("numbered stop", re.compile(r"\bstops?\s+\d+", re.IGNORECASE)),
    (
        "numbered run",
        re.compile(r"\bruns?\s+\d+'s\b|\((?:in |at )?runs?\s+\d+\)|\b(?:since|until) runs?\s+\d+\b", re.I),
    ),
    ("reviewer tag", re.compile(r"\bhelpers?[-_ ]?\d+\b", re.IGNORECASE)),
    ("issue number", re.compile(r"\bissues?\s+#?\d+\b", re.IGNORECASE)),
    ("notes outside the repository", re.compile(r"\bNOTES\b|\b(?i:notes\.md)\b")),
    ("papers outside the repository", re.compile(r"shared/papers|\.\./shared\b")),
    (
        "diary phrase",
        re.compile(
            r"\b(?:this|that|last|previous|earlier|next) stop\b|\b(?:at|since|before|until|after|of|against) the stop\b"
            r"|\bthe stop's\b|\bstop's\b|\b(?:after|in|per|the) review(?:'s|s)?\b|\breview(?:er)?'s\b",
            re.IGNORECASE,
        ),
    ),
)
"""What a line may not say anywhere (code, comments, help texts, data): a rule's name and its pattern."""

ISSUE_REF = re.compile(r"(?<![\w&/#])#\d{1,5}\b(?![-\w])")
"""An issue or pull request as GitHub links it ("#41"); looked for in prose only: code labels items so ("payout #0")."""

COMMIT = re.compile(r"(?<![\w.\-/])[0-9a-f]{7,40}(?![\w\-/])")
"""A word of 7 to 40 hex digits (what ``git`` prints for a commit), not in a path, a version or a ``0x`` literal."""


def tracked_files() -> list[str]:
    """The checkout's tracked files, relative to its root."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def pending(path: str) -> bool:
    """Whether ``path`` is in :data:`PENDING` (itself or under one of its folders)."""
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in PENDING)


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary file (or a symlink to a folder)."""
    if not path.is_file() or path.is_symlink():
        return None
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def python_prose(text: str) -> set[int]:
    """Lines of a Python file that are prose: comments, string statements (docstrings), and the strings given as
    ``help``, ``description``, ``epilog`` or ``usage`` (argparse, pydantic fields)."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            lines.add(tok.start[0])
    prose: list[ast.expr] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            prose.append(node.value)
        if isinstance(node, ast.keyword) and node.arg in {"help", "description", "epilog", "usage"}:
            prose.append(node.value)
    for expr in prose:
        lines.update(range(expr.lineno, (expr.end_lineno or expr.lineno) + 1))
    return lines


def comment_prose(text: str, line_comment: str, block: tuple[str, str] | None = None) -> Iterator[tuple[int, str]]:
    """The comment part of each line of a file whose comments start with ``line_comment`` (and may span lines
    between the ``block`` delimiters)."""
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        if block is not None and inside:
            end = line.find(block[1])
            yield n, line if end < 0 else line[:end]
            inside = end < 0
            continue
        at = line.find(line_comment)
        if block is not None:
            start = line.find(block[0])
            if start >= 0 and (at < 0 or start < at) and block[1] not in line[start:]:
                inside = True
                yield n, line[start:]
                continue
        if at >= 0:
            yield n, line[at:]


def prose_lines(path: str, text: str) -> Iterator[tuple[int, str]]:
    """The lines (or the parts of them) of a file that are prose rather than code or data."""
    suffix = Path(path).suffix
    if path.startswith(DATA_FILES) or suffix == ".json":
        return
    if suffix == ".py":
        keep = python_prose(text)
        yield from ((n, line) for n, line in enumerate(text.splitlines(), 1) if n in keep)
    elif suffix in {".sol", ".js", ".cjs", ".ts"}:
        yield from comment_prose(text, "//", ("/*", "*/"))
    elif suffix in {".md", ".txt", ".rst"}:
        yield from enumerate(text.splitlines(), 1)
    else:  # shell, Makefile, TOML, .gitignore
        yield from comment_prose(text, "#")


def commit_hashes(line: str) -> list[str]:
    """Hex words in a line of prose that read as commit hashes: letters and digits, at least four distinct (a quoted
    value such as ``7fffffff`` has fewer)."""
    return [w for w in COMMIT.findall(line) if re.search(r"[a-f]", w) and re.search(r"\d", w) and len(set(w)) >= 4]


def findings() -> list[str]:
    """Every line of the checked files that breaks a rule, as ``path:line: rule: text``."""
    found: list[str] = []
    for path in tracked_files():
        if pending(path) or path == RULE_BOOK:
            continue
        text = read_text(ROOT / path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            found += [f"{path}:{n}: {name}: {line.strip()[:160]}" for name, rule in RULES if rule.search(line)]
        for n, line in prose_lines(path, text):
            found += [f"{path}:{n}: commit hash {h}: {line.strip()[:160]}" for h in commit_hashes(line)]
            found += [f"{path}:{n}: issue number: {line.strip()[:160]}" for _ in ISSUE_REF.findall(line)[:1]]
    return found


def test_no_history_in_the_tree() -> None:
    found = findings()
    assert not found, f"{len(found)} lines tell the history, not the product:\n" + "\n".join(found)


PATH_RULE = re.compile(r"(?<![a-z])(?:stops?|helpers?|issues?|review)[-_]?\d+", re.IGNORECASE)
"""A file name that tells when or for whom a file was made (``speed_stop23.json``, ``chain_ab_review2.json``)."""


def test_no_history_in_file_names() -> None:
    named = [p for p in tracked_files() if not pending(p) and PATH_RULE.search(p)]
    assert not named, "file names tell the history, not the product:\n" + "\n".join(named)


def test_the_rules_catch_history() -> None:
    """Each rule on a line it must catch, and on product text it must leave alone."""
    caught = {
        "numbered stop": "(measured at stop 24: 26 s)",
        "numbered run": "run 12's figures",
        "reviewer tag": "as helper-3 asked",
        "issue number": "the fix for issue 12",
        "notes outside the repository": "the tie rule (NOTES 6)",
        "papers outside the repository": "see ../shared/papers/simfl.md",
        "diary phrase": "built this stop",
    }
    for name, rule in RULES:
        assert rule.search(caught[name]), name
    innocent = "run 3 times; the votes stop early; trees stop short; bins shared by parties; it notes the tree; a9a"
    assert not [name for name, rule in RULES if rule.search(innocent)]
    assert PATH_RULE.search("bench/results/speed_stop23.json") and not PATH_RULE.search("bench/results/chain_ab.json")
    assert ISSUE_REF.search("(#41)") and not ISSUE_REF.search("color #000000, payout#0, #1f77b4")
    assert commit_hashes("measured against 9bfdf49 at its end") == ["9bfdf49"]
    assert commit_hashes("u = 7fffffff 80000000") == []
    keccak = "c7f1a3e9d2b4c6a8e0f1d3b5a7c9e1f3a5b7d9c1e3f5a7b9c1d3e5f7a9b1c3d5"
    assert commit_hashes(f"0x1b2c3d4e5f, {keccak}, v1.2.3a45b6, bench/9bfdf49.json") == []
