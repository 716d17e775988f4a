"""The OpenSandboxExecutor: each task try in a sandbox of its own on an OpenSandbox server."""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.executors.base_executor import PARALLELISM, BaseExecutor
from airflow.executors.workloads import ExecuteTask
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.executors import _logs, _settings
from opensandbox_provider.executors._try import SandboxTry, TryOutcome, backend_for
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.executors.workloads import ExecutorWorkload
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancekey import TaskInstanceKey

    from opensandbox_provider.hooks._sandboxes import SandboxSummary

log = logging.getLogger(__name__)


class OpenSandboxExecutor(BaseExecutor):
    """
    Run each task try in a sandbox of its own on an OpenSandbox server, with no worker beside
    the scheduler (see :doc:`/executor`).

    A try's sandbox is made from ``[opensandbox_executor] image`` or ``snapshot``, which must
    hold the Task SDK at the scheduler's version; a task's
    ``executor_config={"opensandbox": {...}}`` overrides its image, snapshot, cpu, memory,
    resources, env and the hosts it may reach. The sandbox reaches the API server's execution
    API and nothing else, gets the try's Dag file from the scheduler's bundle, and runs the
    workload with the Task SDK's own entry point, which reports the try's state to the API
    server itself. A sandbox that ends first fails the try once, saying so. The try's log is
    read from the sandbox while it runs and copied to the scheduler's log folder before the
    sandbox is destroyed. Every sandbox carries the deployment's id and the try's identity, by
    which a restarted scheduler adopts the tries still running, and its lease lapses if no
    scheduler holds it.
    """

    # The Task SDK's supervisor writes the log inside the sandbox; nothing is served from here.
    serve_logs = False

    def __init__(self, parallelism: int = PARALLELISM, team_name: str | None = None) -> None:
        super().__init__(parallelism=parallelism, team_name=team_name)
        self._tries: dict[TaskInstanceKey, SandboxTry] = {}
        self._outcomes: queue.SimpleQueue[TryOutcome] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._settings: _settings.TrySettings | None = None

    @property
    def settings(self) -> _settings.TrySettings:
        # Read on first use, not when constructed: the api-server constructs the executor to
        # read a running try's log, with the deployment's options, and a scheduler should fail
        # on a missing option when it starts, not when a Dag file imports it.
        if self._settings is None:
            self._settings = _settings.configured(self.conf)
        return self._settings

    def start(self) -> None:
        log.info(
            "OpenSandboxExecutor: tries run in sandboxes on connection %r from %s, reporting to "
            "%s, at most %d at a time.",
            self.settings.conn_id,
            self.settings.snapshot or self.settings.image,
            self.settings.execution_api_server_url,
            self.parallelism,
        )

    def _process_workloads(self, workloads: Sequence[ExecutorWorkload]) -> None:
        for workload in workloads:
            if not isinstance(workload, ExecuteTask):
                raise RuntimeError(
                    f"The OpenSandboxExecutor runs task tries only, not {type(workload).__name__}; "
                    "route callbacks and connection tests to another executor."
                )
            key = workload.ti.key
            del self.queued_tasks[key]
            self.running.add(key)
            try:
                settings = self.settings.overridden(workload.ti.executor_config)
            except _settings.ExecutorConfigError as e:
                self.fail(key, str(e))
                continue
            self._begin(SandboxTry(workload, settings, local_log_folder=self._log_folder()))

    def _begin(self, sandbox_try: SandboxTry, *, adopted: str | None = None) -> None:
        with self._lock:
            self._tries[sandbox_try.key] = sandbox_try

        def follow() -> None:
            outcome = sandbox_try.run() if adopted is None else sandbox_try.follow(adopted)
            self._outcomes.put(outcome)

        # A daemon thread per try, not a pool: a scheduler that stops leaves its tries to the
        # next one's adoption, or to their leases, instead of waiting for them at exit.
        threading.Thread(
            target=follow, name=f"opensandbox-try-{sandbox_try.key}", daemon=True
        ).start()

    def sync(self) -> None:
        while True:
            try:
                outcome = self._outcomes.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                self._tries.pop(outcome.key, None)
            if outcome.key not in self.running:
                continue  # revoked: Airflow asked to hear nothing more of it
            if outcome.succeeded:
                self.success(outcome.key, outcome.info)
            else:
                self.fail(outcome.key, outcome.info)

    def revoke_task(self, *, ti: TaskInstance) -> None:
        self.queued_tasks.pop(ti.key, None)
        self.running.discard(ti.key)
        with self._lock:
            sandbox_try = self._tries.pop(ti.key, None)
        # A try this scheduler neither started nor adopted has no sandbox it holds: one left by
        # an earlier scheduler ends with its lease.
        if sandbox_try is not None:
            sandbox_try.revoke()

    def try_adopt_task_instances(self, tis: Sequence[TaskInstance]) -> Sequence[TaskInstance]:
        """Take over each try whose sandbox still runs, found by the try's identity."""
        not_adopted = []
        for ti in tis:
            try:
                found = self._sandboxes_of(ti)
            except SandboxError:
                log.warning("Could not look for the sandbox of %s to adopt it.", ti, exc_info=True)
                found = []
            if not found:
                not_adopted.append(ti)
                continue
            workload = ExecuteTask.make(ti)
            settings = self.settings.overridden(ti.executor_config)
            sandbox_try = SandboxTry(workload, settings, local_log_folder=self._log_folder())
            self.running.add(ti.key)
            self._begin(sandbox_try, adopted=found[0].id)
            log.info("Adopted try %s, running in sandbox %s.", ti.key, found[0].id)
        return not_adopted

    def get_task_log(self, ti: TaskInstance, try_number: int) -> tuple[list[str], list[str]]:
        """A running try's log, read from its sandbox: what the api-server shows until it ends."""
        if try_number != ti.try_number:
            return [], []
        try:
            found = self._sandboxes_of(ti)
            if not found:
                return [], []
            from airflow.utils.helpers import log_filename_template_renderer

            log_path = log_filename_template_renderer()(ti=ti)
            text = _logs.read_live(backend_for(self.settings), found[0].id, log_path)
        except (SandboxError, _settings.ExecutorConfigError) as e:
            return [f"Could not read the log from the try's sandbox: {e}"], []
        return [f"From sandbox {found[0].id}, where the try runs."], [text]

    def end(self) -> None:
        # Each try keeps running in its sandbox: the next scheduler adopts it, or its lease
        # lapses. What has ended is reported now.
        self.sync()

    def terminate(self) -> None:
        self.end()

    def _sandboxes_of(self, ti: Any) -> list[SandboxSummary]:
        """The running sandboxes of this try of ``ti``, made by this deployment."""
        return OpenSandboxHook(self.settings.conn_id).list_sandboxes(
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=ti.map_index,
            try_number=ti.try_number,
            states=["Running"],
        )

    @staticmethod
    def _log_folder() -> Path:
        from airflow.configuration import conf

        return Path(conf.get("logging", "base_log_folder")).expanduser()
