"""
A backend's sandbox taken from a warm pool instead of created: the one step of create that
differs. Everything after it (readiness, the egress proof, the working directory, the lease
held) is what a created sandbox goes through too.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider import _metrics
from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._errors import as_sandbox_errors, sdk_exceptions
from opensandbox_provider._identity import KEYS
from opensandbox_provider.sandbox._lifecycle import ENDED_STATES, destroy_quietly, unless_missing

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync
    from opensandbox.models.sandboxes import SandboxInfo

    from opensandbox_provider.pool._definition import CreationArguments, WarmPool
    from opensandbox_provider.sandbox._lifecycle import Lifecycle

log = logging.getLogger(__name__)

# Idle sandboxes looked at per draw before it counts as empty: one that expired or was
# destroyed since it was warmed is skipped, but a pool full of them is a pool to re-warm.
MAX_CANDIDATES = 3
# An idle sandbox this close to the end of its idle lease is not drawn but destroyed: the
# renewal that follows the draw must reach the server before the sandbox ends.
MIN_REMAINING_SECONDS = 30.0

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


@dataclass(frozen=True)
class Handover:
    """How a drawn sandbox becomes the task's: the server to reach it by, and what to make it."""

    lifecycle: Lifecycle
    config: ConnectionConfigSync
    metadata: dict[str, str]
    """Stamped on it: what the backend would have created it with."""
    lease: float
    """The seconds it is renewed to."""
    connect_timeout: float


def draw(
    pool: WarmPool, *, wanted: CreationArguments, conn_id: str | None, handover: Handover
) -> SandboxSync | None:
    """
    A ready sandbox of ``pool``, made the task's as ``handover`` says, as the backend would
    have created it; ``None`` when the backend is to create one as without a pool. Raises when
    the pool says to fail instead.
    """
    mismatch = _mismatch(pool, wanted, conn_id)
    if mismatch:
        return _fall_back(pool, "on_mismatch", mismatch)
    from opensandbox.pool_types import try_take_idle_with_min_ttl
    from redis.exceptions import RedisError

    from opensandbox_provider.pool._store import state_store

    unreachable: tuple[type[Exception], ...] = (RedisError, OSError, *sdk_exceptions())
    for _ in range(MAX_CANDIDATES):
        try:
            taken = try_take_idle_with_min_ttl(
                state_store(pool), pool.name, timedelta(seconds=MIN_REMAINING_SECONDS)
            )
        except unreachable as e:
            # Redis down or unreachable (the SDK's store says so with an exception of its
            # own): the pool is as good as empty.
            return _fall_back(pool, "when_empty", f"its store could not be reached: {e}")
        for ending in taken.discarded_alive_sandbox_ids:
            destroy_quietly(
                handover.lifecycle.kill, ending, after="its idle lease was about to end"
            )
        if taken.sandbox_id is None:
            return _fall_back(pool, "when_empty", "it has no idle sandbox")
        sdk = _claim(pool, taken.sandbox_id, handover)
        if sdk is not None:
            _metrics.count(_metrics.WARM_POOL_HIT, tags={"pool": pool.name})
            return sdk
    return _fall_back(
        pool,
        "when_empty",
        f"its next {MAX_CANDIDATES} idle sandboxes had ended or were made with other arguments",
    )


def _mismatch(pool: WarmPool, wanted: CreationArguments, conn_id: str | None) -> str | None:
    """Why a sandbox of ``pool`` is not what the backend would create, or ``None``."""
    differences = pool.creation.differences(wanted)
    if conn_id != pool.opensandbox_conn_id:
        differences.append(f"connection ({pool.opensandbox_conn_id!r} against {conn_id!r})")
    if not differences:
        return None
    return "the pool's sandboxes differ from this task's in " + "; ".join(differences)


def _fall_back(pool: WarmPool, argument: str, why: str) -> SandboxSync | None:
    """Log that the task gets a cold sandbox, or fail it if the pool's ``argument`` says so."""
    _metrics.count(_metrics.WARM_POOL_MISS, tags={"pool": pool.name})
    if getattr(pool, argument) == "fail":
        raise SandboxTerminalError(
            f"Could not take a sandbox from warm pool {pool.name!r}: {why}. The pool says "
            f"{argument}='fail'; fix the cause, or pass {argument}='cold' to create a sandbox "
            "without the pool then."
        )
    log.warning(
        "Not taking a sandbox from warm pool %s: %s. Creating one without the pool.", pool.name, why
    )
    return None


