"""
A backend's settings checked, and in the form it keeps them: made by the backend, and by the
operator when its Dag is parsed, so that a mistake fails there without a backend being made.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from opensandbox_provider.sandbox import _arguments, _resources, _volumes
from opensandbox_provider.sandbox._limits import validate_positive_finite

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from opensandbox_provider.sandbox._source import SandboxSource


def checked_settings(
    *,
    image: str,
    cpu: str,
    memory: str,
    resources: Mapping[str, str] | None,
    cpu_request: str | None,
    memory_request: str | None,
    registry_conn_id: str | None,
    sandbox_timeout: float,
    ready_timeout: float,
    use_server_proxy: bool | None,
    workdir: str | None,
    snapshot: str | None,
    volumes: Sequence[_volumes.Mount] | None,
    pause_when_released: bool,
    warm_pool: SandboxSource | None,
    park_margin: float,
) -> dict[str, Any]:
    """Each setting by its name in :data:`SETTINGS`, checked; raises ``ValueError`` on a bad one."""
    _arguments.check_backend(
        image=image,
        cpu=cpu,
        memory=memory,
        lease=sandbox_timeout,
        lease_name="sandbox_timeout",
        ready_timeout=ready_timeout,
    )
    validate_positive_finite(park_margin, "park_margin")
    snapshot = _arguments.snapshot_id(snapshot)
    checked_volumes = _volumes.checked(volumes)
    extra_limits = _resources.extra_limits(resources)
    # Checked now, so that a request above its limit fails when the Dag is parsed.
    resource_requests = _resources.requests(
        cpu=cpu, memory=memory, cpu_request=cpu_request, memory_request=memory_request
    )
    working_directory = _arguments.working_directory(workdir)
    if warm_pool is not None:
        warm_pool.check_backend(snapshot=snapshot, has_volumes=bool(checked_volumes))
    return {
        "image": image,
        "cpu": cpu,
        "memory": memory,
        "resources": extra_limits,
        "cpu_request": cpu_request,
        "memory_request": memory_request,
        "resource_requests": resource_requests,
        "registry_conn_id": registry_conn_id,
        "sandbox_timeout": float(sandbox_timeout),
        "ready_timeout": float(ready_timeout),
        "use_server_proxy": use_server_proxy,
        "workdir": working_directory,
        "snapshot": snapshot,
        "volumes": checked_volumes,
        "pause_when_released": bool(pause_when_released),
        "warm_pool": warm_pool,
        "park_margin": float(park_margin),
    }


SETTINGS = (*inspect.signature(checked_settings).parameters, "resource_requests")
"""The names a backend keeps its settings by, which are all a copy of it carries: each it is
made with, and the requests checked against its limits."""
