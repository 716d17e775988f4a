"""
One command over execd's event stream: ``POST /command``, read until the command ends.

The SDK's own client reads the stream to its end, which execd holds open about a second
after the command has finished (docs/execd-wire.rst, wire-grace), and has no read timeout at all.
This reads incrementally with :class:`EventParser`, returns at the terminal event, and
notices a stream that has gone quiet from execd's heartbeat instead of from the budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider.sandbox._events import Ending, EventParser
from opensandbox_provider.sandbox._http import EXECD_PORT, SandboxHttp, api_error, iter_body

# execd sends a heartbeat every 3 s while a command runs (docs/execd-wire.rst, wire-ping), so this
# long without a single byte is three heartbeats missed: the stream has stalled, whatever the
# command does.
STALL_WINDOW = 10.0
# A stream whose heartbeats keep coming but which never ends is given up this long past
# the command's budget; execd kills a command at its deadline, so this is never reached
# by a healthy one.
BACKSTOP_GRACE = 30.0
_EVENT_STREAM_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass(frozen=True)
class StreamedCommand:
    """
    What the event stream of one command said.

    ``abandoned`` says, as a clause for a sentence, why the stream was given up on before it
    ended: no byte for :data:`STALL_WINDOW`, or still open past the budget's backstop.
    ``None`` when it ended by itself, with ``ending`` holding the terminal event, if any.
    """

    parser: EventParser
    abandoned: str | None

    @property
    def ending(self) -> Ending | None:
        return self.parser.ending


def run_streamed(
    http: SandboxHttp,
    command: str,
    *,
    timeout_ms: int,
    max_output_bytes: int,
    cwd: str | None = None,
) -> StreamedCommand:
    """
    Run ``command`` through execd, which kills it ``timeout_ms`` milliseconds after it starts.

    ``cwd`` is the directory it runs in; ``None`` leaves it to execd.

    Raises the SDK's exception for an HTTP error answer and lets transport errors through,
    so that the caller translates both in one place.
    """
    url, headers = http.target(EXECD_PORT, "/command")
    body: dict[str, object] = {"command": command, "timeout": timeout_ms}
    if cwd is not None:
        body["cwd"] = cwd
    timeouts = httpx.Timeout(http.request_timeout, read=STALL_WINDOW)
    give_up_at = time.monotonic() + timeout_ms / 1000 + BACKSTOP_GRACE
    parser = EventParser(max_output_bytes)
    request_headers = {**headers, **_EVENT_STREAM_HEADERS}
    try:
        # Leaving this block before the response has ended closes the connection instead of
        # returning it to the pool, which is what ends execd's side of a stream read no further.
        with http.client.stream(
            "POST", url, json=body, headers=request_headers, timeout=timeouts
        ) as response:
            if response.status_code != 200:
                raise api_error(response, "Run command")
            _require_event_stream(response)
            for chunk in iter_body(response, STALL_WINDOW):
                parser.feed(chunk)
                if parser.ending is not None:
                    return StreamedCommand(parser, abandoned=None)
                if time.monotonic() > give_up_at:
                    overran = (
                        f"the command's stream was still open {BACKSTOP_GRACE:g}s past its "
                        f"{timeout_ms / 1000:g}s budget"
                    )
                    return StreamedCommand(parser, abandoned=overran)
    except httpx.ReadTimeout:
        stalled = f"the sandbox sent nothing for {STALL_WINDOW:g}s, not even execd's heartbeat"
        return StreamedCommand(parser, abandoned=stalled)
    parser.close()
    return StreamedCommand(parser, abandoned=None)


def _require_event_stream(response: httpx.Response) -> None:
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type:
        raise SandboxTerminalError(
            f"The sandbox answered a command with Content-Type {content_type!r} rather than an "
            "event stream, so what answers on its execd port is not execd. Check the execd image "
            "the OpenSandbox server is configured with."
        )
