"""Writes ``reference/contracts.md``: the Solidity contracts and libraries of ``contracts/*.sol`` from their NatSpec.

Why parse the sources: the shipped artifacts (``ledger/artifacts/contracts.json``) hold the ABI and bytecode only, no
devdoc or userdoc, and asking the compiler for them would need solc at build time. NatSpec is line comments
(``///``) or blocks (``/** */``) right before a declaration, with the tags ``@title``, ``@notice``, ``@dev``,
``@param``, ``@return`` and ``@custom:...``; an untagged first line is a notice. The page keeps every contract's and
library's documented interface: functions (private ones left out), events, custom errors, structs, enums, modifiers
and constants or state that is not private.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _md import cell, code, slug, table, text

PAGE = "reference/contracts.md"
ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "contracts"

UNIT_KINDS = ("abstract contract", "contract", "library", "interface")
ITEM_KINDS = ("function", "constructor", "modifier", "event", "error", "struct", "enum", "receive", "fallback")
SECTIONS = (
    ("function", "Functions"),
    ("modifier", "Modifiers"),
    ("event", "Events"),
    ("error", "Errors"),
    ("struct", "Structs"),
    ("enum", "Enums"),
    ("variable", "Constants and state"),
)


@dataclass
class NatSpec:
    """One declaration's NatSpec, tag by tag."""

    tags: dict[str, str] = field(default_factory=dict)
    params: list[tuple[str, str]] = field(default_factory=list)
    returns: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, lines: list[str]) -> NatSpec:
        doc = cls()
        tag, buf = "notice", []  # an untagged comment is a notice

        def flush() -> None:
            body = " ".join(" ".join(buf).split())
            if not body:
                return
            if tag == "param":
                name, _, rest = body.partition(" ")
                doc.params.append((name, rest))
            elif tag == "return":
                doc.returns.append(body)
            else:
                doc.tags[tag] = (doc.tags[tag] + " " + body) if tag in doc.tags else body

        for line in lines:
            m = re.match(r"\s*@([\w:-]+)\s*(.*)", line)
            if m:
                flush()
                tag, buf = m.group(1), [m.group(2)]
            else:
                buf.append(line)
        flush()
        return doc

    def empty(self) -> bool:
        return not (self.tags or self.params or self.returns)


@dataclass
class Item:
    kind: str
    name: str
    declaration: str
    doc: NatSpec


@dataclass
class Unit:
    kind: str
    name: str
    header: str
    file: str
    doc: NatSpec
    items: list[Item] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.name if self.kind != "file" else f"{self.file}: file level"

    @property
    def anchor(self) -> str:
        return slug(self.file + " " + self.title)


