"""
One HTTP/1.1 exchange on a connection of its own, driven through h11, its body read in bulk.

httpcore reads a body 64 KiB at a time, a 256 MiB export four thousand reads, and hands a
chunked one over chunk by chunk through h11's and httpx's layers; execd flushes every event as a
chunk (docs/execd-wire.rst, wire-framing), a chatty command's millions. Here only the head goes
through h11; the body is read from the socket :data:`BODY_READ_SIZE` at a time, its framing
stripped in bulk (by :class:`~.execd._chunked.ChunkedDecoder` when chunked). The connection is
closed with the answer, so a body given up half read ends nothing but itself, and its socket,
from the transport's network backend, keeps the current call's deadline (see
:mod:`.execd._deadline`).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import h11
import httpcore
import httpx

from opensandbox_provider.execd._chunked import ChunkedDecoder

# How much one read of a body asks the socket for: a read's worth of events is parsed in one
# go, and this bounds what one read can add to memory. Larger reads gain nothing measurable.
BODY_READ_SIZE = 256 * 1024
# Where the answer's body is for a reader that reads it here itself, as an httpx response's
# extension (httpx wraps the body stream, so the stream is not the way to it).
SOCKET_BODY = "opensandbox_provider.socket_body"
# httpcore's exceptions, which the network backend raises, as httpx's, as httpx's own
# transport maps them; the first that matches is taken.
_HTTPX_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    h11.RemoteProtocolError: httpx.RemoteProtocolError,
    h11.LocalProtocolError: httpx.LocalProtocolError,
}
# The statuses whose answers carry no body, whatever their headers say (RFC 9112, 6.3).
_BODILESS = frozenset({204, 304})
_MAPPED = tuple(_HTTPX_ERRORS)


@contextmanager
def as_httpx_errors() -> Iterator[None]:
    """Raise httpx's exception for any of httpcore's or h11's met in the block."""
    try:
        yield
    except _MAPPED as e:
        raise _as_httpx(e) from e


def _as_httpx(error: Exception) -> httpx.TransportError:
    mapped = next(mapped for core, mapped in _HTTPX_ERRORS.items() if isinstance(error, core))
    return mapped(str(error))


def exchange(
    request: httpx.Request, backend: httpcore.NetworkBackend, ssl_context: ssl.SSLContext
) -> httpx.Response:
    """
    ``request`` sent on a connection of its own, and the answer with its body unread: read it
    through the response, or through its :data:`SOCKET_BODY` extension with a timeout per read.
    """
    timeouts = request.extensions.get("timeout", {})
    url = request.url
    with as_httpx_errors():
        stream = backend.connect_tcp(
            url.host, url.port or (443 if url.scheme == "https" else 80), timeouts.get("connect")
        )
        try:
            if url.scheme == "https":
                stream = stream.start_tls(ssl_context, url.host, timeouts.get("connect"))
            connection = h11.Connection(h11.CLIENT)
            _send(connection, stream, request, timeouts.get("write"))
            head = _head(connection, stream, timeouts.get("read"))
        except BaseException:
            stream.close()
            raise
    # Whether the connection closed with them is learnt again by the first read of the body.
    already_read, _closed = connection.trailing_data
    body = SocketBody(stream, _framing(request.method, head), bytes(already_read), request)
    return httpx.Response(
        head.status_code,
        headers=head.headers,
        stream=body,
        extensions={
            SOCKET_BODY: body,
            "http_version": b"HTTP/" + head.http_version,
            "reason_phrase": head.reason,
        },
    )


