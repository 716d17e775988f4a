"""Whether a command that was SIGKILLed ran out of memory, from the kernel's own count.

An out-of-memory kill is a SIGKILL like any other (docs/operator.rst, "A script"); the sandbox's
memory cgroup counts each one. Its files are of size zero, which execd's file API serves empty,
so ``cat`` reads them in the sandbox: the guest could fake the count, as it could its exit code,
and that misleads only the explanation of its own command's end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxError

if TYPE_CHECKING:
    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

# Through a shell, 128 + SIGKILL; execd reports a process a signal ended as -1.
SIGKILLED = frozenset({128 + 9, -1})
COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
READ_COMMAND = f"cat {' '.join(COUNTERS)} 2>/dev/null; exit 0"
_MAX_BYTES = 4096
_READ_SECONDS = 15.0


def oom_kills(backend: OpenSandboxBackend, sandbox: str) -> int | None:
    """How many processes of the sandbox the out-of-memory killer ended; None if unknown."""
    try:
        read = backend.run_command(
            sandbox, READ_COMMAND, timeout=_READ_SECONDS, max_output_bytes=_MAX_BYTES
        )
    except SandboxError:
        return None
    return counted(read.stdout)


def counted(text: str) -> int | None:
    """The ``oom_kill`` count in a cgroup's memory file, or None without one."""
    counts = [
        int(value)
        for key, _, value in (line.partition(" ") for line in text.splitlines())
        if key == "oom_kill" and value.strip().isdigit()
    ]
    return max(counts) if counts else None


def explained(exit_code: int, backend: OpenSandboxBackend, sandbox: str, memory: str) -> str:
    """What to add to a failed command's message: why its SIGKILL came, when the kernel says."""
    if exit_code not in SIGKILLED or not oom_kills(backend, sandbox):
        return ""
    return (
        " The kernel's out-of-memory killer ended it: the sandbox's processes needed more "
        f"than its memory limit ({memory}). Raise memory, or make the command use less."
    )