def _code_of(line: str) -> str:
    """A line without its strings and ``//`` comment, for counting braces and parentheses."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(?:\\.|[^'\\])*'", "''", line)
    return line.split("//", 1)[0]


def _declaration(lines: list[str], i: int) -> tuple[str, int, int]:
    """The declaration starting at line ``i`` up to its body's ``{`` or its ``;`` (whole body for a struct or
    enum), as source text; the index of the line after it and the brace depth it leaves open."""
    first = lines[i].strip()
    whole_body = re.match(r"(struct|enum)\b", first) is not None
    taken: list[str] = []
    parens = depth = 0
    while i < len(lines):
        raw = lines[i]
        src = _code_of(raw)
        taken.append(raw.rstrip())
        i += 1
        for ch in src:
            if ch == "(":
                parens += 1
            elif ch == ")":
                parens -= 1
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
        if whole_body:
            if depth == 0 and "}" in src:
                break
        elif parens == 0 and ("{" in src or src.rstrip().endswith(";")):
            break
    if whole_body:
        text_ = "\n".join(_dedent(taken))
    else:
        joined = " ".join(_code_of(t).strip() for t in taken)
        head = joined.split("{", 1)[0] if "{" in joined else joined
        text_ = re.sub(r"\s+", " ", head).replace("( ", "(").replace(" )", ")").strip().rstrip(";").strip()
        if "=" in text_ and text_.split()[0] not in ITEM_KINDS:  # a constant: keep its value, it is documentation
            text_ = re.sub(r"\s+", " ", joined).rstrip(";").strip()
    return text_, i, depth


def _dedent(lines: list[str]) -> list[str]:
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return [line[indent:] for line in lines]


def _name(kind: str, declaration: str) -> str:
    if kind in ("constructor", "receive", "fallback"):
        return kind
    if kind == "variable":
        head = declaration.split("=", 1)[0].split()
        return head[-1] if head else declaration
    m = re.match(rf"{kind}\s+(\w+)", declaration)
    return m.group(1) if m else declaration


def _visible(kind: str, declaration: str) -> bool:
    """Private declarations are the contract's own business; internal ones stay (a library's API)."""
    head = declaration.split("=", 1)[0]
    return not re.search(r"\bprivate\b", head)


def parse(path: Path) -> list[Unit]:
    """The units of one source file; declarations at file level form a unit of their own."""
    lines = path.read_text(encoding="utf-8").splitlines()
    file_level = Unit("file", path.stem, "", path.name, NatSpec())
    units: list[Unit] = []
    unit: Unit | None = None
    depth = 0
    pending: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("///"):
            pending.append(stripped[3:].strip())
            i += 1
            continue
        if stripped.startswith("/**"):
            block = []
            while True:
                block.append(lines[i])
                i += 1
                if "*/" in block[-1] or i >= len(lines):
                    break
            for b in block:
                b = b.strip().removeprefix("/**").removesuffix("*/").strip()
                pending.append(b.removeprefix("*").strip())
            continue
        if stripped.startswith("/*"):
            while i < len(lines) and "*/" not in lines[i]:
                i += 1
            i += 1
            continue
        if not stripped or stripped.startswith("//"):
            i += 1
            continue
        level = depth if unit is None else depth - 1
        unit_kind = next((k for k in UNIT_KINDS if stripped.startswith(k + " ")), None)
        if depth == 0 and unit_kind:
            header, i, opened = _declaration(lines, i)
            unit = Unit(
                unit_kind,
                _name(unit_kind.split()[-1], header.removeprefix("abstract ")),
                header,
                path.name,
                NatSpec.parse(pending),
            )
            units.append(unit)
            depth += opened
            pending = []
            continue
        if level == 0 and not stripped.startswith(("pragma", "import", "using", "}")):
            kind = next((k for k in ITEM_KINDS if re.match(rf"{k}\b", stripped)), "variable")
            declaration, i, opened = _declaration(lines, i)
            target = unit if unit is not None else file_level
            if _visible(kind, declaration):
                target.items.append(Item(kind, _name(kind, declaration), declaration, NatSpec.parse(pending)))
            depth += opened if kind not in ("struct", "enum") else 0
            pending = []
            continue
        pending = []
        depth += _code_of(lines[i]).count("{") - _code_of(lines[i]).count("}")
        if depth == 0:
            unit = None
        i += 1
    return ([file_level] if file_level.items else []) + units


def first_sentence(s: str) -> str:
    """The text up to the first full stop that ends a sentence (not one inside a code span or a number)."""
    depth = 0
    for i, ch in enumerate(s):
        if ch == "`":
            depth ^= 1
        elif ch == "." and not depth and (i + 1 == len(s) or s[i + 1] == " "):
            return s[: i + 1]
    return s


def layout(declaration: str, width: int = 88) -> str:
    """A long one-line declaration with its parameter list one per line, as the sources write it."""
    if len(declaration) <= width or "(" not in declaration:
        return declaration
    start = declaration.index("(")
    depth, params, current = 0, [], ""
    for j in range(start + 1, len(declaration)):
        ch = declaration[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                params.append(current.strip())
                rest = declaration[j + 1 :].strip()
                body = ",\n".join("    " + p for p in params if p)
                return f"{declaration[:start]}(\n{body}\n){(' ' + rest) if rest else ''}"
            depth -= 1
        elif ch == "," and depth == 0:
            params.append(current.strip())
            current = ""
            continue
        current += ch
    return declaration


def doc_text(doc: NatSpec, skip: tuple[str, ...] = ()) -> str:
    """Notice, dev and custom tags as paragraphs."""
    out = []
    if "notice" in doc.tags and "notice" not in skip:
        out.append(text(doc.tags["notice"]))
    if "dev" in doc.tags and "dev" not in skip:
        out.append("*Implementation:* " + text(doc.tags["dev"]))
    for tag, body in doc.tags.items():
        if tag.startswith("custom:"):
            out.append(f"*{text(tag.removeprefix('custom:'))}:* " + text(body))
    return "\n\n".join(out)


def doc_cell(doc: NatSpec) -> str:
    parts = [cell(doc.tags.get("notice", "")), cell(doc.tags.get("dev", ""))]
    parts += [f"{code(name)}: {cell(body)}" for name, body in doc.params]
    parts += ["returns " + cell(body) for body in doc.returns]
    return " ".join(p for p in parts if p)


def item_section(item: Item) -> str:
    out = [f"#### `{item.name}`\n", "```solidity\n" + layout(item.declaration) + "\n```\n"]
    if body := doc_text(item.doc):
        out.append(body + "\n")
    if item.doc.params:
        out.append(table(["parameter", "meaning"], [[code(n), cell(b)] for n, b in item.doc.params]))
    if item.doc.returns:
        out.append("**Returns:** " + "; ".join(text(r) for r in item.doc.returns) + "\n")
    return "\n".join(out)


def unit_section(unit: Unit) -> str:
    kind = unit.kind if unit.kind != "file" else "declarations outside any contract"
    out = [f"## {unit.title} {{#{unit.anchor}}}\n", f"*{kind}, `contracts/{unit.file}`*\n"]
    if unit.header:
        out.append("```solidity\n" + unit.header + "\n```\n")
    if body := doc_text(unit.doc):
        out.append(body + "\n")
    for kind_, heading in SECTIONS:
        items = [
            it
            for it in unit.items
            if it.kind == kind_ or (kind_ == "function" and it.kind in ("constructor", "receive", "fallback"))
        ]
        if not items:
            continue
        out.append(f"### {heading}\n")
        if kind_ in ("event", "error", "variable"):
            out.append(table(["declaration", "meaning"], [[code(it.declaration), doc_cell(it.doc)] for it in items]))
        else:
            out += [item_section(it) for it in items]
    return "\n".join(out)


def page() -> str:
    units = [u for path in sorted(CONTRACTS.glob("*.sol")) for u in parse(path)]
    overview = [
        [
            f"[{u.title}](#{u.anchor})",
            u.kind if u.kind != "file" else "file level",
            code(u.file),
            cell(first_sentence(u.doc.tags.get("notice", ""))),
        ]
        for u in units
    ]
    out = [
        "# Contracts\n",
        "The Solidity contracts of `contracts/` (Solidity 0.8, compiled by `ledger/toolchain/compile.py`; the "
        "compiled artifacts ship with the package in `ledger/artifacts/contracts.json`). `FGBDTChain` holds the "
        "tasks and calls the libraries, which are deployed once and linked; `FGBDTForwarder` relays the requests "
        "users sign (ERC-2771). Real values are int256 fixed point with 18 decimals (1e18 is 1.0), and every "
        "computation follows `ledger/spec/reference.py` bit for bit. This page is generated from the sources' "
        "NatSpec comments when the site is built.\n",
        table(["unit", "kind", "file", "what it is"], overview),
    ]
    out += [unit_section(u) for u in units]
    return "\n".join(out)


with mkdocs_gen_files.open(PAGE, "w") as f:
    f.write(page())
