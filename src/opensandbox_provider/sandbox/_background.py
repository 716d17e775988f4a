"""
A background command's status and output, read from execd asynchronously, for a trigger.

A background command's stream ends once it has started; what it does next is asked for by
id: its status, and its combined output from a byte cursor
(docs/execd-wire.rst, wire-background, wire-status, wire-logs). The triggerer runs many
triggers on one event loop, so these reads are async and never block it; where execd is and
which headers reach it are resolved beforehand, by the backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError

from opensandbox_provider.sandbox._command_status import (
    MAX_STATUS_BODY,
    CommandStatus,
    parse_status,
)

# execd gives the offset of the output's end in this header (docs/execd-wire.rst, wire-logs).
TAIL_CURSOR_HEADER = "EXECD-COMMANDS-TAIL-CURSOR"


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


def _require_ok(response: httpx.Response, doing: str) -> None:
    if response.status_code != 200:
        raise SandboxError(
            f"execd refused to {doing} a background command with HTTP {response.status_code}: "
            f"{response.text[:500]}"
        )
