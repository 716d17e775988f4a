"""Wait for a background command in a sandbox, from the triggerer, logging its output live."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from airflow.providers.common.compat.sdk import mask_secret, redact
from airflow.triggers.base import BaseTrigger, TriggerEvent

from opensandbox_provider._clients import execd_client
from opensandbox_provider._errors import quoted, transport_errors
from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider._output_log import OutputLog
from opensandbox_provider.execd._background import BackgroundCommand, OutputPiece
from opensandbox_provider.execd._command_status import CommandStatus
from opensandbox_provider.execd._events import BoundedTail
from opensandbox_provider.execd._run_to_end import run_to_end
from opensandbox_provider.operators._command_end import (
    CommandEnd,
    CommandEvent,
    CommandLost,
    OutOfTime,
    WaitEnd,
)
from opensandbox_provider.operators._stop import StopCommand
from opensandbox_provider.sandbox._async_lifecycle import AsyncLifecycle, ExecdEndpoint
from opensandbox_provider.sandbox._lease import renewal_interval
from opensandbox_provider.sandbox._outcome import killed_at_deadline

# One read of the output takes at most this much, so a command that prints fast between two
# polls never puts more than this in the triggerer's memory at once.
MAX_OUTPUT_READ = 4 * 1024 * 1024
# execd may not have a record of a command for an instant after starting it
# (docs/execd-wire.rst, wire-status); a record missing this long means the command is lost.
MISSING_RECORD_GRACE = 10.0
# Polls and renewals may fail through a server restart or a network blip; failing this long
# since the last poll that was answered in full ends the wait as a failure.
UNREACHABLE_GRACE = 120.0
# execd kills the command at its deadline; a command still running this long past it is
# not being watched by a healthy execd.
MAX_RUNNING_PAST_DEADLINE = 30.0
# The least time one poll is given, however near the next renewal or deadline: a renewal
# takes one small request to the server.
MIN_POLL_BUDGET = 1.0
# The states of a task whose trigger was cancelled without the task being ended: still
# deferred (its trigger was handed to another triggerer), or resumed by that trigger's event.
STILL_RUNNING_STATES = frozenset({"deferred", "scheduled", "queued", "running"})
# What execd's line events end a line at: CR LF, a lone CR, or LF.
_LINE_END = re.compile(r"\r\n?|\n")


@dataclass
class _Stream:
    """One stream of the command's output, its cursor and the tail kept of it."""

    name: str
    path: str | None
    cursor: int
    tail: BoundedTail

    async def read(self, command: BackgroundCommand, limit: int) -> OutputPiece:
        if self.path is None:
            return await command.output(self.cursor, limit=limit)
        return await command.output_file(self.path, self.cursor, limit=limit)


@dataclass
class _Watch:
    """What one wait has learned so far."""

    streams: list[_Stream]
    output: OutputLog
    # When a poll was last answered in full, on the monotonic clock.
    last_answer: float
    # Reached once per wait: one client, however often the first polls fail.
    command: BackgroundCommand | None = None
    history_skipped: bool = False
    # None until the first renewal, which comes at once: a triggerer taking the trigger up
    # after a restart cannot tell how much of the lease the last renewal left.
    renew_at: float | None = None
    missing_since: float | None = None


def _as_streamed(text: str) -> str:
    """
    ``text`` as a foreground command's output comes back, from line events that do not say how
    a line ended (docs/execd-wire.rst, wire-lines): every line ending in a line feed.
    """
    text = _LINE_END.sub("\n", text)
    return text if not text or text.endswith("\n") else text + "\n"


