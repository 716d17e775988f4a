"""A MockTransport whose answers arrive as a real transport's do: a body streamed, not read."""

from __future__ import annotations

from collections.abc import Callable

import httpx


def as_sent(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.MockTransport:
    """
    ``handler``'s answers with their bodies unread, since httpx reads a body given as content
    when the answer is made, and a reader of raw bytes then finds nothing left to read.
    """

    def answer(request: httpx.Request) -> httpx.Response:
        made = handler(request)
        if not made.is_stream_consumed:
            return made
        return httpx.Response(
            made.status_code, headers=made.headers, stream=httpx.ByteStream(made.content)
        )

    return httpx.MockTransport(answer)
