"""Every reference in the repository can be followed by a reader of the repository.

Comments once cited section numbers of a research note that is not in the repository, and
goals by issue number; a reader could follow neither. Wire facts now live in the docs page
on execd's wire, and comments point at its sections as ``(docs/execd-wire.rst, <label>)``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WIRE_PAGE = REPO / "docs" / "execd-wire.rst"
TREES = ("src", "tests", "dev", "benchmarks", "system_tests", "docs")
TEXT_SUFFIXES = {".py", ".rst", ".sh", ".toml", ".Dockerfile"}

# Built from pieces so that this file does not match itself.
UNFOLLOWABLE = {
    "the research note's name": re.compile("execd-" + "behaviour"),
    "a section sign": re.compile("\N{SECTION SIGN}"),
    "an issue number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
}
# A pointer names one or more labels after the page; in a docstring the list may wrap, in a
# comment the next line starts with "#".
POINTER = re.compile(r"execd-wire\.rst, ((?:[\w-]+)(?:,\s+(?:#\s*)?[\w-]+)*)")
LABEL = re.compile(r"^\.\. _([\w-]+):\s*$", re.MULTILINE)


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *TREES, "Makefile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = [REPO / name for name in listed.split("\0") if name]
    return [
        path
        for path in paths
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name == "Makefile")
    ]


def test_no_file_cites_a_note_outside_the_repository_or_an_issue_number() -> None:
    files = _tracked_text_files()
    assert files, "git lists no files to check"
    found = [
        f"{path.relative_to(REPO)}:{number}: {what}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for what, pattern in UNFOLLOWABLE.items()
        if pattern.search(line)
    ]
    assert found == []


def test_every_pointer_to_the_wire_page_names_a_label_it_defines() -> None:
    labels = set(LABEL.findall(WIRE_PAGE.read_text()))
    assert labels, "docs/execd-wire.rst defines no label"
    pointers = [
        (path, match)
        for path in _tracked_text_files()
        if path != WIRE_PAGE
        for match in POINTER.finditer(path.read_text(errors="replace"))
    ]
    # The stand-ins alone carry well over a hundred; a regex that stopped matching would
    # otherwise pass this test with nothing checked.
    assert len(pointers) > 100
    unknown = [
        f"{path.relative_to(REPO)}: {name}"
        for path, match in pointers
        for name in re.split(r",\s+(?:#\s*)?", match.group(1))
        if name not in labels
    ]
    assert unknown == []


def test_every_mention_of_the_wire_page_in_code_is_a_pointer() -> None:
    # A pointer that lost its label, or wraps between the page and the label, points nowhere.
    loose = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _tracked_text_files()
        if path.suffix != ".rst" and path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for mention in re.finditer(r"execd-wire\.rst", line)
        if not POINTER.match(line, mention.start())
    ]
    assert loose == []
