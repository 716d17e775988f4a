"""What in a sandbox's metadata would give a secret away: the value itself, or a hex digest
of it or of a text holding it (a fingerprint or a name is often such a digest cut short).

Every holder of the server's API key reads a sandbox's metadata, and a digest of a short
secret can be guessed offline, so the tests of each secret read the sandbox's metadata from
the server and look for both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pytest
from opensandbox.sync.manager import SandboxManagerSync

from dev.stack.state import ServerInfo
from opensandbox_provider.sandbox import OpenSandboxBackend

ALGORITHMS = ("sha256", "sha1", "md5")
# A digest cut this short or longer is still found.
_SHORTEST_CUT = 16


def digests(*texts: str) -> dict[str, str]:
    """Each text's digest by each algorithm, keyed ``algorithm(text)``."""
    return {
        f"{algorithm}({text})": hashlib.new(algorithm, text.encode()).hexdigest()
        for text in texts
        for algorithm in ALGORITHMS
    }


def giving_away(metadata: Mapping[str, str], secret: str, *holding: str) -> list[str]:
    """
    The metadata entries whose key or value holds ``secret``, or the first hex digits of a
    digest of it or of any of the texts ``holding`` it; none, for metadata that keeps it.
    """
    marks = [secret, *(digest[:_SHORTEST_CUT] for digest in digests(secret, *holding).values())]
    return [
        f"{key}={value}"
        for key, value in metadata.items()
        if any(mark in key or mark in value for mark in marks)
    ]


def metadata_on(server: ServerInfo, sandbox: str) -> dict[str, str]:
    """The sandbox's metadata as the server hands it to any holder of its API key."""
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        return dict(manager.get_sandbox_info(sandbox).metadata or {})
    finally:
        manager.close()


def read_before_each_command(
    monkeypatch: pytest.MonkeyPatch, server: ServerInfo
) -> list[dict[str, str]]:
    """
    The metadata of each sandbox a backend runs a command in, read from ``server`` just before
    the command runs: what the sandbox carries while it is used, before it is destroyed.
    """
    stamped: list[dict[str, str]] = []
    run_command = OpenSandboxBackend.run_command

    def read_then_run(backend: OpenSandboxBackend, sandbox: str, *args: Any, **kwargs: Any) -> Any:
        stamped.append(metadata_on(server, sandbox))
        return run_command(backend, sandbox, *args, **kwargs)

    monkeypatch.setattr(OpenSandboxBackend, "run_command", read_then_run)
    return stamped
