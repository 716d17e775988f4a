"""
One task try in a sandbox of its own, from its creation to its destruction, on a thread of the
executor's: the scheduler's loop only hands tries out and collects how they ended (see
docs/executor.rst, "State, and the sandbox's end as a backstop").
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxSpec, SandboxTerminalError

from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider.executors import _bundle, _logs, _settings, _workload
from opensandbox_provider.sandbox.backend import OpenSandboxBackend

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from airflow.executors.workloads import ExecuteTask
    from airflow.models.taskinstancekey import TaskInstanceKey

    from opensandbox_provider.executors._settings import TrySettings

log = logging.getLogger(__name__)

# The command's output goes to a file in the sandbox (see _workload.command); its stream
# carries nothing but the shell's own errors.
OUTPUT_KEPT = 16 * 1024
# A failure's message quotes the end of the process's output this far.
QUOTED_OUTPUT = 2000
# How often a try's end is looked for when its command's stream cannot say it (an adopted try,
# or a stream that ended without an exit status): one small file read per try.
EXIT_STATUS_POLL_INTERVAL = 1.0


@dataclass(frozen=True)
class TryOutcome:
    """How a try's sandbox process ended: ``succeeded`` as the executor reports it, and why."""

    key: TaskInstanceKey
    succeeded: bool
    info: str | None = None


def log_path_of(key: TaskInstanceKey) -> str:
    """The try's log file under a log folder, as Airflow's log reader renders it."""
    from airflow.utils.helpers import log_filename_template_renderer

    # The template reads the task instance's ids and try number, which the key holds.
    ti = SimpleNamespace(**key._asdict())
    return log_filename_template_renderer()(ti=ti, try_number=key.try_number)


def spec_for(settings: TrySettings, bundle_name: str) -> SandboxSpec:
    """What a try's sandbox is made with: its environment, and egress to the API server alone."""
    hosts, cidrs = settings.egress()
    env = {
        **settings.env,
        **_workload.environment(bundle_name, settings.execution_api_server_url, settings.executors),
    }
    return SandboxSpec(
        env=env, block_network=True, allow_egress_to=hosts, allow_egress_to_cidrs=cidrs
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
        warm_pool=_settings.warm_pool(settings.warm_pool),
    )


