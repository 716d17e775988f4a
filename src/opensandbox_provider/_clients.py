"""
Every HTTP client this provider builds, built here, and how a body a sandbox sends is read.

No client reads the environment (``trust_env=False``): a proxy set there would see the API key
and every command's stream (docs/connections.rst, "No proxy from the environment"). What
answers on a sandbox's ports is the guest's to replace, so every answer is read as the bytes
that came, never inflated, and never past a cap: a megabyte of gzip is a gigabyte of memory.
A sync call's whole-call deadline is the socket's (``execd/_deadline``); an async one's is
:func:`within`'s.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager

import httpx

from opensandbox_provider.execd import _deadline

# What every request to a sandbox asks for: the body as it was written.
NO_COMPRESSION = {"Accept-Encoding": "identity"}


def sandbox_client(*, transport: httpx.BaseTransport | None, timeout: float) -> httpx.Client:
    """A client for a sandbox's services over the SDK's ``transport``; redirects not followed."""
    return httpx.Client(
        transport=transport,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        event_hooks={"response": [_as_sent]},
    )


def execd_client(
    *, headers: Mapping[str, str], verify: ssl.SSLContext, timeout: float
) -> httpx.AsyncClient:
    """An async client for one sandbox's execd, as the triggerer polls it."""
    return httpx.AsyncClient(
        headers={**headers, **NO_COMPRESSION},
        verify=verify,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        event_hooks={"response": [_aas_sent]},
    )


def _as_sent(response: httpx.Response) -> None:
    # httpx picks its decoder from this header when the body is first read, which is after
    # the hooks have run; without it the body is read as the bytes on the wire.
    response.headers.pop("Content-Encoding", None)


async def _aas_sent(response: httpx.Response) -> None:
    _as_sent(response)


def iter_raw(response: httpx.Response) -> Iterator[bytes]:
    """
    The body as sent, as httpx reads it, checking the current call's deadline after every piece:
    on a transport whose connections do not keep deadlines, this ends a body that trickles in.
    """
    for chunk in response.iter_raw():
        _deadline.check()
        yield chunk


def read_at_most(response: httpx.Response, limit: int) -> bytes | None:
    """The body as sent, or ``None`` once it runs past ``limit`` bytes, having read no further."""
    body = first_bytes(response, limit)
    return body if len(body) <= limit else None


def first_bytes(response: httpx.Response, limit: int) -> bytes:
    """
    The body as sent up to one byte past ``limit``, the rest left unread: a caller tells an
    overrun by the length. Every piece ends by the current call's deadline.
    """
    body = bytearray()
    for chunk in iter_raw(response):
        body += chunk
        if len(body) > limit:
            break
    return bytes(body[: limit + 1])


async def aread_at_most(response: httpx.Response, limit: int) -> bytes | None:
    """The async :func:`read_at_most`; the deadline is the caller's :func:`within`."""
    body = await afirst_bytes(response, limit)
    return body if len(body) <= limit else None


async def afirst_bytes(response: httpx.Response, limit: int, *, skip: int = 0) -> bytes:
    """The async :func:`first_bytes`, of the body past its first ``skip`` bytes, never held."""
    body = bytearray()
    async for chunk in response.aiter_raw():
        if skip:
            cut = min(skip, len(chunk))
            chunk, skip = chunk[cut:], skip - cut
        body += chunk
        if len(body) > limit:
            break
    return bytes(body[: limit + 1])


class CallTimedOut(httpx.TimeoutException):
    """An async call that had not ended, headers and body, by its whole-call deadline."""


@asynccontextmanager
async def within(seconds: float, doing: str) -> AsyncIterator[None]:
    """
    End the block, connect, headers and body alike, ``seconds`` after it starts: httpx bounds
    each read on its own, so an answer dripped a byte at a time would keep the trigger awaiting
    it pending as long as the guest likes. ``doing`` names what was asked, in the error.
    """
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as e:
        raise CallTimedOut(
            f"The sandbox had not answered {doing} within {seconds:g}s, so the request was "
            "given up."
        ) from e
