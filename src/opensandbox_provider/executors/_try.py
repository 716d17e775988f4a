"""
One task try in a sandbox of its own, from its creation to its destruction, on a thread of the
executor's: the scheduler's loop only hands tries out and collects how they ended.

The try's state is the Task SDK's to report, to the API server, from inside the sandbox; what
this module reports is how the sandbox's process ended, which Airflow's scheduler compares with
that state. A sandbox that ends before the Task SDK said how the try went (killed from outside,
its lease run out) is reported failed once, with a sentence saying so, which the scheduler puts
in the task's audit log, and which the try's log gets too.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import (
    SandboxError,
    SandboxSpec,
    SandboxTerminalError,
)

from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider.executors import _bundle, _logs, _workload
from opensandbox_provider.sandbox.backend import OpenSandboxBackend

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.executors.workloads import ExecuteTask
    from airflow.models.taskinstancekey import TaskInstanceKey

    from opensandbox_provider.executors._settings import TrySettings

log = logging.getLogger(__name__)

# The Task SDK writes the try's whole log to the file the executor copies out, so the command's
# own output (the same lines, for a container's log) is kept only this far, for a failure's
# message.
OUTPUT_KEPT = 16 * 1024
# A failure's message quotes the end of the process's output this far.
QUOTED_OUTPUT = 2000
# How often an adopted try's end is looked for: one small file read per try.
EXIT_STATUS_POLL_INTERVAL = 2.0


@dataclass(frozen=True)
class TryOutcome:
    """How a try's sandbox process ended: ``succeeded`` as the executor reports it, and why."""

    key: TaskInstanceKey
    succeeded: bool
    info: str | None = None


def identity_of(key: TaskInstanceKey) -> TaskInstanceIdentity:
    return TaskInstanceIdentity(
        dag_id=key.dag_id,
        task_id=key.task_id,
        run_id=key.run_id,
        map_index=key.map_index,
        try_number=key.try_number,
    )


def backend_for(settings: TrySettings) -> OpenSandboxBackend:
    return OpenSandboxBackend(
        settings.conn_id,
        # The backend needs an image even when a snapshot is what the sandbox starts from.
        image=settings.image or "python:3.12-slim",
        snapshot=settings.snapshot,
        cpu=settings.cpu,
        memory=settings.memory,
        resources=settings.resources or None,
        sandbox_timeout=settings.lease,
        ready_timeout=settings.ready_timeout,
    )


