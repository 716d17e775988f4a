"""What the docs show being configured, each a function that builds it between its markers:
tests/docs/test_examples.py calls each and checks what it built."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.providers.common.ai.toolsets import SandboxToolset

    from opensandbox_provider.pool import WarmPool
    from opensandbox_provider.sandbox import OpenSandboxBackend


def toolset_with_open_egress() -> SandboxToolset:
    """docs/index.rst."""
    # [START toolset]
    from airflow.providers.common.ai.sandbox import SandboxSpec
    from airflow.providers.common.ai.toolsets import SandboxToolset

    from opensandbox_provider.sandbox import OpenSandboxBackend

    toolset = SandboxToolset(
        OpenSandboxBackend(opensandbox_conn_id="opensandbox_default"),
        spec=SandboxSpec(block_network=False),
    )
    # [END toolset]
    return toolset


def backend_with_its_defaults() -> OpenSandboxBackend:
    """docs/backend.rst: every argument given its default."""
    # [START backend]
    from opensandbox_provider.sandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(
        opensandbox_conn_id="opensandbox_default",
        image="python:3.12-slim",
        cpu="1",
        memory="2Gi",
        sandbox_timeout=3600,
        ready_timeout=120,
        use_server_proxy=None,
        workdir=None,
    )
    # [END backend]
    return backend


def toolset_that_pauses(handle: str) -> SandboxToolset:
    """docs/prepared-environments.rst, "Pausing a provisioned sandbox between its tasks"."""
    from airflow.providers.common.ai.toolsets import SandboxToolset

    from opensandbox_provider.sandbox import OpenSandboxBackend

    # [START pause]
    toolset = SandboxToolset(OpenSandboxBackend(pause_when_released=True), attach_to=handle)
    # [END pause]
    return toolset


def backend_with_volumes() -> OpenSandboxBackend:
    """docs/prepared-environments.rst, "Mounting data"."""
    # [START volumes]
    from opensandbox_provider.sandbox import HostPath, NamedVolume, OpenSandboxBackend

    backend = OpenSandboxBackend(
        volumes=[
            NamedVolume("reference-data", "/data"),
            HostPath("/srv/airflow/models", "/models"),
            NamedVolume("scratch", "/scratch", read_only=False, created_with_sandbox=True),
        ]
    )
    # [END volumes]
    return backend


def pool_with_a_secret() -> WarmPool:
    """docs/pools.rst, "Secrets in a pool's environment"."""
    # [START pool_secret]
    import os

    from airflow.providers.common.ai.sandbox import SandboxSpec

    from opensandbox_provider.pool import WarmPool

    PYTHON = WarmPool(
        name="python",
        size=4,
        store="redis_pools",
        spec=SandboxSpec(allow_egress_to=["api.example.com"]),
        private_env={"API_TOKEN": os.environ["INGEST_API_TOKEN"]},
    )
    # [END pool_secret]
    return PYTHON
