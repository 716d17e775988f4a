"""The three things measured, behind one small interface so every case drives them alike.

``ours`` and ``built-in`` are ``SandboxBackend`` implementations and are driven through that
contract. ``sdk`` is the raw ``opensandbox`` SDK as a user of it would write the same operations:
``SandboxSync`` with the default connection config, output handlers that keep a bounded tail
(the SDK would otherwise accumulate every line), and ``files.read_bytes_stream`` for exports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from airflow.providers.common.ai.sandbox import SandboxSpec

from dev.stack.state import ServerInfo

CONN_ID = "opensandbox_bench"
# All three go to execd directly, as the SDK does by default; the built-in backend would
# otherwise route through the server's proxy and measure a different path.
CONNECTION_EXTRA = {"use_server_proxy": False}
# An explicit open spec, so both backends provision the same sandbox on a server without the
# egress sidecar.
OPEN_SPEC = SandboxSpec(block_network=False)
SUBJECTS = ("ours", "built-in", "sdk")
BACKENDS = ("ours", "built-in")


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    retained_bytes: int
    truncated: bool
    timed_out: bool
    sandbox_terminated: bool


class Subject(Protocol):
    name: str

    def create(self, env: dict[str, str] | None = None) -> str: ...

    def destroy(self, handle: str) -> None: ...

    def run(
        self, handle: str, command: str, *, timeout: float, max_output_bytes: int
    ) -> Outcome: ...

    def export(self, handle: str, path: str, dest: BinaryIO) -> int: ...


class BackendSubject:
    def __init__(self, name: str, backend) -> None:
        self.name = name
        self.backend = backend

    def create(self, env: dict[str, str] | None = None) -> str:
        return self.backend.create(spec=SandboxSpec(block_network=False, env=env))

    def destroy(self, handle: str) -> None:
        self.backend.destroy(handle)

    def run(self, handle: str, command: str, *, timeout: float, max_output_bytes: int) -> Outcome:
        result = self.backend.run_command(
            handle, command, timeout=timeout, max_output_bytes=max_output_bytes
        )
        return Outcome(
            exit_code=result.exit_code,
            retained_bytes=len(result.stdout.encode()) + len(result.stderr.encode()),
            truncated=result.stdout_truncated or result.stderr_truncated,
            timed_out=result.timed_out,
            sandbox_terminated=result.sandbox_terminated,
        )

    def export(self, handle: str, path: str, dest: BinaryIO) -> int:
        return self.backend.export_file(handle, path, dest, max_bytes=1 << 31)


class _Tail:
    """The least a careful SDK user keeps of a stream: its last ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False

    def add(self, message) -> None:
        self.data += message.text.encode() + b"\n"
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]
            self.truncated = True


class SdkSubject:
    name = "sdk"

    def __init__(self, server: ServerInfo, image: str, memory: str) -> None:
        self.server = server
        self.image = image
        # The SDK's own default; set only so a case can ask every subject for the same sandbox.
        self.resource = {"cpu": "1", "memory": memory}
        self.sandboxes: dict = {}

    def create(self, env: dict[str, str] | None = None) -> str:
        from opensandbox import SandboxSync

        sandbox = SandboxSync.create(
            self.image,
            env=env,
            resource=self.resource,
            connection_config=self.server.connection_config(),
        )
        self.sandboxes[sandbox.id] = sandbox
        return sandbox.id

    def destroy(self, handle: str) -> None:
        self.sandboxes.pop(handle).destroy()

    def run(self, handle: str, command: str, *, timeout: float, max_output_bytes: int) -> Outcome:
        from datetime import timedelta

        from opensandbox.models.execd import RunCommandOpts
        from opensandbox.models.execd_sync import ExecutionHandlersSync

        stdout, stderr = _Tail(max_output_bytes), _Tail(max_output_bytes)
        execution = self.sandboxes[handle].commands.run(
            command,
            opts=RunCommandOpts(timeout=timedelta(seconds=timeout)),
            handlers=ExecutionHandlersSync(
                on_stdout=stdout.add, on_stderr=stderr.add, skip_accumulation=True
            ),
        )
        return Outcome(
            exit_code=execution.exit_code if execution.exit_code is not None else -1,
            retained_bytes=len(stdout.data) + len(stderr.data),
            truncated=stdout.truncated or stderr.truncated,
            timed_out=False,
            sandbox_terminated=False,
        )

    def export(self, handle: str, path: str, dest: BinaryIO) -> int:
        written = 0
        for chunk in self.sandboxes[handle].files.read_bytes_stream(path):
            dest.write(chunk)
            written += len(chunk)
        return written


def make_subject(name: str, server: ServerInfo, image: str, memory: str = "2Gi") -> Subject:
    """Build one subject; the backends read their server from an Airflow connection, as in a Dag."""
    os.environ.update(server.airflow_connection_env(CONN_ID, **CONNECTION_EXTRA))
    if name == "sdk":
        return SdkSubject(server, image, memory)
    if name == "built-in":
        from airflow.providers.common.ai.sandbox.opensandbox import OpenSandboxBackend as BuiltIn

        return BackendSubject(name, BuiltIn(CONN_ID, image=image, memory=memory))
    if name == "ours":
        from opensandbox_provider.sandbox import OpenSandboxBackend as Ours

        return BackendSubject(name, Ours(CONN_ID, image=image, memory=memory))
    raise ValueError(f"Unknown subject {name!r}; choose one of {', '.join(SUBJECTS)}.")
