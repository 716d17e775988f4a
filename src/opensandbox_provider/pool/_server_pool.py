"""
Server pools: ``Pool`` resources that OpenSandbox's Kubernetes controller keeps, and a
backend's sandbox taken from one by a create that names the Pool (docs/pools.rst, "Server
pools"). Everything after the create is what a created sandbox goes through too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow.providers.common.ai.sandbox.base import SandboxTerminalError

from opensandbox_provider._errors import as_sandbox_errors, sdk_exceptions, to_sandbox_error
from opensandbox_provider.egress import _policy
from opensandbox_provider.sandbox._creation import awaiting_the_pod

if TYPE_CHECKING:
    from opensandbox import SandboxSync
    from opensandbox.config.connection_sync import ConnectionConfigSync

    from opensandbox_provider._metrics import Route
    from opensandbox_provider.sandbox._lifecycle import Lifecycle
    from opensandbox_provider.sandbox._template import CreationTemplate

# A Pool is a namespaced Kubernetes object, and the server's BatchSandbox labels name it too:
# a DNS label, the stricter of the rules that apply to it.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

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


@dataclass(frozen=True)
class ServerPool:
    """
    A ``Pool`` resource on the Kubernetes cluster an OpenSandbox server runs sandboxes on
    (docs/pools.rst, "Server pools"): the controller keeps its pods started, and the server
    hands one to each create that names the pool.

    Unlike a :class:`~opensandbox_provider.pool.WarmPool`, nothing on the worker's side keeps
    it: it needs no keeper and no Redis. The Pool's pod template decides the image and the
    resources, not the backend's ``image``, ``cpu`` and ``memory``.

    :param name: The Pool's name in the namespace the server's ``[kubernetes]`` section names.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"A server pool's name is a Kubernetes Pool's name: lower-case letters, digits "
                f"and '-', at most 63, starting and ending with a letter or digit; got "
                f"{self.name!r}."
            )

    @property
    def route(self) -> Route:
        return "server_pool"

    def check_backend(self, *, snapshot: str | None, has_volumes: bool) -> None:
        """Refuse, when the Dag is parsed, backend arguments the Pool's pods were not made with."""
        if snapshot is not None:
            raise ValueError(
                f"Server pool {self.name!r} hands out pods started from its own template, so "
                "they cannot start from a snapshot. Drop snapshot, or drop warm_pool."
            )
        if has_volumes:
            raise ValueError(
                f"Server pool {self.name!r} hands out pods started before any volume was asked "
                "for, and OpenSandbox mounts none into them. Drop volumes, or drop warm_pool."
            )

    def take(
        self, template: CreationTemplate, *, lifecycle: Lifecycle, config: ConnectionConfigSync
    ) -> SandboxSync:
        """
        A pod of the Pool, bound as a sandbox and stamped with the template's metadata and lease
        as the backend would have created it; never ``None``, since the server waits for one.

        No network policy is sent: the server refuses one with a pool, whose pods were started
        with whatever sidecar their template gives them. The backend proves afterwards, as for
        any sandbox, that this sidecar enforces the spec's policy; see :func:`advising`.
        """
        # The pod runs before the task asks for it, so an environment the spec sets cannot reach
        # its processes: refused here, rather than run without it.
        if template.env:
            raise SandboxTerminalError(
                f"Server pool {self.name!r} hands out pods already started, so the spec's env "
                f"({', '.join(sorted(template.env))}) cannot reach their processes. Set the "
                "variables in the Pool's pod template, or drop warm_pool."
            )
        with as_sandbox_errors(f"take a sandbox from server pool {self.name}", terminal=True):
            from opensandbox import SandboxSync

            try:
                return SandboxSync.create(
                    # The SDK asks for an image; the server takes the Pool's and ignores this.
                    template.image,
                    timeout=timedelta(seconds=template.lease),
                    ready_timeout=timedelta(seconds=template.ready_timeout),
                    metadata=dict(template.metadata),
                    extensions={POOL_REF: self.name},
                    connection_config=awaiting_the_pod(config, template.ready_timeout),
                    # Readiness is polled by wait_until_ready, as for a created sandbox.
                    skip_health_check=True,
                )
            except sdk_exceptions() as e:
                raise explain(e, self) from e

    def origin(self, template: CreationTemplate) -> tuple[str, str]:
        return f"Took from server pool {self.name}", "its Pool's pod template"

    def unenforced(self, error: SandboxTerminalError) -> SandboxTerminalError:
        """A failed egress proof, with what the Pool's pods must carry for it to pass."""
        if _policy.TAKES_NO_TOKEN in str(error):
            return SandboxTerminalError(
                f"{error} The sandbox came from server pool {self.name!r}: a Pool's pods are "
                "started before any sandbox asks, so the server gives their sidecars no token, "
                "and a server pool cannot serve a spec that denies egress. Draw such sandboxes "
                "from a warm pool, or create them (docs/pools.rst, 'Server pools')."
            )
        return SandboxTerminalError(
            f"{error} The sandbox came from server pool {self.name!r}, whose pods get no policy "
            "from the task: the Pool's template must carry OpenSandbox's egress sidecar in "
            "dns+nft mode with exactly this policy in OPENSANDBOX_EGRESS_RULES "
            "(docs/pools.rst, 'Server pools')."
        )


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
