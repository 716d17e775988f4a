"""
The package's imports point one way, from the code that decides to the code that speaks a
protocol (docs/layout.rst): the Airflow entry points use ``sandbox/`` and ``hooks/``;
``sandbox/`` uses ``hooks/`` and the wire packages ``execd/`` and ``egress/``; ``hooks/`` uses
none of what builds on it; the shared top-level modules and the wire packages import nothing
that decides; the pure parsers import nothing of ours; ``executors/``, an entry point Airflow
loads by its path, is imported by nothing of ours; nothing in ``src/`` imports ``dev/`` or
``tests/``. The checker reads the source with :mod:`ast`, so a violation is found without
importing anything, including one hidden in a function body or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "opensandbox_provider"

# The subpackages that decide, which the wire packages must not import.
DECIDING = (
    "sandbox",
    "operators",
    "triggers",
    "decorators",
    "plugins",
    "pool",
    "hooks",
    "maintenance",
    "executors",
)
WIRE = ("execd", "egress")
# Pure parsers: no I/O, so they need nothing of ours.
PARSERS = ("execd._chunked", "execd._events")
# The Airflow entry points build on these and the package's shared top-level modules only. The
# wire packages are among them because the trigger follows a background command over execd's
# wire itself: it runs in the triggerer, which holds no backend, and the operator reads the
# files that command leaves by the same names.
ENTRY_POINTS = ("operators", "triggers", "decorators", "plugins", "maintenance", "executors")
ENTRY_POINTS_MAY_USE = ("sandbox", "hooks", "pool", *WIRE, *ENTRY_POINTS)
# The executor is loaded by the scheduler and the api-server alone, by its path in Airflow's
# configuration: nothing of the package imports it, so a task never pulls in executor code.
IMPORTED_BY_NOTHING = ("executors",)
# The backend and the pool keeper hold a hook, so a hook importing them would point back; what a
# hook reads in sandbox metadata (tags, the task instance) is in the shared top-level modules.
BUILT_ON_HOOKS = ("sandbox", "pool", *ENTRY_POINTS)
OUTSIDE = ("dev", "tests", "benchmarks", "system_tests")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module ``module`` imports, absolute, with ``from X import y`` giving ``X.y``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(root: Path) -> list[str]:
    """Each import in the tree under ``root`` that points the wrong way, as a sentence."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(root, path)
        if not _within(module, PACKAGE):
            continue
        local = module[len(PACKAGE) + 1 :]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in sorted(imported(tree, module, path.name == "__init__.py")):
            if any(_within(name, outside) for outside in OUTSIDE):
                found.append(f"{module} imports {name}, outside src/")
                continue
            if not _within(name, PACKAGE) or name == PACKAGE:
                continue
            target = name[len(PACKAGE) + 1 :]
            if any(
                _within(target, kept) and not _within(local, kept) for kept in IMPORTED_BY_NOTHING
            ):
                found.append(f"{module} imports {name}, which only Airflow's loader may import")
            elif any(_within(local, parser) for parser in PARSERS):
                found.append(f"{module} is a pure parser but imports {name}")
            elif any(_within(local, wire) for wire in WIRE):
                if any(_within(target, deciding) for deciding in DECIDING):
                    found.append(f"{module} speaks a protocol but imports {name}, which decides")
            elif any(_within(local, entry) for entry in ENTRY_POINTS):
                top = target.split(".")[0]
                if not top.startswith("_") and top not in ENTRY_POINTS_MAY_USE:
                    found.append(f"{module} is an Airflow entry point but imports {name}")
            elif _within(local, "hooks"):
                if any(_within(target, above) for above in BUILT_ON_HOOKS):
                    found.append(f"{module} is a hook but imports {name}, which builds on hooks")
            elif local.startswith("_"):
                if any(_within(target, deciding) for deciding in DECIDING):
                    found.append(
                        f"{module} is shared by every layer but imports {name}, which decides"
                    )
            elif _within(local, "sandbox"):
                if any(_within(target, entry) for entry in ENTRY_POINTS):
                    found.append(f"{module} imports the entry point {name}")
    return found


def test_the_package_imports_point_one_way() -> None:
    assert violations(SRC) == []


def test_the_wire_packages_exist_and_hold_the_protocol() -> None:
    # The checker passes vacuously on an empty package, so the layers it guards must be there.
    package = SRC / PACKAGE
    for wire, module in (("execd", "_execd.py"), ("execd", "_http.py"), ("egress", "_policy.py")):
        assert (package / wire / module).is_file()
    assert (package / "sandbox" / "backend.py").is_file()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for directory in {p.parent for p in tmp_path.rglob("*.py")}:
        (directory / "__init__.py").touch()
    return tmp_path


CLEAN = {
    f"{PACKAGE}/execd/_http.py": f"from {PACKAGE}._errors import ErrorAnswer\n",
    f"{PACKAGE}/execd/_chunked.py": "import httpx\n",
    f"{PACKAGE}/sandbox/backend.py": f"from {PACKAGE}.execd import _http\n",
    f"{PACKAGE}/operators/op.py": f"from {PACKAGE}.sandbox.backend import Backend\n",
}


@pytest.mark.parametrize(
    ("relative", "text", "said"),
    [
        (
            f"{PACKAGE}/execd/_client.py",
            "def f():\n    from opensandbox_provider.sandbox import _outcome\n",
            "speaks a protocol but imports opensandbox_provider.sandbox._outcome",
        ),
        (
            f"{PACKAGE}/egress/_policy.py",
            "from ..pool._definition import WarmPool\n",
            "speaks a protocol but imports opensandbox_provider.pool._definition",
        ),
        (
            f"{PACKAGE}/execd/_events.py",
            "from opensandbox_provider import _errors\n",
            "is a pure parser but imports opensandbox_provider._errors",
        ),
        (
            f"{PACKAGE}/operators/op.py",
            "from opensandbox_provider.dag_processing import parse\n",
            "is an Airflow entry point but imports opensandbox_provider.dag_processing",
        ),
        (
            f"{PACKAGE}/sandbox/_files.py",
            "from opensandbox_provider.operators import op\n",
            "imports the entry point opensandbox_provider.operators",
        ),
        (
            f"{PACKAGE}/hooks/_sandboxes.py",
            "from opensandbox_provider.sandbox._lifecycle import ENDED_STATES\n",
            "is a hook but imports opensandbox_provider.sandbox._lifecycle, which builds on hooks",
        ),
        (
            f"{PACKAGE}/_identity.py",
            "def f():\n    from opensandbox_provider.sandbox import _volumes\n",
            "is shared by every layer but imports opensandbox_provider.sandbox, which decides",
        ),
        (
            f"{PACKAGE}/_clients.py",
            "from tests.unit import helper\n",
            "imports tests.unit, outside src/",
        ),
        (
            f"{PACKAGE}/operators/op.py",
            "from opensandbox_provider.executors import OpenSandboxExecutor\n",
            "imports opensandbox_provider.executors.OpenSandboxExecutor, which only Airflow's "
            "loader may import",
        ),
    ],
)
def test_the_checker_finds_a_planted_violation(
    tmp_path: Path, relative: str, text: str, said: str
) -> None:
    root = _tree(tmp_path, {**CLEAN, relative: text})
    found = violations(root)
    assert any(said in sentence for sentence in found), found


def test_the_checker_passes_a_clean_tree(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, CLEAN)) == []
