"""Every test module's file name is unique under ``tests/``.

The test folders are not packages, so pytest imports each test module by its file name alone (its default
``prepend`` import mode); two modules of one name in two folders make the second fail to import ("import file
mismatch") and none of its tests run.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        where[path.name].append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in where.items() if len(paths) > 1}
