"""The docs build with warnings as errors, so a malformed table fails rather than vanishes.

Upstream, a malformed RST table once dropped a whole table from the rendered page without
failing anything; ``make docs`` runs Sphinx with -W so that cannot happen here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

# The grid's second row is one character short, which docutils reports as a malformed table.
MALFORMED_TABLE = """

Broken
------

+-------+-------+
| a     | b     |
+-------+-------+
| c     | d    |
+-------+-------+
"""


def _build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # The same flags as `make docs`.
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-W",
            "--keep-going",
            "-b",
            "html",
            str(source),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _project_with(tmp_path: Path, page: str) -> Path:
    # The real conf.py with one page: the whole docs are built once, by `make docs` (which
    # `make test` runs before the suite), so this proves only what -W does to a bad page.
    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    shutil.copytree(DOCS / "_ext", source / "_ext")
    probe = "Probe\n=====\n\nA page built with the docs' own configuration.\n"
    (source / "index.rst").write_text(probe + page)
    return source


def test_a_well_formed_page_builds_under_the_docs_flags(tmp_path: Path) -> None:
    result = _build(_project_with(tmp_path, ""), tmp_path / "html")
    assert result.returncode == 0, result.stderr


def test_a_malformed_table_fails_the_docs_build(tmp_path: Path) -> None:
    result = _build(_project_with(tmp_path, MALFORMED_TABLE), tmp_path / "html")
    assert result.returncode != 0
    assert "Malformed table" in result.stderr


def test_every_test_the_docs_cite_exists() -> None:
    # The claims table's rows are in claims.toml; the page's other sections cite tests too.
    text = (DOCS / "verification.rst").read_text() + (DOCS / "claims.toml").read_text()
    for path in re.findall(r"``(tests/[\w/]+\.py)``", text):
        assert (REPO / path).is_file(), f"the docs cite {path}, which does not exist"
    cited = set(re.findall(r"``(test_\w+)``", text))
    defined = {
        name
        for path in (REPO / "tests").rglob("test_*.py")
        for name in re.findall(r"^\s*def (test_\w+)", path.read_text(), re.MULTILINE)
    }
    assert cited, "verification.rst and claims.toml cite no test"
    assert sorted(cited - defined) == []
