"""
A command stopped gracefully: SIGTERM to its process group, a grace, then SIGKILL.

execd's own deadline sends SIGKILL at once (docs/execd-wire.rst, wire-timeout), and its
interrupt gives a fixed 3 s (wire-interrupt), so neither gives a command the grace its task
asks for. Instead the command records its process group when it starts (its shell leads a
group of its own whose id is its pid, wire-launch), and a second command, run through execd
beside it, signals that group, waits and kills. execd's deadline stays as a backstop, later
than the task's deadline plus the grace. The worker runs that command through its backend, the
triggerer through its async execd client: :class:`StopCommand` is the one script for both,
and the one reading of its answer.
"""

from __future__ import annotations

import math
import shlex
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxExecResult

if TYPE_CHECKING:
    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

# Where a command's process group id is written: /tmp exists in every image execd runs in.
GROUP_DIRECTORY = "/tmp"
# How often the stop looks whether the command's shell is gone.
_LOOK_EVERY = 0.1
# The stop command's own deadline past the grace: a few looks at /proc and two signals.
_STOP_MARGIN = 15.0
# execd's deadline for the command itself is this far past the task's deadline and the grace,
# so that it only acts when the graceful stop could not run (the worker died first).
BACKSTOP_MARGIN = 30.0
_STOP_OUTPUT_BYTES = 4096


def group_file() -> str:
    """A new file for one command's process group id."""
    return f"{GROUP_DIRECTORY}/.opensandbox-{uuid.uuid4().hex}.pgid"


def recording_group(command: str, path: str) -> str:
    """``command``, first writing its process group id (its shell's pid) to ``path``."""
    return f"echo $$ >{shlex.quote(path)}\n{command}"


@dataclass(frozen=True)
class Stop:
    """How a graceful stop went, as the task log says it."""

    how: str
    """``"terminated"``, ``"killed"`` or ``"gone"`` (the command had ended by itself)."""
    after: float
    """Seconds from the SIGTERM until the command's shell was gone, or the grace."""
    grace: float

    @property
    def ended_it(self) -> bool:
        """Whether the stop ended the command, rather than finding it ended by itself."""
        return self.how != "gone"

    def __str__(self) -> str:
        if self.how == "terminated":
            return f"stopped by SIGTERM after {self.after:.1f}s"
        if self.how == "killed" and self.grace == 0:
            return "killed at once (termination_grace_period is 0)"
        if self.how == "killed":
            return f"killed after the grace of {self.grace:g}s, since it outlived SIGTERM"
        return "found already ended"


@dataclass(frozen=True)
class StopCommand:
    """
    The command that stops the command whose process group is recorded in ``path``, and what
    its answer says: one script and one reading of it, whether the worker runs it through its
    backend or the triggerer through its async execd client.
    """

    path: str
    grace: float
    max_output_bytes: ClassVar[int] = _STOP_OUTPUT_BYTES

    @property
    def script(self) -> str:
        found = f"""f={shlex.quote(self.path)}
[ -r "$f" ] || {{ echo gone; exit 0; }}
g=$(cat "$f")
"""
        looks = math.ceil(self.grace / _LOOK_EVERY)
        if not looks:
            # No grace: SIGKILL alone, since a SIGTERM first would let a handler begin.
            return (
                found
                + """kill -KILL "-$g" 2>/dev/null || { echo gone; exit 0; }
echo killed
"""
            )
        # The shell that leads the group is execd's child, so it is gone from /proc once it exits;
        # a process of the group that outlived it (a job it left) is killed then, since the
        # command is over. A zombie counts as gone.
        return (
            found
            + f"""kill -TERM "-$g" 2>/dev/null || {{ echo gone; exit 0; }}
i=0
while [ -d "/proc/$g" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$g/status" 2>/dev/null; do
  if [ "$i" -ge {looks} ]; then kill -KILL "-$g" 2>/dev/null; echo killed; exit 0; fi
  sleep {_LOOK_EVERY}
  i=$((i+1))
done
kill -KILL "-$g" 2>/dev/null
echo "terminated $i"
"""
        )

    @property
    def timeout(self) -> float:
        return self.grace + _STOP_MARGIN

    def outcome(self, result: SandboxExecResult, sandbox: str) -> Stop:
        """How the stop went, from what the script printed; a ``SandboxError`` if it failed."""
        words = result.stdout.split()
        if result.exit_code != 0 or not words or words[0] not in ("terminated", "killed", "gone"):
            raise SandboxError(
                f"Stopping the command in sandbox {sandbox} failed (exit code "
                f"{result.exit_code}): {(result.stderr or result.stdout).strip()[:200]!r}. The "
                "sandbox is destroyed all the same, which ends the command."
            )
        if words[0] == "terminated":
            after = int(words[1]) * _LOOK_EVERY if len(words) > 1 else 0.0
            return Stop("terminated", after, self.grace)
        return Stop(words[0], self.grace, self.grace)


def stop_gracefully(backend: OpenSandboxBackend, sandbox: str, path: str, grace: float) -> Stop:
    """SIGTERM the process group recorded in ``path``, wait up to ``grace`` s, then SIGKILL."""
    stop = StopCommand(path, grace)
    result = backend.run_command(
        sandbox, stop.script, timeout=stop.timeout, max_output_bytes=stop.max_output_bytes
    )
    return stop.outcome(result, sandbox)


def check_grace(grace: float) -> float:
    """``termination_grace_period`` as seconds, refused when it is not a number of them."""
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise TypeError(
            f"termination_grace_period is {grace!r}; give seconds as a number (0 kills at once)."
        )
    if not (math.isfinite(grace) and grace >= 0):
        raise ValueError(
            f"termination_grace_period is {grace!r}; give a finite number of seconds, 0 or more "
            "(0 kills at once)."
        )
    return float(grace)
