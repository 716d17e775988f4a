"""The README renders as valid reStructuredText, and its Python is a copy of a tested example.

The package index renders the README without Sphinx, so it cannot include an example from a
file as the docs do; it holds a copy of one region of docs/examples/ instead, and this checks
the copy, while tests/docs/test_examples.py parses the file in Airflow.
"""

from __future__ import annotations

import difflib
import re
import sys
import textwrap
from pathlib import Path

import docutils.core
import docutils.utils
from docutils import nodes

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.rst"
EXAMPLES = REPO / "docs" / "examples"
REGION = re.compile(r"^[ \t]*# \[START (\w+)\]\n(.*?)^[ \t]*# \[END \1\]", re.MULTILINE | re.DOTALL)

sys.path.insert(0, str(REPO / "docs" / "_ext"))
import python_examples  # noqa: E402  (docs/_ext holds Sphinx extensions, not a package)


def _regions() -> dict[str, str]:
    """Each marked region of docs/examples/, dedented as the docs include it, by file and name."""
    return {
        f"{path.name} [{name}]": textwrap.dedent(text).strip("\n")
        for path in sorted(EXAMPLES.glob("*.py"))
        for name, text in REGION.findall(path.read_text())
    }


def _python_blocks(source: str) -> list[nodes.literal_block]:
    doctree = docutils.core.publish_doctree(source, settings_overrides={"report_level": 5})
    # docutils names a code block's language in its classes, after "code"; a literal block
    # (``::``) names none.
    return [
        block
        for block in doctree.findall(nodes.literal_block)
        if python_examples.is_python(
            next((name for name in block["classes"] if name != "code"), ""), block.astext()
        )
    ]


def test_the_readme_renders_without_warnings() -> None:
    # The package index refuses a long description that does not render; warnings start that.
    docutils.core.publish_doctree(
        README.read_text(), settings_overrides={"halt_level": docutils.utils.Reporter.WARNING_LEVEL}
    )


def test_every_python_block_of_the_readme_is_a_copy_of_a_tested_example() -> None:
    regions = _regions()
    blocks = _python_blocks(README.read_text())
    assert blocks, "the README shows no Python, so this proves nothing"
    for block in blocks:
        text = block.astext().strip("\n")
        if text in regions.values():
            continue
        closest = max(
            regions, key=lambda name: difflib.SequenceMatcher(None, regions[name], text).ratio()
        )
        difference = "\n".join(
            difflib.unified_diff(
                regions[closest].splitlines(), text.splitlines(), closest, "README.rst", lineterm=""
            )
        )
        raise AssertionError(
            f"README.rst's Python block that begins {text.splitlines()[0]!r} is no copy of a "
            "region of docs/examples/, so no test runs it. Put the example in a file there between "
            "[START name] and [END name] markers and paste the region into the README "
            f"unchanged. The nearest region is {closest}:\n{difference}"
        )


def test_a_python_block_the_examples_do_not_hold_is_found_in_either_form() -> None:
    # The check above, on blocks of both forms, and a shell block it must leave alone.
    page = (
        "Title\n=====\n\n.. code-block:: python\n\n    print('written here')\n\n"
        "Also::\n\n    import os\n\n.. code-block:: bash\n\n    make docs\n\n"
        "Log::\n\n    Destroyed sandbox a42f0650.\n"
    )
    assert [block.astext() for block in _python_blocks(page)] == [
        "print('written here')",
        "import os",
    ]
