"""The OpenSandbox backend for common-ai's ``SandboxToolset``: the story of one sandbox."""

from __future__ import annotations

import json
import logging
import math
import posixpath
import threading
import time
import uuid
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import (
    EXPIRES_AT_TAG,
    NETWORK_TAG,
    OWNER_TAG,
    WORKDIR_TAG,
    AttachableSandboxBackend,
    SandboxError,
    SandboxExecResult,
    SandboxFileTooLargeError,
    SandboxTerminalError,
    encode_network_policy,
    is_sandbox_handle,
)

from opensandbox_provider._sdk import OpenSandboxNotInstalled
from opensandbox_provider.hooks.opensandbox import InvalidConnectionError, OpenSandboxHook
from opensandbox_provider.sandbox import _policy, _tags
from opensandbox_provider.sandbox._errors import as_sandbox_errors, status_of, to_sandbox_error
from opensandbox_provider.sandbox._events import BoundedTail, EventParser
from opensandbox_provider.sandbox._http import EXECD_PORT, SandboxHttp, read_at_most
from opensandbox_provider.sandbox._lease import Leases
from opensandbox_provider.sandbox._limits import (
    check_export_deadline,
    export_deadline,
    validate_positive_finite,
)
from opensandbox_provider.sandbox._stream import run_streamed

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator, Mapping
    from typing import BinaryIO

    from airflow.providers.common.ai.sandbox.base import AttachedSandbox, SandboxSpec
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.models.sandboxes import NetworkPolicy, SandboxInfo
    from opensandbox.sync.manager import SandboxManagerSync

log = logging.getLogger(__name__)

# The shortest sandbox lifetime the OpenSandbox server accepts; it refuses shorter with a 422.
MIN_SANDBOX_TIMEOUT = 60.0
# How often a new sandbox's execd is asked whether it is up. A refused or proxied ping
# answers in milliseconds, so polling this often costs nothing and saves the SDK's
# half-second backoff on a daemon that usually starts within a fraction of a second.
READY_POLL_INTERVAL = 0.025
# A listing is names, never content. Past this many the model is told to narrow the path
# rather than the worker holding them all.
MAX_LIST_ENTRIES = 10_000
# The listing body is refused past this size before it is parsed, whatever it holds:
# ten thousand entries with long absolute paths fit comfortably.
MAX_LIST_BODY = 16 * 1024 * 1024
# A description of one path is a few hundred bytes.
MAX_INFO_BODY = 64 * 1024
# Stamped on every sandbox so an operator on a shared server can find Airflow's with a
# metadata filter.
CREATED_BY = {"created-by": "airflow"}
# Lifecycle states from which a sandbox never runs another command.
_ENDED_STATES = frozenset({"Stopping", "Terminated", "Failed"})
# Commands are quoted in the task log up to this length.
_LOGGED_COMMAND = 120


@dataclass(frozen=True)
class _FileInfo:
    """What execd says a path is (``file``, ``directory``, ``symlink``, ``other``) and its size."""

    kind: str
    size: int


@dataclass
class _Sandbox:
    """What this process keeps about one sandbox it created or reconnected to, by handle."""

    sdk: SandboxSync
    http: SandboxHttp
    # When the server will end the sandbox, on the time.monotonic clock; None if never.
    expires_at: float | None
    # Where commands run and relative paths resolve; None for execd's own directory.
    workdir: str | None = None

    def resolve(self, path: str) -> str:
        """``path`` as the sandbox's shell reads it: relative to the working directory."""
        # execd expands a leading ~ or $VAR itself, so those are anchored already.
        if self.workdir is None or posixpath.isabs(path) or path.startswith(("~", "$")):
            return path
        return posixpath.normpath(posixpath.join(self.workdir, path))


