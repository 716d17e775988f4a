"""Every module of the package imports, and every name it takes from another package exists.

The compatibility matrix runs this on each Airflow line and on the floors combination (each
declared requirement at the lowest version its range allows), which is what makes a floor
in pyproject.toml true: a name added to an import that an older release lacks fails here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

import opensandbox_provider

PACKAGE = Path(opensandbox_provider.__file__).parent


# The Sandboxes view's app is a FastAPI app of Airflow 3's UI, mounted from 3.1 on
# (plugins/sandboxes.py): Airflow 2 has no FastAPI, and 3.0 resolves users another way.
VIEW_ONLY = {"opensandbox_provider.plugins._app"}
VIEW_LINE = "3.1"
# The executor is built on Airflow 3.3's executor interface; before it, its package refuses to
# load, saying so (executors/__init__.py, tests/unit/executors/test_first_line.py).
EXECUTOR_PACKAGE = "opensandbox_provider.executors"
EXECUTOR_LINE = "3.3"
# Imported by the operator's OpenLineage methods alone, and only where the openlineage
# provider is installed (it is optional).
NEEDS_LINEAGE = {"opensandbox_provider.operators._lineage"}


def modules() -> list[Any]:
    names = sorted(
        info.name for info in pkgutil.walk_packages([str(PACKAGE)], prefix="opensandbox_provider.")
    )
    view = pytest.mark.airflow_at_least(VIEW_LINE, reason="the Sandboxes view's first line")
    lineage = pytest.mark.skipif(
        importlib.util.find_spec("airflow.providers.openlineage") is None,
        reason="the openlineage provider, optional and needed by this module alone, is not "
        "installed here",
    )
    executor = pytest.mark.airflow_at_least(EXECUTOR_LINE, reason="the executor's first line")
    marks = (
        {name: view for name in VIEW_ONLY}
        | {name: lineage for name in NEEDS_LINEAGE}
        | {name: executor for name in names if _in_the_executor(name)}
    )
    return [pytest.param(name, marks=marks[name]) if name in marks else name for name in names]


def _in_the_executor(module: str) -> bool:
    return module == EXECUTOR_PACKAGE or module.startswith(f"{EXECUTOR_PACKAGE}.")


def _guarded(tree: ast.AST) -> set[int]:
    """The ids of imports inside a ``try`` that catches ImportError: the package's choice
    between what different lines have, where a missing name is expected."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            "ImportError" in ast.unparse(handler.type or ast.Name("BaseException"))
            or "ModuleNotFoundError" in ast.unparse(handler.type or ast.Name("BaseException"))
            for handler in node.handlers
        ):
            guarded |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return guarded


def imported_names() -> list[tuple[str, str, str]]:
    """(our module, the module it imports from, the name) for each ``from x import y`` of
    Airflow or the SDK, at any depth of the module (lazy imports included), but for those
    the package guards with a ``try``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if (
                    node.module.startswith(("airflow", "opensandbox."))
                    or node.module == "opensandbox"
                ):
                    for alias in node.names:
                        found.append((str(path.relative_to(PACKAGE)), node.module, alias.name))
    return found


@pytest.mark.parametrize("module", modules())
def test_every_module_of_the_package_imports(module: str) -> None:
    importlib.import_module(module)


def _before(line: str) -> bool:
    from airflow import __version__

    return Version(Version(__version__).base_version) < Version(line)


def test_every_name_the_package_imports_from_airflow_or_the_sdk_exists() -> None:
    missing = []
    # The view's module is loaded only where the view is mounted.
    skipped = {
        f"{name.removeprefix('opensandbox_provider.').replace('.', '/')}.py" for name in VIEW_ONLY
    }
    executor = f"{EXECUTOR_PACKAGE.removeprefix('opensandbox_provider.')}/"
    for ours, module, name in imported_names():
        if ours in skipped and _before(VIEW_LINE):
            continue
        # The executor's modules are loaded only where its package does not refuse to load.
        if ours.startswith(executor) and _before(EXECUTOR_LINE):
            continue
        try:
            imported = importlib.import_module(module)
        except ImportError:
            # A module a line does not have is imported behind a try of the line's own;
            # the module test above proves the package imports all the same.
            continue
        if not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{ours}: from {module} import {name}")
    assert missing == [], "\n".join(missing)
