"""
HTTP to a sandbox's own services, execd and the egress sidecar, over the SDK's transport.

The SDK resolves where each service is and which headers reach it (the server proxy's API
key, the sidecar's token), and owns the connection pool; the requests made here are the
few the SDK makes in a way this backend cannot use (see the callers). They bypass the
SDK's retry wrapper, as the SDK's own event-stream client does: a command must never be
sent twice, and a readiness ping is retried on this backend's schedule, not with a backoff.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from opensandbox import SandboxSync

EXECD_PORT = 44772
EGRESS_PORT = 18080
# An error answer is a short JSON message; more than this of one is not worth holding.
MAX_ERROR_BODY = 64 * 1024
# What the parsers bound is what arrives; a compressed body would be inflated before that.
NO_COMPRESSION = {"Accept-Encoding": "identity"}


class SandboxHttp:
    """Requests to one sandbox's services, sharing the sandbox's SDK transport."""

    def __init__(self, sandbox: SandboxSync) -> None:
        from opensandbox.transport import unwrap_retry_transport

        self._sandbox = sandbox
        self.request_timeout = sandbox.connection_config.request_timeout.total_seconds()
        # Never closed on its own: the transport is the sandbox's, closed when it is.
        self.client = httpx.Client(
            transport=unwrap_retry_transport(sandbox.connection_config.transport),
            timeout=self.request_timeout,
            follow_redirects=False,
        )

    def target(self, port: int, path: str) -> tuple[str, dict[str, str]]:
        """The URL of ``path`` on the service at ``port``, and the headers a request to it needs."""
        config = self._sandbox.connection_config
        endpoint = self._sandbox.get_endpoint(port)
        url = f"{config.protocol}://{endpoint.endpoint.rstrip('/')}{path}"
        return url, {**endpoint.build_request_headers(config), **NO_COMPRESSION}

    @contextmanager
    def get(
        self,
        port: int,
        path: str,
        operation: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Iterator[httpx.Response]:
        """A streamed GET; an answer of 300 or above raises the SDK's exception for it."""
        url, base_headers = self.target(port, path)
        with self.client.stream(
            "GET", url, params=params, headers={**base_headers, **(headers or {})}
        ) as response:
            if response.status_code >= 300:
                raise api_error(response, operation)
            yield response


def read_at_most(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or ``None`` once it runs past ``limit`` bytes, having read no further."""
    body = bytearray()
    for chunk in response.iter_raw():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def api_error(response: httpx.Response, operation: str) -> Exception:
    """The SDK's exception for an error answer, read no further than :data:`MAX_ERROR_BODY`."""
    from opensandbox.adapters.converter.response_handler import build_api_exception_from_httpx

    body = bytearray()
    for chunk in response.iter_raw():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    kept = {
        name: value
        for name, value in response.headers.items()
        if name.lower() in ("content-type", "x-request-id")
    }
    bounded = httpx.Response(
        response.status_code, headers=kept, content=bytes(body[:MAX_ERROR_BODY])
    )
    return build_api_exception_from_httpx(bounded, operation)