class OpenSandboxBackend(AttachableSandboxBackend):
    """
    Run sandbox tools in sandboxes on an OpenSandbox server.

    OpenSandbox runs sandboxes on Docker or Kubernetes behind one API, so the worker needs
    network access to the server and nothing else. The server is named by an
    ``opensandbox`` connection (see
    :class:`~opensandbox_provider.hooks.opensandbox.OpenSandboxHook`), and a generic
    connection of the shape common-ai's built-in backend reads works too.

    Network policy is set when the sandbox is created and checked before it is used: a
    deny-by-default spec is sent as a policy, and the sandbox's egress sidecar is asked
    what it enforces and in which mode. A sandbox that is not restricted as asked,
    including one whose sidecar filters names but not addresses, is destroyed and the
    task fails. An open spec sends no policy, so a server without the sidecar runs it.

    Commands run over execd's event stream, read here rather than through the SDK: each
    stream is held to ``max_output_bytes`` however its output is split into lines, the
    result comes back as soon as execd reports the command's end, and a stream that stops
    arriving for :data:`~opensandbox_provider.sandbox._stream.STALL_WINDOW` seconds is
    abandoned and its sandbox destroyed. execd itself enforces each command's deadline,
    so a command that runs out of time is killed and the sandbox and its files stay.

    A sandbox's server-side lifetime is a lease: while something holds it (the toolset
    that created it, or a task attached to it) it is renewed to ``sandbox_timeout`` from
    now, three times per lease, so a long run never meets the lifetime, and a worker that
    dies stops renewing and its sandbox is reclaimed within one lease. A task can provision
    a sandbox with ``SandboxSpec(owner=...)`` for another to attach to; the ownership tags
    are kept as sandbox metadata (see :mod:`~opensandbox_provider.sandbox._tags`), and such
    a sandbox waits for its tasks, unheld, for ``sandbox_timeout`` at a time.

    :param opensandbox_conn_id: The connection naming the server, or ``None`` for the
        ``OPEN_SANDBOX_DOMAIN`` and ``OPEN_SANDBOX_API_KEY`` environment variables.
    :param image: The image each sandbox runs.
    :param cpu: The CPU limit of each sandbox, as OpenSandbox takes it (``"1"``, ``"500m"``).
    :param memory: The memory limit of each sandbox (``"2Gi"``).
    :param sandbox_timeout: The lease, in seconds, at least 60: how long the server keeps a
        sandbox after the last renewal, and how long a provisioned sandbox waits between tasks.
    :param ready_timeout: Seconds a new sandbox has to start answering before it is
        destroyed and creation fails.
    :param use_server_proxy: Reach sandboxes through the server instead of their published
        ports. ``None`` takes the connection's ``use_server_proxy`` extra, and on when unset.
    :param workdir: An absolute path, created with each sandbox, where every command runs and
        every relative path of the file tools resolves. Stamped on a sandbox provisioned for
        another task, whose backend then uses it whatever its own ``workdir`` says.
    """

    name = "opensandbox"

    def __init__(
        self,
        opensandbox_conn_id: str | None = OpenSandboxHook.default_conn_name,
        *,
        image: str = "python:3.12-slim",
        cpu: str = "1",
        memory: str = "2Gi",
        sandbox_timeout: float = 3600.0,
        ready_timeout: float = 120.0,
        use_server_proxy: bool | None = None,
        workdir: str | None = None,
    ) -> None:
        for value, label in ((image, "image"), (cpu, "cpu"), (memory, "memory")):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{label} must be a non-empty string, got {value!r}.")
        validate_positive_finite(sandbox_timeout, "sandbox_timeout")
        validate_positive_finite(ready_timeout, "ready_timeout")
        if sandbox_timeout < MIN_SANDBOX_TIMEOUT:
            raise ValueError(
                f"sandbox_timeout must be at least {MIN_SANDBOX_TIMEOUT:g} seconds, got "
                f"{sandbox_timeout!r}: the OpenSandbox server refuses shorter lifetimes."
            )
        self.opensandbox_conn_id = opensandbox_conn_id
        self.image = image
        self.cpu = cpu
        self.memory = memory
        self.sandbox_timeout = float(sandbox_timeout)
        self.ready_timeout = float(ready_timeout)
        self.use_server_proxy = use_server_proxy
        self.workdir = _working_directory(workdir)
        self._hook: OpenSandboxHook | None = None
        # One backend serves every run of a task in the process at once, so what it knows
        # about a sandbox is kept by handle, never on the instance.
        self._sandboxes: dict[str, _Sandbox] = {}
        self._lock = threading.Lock()
        self._leases = Leases(self._renew, lease=self.sandbox_timeout)

    # ------------------------------------------------------------------
    # Configure
    # ------------------------------------------------------------------

    def _connection_config(self) -> ConnectionConfigSync:
        """The SDK's config for the server, read from the connection on first use."""
        if self._hook is None:
            self._hook = OpenSandboxHook(
                self.opensandbox_conn_id, use_server_proxy=self.use_server_proxy
            )
        try:
            return self._hook.connection_config
        except (InvalidConnectionError, OpenSandboxNotInstalled) as e:
            raise SandboxTerminalError(str(e)) from e

    # ------------------------------------------------------------------
    # Create
    # ------------------------------------------------------------------

    def create(self, *, spec: SandboxSpec | None = None) -> str:
        policy = _policy.network_policy(spec)
        env = _environment(spec)
        config = self._connection_config()
        started = time.monotonic()
        with as_sandbox_errors("create a sandbox", terminal=True):
            from opensandbox import SandboxSync

            try:
                sdk = SandboxSync.create(
                    self.image,
                    timeout=timedelta(seconds=self.sandbox_timeout),
                    ready_timeout=timedelta(seconds=self.ready_timeout),
                    env=env,
                    metadata=self._metadata(spec),
                    resource={"cpu": self.cpu, "memory": self.memory},
                    network_policy=policy,
                    connection_config=config,
                    # Readiness is polled below, without the SDK's backoff on the first miss.
                    skip_health_check=True,
                )
            except Exception as e:
                raise _explain_refused_policy(e, policy) from e
        record = _Sandbox(
            sdk, SandboxHttp(sdk), expires_at=started + self.sandbox_timeout, workdir=self.workdir
        )
        log.info(
            "Created OpenSandbox sandbox %s from image %s with %s, in %.2fs.",
            sdk.id,
            self.image,
            _policy.describe(policy),
            time.monotonic() - started,
        )
        try:
            waited = self._wait_until_ready(record, deadline=time.monotonic() + self.ready_timeout)
            if policy is not None:
                self._verify_policy(record, policy)
            if record.workdir is not None:
                from opensandbox.models.filesystem import WriteEntry

                with as_sandbox_errors(
                    f"create the working directory {record.workdir!r}", terminal=True
                ):
                    sdk.files.create_directories([WriteEntry(path=record.workdir, mode=755)])
            if spec is None or spec.owner is None:
                # The toolset asking holds it until it destroys it. A sandbox provisioned for
                # another task waits for that task unheld, for one lease.
                self._hold(record)
        except BaseException:
            self._discard_quietly(record)
            raise
        with self._lock:
            self._sandboxes[sdk.id] = record
        log.info(
            "Sandbox %s is ready: execd answered its health check after %.2fs.", sdk.id, waited
        )
        return sdk.id

    def _metadata(self, spec: SandboxSpec | None) -> dict[str, str]:
        """
        Metadata stamped on a new sandbox: who made it, a name to find it by, and for a
        sandbox provisioned for another task, the tags that task attaches by.
        """
        metadata = {**CREATED_BY, "name": f"airflow-sandbox-{uuid.uuid4().hex[:12]}"}
        if spec is not None and spec.owner is not None:
            metadata.update(_tags.encode(self._stamps(spec)))
        return metadata

    def _stamps(self, spec: SandboxSpec) -> dict[str, str]:
        # No expiry stamp: read_tags reads the server's own, which renewals keep moving.
        stamps = {OWNER_TAG: str(spec.owner), NETWORK_TAG: encode_network_policy(spec)}
        if self.workdir is not None:
            stamps[WORKDIR_TAG] = self.workdir
        return stamps

    def _wait_until_ready(self, record: _Sandbox, *, deadline: float) -> float:
        """Poll execd's ``/ping`` until it answers; return how long that took."""
        import httpx

        started = time.monotonic()
        with as_sandbox_errors(f"reach sandbox {record.sdk.id}", terminal=True):
            url, headers = record.http.target(EXECD_PORT, "/ping")
        while True:
            remaining = deadline - time.monotonic()
            try:
                response = record.http.client.get(
                    url,
                    headers=headers,
                    timeout=min(record.http.request_timeout, max(remaining, 0.05)),
                )
            except httpx.TransportError:
                pass
            else:
                if response.status_code < 300:
                    return time.monotonic() - started
                if response.status_code in (401, 403):
                    # Polling cannot fix credentials.
                    raise SandboxTerminalError(
                        f"Sandbox {record.sdk.id} refused its health check with HTTP "
                        f"{response.status_code}: the server did not accept this connection's API "
                        "key for it. Check the connection's password."
                    )
            if time.monotonic() >= deadline:
                raise SandboxTerminalError(
                    f"Sandbox {record.sdk.id} did not become ready within {self.ready_timeout:g}s, "
                    "so it was destroyed. Check that the image starts on the OpenSandbox server, "
                    "or raise ready_timeout."
                )
            time.sleep(min(READY_POLL_INTERVAL, max(remaining, 0.0)))

    def _verify_policy(self, record: _Sandbox, policy: NetworkPolicy) -> None:
        problem = _policy.unenforced(record.http, policy)
        if problem is not None:
            raise SandboxTerminalError(
                f"OpenSandbox did not enforce the requested network policy on sandbox "
                f"{record.sdk.id}, so it was destroyed: {problem} Or pass "
                "SandboxSpec(block_network=False) for a sandbox that may reach the network."
            )
        log.info(
            "Sandbox %s: the egress sidecar enforces the policy in %s mode.",
            record.sdk.id,
            _policy.ADDRESS_LAYER_MODE,
        )

    # ------------------------------------------------------------------
    # Reconnect
    # ------------------------------------------------------------------

    def _sandbox(self, handle: str) -> _Sandbox:
        """The sandbox behind ``handle``, reconnecting to one this process has not seen."""
        with self._lock:
            record = self._sandboxes.get(handle)
        if record is not None:
            return record
        if not is_sandbox_handle(handle):
            raise SandboxTerminalError(f"{handle!r} is not a sandbox handle.")
        config = self._connection_config()
        with as_sandbox_errors(f"reconnect to sandbox {handle}"):
            from opensandbox import SandboxSync

            sdk = SandboxSync.connect(
                handle,
                connection_config=config,
                connect_timeout=timedelta(seconds=self.ready_timeout),
                skip_health_check=True,
            )
            try:
                info = sdk.get_info()
            except BaseException:
                sdk.close()
                raise
        record = _Sandbox(
            sdk,
            SandboxHttp(sdk),
            expires_at=_monotonic(info.expires_at),
            workdir=self._stamped_workdir(info),
        )
        with self._lock:
            kept = self._sandboxes.setdefault(handle, record)
        if kept is not record:
            sdk.close()
        return kept

    def _stamped_workdir(self, info: SandboxInfo) -> str | None:
        """The creator's working directory on a provisioned sandbox, else this backend's."""
        try:
            tags = _tags.decode(info.metadata or {})
        except _tags.DamagedTagError:
            # attach reports the damage; a reconnect only needs a directory.
            return self.workdir
        return tags.get(WORKDIR_TAG) if OWNER_TAG in tags else self.workdir

    def _gone(self, record: _Sandbox) -> bool:
        """Whether the sandbox no longer exists or can no longer run; a failure to ask raises."""
        with as_sandbox_errors(f"check on sandbox {record.sdk.id}"):
            try:
                info = record.sdk.get_info()
            except Exception as e:
                if status_of(e) == 404:
                    return True
                raise
        # A container killed from outside is still listed, as Failed, until it is destroyed.
        return info.status.state in _ENDED_STATES

    # ------------------------------------------------------------------
    # Run a command
    # ------------------------------------------------------------------

    def run_command(
        self, sandbox: str, command: str, *, timeout: float, max_output_bytes: int
    ) -> SandboxExecResult:
        validate_positive_finite(timeout, "timeout")
        validate_positive_finite(max_output_bytes, "max_output_bytes")
        if not command.strip():
            raise SandboxError("The command is empty; give a shell command to run.")
        # Reconnecting happens before the clock starts: it is not the command's time.
        record = self._sandbox(sandbox)
        timeout_ms = max(1, round(self._fit_to_lifetime(record, timeout) * 1000))
        applied = timeout_ms / 1000
        started = time.monotonic()
        try:
            streamed = run_streamed(
                record.http,
                command,
                timeout_ms=timeout_ms,
                max_output_bytes=int(max_output_bytes),
                cwd=record.workdir,
            )
        except Exception as e:
            raise self._command_failure(record, e) from e
        elapsed = time.monotonic() - started
        parser, ending = streamed.parser, streamed.ending
        if streamed.abandoned is not None:
            return self._abandon(record, streamed.abandoned, parser, applied, requested=timeout)
        if ending is None:
            # Through the server's proxy a sandbox that dies mid-command looks like a stream
            # that simply ended; only the server can tell, and a dead sandbox is terminal.
            if self._gone(record):
                raise _ended_under_command(record)
            exit_code = -1
            parser.stderr.append(
                b"The sandbox ended the command's output without saying how it ended.\n"
            )
        else:
            exit_code = -1 if ending.exit_code is None else ending.exit_code
            if ending.exit_code in (None, -1) and ending.message:
                # Only the message says what happened: a signal's name, or why it never started.
                parser.stderr.append(ending.message.encode("utf-8", "replace") + b"\n")
        # execd kills a command at its deadline with SIGKILL, and Go reports any death by
        # signal as -1; only the clock tells a deadline from a command killed by a signal.
        timed_out = ending is not None and ending.exit_code == -1 and elapsed >= applied
        log.info(
            "Sandbox %s: %r %s in %.2fs (stdout %s; stderr %s).",
            sandbox,
            _shortened(command),
            f"timed out after {applied:g}s" if timed_out else f"exited {exit_code}",
            elapsed,
            _amount(parser.stdout),
            _amount(parser.stderr),
        )
        return SandboxExecResult(
            exit_code=exit_code,
            stdout=parser.stdout.text(),
            stderr=parser.stderr.text(),
            timed_out=timed_out,
            stdout_truncated=parser.stdout.truncated,
            stderr_truncated=parser.stderr.truncated,
            applied_timeout=applied if applied != timeout else None,
        )

    @staticmethod
    def _fit_to_lifetime(record: _Sandbox, timeout: float) -> float:
        # A command cannot outlive its sandbox; one that would is given what is left, and
        # the result says so, rather than being cut off by the sandbox's end.
        if record.expires_at is None:
            return timeout
        return min(timeout, max(1.0, record.expires_at - time.monotonic()))

    def _command_failure(self, record: _Sandbox, error: Exception) -> Exception:
        # A transport error may be the sandbox ending under the command; the server knows.
        if status_of(error) is None and not isinstance(error, SandboxError) and self._gone(record):
            return _ended_under_command(record)
        return to_sandbox_error(error, f"run a command in sandbox {record.sdk.id}") or error

    def _abandon(
        self,
        record: _Sandbox,
        reason: str,
        parser: EventParser,
        applied: float,
        *,
        requested: float,
    ) -> SandboxExecResult:
        log.warning(
            "Sandbox %s: %s; destroying the sandbox to end the command.", record.sdk.id, reason
        )
        try:
            self.destroy(record.sdk.id)
        except SandboxError:
            log.warning(
                "Could not destroy sandbox %s after abandoning its command; the server ends it "
                "when its lifetime runs out.",
                record.sdk.id,
                exc_info=True,
            )
        parser.stderr.append(
            f"The command was abandoned: {reason}. The sandbox was destroyed.\n".encode()
        )
        return SandboxExecResult(
            exit_code=-1,
            stdout=parser.stdout.text(),
            stderr=parser.stderr.text(),
            timed_out=True,
            stdout_truncated=parser.stdout.truncated,
            stderr_truncated=parser.stderr.truncated,
            sandbox_terminated=True,
            applied_timeout=applied if applied != requested else None,
        )

    # ------------------------------------------------------------------
    # Files
    # ------------------------------------------------------------------

    def read_file(self, sandbox: str, path: str, *, max_bytes: int) -> bytes:
        validate_positive_finite(max_bytes, "max_bytes")
        record = self._sandbox(sandbox)
        path = record.resolve(path)
        entry = self._regular_file(record, path, purpose="read")
        if entry.kind == "file" and entry.size > max_bytes:
            # Refused before any of it is transferred.
            raise SandboxFileTooLargeError(path, entry.size, max_bytes)
        data = bytearray()
        with closing(self._download(record, path, max_bytes=max_bytes)) as chunks:
            for chunk in chunks:
                data += chunk
                if len(data) > max_bytes:
                    break
        if len(data) > max_bytes:
            # A symlink's size is its target path's length, and a file may grow after it was
            # sized; either way the overflow byte arrived.
            raise SandboxFileTooLargeError(path, max(entry.size, len(data)), max_bytes)
        return bytes(data)

    def write_file(self, sandbox: str, path: str, content: bytes) -> None:
        record = self._sandbox(sandbox)
        path = record.resolve(path)
        # execd creates the parent directories of an upload itself
        # (docs/execd-wire.rst, wire-upload).
        with as_sandbox_errors(f"write {path!r}", missing=self._missing(record, path)):
            record.sdk.files.write_file(path, content, mode=644)

    def list_directory(self, sandbox: str, path: str) -> list[tuple[str, bool]]:
        record = self._sandbox(sandbox)
        path = record.resolve(path)
        # Read and bounded here: the SDK parses a listing whole, so a directory of a million
        # names would be a million objects on the worker before any cap could apply.
        with as_sandbox_errors(f"list {path!r}", missing=self._missing(record, path)):
            with record.http.get(
                EXECD_PORT,
                "/directories/list",
                "List directory",
                params={"path": path, "depth": "1"},
            ) as response:
                body = read_at_most(response, MAX_LIST_BODY)
        entries = json.loads(body) if body is not None else None
        if body is not None and not isinstance(entries, list):
            raise SandboxError(
                f"The sandbox answered a listing of {path!r} with something other than a list."
            )
        if entries is None or len(entries) > MAX_LIST_ENTRIES:
            raise SandboxError(
                f"{path!r} holds more than {MAX_LIST_ENTRIES} entries, too many to list. List a "
                "subdirectory, or use a shell command that narrows it, such as `ls | head -100` or "
                "`find <path> -maxdepth 1 -name '*.csv'`."
            )
        return [
            (
                posixpath.basename(str(entry.get("path", "")).rstrip("/")),
                entry.get("type") == "directory",
            )
            for entry in entries
            if isinstance(entry, dict)
        ]

    def export_file(self, sandbox: str, path: str, dest: BinaryIO, *, max_bytes: int) -> int:
        """Copy a regular file out through execd's download API, under the whole-copy deadline."""
        validate_positive_finite(max_bytes, "max_bytes")
        record = self._sandbox(sandbox)
        path = record.resolve(path)
        entry = self._regular_file(record, path, purpose="export")
        if entry.kind == "file" and entry.size > max_bytes:
            raise SandboxFileTooLargeError(path, entry.size, max_bytes)
        deadline = export_deadline(max_bytes)
        written = 0
        with closing(self._download(record, path, max_bytes=max_bytes)) as chunks:
            for chunk in chunks:
                check_export_deadline(path, deadline, max_bytes)
                if written + len(chunk) > max_bytes:
                    raise SandboxFileTooLargeError(path, written + len(chunk), max_bytes)
                dest.write(chunk)
                written += len(chunk)
        if entry.kind == "file":
            # A symlink reports its own size, not its target's, so there is nothing to check it by.
            self._check_export_size(path, expected=entry.size, written=written)
        return written

    def _regular_file(self, record: _Sandbox, path: str, *, purpose: str) -> _FileInfo:
        """What ``path`` is, refusing anything that is not a file or a link to one."""
        # Asked here rather than through the SDK, which logs a traceback for every path that
        # does not exist: an everyday mistake of the model's, not an error of the task's.
        with as_sandbox_errors(f"{purpose} {path!r}", missing=self._missing(record, path)):
            with record.http.get(
                EXECD_PORT, "/files/info", "Get file info", params={"path": path}
            ) as response:
                body = read_at_most(response, MAX_INFO_BODY)
        infos = json.loads(body) if body is not None else None
        entry = infos.get(path) if isinstance(infos, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            raise SandboxError(
                f"The sandbox did not describe {path!r} in a form this backend reads."
            )
        info = _FileInfo(kind=str(entry.get("type")), size=entry["size"])
        if info.kind == "directory":
            raise SandboxError(f"{path!r} is a directory. Use list_directory to see what is in it.")
        if info.kind not in ("file", "symlink"):
            raise SandboxError(
                f"{path!r} is not a regular file (it is a device, a pipe or a socket)."
            )
        return info

    def _download(
        self, record: _Sandbox, path: str, *, max_bytes: int
    ) -> Generator[bytes, None, None]:
        """
        The first ``max_bytes + 1`` bytes of ``path``, as they arrive.

        A generator, so that what the caller does with a chunk fails in the caller and is
        never taken for a failed download.
        """
        # Downloaded here rather than with the SDK's read_bytes_stream, which drops execd's
        # error message and reads an error body whole.
        with as_sandbox_errors(f"read {path!r}", missing=self._missing(record, path)):
            with record.http.get(
                EXECD_PORT,
                "/files/download",
                "Download file",
                params={"path": path},
                headers={"Range": f"bytes=0-{max_bytes}"},
            ) as response:
                # As httpcore reads them, at most 64 KiB each: re-cutting them to a fixed size
                # would copy every byte once more for no bound that is not already there.
                yield from response.iter_raw()

    def _missing(self, record: _Sandbox, path: str) -> Callable[[], SandboxError]:
        """The answer to a 404 from a file API, which says the same for a missing sandbox."""

        def error() -> SandboxError:
            if self._gone(record):
                return SandboxTerminalError(
                    f"Sandbox {record.sdk.id} no longer exists: it was destroyed or reached the "
                    "end of its lifetime on the server."
                )
            return SandboxError(f"{path!r} does not exist in the sandbox.")

        return error

    # ------------------------------------------------------------------
    # Attach: tags, and the lease a holder keeps
    # ------------------------------------------------------------------

    def read_tags(self, sandbox: str) -> dict[str, str]:
        info = self._info(sandbox, doing=f"read the tags of sandbox {sandbox}")
        try:
            tags = _tags.decode(info.metadata or {})
        except _tags.DamagedTagError as e:
            raise SandboxError(
                f"Sandbox {sandbox} carries tags this backend cannot read: {e} Destroy the "
                f"sandbox, or remove its {_tags.PREFIX} metadata and provision it again."
            ) from e
        if info.expires_at is not None:
            # The server's own expiry rather than a stamp: renewals move it, and a stamp
            # would go stale between them.
            tags[EXPIRES_AT_TAG] = str(int(info.expires_at.timestamp()))
        return tags

    def write_tags(self, sandbox: str, tags: Mapping[str, str]) -> None:
        # The expiry is the server's and moves only through renewals; it is not stored.
        wanted = {name: value for name, value in tags.items() if name != EXPIRES_AT_TAG}
        doing = f"write the tags of sandbox {sandbox}"
        current = self._info(sandbox, doing=doing).metadata or {}
        changes = _tags.patch(current, wanted)
        if changes:
            with self._manager(doing) as manager:
                manager.patch_sandbox_metadata(sandbox, changes)

    def attach(self, sandbox: str, *, owner: str, holder: str) -> AttachedSandbox:
        attached = super().attach(sandbox, owner=owner, holder=holder)
        self._hold(self._sandbox(sandbox))
        log.info(
            "Holding sandbox %s for %s: its lease of %gs is renewed every %gs until release.",
            sandbox,
            holder,
            self.sandbox_timeout,
            self._leases.interval,
        )
        # The lease keeps the sandbox alive for as long as this holder runs, so there is no
        # deadline to fit its commands into.
        return replace(attached, remaining_lifetime=None)

    def release(self, sandbox: str, *, holder: str) -> None:
        held = sandbox in self._leases.held()
        self._leases.drop(sandbox)
        with self._lock:
            record = self._sandboxes.pop(sandbox, None)
        if record is not None:
            record.sdk.close()
        super().release(sandbox, holder=holder)
        if held and not self._renew(sandbox):
            log.info("Sandbox %s ended before it was released.", sandbox)

    def _hold(self, record: _Sandbox) -> None:
        self._leases.hold(record.sdk.id)
        # Renewed from now on, so nothing this process runs has to fit an expiry.
        record.expires_at = None

    def _renew(self, sandbox: str) -> bool:
        """Move the sandbox's expiry to one lease from now; ``False`` if it is gone."""
        with self._manager(f"renew the lease on sandbox {sandbox}") as manager:
            try:
                manager.renew_sandbox(sandbox, timedelta(seconds=self.sandbox_timeout))
            except Exception as e:
                if status_of(e) == 404:
                    return False
                raise
        return True

    def _info(self, sandbox: str, *, doing: str) -> SandboxInfo:
        if not is_sandbox_handle(sandbox):
            raise SandboxTerminalError(f"{sandbox!r} is not a sandbox handle.")
        with self._manager(doing) as manager:
            return manager.get_sandbox_info(sandbox)

    @contextmanager
    def _manager(self, doing: str) -> Iterator[SandboxManagerSync]:
        """The lifecycle API alone: no endpoints and no readiness poll, whatever state it is in."""
        from opensandbox.sync.manager import SandboxManagerSync

        config = self._connection_config()
        with as_sandbox_errors(doing):
            manager = SandboxManagerSync.create(config)
            try:
                yield manager
            finally:
                manager.close()

    # ------------------------------------------------------------------
    # Destroy
    # ------------------------------------------------------------------

    def destroy(self, sandbox: str) -> None:
        if not is_sandbox_handle(sandbox):
            return
        self._leases.drop(sandbox)
        with self._lock:
            record = self._sandboxes.pop(sandbox, None)
        if record is not None:
            self._discard(record)
            return
        # A sandbox that is unhealthy or paused must still be destroyable.
        with self._manager(f"destroy sandbox {sandbox}") as manager:
            _kill(lambda: manager.kill_sandbox(sandbox), sandbox)

    def _discard(self, record: _Sandbox) -> None:
        with as_sandbox_errors(f"destroy sandbox {record.sdk.id}"):
            try:
                _kill(record.sdk.kill, record.sdk.id)
            finally:
                record.sdk.close()

    def _discard_quietly(self, record: _Sandbox) -> None:
        """Destroy a sandbox whose creation failed, without hiding why it failed."""
        try:
            self._discard(record)
        except SandboxError:
            log.warning(
                "Could not destroy sandbox %s after its creation failed; the server ends it when "
                "its lifetime runs out.",
                record.sdk.id,
                exc_info=True,
            )


def _ended_under_command(record: _Sandbox) -> SandboxTerminalError:
    return SandboxTerminalError(
        f"Sandbox {record.sdk.id} ended while the command ran: it was destroyed, killed or "
        "reached the end of its lifetime on the server."
    )


def _kill(kill: Callable[[], None], sandbox: str) -> None:
    try:
        kill()
    except Exception as e:
        if status_of(e) != 404:
            raise
        log.info("Sandbox %s was already gone.", sandbox)
        return
    log.info("Destroyed sandbox %s.", sandbox)


def _working_directory(workdir: str | None) -> str | None:
    if workdir is None:
        return None
    if not isinstance(workdir, str) or not posixpath.isabs(workdir) or "\n" in workdir:
        raise ValueError(
            f"workdir must be an absolute path in the sandbox, such as '/home/agent/work', got "
            f"{workdir!r}."
        )
    return posixpath.normpath(workdir)


def _environment(spec: SandboxSpec | None) -> dict[str, str] | None:
    if spec is None or not spec.env:
        return None
    env: Mapping[str, Any] = spec.env
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or not isinstance(value, str):
            raise SandboxTerminalError(
                f"SandboxSpec.env holds {key!r}: {value!r}; every name must be a non-empty string "
                "without '=' and every value a string."
            )
    return dict(env)


def _explain_refused_policy(error: Exception, policy: NetworkPolicy | None) -> Exception:
    """A refused network policy, with what to do about it; any other error as it is."""
    if policy is None or status_of(error) != 400 or "networkpolicy" not in str(error).lower():
        return error
    detail = to_sandbox_error(error, "create a sandbox", terminal=True)
    return SandboxTerminalError(
        f"{detail} The server cannot enforce a network policy, which a sandbox that denies egress "
        "needs: configure its egress sidecar ([egress] with mode dns+nft), or pass "
        "SandboxSpec(block_network=False) for a sandbox that may reach the network."
    )


def _monotonic(expires_at: datetime | None) -> float | None:
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=UTC)
    left = (expires_at - datetime.now(UTC)).total_seconds()
    return time.monotonic() + left if math.isfinite(left) else None


def _amount(tail: BoundedTail) -> str:
    """How much a stream carried and how much of it was kept, for the task log."""
    if not tail.truncated:
        return f"{tail.total} bytes"
    # The text of a line too long to hold is not counted past what reached the tail.
    carried = f"{tail.total} bytes" if tail.counted else f"over {tail.max_bytes} bytes"
    return f"{carried}, the last {tail.max_bytes} kept"


def _shortened(command: str) -> str:
    return command if len(command) <= _LOGGED_COMMAND else command[: _LOGGED_COMMAND - 3] + "..."
