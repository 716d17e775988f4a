"""
How a command ended, as the operator judges it and as the trigger's event carries it back to
the worker: one type for each way, serialized one way. Airflow stores the event between a
triggerer and a worker that may run different releases, so its payload keeps the keys and
values every release's trigger has fired (see the trigger's docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.providers.common.ai.sandbox.base import SandboxExecResult


@dataclass(frozen=True)
class CommandEnd:
    """A command that ran to its end, foreground or background: its exit code and tails."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    # How the command was stopped when it ran out of command_timeout, when it was.
    stopped: str | None = None

    def xcom(self) -> dict[str, Any]:
        """What a task whose command succeeded returns when it names no ``xcom_path``."""
        return {"exit_code": self.exit_code, "stdout": self.stdout}


@dataclass(frozen=True)
class OutOfTime:
    """The task ran out of its ``execution_timeout`` while the command ran; it may still run."""

    message: str


@dataclass(frozen=True)
class CommandLost:
    """The command, or the sandbox under it, was lost: nothing says how it ended."""

    message: str


WaitEnd = CommandEnd | OutOfTime | CommandLost

# The event's status for each way a wait ends, as every release's trigger has written it.
_ENDED = "ended"
_WITH_A_MESSAGE: dict[type[OutOfTime | CommandLost], str] = {
    OutOfTime: "timeout",
    CommandLost: "error",
}
_KIND = {status: kind for kind, status in _WITH_A_MESSAGE.items()}


def foreground_end(result: SandboxExecResult, *, stopped: str | None) -> CommandEnd | CommandLost:
    """
    How a foreground command ended; ``stopped``, how the graceful stop ended it, if it did. A
    command whose sandbox ended under it is lost, as the backend's note in its stderr says.
    """
    if result.sandbox_terminated:
        return CommandLost(result.stderr.strip())
    return CommandEnd(result.exit_code, result.stdout, result.stderr, result.timed_out, stopped)


@dataclass(frozen=True)
class CommandEvent:
    """The trigger's one event: the sandbox the command ran in, and how the wait ended."""

    sandbox: str
    end: WaitEnd

    def payload(self) -> dict[str, Any]:
        """The event as the trigger fires it and Airflow stores it."""
        end = self.end
        if not isinstance(end, CommandEnd):
            return {
                "status": _WITH_A_MESSAGE[type(end)],
                "sandbox": self.sandbox,
                "message": end.message,
            }
        fields = asdict(end)
        if not end.stopped:
            # Only when the trigger's stop ended the command, as an earlier release fired it.
            del fields["stopped"]
        return {"status": _ENDED, "sandbox": self.sandbox, **fields}

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> CommandEvent:
        """The event a trigger of this release or an earlier one fired."""
        status, sandbox = payload["status"], payload["sandbox"]
        if status == _ENDED:
            ran = {name: payload[name] for name in ("exit_code", "stdout", "stderr", "timed_out")}
            return cls(sandbox, CommandEnd(**ran, stopped=payload.get("stopped") or None))
        kind = _KIND.get(status)
        if kind is None:
            raise ValueError(
                f"The trigger's event has status {status!r}, which this release does not know; "
                f"it knows {', '.join(map(repr, [_ENDED, *_KIND]))}."
            )
        return cls(sandbox, kind(payload["message"]))
