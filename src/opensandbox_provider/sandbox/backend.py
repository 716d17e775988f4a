"""The OpenSandbox backend for common-ai's ``SandboxToolset``: the story of one sandbox."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx
from airflow.providers.common.ai.sandbox.base import (
    EXPIRES_AT_TAG,
    HOLDER_TAG,
    AttachableSandboxBackend,
    SandboxError,
    SandboxExecResult,
    SandboxFileTooLargeError,
    SandboxTerminalError,
    is_sandbox_handle,
)

from opensandbox_provider import _metrics, _tags
from opensandbox_provider._deployment import DeploymentUnknownError, deployment_id
from opensandbox_provider._errors import as_sandbox_errors, sdk_exceptions, status_of
from opensandbox_provider._identity import current_identity
from opensandbox_provider._sdk import OpenSandboxNotInstalled, require_sdk
from opensandbox_provider._url_secrets import without_url_secrets
from opensandbox_provider.egress import _policy
from opensandbox_provider.execd import _stream_end as stream_ends
from opensandbox_provider.execd._execd import EXECD_PORT
from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook
from opensandbox_provider.sandbox import _arguments, _lifecycle, _parking, _pause, _volumes
from opensandbox_provider.sandbox._abandoned import Abandoned
from opensandbox_provider.sandbox._backend_settings import SETTINGS as _SETTINGS
from opensandbox_provider.sandbox._backend_settings import checked_settings
from opensandbox_provider.sandbox._creation import connect, create_cold, route, wait_until_ready
from opensandbox_provider.sandbox._diagnosis import why_not_ready
from opensandbox_provider.sandbox._lease import Leases, renewal_interval
from opensandbox_provider.sandbox._lifecycle import ENDED_STATES, Lifecycle
from opensandbox_provider.sandbox._limits import byte_budget
from opensandbox_provider.sandbox._outcome import command_result, log_line, replaced_result
from opensandbox_provider.sandbox._record import SandboxRecord
from opensandbox_provider.sandbox._sandbox_files import SandboxFiles
from opensandbox_provider.sandbox._source import advising
from opensandbox_provider.sandbox._template import CreationTemplate
from opensandbox_provider.sandbox._try_end import TRY_ENDS

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import BinaryIO

    from airflow.providers.common.ai.sandbox.base import AttachedSandbox, SandboxSpec
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.models.sandboxes import SandboxInfo

    from opensandbox_provider._identity import TaskInstanceIdentity
    from opensandbox_provider.hooks._sandboxes import SandboxSummary
    from opensandbox_provider.sandbox._parking import DurableSlot
    from opensandbox_provider.sandbox._source import SandboxSource

log = logging.getLogger(__name__)

# A listing is names, never content. Past this many the model is told to narrow the path
# rather than the worker holding them all.
MAX_LIST_ENTRIES = 10_000


class OpenSandboxBackend(AttachableSandboxBackend):
    """
    Run sandbox tools in sandboxes on an OpenSandbox server.

    OpenSandbox runs sandboxes on Docker or Kubernetes behind one API, so the worker needs
    network access to the server and nothing else. The server is named by an
    ``opensandbox`` connection (see
    :class:`~opensandbox_provider.hooks.opensandbox.OpenSandboxHook`), and a generic
    connection of the shape common-ai's built-in backend reads works too.

    Each sandbox's story (the egress policy proven before its first command, commands read
    from execd's event stream under their deadlines, the lease renewed while it is held, a
    durable agent's sandbox parked across retries, one provisioned for other tasks to attach
    to) is told in :doc:`/backend`.

    :param opensandbox_conn_id: The connection naming the server, or ``None`` for the
        ``OPEN_SANDBOX_DOMAIN`` and ``OPEN_SANDBOX_API_KEY`` environment variables.
    :param image: The image each sandbox runs.
    :param cpu: The CPU limit of each sandbox, as OpenSandbox takes it (``"1"``, ``"500m"``).
    :param memory: The memory limit of each sandbox (``"2Gi"``).
    :param resources: Limits of other resources, by name as the server passes them on:
        ``{"gpu": "1"}`` (the server's own GPU key), ``{"nvidia.com/gpu": "1"}``,
        ``{"ephemeral-storage": "10Gi"}``. Each name and amount is checked for form here;
        what each runtime does with each is in :doc:`/operator`, "Resources".
    :param cpu_request: What each sandbox asks a Kubernetes scheduler for of CPU, at most
        ``cpu``; ``None`` takes the connection's ``cpu_request``, else the limit. The Docker
        runtime has no requests.
    :param memory_request: The same for memory, at most ``memory``.
    :param registry_conn_id: A ``docker`` connection (host the registry, login, password)
        whose login the server pulls ``image`` with; the image must be on that registry. The
        login goes to the server in the create request alone, never into a log or the
        sandbox's metadata (see :doc:`/operator`, "Private images").
    :param sandbox_timeout: The lease, in seconds, at least 60: how long the server keeps a
        sandbox this backend creates after the last renewal, and how long a provisioned
        sandbox waits between tasks. A sandbox another backend created keeps its creator's.
    :param ready_timeout: Seconds a new sandbox has to start answering before it is
        destroyed and creation fails.
    :param use_server_proxy: Reach sandboxes through the server instead of their published
        ports. ``None`` takes the connection's ``use_server_proxy`` extra, and on when unset.
    :param workdir: An absolute path, created with each sandbox, where every command runs and
        every relative path of the file tools resolves. Stamped on a sandbox provisioned for
        another task, whose backend then uses it whatever its own ``workdir`` says.
    :param snapshot: The id of a snapshot to start each sandbox from instead of ``image``,
        as :func:`~opensandbox_provider.sandbox.prepare_snapshot` returns it. The sandbox
        gets the snapshot's files and nothing else of the sandbox it was taken from: its
        network policy, environment and owner are those of the spec it is created with.
    :param volumes: Data mounted into each sandbox this backend creates:
        :class:`~opensandbox_provider.sandbox.NamedVolume` and
        :class:`~opensandbox_provider.sandbox.HostPath` entries, read-only unless they say
        otherwise. A host path must be under the server's ``[storage] allowed_host_paths``.
    :param pause_when_released: Pause a sandbox when a task releases it and no other holds
        it, so that it waits for the next task without using CPU; its lease runs on while it
        is paused. The next ``attach``, command or file operation on it, from any backend,
        resumes it first. Off by default: resuming costs the next task a moment.
    :param warm_pool: A :class:`~opensandbox_provider.pool.WarmPool` to take each sandbox
        from, ready, instead of creating it, destroyed after use as a created one is; or a
        :class:`~opensandbox_provider.pool.ServerPool`, a Kubernetes ``Pool`` the server takes
        each sandbox from. What each serves, and what it refuses, is in :doc:`/pools`.
    :param park_margin: Seconds a durable agent's sandbox waits for its task's next try
        beyond the task's retry delay, a quarter of an hour by default (see :doc:`/backend`,
        "A durable agent's sandbox").
    """

    name = "opensandbox"

    def __init__(
        self,
        opensandbox_conn_id: str | None = OpenSandboxHook.default_conn_name,
        *,
        image: str = "python:3.12-slim",
        cpu: str = "1",
        memory: str = "2Gi",
        resources: Mapping[str, str] | None = None,
        cpu_request: str | None = None,
        memory_request: str | None = None,
        registry_conn_id: str | None = None,
        sandbox_timeout: float = 3600.0,
        ready_timeout: float = 120.0,
        use_server_proxy: bool | None = None,
        workdir: str | None = None,
        snapshot: str | None = None,
        volumes: Sequence[_volumes.Mount] | None = None,
        pause_when_released: bool = False,
        warm_pool: SandboxSource | None = None,
        park_margin: float = _parking.PARK_MARGIN,
    ) -> None:
        # Every argument but the connection id, by name.
        settings = checked_settings(**{k: v for k, v in locals().items() if k in _SETTINGS})
        self.opensandbox_conn_id = opensandbox_conn_id
        self.image: str = settings["image"]
        self.cpu: str = settings["cpu"]
        self.memory: str = settings["memory"]
        self.resources: dict[str, str] = settings["resources"]
        self.cpu_request: str | None = settings["cpu_request"]
        self.memory_request: str | None = settings["memory_request"]
        self.resource_requests: dict[str, str] = settings["resource_requests"]
        self.registry_conn_id: str | None = settings["registry_conn_id"]
        self.sandbox_timeout: float = settings["sandbox_timeout"]
        self.ready_timeout: float = settings["ready_timeout"]
        self.use_server_proxy: bool | None = settings["use_server_proxy"]
        self.workdir: str | None = settings["workdir"]
        self.snapshot: str | None = settings["snapshot"]
        self.volumes: tuple[_volumes.Mount, ...] = settings["volumes"]
        self.pause_when_released: bool = settings["pause_when_released"]
        self.warm_pool: SandboxSource | None = settings["warm_pool"]
        self.park_margin: float = settings["park_margin"]
        self._start_afresh()

    def _start_afresh(self) -> None:
        """What the backend knows and holds at run time, none of it yet."""
        self._hook: OpenSandboxHook | None = None
        # One backend serves every run of a task in the process at once, so what it knows
        # about a sandbox is kept by handle, never on the instance.
        self._sandboxes: dict[str, SandboxRecord] = {}
        # Sandboxes this backend destroyed to end a command (see _abandoned).
        self._abandoned = Abandoned()
        # Durable tries' sandboxes, each with its slot, until its try ends; and each slot a try
        # has had a sandbox for, so that one lost under a command is replaced, not looked for.
        self._durable: dict[str, DurableSlot] = {}
        self._served: set[tuple[TaskInstanceIdentity, str]] = set()
        self._lock = threading.Lock()
        self._leases = Leases(self.renew)
        # The server's lifecycle API, one client for every call this backend makes to it.
        self._lifecycle = Lifecycle(self._connection_config)

    def __getstate__(self) -> dict[str, Any]:
        # Airflow 3.0 deep-copies a task before it runs it, its toolsets' backend included. A
        # lock cannot be copied, and the sandboxes an instance tracks are its own: a copy
        # carries the settings alone and starts afresh, as the Dag file would make it.
        return {name: getattr(self, name) for name in ("opensandbox_conn_id", *_SETTINGS)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start_afresh()

    @classmethod
    def check_arguments(cls, **arguments: Any) -> None:
        """
        Check the keyword arguments a backend would be made with, as making it would, without
        making one: the operator does when its Dag is parsed, and each run makes its own.
        """
        bound = inspect.signature(cls.__init__).bind_partial(**arguments)
        bound.apply_defaults()
        bound.arguments.pop("opensandbox_conn_id", None)
        checked_settings(**bound.arguments)

    # --- Configure ---

    def _connection_config(self) -> ConnectionConfigSync:
        """The SDK's config for the server, read from the connection on first use."""
        try:
            return self._server().connection_config
        except (InvalidConnectionError, OpenSandboxNotInstalled) as e:
            raise SandboxTerminalError(str(e)) from e

    def _server(self) -> OpenSandboxHook:
        if self._hook is None:
            self._hook = OpenSandboxHook(
                self.opensandbox_conn_id, use_server_proxy=self.use_server_proxy
            )
        return self._hook

    # --- Create ---

    def create(
        self, *, spec: SandboxSpec | None = None, identity: TaskInstanceIdentity | None = None
    ) -> str:
        """
        A new sandbox for ``spec``, stamped with the running task's identity, or with
        ``identity`` when given: the executor creates a try's sandbox in the scheduler, where
        no task runs.
        """
        # The spec's policy and environment, derived once: the create, a pool's draw and the
        # egress proof below all read them from the template.
        template = self.creation_template(spec)
        try:
            # First, so that a worker without the SDK is told how to install it before anything
            # else it lacks (outside Airflow, a deployment id) is looked for.
            require_sdk()
        except OpenSandboxNotInstalled as e:
            raise SandboxTerminalError(str(e)) from e
        try:
            metadata = _tags.creation_metadata(
                spec,
                workdir=self.workdir,
                lease=self.sandbox_timeout,
                identity=current_identity() if identity is None else identity.metadata(),
                deployment=deployment_id(),
            )
        except (ValueError, DeploymentUnknownError) as e:
            raise SandboxTerminalError(f"Could not create a sandbox: {e}") from e
        config = self._connection_config()
        # A sandbox provisioned for other tasks waits for them, never for a retry.
        provisioned = spec is not None and spec.owner is not None
        slot = None if provisioned else _parking.durable_slot(spec, margin=self.park_margin)
        if slot is not None:
            adopted = self._adopt_parked(slot)
            if adopted is not None:
                return adopted
            metadata.update(slot.metadata())
        started = time.monotonic()
        template = template.stamped(metadata)
        drawn, sdk = self.warm_pool, None
        if drawn is not None:
            sdk = drawn.take(template, lifecycle=self._lifecycle, config=config)
        if sdk is None:
            sdk, drawn = create_cold(template, config), None
        record = SandboxRecord(
            sdk,
            expires_at=started + self.sandbox_timeout,
            lease=self.sandbox_timeout if slot is None else slot.hold_lease(self.sandbox_timeout),
            workdir=self.workdir,
        )
        # Known by handle from here on, so that a failure below destroys it as any other.
        with self._lock:
            self._sandboxes[sdk.id] = record
        how, made_from = drawn.origin(template) if drawn else ("Created", template.made_from)
        log.info(
            "%s OpenSandbox sandbox %s from %s with %s, in %.2fs.",
            how,
            sdk.id,
            made_from,
            _policy.describe(template.policy),
            time.monotonic() - started,
        )
        try:
            waited = wait_until_ready(
                record,
                ready_timeout=self.ready_timeout,
                diagnose=lambda: why_not_ready(
                    self._lifecycle,
                    sdk.id,
                    image=template.pulled_image,
                    registry_conn_id=template.registry_conn_id,
                ),
            )
            if template.policy is not None:
                with advising(drawn):
                    _policy.require_enforced(record.http, template.policy, sandbox=sdk.id)
                log.info(
                    "Sandbox %s: the egress sidecar enforces the policy in %s mode.",
                    sdk.id,
                    _policy.ADDRESS_LAYER_MODE,
                )
            if record.workdir is not None:
                record.execd.create_working_directory(record.workdir)
            if not provisioned:
                # The toolset asking holds it until it destroys it, a durable try until it
                # ends. A sandbox provisioned for another task waits for that task unheld, for
                # one lease.
                if slot is not None:
                    self._keep_until_the_try_ends(sdk.id, slot)
                self._hold(record, renewed=drawn is not None and slot is None)
        except BaseException:
            self._destroy_quietly(sdk.id, after="its creation failed")
            raise
        log.info(
            "Sandbox %s is ready: execd answered its health check after %.2fs.", sdk.id, waited
        )
        _metrics.sandbox_created(route(drawn), time.monotonic() - started)
        return sdk.id

    def creation_template(self, spec: SandboxSpec | None) -> CreationTemplate:
        """
        What a sandbox for ``spec`` is created with: this backend's arguments and the spec's.
        Raises ``SandboxTerminalError`` for a spec whose policy cannot be enforced or whose
        environment cannot be sent.
        """
        return CreationTemplate(
            image=self.image,
            snapshot=self.snapshot,
            cpu=self.cpu,
            memory=self.memory,
            resources=dict(self.resources),
            requests=dict(self.resource_requests),
            registry_conn_id=self.registry_conn_id,
            spec=spec,
            policy=_policy.network_policy(spec),
            env=_arguments.environment(spec),
            volumes=tuple(self.volumes),
            lease=self.sandbox_timeout,
            ready_timeout=self.ready_timeout,
            conn_id=self.opensandbox_conn_id,
        )

    # --- Reconnect ---

    def _sandbox(self, handle: str) -> SandboxRecord:
        """The sandbox behind ``handle``, reconnecting to one this process has not seen."""
        with self._lock:
            record = self._sandboxes.get(handle)
        if record is not None:
            return record
        if not is_sandbox_handle(handle):
            raise SandboxTerminalError(f"{handle!r} is not a sandbox handle.")
        config = self._connection_config()
        info = self._info(handle, doing=f"reconnect to sandbox {handle}")
        info = _pause.settled(self._lifecycle, info, within=self.ready_timeout)
        # Endpoints are resolved after the resume: a runtime may move them across a pause.
        resumed = None
        if info.status.state == _pause.PAUSED_STATE:
            resumed = _pause.resume(self._lifecycle, handle, within=self.ready_timeout)
        sdk = connect(handle, config=config, ready_timeout=self.ready_timeout)
        record = SandboxRecord.reconnected(
            sdk, info, lease=self.sandbox_timeout, workdir=self.workdir
        )
        if resumed is not None:
            try:
                self._check_resumed(record, took=resumed)
            except BaseException:
                sdk.close()
                raise
        with self._lock:
            kept = self._sandboxes.setdefault(handle, record)
        if kept is not record:
            sdk.close()
        return kept

    def _check_resumed(self, record: SandboxRecord, *, took: float) -> None:
        """
        Wait for execd in a sandbox just resumed. Its policy is not read again: the pause froze
        the sidecar's rules with it, and a read now would carry the token to a guest that ran
        before the pause (docs/egress.rst).
        """
        sandbox = record.sdk.id
        with as_sandbox_errors(f"reach sandbox {sandbox}"):
            waited = record.execd.wait_until_answering(time.monotonic() + self.ready_timeout)
        if waited is None:
            raise SandboxError(
                f"Sandbox {sandbox} was resumed, but execd did not answer within "
                f"{self.ready_timeout:g}s. Retry the task, or raise ready_timeout."
            )
        log.info(
            "Resumed sandbox %s: execd answered %.2fs after the resume was asked for.",
            sandbox,
            took + waited,
        )

    # --- Run a command ---

    def run_command(
        self,
        sandbox: str,
        command: str,
        *,
        timeout: float,
        max_output_bytes: int,
        on_output: Callable[[str, bytes], None] | None = None,
    ) -> SandboxExecResult:
        """
        Run ``command`` and return how it ended, as the contract has it.

        ``on_output``, which the toolset never passes, is handed ``"stdout"`` or ``"stderr"``
        and each piece of output as it arrives, whole lines, so an operator can log them live.
        """
        # Arguments first: a bad one fails the same way whatever the sandbox's state.
        _arguments.check_command(command, timeout)
        max_output_bytes = byte_budget(max_output_bytes, "max_output_bytes")
        if sandbox in self._abandoned:
            return replaced_result(sandbox)
        # Reconnecting happens before the clock starts: it is not the command's time.
        record, timeout_ms = self._command_slot(sandbox, timeout)
        applied = timeout_ms / 1000
        started = time.monotonic()
        # What Execd.run lets through: an error answer and httpx's failures, and the SDK's from
        # the endpoint lookup.
        let_through: tuple[type[Exception], ...] = (httpx.HTTPError, *sdk_exceptions())
        with as_sandbox_errors(f"run a command in sandbox {record.sdk.id}"):
            try:
                streamed = record.execd.run(
                    command,
                    timeout_ms=timeout_ms,
                    max_output_bytes=max_output_bytes,
                    cwd=record.workdir,
                    on_output=on_output,
                    gone=lambda: _lifecycle.gone(record.sdk),
                )
            except let_through as e:
                # A transport error may be the sandbox ending under the command; the server
                # knows.
                if status_of(e) is None and _lifecycle.gone(record.sdk):
                    return self._abandoned.ended_under_command(record.sdk.id, e)
                raise
        elapsed = time.monotonic() - started
        end = streamed.stream_end
        if isinstance(end, stream_ends.Abandoned):
            log.warning(
                "Sandbox %s: %s; destroying the sandbox to end the command.", sandbox, end.why
            )
            _metrics.count(_metrics.STREAM_ABANDONED)
            self._abandoned.add(sandbox)
            self._destroy_quietly(sandbox, after="abandoning its command")
        elif streamed.ending is None and _lifecycle.gone(record.sdk):
            # Through the server's proxy a sandbox that dies mid-command looks like a stream
            # that simply ended; only the server can tell, and a dead sandbox is terminal.
            return self._abandoned.ended_under_command(record.sdk.id, None)
        result = command_result(streamed, elapsed=elapsed, applied=applied, requested=timeout)
        if not isinstance(end, stream_ends.Abandoned):
            line = log_line(command, streamed, result, elapsed=elapsed, applied=applied)
            log.info("Sandbox %s: %s.", sandbox, line)
        return result

    def start_command(self, sandbox: str, command: str, *, timeout: float) -> str:
        """
        Start ``command`` in the background and return its id, as soon as execd has started it.

        execd still kills it ``timeout`` seconds after it starts; its output and its end are
        read by id (docs/execd-wire.rst, wire-status, wire-logs).
        """
        _arguments.check_command(command, timeout)
        record, timeout_ms = self._command_slot(sandbox, timeout)
        with as_sandbox_errors(f"start a command in sandbox {record.sdk.id}"):
            command_id = record.execd.start(command, timeout_ms=timeout_ms, cwd=record.workdir)
        log.info(
            "Sandbox %s: started %r in the background as %s.",
            sandbox,
            without_url_secrets(command),
            command_id,
        )
        return command_id

    def execd_endpoint(self, sandbox: str) -> tuple[str, dict[str, str]]:
        """Where the sandbox's execd answers, and the headers a request to it needs."""
        return self._sandbox(sandbox).http.target(EXECD_PORT, "")

    def _command_slot(self, sandbox: str, timeout: float) -> tuple[SandboxRecord, int]:
        """The sandbox to run a command in, and the command's deadline in milliseconds."""
        record = self._sandbox(sandbox)
        return record, max(1, round(record.fit_to_lifetime(timeout) * 1000))

    # --- Files ---

    def read_file(self, sandbox: str, path: str, *, max_bytes: int) -> bytes:
        max_bytes = byte_budget(max_bytes, "max_bytes")
        with self._files(sandbox).download(path, max_bytes=max_bytes, purpose="read") as transfer:
            data = transfer.read(max_bytes)
        if len(data) > max_bytes:
            # A file may grow after it was sized; the overflow byte arrived either way.
            size = max(transfer.entry.size, len(data))
            raise SandboxFileTooLargeError(transfer.path, size, max_bytes)
        return data

    def write_file(self, sandbox: str, path: str, content: bytes) -> None:
        self._files(sandbox).write(path, content)

    def list_directory(self, sandbox: str, path: str) -> list[tuple[str, bool]]:
        entries = self._files(sandbox).list_directory(path, limit=MAX_LIST_ENTRIES)
        return [(entry.name, entry.is_directory) for entry in entries]

    def export_file(self, sandbox: str, path: str, dest: BinaryIO, *, max_bytes: int) -> int:
        """Copy a regular file out through execd's download API, under the whole-copy deadline."""
        max_bytes = byte_budget(max_bytes, "max_bytes")
        with self._files(sandbox).download(path, max_bytes=max_bytes, purpose="export") as transfer:
            written = transfer.copy_to(dest, max_bytes)
        self._check_export_size(transfer.path, expected=transfer.entry.size, written=written)
        return written

    def _files(self, sandbox: str) -> SandboxFiles:
        return SandboxFiles(self._sandbox(sandbox))

    # --- Attach: tags, and the lease a holder keeps ---

    def read_tags(self, sandbox: str) -> dict[str, str]:
        info = self._info(sandbox, doing=f"read the tags of sandbox {sandbox}")
        if info.status.state in ENDED_STATES:
            raise SandboxTerminalError(
                f"Sandbox {sandbox} is {info.status.state} on the server: it has ended, so no "
                "task can attach to it. Provision a new one."
            )
        return _tags.read(sandbox, info.metadata, expires_at=info.expires_at)

    def write_tags(self, sandbox: str, tags: Mapping[str, str]) -> None:
        # The expiry is the server's and moves only through renewals; it is not stored.
        wanted = {name: value for name, value in tags.items() if name != EXPIRES_AT_TAG}
        doing = f"write the tags of sandbox {sandbox}"
        current = self._info(sandbox, doing=doing).metadata or {}
        try:
            changes = _tags.patch(current, wanted)
        except ValueError as e:
            raise SandboxError(f"Could not {doing}: {e}") from e
        if changes:
            with self._lifecycle.call(doing) as lifecycle:
                lifecycle.patch_sandbox_metadata(sandbox, changes)

    def attach(self, sandbox: str, *, owner: str, holder: str) -> AttachedSandbox:
        attached = super().attach(sandbox, owner=owner, holder=holder)
        record = self._sandbox(sandbox)
        self._hold(record)
        log.info(
            "Holding sandbox %s for %s: its lease of %gs is renewed every %gs until release.",
            sandbox,
            holder,
            record.lease,
            renewal_interval(record.lease),
        )
        # The lease keeps the sandbox alive for as long as this holder runs, so there is no
        # deadline to fit its commands into.
        return replace(attached, remaining_lifetime=None)

    def release(self, sandbox: str, *, holder: str) -> None:
        self._leases.release(sandbox)
        self.hand_over(sandbox)
        try:
            super().release(sandbox, holder=holder)
        except SandboxTerminalError:
            self._leases.forgive(sandbox)
            raise
        # One more lease, so the task that collects the sandbox's files finds a whole one.
        alive = self._leases.close(sandbox)
        # Paused only once nobody holds it: a release by a task that was not the holder
        # leaves the holder's sandbox running.
        if alive and self.pause_when_released and HOLDER_TAG not in self.read_tags(sandbox):
            self.pause(sandbox)

    def pause(self, sandbox: str) -> None:
        """
        Stop renewing ``sandbox``, forget it and pause it, to wait for its next task without
        using CPU. Its expiry stays where the last renewal put it; any backend's next
        ``attach``, command or file operation on it resumes it.
        """
        self.hand_over(sandbox)
        if _pause.pause(self._lifecycle, sandbox):
            log.info("Paused sandbox %s until a task reaches for it again.", sandbox)

    def hand_over(self, sandbox: str) -> None:
        """
        Stop renewing ``sandbox`` and forget it, leaving it running for another process to
        hold: a task that defers hands its sandbox to the triggerer this way.
        """
        self._leases.drop(sandbox)
        with self._lock:
            record = self._sandboxes.pop(sandbox, None)
        if record is not None:
            record.sdk.close()

    def hold(self, sandbox: str) -> None:
        """
        Renew ``sandbox`` now and every third of its lease until it is destroyed or handed
        over: a task back from deferral holds the sandbox this way while it finishes.
        """
        self._hold(self._sandbox(sandbox))

    def _hold(self, record: SandboxRecord, *, renewed: bool = False) -> None:
        self._leases.hold(record.sdk.id, lease=record.lease, renewed=renewed)
        # Renewed from now on, so nothing this process runs has to fit an expiry.
        record.expires_at = None

    def renew(self, sandbox: str) -> bool:
        """
        Move the sandbox's expiry to one of its creator's leases from now, unless the server
        already has it later; ``False`` if it is gone. A durable try's sandbox is moved to its
        hold lease and marked kept until then, since after a SIGKILL nothing else moves the mark.
        """
        slot = self._durable.get(sandbox)
        if slot is not None:
            return self._lifecycle.keep(sandbox, slot.hold_lease(self.sandbox_timeout)) is not None
        return self._lifecycle.renew(sandbox, default_lease=self.sandbox_timeout)

    def _info(self, sandbox: str, *, doing: str) -> SandboxInfo:
        return self._lifecycle.info(sandbox, doing=doing)

    # --- Park: a durable agent's sandbox across its task's retries ---

    def _adopt_parked(self, slot: DurableSlot) -> str | None:
        """
        The sandbox an earlier try parked for ``slot``, adopted, when the journal replays calls
        made in it; ``None`` when a new one is to be made: on a first try, for a slot this try
        already had a sandbox for (lost under a command), or when no call of the slot replays,
        in which case nothing relies on a parked one, and it is killed.
        """
        with self._lock:
            served = (slot.attempt, slot.label) in self._served
        if served or slot.attempt.try_number == 1:
            return None
        parked = self._parked_for(slot)
        if not slot.replays_calls():
            for stale in parked:
                self._kill_parked(stale, why="no call made in it replays")
            return None
        if not parked:
            raise slot.gone(self.park_margin)
        adopted, *others = parked
        for other in others:
            self._kill_parked(other, why=f"sandbox {adopted.id}, parked later, is adopted")
        record = self._sandbox(adopted.id)
        record.lease = slot.hold_lease(self.sandbox_timeout)
        self._keep_until_the_try_ends(adopted.id, slot)
        self._hold(record)
        earlier = adopted.identity.try_number if adopted.identity is not None else None
        log.info(
            "Adopted sandbox %s, which try %s of this task parked: the tool calls this try "
            "replays ran there.",
            adopted.id,
            earlier,
        )
        return adopted.id

    def _parked_for(self, slot: DurableSlot) -> list[SandboxSummary]:
        """The running sandboxes earlier tries of the task parked for ``slot``, newest first."""
        a = slot.attempt
        found = self._server().list_sandboxes(
            dag_id=a.dag_id, task_id=a.task_id, run_id=a.run_id, map_index=a.map_index
        )
        parked = [
            sandbox
            for sandbox in found
            if sandbox.parked_for == slot.label
            and sandbox.state not in ENDED_STATES
            and sandbox.identity is not None
            and sandbox.identity.try_number != a.try_number
        ]
        return sorted(parked, key=lambda sandbox: sandbox.created_at, reverse=True)

    def _kill_parked(self, sandbox: SandboxSummary, *, why: str) -> None:
        self._lifecycle.kill(sandbox.id)
        log.info("Killed sandbox %s, which an earlier try parked: %s.", sandbox.id, why)

    def _keep_until_the_try_ends(self, sandbox: str, slot: DurableSlot) -> None:
        """Renew ``sandbox`` as parked until this try ends, and let its end decide its fate."""
        with self._lock:
            self._durable[sandbox] = slot
            self._served.add((slot.attempt, slot.label))
        TRY_ENDS.when_over(slot.attempt, lambda retrying: self._try_over(sandbox, retrying))

    def _try_over(self, sandbox: str, retrying: bool) -> None:
        """Park ``sandbox`` for the next try if there is one, else destroy it."""
        with self._lock:
            slot = self._durable.pop(sandbox, None)
        if slot is None:
            return  # destroyed during the try, to end a command
        if not retrying:
            self._destroy_quietly(sandbox, after="its durable task's try ended")
            return
        self.hand_over(sandbox)
        try:
            until = self._lifecycle.keep(sandbox, slot.park_lease)
        except SandboxError:
            log.warning(
                "Could not park sandbox %s for the next try; it ends when its lease of %gs runs "
                "out, and the next try adopts it if it comes before then.",
                sandbox,
                slot.hold_lease(self.sandbox_timeout),
                exc_info=True,
            )
            return
        if until is None:
            log.warning("Sandbox %s ended before it could be parked for the next try.", sandbox)
            return
        log.info(
            "Parked sandbox %s for the next try of this task, until %s: the retry delay (%gs at "
            "most) and park_margin (%gs). The next try adopts it; the maintenance cleanup leaves "
            "it until then.",
            sandbox,
            until.isoformat(),
            slot.park_lease - self.park_margin,
            self.park_margin,
        )

    # --- Destroy ---

    def destroy(self, sandbox: str) -> None:
        if sandbox in self._durable:
            # The end of the run, not of the try: a retry would replay the calls made here.
            log.info(
                "Sandbox %s stays until this try of its durable task ends: destroyed then, or "
                "parked for the next try if this one fails with a retry to come.",
                sandbox,
            )
            return
        self._kill(sandbox)

    def _kill(self, sandbox: str) -> None:
        if not is_sandbox_handle(sandbox):
            return
        self._leases.drop(sandbox)
        with self._lock:
            self._durable.pop(sandbox, None)
            record = self._sandboxes.pop(sandbox, None)
        try:
            self._lifecycle.kill(sandbox)
        finally:
            if record is not None:
                record.sdk.close()

    def _destroy_quietly(self, sandbox: str, *, after: str) -> None:
        _lifecycle.destroy_quietly(self._kill, sandbox, after=after)
