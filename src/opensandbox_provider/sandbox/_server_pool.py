"""
A backend's sandbox taken from a server pool: a create that names a Kubernetes ``Pool``, so
that the server binds a pod its controller started ahead of time instead of starting one.
Everything after it (readiness, the egress proof, the working directory, the lease held) is
what a created sandbox goes through too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider._errors import as_sandbox_errors, sdk_exceptions, to_sandbox_error
from opensandbox_provider.egress import _policy

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync

    from opensandbox_provider.pool import ServerPool, WarmPool
    from opensandbox_provider.sandbox._template import CreationTemplate

POOL_REF = "poolRef"
"""The create request's extension naming the Pool (OpenSandbox's pool mode)."""

# The server's error codes for a create it cannot serve from a pool: a runtime without pools
# (Docker), and a Pool missing from the server's namespace.
_NOT_KUBERNETES = "UNSUPPORTED_POOL_REF"
_NOT_FOUND = "POOL_NOT_FOUND"
# Every pod of the Pool taken, at its poolMax, for the server's pool_acquisition_timeout.
_FULL = "POOL_CAPACITY_EXHAUSTED"
# No pod bound within the server's create timeout: how a full Pool is answered on the local
# cluster, whose controller reports the claim as plainly pending.
_NO_POD = "POD_READY_TIMEOUT"


def check_backend(pool: ServerPool, *, snapshot: str | None, has_volumes: bool) -> None:
    """Refuse, when the Dag is parsed, backend arguments a pool's pods were not started with."""
    if snapshot is not None:
        raise ValueError(
            f"Server pool {pool.name!r} hands out pods started from its own template, so they "
            "cannot start from a snapshot. Drop snapshot, or drop warm_pool."
        )
    if has_volumes:
        raise ValueError(
            f"Server pool {pool.name!r} hands out pods started before any volume was asked "
            "for, and OpenSandbox mounts none into them. Drop volumes, or drop warm_pool."
        )


def create(
    pool: ServerPool, template: CreationTemplate, *, config: ConnectionConfigSync
) -> SandboxSync:
    """
    A sandbox of ``pool``, stamped with the template's metadata and lease as it is bound, as
    the backend would have created it.

    No network policy is sent: the server refuses one with a pool, whose pods were started
    with whatever sidecar their template gives them. The backend proves afterwards, as for any
    sandbox, that this sidecar enforces the spec's policy; see :func:`advising`.
    """
    # The pod runs before the task asks for it, so an environment the spec sets cannot reach
    # its processes: refused here, rather than run without it.
    if template.env:
        raise SandboxTerminalError(
            f"Server pool {pool.name!r} hands out pods already started, so the spec's env "
            f"({', '.join(sorted(template.env))}) cannot reach their processes. Set the "
            "variables in the Pool's pod template, or drop warm_pool."
        )
    with as_sandbox_errors(f"take a sandbox from server pool {pool.name}", terminal=True):
        from opensandbox import SandboxSync

        try:
            return SandboxSync.create(
                # The SDK asks for an image; the server takes the Pool's and ignores this.
                template.image,
                timeout=timedelta(seconds=template.lease),
                ready_timeout=timedelta(seconds=template.ready_timeout),
                metadata=dict(template.metadata),
                extensions={POOL_REF: pool.name},
                connection_config=config,
                # Readiness is polled by wait_until_ready, as for a created sandbox.
                skip_health_check=True,
            )
        except sdk_exceptions() as e:
            raise explain(e, pool) from e


@contextmanager
def advising(drawn: WarmPool | ServerPool | None) -> Iterator[None]:
    """For a sandbox of a server pool, add to a failed egress proof what the Pool must have."""
    from opensandbox_provider.pool import ServerPool

    try:
        yield
    except SandboxTerminalError as e:
        if not isinstance(drawn, ServerPool):
            raise
        if _policy.TAKES_NO_TOKEN in str(e):
            raise SandboxTerminalError(
                f"{e} The sandbox came from server pool {drawn.name!r}: a Pool's pods are "
                "started before any sandbox asks, so the server gives their sidecars no token, "
                "and a server pool cannot serve a spec that denies egress. Draw such sandboxes "
                "from a warm pool, or create them (docs/pools.rst, 'Server pools')."
            ) from e
        raise SandboxTerminalError(
            f"{e} The sandbox came from server pool {drawn.name!r}, whose pods get no policy "
            "from the task: the Pool's template must carry OpenSandbox's egress sidecar in "
            "dns+nft mode with exactly this policy in OPENSANDBOX_EGRESS_RULES "
            "(docs/pools.rst, 'Server pools')."
        ) from e


def explain(error: Exception, pool: ServerPool) -> Exception:
    """A create ``pool`` could not serve, with what to do; any other failure as it is."""
    from opensandbox.exceptions import SandboxTimeoutException

    code = str(getattr(getattr(error, "error", None), "code", "") or "")
    said = f"{code} {error}"
    if isinstance(error, SandboxTimeoutException) or _NO_POD in said:
        # The server answers a pooled create only once a pod is bound; with every pod taken
        # and the Pool at its poolMax, none is, until the server's own create timeout.
        advice = (
            f"The server bound no pod of Pool {pool.name!r} in time, as happens when every pod "
            "is taken and the Pool is at its poolMax; the server removes the sandbox when its "
            "own create timeout passes. Raise the Pool's poolMax, or give the task retries to "
            "try again later."
        )
    elif _FULL in said:
        advice = (
            f"Every pod of Pool {pool.name!r} was taken, and the Pool at its poolMax, for as "
            "long as the server waits for one (its pool_acquisition_timeout_seconds). Raise "
            "the Pool's poolMax, or give the task retries to try again later."
        )
    elif _NOT_KUBERNETES in said:
        advice = (
            "The server does not run sandboxes on Kubernetes, and only its Kubernetes runtime "
            "has pools. Point the connection at a server whose runtime is Kubernetes, or use a "
            "WarmPool."
        )
    elif _NOT_FOUND in said:
        advice = (
            f"The server's namespace has no Pool named {pool.name!r}. Create it (docs/pools.rst, "
            "'Server pools'), or correct the name."
        )
    else:
        return error
    detail = to_sandbox_error(error, f"take a sandbox from server pool {pool.name}", terminal=True)
    return SandboxTerminalError(f"{detail} {advice}")
