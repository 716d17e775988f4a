"""
The SDK's connection configs, on transports of our own that trust the authorities a connection
names: the sync one's keeps each call's deadline (see :mod:`._transport`), the async one, the
triggerer's, is always given its transport. So no proxy comes from the environment: the SDK
hands every client the config's transport, and httpx reads the proxy variables only for a client
built without one (see :mod:`._clients`). Imported once the SDK is known installed (:mod:`._sdk`).
"""

from __future__ import annotations

import functools
import inspect
import os
import ssl
from collections.abc import Mapping
from typing import Any

import httpx
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError
from opensandbox import SandboxSync
from opensandbox.config import ConnectionConfig as AsyncSdkConfig
from opensandbox.config.connection_sync import ConnectionConfigSync
from opensandbox.transport import RetryAsyncTransport, RetryPolicy, RetrySyncTransport
from pydantic import Field

from opensandbox_provider._sdk import installed_version
from opensandbox_provider._transport import DeadlineTransport

# SDK 1.1.1 builds every transport through new_owned_transport; 1.1.0 builds the one a
# config owns inside with_transport_if_missing and has no such method.
_SDK_BUILDS_OWNED_TRANSPORTS = hasattr(ConnectionConfigSync, "new_owned_transport")
# Whether the SDK's create sends resource requests apart from limits (the hook refuses a
# connection that sets one when it cannot).
SDK_TAKES_REQUESTS = "resource_requests" in inspect.signature(SandboxSync.create).parameters


class ConnectionConfig(ConnectionConfigSync):
    """
    :class:`ConnectionConfigSync` whose transports are our :class:`DeadlineTransport` pools:
    their connections keep each call's deadline, and their TLS also trusts ``ca_certificates``.
    """

    # PEM text rather than a path: the file is read, and refused with the extra's name,
    # once, when the connection is, not again inside the SDK whenever a sandbox is made.
    ca_certificates: str | None = Field(default=None, repr=False)
    # What each sandbox made on this connection asks a Kubernetes scheduler for (the
    # connection's cpu_request and memory_request extras); None asks for its limits.
    resource_requests: dict[str, str] | None = None

    def new_owned_transport(
        self,
        *,
        max_connections: int | None = 100,
        max_keepalive_connections: int = 20,
        keepalive_expiry: float = 30.0,
    ) -> httpx.BaseTransport:
        """The SDK's stack, with our pool where the SDK has its own; its limits are the SDK's."""
        transport = DeadlineTransport(
            self.ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
        )
        if self.retry_policy.wraps_transport():
            return RetrySyncTransport(transport, self.retry_policy, owns_inner=True)
        return transport

    def with_transport_if_missing(self, **limits: Any) -> ConnectionConfigSync:
        if _SDK_BUILDS_OWNED_TRANSPORTS or self.transport is not None:
            return super().with_transport_if_missing(**limits)
        # SDK 1.1.0 builds its stack in place here; a copy keeps this config's ownership of
        # the transport, as the SDK's own copy does.
        return self.model_copy(update={"transport": self.new_owned_transport(**limits)})

    def ssl_context(self) -> ssl.SSLContext:
        return trusting(self.ca_certificates)


class AsyncConnectionConfig(AsyncSdkConfig):
    """
    The SDK's async :class:`~opensandbox.config.ConnectionConfig`, as the triggerer uses it:
    built by :func:`on_a_transport_of_its_own`, never without a transport.
    """

    ca_certificates: str | None = Field(default=None, repr=False)

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS trust of this connection, shared by every async client of the process."""
        return shared_trust(self.ca_certificates)


def on_a_transport_of_its_own(**settings: Any) -> AsyncConnectionConfig:
    """
    An async config on a transport built here, which trusts the connection's ``ca_bundle``.

    The SDK never closes a transport it is given, so one trigger's lifecycle calls and endpoint
    lookup share it whatever fails; its holder closes it (``await config.transport.aclose()``)
    on the event loop that used it. It takes no proxy from the environment (see :mod:`._clients`).
    """
    # The SDK's default, which the transports it builds itself retry by.
    policy = RetryPolicy()
    transport: httpx.AsyncBaseTransport = httpx.AsyncHTTPTransport(
        verify=shared_trust(settings.get("ca_certificates"))
    )
    if policy.wraps_transport():
        transport = RetryAsyncTransport(transport, policy, owns_inner=True)
    return AsyncConnectionConfig(**settings, retry_policy=policy, transport=transport)


def shared_trust(ca_certificates: str | None) -> ssl.SSLContext:
    """
    :func:`trusting`, made once per process for each set of authorities: a context holds its own
    copy of every authority, about 0.8 MiB, and a triggerer two async clients a deferred task.
    Every client of ours sets the same ALPN (HTTP/1.1) on it. The environment's authorities are
    part of the key, as they are read when a context is made.
    """
    return _trust(ca_certificates, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=8)
def _trust(
    ca_certificates: str | None, cert_file: str | None, cert_dir: str | None
) -> ssl.SSLContext:
    # The environment's two names are only the key: trusting() reads them itself.
    return trusting(ca_certificates)


def trusting(ca_certificates: str | None) -> ssl.SSLContext:
    """The TLS trust of a connection: the system's authorities and its ``ca_bundle``'s PEM."""
    context = httpx.create_ssl_context()
    if ca_certificates is not None:
        context.load_verify_locations(cadata=ca_certificates)
    return context


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
