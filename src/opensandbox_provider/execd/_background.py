"""
A background command's status and output, read from execd asynchronously, for a trigger.

A background command's stream ends once it has started; what it does next is asked for by
id: its status, and its output from a byte cursor (docs/execd-wire.rst, wire-background,
wire-status, wire-logs). The triggerer runs many triggers on one event loop, so these reads
are async and never block it; where execd is and which headers reach it are resolved
beforehand, by the backend.

execd writes a background command's stdout and stderr to one file, so a command started with
:func:`separated` sends each stream to a file of its own instead, read by byte range
(docs/execd-wire.rst, wire-range): the streams stay apart, as a foreground command's do, and
a file's size is known before any of it is read.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.execd._command_status import (
    MAX_STATUS_BODY,
    CommandStatus,
    parse_status,
)

# execd gives the offset of the output's end in this header (docs/execd-wire.rst, wire-logs).
TAIL_CURSOR_HEADER = "EXECD-COMMANDS-TAIL-CURSOR"
# Where a separated command's streams go: /tmp exists in every image execd runs in, and a
# name of its own per command keeps two commands of one sandbox apart.
OUTPUT_DIRECTORY = "/tmp"
# ``bytes <first>-<last>/<size>`` or ``bytes */<size>`` (docs/execd-wire.rst, wire-range).
_CONTENT_RANGE = re.compile(r"bytes (?:\d+-\d+|\*)/(\d+)")


def output_paths() -> dict[str, str]:
    """A new pair of files for one command's stdout and stderr."""
    name = f"{OUTPUT_DIRECTORY}/.opensandbox-{uuid.uuid4().hex}"
    return {"stdout": f"{name}.stdout", "stderr": f"{name}.stderr"}


def separated(command: str, paths: dict[str, str]) -> str:
    """
    ``command`` with its stdout and stderr appended to the files in ``paths``.

    The redirection is the script's first line, so everything the command's shell runs,
    its own error messages too, writes to those files; the command itself is unchanged.
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
    """One background command of one sandbox's execd, over an async client."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, command_id: str) -> None:
        self._client = client
        self._base_url = base_url.rstrip("/")
        self.command_id = command_id

    async def status(self) -> CommandStatus | None:
        """The command's status, or ``None`` while execd has no record of it (a 404)."""
        response = await self._client.get(f"{self._base_url}/command/status/{self.command_id}")
        if response.status_code == 404:
            # For an instant after the start the record may not exist yet; through the
            # server, a sandbox that is gone answers the same. The caller tells which.
            return None
        _require_ok(response, "read the status of")
        body = response.json() if len(response.content) <= MAX_STATUS_BODY else None
        return parse_status(body, self.command_id)

    async def output(self, cursor: int, *, limit: int) -> OutputPiece:
        """Up to ``limit`` bytes of the combined output from byte ``cursor`` on."""
        async with self._client.stream(
            "GET",
            f"{self._base_url}/command/{self.command_id}/logs",
            params={"cursor": str(cursor)},
        ) as response:
            if response.status_code != 200:
                await response.aread()
                _require_ok(response, "read the output of")
            try:
                end = int(response.headers.get(TAIL_CURSOR_HEADER, ""))
            except ValueError:
                end = cursor
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += chunk[: limit - len(data)]
                if len(data) >= limit:
                    break
        return OutputPiece(bytes(data), cursor + len(data), max(end, cursor + len(data)))

    async def output_file(self, path: str, cursor: int, *, limit: int) -> OutputPiece:
        """
        Up to ``limit`` bytes of the file at ``path`` from byte ``cursor`` on, and its size.

        A range read: execd streams it from the file, so neither side holds more than
        ``limit`` bytes however large the file has grown. A file not there yet has nothing.
        """
        async with self._client.stream(
            "GET",
            f"{self._base_url}/files/download",
            params={"path": path},
            headers={"Range": f"bytes={cursor}-{cursor + limit - 1}"},
        ) as response:
            if response.status_code == 404:
                return OutputPiece(b"", cursor, cursor)
            if response.status_code == 416:
                # Nothing from the cursor on; the header still says how large the file is.
                return OutputPiece(b"", cursor, max(cursor, _size(response)))
            if response.status_code not in (200, 206):
                await response.aread()
                _require_ok(response, "read the output of")
            # An empty file is a 200 whatever the range; any other 200 is the whole file.
            skip = cursor if response.status_code == 200 else 0
            data = bytearray()
            async for chunk in response.aiter_raw():
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                data += chunk[: limit - len(data)]
                if len(data) >= limit:
                    break
            end = _size(response) if response.status_code == 206 else cursor + len(data)
        return OutputPiece(bytes(data), cursor + len(data), max(end, cursor + len(data)))


def _size(response: httpx.Response) -> int:
    """The file's size in a range answer's ``Content-Range``; 0 when it says none."""
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    return int(match.group(1)) if match else 0


def _require_ok(response: httpx.Response, doing: str) -> None:
    if response.status_code != 200:
        raise SandboxError(
            f"execd refused to {doing} a background command with HTTP {response.status_code}: "
            f"{response.text[:500]}"
        )