def _send(
    connection: h11.Connection,
    stream: httpcore.NetworkStream,
    request: httpx.Request,
    timeout: float | None,
) -> None:
    content = request.read()
    # Said, not only done: a Go server (OpenSandbox's ingress gateway) that expects the
    # connection to be kept closes a request body still open when it writes the answer's head,
    # and its proxy transport, reading that body once more after sending it, then takes it for
    # a failed write and closes its connection to execd mid-stream (docs/kubernetes.rst,
    # "Why the gateway broke streams"). A request that says close is left alone. httpx's
    # client says keep-alive by default, so that is replaced.
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"connection"]
    headers.append((b"Connection", b"close"))
    data = connection.send(
        h11.Request(method=request.method, target=request.url.raw_path, headers=headers)
    )
    if content:
        data += connection.send(h11.Data(data=content))
    stream.write(data + connection.send(h11.EndOfMessage()), timeout)


def _head(
    connection: h11.Connection, stream: httpcore.NetworkStream, timeout: float | None
) -> h11.Response:
    """The answer's status line and headers, past any interim (1xx) answer."""
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(stream.read(BODY_READ_SIZE, timeout))
        elif isinstance(event, h11.Response):
            return event
        elif isinstance(event, h11.ConnectionClosed):
            raise httpx.RemoteProtocolError("the server closed the connection before it answered")


class _Length:
    """A body of a length its ``Content-Length`` gave."""

    def __init__(self, length: int) -> None:
        self.left = length
        self.done = not length

    def feed(self, data: bytes) -> bytes:
        piece = data[: self.left]
        self.left -= len(piece)
        self.done = not self.left
        return piece


class _UntilClosed:
    """A body that ends when the connection does."""

    def __init__(self) -> None:
        self.done = False

    def feed(self, data: bytes) -> bytes:
        return data


def _framing(method: str, head: h11.Response) -> _Length | ChunkedDecoder | _UntilClosed:
    """How the body of ``head`` ends (RFC 9112, 6.3): h11 has checked the headers this reads."""
    headers = {name.lower(): value for name, value in head.headers}
    if method == "HEAD" or head.status_code in _BODILESS:
        return _Length(0)
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        return ChunkedDecoder()
    if b"content-length" in headers:
        return _Length(int(headers[b"content-length"]))
    return _UntilClosed()


class SocketBody(httpx.SyncByteStream):
    """
    An answer's body as its connection's socket brings it, framing stripped, in pieces of up to
    :data:`BODY_READ_SIZE` bytes. Raises httpx's exceptions: :class:`httpx.ReadTimeout` for a read
    that brought nothing in time, which leaves the body as it was to be read on,
    :class:`httpx.RemoteProtocolError` for a body that ends early.
    """

    def __init__(
        self,
        stream: httpcore.NetworkStream,
        framing: _Length | ChunkedDecoder | _UntilClosed,
        already_read: bytes,
        request: httpx.Request,
    ) -> None:
        self._stream = stream
        self._framing = framing
        self._held = already_read
        self._request = request

    def read(self, timeout: float | None = None) -> bytes:
        """
        The next piece of the body, or ``b""`` once all of it has come. A read waits at most
        ``timeout`` seconds, by default the request's read timeout as it is when the read starts.
        """
        framing = self._framing
        while not framing.done:
            data = self._held or self._receive(timeout)
            self._held = b""
            if not data:
                if isinstance(framing, _UntilClosed):
                    framing.done = True
                    return b""
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    + (
                        "incomplete chunked read"
                        if isinstance(framing, ChunkedDecoder)
                        else f"{framing.left} bytes of its length had not come"
                    )
                )
            piece = framing.feed(data)
            if piece:
                return piece
        return b""

    def _receive(self, timeout: float | None) -> bytes:
        if timeout is None:
            timeout = self._request.extensions.get("timeout", {}).get("read")
        # Not as_httpx_errors: a chatty command's stream is many small reads, and the context
        # manager's cost shows in its line rate.
        try:
            return self._stream.read(BODY_READ_SIZE, timeout)
        except _MAPPED as e:
            raise _as_httpx(e) from e

    def __iter__(self) -> Iterator[bytes]:
        while piece := self.read():
            yield piece

    def close(self) -> None:
        self._stream.close()
