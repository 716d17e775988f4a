"""How the package raises, checked in its source: no exception is raised as its own cause."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src"


def raised_as_their_own_cause(tree: ast.AST) -> list[int]:
    """The lines of ``raise x from x``: the traceback would show the error causing itself."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and node.exc is not None
        and node.cause is not None
        and ast.dump(node.exc) == ast.dump(node.cause)
    ]


def test_the_check_finds_an_exception_raised_as_its_own_cause() -> None:
    tree = ast.parse("try:\n    pass\nexcept Exception as e:\n    raise e from e\n")
    assert raised_as_their_own_cause(tree) == [4]
    assert raised_as_their_own_cause(ast.parse("raise Other() from e\n")) == []


@pytest.mark.parametrize(
    "path", sorted(SOURCE.rglob("*.py")), ids=lambda path: str(path.relative_to(SOURCE))
)
def test_no_exception_is_raised_as_its_own_cause(path: Path) -> None:
    lines = raised_as_their_own_cause(ast.parse(path.read_text(), str(path)))
    assert not lines, f"{path.relative_to(SOURCE)} raises an exception from itself on {lines}"
