"""
The package's imports point one way, from the code that decides to the code that speaks a
protocol (docs/layout.rst): the Airflow entry points use ``pool/``, ``sandbox/`` and
``hooks/``; ``pool/`` builds on ``sandbox/``, which names the pools only through its source
protocol and never imports them; ``sandbox/`` uses ``hooks/`` and the wire packages ``execd/``
and ``egress/``; ``hooks/`` uses none of what builds on it; the shared top-level modules and the
wire packages import nothing that decides; the pure parsers import nothing of ours;
``executors/``, an entry point Airflow loads by its path, is imported by nothing of ours;
``triggers/``, which runs in the triggerer, imports no sync backend;
nothing in ``src/`` imports ``dev/`` or ``tests/``. A package's private modules are its own,
but for the few another package may import, each listed below with its reason; and no two
private modules share a name. The checker reads the source with :mod:`ast`, so a violation is
found without importing anything, including one hidden in a function body or under
``TYPE_CHECKING``.
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
# The triggerer runs every deferred task's trigger on one event loop: a trigger reaches the server
# through the async lifecycle client and execd through an async client, and never through the
# backend, whose calls block and whose leases run on threads (the backend itself, or the package's
# name for it).
TRIGGERER = "triggers"
SYNC_BACKEND = ("sandbox.backend", "sandbox.OpenSandboxBackend")
# The executor is loaded by the scheduler and the api-server alone, by its path in Airflow's
# configuration: nothing of the package imports it, so a task never pulls in executor code.
IMPORTED_BY_NOTHING = ("executors",)
# The backend and the pool keeper hold a hook, so a hook importing them would point back; what a
# hook reads in sandbox metadata (tags, the task instance) is in the shared top-level modules.
BUILT_ON_HOOKS = ("sandbox", "pool", *ENTRY_POINTS)
OUTSIDE = ("dev", "tests", "benchmarks", "system_tests")
# The pools build on the backend: a draw reads its creation template and lifecycle client. The
# backend takes a sandbox from them through the source protocol in sandbox/, so it never
# imports them, and the two packages never import each other both ways.
POOLS = "pool"
BUILT_ON_POOLS = ("sandbox", *WIRE, "hooks")
# A private module that another package of ours may import, and which packages: each with why
# it is not public and not the importer's own.
SHARED_PRIVATE = {
    # The wire: the protocol packages' clients and parsers, which the deciding layers drive;
    # private because no user calls them.
    "execd._http": (("egress", "sandbox"), "the one request path to a sandbox's services"),
    "execd._deadline": (
        ("_clients", "_transport", "egress", "sandbox"),
        "the whole-call deadline every socket of ours carries",
    ),
    "execd._chunked": (("_exchange",), "the chunked-body parser an exchange reads with"),
    "execd._execd": (("sandbox",), "the execd client the backend drives"),
    "execd._events": (("sandbox", "triggers"), "a command's events, read by both that follow one"),
    "execd._stream_end": (("sandbox",), "how a command's stream ended"),
    "execd._background": (
        ("operators", "triggers"),
        "the background command the operator starts and the trigger follows",
    ),
    "execd._command_status": (("triggers",), "a background command's status, read by the trigger"),
    "execd._run_to_end": (("triggers",), "the trigger's graceful stop, run through execd"),
    "egress._policy": (
        ("operators", "pool", "sandbox"),
        "a spec's policy, checked when a Dag is parsed, compared by a pool, sent by the backend",
    ),
    # What a listing of sandboxes reads, for every view of them.
    "hooks._sandboxes": (
        ("executors", "maintenance", "operators", "plugins", "sandbox"),
        "one sandbox as a listing reads it",
    ),
    # The backend's parts the layers above it share with it, so that each is said once.
    "sandbox._arguments": (
        ("decorators", "maintenance", "pool"),
        "the checks of a backend's arguments, made when a Dag is parsed too",
    ),
    "sandbox._limits": (("operators",), "the checks of byte budgets and timeouts"),
    "sandbox._lifecycle": (
        ("maintenance", "operators", "plugins", "pool"),
        "the server's lifecycle client and states, and the one way a sandbox is destroyed",
    ),
    "sandbox._async_lifecycle": (("triggers",), "the lifecycle client the triggerer awaits"),
    "sandbox._lease": (("triggers",), "the renewals a deferred task's sandbox still gets"),
    "sandbox._outcome": (("triggers",), "a command's end as its result"),
    "sandbox._snapshots": (("decorators", "maintenance"), "prepared snapshots, found by name"),
    "sandbox._snapshot_use": (("maintenance",), "which snapshots a sandbox uses"),
    "sandbox._template": (("pool",), "the creation template a pool takes a sandbox by"),
    "sandbox._creation": (("pool",), "the create's request timeout and limits a pool shares"),
    "sandbox._registry": (("pool",), "the image's registry login, which a keeper pulls with"),
    "sandbox._resources": (("pool",), "the resource checks a pool's definition makes"),
    "sandbox._volumes": (("pool",), "the volumes a pool's sandboxes mount"),
    # The entry points' parts that another entry point shares.
    "operators._files": (("decorators",), "the files checks the decorator makes when parsed"),
    "operators._stop": (("triggers",), "how a running command is stopped"),
    "operators._command_end": (
        ("triggers",),
        "how a command ended, which the trigger's event carries to the operator",
    ),
}


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


def _private_module(target: str) -> str | None:
    """``package._module`` when ``target`` is in a subpackage's private module, else ``None``."""
    parts = target.split(".")
    if len(parts) < 2 or parts[0].startswith("_"):
        return None
    if parts[1].startswith("_") and not parts[1].startswith("__"):
        return ".".join(parts[:2])
    return None


