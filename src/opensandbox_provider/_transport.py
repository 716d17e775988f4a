"""
The HTTP transport under every client a connection config makes, built from httpcore's public
parts as the SDK builds its own deadline pool.

The SDK's default pool sits inside httpx's transport, its network backend and SSL context
private; this one is built here, so every connection it opens keeps the current call's deadline
(see :mod:`.execd._deadline`) and its TLS also trusts the connection's ``ca_bundle``. A request
that carries :data:`OWN_CONNECTION` (a command's event stream, a download) is sent on a
connection of its own instead, its body read from the socket in bulk (see :mod:`._exchange`).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpcore
import httpx

from opensandbox_provider._exchange import as_httpx_errors, exchange
from opensandbox_provider.execd._deadline import DeadlineBackend

# A request extension: ``True`` sends the request on a connection of its own. A transport of
# another kind ignores it and sends the request as any other.
OWN_CONNECTION = "opensandbox_provider.own_connection"


class DeadlineTransport(httpx.BaseTransport):
    """A pool of connections that keep each call's deadline, for the SDK's clients and ours."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        *,
        max_connections: int | None,
        max_keepalive_connections: int,
        keepalive_expiry: float,
    ) -> None:
        self._ssl_context = ssl_context
        self._backend = DeadlineBackend(httpcore.SyncBackend())
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
            network_backend=self._backend,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.extensions.get(OWN_CONNECTION):
            return exchange(request, self._backend, self._ssl_context)
        url = request.url
        with as_httpx_errors():
            answer = self._pool.handle_request(
                httpcore.Request(
                    method=request.method,
                    url=httpcore.URL(
                        scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
                    ),
                    headers=request.headers.raw,
                    content=request.stream,
                    extensions=request.extensions,
                )
            )
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=_PooledBody(answer),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _PooledBody(httpx.SyncByteStream):
    """A pooled answer's body, httpcore's errors raised as httpx's."""

    def __init__(self, answer: httpcore.Response) -> None:
        self._answer = answer

    def __iter__(self) -> Iterator[bytes]:
        with as_httpx_errors():
            yield from self._answer.iter_stream()

    def close(self) -> None:
        self._answer.close()
