"""
HTTP to a sandbox's own services, execd and the egress sidecar, over the SDK's transport.

The SDK resolves where each service is and which headers reach it (the server proxy's API
key, the sidecar's token), and owns the connection pool; the requests made here are the
few the SDK makes in a way this backend cannot use (see the callers). They bypass the
SDK's retry wrapper, as the SDK's own event-stream client does: a command must never be
sent twice, and a readiness ping is retried on this backend's schedule, not with a backoff.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import h11
import httpcore
import httpx

from opensandbox_provider._clients import NO_COMPRESSION, first_bytes, iter_raw, sandbox_client
from opensandbox_provider._errors import api_exception
from opensandbox_provider._reaches import warn_moved
from opensandbox_provider.execd import _deadline
from opensandbox_provider.execd._chunked import ChunkedDecoder

if TYPE_CHECKING:
    from opensandbox import SandboxSync

# An error answer is a short JSON message; more than this of one is not worth holding.
MAX_ERROR_BODY = 64 * 1024
# How much one read of a streamed body asks the socket for: a read's worth of events is
# parsed in one go, and this bounds what one read can add to memory.
BODY_READ_SIZE = 256 * 1024


class Options(TypedDict, total=False):
    """
    What a request may add to its method and URL; a timeout left out is the connection's, and
    a header given as ``None`` is left out although the endpoint's headers name it.
    """

    params: Mapping[str, str]
    headers: Mapping[str, str | None]
    json: object
    # A multipart form, as httpx's ``files``: the upload's metadata and file parts.
    files: list[tuple[str, tuple[str, bytes | str, str]]]
    timeout: float | httpx.Timeout


class SandboxHttp:
    """
    Requests to one sandbox's services, sharing the sandbox's SDK transport.

    Like httpx's own client, :meth:`request` and :meth:`stream` both go down one path,
    :meth:`_send`, which resolves the service's endpoint and headers for every request.
    """

    def __init__(self, sandbox: SandboxSync) -> None:
        from opensandbox.transport import unwrap_retry_transport

        self._sandbox = sandbox
        self.request_timeout = sandbox.connection_config.request_timeout.total_seconds()
        # Never closed on its own: the transport is the sandbox's, closed when it is.
        self._client = sandbox_client(
            transport=unwrap_retry_transport(sandbox.connection_config.transport),
            timeout=self.request_timeout,
        )

    def status(self, method: str, port: int, path: str, **options: Unpack[Options]) -> int:
        """
        The answer's status, whatever it is, once its body has come, of which no more than
        :data:`MAX_ERROR_BODY` is read: for a call where every status means something and the
        body nothing, such as a health check.
        """
        response = self._send(method, port, path, stream=True, **options)
        try:
            first_bytes(response, MAX_ERROR_BODY)
            return response.status_code
        finally:
            response.close()

    @contextmanager
    def stream(
        self,
        method: str,
        port: int,
        path: str,
        operation: str,
        *,
        expect: int | None = None,
        **options: Unpack[Options],
    ) -> Iterator[httpx.Response]:
        """
        The answer with its body unread; an error answer raises the SDK's exception for it.

        An error answer is one of 300 or above, or, given ``expect``, any other status.
        Leaving the block before the body has ended closes the connection instead of
        returning it to the pool.
        """
        response = self._send(method, port, path, stream=True, **options)
        try:
            status = response.status_code
            if status >= 300 if expect is None else status != expect:
                raise api_error(response, operation)
            yield response
        finally:
            response.close()

    def _send(
        self, method: str, port: int, path: str, *, stream: bool, **options: Unpack[Options]
    ) -> httpx.Response:
        url, headers = self.target(port, path)
        given = options.get("headers", {})
        left_out = {name.lower() for name, value in given.items() if value is None}
        sent = {name: value for name, value in headers.items() if name.lower() not in left_out}
        timeout = options.get("timeout")
        request = self._client.build_request(
            method,
            url,
            params=options.get("params"),
            headers={**sent, **{name: value for name, value in given.items() if value is not None}},
            json=options.get("json"),
            files=options.get("files"),
            timeout=self.request_timeout if timeout is None else timeout,
        )
        return self._client.send(request, stream=stream)

    def target(self, port: int, path: str) -> tuple[str, dict[str, str]]:
        """The URL of ``path`` on the service at ``port``, and the headers a request to it needs."""
        config = self._sandbox.connection_config
        endpoint = self._sandbox.get_endpoint(port)
        url = f"{config.protocol}://{endpoint.endpoint.rstrip('/')}{path}"
        return url, {**endpoint.build_request_headers(config), **NO_COMPRESSION}


def iter_body(
    response: httpx.Response,
    read_timeout: float,
    still_alive: Callable[[], bool] | None = None,
) -> Iterator[bytes]:
    """
    The body as it arrives, in pieces of up to :data:`BODY_READ_SIZE` bytes.

    A chunked answer on httpcore's HTTP/1.1 connection, which is what the SDK's transport
    makes unless a user plugged in another, is read from the connection's socket and decoded
    in bulk (see :mod:`._chunked`); any other answer is read through httpx. Raises httpx's
    exceptions either way: :class:`httpx.ReadTimeout` after ``read_timeout`` seconds with
    nothing read, :class:`httpx.RemoteProtocolError` for a body that ends early. On the
    socket path, ``still_alive`` is asked after each such silence first, and reading goes on
    while it says yes: a socket read that timed out leaves the connection as it was. Every
    read, whatever it brings, ends by the current call's deadline (see :mod:`._deadline`).
    """
    socket_stream = _socket_stream(response)
    if socket_stream is None:
        yield from iter_raw(response)
        return
    already_read, network_stream = socket_stream
    decoder = ChunkedDecoder()
    while not decoder.done:
        try:
            data = already_read or _read_socket(
                network_stream, _deadline.read_timeout(read_timeout)
            )
        except httpx.ReadTimeout:
            if still_alive is not None and still_alive():
                continue
            raise
        already_read = b""
        if not data:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body: "
                "incomplete chunked read"
            )
        body = decoder.feed(data)
        if body:
            yield body


def _socket_stream(response: httpx.Response) -> tuple[bytes, httpcore.NetworkStream] | None:
    """
    What httpcore read past the headers, and the connection's stream, or ``None``.

    httpcore hands out the stream (its documented ``network_stream`` extension), but the
    bytes its HTTP/1.1 parser read past the headers are reachable only through private
    attributes. Those are looked up defensively: any other transport gets ``None`` and the body
    is read through httpx, only slower, and an httpcore whose connection moved them says so
    once (see :mod:`.._reaches`). A test pins that the versions this provider pins take the
    fast path. The connection is never reused after this: httpcore sees an unfinished body
    when the response closes, and closes it.
    """
    if response.headers.get("transfer-encoding", "").lower() != "chunked":
        return None
    network_stream = response.extensions.get("network_stream")
    if network_stream is None:
        # Not httpcore's connection: a transport of another kind, with no socket to read.
        return None
    stream: Any = response.stream
    try:
        connection = stream._stream._httpcore_stream._stream._connection
        parser = connection._h11_state
        if connection._network_stream is not network_stream or not isinstance(
            parser, h11.Connection
        ):
            raise AttributeError("the connection's stream or parser is of another shape")
        already_read, _closed = parser.trailing_data
    except AttributeError:
        warn_moved(
            "httpcore",
            "the HTTP/1.1 connection and parser state behind httpx's response stream",
            "Command streams are read through httpx instead of from the socket, correctly "
            "but several times slower.",
        )
        return None
    return bytes(already_read), network_stream


def _read_socket(network_stream: httpcore.NetworkStream, read_timeout: float) -> bytes:
    try:
        return network_stream.read(BODY_READ_SIZE, timeout=read_timeout)
    except httpcore.TimeoutException as error:
        raise httpx.ReadTimeout(str(error)) from error
    except httpcore.NetworkError as error:
        raise httpx.ReadError(str(error)) from error


def api_error(response: httpx.Response, operation: str) -> Exception:
    """The SDK's exception for an error answer, read no further than :data:`MAX_ERROR_BODY`."""
    body = first_bytes(response, MAX_ERROR_BODY)
    kept = {
        name: value
        for name, value in response.headers.items()
        if name.lower() in ("content-type", "x-request-id")
    }
    bounded = httpx.Response(
        response.status_code, headers=kept, content=bytes(body[:MAX_ERROR_BODY])
    )
    return api_exception(bounded, operation)
