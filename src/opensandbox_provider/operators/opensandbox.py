"""Run a shell command in a sandbox of its own, on an OpenSandbox server, as an Airflow task."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxSpec
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowSkipException,
    AirflowTaskTimeout,
    BaseOperator,
    conf,
    mask_secret,
    redact,
)

from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider._output_log import OutputLog
from opensandbox_provider.execd._background import output_paths, separated
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.operators._assets import (
    add_new,
    declared_assets,
    declared_inputs,
    rendered_later,
    shown,
)
from opensandbox_provider.operators._command_end import (
    CommandEnd,
    CommandEvent,
    CommandLost,
    OutOfTime,
    WaitEnd,
    foreground_end,
)
from opensandbox_provider.operators._files import check_files, copy_outputs, write_files
from opensandbox_provider.operators._finish_action import (
    DEFAULT_KEEP_FOR,
    DELETE_POD,
    KEPT_SANDBOX_XCOM,
    KeptSandbox,
    check_finish_action,
    keeps,
)
from opensandbox_provider.operators._memory import explained
from opensandbox_provider.operators._parse_checks import (
    check_file_sources,
    check_spec,
    exit_codes,
    seconds,
)
from opensandbox_provider.operators._result import read_result
from opensandbox_provider.operators._stop import (
    BACKSTOP_MARGIN,
    Stop,
    check_grace,
    group_file,
    recording_group,
    stop_gracefully,
)
from opensandbox_provider.operators._tries import kill_other_tries, kill_this_try
from opensandbox_provider.pool import ServerPool
from opensandbox_provider.sandbox._lifecycle import Lifecycle
from opensandbox_provider.sandbox.backend import OpenSandboxBackend
from opensandbox_provider.triggers.opensandbox import (
    MAX_RUNNING_PAST_DEADLINE,
    OpenSandboxCommandTrigger,
)

if TYPE_CHECKING:
    import jinja2
    from airflow.providers.common.compat.sdk import Asset, Context, ObjectStoragePath
    from airflow.providers.openlineage.extractors import OperatorLineage

    from opensandbox_provider.pool import WarmPool
    from opensandbox_provider.sandbox import HostPath, NamedVolume

# How much of each stream's tail is kept: the stdout returned as the task's XCom, and the
# stderr a failure quotes. The whole output is in the task log, line by line.
DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024
# A file copied in is held in the worker's memory whole; one copied out streams, under the
# same bound. 1 GiB is the budget common-ai's toolset gives an export.
DEFAULT_MAX_FILE_BYTES = 1024 * 1024 * 1024
# A failure quotes this many of the last lines of stderr: enough for a traceback's end.
FAILURE_TAIL_LINES = 20
# The XCom key the sandbox's id is pushed under as soon as it exists, so that anyone can find
# the sandbox of a task that is still running, or was killed.
SANDBOX_ID_XCOM = "sandbox_id"
# A deferred task's trigger ends this long (at most a quarter of what is left) before the
# task's execution_timeout, so its event reaches the worker before the scheduler, which looks
# for timed-out deferrals every 15 s, fails the task without calling it back.
TIMEOUT_HEADROOM = 10.0


@dataclass
class Ending:
    """How a task is ending, as what becomes of its sandbox depends on it."""

    # Whether the task is ending otherwise than as it should; a skip is not a failure.
    failed: bool = True
    # Whether nothing runs in the sandbox any more: a sandbox is kept only then.
    command_over: bool = True


class OpenSandboxOperator(BaseOperator):
    """
    Run ``command`` in a new sandbox on an OpenSandbox server, then destroy the sandbox.

    :class:`~opensandbox_provider.sandbox.OpenSandboxBackend` creates the sandbox, with its
    network policy and fail-closed proof. Exit code 0 returns ``{"exit_code": 0, "stdout":
    <tail>}`` or the JSON in ``xcom_path``; a code in ``skip_on_exit_code`` skips the task; any
    other fails it, quoting stderr's last lines. ``deferrable=True`` waits in the triggerer
    (see :doc:`/operator`).

    :param command: The shell command to run, or the name of a ``.sh`` or ``.bash`` file in
        the Dag's folder or ``template_searchpath`` whose rendered text is run, as for
        ``BashOperator``. Templated.
    :param image: The image the sandbox runs. Templated.
    :param cpu: The sandbox's CPU limit (``"1"``, ``"500m"``). Templated.
    :param memory: The sandbox's memory limit (``"2Gi"``). Templated.
    :param resources: Limits of other resources, such as ``{"nvidia.com/gpu": "1"}`` (see the
        backend and :doc:`/operator`, "Resources").
    :param cpu_request: What the sandbox asks a Kubernetes scheduler for of CPU, at most
        ``cpu``; by default the connection's ``cpu_request``, else the limit. Templated.
    :param memory_request: The same for memory, at most ``memory``. Templated.
    :param registry_conn_id: A ``docker`` connection (host the registry, login, password)
        whose login the server pulls ``image`` with (see :doc:`/operator`, "Private images").
    :param env: Environment variables of the sandbox, added to ``spec.env``. Templated.
    :param private_env: Environment variables added as ``env`` is, for secrets: rendered when
        the task runs but never shown among its rendered fields, each value masked in the task
        log and in the returned stdout; a deferred task's trigger masks them too, in the
        triggerer's log and in the event it fires (see :doc:`/operator`, "Secrets").
    :param spec: What the sandbox is provisioned with. The default,
        ``SandboxSpec()``, denies all egress; ``SandboxSpec(block_network=False)`` opens it.
    :param snapshot: The id of a snapshot to start the sandbox from instead of ``image``, as
        :func:`~opensandbox_provider.sandbox.prepare_snapshot` returns it. Templated, so
        that it can come from the task that prepared it:
        ``"{{ ti.xcom_pull('prepare') }}"``. The sandbox still gets this task's ``spec``.
    :param volumes: Named volumes and host paths mounted into the sandbox, read-only unless
        they say otherwise (see :class:`~opensandbox_provider.sandbox.NamedVolume`).
    :param workdir: An absolute path, created with the sandbox, where the command runs and
        relative paths in ``files`` and ``outputs`` resolve. Templated.
    :param files: Sandbox path to content: text, bytes, or an ``ObjectStoragePath`` or
        ``Asset`` whose content is copied in as it is. The paths and the text are templated.
        Each ``ObjectStoragePath`` or ``Asset`` is declared among the task's ``inlets``.
    :param outputs: Sandbox path to the ``ObjectStoragePath``, URL or ``Asset`` it is copied
        to once the command has succeeded. Both sides are templated. Each destination that is
        not a template is declared among the task's ``outlets``, so a successful task records
        an event of its asset (see :doc:`/operator`, "Outputs as assets").
    :param xcom_path: A file in the sandbox holding one JSON document, written by the
        command, that the task returns instead of its exit code and stdout.
    :param command_timeout: Seconds the command may run; it is then stopped as
        ``termination_grace_period`` says.
    :param termination_grace_period: Seconds a command being stopped (its ``command_timeout``
        ran out, the task was killed, or its ``execution_timeout`` ran out) has between
        SIGTERM to its process group and SIGKILL; ``0`` kills it at once. The task log says
        which ended it (see :doc:`/operator`, "Stopping a command").
    :param on_finish_action: What becomes of the sandbox when the task ends, with
        KubernetesPodOperator's names and meanings: ``"delete_pod"`` destroys it,
        ``"delete_succeeded_pod"`` keeps it only when the task failed, ``"keep_pod"`` keeps
        it (see :doc:`/operator`, "Keeping a sandbox after the task").
    :param keep_for: How long a kept sandbox is kept, as a ``timedelta``: its lease ends then
        and nothing renews it; until then retries and the maintenance cleanup leave it alone.
    :param skip_on_exit_code: Exit code(s) that skip the task rather than fail it.
    :param opensandbox_conn_id: The connection naming the server.
    :param deferrable: Wait for the command in the triggerer instead of on a worker.
    :param poll_interval: Seconds between the trigger's looks at a background command.
    :param sandbox_timeout: The sandbox's lease on the server, in seconds (see the backend).
    :param ready_timeout: Seconds a new sandbox has to start answering.
    :param max_output_bytes: How much of the tail of stdout and of stderr is kept.
    :param max_file_bytes: The largest file copied in or out.
    :param warm_pool: A :class:`~opensandbox_provider.pool.WarmPool`, or a
        :class:`~opensandbox_provider.pool.ServerPool` on a Kubernetes server, to take the
        sandbox from, ready, instead of creating it (see :doc:`/pools`); it is destroyed after
        the task all the same. Named so because ``pool`` is every Airflow task's slot pool.
    """

    template_fields: Sequence[str] = (
        "command",
        "env",
        "files",
        "outputs",
        "snapshot",
        "image",
        "cpu",
        "memory",
        "cpu_request",
        "memory_request",
        "workdir",
    )
    template_fields_renderers = {
        "command": "bash",
        "env": "json",
        "files": "json",
        "outputs": "json",
    }
    # As for BashOperator, a command that is a script file's name is that file's rendered
    # text; unlike it, only a lone name is (see _misread_as_a_script).
    template_ext: Sequence[str] = (".sh", ".bash")
    ui_color = "#e8f4f0"

    def __init__(
        self,
        *,
        command: str,
        image: str = "python:3.12-slim",
        cpu: str = "1",
        memory: str = "2Gi",
        resources: Mapping[str, str] | None = None,
        cpu_request: str | None = None,
        memory_request: str | None = None,
        registry_conn_id: str | None = None,
        env: Mapping[str, str] | None = None,
        private_env: Mapping[str, str] | None = None,
        spec: SandboxSpec | None = None,
        snapshot: str | None = None,
        volumes: Sequence[NamedVolume | HostPath] | None = None,
        workdir: str | None = None,
        files: Mapping[str, str | bytes | ObjectStoragePath | Asset] | None = None,
        outputs: Mapping[str, str | ObjectStoragePath | Asset] | None = None,
        xcom_path: str | None = None,
        command_timeout: float = 3600.0,
        termination_grace_period: float = 5.0,
        on_finish_action: str = DELETE_POD,
        keep_for: timedelta = DEFAULT_KEEP_FOR,
        skip_on_exit_code: int | Iterable[int] | None = 99,
        opensandbox_conn_id: str | None = OpenSandboxHook.default_conn_name,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 1.0,
        sandbox_timeout: float = 3600.0,
        ready_timeout: float = 120.0,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        warm_pool: WarmPool | ServerPool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.command = command
        self.image = image
        self.cpu = cpu
        self.memory = memory
        self.cpu_request = cpu_request
        self.memory_request = memory_request
        self.workdir = workdir
        self.env = dict(env or {})
        self.private_env = dict(private_env or {})
        self.spec = SandboxSpec() if spec is None else spec
        check_spec(self.spec)
        self.snapshot = snapshot
        self.files = dict(files or {})
        check_file_sources(self.files)
        self.outputs = dict(outputs or {})
        # Declared so that Airflow records an asset event for each output when the task
        # succeeds, and a Dag scheduled on one runs; text to copy in names no asset.
        self.outlets = add_new(list(self.outlets), declared_assets(self.outputs.values()))
        self.inlets = add_new(list(self.inlets), declared_inputs(self.files))
        self.xcom_path = xcom_path
        self.command_timeout = seconds(command_timeout, "command_timeout")
        self.termination_grace_period = check_grace(termination_grace_period)
        self.on_finish_action, self.keep_for = check_finish_action(on_finish_action, keep_for)
        self.max_output_bytes = max_output_bytes
        self.max_file_bytes = max_file_bytes
        self.skip_on_exit_code = exit_codes(skip_on_exit_code)
        self.opensandbox_conn_id = opensandbox_conn_id
        self.deferrable = deferrable
        self.poll_interval = seconds(poll_interval, "poll_interval")
        # What the sandbox is created with that is never templated, as the backend takes it.
        self.sandbox_arguments: dict[str, Any] = {
            "sandbox_timeout": sandbox_timeout,
            "ready_timeout": ready_timeout,
            "volumes": volumes,
            "warm_pool": warm_pool,
            "resources": resources,
            "registry_conn_id": registry_conn_id,
        }
        # Checked here as the backend checks them, so that a mistake fails when the Dag is
        # parsed; a value still to be rendered is left to the backend's defaults here and
        # checked when the task runs, by the backend each run builds. A request is compared
        # with its limit, so a limit still to be rendered takes its request with it, lest it be
        # compared with the default.
        known = {
            name: value
            for name, value in self._rendered_arguments().items()
            if not rendered_later(value)
        }
        for limit in ("cpu", "memory"):
            if limit not in known:
                known.pop(f"{limit}_request", None)
        OpenSandboxBackend.check_arguments(**self.sandbox_arguments, **known)
        self._backend: OpenSandboxBackend | None = None
        self._sandbox_id: str | None = None
        # What on_kill needs, set before the sandbox is asked for: see _create.
        self._hook: OpenSandboxHook | None = None
        self._identity: TaskInstanceIdentity | None = None
        self._killed = False
        # What a graceful stop needs: the file holding the command's process group, and a
        # backend of its own already connected to the sandbox (see _run).
        self._group_file: str | None = None
        self._stopper: OpenSandboxBackend | None = None
        # Made when the command starts: Airflow deep-copies a task before it runs it.
        self._stop_lock: threading.Lock | None = None
        self._stopped: Stop | None = None
        # Set once on_finish_action kept the sandbox: Airflow calls on_kill after an
        # execution_timeout, once execute has ended, and it must leave a kept sandbox.
        self._kept = False

    # -- Create, write the files, run --

    def _rendered_arguments(self) -> dict[str, Any]:
        """The backend's arguments that are templated, as they stand: rendered at run time."""
        names = ("image", "cpu", "memory", "cpu_request", "memory_request", "workdir", "snapshot")
        return {name: getattr(self, name) for name in names}

    def new_backend(self, **overrides: Any) -> OpenSandboxBackend:
        """The backend that creates, drives and destroys this task's sandbox."""
        arguments = {**self.sandbox_arguments, **self._rendered_arguments(), **overrides}
        return OpenSandboxBackend(self.opensandbox_conn_id, **arguments)

    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Iterable[str],
        context: Context,
        jinja_env: jinja2.Environment,
        seen_oids: set[int],
    ) -> None:
        # Airflow renders a mapped task's fields through this method of the task it unmaps,
        # never through render_template_fields, and offers no public hook there, so what this
        # operator adds to rendering is here, for a mapped task and a plain one alike
        # (tests/unit/test_airflow_internals.py fails if Airflow stops calling it). A nested
        # object is Airflow's alone.
        if parent is not self:
            super()._do_render_template_fields(
                parent, template_fields, context, jinja_env, seen_oids
            )
            return
        # Airflow renders a mapping's values only, and reads any text ending in .sh as a
        # script file's name. Both sides of outputs, the keys of files and a command that is
        # not a lone file name are rendered here as text of their own; each is set aside
        # meanwhile, since Airflow skips an empty field. A mapping a mapped task was given
        # from an upstream XCom is data, never rendered, as Airflow renders no such value.
        files_given = id(self.files) in seen_oids
        command = self.command if _misread_as_a_script(self) else None
        outputs, self.outputs = self.outputs, {}
        if command is not None:
            self.command = ""
        super()._do_render_template_fields(self, template_fields, context, jinja_env, seen_oids)

        def text(value: Any) -> Any:
            # A string rendered as a template of its own, whatever it ends with.
            return jinja_env.from_string(value).render(context) if isinstance(value, str) else value

        if command is not None:
            self.command = text(command)
        if not files_given:
            self.files = {text(path): content for path, content in self.files.items()}
        if id(outputs) not in seen_oids:
            outputs = {
                text(path): text(target)
                if isinstance(target, str)
                else self.render_template(target, context, jinja_env)
                for path, target in outputs.items()
            }
        self.outputs = outputs
        # Rendered here rather than as a template field, so that no rendered field shows it;
        # masked before anything could log it.
        self.private_env = {name: text(secret) for name, secret in self.private_env.items()}
        for value in self.private_env.values():
            mask_secret(value)

    def resolve_template_files(self) -> None:
        # Airflow loads a script file's text when the Dag is parsed; a command that only ends
        # like one (``sh count.sh``) is left as the command it is.
        if _misread_as_a_script(self):
            self.prepare_template()
        else:
            super().resolve_template_files()

    def _sandbox_spec(self) -> SandboxSpec:
        """``spec`` with ``env`` and ``private_env`` added to its environment."""
        added = {**self.env, **self.private_env}
        if not added:
            return self.spec
        return replace(self.spec, env={**(self.spec.env or {}), **added})

    def execute(self, context: Context) -> Any:
        backend = self._backend = self.new_backend()
        check_files(self.files, max_bytes=self.max_file_bytes)
        sandbox = self._create(backend, context)
        deferred = False
        ending = Ending()
        try:
            write_files(backend, sandbox, self.files, max_bytes=self.max_file_bytes)
            if self.deferrable:
                command_id, paths = self._start_in_background(backend, sandbox)
                # From here the triggerer renews the sandbox, and on_kill there destroys it.
                backend.hand_over(sandbox)
                deferred = True
                self._defer_to_trigger(sandbox, command_id, paths, context)
            ending.command_over = False
            end = self._run(backend, sandbox)
            ending.command_over = True
            return self._judge(backend, sandbox, end, ending)
        finally:
            if not deferred:
                self._end(backend, sandbox, context, ending)

    def _run(self, backend: OpenSandboxBackend, sandbox: str) -> CommandEnd | CommandLost:
        """
        Run the command, logging its output as it comes, and stop it gracefully once it runs
        out of ``command_timeout``, or when anything (``execution_timeout``) ends the run.
        """
        path = self._group_file = group_file()
        # A backend of its own stops the command, connected now: on_kill runs in a signal
        # handler, on the thread it interrupted, which may hold any lock of the running backend
        # or be amid a call to Airflow, so it may use neither. Held as the running one is, so
        # that the stop is never fitted into an expiry read once and since moved by the
        # renewals; released in _end.
        self._stopper = self.new_backend()
        self._stopper.hold(sandbox)
        self._stop_lock = threading.Lock()
        timer = threading.Timer(self.command_timeout, self._stop, args=(sandbox, "timed out"))
        timer.daemon = True
        output = OutputLog(self.log)
        over = False
        timer.start()
        try:
            result = backend.run_command(
                sandbox,
                recording_group(self.command, path),
                # execd's own deadline is only the backstop of the graceful stop.
                timeout=self._backstop(),
                max_output_bytes=self.max_output_bytes,
                on_output=output.feed,
            )
            over = True
        except SandboxError:
            # The backend's own failure: the sandbox ended under the command, or the command
            # was abandoned with its sandbox; either way nothing runs to be stopped.
            over = True
            raise
        finally:
            timer.cancel()
            if timer.is_alive():
                # The stop under way ends the command; its outcome is the command's.
                timer.join()
            output.close()
            if not over:
                # execution_timeout, or the task being stopped, interrupted the run.
                self._stop(sandbox, "interrupted")
        # A stop under way elsewhere (on_kill on another thread) is waited for: its outcome
        # is the command's.
        with self._stop_lock:
            stopped = self._stopped
        if self._killed:
            # However the command ended, the task did not succeed: a handler of SIGTERM
            # that exits 0 must not pass for a command that did its work.
            raise AirflowException(
                f"The task was killed while its command ran in sandbox {sandbox}"
                + ("." if stopped is None else f"; the command was {stopped}.")
            )
        return foreground_end(
            result, stopped=str(stopped) if stopped is not None and stopped.ended_it else None
        )

    def _backstop(self) -> float:
        """execd's deadline for the command: past the graceful stop's, should it not come."""
        return self.command_timeout + self.termination_grace_period + BACKSTOP_MARGIN

    def _stop(self, sandbox: str, why: str) -> None:
        """Stop the command gracefully, once, however many reasons to come; log how."""
        stopper, path, lock = self._stopper, self._group_file, self._stop_lock
        # Not waited for: a stop under way ends the command for every reason to stop it.
        if stopper is None or path is None or lock is None or not lock.acquire(blocking=False):
            return
        try:
            if self._stopped is not None:
                return
            self.log.info(
                "Stopping the command in sandbox %s (%s): SIGTERM to its process group, then "
                "SIGKILL after %gs.",
                sandbox,
                why,
                self.termination_grace_period,
            )
            try:
                stop = stop_gracefully(stopper, sandbox, path, self.termination_grace_period)
            except SandboxError:
                self.log.warning(
                    "Could not stop the command in sandbox %s gracefully; destroying the "
                    "sandbox ends it.",
                    sandbox,
                    exc_info=True,
                )
                return
            self.log.info("The command in sandbox %s was %s.", sandbox, stop)
            self._stopped = stop
        finally:
            lock.release()

    def _create(self, backend: OpenSandboxBackend, context: Context) -> str:
        """
        Create the sandbox, tell XCom its id, and kill what earlier tries of this task
        instance left, before anything runs in it.
        """
        ti = context.get("ti")
        # Read now, so that on_kill, which runs in a signal handler, asks Airflow nothing.
        self._identity = None if ti is None else TaskInstanceIdentity.of(ti)
        hook = self._hook = OpenSandboxHook(self.opensandbox_conn_id)
        hook.connection_config  # noqa: B018  (the connection is read here, not in on_kill)
        sandbox = self._sandbox_id = backend.create(spec=self._sandbox_spec())
        if self._killed:
            # on_kill came while the sandbox was being created, before its id was known here.
            self._destroy(backend, sandbox)
            raise AirflowException(
                f"The task was killed while sandbox {sandbox} was being created; it was destroyed."
            )
        if ti is not None:
            ti.xcom_push(key=SANDBOX_ID_XCOM, value=sandbox)
        if self._identity is not None:
            for left in kill_other_tries(hook, self._identity, keep=sandbox):
                earlier = left.identity.try_number if left.identity is not None else None
                self.log.info(
                    "Killed sandbox %s, left by try %s of this task instance, before this "
                    "try's command runs.",
                    left.id,
                    "unknown" if earlier is None else earlier,
                )
        return sandbox

    def _start_in_background(
        self, backend: OpenSandboxBackend, sandbox: str
    ) -> tuple[str, dict[str, str]]:
        """Start the command in the background, its stdout and stderr to files of their own."""
        paths = output_paths()
        for path in paths.values():
            backend.write_file(sandbox, path, b"")
        self._group_file = group_file()
        command_id = backend.start_command(
            sandbox,
            separated(recording_group(self.command, self._group_file), paths),
            # execd's own deadline is only the backstop of the trigger's graceful stop.
            timeout=self._backstop(),
        )
        return command_id, paths

    def _defer_to_trigger(
        self, sandbox: str, command_id: str, paths: dict[str, str], context: Context
    ) -> None:
        """Defer to the trigger that waits for the background command."""
        remaining = self._remaining_execution_time(context)
        now = time.time()
        self.defer(
            trigger=OpenSandboxCommandTrigger(
                sandbox=sandbox,
                command_id=command_id,
                opensandbox_conn_id=self.opensandbox_conn_id,
                command_timeout=self.command_timeout,
                sandbox_timeout=self.sandbox_arguments["sandbox_timeout"],
                output_paths=paths,
                task_deadline_at=(
                    None
                    if remaining is None
                    else now + remaining - min(TIMEOUT_HEADROOM, remaining / 4)
                ),
                poll_interval=self.poll_interval,
                max_output_bytes=self.max_output_bytes,
                secrets=list(self.private_env.values()),
                group_file=self._group_file,
                termination_grace_period=self.termination_grace_period,
                stop_at=now + self.command_timeout,
                # The trigger gives up on the command once execd's backstop, too, is past.
                deadline_at=now + self._backstop() + MAX_RUNNING_PAST_DEADLINE,
            ),
            method_name="execute_complete",
            # Airflow's own backstop, should the trigger not end in time: it fails the task
            # without calling back, and the sandbox then ends with its lease.
            timeout=None if remaining is None else timedelta(seconds=remaining),
        )

    def _remaining_execution_time(self, context: Context) -> float | None:
        """Seconds left of ``execution_timeout``, counted from the task's start, if it has one."""
        if self.execution_timeout is None:
            return None
        started = getattr(context.get("ti"), "start_date", None)
        if started is None:
            return self.execution_timeout.total_seconds()
        # Airflow's start dates are in UTC, whether or not they say so.
        spent = (datetime.now(UTC) - started.replace(tzinfo=started.tzinfo or UTC)).total_seconds()
        return max(0.0, self.execution_timeout.total_seconds() - spent)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Back from the trigger: judge the command, copy the outputs, destroy the sandbox."""
        backend = self._backend = self.new_backend()
        fired = CommandEvent.of(event)
        sandbox = self._sandbox_id = fired.sandbox
        # Only a command the trigger saw end is over; after a timeout it may still run.
        ending = Ending(command_over=isinstance(fired.end, CommandEnd))
        try:
            if ending.command_over:
                # Renewed from now until the sandbox is destroyed: a task resumed late in a
                # busy pool may have little of the trigger's last lease left, and copying the
                # outputs may take long.
                backend.hold(sandbox)
            return self._judge(backend, sandbox, fired.end, ending)
        finally:
            self._end(backend, sandbox, context, ending)

    # -- Judge, copy out, return --

    def _judge(
        self, backend: OpenSandboxBackend, sandbox: str, end: WaitEnd, ending: Ending
    ) -> Any:
        """:meth:`_finish`, noting in ``ending`` whether the task failed (a skip did not)."""
        try:
            value = self._finish(backend, sandbox, end)
        except AirflowSkipException:
            ending.failed = False
            raise
        ending.failed = False
        return value

    def _finish(self, backend: OpenSandboxBackend, sandbox: str, end: WaitEnd) -> Any:
        if isinstance(end, OutOfTime):
            raise AirflowTaskTimeout(end.message)
        if isinstance(end, CommandLost):
            raise AirflowException(end.message)
        if end.stopped is not None or end.timed_out:
            how = "killed" if end.stopped is None else end.stopped
            raise AirflowException(
                f"The command ran out of its {self.command_timeout:g}s in sandbox {sandbox} and "
                f"was {how}. Raise command_timeout if it needs longer.{_tail(end)}"
            )
        if end.exit_code in self.skip_on_exit_code:
            raise AirflowSkipException(f"The command exited {end.exit_code}; skipping the task.")
        if end.exit_code != 0:
            why = explained(end.exit_code, backend, sandbox, self.memory)
            raise AirflowException(
                f"The command exited {end.exit_code} in sandbox {sandbox}.{why}{_tail(end)}"
            )
        if self.outputs:
            copied = copy_outputs(backend, sandbox, self.outputs, max_bytes=self.max_file_bytes)
            for path, size in copied.items():
                self.log.info("Copied %s (%d bytes) to %s.", path, size, shown(self.outputs[path]))
        if not self.do_xcom_push:
            # Nothing would be pushed, so nothing is read: a missing xcom_path fails no task.
            return None
        return self.result(backend, sandbox, end)

    def result(self, backend: OpenSandboxBackend, sandbox: str, end: CommandEnd) -> Any:
        """
        What the task returns once the command succeeded: the JSON in ``xcom_path``, or the
        exit code and stdout's tail, with any masked secret it printed masked there too.
        """
        if self.xcom_path is not None:
            return read_result(
                backend, sandbox, self.xcom_path, multiple_outputs=self.multiple_outputs
            )
        return redact(end.xcom())

    # -- Lineage, as the OpenLineage provider asks for it --

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """The task's inputs and outputs, before any sandbox exists."""
        return self._lineage(self.outputs)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The task's inputs and outputs, and the sandbox its command ran in."""
        return self._lineage(self.outputs)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        """The task's inputs and the sandbox it had, if any: a failed task copies no output."""
        return self._lineage(None)

    def _lineage(self, outputs: Mapping[str, Any] | None) -> OperatorLineage:
        from opensandbox_provider.operators._lineage import lineage

        # A server pool's pods are started from its Pool's template, not from this image.
        from_template = isinstance(self.sandbox_arguments["warm_pool"], ServerPool)
        return lineage(
            self.files,
            outputs,
            sandbox=self._sandbox_id,
            image=None if self.snapshot or from_template else self.image,
            snapshot=self.snapshot,
        )

    # -- Destroy --

    def on_kill(self) -> None:
        # This runs in a signal handler, on the thread it interrupted, which may hold any lock
        # of the backend; so the kill goes through a client of its own, and a sandbox still
        # being created is found by this try's identity, or destroyed by _create once it has
        # its id.
        self._killed = True
        sandbox, identity = self._sandbox_id, self._identity
        if sandbox is None and identity is None:
            return
        if self._kept:
            self.log.info("Left sandbox %s, which this task kept (on_finish_action).", sandbox)
            return
        if sandbox is not None:
            # A command still running is given its grace before its sandbox goes.
            self._stop(sandbox, "the task was killed")
        # execute_complete knows its sandbox from the trigger's event and made no client, so
        # one is made here, reading the connection in the handler.
        hook = self._hook or OpenSandboxHook(self.opensandbox_conn_id)
        try:
            if sandbox is not None:
                Lifecycle(lambda: hook.connection_config).kill(sandbox)
            elif identity is not None:
                for killed in kill_this_try(hook, identity):
                    self.log.info("Killed sandbox %s, found by this try's identity.", killed)
        except SandboxError:
            self.log.warning(
                "Could not kill this task's sandbox; the server ends it when its lease of %gs "
                "runs out.",
                self.sandbox_arguments["sandbox_timeout"],
                exc_info=True,
            )

    def _end(
        self, backend: OpenSandboxBackend, sandbox: str, context: Context, ending: Ending
    ) -> None:
        """Keep the sandbox if ``on_finish_action`` says so and nothing runs there, else destroy."""
        if self._stopper is not None:
            self._stopper.hand_over(sandbox)
        # A command the graceful stop ended, or found ended, is over too.
        command_over = ending.command_over or self._stopped is not None
        if command_over and not self._killed and keeps(self.on_finish_action, failed=ending.failed):
            kept = self._keep(backend, sandbox)
            if kept is not None:
                self._kept = True
                ti = context.get("ti")
                if ti is not None:
                    ti.xcom_push(key=KEPT_SANDBOX_XCOM, value=kept.xcom())
                return
        self._destroy(backend, sandbox)

    def _keep(self, backend: OpenSandboxBackend, sandbox: str) -> KeptSandbox | None:
        """Keep the sandbox for ``keep_for`` and say how to reach it; ``None`` if it could not."""
        # Renewed no more by this task: its lease is set once, to the end of keep_for.
        backend.hand_over(sandbox)
        hook = self._hook or OpenSandboxHook(self.opensandbox_conn_id)
        try:
            until = hook.keep_sandbox(sandbox, self.keep_for.total_seconds())
        except SandboxError:
            self.log.warning(
                "Could not keep sandbox %s as on_finish_action=%r asks; destroying it.",
                sandbox,
                self.on_finish_action,
                exc_info=True,
            )
            return None
        kept = KeptSandbox(sandbox, until, self.opensandbox_conn_id)
        self.log.info(
            "Kept sandbox %s until %s (on_finish_action=%r); retries and the maintenance "
            "cleanup leave it until then, and the server ends it then. To look into it: %s",
            sandbox,
            until.isoformat(),
            self.on_finish_action,
            kept.reach(),
        )
        return kept

    def _destroy(self, backend: OpenSandboxBackend, sandbox: str) -> None:
        # A failure to destroy is only logged, since the server ends an unrenewed sandbox
        # within one lease anyway.
        try:
            backend.destroy(sandbox)
        except SandboxError:
            self.log.warning(
                "Could not destroy sandbox %s; the server ends it when its lease of %gs runs out.",
                sandbox,
                self.sandbox_arguments["sandbox_timeout"],
                exc_info=True,
            )


def _misread_as_a_script(operator: OpenSandboxOperator) -> bool:
    """Whether Airflow would read ``command`` as a script file's name although it holds a space
    (``sh count.sh``): only a lone file name (``scripts/clean.bash``) names a script file."""
    command = operator.command
    return (
        isinstance(command, str)
        and command.endswith(tuple(operator.template_ext))
        and any(character.isspace() for character in command)
    )


def _tail(end: CommandEnd) -> str:
    """The last lines of the command's stderr, for a failure's message."""
    lines = end.stderr.rstrip("\n").splitlines()[-FAILURE_TAIL_LINES:]
    if not lines:
        return " It printed nothing to stderr."
    return " The last lines of its stderr:\n" + "\n".join(lines)
