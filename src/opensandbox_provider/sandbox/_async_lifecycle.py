"""
The server's lifecycle API over the SDK's async client, for the triggerer: renew, kill, and
where a sandbox's execd answers.

The triggerer runs every deferred task's trigger on one event loop, so a trigger holds no
backend (whose calls block, and whose leases run on threads of their own) and no thread:
these calls are awaited on the loop. What a call decides from a sandbox's info is
:mod:`._lifecycle`'s, which the backend's sync client decides by too.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from opensandbox_provider._errors import api_exceptions, as_sandbox_errors, status_of
from opensandbox_provider.execd._execd import EXECD_PORT
from opensandbox_provider.execd._http import endpoint_target
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox import _lifecycle

if TYPE_CHECKING:
    from opensandbox.manager import SandboxManager
    from opensandbox.models.sandboxes import SandboxEndpoint

    from opensandbox_provider._connection_config import AsyncConnectionConfig


@dataclass(frozen=True)
class ExecdEndpoint:
    """Where a sandbox's execd answers, and the headers, TLS trust and timeout a client needs."""

    url: str
    headers: dict[str, str]
    verify: ssl.SSLContext
    request_timeout: float


class AsyncLifecycle:
    """
    The lifecycle calls one trigger makes, on one transport, opened at the first call and
    closed by :meth:`aclose` (or leaving ``async with``).

    Its renewal is the plain one every deferred task's sandbox has had from the triggerer;
    keeping a durable try's sandbox past the try is the worker's backend's.
    """

    def __init__(self, conn_id: str | None) -> None:
        self._hook = OpenSandboxHook(conn_id)
        self._config: AsyncConnectionConfig | None = None
        self._manager: SandboxManager | None = None

    async def __aenter__(self) -> AsyncLifecycle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def renew(self, sandbox: str, *, default_lease: float) -> bool:
        """
        Move the sandbox's expiry to one of its creator's leases from now, unless the server
        already has it later; ``False`` if it is gone. ``default_lease`` serves a sandbox
        whose creator stamped none.
        """
        with as_sandbox_errors(f"renew the lease on sandbox {sandbox}"):
            manager = await self._api()
            try:
                info = await manager.get_sandbox_info(sandbox)
                lease = _lifecycle.renewal(info, default_lease=default_lease)
                if isinstance(lease, timedelta):
                    await manager.renew_sandbox(sandbox, lease)
            except api_exceptions() as e:
                if status_of(e) == 404:
                    return False
                raise
        return lease is not False

    async def kill(self, sandbox: str) -> None:
        """Destroy ``sandbox`` by handle alone, whatever its state; one already gone is too."""
        with as_sandbox_errors(f"destroy sandbox {sandbox}"):
            manager = await self._api()
            try:
                await manager.kill_sandbox(sandbox)
            except api_exceptions() as e:
                if status_of(e) != 404:
                    raise
                _lifecycle.killed(sandbox, done=False)
            else:
                _lifecycle.killed(sandbox, done=True)

    async def execd_endpoint(self, sandbox: str) -> ExecdEndpoint:
        """
        Where the sandbox's execd answers and what a client of it needs, as the backend
        resolves them: through the server or directly, as the connection says.
        """
        config = await self._connection_config()
        with as_sandbox_errors(f"reach sandbox {sandbox}"):
            endpoint = await self._resolve(sandbox, config)
        url, headers = endpoint_target(config, endpoint, "")
        return ExecdEndpoint(
            url, headers, config.ssl_context(), config.request_timeout.total_seconds()
        )

    async def _resolve(self, sandbox: str, config: AsyncConnectionConfig) -> SandboxEndpoint:
        from opensandbox import Sandbox

        # No health check: the trigger polls execd itself, and tells a lost command by it.
        sdk = await Sandbox.connect(
            sandbox,
            connection_config=config,
            connect_timeout=config.request_timeout,
            skip_health_check=True,
        )
        return await sdk.get_endpoint(EXECD_PORT)

    async def aclose(self) -> None:
        """Close the transport every call shared; nothing on the server changes."""
        config, self._config, self._manager = self._config, None, None
        if config is not None and config.transport is not None:
            await config.transport.aclose()

    async def _connection_config(self) -> AsyncConnectionConfig:
        if self._config is None:
            self._config = await self._hook.async_connection_config()
        return self._config

    async def _api(self) -> SandboxManager:
        if self._manager is None:
            from opensandbox.manager import SandboxManager

            self._manager = await SandboxManager.create(await self._connection_config())
        return self._manager
