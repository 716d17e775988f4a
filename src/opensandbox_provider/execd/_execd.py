"""
execd's API as this backend speaks it: what each call sends, and what its answer means.

Each call returns plain values or raises the contract's errors; what to do about them (a
path that is missing or a sandbox that is gone, a file too large, a stream given up on) is
the backend's to decide. Every call is made here rather than through the SDK, which reads
any answer whole and inflated as its ``Content-Encoding`` says (an answer the guest may write),
logs a traceback for every missing path, and holds a command's stream open past its end.

One call is the exception to "our errors": :meth:`Execd.run` raises
:class:`~.._errors.ErrorAnswer` for an error answer and lets transport errors through, since a
broken stream may be the sandbox ending under the command, which only the server can tell.
"""

from __future__ import annotations

import json
import logging
import posixpath
import shlex
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxTerminalError

from opensandbox_provider._clients import first_bytes, iter_raw, read_at_most
from opensandbox_provider._errors import as_sandbox_errors, quoted, transport_errors
from opensandbox_provider.execd import _command_id as command_ids
from opensandbox_provider.execd._deadline import Deadline, bounded_by
from opensandbox_provider.execd._events import Ending, EventParser
from opensandbox_provider.execd._http import Options, SandboxHttp, iter_body
from opensandbox_provider.execd._recovery import GaveUp, await_end
from opensandbox_provider.execd._stream_end import (
    Abandoned,
    BrokeEndRecovered,
    BrokeEndUnknown,
    EndedByItself,
    StreamedCommand,
)

if TYPE_CHECKING:
    from opensandbox import SandboxSync

log = logging.getLogger(__name__)

EXECD_PORT = 44772
# execd sends a heartbeat every 3 s while a command runs (docs/execd-wire.rst, wire-ping), so this
# long without a single byte is three heartbeats missed: the stream has stalled, whatever the
# command does.
STALL_WINDOW = 10.0
# A silence is not yet a stall: while the real execd encodes one huge line it sends nothing, not
# even its heartbeat, for longer than the window (10.7 s measured on a 1 GiB line), and answers a
# ping meanwhile within 7.5 s. So after each silent window execd is pinged on a fresh connection
# and the stream is given up only when that goes unanswered this long too: a frozen or vanished
# sandbox is noticed within the two added up.
LIVENESS_PROBE_TIMEOUT = 15.0
# How long past its deadline a command's stream is read at most, heartbeats or not, and a silent
# one asked after through the command's status. execd kills the command at its deadline and ends
# the stream a second later, heartbeating until then (docs/execd-wire.rst, wire-timeout,
# wire-grace): 9 s is that second, two heartbeats missed and a second to spare, so what is still
# open then is dead, whatever execd's ping says. The last second of the 10 s a call promises past
# its budget (docs/backend.rst) is for destroying the sandbox.
MAX_STREAM_PAST_DEADLINE = 9.0
# How often a new sandbox's execd is asked whether it is up. A refused or proxied ping
# answers in milliseconds, so polling this often costs nothing and saves the SDK's
# half-second backoff on a daemon that usually starts within a fraction of a second.
READY_POLL_INTERVAL = 0.025
# A ping waits no longer than the readiness deadline leaves, but never less than this.
MIN_PING_TIMEOUT = 0.05
# A description of one path is a few hundred bytes.
MAX_INFO_BODY = 64 * 1024
# Resolving a symbolic link is one readlink, done in milliseconds; a guest that takes longer
# than this is not answering, and the read or export is refused.
LINK_RESOLVE_TIMEOUT_MS = 30_000
# A file request made while a sandbox is provisioned, after execd has answered its health
# check, so an answer comes quickly or not at all.
PROVISIONING_REQUEST_SECONDS = 30.0
# The listing body is refused past this size before it is parsed, whatever it holds:
# ten thousand entries with long absolute paths fit comfortably.
MAX_LIST_BODY = 16 * 1024 * 1024
# How a stream that ended without its terminal event broke, as a clause for a sentence.
ENDED_EARLY = "the stream ended before execd said how the command ended"
_EVENT_STREAM_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}


