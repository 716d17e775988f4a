"""
What execd says of one command it started (docs/execd-wire.rst, wire-status): read by the
trigger for a background command, and by the backend when a foreground command's stream broke.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from airflow.providers.common.ai.sandbox.base import SandboxError

# A status is a few hundred bytes of JSON; more is not a status.
MAX_STATUS_BODY = 64 * 1024


@dataclass(frozen=True)
class CommandStatus:
    """What execd says of a command (docs/execd-wire.rst, wire-status)."""

    running: bool
    exit_code: int | None
    # Go's text for how it ended, such as ``exit status 3`` or ``signal: killed``.
    error: str
    # Seconds from its start to its end, when execd says both.
    duration: float | None
    finished: bool = False

    @property
    def ended(self) -> bool:
        # A record whose process has not started yet is not running either, but has neither an
        # exit code nor an end.
        return not self.running and (self.exit_code is not None or self.finished)

    @property
    def exit_status(self) -> int:
        """The exit code; one left out as empty is 0 unless an error says otherwise."""
        if self.exit_code is not None:
            return self.exit_code
        return -1 if self.error else 0


def parse_status(raw: bytes | None, command_id: str) -> CommandStatus:
    """The status in execd's answer ``raw`` (``None`` past its bound), or a ``SandboxError``."""
    try:
        body = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("running"), bool):
        raise SandboxError(
            f"execd answered the status of command {command_id} with something that is not a "
            "command status."
        )
    exit_code = body.get("exit_code")
    return CommandStatus(
        running=body["running"],
        exit_code=exit_code if isinstance(exit_code, int) else None,
        error=str(body.get("error") or ""),
        duration=_duration(body.get("started_at"), body.get("finished_at")),
        finished=isinstance(body.get("finished_at"), str),
    )


def _duration(started: object, finished: object) -> float | None:
    if not isinstance(started, str) or not isinstance(finished, str):
        return None
    try:
        return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        return None
