"""Reading ``python -X importtime``: one line per import, nested by two spaces per level."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "import time:"


@dataclass(frozen=True)
class Imported:
    name: str
    depth: int
    cumulative_us: int


def imports(stderr: str) -> list[Imported]:
    """Each import the interpreter timed, in the order it finished."""
    found = []
    for line in stderr.splitlines():
        if not line.startswith(PREFIX):
            continue
        _, cumulative, column = line[len(PREFIX) :].split("|", 2)
        if not cumulative.strip().isdigit():
            continue  # the header line
        name = column[1:]  # one space follows the bar; the rest is the nesting
        depth = (len(name) - len(name.lstrip(" "))) // 2
        found.append(Imported(name.strip(), depth, int(cumulative)))
    return found


def seconds_after(stderr: str, first: str) -> float:
    """The cumulative time of the top-level imports that follow the top-level import of
    ``first``: what the statements after ``import first`` cost a process that had it already."""
    top = [entry for entry in imports(stderr) if entry.depth == 0]
    names = [entry.name for entry in top]
    assert first in names, f"{first} was not imported at the top level"
    return sum(entry.cumulative_us for entry in top[names.index(first) + 1 :]) / 1e6


def top_level_seconds(stderr: str) -> float:
    """The cumulative time of every top-level import, the interpreter's own start-up included."""
    return sum(entry.cumulative_us for entry in imports(stderr) if entry.depth == 0) / 1e6
