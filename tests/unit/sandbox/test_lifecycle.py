"""
Every sandbox the package destroys goes one way: the lifecycle client's kill
(``sandbox/_lifecycle.py``), or in the triggerer its async twin's (``_async_lifecycle.py``),
which judge a sandbox the server no longer has as destroyed and log which, once. The server's
kill is called nowhere else in ``src/`` but in the hook's public ``kill_sandbox``, kept for
users' own code and called by nothing of ours. The check reads the source with :mod:`ast`, and
is checked itself on a small tree with a violation planted.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "opensandbox_provider"
# Where the server's kill may be named: the one way, its async twin, and the hook's own method.
KILLERS = {"sandbox/_lifecycle.py", "sandbox/_async_lifecycle.py", "hooks/opensandbox.py"}
# The server's kill, as the SDK's managers and the hook name it.
SERVER_KILLS = {"kill_sandbox"}


def kills_outside_the_one_way(package: Path) -> list[str]:
    """Each use of the server's kill outside :data:`KILLERS`, and each call of the hook's
    ``kill_sandbox`` anywhere, as ``path:line``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SERVER_KILLS:
                # The manager's and the hook's alike: outside KILLERS, neither is named.
                if relative not in KILLERS:
                    found.append(f"{relative}:{node.lineno}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "kill"
                and not node.args
                and relative not in KILLERS
            ):
                # An SDK sandbox handle's own kill(), which takes no sandbox: the lifecycle
                # clients' take one.
                found.append(f"{relative}:{node.lineno}")
    return sorted(found)


def test_every_kill_of_a_sandbox_goes_through_the_lifecycle_client() -> None:
    assert kills_outside_the_one_way(SRC) == []


def test_the_check_finds_a_kill_planted_outside_the_one_way(tmp_path: Path) -> None:
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "operators").mkdir()
    (tmp_path / "sandbox" / "_lifecycle.py").write_text("def kill(m, s):\n    m.kill_sandbox(s)\n")
    (tmp_path / "operators" / "stop.py").write_text(
        "def stop(hook, sdk, lifecycle, s):\n"
        "    lifecycle.kill(s)\n"
        "    hook.kill_sandbox(s)\n"
        "    sdk.kill()\n"
    )
    assert kills_outside_the_one_way(tmp_path) == ["operators/stop.py:3", "operators/stop.py:4"]