def _foreign_private(local: str, is_package: bool, target: str) -> str | None:
    """A sentence when ``local`` imports another package's private module unlisted."""
    private = _private_module(target)
    if private is None:
        return None
    home = local.split(".")[0] if ("." in local or is_package) else local
    owner = private.split(".")[0]
    if home == owner:
        return None
    importers, _why = SHARED_PRIVATE.get(private, ((), ""))
    if home in importers:
        return None
    return f"imports {private}, a private module of {owner}/ not listed as shared with {home}"


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
            foreign = _foreign_private(local, path.name == "__init__.py", target)
            if foreign is not None:
                found.append(f"{module} {foreign}")
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
                elif _within(local, TRIGGERER) and any(
                    _within(target, backend) for backend in SYNC_BACKEND
                ):
                    found.append(
                        f"{module} runs in the triggerer but imports {name}, a sync backend"
                    )
            elif _within(local, "hooks"):
                if any(_within(target, above) for above in BUILT_ON_HOOKS):
                    found.append(f"{module} is a hook but imports {name}, which builds on hooks")
            elif local.startswith("_"):
                if any(_within(target, deciding) for deciding in DECIDING):
                    found.append(
                        f"{module} is shared by every layer but imports {name}, which decides"
                    )
            elif _within(local, POOLS):
                if any(_within(target, entry) for entry in ENTRY_POINTS):
                    found.append(f"{module} imports the entry point {name}")
            elif _within(local, "sandbox"):
                if any(_within(target, entry) for entry in ENTRY_POINTS):
                    found.append(f"{module} imports the entry point {name}")
                elif _within(target, POOLS):
                    found.append(f"{module} imports {name}, which builds on the backend")
    return found


def repeated_private_names(root: Path) -> list[str]:
    """Each private module name that more than one module in the tree has, as a sentence."""
    where: dict[str, list[str]] = {}
    for path in sorted(root.rglob("_*.py")):
        if path.name.startswith("__"):
            continue
        where.setdefault(path.stem, []).append(module_name(root, path))
    return [
        f"{name} names {len(modules)} modules: {', '.join(modules)}"
        for name, modules in sorted(where.items())
        if len(modules) > 1
    ]


def test_the_package_imports_point_one_way() -> None:
    assert violations(SRC) == []


def test_no_two_private_modules_share_a_name() -> None:
    # A name says which module it is wherever it is read: in a traceback, a log's logger
    # name, an import.
    assert repeated_private_names(SRC) == []


def test_each_shared_private_module_is_still_shared() -> None:
    # An entry that nothing needs any more would let a new import in unnoticed.
    used: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = module_name(SRC, path)
        local = module[len(PACKAGE) + 1 :]
        is_package = path.name == "__init__.py"
        home = local.split(".")[0] if ("." in local or is_package) else local
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in imported(tree, module, is_package):
            if not _within(name, PACKAGE) or name == PACKAGE:
                continue
            private = _private_module(name[len(PACKAGE) + 1 :])
            if private is not None and private.split(".")[0] != home:
                used.setdefault(private, set()).add(home)
    assert {private: set(importers) for private, (importers, _) in SHARED_PRIVATE.items()} == used


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
            f"{PACKAGE}/sandbox/_creation.py",
            "from opensandbox_provider.pool import ServerPool\n",
            "imports opensandbox_provider.pool.ServerPool, which builds on the backend",
        ),
        (
            f"{PACKAGE}/sandbox/backend.py",
            "def f():\n    from opensandbox_provider.pool._definition import WarmPool\n",
            "imports opensandbox_provider.pool._definition, which builds on the backend",
        ),
        (
            f"{PACKAGE}/pool/_keeper.py",
            "from opensandbox_provider.operators.op import Operator\n",
            "imports the entry point opensandbox_provider.operators",
        ),
        (
            f"{PACKAGE}/operators/op.py",
            "from opensandbox_provider.sandbox._record import SandboxRecord\n",
            "imports sandbox._record, a private module of sandbox/ not listed as shared with "
            "operators",
        ),
        (
            f"{PACKAGE}/triggers/trigger.py",
            "if TYPE_CHECKING:\n    from opensandbox_provider.sandbox.backend import Backend\n",
            "runs in the triggerer but imports opensandbox_provider.sandbox.backend.Backend",
        ),
        (
            f"{PACKAGE}/triggers/trigger.py",
            "from opensandbox_provider.sandbox import OpenSandboxBackend\n",
            "runs in the triggerer but imports opensandbox_provider.sandbox.OpenSandboxBackend",
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
    assert repeated_private_names(_tree(tmp_path, CLEAN)) == []


def test_the_checker_finds_a_private_name_given_twice(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**CLEAN, f"{PACKAGE}/sandbox/_http.py": ""})
    assert repeated_private_names(root) == [
        f"_http names 2 modules: {PACKAGE}.execd._http, {PACKAGE}.sandbox._http"
    ]
