"""The provider imports nothing another package keeps private, so no upstream release can break it
by renaming one: what it needs from common-ai's or the SDK's internals, it restates."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import opensandbox_provider

PACKAGE = Path(opensandbox_provider.__file__).parent
OURS = "opensandbox_provider"
# Internal without an underscore: the SDK's adapter layer, behind the sandbox and manager
# classes its documentation teaches, and not described there.
INTERNAL_MODULES = ("opensandbox.adapters",)


def _is_private(name: str) -> bool:
    # ``__future__`` and ``__version__`` lead with an underscore but are public by convention.
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_private_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] != OURS and (
        any(_is_private(part) for part in parts)
        or any(module == m or module.startswith(m + ".") for m in INTERNAL_MODULES)
    )


def private_imports(source: str) -> list[str]:
    """Each import in ``source`` of another package's private module or name, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"import {alias.name}" for alias in node.names if _is_private_module(alias.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # A name imported from a module is as private as a module of that name would be.
            found += [
                f"from {node.module} import {alias.name}"
                for alias in node.names
                if _is_private_module(f"{node.module}.{alias.name}")
            ]
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from airflow.providers.common.ai.sandbox.base import _export_deadline",
        "from opensandbox._httpx import client",
        "from httpx._transports.default import HTTPTransport",
        "import httpcore._sync.connection",
        "import h11._state as state",
        "def f():\n    from opensandbox.transport import _decision",
        "if TYPE_CHECKING:\n    from httpx import _types",
        "from opensandbox.adapters.converter.exception_converter import ExceptionConverter",
        "import opensandbox.adapters",
        "from opensandbox import adapters",
    ],
)
def test_the_check_finds_a_private_import_wherever_it_is_written(source: str) -> None:
    assert private_imports(source)


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "from opensandbox_provider.execd._events import EventParser",
        "from opensandbox_provider.egress import _policy",
        "from opensandbox_provider.sandbox import _pause, _tags",
        "import opensandbox_provider._sdk",
        "from . import _tags",
        "from opensandbox import __version__",
        "from opensandbox.transport import unwrap_retry_transport",
    ],
)
def test_the_check_passes_our_own_private_modules_and_public_names(source: str) -> None:
    assert private_imports(source) == []


def test_the_provider_imports_no_private_name_or_module_of_another_package() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert sources, f"no Python files found under {PACKAGE}"
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {statement}"
        for path in sources
        for statement in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "Restate these in a module of ours instead:\n" + "\n".join(found)
