"""
A try's log: read from its sandbox while the sandbox lives, and copied to the scheduler's log
folder before the sandbox is destroyed (docs/executor.rst, "Logs").
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from opensandbox_provider.executors import _workload

if TYPE_CHECKING:
    from pathlib import Path

    from opensandbox_provider.sandbox.backend import OpenSandboxBackend

# A try's log is read whole, in the api-server or the scheduler; past this it is refused, not
# held: a task that logs more should log less, or use remote logging.
MAX_LOG_BYTES = 64 * 1024 * 1024
LOGGER = "opensandbox_provider.executors"


def read_live(backend: OpenSandboxBackend, sandbox: str, log_path: str) -> str:
    """The try's log as it is now in its sandbox."""
    data = backend.read_file(
        sandbox, _workload.log_file_in_sandbox(log_path), max_bytes=MAX_LOG_BYTES
    )
    return data.decode("utf-8", "replace")


def copy_out(backend: OpenSandboxBackend, sandbox: str, log_path: str, target: Path) -> None:
    """The try's log, copied from its sandbox to ``target``, made whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # Named so that the log reader, which reads every file starting with the log's name,
    # never reads a copy cut short.
    partial = target.with_name(f".{target.name}.part")
    try:
        with partial.open("wb") as dest:
            backend.export_file(
                sandbox, _workload.log_file_in_sandbox(log_path), dest, max_bytes=MAX_LOG_BYTES
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def append_note(target: Path, note: str) -> None:
    """Add the executor's own line to the try's log, as the Task SDK writes its lines."""
    target.parent.mkdir(parents=True, exist_ok=True)
    line = {
        "timestamp": datetime.now(UTC).isoformat(),
        "level": "error",
        "event": note,
        "logger": LOGGER,
    }
    with target.open("a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")
