"""
A short command run through execd to its end, asynchronously, for the triggerer.

The trigger's graceful stop (see :mod:`..operators._stop`) runs on the event loop every deferred
task shares, so it goes over the trigger's async execd client, read by the backend's pure event
parser (docs/execd-wire.rst, wire-framing, wire-events) up to the terminal event (wire-exit),
not through execd's grace after it (wire-grace).
"""

from __future__ import annotations

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxError, SandboxExecResult

from opensandbox_provider._clients import within
from opensandbox_provider.execd._background import require_ok
from opensandbox_provider.execd._events import EventParser


async def run_to_end(
    client: httpx.AsyncClient,
    base_url: str,
    command: str,
    *,
    timeout: float,
    max_output_bytes: int,
    call_timeout: float,
) -> SandboxExecResult:
    """
    Run ``command``, which execd kills ``timeout`` seconds after it starts; how it ended, with
    each stream's last ``max_output_bytes``. The whole call ends by the command's deadline plus
    ``call_timeout``: execd has killed the command by then (docs/execd-wire.rst, wire-timeout).
    """
    # The guest writes what this reads, so the raw bytes (no content decoding) go through the
    # parser, which bounds the tails, each frame and execd's error text.
    parser = EventParser(max_output_bytes)
    async with (
        within(timeout + call_timeout, "the command's stream"),
        client.stream(
            "POST",
            f"{base_url.rstrip('/')}/command",
            json={"command": command, "timeout": max(1, round(timeout * 1000))},
            # So that a Go proxy in the way keeps the stream: see .._exchange's ``_send``.
            headers={"Connection": "close"},
        ) as response,
    ):
        await require_ok(response, "run a command")
        async for chunk in response.aiter_raw():
            parser.feed(chunk)
            if parser.ending is not None:
                break
        else:
            parser.close()
    if parser.ending is None:
        raise SandboxError("execd ended the command's stream without saying how the command ended.")
    exit_code = parser.ending.exit_code
    # What execd said of the end stands in for an empty stderr, so a failure quotes it.
    return SandboxExecResult(
        exit_code=-1 if exit_code is None else exit_code,
        stdout=parser.stdout.text(),
        stderr=parser.stderr.text() or parser.ending.message,
    )
