"""Wait for a background command in a sandbox, from the triggerer, logging its output live."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError
from airflow.triggers.base import BaseTrigger, TriggerEvent

from opensandbox_provider._output_log import OutputLog
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox._background import BackgroundCommand
from opensandbox_provider.sandbox._command_status import CommandStatus
from opensandbox_provider.sandbox._events import BoundedTail
from opensandbox_provider.sandbox._lease import RENEWALS_PER_LEASE
from opensandbox_provider.sandbox._outcome import killed_at_deadline
from opensandbox_provider.sandbox.backend import OpenSandboxBackend

# One read of the output takes at most this much, so a command that prints fast between two
# polls never puts more than this in the triggerer's memory at once.
MAX_OUTPUT_READ = 4 * 1024 * 1024
# execd may not have a record of a command for an instant after starting it
# (docs/execd-wire.rst, wire-status); a record missing this long means the command is lost.
MISSING_RECORD_GRACE = 10.0
# Polls may fail through a server restart or a network blip; failing this long without one
# answer, with the sandbox still on the server, ends the wait as a failure.
UNREACHABLE_GRACE = 120.0
# execd kills the command at its deadline; a command still running this long past it is
# not being watched by a healthy execd.
BACKSTOP_GRACE = 30.0


class OpenSandboxCommandTrigger(BaseTrigger):
    """
    Polls a background command in a sandbox until it ends, logging new output as it comes.

    While it waits it renews the sandbox's lease, as the worker that created it did, so a
    long command never meets the sandbox's lifetime, and a triggerer that dies stops renewing
    and the server reclaims the sandbox within one lease. Everything it needs is in its
    serialized arguments, so a restarted triggerer takes it up where it was deferred; output
    from the serialized ``cursor`` on is logged again then, since Airflow keeps no later state.
    A user who marks the task failed or clears it while it waits has the sandbox destroyed by
    :meth:`on_kill`.

    It fires one event: ``{"status": "ended", "sandbox", "exit_code", "output",
    "timed_out"}`` with the tail of the combined output, or ``{"status": "error",
    "sandbox", "message"}`` when the command or the sandbox was lost.
    """

    def __init__(
        self,
        *,
        sandbox: str,
        command_id: str,
        opensandbox_conn_id: str | None,
        command_timeout: float,
        sandbox_timeout: float,
        poll_interval: float = 1.0,
        max_output_bytes: int = 16 * 1024,
        cursor: int = 0,
    ) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.command_id = command_id
        self.opensandbox_conn_id = opensandbox_conn_id
        self.command_timeout = command_timeout
        self.sandbox_timeout = sandbox_timeout
        self.poll_interval = poll_interval
        self.max_output_bytes = max_output_bytes
        self.cursor = cursor

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "sandbox": self.sandbox,
                "command_id": self.command_id,
                "opensandbox_conn_id": self.opensandbox_conn_id,
                "command_timeout": self.command_timeout,
                "sandbox_timeout": self.sandbox_timeout,
                "poll_interval": self.poll_interval,
                "max_output_bytes": self.max_output_bytes,
                "cursor": self.cursor,
            },
        )

    def _backend(self) -> OpenSandboxBackend:
        return OpenSandboxBackend(self.opensandbox_conn_id, sandbox_timeout=self.sandbox_timeout)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        backend = self._backend()
        try:
            base_url, headers, verify, timeout = await asyncio.to_thread(self._reach, backend)
        except SandboxError as e:
            yield self._error(f"Could not reach sandbox {self.sandbox}: {e}")
            return
        try:
            async with httpx.AsyncClient(
                headers=headers, verify=verify, timeout=timeout, follow_redirects=False
            ) as client:
                command = BackgroundCommand(client, base_url, self.command_id)
                event = await self._wait(backend, command)
        finally:
            # Only this process's handle on the sandbox: the sandbox itself is the worker's
            # to destroy once it has the event, or on_kill's.
            backend.hand_over(self.sandbox)
        yield event

    def _reach(
        self, backend: OpenSandboxBackend
    ) -> tuple[str, dict[str, str], ssl.SSLContext, float]:
        """Where execd is, its headers, the TLS trust and the request timeout: blocking calls."""
        base_url, headers = backend.execd_endpoint(self.sandbox)
        config = OpenSandboxHook(self.opensandbox_conn_id).connection_config
        verify = ssl.create_default_context()
        # The extra authorities a connection's ca_bundle names, which the SDK's own transports
        # trust too (see the hook); a config from elsewhere has none.
        authorities = getattr(config, "ca_certificates", None)
        if authorities is not None:
            verify.load_verify_locations(cadata=authorities)
        return base_url, headers, verify, config.request_timeout.total_seconds()

    async def _wait(self, backend: OpenSandboxBackend, command: BackgroundCommand) -> TriggerEvent:
        output = OutputLog(self.log)
        tail = BoundedTail(self.max_output_bytes)
        started = time.monotonic()
        give_up_at = started + self.command_timeout + BACKSTOP_GRACE
        renew_at = started + self.sandbox_timeout / RENEWALS_PER_LEASE
        last_answer = started
        missing_since: float | None = None
        while True:
            try:
                # The status first: output written before it says "ended" is read after it.
                status = await command.status()
                await self._read_output(command, output, tail)
            except (httpx.HTTPError, SandboxError) as e:
                self.log.warning("Could not poll command %s: %s", self.command_id, e)
                status = None
                if time.monotonic() - last_answer > UNREACHABLE_GRACE:
                    return self._error(
                        f"Sandbox {self.sandbox} did not answer for {UNREACHABLE_GRACE:g}s: {e}"
                    )
            else:
                last_answer = time.monotonic()
                if status is not None and status.ended:
                    output.close()
                    return self._ended(status, tail)
                missing_since = None if status is not None else missing_since or time.monotonic()
            now = time.monotonic()
            if now >= renew_at or (missing_since and now - missing_since > MISSING_RECORD_GRACE):
                if not await asyncio.to_thread(backend.renew, self.sandbox):
                    return self._error(
                        f"Sandbox {self.sandbox} ended while the command ran: it was destroyed, "
                        "killed or reached the end of its lifetime on the server."
                    )
                renew_at = now + self.sandbox_timeout / RENEWALS_PER_LEASE
                if missing_since and now - missing_since > MISSING_RECORD_GRACE:
                    return self._error(
                        f"execd in sandbox {self.sandbox} has no record of command "
                        f"{self.command_id}; it may have restarted."
                    )
            if now > give_up_at:
                return self._error(
                    f"Command {self.command_id} was still running {BACKSTOP_GRACE:g}s past its "
                    f"{self.command_timeout:g}s deadline, which execd enforces."
                )
            await asyncio.sleep(self.poll_interval)

    async def _read_output(
        self, command: BackgroundCommand, output: OutputLog, tail: BoundedTail
    ) -> None:
        """Log and keep all output past the cursor, one bounded read at a time."""
        while True:
            piece = await command.output(self.cursor, limit=MAX_OUTPUT_READ)
            self.cursor = piece.cursor
            if piece.data:
                output.feed("output", piece.data)
                tail.append(piece.data)
            if piece.cursor >= piece.end:
                return
            if output.full and piece.end - piece.cursor > self.max_output_bytes:
                # Nothing more is logged, so only the tail is worth reading.
                tail.mark_dropped()
                self.cursor = piece.end - self.max_output_bytes

    def _ended(self, status: CommandStatus, tail: BoundedTail) -> TriggerEvent:
        exit_code = status.exit_status
        timed_out = status.duration is not None and killed_at_deadline(
            exit_code, status.error, status.duration, self.command_timeout
        )
        text = tail.text()
        if exit_code != 0 and status.error:
            text += f"{status.error}\n"
        self.log.info(
            "Command %s in sandbox %s ended: %s.",
            self.command_id,
            self.sandbox,
            status.error or f"exit code {exit_code}",
        )
        return TriggerEvent(
            {
                "status": "ended",
                "sandbox": self.sandbox,
                "exit_code": exit_code,
                "output": text,
                "timed_out": timed_out,
            }
        )

    def _error(self, message: str) -> TriggerEvent:
        return TriggerEvent({"status": "error", "sandbox": self.sandbox, "message": message})

    async def on_kill(self) -> None:
        """The user ended the task while it waited: destroy the sandbox."""
        await asyncio.to_thread(self._backend().destroy, self.sandbox)
        self.log.info("Destroyed sandbox %s, since its task was ended.", self.sandbox)
