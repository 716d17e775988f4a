"""
A background command's status and output, read from execd asynchronously, for a trigger.

Its stream ends once it has started, so its status and its output from a byte cursor are asked
for by id (docs/execd-wire.rst, wire-background, wire-status, wire-logs), async, since the
triggerer runs many triggers on one event loop. execd writes its stdout and stderr to one file,
so :func:`separated` sends each stream to a file of its own, read by byte range (wire-range):
the streams stay apart, as a foreground command's do, and a file's size is known before any of
it is read.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider._clients import afirst_bytes, aread_at_most, within
from opensandbox_provider._errors import quoted
from opensandbox_provider.execd._command_id import in_path
from opensandbox_provider.execd._command_status import MAX_STATUS_BODY, CommandStatus, parse_status

# execd gives the offset of the output's end in this header (docs/execd-wire.rst, wire-logs).
TAIL_CURSOR_HEADER = "EXECD-COMMANDS-TAIL-CURSOR"
# Where a separated command's streams go: /tmp exists in every image execd runs in, and a
# name of its own per command keeps two commands of one sandbox apart.
OUTPUT_DIRECTORY = "/tmp"
# ``bytes <first>-<last>/<size>`` or ``bytes */<size>`` (docs/execd-wire.rst, wire-range).
_CONTENT_RANGE = re.compile(r"bytes (?:\d+-\d+|\*)/(\d+)")
# Of a refusal, this much is quoted in the error; the rest is not read.
_QUOTED_REFUSAL = 500


def output_paths() -> dict[str, str]:
    """A new pair of files for one command's stdout and stderr."""
    name = f"{OUTPUT_DIRECTORY}/.opensandbox-{uuid.uuid4().hex}"
    return {"stdout": f"{name}.stdout", "stderr": f"{name}.stderr"}


def separated(command: str, paths: dict[str, str]) -> str:
    """
    ``command`` with its stdout and stderr appended to the files in ``paths``: the redirection
    is the script's first line, so all its shell runs, its own errors too, writes to them.
    """
    stdout, stderr = shlex.quote(paths["stdout"]), shlex.quote(paths["stderr"])
    return f"exec >>{stdout} 2>>{stderr}\n{command}"


@dataclass(frozen=True)
class OutputPiece:
    """Output from a cursor, the cursor past it, and where the output currently ends."""

    data: bytes
    cursor: int
    end: int


class BackgroundCommand:
    """
    One background command of one sandbox's execd, over an async client. Every call ends whole
    ``call_timeout`` seconds after it starts and reads no more than it can use (see
    :mod:`.._clients`): on the triggerer's shared loop a slow or verbose guest costs one wait.
    """

    def __init__(
        self, client: httpx.AsyncClient, base_url: str, command_id: str, call_timeout: float
    ) -> None:
        self._client = client
        self._command = f"{base_url.rstrip('/')}/command"
        self._files = f"{base_url.rstrip('/')}/files"
        self.command_id = command_id
        self._call_timeout = call_timeout

    async def status(self) -> CommandStatus | None:
        """The command's status, or ``None`` while execd has no record of it (a 404)."""
        url = f"{self._command}/status/{in_path(self.command_id)}"
        async with (
            within(self._call_timeout, "the status request"),
            self._client.stream("GET", url) as response,
        ):
            if response.status_code == 404:
                # For an instant after the start the record may not exist yet; through the
                # server, a sandbox that is gone answers the same. The caller tells which.
                return None
            await require_ok(response, "read the status of a background command")
            body = await aread_at_most(response, MAX_STATUS_BODY)
        return parse_status(body, self.command_id)

    async def output(self, cursor: int, *, limit: int) -> OutputPiece:
        """Up to ``limit`` bytes of the combined output from byte ``cursor`` on."""
        async with (
            within(self._call_timeout, "the request for the command's output"),
            self._client.stream(
                "GET",
                f"{self._command}/{in_path(self.command_id)}/logs",
                params={"cursor": str(cursor)},
            ) as response,
        ):
            await require_ok(response, "read the output of a background command")
            try:
                end = int(response.headers.get(TAIL_CURSOR_HEADER, ""))
            except ValueError:
                end = cursor
            data = (await afirst_bytes(response, limit))[:limit]
        return OutputPiece(data, cursor + len(data), max(end, cursor + len(data)))

    async def output_file(self, path: str, cursor: int, *, limit: int) -> OutputPiece:
        """
        Up to ``limit`` bytes of the file at ``path`` from byte ``cursor`` on, and its size, by a
        range read, so neither side holds more than ``limit`` bytes however large the file is.
        """
        async with (
            within(self._call_timeout, "the request for the command's output"),
            self._client.stream(
                "GET",
                f"{self._files}/download",
                params={"path": path},
                headers={"Range": f"bytes={cursor}-{cursor + limit - 1}"},
            ) as response,
        ):
            if response.status_code == 404:
                return OutputPiece(b"", cursor, cursor)
            if response.status_code == 416:
                # Nothing from the cursor on; the header still says how large the file is.
                return OutputPiece(b"", cursor, max(cursor, _size(response)))
            if response.status_code != 206:
                await require_ok(response, "read the output of a background command")
            # An empty file is a 200 whatever the range; any other 200 is the whole file.
            skip = cursor if response.status_code == 200 else 0
            data = (await afirst_bytes(response, limit, skip=skip))[:limit]
            end = _size(response) if response.status_code == 206 else cursor + len(data)
        return OutputPiece(data, cursor + len(data), max(end, cursor + len(data)))


def _size(response: httpx.Response) -> int:
    """The file's size in a range answer's ``Content-Range``; 0 when it says none."""
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    return int(match.group(1)) if match else 0


async def require_ok(response: httpx.Response, doing: str) -> None:
    """A ``SandboxError`` quoting the start of execd's answer, unless it is a 200."""
    if response.status_code == 200:
        return
    said = (await afirst_bytes(response, _QUOTED_REFUSAL)).decode("utf-8", "replace")
    raise SandboxError(
        f"execd refused to {doing} with HTTP {response.status_code}: "
        f"{quoted(said, _QUOTED_REFUSAL)}"
    )
