"""Run a shell command in a sandbox of its own, on an OpenSandbox server, as an Airflow task."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxSpec
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowSkipException,
    BaseOperator,
    conf,
)

from opensandbox_provider._output_log import OutputLog
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.operators._files import copy_outputs, write_files
from opensandbox_provider.operators._tries import kill_other_tries, kill_this_try
from opensandbox_provider.sandbox._identity import TaskInstanceIdentity
from opensandbox_provider.sandbox.backend import OpenSandboxBackend
from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger

if TYPE_CHECKING:
    from airflow.providers.common.ai.sandbox.base import SandboxExecResult
    from airflow.providers.common.compat.sdk import Context, ObjectStoragePath

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


@dataclass(frozen=True)
class CommandEnd:
    """How a command ended, foreground or background, as the operator judges it."""

    exit_code: int
    stdout: str
    # The stderr of a foreground command; a background command has one combined output.
    stderr: str
    stderr_label: str
    timed_out: bool
    # Why the sandbox ended under the command, when it did.
    terminated: str | None = None

    @classmethod
    def of(cls, result: SandboxExecResult) -> CommandEnd:
        return cls(
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            stderr_label="stderr",
            timed_out=result.timed_out,
            terminated=result.stderr.strip() if result.sandbox_terminated else None,
        )


class OpenSandboxOperator(BaseOperator):
    """
    Run ``command`` in a new sandbox on an OpenSandbox server, then destroy the sandbox.

    The sandbox is created exactly as :class:`~opensandbox_provider.sandbox.OpenSandboxBackend`
    creates one, since it is that backend that creates it: the same resources, metadata and
    network policy, and the same fail-closed proof that a deny-by-default policy is enforced
    before anything runs. ``files`` are written before the command, the command's output is
    logged line by line as it is printed, ``outputs`` are copied out after it succeeds, and
    the sandbox is destroyed however the task ends, on kill too.

    Exit code 0 succeeds and returns ``{"exit_code": 0, "stdout": <tail>}``; a code in
    ``skip_on_exit_code`` skips the task, as for ``BashOperator``; any other fails it, quoting
    the last lines of stderr.

    With ``deferrable=True`` the command is started in the background and the task defers to
    :class:`~opensandbox_provider.triggers.opensandbox.OpenSandboxCommandTrigger`, which logs
    its output from the triggerer and keeps the sandbox alive until it ends; the worker comes
    back only to copy the outputs and destroy the sandbox.

    :param command: The shell command to run. Templated.
    :param image: The image the sandbox runs.
    :param cpu: The sandbox's CPU limit (``"1"``, ``"500m"``).
    :param memory: The sandbox's memory limit (``"2Gi"``).
    :param env: Environment variables of the sandbox, added to ``spec.env``. Templated.
    :param spec: What the sandbox is provisioned with. The default,
        ``SandboxSpec()``, denies all egress; ``SandboxSpec(block_network=False)`` opens it.
    :param snapshot: The id of a snapshot to start the sandbox from instead of ``image``, as
        :func:`~opensandbox_provider.sandbox.prepare_snapshot` returns it. Templated, so
        that it can come from the task that prepared it:
        ``"{{ ti.xcom_pull('prepare') }}"``. The sandbox still gets this task's ``spec``.
    :param volumes: Named volumes and host paths mounted into the sandbox, read-only unless
        they say otherwise (see :class:`~opensandbox_provider.sandbox.NamedVolume`).
    :param workdir: An absolute path, created with the sandbox, where the command runs and
        relative paths in ``files`` and ``outputs`` resolve.
    :param files: Sandbox path to content: text (templated), bytes, or an
        ``ObjectStoragePath`` whose content is copied in.
    :param outputs: Sandbox path to the ``ObjectStoragePath`` (or URL) it is copied to once
        the command has succeeded.
    :param command_timeout: Seconds the command may run; execd kills it then.
    :param skip_on_exit_code: Exit code(s) that skip the task rather than fail it.
    :param opensandbox_conn_id: The connection naming the server.
    :param deferrable: Wait for the command in the triggerer instead of on a worker.
    :param poll_interval: Seconds between the trigger's looks at a background command.
    :param sandbox_timeout: The sandbox's lease on the server, in seconds (see the backend).
    :param ready_timeout: Seconds a new sandbox has to start answering.
    :param max_output_bytes: How much of the tail of stdout and of stderr is kept.
    :param max_file_bytes: The largest file copied in or out.
    """

    template_fields: Sequence[str] = ("command", "env", "files", "snapshot")
    template_fields_renderers = {"command": "bash", "env": "json", "files": "json"}
    ui_color = "#e8f4f0"

    def __init__(
        self,
        *,
        command: str,
        image: str = "python:3.12-slim",
        cpu: str = "1",
        memory: str = "2Gi",
        env: Mapping[str, str] | None = None,
        spec: SandboxSpec | None = None,
        snapshot: str | None = None,
        volumes: Sequence[NamedVolume | HostPath] | None = None,
        workdir: str | None = None,
        files: Mapping[str, str | bytes | ObjectStoragePath] | None = None,
        outputs: Mapping[str, str | ObjectStoragePath] | None = None,
        command_timeout: float = 3600.0,
        skip_on_exit_code: int | Iterable[int] | None = 99,
        opensandbox_conn_id: str | None = OpenSandboxHook.default_conn_name,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 1.0,
        sandbox_timeout: float = 3600.0,
        ready_timeout: float = 120.0,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.command = command
        self.env = dict(env or {})
        self.spec = SandboxSpec() if spec is None else spec
        self.snapshot = snapshot
        self.files = dict(files or {})
        self.outputs = dict(outputs or {})
        self.command_timeout = command_timeout
        self.max_output_bytes = max_output_bytes
        self.max_file_bytes = max_file_bytes
        self.skip_on_exit_code = (
            frozenset()
            if skip_on_exit_code is None
            else frozenset([skip_on_exit_code])
            if isinstance(skip_on_exit_code, int)
            else frozenset(skip_on_exit_code)
        )
        self.opensandbox_conn_id = opensandbox_conn_id
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        # What the sandbox is created with, as the backend takes it.
        self.sandbox_arguments: dict[str, Any] = {
            "image": image,
            "cpu": cpu,
            "memory": memory,
            "sandbox_timeout": sandbox_timeout,
            "ready_timeout": ready_timeout,
            "workdir": workdir,
            "volumes": volumes,
        }
        # Built once here only for the backend's own checks, so that a mistake fails when the
        # Dag is parsed; each run builds its own, since a backend holds locks and threads.
        self.new_backend()
        self._backend: OpenSandboxBackend | None = None
        self._sandbox_id: str | None = None
        # What on_kill needs, set before the sandbox is asked for: see _create.
        self._hook: OpenSandboxHook | None = None
        self._identity: TaskInstanceIdentity | None = None
        self._killed = False

    # ------------------------------------------------------------------
    # Create, write the files, run
    # ------------------------------------------------------------------

    def new_backend(self) -> OpenSandboxBackend:
        """The backend that creates, drives and destroys this task's sandbox."""
        # The snapshot is read at run time, once its template is rendered.
        return OpenSandboxBackend(
            self.opensandbox_conn_id, snapshot=self.snapshot, **self.sandbox_arguments
        )

    def execute(self, context: Context) -> Any:
        backend = self._backend = self.new_backend()
        spec = self.spec
        if self.env:
            spec = replace(spec, env={**(spec.env or {}), **self.env})
        sandbox = self._create(backend, spec, context)
        deferred = False
        try:
            write_files(backend, sandbox, self.files, max_bytes=self.max_file_bytes)
            if self.deferrable:
                command_id = backend.start_command(
                    sandbox, self.command, timeout=self.command_timeout
                )
                # From here the triggerer renews the sandbox, and on_kill there destroys it.
                backend.hand_over(sandbox)
                deferred = True
                self.defer(
                    trigger=OpenSandboxCommandTrigger(
                        sandbox=sandbox,
                        command_id=command_id,
                        opensandbox_conn_id=self.opensandbox_conn_id,
                        command_timeout=self.command_timeout,
                        sandbox_timeout=self.sandbox_arguments["sandbox_timeout"],
                        poll_interval=self.poll_interval,
                        max_output_bytes=self.max_output_bytes,
                    ),
                    method_name="execute_complete",
                )
            output = OutputLog(self.log)
            try:
                result = backend.run_command(
                    sandbox,
                    self.command,
                    timeout=self.command_timeout,
                    max_output_bytes=self.max_output_bytes,
                    on_output=output.feed,
                )
            finally:
                output.close()
            return self._finish(backend, sandbox, CommandEnd.of(result))
        finally:
            if not deferred:
                self._destroy(backend, sandbox)

    def _create(self, backend: OpenSandboxBackend, spec: SandboxSpec, context: Context) -> str:
        """
        Create the sandbox, tell XCom its id, and kill what earlier tries of this task
        instance left, before anything runs in it.
        """
        ti = context.get("ti")
        # Read now, so that on_kill, which runs in a signal handler, asks Airflow nothing.
        self._identity = None if ti is None else TaskInstanceIdentity.of(ti)
        hook = self._hook = OpenSandboxHook(self.opensandbox_conn_id)
        hook.connection_config  # noqa: B018  (the connection is read here, not in on_kill)
        sandbox = self._sandbox_id = backend.create(spec=spec)
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

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Back from the trigger: judge the command, copy the outputs, destroy the sandbox."""
        backend = self._backend = self.new_backend()
        sandbox = self._sandbox_id = event["sandbox"]
        try:
            if event["status"] != "ended":
                raise AirflowException(event["message"])
            # As after a foreground command: nothing the command did may have widened the
            # sandbox's egress unseen, whatever it exited with.
            backend.recheck_policy(
                sandbox,
                self.spec,
                after=f"{self.command!r} exited {event['exit_code']} in the background",
            )
            end = CommandEnd(
                exit_code=event["exit_code"],
                stdout=event["output"],
                stderr=event["output"],
                stderr_label="output",
                timed_out=event["timed_out"],
            )
            return self._finish(backend, sandbox, end)
        finally:
            self._destroy(backend, sandbox)

    # ------------------------------------------------------------------
    # Judge, copy out, return
    # ------------------------------------------------------------------

    def _finish(self, backend: OpenSandboxBackend, sandbox: str, end: CommandEnd) -> Any:
        if end.terminated is not None:
            raise AirflowException(end.terminated)
        if end.timed_out:
            raise AirflowException(
                f"The command ran out of its {self.command_timeout:g}s in sandbox {sandbox} and "
                f"was killed. Raise command_timeout if it needs longer.{_tail(end)}"
            )
        if end.exit_code in self.skip_on_exit_code:
            raise AirflowSkipException(f"The command exited {end.exit_code}; skipping the task.")
        if end.exit_code != 0:
            raise AirflowException(
                f"The command exited {end.exit_code} in sandbox {sandbox}.{_tail(end)}"
            )
        if self.outputs:
            copied = copy_outputs(backend, sandbox, self.outputs, max_bytes=self.max_file_bytes)
            for path, size in copied.items():
                self.log.info("Copied %s (%d bytes) to %s.", path, size, self.outputs[path])
        return self.result(backend, sandbox, end)

    def result(self, backend: OpenSandboxBackend, sandbox: str, end: CommandEnd) -> Any:
        """What the task returns once the command succeeded: its exit code and stdout's tail."""
        return {"exit_code": end.exit_code, "stdout": end.stdout}

    # ------------------------------------------------------------------
    # Destroy
    # ------------------------------------------------------------------

    def on_kill(self) -> None:
        # This runs in a signal handler, on the thread it interrupted, which may hold any lock
        # of the backend; so the kill goes through a client of its own, and a sandbox still
        # being created is found by this try's identity, or destroyed by _create once it has
        # its id.
        self._killed = True
        hook, sandbox, identity = self._hook, self._sandbox_id, self._identity
        if hook is None:
            return
        try:
            if sandbox is not None:
                hook.kill_sandbox(sandbox)
                self.log.info("Killed sandbox %s.", sandbox)
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

    def _destroy(self, backend: OpenSandboxBackend, sandbox: str) -> None:
        # Kept in one place so on_kill and the task's end agree; a failure to destroy is only
        # logged, since the server ends an unrenewed sandbox within one lease anyway.
        try:
            backend.destroy(sandbox)
        except Exception:
            self.log.warning(
                "Could not destroy sandbox %s; the server ends it when its lease of %gs runs out.",
                sandbox,
                self.sandbox_arguments["sandbox_timeout"],
                exc_info=True,
            )


def _tail(end: CommandEnd) -> str:
    """The last lines of the command's stderr (or output), for a failure's message."""
    lines = end.stderr.rstrip("\n").splitlines()[-FAILURE_TAIL_LINES:]
    if not lines:
        return f" It printed nothing to {end.stderr_label}."
    return f" The last lines of its {end.stderr_label}:\n" + "\n".join(lines)
