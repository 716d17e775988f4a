"""Background processes started by a local environment, each remembered by a small JSON record.

A record holds the PID and the command line it was started with. A process counts as ours only
while ``/proc/<pid>/cmdline`` still ends with that command line, so a reused PID is never signalled.
The stack keeps its records in ``.stack/run``; the Kubernetes cluster (``dev/kube``) keeps its
own table in ``.kube/run``.
"""

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dev.stack.paths import LOG_DIR, RUN_DIR

EXEC_WAIT_SECONDS = 5.0


def wait_answering(
    answers: Callable[[], bool], *, alive: Callable[[], bool], seconds: float, failure: str
) -> None:
    """Waits until ``answers`` says a process answers, while ``alive`` says it still runs;
    raises ``RuntimeError(failure)`` when it stops or ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while not answers():
        if not alive() or time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.05)


@dataclass(frozen=True)
class Record:
    name: str
    pid: int
    argv: list[str]
    fingerprint: str

    @property
    def alive(self) -> bool:
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            return False
        # Interpreters put themselves in front of a script's argv, so compare the tail only.
        tail = [arg.encode() for arg in self.argv[1:]]
        return bool(cmdline) and cmdline[len(cmdline) - len(tail) :] == tail


@dataclass(frozen=True)
class ProcessTable:
    """The records of one environment: one JSON file per process in ``run_dir``, logs in
    ``log_dir``."""

    run_dir: Path
    log_dir: Path

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        fingerprint: str = "",
    ) -> Record:
        """Starts ``argv`` in its own session (a terminal's Ctrl-C must not reach it) and
        records it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file(name).open("ab") as log:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        record = Record(name, process.pid, argv, fingerprint)
        self._record_path(name).write_text(json.dumps(record.__dict__))
        # Until the child has exec'd, /proc shows the parent's command line and the record would
        # look stale; wait for the exec, or for an early exit, which the caller's checks report.
        deadline = time.monotonic() + EXEC_WAIT_SECONDS
        while not record.alive and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return record

    def find(self, name: str) -> Record | None:
        """The recorded process if it is still running, else None (a stale record is removed)."""
        path = self._record_path(name)
        try:
            record = Record(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if record.alive:
            return record
        path.unlink(missing_ok=True)
        return None

    def stop(self, name: str, grace_seconds: float = 15.0) -> bool:
        """Stops the recorded process: SIGTERM, then SIGKILL after the grace period. True if it
        ran."""
        record = self.find(name)
        if record is None:
            return False
        os.kill(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while _still_running(record) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _still_running(record):
            os.kill(record.pid, signal.SIGKILL)
            while _still_running(record):
                time.sleep(0.05)
        self._record_path(name).unlink(missing_ok=True)
        return True

    def _record_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.json"


def _still_running(record: Record) -> bool:
    # A process this interpreter started stays a zombie until reaped; reap it if it is ours.
    try:
        os.waitpid(record.pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return record.alive


# The stack's own table; its modules call these.
_STACK = ProcessTable(RUN_DIR, LOG_DIR)
log_file = _STACK.log_file
start = _STACK.start
find = _STACK.find
stop = _STACK.stop