class CutShort(SandboxError):
    """
    A download's body ended, or went silent past the read timeout, before the length execd
    announced; the transport error is its cause. A file that shrank while it was sent, a sandbox
    that ended and a failed network look alike, so the caller, which can ask the server and execd
    again, decides which it was.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"The download of {path!r} stopped before all of it arrived.")


class NoSuchPath(SandboxError):
    """
    execd answered 404 for a path (docs/execd-wire.rst, wire-file-errors), as a sandbox gone
    from behind the server's proxy does: the caller, which can ask the server, decides which.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"{path!r} does not exist in the sandbox.")


@dataclass(frozen=True)
class FileInfo:
    """What execd says a path is, not following a link (docs/execd-wire.rst, wire-fileinfo)."""

    # ``file``, ``directory``, ``symlink`` or ``other``.
    kind: str
    # The inode's size: a symbolic link's is the length of the path it holds.
    size: int
    # Absolute, with ``~`` and ``$VAR`` expanded as execd expands them.
    path: str


@dataclass(frozen=True)
class Entry:
    """One name in a directory listing."""

    name: str
    is_directory: bool


@dataclass(frozen=True)
class StreamWindows:
    """A command stream's stall window, ping timeout and most time past its deadline."""

    stall: float = STALL_WINDOW
    ping: float = LIVENESS_PROBE_TIMEOUT
    past_deadline: float = MAX_STREAM_PAST_DEADLINE


@dataclass(frozen=True)
class _Break:
    """How a command's stream broke before its terminal event, for :meth:`Execd._recover`."""

    # Why, as a clause for a sentence.
    why: str
    # When execd last showed it was there, and when the command is given up on.
    last_contact: float
    give_up_at: float
    # The clause that says the command was given up on at its backstop.
    overran: str
    # The transport error, when the connection dropped.
    dropped: httpx.TransportError | None = None
    # Whether the stream ended by itself, only before its terminal event: no sign of a stuck
    # guest, so a command whose end execd cannot then say does not cost the sandbox.
    ended_early: bool = False


