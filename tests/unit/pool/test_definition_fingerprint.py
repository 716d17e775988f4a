"""
The fingerprint a warm pool stamps on every idle sandbox, pinned byte for byte for a few
representative definitions. A keeper and the workers drawing from its pool may run different
releases: a fingerprint that moved would leave every warm sandbox undrawable until the keeper
is restarted, so a change to how creation arguments are gathered must leave these as they are.
"""

from __future__ import annotations

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec

from opensandbox_provider.pool import WarmPool
from opensandbox_provider.pool._definition import FINGERPRINT_KEY, CreationArguments
from opensandbox_provider.sandbox import HostPath, NamedVolume, OpenSandboxBackend

STORE = "redis://localhost:6379/0"

# Each definition with the backend arguments and the task spec that match it.
DEFINITIONS = {
    "default": (
        {},
        {},
        SandboxSpec(),
    ),
    "open_spec": (
        {"spec": SandboxSpec(block_network=False)},
        {},
        SandboxSpec(block_network=False),
    ),
    "egress_and_env": (
        {
            "image": "python:3.13-slim",
            "cpu": "500m",
            "memory": "1Gi",
            "spec": SandboxSpec(
                allow_egress_to=["index.example.test", "files.example.test"],
                allow_egress_to_cidrs=["10.0.0.0/8"],
                env={"MODE": "fast", "A": "1"},
            ),
        },
        {"image": "python:3.13-slim", "cpu": "500m", "memory": "1Gi"},
        SandboxSpec(
            allow_egress_to=["index.example.test", "files.example.test"],
            allow_egress_to_cidrs=["10.0.0.0/8"],
            env={"A": "1", "MODE": "fast"},
        ),
    ),
    "snapshot": (
        {"snapshot": "snap-1", "registry_conn_id": "registry"},
        {"snapshot": "snap-1", "registry_conn_id": "registry"},
        SandboxSpec(),
    ),
    "resources": (
        {
            "cpu": "2",
            "resources": {"nvidia.com/gpu": "1", "ephemeral-storage": "10Gi"},
            "cpu_request": "500m",
            "memory_request": "1Gi",
            "registry_conn_id": "registry",
        },
        {
            "cpu": "2",
            "resources": {"ephemeral-storage": "10Gi", "nvidia.com/gpu": "1"},
            "cpu_request": "500m",
            "memory_request": "1Gi",
            "registry_conn_id": "registry",
        },
        SandboxSpec(),
    ),
    "volumes": (
        {
            "volumes": [
                NamedVolume("data", "/data", sub_path="in", created_with_sandbox=True),
                HostPath("/srv/models", "/models", read_only=False),
            ]
        },
        {
            "volumes": [
                NamedVolume("data", "/data", sub_path="in", created_with_sandbox=True),
                HostPath("/srv/models", "/models", read_only=False),
            ]
        },
        SandboxSpec(),
    ),
    "private_env": (
        {
            "spec": SandboxSpec(block_network=False, env={"MODE": "fast"}),
            "private_env": {"API_TOKEN": "token-one-4a1f"},
        },
        {},
        SandboxSpec(block_network=False, env={"MODE": "fast", "API_TOKEN": "token-one-4a1f"}),
    ),
}

PINNED = {
    "default": "16e226f0e0dd89f74b1395efaccfd986",
    "open_spec": "1056d8645240dfb8d64344f8695c2aeb",
    "egress_and_env": "8e8ecf0c2589a9a0d42b85698f164e9f",
    "snapshot": "c93b9fa364fc1ccbdc39c7397551195b",
    "resources": "b2808d36b3a5fc0e66deecceed41fa68",
    "volumes": "6b597ee7ed237e642d919ccb9acf267e",
    "private_env": "113ed873650fd0d3975cd60a4bfebcde",
}


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_a_pools_fingerprint_stays_byte_identical(name: str) -> None:
    pool = WarmPool("py", 1, STORE, **DEFINITIONS[name][0])
    assert pool.creation.fingerprint() == PINNED[name]
    assert pool.idle_metadata()[FINGERPRINT_KEY] == PINNED[name]


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_a_backend_with_the_pools_arguments_wants_what_the_pool_holds(name: str) -> None:
    # A draw compares the arguments themselves, private values included, not fingerprints: the
    # backend cannot tell which of the spec's variables the pool keeps private.
    pool_settings, backend_settings, spec = DEFINITIONS[name]
    pool = WarmPool("py", 1, STORE, **pool_settings)
    backend = OpenSandboxBackend(warm_pool=pool, **backend_settings)
    wanted = CreationArguments.of_template(backend.creation_template(spec))
    assert wanted == pool.creation
    assert pool.creation.differences(wanted) == []


def test_no_spec_and_an_open_spec_share_a_fingerprint() -> None:
    assert WarmPool("py", 1, STORE, spec=None).creation.fingerprint() == PINNED["open_spec"]
