"""
The sandboxes a backend destroyed to end a command: a call made in one at the same time, by
another run of the task in the process, is told the sandbox was replaced, not that it failed.
"""

from __future__ import annotations

import threading

from airflow.providers.common.ai.sandbox.base import SandboxExecResult, SandboxTerminalError

from opensandbox_provider.sandbox._outcome import replaced_result


class Abandoned:
    """The handles of the sandboxes destroyed to end a command, safe to share across threads."""

    def __init__(self) -> None:
        self._sandboxes: set[str] = set()
        self._lock = threading.Lock()

    def add(self, sandbox: str) -> None:
        with self._lock:
            self._sandboxes.add(sandbox)

    def __contains__(self, sandbox: object) -> bool:
        with self._lock:
            return sandbox in self._sandboxes

    def ended_under_command(self, sandbox: str, cause: BaseException | None) -> SandboxExecResult:
        """
        What a command whose sandbox ended under it returns: a replaced sandbox when the
        backend destroyed it to end another command, else the terminal error.
        """
        if sandbox in self:
            return replaced_result(sandbox)
        raise SandboxTerminalError(
            f"Sandbox {sandbox} ended while the command ran: it was destroyed, killed or "
            "reached the end of its lifetime on the server."
        ) from cause
