"""Every Python example in the docs is included from a file the tests parse or run.

An example written only in a page is never run, so nothing notices when it stops working:
an import it lacks, an argument that was renamed. So a page shows Python only through
``literalinclude`` of a file under ``docs/examples/`` (which tests/docs/test_examples.py
parses, imports and partly runs) or ``system_tests/`` (the system-test Dags), and a Python
block written in the page is a warning, which ``make docs`` (``-W``) turns into a failure.
The README, which the package index renders without ``literalinclude``, holds copies that
tests/docs/test_readme.py compares with the files.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
# Pygments' names for Python, and the highlighter's for a block that names no language: Sphinx
# highlights that as Python when it parses as Python.
PYTHON = {"python", "python3", "py", "py3", "pycon", "ipython", "ipython3"}
UNNAMED = {"default", ""}
# Where an included example may come from, relative to the docs' own folder.
TESTED_FOLDERS = ("examples", "../system_tests")


def is_python(language: str, text: str) -> bool:
    """Whether a literal block in ``language`` (as the page or the highlighter names it) holds
    Python; a block that names none does when it parses as Python."""
    if language.lower() in PYTHON:
        return True
    if language.lower() not in UNNAMED:
        return False
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _included_from(block: nodes.literal_block) -> Path | None:
    # literalinclude records the file it read; a block written in the page has none.
    source = block.get("source")
    return Path(source).resolve() if source else None


def _tested(path: Path, docs: Path) -> bool:
    return any(path.is_relative_to((docs / folder).resolve()) for folder in TESTED_FOLDERS)


def check_python_blocks(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    docs = Path(app.confdir)
    for block in doctree.findall(nodes.literal_block):
        # After the post-transforms, each block has the language it is highlighted in.
        if not is_python(block.get("language", ""), block.astext()):
            continue
        path = _included_from(block)
        if path is None:
            LOGGER.warning(
                "A Python example written in the page is never run. Put it in a file under "
                "docs/examples/ between [START name] and [END name] markers, where "
                "tests/docs/test_examples.py parses or runs it, and include it with "
                "literalinclude.",
                location=block,
            )
        elif not _tested(path, docs):
            LOGGER.warning(
                f"A Python example is included from {path.name}, which no test parses or runs. "
                "Move it under docs/examples/ (or system_tests/ for a system-test Dag).",
                location=block,
            )


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", check_python_blocks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
