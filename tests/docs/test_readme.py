"""README.md is the front page: short, opening with the two commands that install and run everything, and every
link in it leads to a page of the repository (or one the documentation's build generates)."""

from __future__ import annotations

import re

from doc_blocks import README, ROOT, groups

MAX_LINES = 200


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES}: the rest goes to docs/"


def test_readme_starts_with_make_demo_and_make_test() -> None:
    text = README.read_text(encoding="utf-8")
    title, _, rest = text.partition("\n\n")
    assert title.startswith("# "), "README.md opens with its title"
    m = re.match(r"```sh\n(.*?)```", rest, flags=re.S)
    assert m, "the first thing after the title is a shell block"
    commands = [line.split("#", 1)[0].strip() for line in m.group(1).splitlines()]
    assert commands == ["make demo", "make test"], commands


def test_make_demo_and_make_test_install_first() -> None:
    """What the README's first lines promise: each command installs what it needs, then runs."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rules = dict(re.findall(r"^([\w-]+):[ \t]*([^\n=]*)$", makefile, flags=re.M))
    assert "install" in rules["demo"].split()
    recipe = re.search(r"^test:[^\n]*\n((?:\t[^\n]*\n)*)", makefile, flags=re.M)
    assert recipe, "make test has a rule"
    # its prerequisites, and the targets its recipe runs side by side (``$(MAKE) -j2 ... contract-checks unit``)
    test_steps = rules["test"].split() + [w for w in recipe.group(1).split() if w in rules]
    assert {"lint", "typecheck", "docs", "contract-checks", "unit"} <= set(test_steps), test_steps
    assert all("STAMP" in rules[step] or "install" in rules[step] for step in test_steps), rules


def test_readme_links_resolve() -> None:
    """Relative links name files that exist; a reference page (``docs/reference/*.md``) is generated at build time,
    so a generator in ``docs/gen`` must write it."""
    text = README.read_text(encoding="utf-8")
    generators = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "gen").glob("*.py"))
    links = [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if not re.match(r"\w+://", t)]
    assert links, "README.md links into the documentation"
    for target in links:
        if target.startswith("docs/reference/"):
            page = target.removeprefix("docs/")
            assert f'"{page}"' in generators, f"{target}: no generator in docs/gen writes {page}"
        else:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_readme_has_runnable_quickstarts() -> None:
    """A Python and a command-line quickstart, both marked to be run by ``test_quickstarts``."""
    langs = {g.lang for g in groups(README)}
    assert {"python", "sh"} <= langs, langs
