"""
How one command's event stream ended, as the contract's result and as a line for the task log:
pure, no I/O of its own.

execd says how a command ended in its terminal event, and says nothing about a deadline:
it kills a command at its deadline with SIGKILL, and Go reports any death by signal as -1
(docs/execd-wire.rst, wire-exit, wire-timeout). So what the result says is decided here,
from the event, the clock, and whether the stream was given up on.
"""

from __future__ import annotations

from airflow.providers.common.ai.sandbox.base import SandboxExecResult

from opensandbox_provider._url_secrets import without_url_secrets
from opensandbox_provider.execd._events import BoundedTail
from opensandbox_provider.execd._stream_end import (
    Abandoned,
    BrokeEndRecovered,
    BrokeEndUnknown,
    StreamedCommand,
)

# Commands are quoted in the task log up to this length.
_LOGGED_COMMAND = 120
# How far short of its deadline a command killed at it may seem to have run. execd starts the
# deadline's clock just before it starts the process, not when its status says the command
# started (docs/execd-wire.rst, wire-timeout), so the time a status gives can fall short by what
# the start took: a few milliseconds, or more on a busy sandbox.
DEADLINE_TOLERANCE = 1.0
# Go's words for a process ended by SIGKILL, the only signal execd's deadline sends.
_KILLED = "signal: killed"


def killed_at_deadline(exit_code: int | None, how: str, ran_for: float, deadline: float) -> bool:
    """
    Whether a command that ended with ``exit_code`` after ``ran_for`` seconds, as execd says
    it did in ``how``, was killed by execd at its ``deadline``: the clock decides, since execd
    reports that kill as any other SIGKILL.
    """
    if exit_code != -1 or (how and _KILLED not in how):
        return False
    return ran_for >= deadline - DEADLINE_TOLERANCE


def command_result(
    streamed: StreamedCommand, *, elapsed: float, applied: float, requested: float
) -> SandboxExecResult:
    """
    The result of a command that ran ``elapsed`` seconds on a deadline of ``applied``.

    ``requested`` is the deadline the caller asked for, which ``applied`` may shorten. An
    abandoned command's sandbox has been destroyed to end it. What only the stream's end
    says (why a command never started, that the output stopped without an ending) is added
    to the stderr tail, so it reaches the model the way the command's own output does.
    """
    parser, ending, end = streamed.parser, streamed.ending, streamed.stream_end
    if isinstance(end, Abandoned):
        note = f"The command was abandoned: {end.why}. The sandbox was destroyed.\n"
        parser.stderr.append(note.encode())
        exit_code, timed_out = -1, True
    elif ending is None:
        exit_code, timed_out = -1, False
        if isinstance(end, BrokeEndUnknown):
            parser.stderr.append(f"The command's output stopped: {end.why}.\n".encode())
        parser.stderr.append(
            b"The sandbox ended the command's output without saying how it ended.\n"
        )
    else:
        exit_code = -1 if ending.exit_code is None else ending.exit_code
        if ending.exit_code in (None, -1) and ending.message:
            # Only the message says what happened: a signal's name, or why it never started.
            parser.stderr.append(ending.message.encode("utf-8", "replace") + b"\n")
        timed_out = killed_at_deadline(ending.exit_code, ending.message, elapsed, applied)
        if isinstance(end, BrokeEndRecovered):
            parser.stderr.append(
                f"The connection to the sandbox broke while the command ran ({end.why}); "
                "its exit code was read from execd afterwards, and output written after the "
                "break may be missing.\n".encode()
            )
    return SandboxExecResult(
        exit_code=exit_code,
        stdout=parser.stdout.text(),
        stderr=parser.stderr.text(),
        timed_out=timed_out,
        stdout_truncated=parser.stdout.truncated,
        stderr_truncated=parser.stderr.truncated,
        sandbox_terminated=isinstance(end, Abandoned),
        applied_timeout=applied if applied != requested else None,
    )


def replaced_result(sandbox: str) -> SandboxExecResult:
    """
    The result of a command whose sandbox this backend destroyed to end another command,
    one made at the same time: the toolset provisions a new sandbox, as it does for that one.
    """
    return SandboxExecResult(
        exit_code=-1,
        stdout="",
        stderr=(
            f"The command did not run to its end: sandbox {sandbox} was destroyed to end "
            "another command, whose output had stalled.\n"
        ),
        sandbox_terminated=True,
    )


def log_line(
    command: str,
    streamed: StreamedCommand,
    result: SandboxExecResult,
    *,
    elapsed: float,
    applied: float,
) -> str:
    """What the task log says of a command that ended: how, how fast, and how much it printed."""
    ended = f"timed out after {applied:g}s" if result.timed_out else f"exited {result.exit_code}"
    return (
        f"{_shortened(without_url_secrets(command))!r} {ended} in {elapsed:.2f}s "
        f"(stdout {_amount(streamed.parser.stdout)}; stderr {_amount(streamed.parser.stderr)})"
    )


def _shortened(command: str) -> str:
    return command if len(command) <= _LOGGED_COMMAND else command[: _LOGGED_COMMAND - 3] + "..."


def _amount(tail: BoundedTail) -> str:
    """How much a stream carried and how much of it was kept, for the task log."""
    if not tail.truncated:
        return f"{tail.total} bytes"
    # The text of a line too long to hold is not counted past what reached the tail.
    carried = f"{tail.total} bytes" if tail.counted else f"over {tail.max_bytes} bytes"
    return f"{carried}, the last {tail.max_bytes} kept"