class SandboxTry:
    """
    One try: :meth:`run` makes its sandbox, runs the workload there and destroys it after;
    :meth:`follow` takes over one a scheduler before this one started.
    """

    def __init__(
        self,
        key: TaskInstanceKey,
        settings: TrySettings,
        *,
        local_log_folder: Path,
        workload: ExecuteTask | None = None,
    ) -> None:
        self.key = key
        self.settings = settings
        self.workload = workload
        self.log_path = workload.log_path if workload is not None else log_path_of(key)
        self.local_log_folder = local_log_folder
        self.backend = backend_for(settings)
        self.sandbox: str | None = None
        self._ended_because: str | None = None
        self._ended_succeeded = False
        self._ending = threading.Event()
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._destroyed = False

    def run(self) -> TryOutcome:
        """The whole try; never raises, so that every try ends in exactly one outcome."""
        return self._to_the_end(self._run)

    def follow(self, sandbox: str) -> TryOutcome:
        """
        A try that a scheduler before this one started in ``sandbox``: held from here, and its
        end read from the file its command leaves, since its stream went with that scheduler.
        """
        self.sandbox = sandbox
        self.backend.hold(sandbox)
        return self._to_the_end(lambda: self._await_exit_status(self.settings.try_timeout))

    def end(self, because: str, *, succeeded: bool = False) -> None:
        """
        End the try now, from another thread: its log is kept as far as it got, and its sandbox
        destroyed under it; ``because`` is what its outcome says, and ``succeeded`` whether it
        reports a success (a try whose task instance already succeeded).
        """
        self._ended_succeeded = succeeded
        self._ended_because = because
        self._keep_log()
        self._ending.set()
        self._destroy()

    def _to_the_end(self, body: Callable[[], TryOutcome]) -> TryOutcome:
        try:
            outcome = body()
        except Exception as e:
            # Everything, on purpose: this runs on a thread of the executor's, and a try whose
            # thread died on an unforeseen error would stay running in the scheduler forever.
            log.exception("The try %s in an OpenSandbox sandbox failed.", self.key)
            outcome = self._failed(f"The try's sandbox failed: {type(e).__name__}: {e}")
        finally:
            self._destroy()
        if self._ended_because is not None:
            return TryOutcome(self.key, succeeded=self._ended_succeeded, info=self._ended_because)
        return outcome

    def _run(self) -> TryOutcome:
        workload = self.workload
        assert workload is not None
        spec = spec_for(self.settings, workload.bundle_info.name)
        started = time.monotonic()
        self.sandbox = self.backend.create(
            spec=spec, identity=TaskInstanceIdentity(**self.key._asdict())
        )
        if self._ending.is_set():
            return self._failed("The try was ended while its sandbox was being made.")
        self.backend.write_file(
            self.sandbox, _workload.dag_file_in_sandbox(workload), _bundle.dag_file_source(workload)
        )
        self.backend.write_file(
            self.sandbox, str(_workload.WORKLOAD_FILE), _workload.for_the_sandbox(workload)
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
            return self._sandbox_ended(e)
        if result.timed_out:
            limit = self.settings.try_timeout
            return self._failed(
                f"The try ran past [opensandbox_executor] try_timeout ({limit:g}s) in sandbox "
                f"{self.sandbox}."
            )
        if result.exit_code == -1 and not self._ending.is_set():
            # The stream ended without an exit status: the sandbox ending under it, or a break
            # while the process runs on. Followed as an adopted try is: the process's end is in
            # the file its command leaves, the sandbox's in the server's answer, and a process
            # that ended without either leaves its task instance to Airflow's heartbeat check,
            # whose verdict the watch acts on.
            return self._await_exit_status(self.settings.try_timeout)
        return self._exited(result.exit_code)

    def _await_exit_status(self, within: float) -> TryOutcome:
        """The try's end, from the exit-status file its command leaves, or its sandbox's end."""
        sandbox = self.sandbox
        assert sandbox is not None
        deadline = time.monotonic() + within
        while not self._ending.is_set() and time.monotonic() < deadline:
            try:
                said = self.backend.read_file(
                    sandbox, str(_workload.EXIT_STATUS_FILE), max_bytes=64
                )
            except SandboxTerminalError as e:
                return self._sandbox_ended(e)
            except SandboxError:
                # Not written yet: the Task SDK's process still runs.
                self._ending.wait(EXIT_STATUS_POLL_INTERVAL)
                continue
            status = said.decode(errors="replace").strip()
            return self._exited(int(status) if status.lstrip("-").isdigit() else -1)
        return self._failed(
            f"The try's end could not be read from sandbox {sandbox} within {within:g}s."
        )

    def _exited(self, status: int) -> TryOutcome:
        self._keep_log()
        if status == 0:
            return TryOutcome(self.key, succeeded=True)
        assert self.sandbox is not None
        try:
            output = self.backend.read_file(
                self.sandbox, str(_workload.OUTPUT_FILE), max_bytes=_logs.MAX_LOG_BYTES
            )
            said = output.decode("utf-8", "replace")[-QUOTED_OUTPUT:]
        except SandboxError as e:
            said = f"(its output could not be read: {e})"
        return self._failed(
            f"The Task SDK's process exited with {status} in sandbox {self.sandbox}. It said: "
            f"{said}"
        )

    def _sandbox_ended(self, error: SandboxTerminalError) -> TryOutcome:
        return self._failed(
            f"Sandbox {self.sandbox} ended before the Task SDK in it said how the try went: "
            f"{error} The try is failed once, here; Airflow retries it if it has retries left."
        )

    def _failed(self, info: str) -> TryOutcome:
        if self._ended_because is None:
            log.warning("Try %s: %s", self.key, info)
            self._keep_log(note=info)
        return TryOutcome(self.key, succeeded=False, info=info)

    def _keep_log(self, note: str | None = None) -> None:
        """Copy the try's log out of the sandbox, while it lives, to where Airflow reads it."""
        if self.log_path is None:
            return
        target = self.local_log_folder / self.log_path
        # One copy at a time: the try's own thread and one ending it may both get here.
        with self._log_lock:
            if self.sandbox is not None and not target.exists():
                try:
                    _logs.copy_out(self.backend, self.sandbox, self.log_path, target)
                except SandboxError as e:
                    log.warning(
                        "Could not copy the log of try %s out of its sandbox: %s", self.key, e
                    )
            if note is not None:
                _logs.append_note(target, note)

    def _destroy(self) -> None:
        with self._lock:
            # Once: the try's own thread and one ending it may both get here.
            sandbox = self.sandbox
            if sandbox is None or self._destroyed:
                return
            self._destroyed = True
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
