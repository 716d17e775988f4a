"""Small helpers for running commands through the SDK in the conformance tests."""

import time

import pytest
from opensandbox import SandboxSync
from opensandbox.models.execd import CommandStatus, RunCommandOpts

# A bound on waiting for a command to end, so a broken stand-in fails a test instead of hanging
# it (no speed goal).
FINISH_BOUND_S = 30


def stdout_lines(sandbox: SandboxSync, command: str, **options) -> list[str]:
    """The stdout events of a foreground command, as texts."""
    execution = sandbox.commands.run(command, opts=RunCommandOpts(**options))
    return [message.text for message in execution.logs.stdout]


def wait_until_finished(sandbox: SandboxSync, command_id: str) -> CommandStatus:
    deadline = time.monotonic() + FINISH_BOUND_S
    while time.monotonic() < deadline:
        status = sandbox.commands.get_command_status(command_id)
        if not status.running:
            return status
        time.sleep(0.2)
    pytest.fail(f"Command {command_id} was still running after {FINISH_BOUND_S} s.")


def is_alive(sandbox: SandboxSync, pid: str) -> bool:
    (answer,) = stdout_lines(sandbox, f"kill -0 {pid} 2>/dev/null && echo alive || echo gone")
    return answer == "alive"
