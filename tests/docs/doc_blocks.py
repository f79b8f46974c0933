"""The code blocks a page tells the reader to run, as the tests of ``tests/docs`` execute them.

A fenced block right after an HTML comment ``<!-- run: GROUP -->`` is run; the blocks of one group run in order, in
one Python namespace (``python`` blocks) or one ``bash`` script (``sh`` blocks), so that a later block may use what an
earlier one defined, as a reader's session does. Blocks without the comment (a shell session's setup, an example
with placeholders) are not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICKSTART = ROOT / "docs" / "quickstart.md"

_RUN = re.compile(r"^<!-- run: (?P<group>[\w-]+) -->\n```(?P<lang>\w+)\n(?P<code>.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Group:
    """The runnable blocks of one group of a page."""

    page: Path
    name: str
    lang: str
    blocks: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.name}"

    @property
    def code(self) -> str:
        return "\n".join(self.blocks)


def groups(page: Path) -> list[Group]:
    """Every group of ``page``, in the order of their first block; a group mixing languages is an error."""
    found: dict[str, list[tuple[str, str]]] = {}
    for m in _RUN.finditer(page.read_text(encoding="utf-8")):
        found.setdefault(m.group("group"), []).append((m.group("lang"), m.group("code")))
    out = []
    for name, blocks in found.items():
        langs = {lang for lang, _ in blocks}
        assert len(langs) == 1, f"{page}: group {name} mixes {sorted(langs)}"
        out.append(Group(page, name, langs.pop(), tuple(code for _, code in blocks)))
    return out


DEPLOYING = ROOT / "docs" / "deploying.md"
_CONFIG_EXAMPLE = re.compile(r"\*\*Configuration file\.\*\*.*?^```toml\n(?P<toml>.*?)^```$", re.M | re.S)


def node_config_text() -> str:
    """The ``fgbdt node --config`` file the deployment guide shows an organisation (its section "Joining a task from
    one's own host")."""
    m = _CONFIG_EXAMPLE.search(DEPLOYING.read_text(encoding="utf-8"))
    assert m is not None, f"{DEPLOYING}: no TOML example after **Configuration file.**"
    return m.group("toml")


def node_config_example() -> dict[str, object]:
    """``node_config_text`` parsed."""
    import tomllib

    return tomllib.loads(node_config_text())
