"""
Every HTTP client this provider builds, built here, none taking a proxy from the environment.

The provider talks to two kinds of address, both named by the connection: the OpenSandbox
server and the sandboxes it runs. A proxy set in the worker's environment (``HTTP_PROXY``,
``HTTPS_PROXY``, ``ALL_PROXY``, for pip or for the model's API) is not meant for either: it
would see the server's API key and every command's stream, and a forward proxy may buffer a
stream that must arrive as it is written. So no client here reads the environment
(``trust_env=False``: no proxy, no ``.netrc``). Certificate authorities still come from
``SSL_CERT_FILE`` and ``SSL_CERT_DIR``: a client given a transport, or an SSL context, has
its trust set there, where OpenSSL reads them.

The SDK's own clients are built by the SDK, each given the connection config's transport;
httpx takes a proxy from the environment only for a client built without one, so those take
none either. A unit test sends every call of the backend, the operator and the trigger with
the proxy variables pointing at a listener of its own, and counts no connection to it.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import httpx


def sandbox_client(*, transport: httpx.BaseTransport | None, timeout: float) -> httpx.Client:
    """A client for a sandbox's services over the SDK's ``transport``; redirects not followed."""
    return httpx.Client(
        transport=transport, timeout=timeout, follow_redirects=False, trust_env=False
    )


def execd_client(
    *, headers: Mapping[str, str], verify: ssl.SSLContext, timeout: float
) -> httpx.AsyncClient:
    """An async client for one sandbox's execd, as the triggerer polls it."""
    return httpx.AsyncClient(
        headers=headers, verify=verify, timeout=timeout, follow_redirects=False, trust_env=False
    )
