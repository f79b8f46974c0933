"""A Griffe extension for the Python API page: Sphinx cross-reference roles in docstrings shown as code.

Why: a few docstrings name other objects the Sphinx way (``:class:`Model```, ``:data:`PARAMS```). mkdocstrings
renders docstrings as Markdown, where such a role would show its ``:class:`` prefix literally; the object's name
as code reads as the author meant.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const|ref):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
