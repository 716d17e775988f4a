"""What execd remembers about each command it ran, for status, logs and interrupt
(docs/execd-wire.rst, wire-status)."""

import threading
import time
import uuid
from dataclasses import dataclass, field

from go_encoding import go_time


def new_command_id() -> str:
    """A UUIDv4 without dashes, 32 lower-case hex digits (docs/execd-wire.rst, wire-launch)."""
    return uuid.uuid4().hex


@dataclass
class CommandRecord:
    """What /command/status reports about one command (docs/execd-wire.rst, wire-status)."""

    id: str
    content: str
    background: bool
    output_path: str
    started_at: int = field(default_factory=time.time_ns)
    pid: int = -1
    running: bool = True
    exit_code: int | None = None
    error: str = ""
    finished_at: int | None = None

    def finish(self, exit_code: int, error: str) -> None:
        self.exit_code = exit_code
        self.error = error
        self.running = False
        self.finished_at = time.time_ns()
        # execd clears the pid so a late interrupt cannot signal a recycled process group.
        self.pid = 0

    def as_json(self) -> dict:
        """content, exit_code, error and finished_at are omitted while empty
        (docs/execd-wire.rst, wire-status)."""
        status = {"id": self.id}
        if self.content:
            status["content"] = self.content
        status["running"] = self.running
        if self.exit_code is not None:
            status["exit_code"] = self.exit_code
        if self.error:
            status["error"] = self.error
        status["started_at"] = go_time(self.started_at)
        if self.finished_at is not None:
            status["finished_at"] = go_time(self.finished_at)
        return status


class CommandRegistry:
    def __init__(self):
        self._lock = threading.Lock()
        self._records: dict[str, CommandRecord] = {}

    def add(self, record: CommandRecord) -> None:
        with self._lock:
            self._records[record.id] = record

    def get(self, command_id: str) -> CommandRecord | None:
        with self._lock:
            return self._records.get(command_id)


COMMANDS = CommandRegistry()
