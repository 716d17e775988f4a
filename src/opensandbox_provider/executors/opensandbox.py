"""The OpenSandboxExecutor: each task try in a sandbox of its own on an OpenSandbox server."""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from airflow.executors.base_executor import PARALLELISM, BaseExecutor
from airflow.executors.workloads import ExecuteTask
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.executors import _logs, _settings
from opensandbox_provider.executors._try import (
    SandboxTry,
    TryOutcome,
    backend_for,
    log_path_of,
    spec_for,
)
from opensandbox_provider.executors._watch import CHECK_INTERVAL, EndedElsewhere, grace_for
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from uuid import UUID

    from airflow.executors.workloads import ExecutorWorkload
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancekey import TaskInstanceKey
    from airflow.providers.common.ai.sandbox.base import SandboxSpec

    from opensandbox_provider.hooks._sandboxes import SandboxSummary

log = logging.getLogger(__name__)
T = TypeVar("T")


class OpenSandboxExecutor(BaseExecutor):
    """
    Run each task try in a sandbox of its own on an OpenSandbox server, with no worker beside
    the scheduler: the Task SDK inside reports the try's state, the executor how its sandbox's
    process ended (see :doc:`/executor`).
    """

    # The Task SDK's supervisor writes the log inside the sandbox; nothing is served from here.
    serve_logs = False

    def __init__(self, parallelism: int = PARALLELISM, team_name: str | None = None) -> None:
        super().__init__(parallelism=parallelism, team_name=team_name)
        self._tries: dict[TaskInstanceKey, SandboxTry] = {}
        self._ti_ids: dict[TaskInstanceKey, UUID] = {}
        self._stopping = threading.Event()
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
        # Loaded now, so that a pool that cannot be stops the scheduler at its start.
        _settings.warm_pool(self.settings.warm_pool)
        threading.Thread(target=self._watch, name="opensandbox-watch", daemon=True).start()
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
                sandbox_try = SandboxTry(
                    key, settings, local_log_folder=self._log_folder(), workload=workload
                )
            except _settings.ExecutorConfigError as e:
                self.fail(key, str(e))
                continue
            self._begin(sandbox_try, workload.ti.id)

    def _begin(self, sandbox_try: SandboxTry, ti_id: UUID, *, adopted: str | None = None) -> None:
        with self._lock:
            self._tries[sandbox_try.key] = sandbox_try
            self._ti_ids[sandbox_try.key] = ti_id

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
                self._ti_ids.pop(outcome.key, None)
            if outcome.key not in self.running:
                continue  # revoked: Airflow asked to hear nothing more of it
            (self.success if outcome.succeeded else self.fail)(outcome.key, outcome.info)

    def _watch(self) -> None:
        """Until the executor ends: destroy the sandbox of each try Airflow ended meanwhile."""
        ended_elsewhere = EndedElsewhere()
        while not self._stopping.wait(CHECK_INTERVAL):
            with self._lock:
                running = dict(self._ti_ids)
            try:
                ending = ended_elsewhere.to_end(running)
            except Exception:
                # Everything, on purpose: this thread is the executor's own, and one that died
                # on an unforeseen error would leave every later task marked failed in the UI
                # to the Task SDK's slower end. It reads again at the next interval.
                log.warning("Could not read the states of the running tries.", exc_info=True)
                continue
            self._end_tries(ending)

    def _end_tries(self, ending: dict[TaskInstanceKey, str]) -> None:
        for key, state in ending.items():
            with self._lock:
                sandbox_try = self._tries.get(key)
                self._ti_ids.pop(key, None)
            if sandbox_try is None:
                continue
            if state == "success":
                # Reported by the try itself, or marked in the UI: either way a success, which
                # the event says too, not a failure of the executor's making.
                because = (
                    f"The task instance succeeded, and its try's process in sandbox "
                    f"{sandbox_try.sandbox} had not ended {grace_for(state):g}s later; the "
                    "executor destroyed the sandbox."
                )
            else:
                because = (
                    f"The task instance became {state} in Airflow while its try ran in sandbox "
                    f"{sandbox_try.sandbox}; the executor destroyed the sandbox."
                )
            self._end(sandbox_try, because, succeeded=state == "success")

    @staticmethod
    def _end(sandbox_try: SandboxTry, because: str, *, succeeded: bool = False) -> None:
        # On a thread of its own: copying the log out and destroying the sandbox take a moment
        # the scheduler's loop does not wait for.
        threading.Thread(
            target=partial(sandbox_try.end, because, succeeded=succeeded),
            name="opensandbox-end",
            daemon=True,
        ).start()

    def revoke_task(self, *, ti: TaskInstance) -> None:
        self.queued_tasks.pop(ti.key, None)
        self.running.discard(ti.key)
        with self._lock:
            sandbox_try = self._tries.pop(ti.key, None)
            self._ti_ids.pop(ti.key, None)
        # A try this scheduler neither started nor adopted has no sandbox it holds: one left by
        # an earlier scheduler ends with its lease.
        if sandbox_try is not None:
            self._end(sandbox_try, "The try was revoked; the executor destroyed its sandbox.")

    def try_adopt_task_instances(self, tis: Sequence[TaskInstance]) -> Sequence[TaskInstance]:
        """Take over each try whose sandbox still runs, found by the try's identity."""
        not_adopted = []
        for ti in tis:
            try:
                found = _on_a_thread_of_its_own(partial(self._sandboxes_of, ti.key))
            except SandboxError:
                log.warning("Could not look for the sandbox of %s to adopt it.", ti, exc_info=True)
                found = []
            if not found:
                not_adopted.append(ti)
                continue
            # Followed, not run: what its sandbox is made of no longer matters, and the task
            # instance Airflow hands over here holds its ids alone.
            sandbox_try = SandboxTry(ti.key, self.settings, local_log_folder=self._log_folder())
            self.running.add(ti.key)
            self._begin(sandbox_try, ti.id, adopted=found[0].id)
            log.info("Adopted try %s, running in sandbox %s.", ti.key, found[0].id)
        return not_adopted

    def get_task_log(self, ti: TaskInstance, try_number: int) -> tuple[list[str], list[str]]:
        """A running try's log, read from its sandbox: what the api-server shows until it ends."""
        if try_number != ti.try_number:
            return [], []
        key = ti.key

        def read() -> tuple[list[str], list[str]]:
            found = self._sandboxes_of(key)
            if not found:
                return [], []
            text = _logs.read_live(backend_for(self.settings), found[0].id, log_path_of(key))
            return [f"From sandbox {found[0].id}, where the try runs."], [text]

        try:
            return _on_a_thread_of_its_own(read)
        except (SandboxError, _settings.ExecutorConfigError) as e:
            return [f"Could not read the log from the try's sandbox: {e}"], []

    def end(self) -> None:
        # Each try keeps running in its sandbox: the next scheduler adopts it, or its lease
        # lapses. What has ended is reported now.
        self._stopping.set()
        self.sync()

    def terminate(self) -> None:
        self.end()

    def _sandboxes_of(self, key: TaskInstanceKey) -> list[SandboxSummary]:
        """The running sandboxes of the try ``key`` names, made by this deployment."""
        return OpenSandboxHook(self.settings.conn_id).list_sandboxes(
            **key._asdict(), states=["Running"]
        )

    @staticmethod
    def _log_folder() -> Path:
        from airflow.configuration import conf

        return Path(conf.get("logging", "base_log_folder")).expanduser()


def _on_a_thread_of_its_own(call: Callable[[], T]) -> T:
    """
    ``call``'s result, computed on another thread: reading a connection or a Variable opens and
    closes the calling thread's Airflow session, which would detach the task instances the
    scheduler (or the api-server's log reader) holds in it while it calls this executor.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="opensandbox-lookup") as pool:
        return pool.submit(call).result()


def sandbox_spec(bundle_name: str = "dags-folder") -> SandboxSpec:
    """
    The spec each try's sandbox is made with, for a Dag of the bundle ``bundle_name``, from this
    deployment's ``[opensandbox_executor]`` options: what a ``WarmPool`` serving the executor's
    tries is defined with (``WarmPool(..., spec=sandbox_spec())``), in a module the scheduler and
    the pool's keeper, both with those options, import.
    """
    from airflow.configuration import conf

    return spec_for(_settings.configured(conf), bundle_name)
