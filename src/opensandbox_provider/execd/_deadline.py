"""
Deadlines a sandbox cannot stretch: every socket read and write of a call checks the call's.

httpx bounds each read on its own, so a daemon that sends a byte every few seconds keeps a
request alive as long as it likes. So every connection :class:`DeadlineBackend` opens (under
every connection config's transport, see :mod:`.._transport`) never waits past the deadline a
call set with :func:`bounded_by`.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

# When the call this thread is making must have ended, on the ``time.monotonic`` clock.
_current: ContextVar[float | None] = ContextVar("opensandbox_deadline", default=None)
_PASSED = "the call's deadline passed"


@dataclass(frozen=True)
class Deadline:
    """When a call must have ended, on the ``time.monotonic`` clock, and how long it was given."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def passed(self) -> bool:
        return time.monotonic() >= self.at


@contextmanager
def bounded_by(deadline: float) -> Iterator[None]:
    """Make every socket read and write in the block give up at ``deadline``, or sooner."""
    outer = _current.get()
    token = _current.set(deadline if outer is None else min(deadline, outer))
    try:
        yield
    finally:
        _current.reset(token)


def check() -> None:
    """
    Raise httpx's read timeout once the current call's deadline has passed: for a body read
    through a transport whose connections do not keep deadlines themselves.
    """
    left = _left()
    if left is not None and left <= 0:
        raise httpx.ReadTimeout(_PASSED)


def read_timeout(timeout: float) -> float:
    """``timeout`` cut to what is left of the current call's deadline, for a read made here."""
    check()
    left = _left()
    return timeout if left is None else min(timeout, left)


def _left() -> float | None:
    deadline = _current.get()
    return None if deadline is None else deadline - time.monotonic()


def _bounded(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to what is left of the current call's deadline."""
    left = _left()
    if left is None:
        return timeout
    if left <= 0:
        raise expired(_PASSED)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection's stream whose every read and write ends by the current call's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, bounded))

    def close(self) -> None:
        self._stream.close()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """Opens connections whose streams keep to the current call's deadline."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, bounded, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)
