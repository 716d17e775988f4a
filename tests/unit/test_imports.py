"""The provider imports nothing another package keeps private, so no upstream release can break it
by renaming one: what it needs from common-ai's or the SDK's internals, it restates."""

from __future__ import annotations

import ast
import functools
import importlib.util
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


# -- Private attributes ---------------------------------------------------------------------
#
# Importing only public names is not enough: an object httpx, httpcore, h11 or the SDK hands
# out can still be read through its private attributes (``pool._network_backend``,
# ``transport._ssl_context``), and a release that renames one breaks the reader silently. So
# every private name those packages use in their own source (a leading underscore: an
# attribute they set or read, a method or class they define) is gathered from the installed
# packages with ast, and a use of such a name in src/ is a reach: ``x._name``, and ``getattr``,
# ``setattr``, ``hasattr`` or ``delattr`` with the name as a literal. Through ``self`` or
# ``cls`` it is a reach only in a class built on one of theirs that does not set the name
# itself (``self._owns_transport`` in a subclass of the SDK's config). A private name only our
# code spells is ours, and a name built at run time is not seen.

FOREIGN = ("httpx", "httpcore", "h11", "opensandbox")
_BY_NAME = ("getattr", "setattr", "hasattr", "delattr")


@functools.cache
def foreign_private_names() -> frozenset[str]:
    """Every private name the installed httpx, httpcore, h11 and SDK use in their source."""
    names: set[str] = set()
    for package in FOREIGN:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.origin is not None, f"{package} is not installed"
        for path in Path(spec.origin).parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute):
                    names.add(node.attr)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
    return frozenset(name for name in names if _is_private(name))


def _foreign_bound(tree: ast.AST) -> set[str]:
    """The names a module binds to one of those packages or something imported from them."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] in FOREIGN
            }
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FOREIGN:
            bound |= {alias.asname or alias.name for alias in node.names}
    return bound


def _builds_on_theirs(cls: ast.ClassDef, bound: set[str]) -> bool:
    return any(isinstance(root := _root(base), ast.Name) and root.id in bound for base in cls.bases)


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _set_on_self(cls: ast.ClassDef) -> set[str]:
    """The attributes a class of ours defines or sets on itself."""
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def private_reads(source: str, private: frozenset[str]) -> list[str]:
    """Each use in ``source`` of one of the names ``private`` holds, as ``line: object.name``."""
    tree = ast.parse(source)
    bound = _foreign_bound(tree)
    found = []

    def visit(node: ast.AST, theirs_but: set[str] | None) -> None:
        # ``theirs_but``: inside a class built on theirs, the names it sets itself.
        if isinstance(node, ast.ClassDef):
            theirs_but = _set_on_self(node) if _builds_on_theirs(node, bound) else None
        used = None
        if isinstance(node, ast.Attribute):
            used = (node.value, node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _BY_NAME
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            used = (node.args[0], node.args[1].value)
        if used is not None and used[1] in private:
            owner, name = used
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if not own or (theirs_but is not None and name not in theirs_but):
                found.append(f"{node.lineno}: {ast.unparse(owner)}.{name}")
        for child in ast.iter_child_nodes(node):
            visit(child, theirs_but)

    visit(tree, None)
    return found


PLANTED = frozenset({"_network_backend", "_ssl_context", "_owns_transport", "_pool", "_stream"})


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("pool._network_backend = backend", "pool._network_backend"),
        ("context = getattr(transport, '_ssl_context', None)", "transport._ssl_context"),
        ("def f(s):\n    return s._stream._pool", "s._stream"),
        (
            "from opensandbox.config.connection_sync import ConnectionConfigSync\n"
            "class C(ConnectionConfigSync):\n"
            "    def f(self):\n        return self._owns_transport",
            "self._owns_transport",
        ),
        (
            "import httpx\nclass T(httpx.BaseTransport):\n"
            "    def f(self):\n        return self._pool",
            "self._pool",
        ),
    ],
)
def test_the_check_finds_a_planted_private_read(source: str, said: str) -> None:
    assert any(said in read for read in private_reads(source, PLANTED))


@pytest.mark.parametrize(
    "source",
    [
        "import httpx\nclass T(httpx.BaseTransport):\n"
        "    def __init__(self, pool):\n        self._pool = pool\n"
        "    def f(self):\n        return self._pool",
        "class Ours:\n    def f(self):\n        return self._stream",
        "def f(backend):\n    return backend._lifecycle",
        "def f(response):\n    return response.extensions['network_stream']",
    ],
)
def test_the_check_passes_our_own_private_attributes(source: str) -> None:
    assert private_reads(source, PLANTED) == []


def test_the_installed_packages_private_names_include_the_ones_once_reached_for() -> None:
    # The check is only as good as the names it gathers.
    assert {"_network_backend", "_ssl_context", "_h11_state"} <= foreign_private_names()


def test_the_provider_reads_no_private_attribute_of_httpx_httpcore_h11_or_the_sdk() -> None:
    private = foreign_private_names()
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{read}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for read in private_reads(path.read_text(encoding="utf-8"), private)
    ]
    assert found == [], (
        "These read another package's private attributes; use its public API instead:\n"
        + "\n".join(found)
    )