class Execd:
    """The execd of one sandbox, reached through that sandbox's :class:`SandboxHttp`."""

    def __init__(
        self, sandbox: SandboxSync, http: SandboxHttp, windows: StreamWindows | None = None
    ) -> None:
        self._sandbox = sandbox
        self._http = http
        self._windows = windows or StreamWindows()

    def ping(self, *, within: float) -> bool:
        """
        Whether execd answers its health check, asked for no longer than ``within`` seconds.

        A status below 300 is ready; anything else, or no answer, is not ready yet, except a
        refused API key, which waiting cannot fix (docs/execd-wire.rst, wire-readiness).
        """
        timeout = min(self._http.request_timeout, max(within, MIN_PING_TIMEOUT))
        try:
            # For the whole answer, not each read of it: a ping answered a byte at a time is
            # not an answer.
            with bounded_by(time.monotonic() + timeout):
                status = self._http.status("GET", EXECD_PORT, "/ping", timeout=timeout)
        except httpx.TransportError:
            return False
        if status in (401, 403):
            raise SandboxTerminalError(
                f"Sandbox {self._sandbox.id} refused its health check with HTTP {status}: the "
                "server did not accept this connection's API key for it. Check the "
                "connection's password."
            )
        return status < 300

    def wait_until_answering(self, deadline: float) -> float | None:
        """Ping until execd answers, by ``deadline``; how long that took, or ``None``."""
        started = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if self.ping(within=remaining):
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                return None
            time.sleep(min(READY_POLL_INTERVAL, max(remaining, 0.0)))

    def start(self, command: str, *, timeout_ms: int, cwd: str | None) -> str:
        """Start ``command`` in the background (docs/execd-wire.rst, wire-background); its id."""
        # The stream of a background command carries no output, so one byte of budget is all.
        streamed = self.run(
            command, timeout_ms=timeout_ms, max_output_bytes=1, cwd=cwd, background=True
        )
        command_id = streamed.parser.command_id
        end = streamed.stream_end
        if isinstance(end, Abandoned) or command_id is None:
            raise SandboxError(
                f"Sandbox {self._sandbox.id} did not say which command it started"
                + (f": {end.why}." if isinstance(end, Abandoned) else ".")
            )
        return command_id

    def run(
        self,
        command: str,
        *,
        timeout_ms: int,
        max_output_bytes: int,
        cwd: str | None,
        on_output: Callable[[str, bytes], None] | None = None,
        background: bool = False,
        gone: Callable[[], bool] = lambda: False,
    ) -> StreamedCommand:
        """
        Run ``command`` through execd, which kills it ``timeout_ms`` milliseconds after it starts.

        ``cwd`` ``None`` leaves the directory to execd; ``on_output`` is handed each stream's
        output as it arrives (see :class:`EventParser`); a ``background`` stream ends once the
        command has started (docs/execd-wire.rst, wire-background). The stream is left at the
        terminal event, not after execd's grace (wire-grace). A silent stream is given up on as
        :data:`STALL_WINDOW` and :data:`MAX_STREAM_PAST_DEADLINE` say. A foreground stream that
        breaks before its terminal event is not the command's end: how it ended is asked of
        execd (see :mod:`._recovery`), and ``gone``, which asks the server whether the sandbox
        still exists, tells a killed sandbox from a network blip.
        """
        body: dict[str, object] = {"command": command, "timeout": timeout_ms}
        if cwd is not None:
            body["cwd"] = cwd
        if background:
            body["background"] = True
        parser = EventParser(max_output_bytes, on_output)
        # The stream is closed before a break is recovered from: execd may be holding it.
        with ExitStack() as opened:
            response = self._answer(body, opened)
            if isinstance(response, Abandoned):
                return StreamedCommand(parser, response)
            # execd starts the deadline's clock before it sends the headers, so on this clock
            # the command is killed by then plus its budget, or sooner.
            kill_by = time.monotonic() + timeout_ms / 1000
            read = self._read_stream(response, parser, kill_by, timeout_ms / 1000, background)
        if parser.command_id is not None:
            # Before the id is asked after, logged or handed to a trigger.
            command_ids.checked(parser.command_id, self._sandbox.id)
        if isinstance(read, StreamedCommand):
            return read
        return self._recover(parser, read, gone)

    def _answer(self, body: dict[str, object], opened: ExitStack) -> httpx.Response | Abandoned:
        """
        execd's answer to ``body``, with its stream unread and closed with ``opened``; or, when
        no answer came and execd then answered no ping either, the stream abandoned, and why.

        execd commits its headers with the command's first event, once the process has
        started (docs/execd-wire.rst, wire-framing), so a slow start is no stall: the headers
        are waited for for the request timeout, bytes dripped into them included.
        """
        waited = self._http.request_timeout
        try:
            # execd answers a command it accepted with exactly 200
            # (docs/execd-wire.rst, wire-command-request).
            with bounded_by(time.monotonic() + waited):
                response = opened.enter_context(
                    self._http.stream(
                        "POST",
                        EXECD_PORT,
                        "/command",
                        "Run command",
                        json=body,
                        headers=_EVENT_STREAM_HEADERS,
                        timeout=waited,
                        expect=200,
                        own_connection=True,
                    )
                )
        except httpx.TimeoutException as e:
            if not isinstance(e, (httpx.ReadTimeout, httpx.PoolTimeout)):
                raise
            if not self.ping(within=self._windows.ping):
                return Abandoned(
                    f"execd had not answered the command {waited:g}s after it was sent, and "
                    f"then did not answer a ping within {self._windows.ping:g}s"
                )
            raise SandboxError(
                f"Sandbox {self._sandbox.id} answers its health check, but its execd had not "
                f"started the command {waited:g}s after it was sent. The command was not sent "
                "again: it may still start, and execd kills it at its deadline. Run it again "
                "once the sandbox is less busy, or raise the connection's request_timeout."
            ) from e
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            raise SandboxTerminalError(
                f"The sandbox answered a command with Content-Type '{quoted(content_type, 200)}' "
                "rather than an event stream, so what answers on its execd port is not execd. "
                "Check the execd image the OpenSandbox server is configured with."
            )
        # Past the headers, a read waits for the stall window: on the socket path each read says
        # so itself, and any other transport takes it from the request, read by read.
        timeouts = dict(response.request.extensions.get("timeout", {}))
        response.request.extensions["timeout"] = {**timeouts, "read": self._windows.stall}
        return response

    def _read_stream(
        self,
        response: httpx.Response,
        parser: EventParser,
        kill_by: float,
        budget: float,
        background: bool,
    ) -> StreamedCommand | _Break:
        """Read the command's stream into ``parser``: how it ended, or how it broke."""
        windows = self._windows
        give_up_at = kill_by + windows.past_deadline
        overran = (
            f"the command's stream was still open {windows.past_deadline:g}s past its "
            f"{budget:g}s budget"
        )
        unsaid = (
            f"execd had still not said how the command ended {windows.past_deadline:g}s past "
            f"its {budget:g}s budget"
        )
        # When execd last showed it was there: a byte of the stream, or an answered ping.
        last_contact = time.monotonic()
        # Why the last silence was not waited out, once one was not.
        silence: str | None = None
        dropped: httpx.TransportError | None = None

        def still_alive() -> bool:
            nonlocal silence, last_contact
            now = time.monotonic()
            if now >= kill_by:
                silence = (
                    f"the sandbox sent nothing for {windows.stall:g}s, and by then the "
                    f"command's {budget:g}s deadline had passed, at which execd kills it and "
                    "ends its stream"
                )
                return False
            # A ping says whether the command may still be running; past the deadline only
            # its status can say how it ended.
            within = min(windows.ping, kill_by - now)
            if self.ping(within=within):
                last_contact = time.monotonic()
                return True
            silence = (
                f"the sandbox sent nothing for {windows.stall:g}s, not even execd's heartbeat, "
                f"and execd did not answer a ping within {within:.3g}s"
            )
            return False

        try:
            # Every read ends by the backstop, the chunk framing's too, so nothing the sandbox
            # sends can stretch it.
            with bounded_by(give_up_at):
                for chunk in iter_body(response, windows.stall, still_alive):
                    last_contact = time.monotonic()
                    parser.feed(chunk)
                    if parser.ending is not None:
                        return StreamedCommand(parser, EndedByItself())
                    if last_contact > give_up_at:
                        return StreamedCommand(parser, Abandoned(overran))
        except httpx.TransportError as e:
            if time.monotonic() >= give_up_at:
                return StreamedCommand(parser, Abandoned(overran))
            if isinstance(e, httpx.ReadTimeout):
                broke = silence or f"the sandbox sent nothing for {windows.stall:g}s"
            elif parser.command_id is None:
                # Nothing says the command started, so there is nothing to ask about.
                raise
            else:
                broke = f"the connection broke ({quoted(e, 200) or type(e).__name__})"
                dropped = e
        else:
            parser.close()
            # A background command's stream ends once it has started, with no terminal event.
            if parser.ending is not None or background or parser.command_id is None:
                return StreamedCommand(parser, EndedByItself())
            return _Break(ENDED_EARLY, last_contact, give_up_at, unsaid, ended_early=True)
        if background or parser.command_id is None:
            return StreamedCommand(parser, Abandoned(broke))
        return _Break(broke, last_contact, give_up_at, unsaid, dropped)

    def _recover(
        self, parser: EventParser, broken: _Break, gone: Callable[[], bool]
    ) -> StreamedCommand:
        """How a command whose stream broke ended, asked of execd (see :mod:`._recovery`)."""
        command_id = parser.command_id
        assert command_id is not None
        broke, dropped = broken.why, broken.dropped
        log.warning(
            "Sandbox %s: the stream of command %s broke (%s); asking execd how it ends.",
            self._sandbox.id,
            command_id,
            broke,
        )
        outcome = await_end(
            self._http,
            EXECD_PORT,
            command_id,
            last_contact=broken.last_contact,
            give_up_at=broken.give_up_at,
            overran=broken.overran,
            gone=gone,
        )
        if isinstance(outcome, GaveUp):
            if dropped is not None:
                # A dropped connection that no later request got past is what it was before
                # recovery: the caller asks the server what became of the sandbox, and a server
                # that cannot be reached is terminal.
                raise dropped
            if broken.ended_early:
                # A stream that ended is no sign of a stuck guest, so the sandbox is kept; the
                # result says the end is unknown.
                return StreamedCommand(parser, BrokeEndUnknown(f"{broke}; {outcome.why}"))
            return StreamedCommand(parser, Abandoned(f"{broke}; {outcome.why}"))
        status = outcome.status
        if status is None:
            return StreamedCommand(parser, BrokeEndUnknown(broke))
        message = status.error if status.exit_status == -1 else ""
        parser.ending = Ending(exit_code=status.exit_status, message=message)
        return StreamedCommand(parser, BrokeEndRecovered(broke))

    def file_info(self, path: str, *, purpose: str, deadline: Deadline) -> FileInfo:
        """What ``path`` is; ``purpose`` completes "Could not ..." in an error's message."""
        body = self._read(
            "/files/info", "Get file info", f"{purpose} {path!r}", path, MAX_INFO_BODY, deadline
        )
        # The answer is keyed by the path as it was asked for (docs/execd-wire.rst, wire-info).
        infos = _json(body)
        entry = infos.get(path) if isinstance(infos, dict) else None
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("size"), int)
            or not isinstance(entry.get("path"), str)
        ):
            raise SandboxError(
                f"The sandbox did not describe {path!r} in a form this backend reads: "
                f"{_what_came(body, infos, MAX_INFO_BODY)}."
            )
        return FileInfo(kind=str(entry.get("type")), size=entry["size"], path=entry["path"])

    def link_target(self, link: str) -> str | None:
        """
        Where the symbolic link at the absolute path ``link`` ends, every link followed, or
        ``None`` when the sandbox cannot say: execd describes a link without following it
        (docs/execd-wire.rst, wire-info), and its download opens what the link points to without
        saying what that is, so the guest's ``readlink`` is asked.
        """
        with as_sandbox_errors(f"resolve the symbolic link {link!r}"):
            streamed = self.run(
                f"readlink -f -- {shlex.quote(link)}",
                timeout_ms=LINK_RESOLVE_TIMEOUT_MS,
                max_output_bytes=MAX_INFO_BODY,
                cwd=None,
            )
        ending = streamed.ending
        if isinstance(streamed.stream_end, Abandoned) or ending is None or ending.exit_code != 0:
            return None
        target = streamed.parser.stdout.text().removesuffix("\n")
        return target if posixpath.isabs(target) else None

    def download(
        self, path: str, *, max_bytes: int, deadline: Deadline
    ) -> Generator[bytes, None, None]:
        """
        The first ``max_bytes + 1`` bytes of ``path``, as they arrive: a generator, so what the
        caller does with a chunk fails in the caller, not as the download. A range from byte 0 is
        always satisfiable, answered with a 200 or a 206 alike (docs/execd-wire.rst, wire-range).
        """
        with (
            _about(path, f"read {path!r}", deadline),
            self._http.stream(
                "GET",
                EXECD_PORT,
                "/files/download",
                "Download file",
                params={"path": path},
                headers={"Range": f"bytes=0-{max_bytes}"},
                own_connection=True,
            ) as response,
        ):
            try:
                # As each socket read brings them: re-cutting them to a fixed size would
                # copy every byte once more for no bound that is not already there.
                yield from iter_raw(response)
            except (httpx.RemoteProtocolError, httpx.ReadTimeout) as e:
                raise CutShort(path) from e

    def upload(self, path: str, content: bytes, *, deadline: Deadline) -> None:
        """Write ``content`` to ``path``, making its parents (docs/execd-wire.rst, wire-upload)."""
        metadata = json.dumps({"path": path, "mode": 644})
        with _about(path, f"write {path!r}", deadline):
            self._send_for_status(
                "/files/upload",
                "Upload file",
                files=[
                    ("metadata", ("metadata", metadata, "application/json")),
                    ("file", (path, content, "application/octet-stream")),
                ],
            )

    def create_working_directory(self, path: str) -> None:
        """
        Create ``path`` and its parents unless it is there (docs/execd-wire.rst, wire-mkdir).

        One that exists is left as it is: execd would set the mode on it too, and ``/tmp`` would
        lose its sticky, world-writable 1777. Any failure is terminal: it is made while the
        sandbox is provisioned.
        """
        doing = f"create the working directory {path!r}"
        try:
            existing = self.file_info(
                path,
                purpose="create the working directory",
                deadline=Deadline.after(PROVISIONING_REQUEST_SECONDS),
            )
        except NoSuchPath:
            existing = None
        except SandboxError as e:
            raise SandboxTerminalError(str(e)) from e
        if existing is not None:
            # A link is left as it is too: the mode would be set on what it points to.
            if existing.kind in ("directory", "symlink"):
                return
            raise SandboxTerminalError(
                f"Could not {doing}: it exists and is not a directory. Choose another workdir."
            )
        with as_sandbox_errors(doing, terminal=True):
            self._send_for_status("/directories", "Create directories", json={path: {"mode": 755}})

    def list_directory(self, path: str, *, limit: int, deadline: Deadline) -> list[Entry] | None:
        """
        The names directly in ``path``, or ``None`` when it holds more than ``limit``, counted
        before any becomes an :class:`Entry`, and past :data:`MAX_LIST_BODY` not parsed at all:
        the SDK's whole parse makes a million objects of a million names before any cap.
        """
        body = self._read(
            "/directories/list",
            "List directory",
            f"list {path!r}",
            path,
            MAX_LIST_BODY,
            deadline,
            depth="1",
        )
        if body is None:
            return None
        entries = _json(body)
        if not isinstance(entries, list):
            raise SandboxError(
                f"The sandbox answered a listing of {path!r} with something other than a list: "
                f"{_what_came(body, entries, MAX_LIST_BODY)}."
            )
        if len(entries) > limit:
            return None
        # Paths come back absolute and clean (docs/execd-wire.rst, wire-listing).
        return [
            Entry(
                name=posixpath.basename(str(entry.get("path", "")).rstrip("/")),
                is_directory=entry.get("type") == "directory",
            )
            for entry in entries
            if isinstance(entry, dict)
        ]

    def _send_for_status(self, route: str, operation: str, **options: Unpack[Options]) -> None:
        """POST to ``route``, whose status says all; no more than :data:`MAX_INFO_BODY` is read."""
        with self._http.stream("POST", EXECD_PORT, route, operation, **options) as response:
            first_bytes(response, MAX_INFO_BODY)

    def _read(
        self,
        route: str,
        operation: str,
        doing: str,
        path: str,
        limit: int,
        deadline: Deadline,
        **query: str,
    ) -> bytes | None:
        """The body of a GET about ``path``, or ``None`` once it runs past ``limit`` bytes."""
        with (
            _about(path, doing, deadline),
            self._http.stream(
                "GET", EXECD_PORT, route, operation, params={"path": path, **query}
            ) as response,
        ):
            return read_at_most(response, limit)


