"""
HTTP to a sandbox's own services, execd and the egress sidecar, over the SDK's transport.

The SDK resolves where each service is and which headers reach it; the requests made here are
the few it makes in a way this backend cannot use (see the callers). They bypass the SDK's retry
wrapper, as its own event-stream client does: a command must never be sent twice, and a
readiness ping is retried on this backend's schedule, not with a backoff.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypedDict, Unpack

import httpx

from opensandbox_provider._clients import NO_COMPRESSION, first_bytes, iter_raw, sandbox_client
from opensandbox_provider._errors import ErrorAnswer
from opensandbox_provider._exchange import SOCKET_BODY
from opensandbox_provider._transport import OWN_CONNECTION
from opensandbox_provider.execd import _deadline

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config import ConnectionConfig
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.models.sandboxes import SandboxEndpoint

# An error answer is a short JSON message; more than this of one is not worth holding.
MAX_ERROR_BODY = 64 * 1024


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
    # Send on a connection of its own, the body read from its socket in bulk (see
    # ``_exchange``): for a body that is large or long, a command's stream or a download.
    own_connection: bool


class SandboxHttp:
    """
    Requests to one sandbox's services, sharing the sandbox's SDK transport; like httpx's
    client, every request goes down :meth:`_send`, which resolves its endpoint and headers.
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
        The answer with its body unread; an error answer (300 or above, or, given ``expect``, any
        other status) raises :class:`ErrorAnswer`. Leaving the block before the body has ended
        closes the connection instead of returning it to the pool.
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
            extensions={OWN_CONNECTION: True} if options.get("own_connection") else None,
        )
        return self._client.send(request, stream=stream)

    def target(self, port: int, path: str) -> tuple[str, dict[str, str]]:
        """The URL of ``path`` on the service at ``port``, and the headers a request to it needs."""
        config = self._sandbox.connection_config
        return endpoint_target(config, self._sandbox.get_endpoint(port), path)


def endpoint_target(
    config: ConnectionConfig | ConnectionConfigSync, endpoint: SandboxEndpoint, path: str
) -> tuple[str, dict[str, str]]:
    """
    The URL of ``path`` at a sandbox's ``endpoint``, as the SDK resolved it, and the headers a
    request to it needs: the server proxy's API key only when the connection routes through it.
    """
    url = f"{config.protocol}://{endpoint.endpoint.rstrip('/')}{path}"
    return url, {**endpoint.build_request_headers(config), **NO_COMPRESSION}


def iter_body(
    response: httpx.Response, read_timeout: float, still_alive: Callable[[], bool] | None = None
) -> Iterator[bytes]:
    """
    The body as it arrives, each piece what one read brought, every read ending by the current
    call's deadline (see :mod:`._deadline`).

    An answer on a connection of its own (see :mod:`.._exchange`) is read from its socket in
    bulk, any other (a transport a user plugged in) through httpx. Raises httpx's exceptions:
    :class:`httpx.ReadTimeout` after ``read_timeout`` seconds with nothing read (on a connection
    of its own only once ``still_alive`` says no: a timed-out read leaves the body as it was),
    :class:`httpx.RemoteProtocolError` for a body that ends early.
    """
    body = response.extensions.get(SOCKET_BODY)
    if body is None:
        yield from iter_raw(response)
        return
    while True:
        try:
            piece = body.read(_deadline.read_timeout(read_timeout))
        except httpx.ReadTimeout:
            if still_alive is not None and still_alive():
                continue
            raise
        if not piece:
            return
        yield piece


def api_error(response: httpx.Response, operation: str) -> ErrorAnswer:
    """``response`` as the error answer it is, read no further than :data:`MAX_ERROR_BODY`."""
    # Its length is what was read, so of the headers only those that describe it are kept.
    kept = {
        name: value
        for name, value in response.headers.items()
        if name.lower() in ("content-type", "x-request-id")
    }
    bounded = httpx.Response(
        response.status_code,
        headers=kept,
        content=first_bytes(response, MAX_ERROR_BODY)[:MAX_ERROR_BODY],
        request=response.request,
    )
    return ErrorAnswer(bounded, operation)
