"""The documentation site builds with every warning an error, its generated reference pages hold what they are
generated from, and no page loads anything from another host (the site must work offline)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import ROOT

LOADS = re.compile(r"<(?:script|img|iframe)[^>]*\bsrc=\"([^\"]+)\"|<link[^>]*\bhref=\"([^\"]+)\"")
"""What a page makes the browser load: scripts, images, frames, style sheets and icons."""


@pytest.mark.slow
def test_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    def page(name: str) -> str:
        return (site / name / "index.html").read_text(encoding="utf-8")

    cli = page("reference/cli")
    for command in ("simulate", "train", "node", "audit", "serve", "demo", "devnet up", "predict", "export"):
        assert f"fgbdt {command}" in cli, command
    assert "--voted-trees" in cli and "--epsilon" in cli
    rest = page("reference/rest")
    assert "POST /v1/tasks" in rest and "GET /v1/tasks/{task_id}/contributions" in rest
    assert 'id="model-createtaskrequest"' in rest
    contracts = page("reference/contracts")
    assert "createTask" in contracts and "FGBDTForwarder" in contracts and "The new task" in contracts
    python = page("reference/python")
    assert "fgbdt_chain.node.sim.engine.train" in python and "FGBDTClassifier" in python
    assert ":class:" not in python and ":data:" not in python  # Sphinx roles shown as code (docs/gen/sphinx_roles.py)
    assert "<table>" in page("reference/parameters")
    assert not (site / "gen").exists(), "the generators are not pages"

    for html in site.rglob("*.html"):
        for url in (a or b for a, b in LOADS.findall(html.read_text(encoding="utf-8"))):
            assert not re.match(r"(?:https?:)?//", url), f"{html.relative_to(site)} loads {url} from another host"
