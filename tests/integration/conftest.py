"""Backends pointed at the local stack's servers, and sandboxes that are always destroyed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from dev.stack.state import ServerInfo
from opensandbox_provider.sandbox import OpenSandboxBackend

CONN_ID = "opensandbox_default"


@dataclass
class Sandbox:
    """A sandbox a test created, with the backend that created it."""

    backend: OpenSandboxBackend
    handle: str
    server: ServerInfo

    def run(self, command: str, *, timeout: float = 60, max_output_bytes: int = 64 * 1024):
        return self.backend.run_command(
            self.handle, command, timeout=timeout, max_output_bytes=max_output_bytes
        )


@pytest.fixture
def backend_on(monkeypatch: pytest.MonkeyPatch) -> Callable[..., OpenSandboxBackend]:
    """A backend whose default connection names ``server``, as a deployment would define it."""

    def connect(server: ServerInfo, conn_id: str = CONN_ID, **arguments: Any) -> OpenSandboxBackend:
        for name, value in server.airflow_connection_env(conn_id).items():
            monkeypatch.setenv(name, value)
        return OpenSandboxBackend(conn_id, **arguments)

    return connect


@pytest.fixture
def sandbox_on(backend_on) -> Iterator[Callable[..., Sandbox]]:
    """Create sandboxes on a server; each is destroyed when the test ends, whatever happened."""
    created: list[Sandbox] = []

    def create(server: ServerInfo, spec: SandboxSpec | None = None, **arguments: Any) -> Sandbox:
        backend = backend_on(server, **arguments)
        handle = backend.create(spec=SandboxSpec(block_network=False) if spec is None else spec)
        created.append(Sandbox(backend, handle, server))
        return created[-1]

    yield create
    for sandbox in created:
        sandbox.backend.destroy(sandbox.handle)


@pytest.fixture
def sandbox(sandbox_on, plain_server: ServerInfo) -> Sandbox:
    """An open sandbox on the server without an egress sidecar."""
    return sandbox_on(plain_server)
