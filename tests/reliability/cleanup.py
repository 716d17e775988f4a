"""Destroying sandboxes by id through the lifecycle API alone, for whatever a test or a worker
could not destroy itself; one that is already gone is fine."""

from __future__ import annotations

from dev.stack.state import ServerInfo


def destroy_directly(server: ServerInfo, sandboxes: list[str]) -> None:
    from opensandbox.exceptions import SandboxApiException
    from opensandbox.sync.manager import SandboxManagerSync

    if not sandboxes:
        return
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        for sandbox in sandboxes:
            try:
                manager.kill_sandbox(sandbox)
            except SandboxApiException as error:
                if error.status_code != 404:
                    raise
    finally:
        manager.close()