class SandboxTry:
    """One try: ``run`` makes its sandbox, runs the workload there and destroys it after."""

    def __init__(
        self, workload: ExecuteTask, settings: TrySettings, *, local_log_folder: Path
    ) -> None:
        self.workload = workload
        self.key: TaskInstanceKey = workload.ti.key
        self.settings = settings
        self.local_log_folder = local_log_folder
        self.backend = backend_for(settings)
        self.sandbox: str | None = None
        self._revoked = threading.Event()

    def run(self) -> TryOutcome:
        """The whole try; never raises, so that every try ends in exactly one outcome."""
        return self._to_the_end(self._run)

    def follow(self, sandbox: str) -> TryOutcome:
        """
        A try that a scheduler before this one started in ``sandbox``: held from here, and its
        end read from the file its command leaves, since its stream went with that scheduler.
        """
        self.sandbox = sandbox
        return self._to_the_end(self._await_exit_status)

    def _to_the_end(self, body: Callable[[], TryOutcome]) -> TryOutcome:
        try:
            return body()
        except Exception as e:
            # Everything, on purpose: this runs on a thread of the executor's, and a try whose
            # thread died on an unforeseen error would stay running in the scheduler forever.
            log.exception("The try %s in an OpenSandbox sandbox failed.", self.key)
            return self._failed(f"The try's sandbox failed: {type(e).__name__}: {e}")
        finally:
            self._destroy()

    def revoke(self) -> None:
        """End the try now, from another thread: its sandbox is destroyed under it."""
        self._revoked.set()
        self._destroy()

    def _run(self) -> TryOutcome:
        hosts, cidrs = self.settings.egress()
        env = {
            **self.settings.env,
            **_workload.environment(
                self.workload.bundle_info.name,
                self.settings.execution_api_server_url,
                self.settings.executors,
            ),
        }
        spec = SandboxSpec(
            env=env, block_network=True, allow_egress_to=hosts, allow_egress_to_cidrs=cidrs
        )
        started = time.monotonic()
        self.sandbox = self.backend.create(spec=spec, identity=identity_of(self.key))
        if self._revoked.is_set():
            return self._failed("The try was revoked while its sandbox was being made.")
        self.backend.write_file(
            self.sandbox,
            _workload.dag_file_in_sandbox(self.workload),
            _bundle.dag_file_source(self.workload),
        )
        self.backend.write_file(
            self.sandbox, str(_workload.WORKLOAD_FILE), _workload.for_the_sandbox(self.workload)
        )
        log.info(
            "Try %s runs in sandbox %s, ready %.2fs after it was asked for.",
            self.key,
            self.sandbox,
            time.monotonic() - started,
        )
        try:
            result = self.backend.run_command(
                self.sandbox,
                _workload.command(),
                timeout=self.settings.try_timeout,
                max_output_bytes=OUTPUT_KEPT,
            )
        except SandboxTerminalError as e:
            if self._revoked.is_set():
                return self._failed("The try was revoked and its sandbox destroyed.")
            return self._failed(
                f"Sandbox {self.sandbox} ended before the Task SDK in it said how the try went: "
                f"{e} The try is failed once, here; Airflow retries it if it has retries left."
            )
        self._keep_log()
        if result.exit_code == 0 and not result.timed_out:
            return TryOutcome(self.key, succeeded=True)
        said = (result.stderr or result.stdout)[-QUOTED_OUTPUT:]
        if result.timed_out:
            limit = self.settings.try_timeout
            why = f"The try ran past [opensandbox_executor] try_timeout ({limit:g}s)"
        else:
            why = f"The Task SDK's process exited with {result.exit_code}"
        return self._failed(f"{why} in sandbox {self.sandbox}. It said: {said}")

    def _await_exit_status(self) -> TryOutcome:
        sandbox = self.sandbox
        assert sandbox is not None
        self.backend.hold(sandbox)
        deadline = time.monotonic() + self.settings.try_timeout
        while not self._revoked.is_set() and time.monotonic() < deadline:
            try:
                said = self.backend.read_file(
                    sandbox, str(_workload.EXIT_STATUS_FILE), max_bytes=64
                )
            except SandboxTerminalError as e:
                return self._failed(
                    f"Sandbox {sandbox} ended before the Task SDK in it said how the try went: "
                    f"{e} The try is failed once, here; Airflow retries it if it has retries left."
                )
            except SandboxError:
                # Not written yet: the Task SDK's process still runs.
                self._revoked.wait(EXIT_STATUS_POLL_INTERVAL)
                continue
            self._keep_log()
            status = said.decode(errors="replace").strip()
            if status == "0":
                return TryOutcome(self.key, succeeded=True)
            return self._failed(
                f"The Task SDK's process exited with {status} in sandbox {sandbox}."
            )
        if self._revoked.is_set():
            return self._failed("The try was revoked and its sandbox destroyed.")
        return self._failed(
            f"The try ran past [opensandbox_executor] try_timeout ({self.settings.try_timeout:g}s) "
            f"in sandbox {sandbox}."
        )

    def _failed(self, info: str) -> TryOutcome:
        log.warning("Try %s: %s", self.key, info)
        self._keep_log(note=info)
        return TryOutcome(self.key, succeeded=False, info=info)

    def _keep_log(self, note: str | None = None) -> None:
        """Copy the try's log out of the sandbox, while it lives, to where Airflow reads it."""
        log_path = self.workload.log_path
        if log_path is None:
            return
        target = self.local_log_folder / log_path
        if self.sandbox is not None and not target.exists():
            try:
                _logs.copy_out(self.backend, self.sandbox, log_path, target)
            except SandboxError as e:
                log.warning("Could not copy the log of try %s out of its sandbox: %s", self.key, e)
        if note is not None:
            _logs.append_note(target, note)

    def _destroy(self) -> None:
        sandbox = self.sandbox
        if sandbox is None:
            return
        try:
            self.backend.destroy(sandbox)
        except SandboxError:
            log.warning(
                "Could not destroy sandbox %s of try %s; the server ends it when its lease of "
                "%gs runs out.",
                sandbox,
                self.key,
                self.settings.lease,
                exc_info=True,
            )