class OpenSandboxCommandTrigger(BaseTrigger):
    """
    Polls a background command in a sandbox until it ends, logging new output as it comes and
    renewing the sandbox's lease meanwhile; :doc:`/operator`, "A long command, deferred", says
    what it does on each failure, restart, deadline and kill.

    Everything it needs is in its serialized arguments, deadlines as wall-clock times, so a
    restarted triggerer takes it up where it was deferred. ``secrets`` are the values of the
    task's ``private_env``, masked before anything is logged and in its event; they travel in
    its arguments, which Airflow keeps encrypted with its Fernet key, as a connection's password.

    It fires one event: ``{"status": "ended", "sandbox", "exit_code", "stdout", "stderr",
    "timed_out"}`` with each stream's tail (and ``"stopped"``, saying how, when its stop ended
    the command), ``{"status": "timeout", "sandbox", "message"}`` at the task's deadline, or
    ``{"status": "error", "sandbox", "message"}`` when the command or the sandbox was lost.
    """

    # Class attributes, so that a test can shorten them without sleeping through them.
    missing_record_grace = MISSING_RECORD_GRACE
    unreachable_grace = UNREACHABLE_GRACE

    def __init__(
        self,
        *,
        sandbox: str,
        command_id: str,
        opensandbox_conn_id: str | None,
        command_timeout: float,
        sandbox_timeout: float,
        output_paths: dict[str, str] | None = None,
        deadline_at: float | None = None,
        task_deadline_at: float | None = None,
        poll_interval: float = 1.0,
        max_output_bytes: int = 16 * 1024,
        cursors: dict[str, int] | None = None,
        cursor: int = 0,
        secrets: list[str] | None = None,
        group_file: str | None = None,
        termination_grace_period: float = 0.0,
        stop_at: float | None = None,
    ) -> None:
        super().__init__()
        self.sandbox = sandbox
        self.command_id = command_id
        self.opensandbox_conn_id = opensandbox_conn_id
        self.command_timeout = command_timeout
        self.sandbox_timeout = sandbox_timeout
        # A trigger deferred by an earlier release has one combined output, read through
        # execd's log of it from ``cursor``, and no deadline of its own: both are made here.
        self.output_paths = output_paths
        if deadline_at is None:
            deadline_at = time.time() + command_timeout + MAX_RUNNING_PAST_DEADLINE
        self.deadline_at = deadline_at
        self.task_deadline_at = task_deadline_at
        self.poll_interval = poll_interval
        self.max_output_bytes = max_output_bytes
        self.cursors = (
            dict(cursors)
            if cursors is not None
            else dict.fromkeys(output_paths or ["output"], cursor)
        )
        self.secrets = list(secrets or [])
        self.group_file = group_file
        self.termination_grace_period = termination_grace_period
        self.stop_at = stop_at
        # How this trigger's stop ended the command, once it has.
        self._stopped: str | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        # Every argument as it stands now, but the one cursor of an earlier release's trigger,
        # which ``cursors`` holds.
        names = inspect.signature(OpenSandboxCommandTrigger.__init__).parameters
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {name: getattr(self, name) for name in names if name not in ("self", "cursor")},
        )

    def _lifecycle(self) -> AsyncLifecycle:
        # Awaited on the triggerer's loop: no backend, whose calls block and leases use threads.
        return AsyncLifecycle(self.opensandbox_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Before the first line is logged: the worker's masker, which knows these values,
        # is not the triggerer's.
        for secret in self.secrets:
            mask_secret(secret)
        # Closing it closes only this process's connections: the sandbox itself is the
        # worker's to destroy once it has the event, or on_kill's.
        async with self._lifecycle() as lifecycle:
            async with contextlib.AsyncExitStack() as clients:
                event = await self._wait(lifecycle, lambda: self._connect(lifecycle, clients))
            await self._renew_for_the_worker(lifecycle)
        # Airflow logs the event it is given, and stores it for the worker: a secret the
        # command printed into a tail, or a message quoting one, is masked in it already.
        yield TriggerEvent(redact(event.payload))

    async def _connect(
        self, lifecycle: AsyncLifecycle, clients: contextlib.AsyncExitStack
    ) -> BackgroundCommand:
        client, execd = await self._execd(lifecycle, clients)
        return BackgroundCommand(client, execd.url, self.command_id, execd.request_timeout)

    async def _execd(
        self, lifecycle: AsyncLifecycle, clients: contextlib.AsyncExitStack
    ) -> tuple[httpx.AsyncClient, ExecdEndpoint]:
        """An async client of the sandbox's execd, closed with ``clients``, and where it is."""
        execd = await lifecycle.execd_endpoint(self.sandbox)
        client = await clients.enter_async_context(
            # Its TLS trust is the connection's: the extra authorities its ca_bundle names too.
            execd_client(headers=execd.headers, verify=execd.verify, timeout=execd.request_timeout)
        )
        return client, execd

    async def _renew(self, lifecycle: AsyncLifecycle) -> bool:
        return await lifecycle.renew(self.sandbox, default_lease=self.sandbox_timeout)

    async def _wait(
        self, lifecycle: AsyncLifecycle, connect: Callable[[], Awaitable[BackgroundCommand]]
    ) -> TriggerEvent:
        """Poll until the command ends, a deadline passes, or the sandbox is lost for good."""
        paths = self.output_paths or {}
        watch = _Watch(
            streams=[
                _Stream(name, paths.get(name), at, BoundedTail(self.max_output_bytes))
                for name, at in self.cursors.items()
            ],
            output=OutputLog(self.log),
            last_answer=time.monotonic(),
        )
        while True:
            try:
                # A poll ends by the next renewal or deadline, whatever execd sends meanwhile.
                async with asyncio.timeout(self._poll_budget(watch)):
                    event = await self._poll(lifecycle, connect, watch)
            except Exception as e:
                if isinstance(e, TimeoutError):
                    e = TimeoutError(
                        "execd's answers took the whole poll, up to the next renewal or deadline"
                    )
                # Whatever failed, the server, execd or this code reading them, the sandbox may
                # still be there; only a failure that lasts ends the wait, with an event, so
                # the worker destroys the sandbox rather than Airflow failing the task blind.
                self.log.warning("Could not poll command %s: %s", self.command_id, e)
                if time.monotonic() - watch.last_answer > self.unreachable_grace:
                    return self._error(
                        f"Sandbox {self.sandbox} could not be polled for "
                        f"{self.unreachable_grace:g}s; the last failure: {e}"
                    )
            else:
                if event is not None:
                    return event
                watch.last_answer = time.monotonic()
            if (past := self._past_a_deadline()) is not None:
                return past
            stop_due = self.stop_at is not None and time.time() >= self.stop_at
            if stop_due and self._stopped is None and self.group_file is not None:
                await self._stop("timed out", lifecycle)
            await asyncio.sleep(self.poll_interval)

    async def _poll(
        self,
        lifecycle: AsyncLifecycle,
        connect: Callable[[], Awaitable[BackgroundCommand]],
        watch: _Watch,
    ) -> TriggerEvent | None:
        """One look at the sandbox and the command: the event that ends the wait, if any."""
        now = time.monotonic()
        if watch.renew_at is None or now >= watch.renew_at:
            if not await self._renew(lifecycle):
                return self._gone()
            watch.renew_at = now + renewal_interval(self.sandbox_timeout)
        if watch.command is None:
            watch.command = await connect()
        if not watch.history_skipped:
            await self._skip_history(watch.command, watch.streams)
            watch.history_skipped = True
        # The status first: output written before it says "ended" is read after it.
        status = await watch.command.status()
        for stream in watch.streams:
            await self._read_output(watch.command, stream, watch.output)
        if status is not None and status.ended:
            watch.output.close()
            return self._ended(status, watch.streams)
        if status is not None:
            watch.missing_since = None
        elif watch.missing_since is None:
            watch.missing_since = now
        elif now - watch.missing_since > self.missing_record_grace:
            # Through the server a sandbox that is gone answers as a lost record does.
            if not await self._renew(lifecycle):
                return self._gone()
            return self._error(
                f"execd in sandbox {self.sandbox} has no record of command "
                f"{self.command_id}; it may have restarted."
            )
        return None

    async def _stop(self, why: str, lifecycle: AsyncLifecycle) -> None:
        """Stop the command gracefully, and remember how, for the event; log how it went."""
        if self.group_file is None:
            return
        stop = StopCommand(self.group_file, self.termination_grace_period)
        self.log.info(
            "Stopping command %s in sandbox %s (%s): SIGTERM to its process group, then SIGKILL "
            "after %gs.",
            self.command_id,
            self.sandbox,
            why,
            self.termination_grace_period,
        )
        try:
            # A client of its own: on_kill stops a command after the wait's clients are closed.
            async with contextlib.AsyncExitStack() as clients:
                client, execd = await self._execd(lifecycle, clients)
                result = await run_to_end(
                    client,
                    execd.url,
                    stop.script,
                    timeout=stop.timeout,
                    max_output_bytes=stop.max_output_bytes,
                    call_timeout=execd.request_timeout,
                )
            stopped = stop.outcome(result, self.sandbox)
        except transport_errors() as e:
            self.log.warning("Could not stop command %s gracefully: %s", self.command_id, e)
            return
        self.log.info("The command in sandbox %s was %s.", self.sandbox, stopped)
        # Found ended counts too: it is not stopped again, and its own end is its event's.
        self._stopped = str(stopped) if stopped.ended_it else ""

    def _poll_budget(self, watch: _Watch) -> float:
        """How long one poll may take: until the next renewal or deadline, at least a second."""
        stop_at = self.stop_at if self._stopped is None else None
        wall = time.time()
        deadlines = (self.deadline_at, stop_at, self.task_deadline_at)
        until = [at - wall for at in deadlines if at is not None]
        # The first poll renews as it starts, so it ends by the renewal after that one.
        if watch.renew_at is None:
            until.append(renewal_interval(self.sandbox_timeout))
        else:
            until.append(watch.renew_at - time.monotonic())
        # The floor lets a poll that is due for a renewal make it, and one past a deadline end.
        return max(min(until), MIN_POLL_BUDGET)

    def _past_a_deadline(self) -> TriggerEvent | None:
        now = time.time()
        if self.task_deadline_at is not None and now >= self.task_deadline_at:
            return self._event(
                OutOfTime(
                    f"The task ran out of its execution_timeout while command "
                    f"{self.command_id} ran in sandbox {self.sandbox}. Raise "
                    "execution_timeout if the command needs longer."
                )
            )
        if now > self.deadline_at:
            return self._error(
                f"Command {self.command_id} was still running "
                f"{MAX_RUNNING_PAST_DEADLINE:g}s past its {self.command_timeout:g}s deadline, "
                "which execd enforces."
            )
        return None

    async def _skip_history(self, command: BackgroundCommand, streams: list[_Stream]) -> None:
        """Move each cursor to no more than ``max_output_bytes`` before its stream's end."""
        for stream in streams:
            if stream.path is None:
                # execd's combined log says its size only along with everything to its end.
                continue
            end = (await stream.read(command, limit=1)).end
            if end - stream.cursor <= self.max_output_bytes:
                continue
            skipped = end - self.max_output_bytes - stream.cursor
            self.log.info(
                "[%d bytes of %s printed before this triggerer took the command up are not "
                "logged here; the last %d bytes follow]",
                skipped,
                stream.name,
                self.max_output_bytes,
            )
            stream.tail.mark_dropped()
            stream.cursor = self.cursors[stream.name] = end - self.max_output_bytes

    async def _read_output(
        self, command: BackgroundCommand, stream: _Stream, output: OutputLog
    ) -> None:
        """Log and keep all output past the stream's cursor, one bounded read at a time."""
        while True:
            piece = await stream.read(command, MAX_OUTPUT_READ)
            stream.cursor = self.cursors[stream.name] = piece.cursor
            if piece.data:
                output.feed(stream.name, piece.data)
                stream.tail.append(piece.data)
            # A read that brings nothing ends the poll's reading, whatever end execd claims.
            if piece.cursor >= piece.end or not piece.data:
                return
            if output.full and piece.end - piece.cursor > self.max_output_bytes:
                # Nothing more is logged, so only the tail is worth reading.
                stream.tail.mark_dropped()
                stream.cursor = self.cursors[stream.name] = piece.end - self.max_output_bytes

    async def _renew_for_the_worker(self, lifecycle: AsyncLifecycle) -> None:
        """One more lease, so a worker that takes the event late still finds the sandbox."""
        try:
            await self._renew(lifecycle)
        except Exception as e:
            self.log.warning(
                "Could not renew sandbox %s before handing it back: %s", self.sandbox, e
            )

    def _ended(self, status: CommandStatus, streams: list[_Stream]) -> TriggerEvent:
        exit_code = status.exit_status
        timed_out = status.duration is not None and killed_at_deadline(
            exit_code, status.error, status.duration, self.command_timeout
        )
        tails = {
            stream.name: _as_streamed(stream.tail.text()) if stream.path else stream.tail.text()
            for stream in streams
        }
        if self.output_paths is None:
            # An earlier release's one combined output, with Go's word on how it ended.
            stdout = stderr = tails["output"]
            if exit_code != 0 and status.error:
                stderr += f"{status.error}\n"
        else:
            # Only what the command printed, as in the foreground; the log says how it ended.
            stdout, stderr = tails["stdout"], tails["stderr"]
        self.log.info(
            "Command %s in sandbox %s ended: %s.",
            self.command_id,
            self.sandbox,
            quoted(status.error, 200) or f"exit code {exit_code}",
        )
        return self._event(CommandEnd(exit_code, stdout, stderr, timed_out, self._stopped or None))

    def _gone(self) -> TriggerEvent:
        return self._error(
            f"Sandbox {self.sandbox} ended while the command ran: it was destroyed, killed or "
            "reached the end of its lifetime on the server."
        )

    def _error(self, message: str) -> TriggerEvent:
        return self._event(CommandLost(message))

    def _event(self, end: WaitEnd) -> TriggerEvent:
        return TriggerEvent(CommandEvent(self.sandbox, end).payload())

    async def on_kill(self) -> None:
        """
        Destroy the sandbox if the task was ended while it waited (marked failed or success, or
        cleared); leave it if the task still runs. Airflow 3.3 cancels a trigger alike when its
        task is ended and when it is handed to another triggerer, so the task's state tells them
        apart (see :data:`STILL_RUNNING_STATES`).
        """
        state = await self._task_state()
        if state in STILL_RUNNING_STATES:
            self.log.info(
                "Left sandbox %s running: its task is %s, so this trigger was handed on.",
                self.sandbox,
                state,
            )
            return
        async with self._lifecycle() as lifecycle:
            # A command still running is given its grace before its sandbox goes.
            await self._stop("its task was ended", lifecycle)
            await lifecycle.kill(self.sandbox)
        self.log.info("Destroyed sandbox %s, since its task was ended.", self.sandbox)

    async def _task_state(self) -> str | None:
        """The state of the task this trigger waits for, or ``None`` when it cannot be read."""
        ti = getattr(self, "task_instance", None)
        if ti is None:
            return None
        try:
            # The Task SDK offers this lookup publicly only on a running task's instance; a
            # trigger holds none, and the class's static method makes the same call through
            # the triggerer's supervisor. tests/unit/test_airflow_internals.py fails if it moves.
            from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

            identity = TaskInstanceIdentity.of(ti)
            return await asyncio.to_thread(identity.state, RuntimeTaskInstance.get_task_states)
        except Exception as e:
            self.log.warning("Could not read the state of the task of %s: %s", self.sandbox, e)
            return None
