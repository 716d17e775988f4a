"""
The keeper: holds a warm pool at its size, through the SDK's pool reconciler; any number may
run for one pool, and only the holder of its primary lock creates sandboxes (docs/pools.rst).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.pool._store import state_store
from opensandbox_provider.sandbox import _registry, _volumes
from opensandbox_provider.sandbox._creation import within_limits
from opensandbox_provider.sandbox._lifecycle import Lifecycle, destroy_quietly

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.pool_types import PooledSandboxCreateContext
    from opensandbox.sync.pool import SandboxPoolSync

    from opensandbox_provider.pool._definition import WarmPool

log = logging.getLogger(__name__)

# How long a keeper's primary lock outlives its last renewal (renewed every second): a keeper
# that dies is replaced by another within this long.
LOCK_SECONDS = 45.0
# How long a new sandbox has to start answering before the keeper gives it up and makes another.
WARMUP_READY_SECONDS = 30.0
# New sandboxes a keeper asks for per second at most: a cold pool of a few dozen fills in
# seconds, and the server is not flooded by one keeper's first tick.
MAX_CREATES_PER_SECOND = 4


class Keeper:
    """Holds ``pool`` at its size while it runs; use as a context manager, or start and stop."""

    def __init__(
        self,
        pool: WarmPool,
        *,
        lock_seconds: float = LOCK_SECONDS,
        ready_seconds: float = WARMUP_READY_SECONDS,
    ) -> None:
        self.pool = pool
        self.lock_seconds = float(lock_seconds)
        self.ready_seconds = float(ready_seconds)
        self._sdk_pool: SandboxPoolSync | None = None

    def start(self) -> None:
        from opensandbox.pool_types import PoolCreationSpec
        from opensandbox.sync.pool import SandboxPoolSync

        pool = self.pool
        config = OpenSandboxHook(pool.opensandbox_conn_id).connection_config
        self._sdk_pool = SandboxPoolSync(
            pool_name=pool.name,
            max_idle=pool.size,
            state_store=state_store(pool),
            connection_config=config,
            # Unused: every sandbox comes from _create, which reads the pool itself.
            creation_spec=PoolCreationSpec(image=pool.image),
            warmup_create_qps=max(1, min(pool.size, MAX_CREATES_PER_SECOND)),
            warmup_concurrency=max(1, pool.size),
            primary_lock_ttl=timedelta(seconds=self.lock_seconds),
            warmup_ready_timeout=timedelta(seconds=self.ready_seconds),
            idle_timeout=timedelta(seconds=pool.idle_lease),
            sandbox_creator=self._create,
        )
        self._sdk_pool.start()
        log.info(
            "Keeping warm pool %s at %d idle sandboxes on %s (idle lease %gs).",
            pool.name,
            pool.size,
            config.domain,
            pool.idle_lease,
        )

    def stop(self) -> None:
        """Stop making sandboxes; the idle ones stay for the workers until their lease ends."""
        if self._sdk_pool is not None:
            self._sdk_pool.shutdown(graceful=True)
            self._sdk_pool = None

    def idle(self) -> int:
        """How many idle sandboxes the pool's store holds now."""
        return state_store(self.pool).snapshot_counters(self.pool.name).idle_count

    def wait_until_full(self, timeout: float) -> bool:
        """Wait until the pool holds its size; ``False`` if it did not within ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.idle() < self.pool.size:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def __enter__(self) -> Keeper:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _create(self, context: PooledSandboxCreateContext) -> SandboxSync:
        """A sandbox made exactly as a backend with the pool's arguments creates one."""
        from opensandbox import SandboxSync

        from opensandbox_provider._connection_config import creation_options

        pool = self.pool
        return SandboxSync.create(
            None if pool.snapshot else _registry.image_spec(pool.image, pool.registry_conn_id),
            snapshot_id=pool.snapshot,
            timeout=context.idle_timeout,
            ready_timeout=context.ready_timeout,
            env=dict(pool.creation.env) or None,
            metadata=pool.idle_metadata(),
            resource={"cpu": pool.cpu, "memory": pool.memory, **pool.creation.resources},
            network_policy=pool.creation.policy(),
            volumes=_volumes.sdk_volumes(pool.volumes),
            connection_config=cast("ConnectionConfigSync", context.connection_config),
            # The SDK's pool polls readiness itself once the sandbox exists.
            skip_health_check=True,
            **within_limits(
                creation_options(context.connection_config, pool.creation.requests),
                {"cpu": pool.cpu, "memory": pool.memory},
            ),
        )


def drain(pool: WarmPool) -> int:
    """Destroy every idle sandbox of ``pool`` and return how many; stop its keepers first."""
    store = state_store(pool)
    lifecycle = Lifecycle(lambda: OpenSandboxHook(pool.opensandbox_conn_id).connection_config)
    drained = 0
    while (sandbox := store.try_take_idle(pool.name)) is not None:
        drained += 1
        destroy_quietly(lifecycle.kill, sandbox, after=f"draining pool {pool.name}")
    return drained
