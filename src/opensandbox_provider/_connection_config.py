"""
The SDK's connection config, trusting the certificate authorities a connection names.

Its transports take no proxy from the environment: the SDK hands each of its clients the
config's transport, and httpx reads the proxy variables only for a client built without one
(see :mod:`._clients`). Imported only once the SDK is known to be installed (see :mod:`._sdk`).
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Mapping
from typing import Any

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError
from opensandbox import SandboxSync
from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.transport import unwrap_retry_transport
from pydantic import Field

from opensandbox_provider._reaches import installed_version, warn_moved
from opensandbox_provider.execd._deadline import keep_deadlines

# SDK 1.1.1 builds every transport through new_owned_transport; 1.1.0 builds the one a
# config owns inside with_transport_if_missing and has no such method.
_SDK_BUILDS_OWNED_TRANSPORTS = hasattr(ConnectionConfigSync, "new_owned_transport")
# Whether the SDK's create sends resource requests apart from limits (the hook refuses a
# connection that sets one when it cannot).
SDK_TAKES_REQUESTS = "resource_requests" in inspect.signature(SandboxSync.create).parameters


class ConnectionConfig(ConnectionConfigSync):
    """
    :class:`ConnectionConfigSync` whose transports also trust ``ca_certificates``, and whose
    connections keep each call's deadline (see :mod:`.execd._deadline`).
    """

    # PEM text rather than a path: the file is read, and refused with the extra's name,
    # once, when the connection is, not again inside the SDK whenever a sandbox is made.
    ca_certificates: str | None = Field(default=None, repr=False)
    # What each sandbox made on this connection asks a Kubernetes scheduler for (the
    # connection's cpu_request and memory_request extras); None asks for its limits.
    resource_requests: dict[str, str] | None = None

    def new_owned_transport(self, **limits: Any) -> httpx.BaseTransport:
        transport = super().new_owned_transport(**limits)
        self._prepare(transport)
        return transport

    def with_transport_if_missing(self, **limits: Any) -> ConnectionConfigSync:
        config = super().with_transport_if_missing(**limits)
        if not _SDK_BUILDS_OWNED_TRANSPORTS and config is not self and config.transport:
            self._prepare(config.transport)
        return config

    def _prepare(self, transport: httpx.BaseTransport) -> None:
        # Before its first connection, so that every connection it ever opens keeps deadlines.
        if not keep_deadlines(transport):
            warn_moved(
                "opensandbox",
                "the httpcore connection pool inside its transport, with httpcore "
                f"{installed_version('httpcore')}",
                "A sandbox or server that answers a byte at a time can hold a call past its "
                "deadline: only the bodies this provider reads itself stay bounded.",
            )
        if self.ca_certificates is not None:
            _ssl_context_of(transport).load_verify_locations(cadata=self.ca_certificates)


def creation_options(config: object, requests: Mapping[str, str] | None = None) -> dict[str, Any]:
    """
    The keyword arguments of the SDK's create that come from the connection (none from a
    config that is not this module's), its resource requests overridden by ``requests``, a
    task's own.
    """
    merged = {**(getattr(config, "resource_requests", None) or {}), **(requests or {})}
    if merged and not SDK_TAKES_REQUESTS:
        raise SandboxTerminalError(
            f"The OpenSandbox SDK installed (opensandbox {installed_version('opensandbox')}) "
            "cannot send resource requests apart from limits. Install the SDK version this "
            "provider pins, or drop cpu_request and memory_request."
        )
    return {"resource_requests": merged} if merged else {}


def _ssl_context_of(transport: httpx.BaseTransport) -> ssl.SSLContext:
    """
    The one SSL context the SDK builds its transport on, or an error saying so.

    The SDK takes no SSL context, but shares the one it makes between its pooled transport
    and the one it uses for deadline-bound requests; adding authorities to it reaches both.
    It is held privately, so it is looked up defensively, and a transport of another shape
    is refused: it would not trust the authority, and every handshake would fail.
    """
    context = getattr(unwrap_retry_transport(transport), "_ssl_context", None)
    if not isinstance(context, ssl.SSLContext):
        raise SandboxTerminalError(
            f"The OpenSandbox SDK installed (opensandbox {installed_version('opensandbox')}) "
            "builds its HTTP transport in a way the connection's ca_bundle extra cannot reach. "
            "Install the SDK version this provider pins, or leave ca_bundle out and name the "
            "file in SSL_CERT_FILE instead."
        )
    return context