@contextmanager
def by_deadline(deadline: Deadline, doing: str) -> Iterator[None]:
    """
    Bound every read and write in the block by ``deadline``; ``doing`` completes "Could not ...".
    Past it, a failure says the sandbox answered too slowly, which a smaller request may cure.
    """
    with bounded_by(deadline.at):
        try:
            yield
        except transport_errors() as e:
            if not deadline.passed():
                raise
            raise SandboxError(
                f"Could not {doing}: the sandbox had not finished answering after the "
                f"{deadline.seconds:g}s allowed, so the request was given up."
            ) from e


@contextmanager
def _about(path: str, doing: str, deadline: Deadline) -> Iterator[None]:
    """:func:`by_deadline` and :func:`as_sandbox_errors` for a request about ``path``."""
    with by_deadline(deadline, doing), as_sandbox_errors(doing, missing=lambda: NoSuchPath(path)):
        yield


def _json(body: bytes | None) -> Any:
    """``body`` parsed, or ``None`` when it ran past its bound or is not JSON."""
    if body is None:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _what_came(body: bytes | None, parsed: object, limit: int) -> str:
    """What an answer that could not be used held, in a few words, for an error's message."""
    if body is None:
        return f"its answer ran past {limit} bytes"
    if parsed is None and body.strip() != b"null":
        return f"its answer is not JSON ('{quoted(body.decode('utf-8', 'replace'), 80)}')"
    return f"its answer is JSON of another shape ('{quoted(body.decode('utf-8', 'replace'), 80)}')"