def _claim(pool: WarmPool, sandbox: str, handover: Handover) -> SandboxSync | None:
    """
    The idle ``sandbox``, now this task's; ``None`` if it had ended, is of another make, or is
    not idle.

    The store is meant to hand each idle sandbox to one draw, but a Redis failover that
    replays a pop hands it to a second: so the sandbox is proven idle (this deployment's, no
    task identity stamped on it, its name still the pool's) before it is stamped, and one
    that is not is left alone, neither used nor destroyed, for it may be another task's.
    From the stamp on it is destroyed on any failure, for no other worker will ever take it.
    """
    from opensandbox import SandboxSync

    doing = f"take sandbox {sandbox} from warm pool {pool.name}"

    def info() -> SandboxInfo | None:
        with handover.lifecycle.call(doing) as api:
            return unless_missing(lambda: api.get_sandbox_info(sandbox))

    def stamp() -> None:
        with handover.lifecycle.call(doing) as api:
            # What the backend would have created it with: its name, its lease, the tags of a
            # sandbox provisioned for another task, and whatever else the backend stamps.
            api.patch_sandbox_metadata(sandbox, dict(handover.metadata))

    def renew() -> None:
        with handover.lifecycle.call(doing) as api:
            api.renew_sandbox(sandbox, timedelta(seconds=handover.lease))

    def connect() -> SandboxSync:
        with as_sandbox_errors(doing, terminal=True):
            return SandboxSync.connect(
                sandbox,
                connection_config=handover.config,
                connect_timeout=timedelta(seconds=handover.connect_timeout),
                skip_health_check=True,
            )

    # Independent requests run together, so a draw waits for the slowest of each round
    # rather than for the sum: this is most of what a warm start costs. Nothing is written
    # before the sandbox is proven idle.
    requests = _requests()
    found, connected = requests.submit(info), requests.submit(connect)
    first: list[Future[Any]] = [found, connected]
    wait(first)
    taken = _taken(found, pool, handover)
    if taken is not None:
        if connected.exception() is None:
            connected.result().close()
        log.warning(
            "Idle sandbox %s of warm pool %s is not idle: %s. Leaving it alone and taking the "
            "next; a store that hands one sandbox out twice (a Redis failover) does this.",
            sandbox,
            pool.name,
            taken,
        )
        return None
    calls: list[Future[Any]] = [found, connected]
    if found.exception() is None and connected.exception() is None:
        calls += [requests.submit(stamp), requests.submit(renew)]
        wait(calls)
    unusable = _unusable(found, pool)
    failure = next((call.exception() for call in calls if call.exception() is not None), None)
    if unusable is None and failure is None:
        return connected.result()
    if connected.exception() is None:
        connected.result().close()
    destroy_quietly(
        handover.lifecycle.kill, sandbox, after=unusable or "taking it from the pool failed"
    )
    if unusable is not None:
        log.info(
            "Idle sandbox %s of warm pool %s: %s; taking the next.", sandbox, pool.name, unusable
        )
        return None
    assert failure is not None
    raise failure


def _taken(found: Future[SandboxInfo | None], pool: WarmPool, handover: Handover) -> str | None:
    """Why the sandbox the server described may be someone else's, or ``None`` if it is idle."""
    info = None if found.exception() is not None else found.result()
    if info is None:
        return None
    metadata = info.metadata or {}
    ours = handover.metadata[DEPLOYMENT_KEY]
    if metadata.get(DEPLOYMENT_KEY) != ours:
        return (
            f"it was warmed by Airflow deployment {metadata.get(DEPLOYMENT_KEY)!r}, not by "
            f"this one ({ours!r}); give each deployment's pools their own names or Redis"
        )
    stamped = sorted(key for key in KEYS.values() if key in metadata)
    if stamped:
        return f"a task instance is stamped on it ({', '.join(stamped)})"
    if not pool.is_idle_name(metadata.get("name")):
        return f"its name is {metadata.get('name')!r}, not an idle sandbox's of this pool"
    return None


def _unusable(found: Future[SandboxInfo | None], pool: WarmPool) -> str | None:
    """Why the sandbox the server described is not one to hand a task, or ``None``."""
    # Here, not at the top: the pool's definition imports this module.
    from opensandbox_provider.pool._definition import FINGERPRINT_KEY

    if found.exception() is not None:
        return None
    info = found.result()
    if info is None or info.status.state in ENDED_STATES:
        return "it had ended"
    stamped = (info.metadata or {}).get(FINGERPRINT_KEY)
    if stamped != pool.creation.fingerprint():
        # A keeper running another definition of the pool under the same name made it.
        return (
            f"it was made with other arguments (fingerprint {stamped}, the pool's is "
            f"{pool.creation.fingerprint()}); run one definition of a pool per name"
        )
    return None


def _requests() -> ThreadPoolExecutor:
    """The threads a draw's requests run on, one set for the process, made on first use."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="opensandbox-draw")
        return _executor
