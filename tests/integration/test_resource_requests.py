"""Resource requests and limits on a real server: what the sandbox's scheduler is asked for,
and what its container is limited to.

On the Kubernetes runtime the requests are the pod's (without them the server makes the limits
the requests too), and every limit is the pod's; the Docker runtime has no requests, keeps cpu
and memory as the container's limits, makes the server's ``gpu`` a device request, and ignores
every other name (docs/operator.rst, "Resources").
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from dev.kube import opensandbox
from dev.stack.state import runtime
from tests.containers import containers_of

REQUESTS = {"cpu_request": "50m", "memory_request": "64Mi"}


def test_a_sandbox_asks_for_the_connections_requests_and_keeps_the_backends_limits(
    sandbox_on, plain_server
):
    server = replace(plain_server, connection_extra=REQUESTS)
    sandbox = sandbox_on(server, cpu="1", memory="512Mi")

    assert sandbox.run("echo asked").stdout == "asked\n"
    if runtime() == "kubernetes":
        (resources,) = _pod_resources(sandbox.handle)
        assert resources["requests"] == {"cpu": "50m", "memory": "64Mi"}
        assert resources["limits"] == {"cpu": "1", "memory": "512Mi"}
    else:
        (container,) = containers_of(sandbox.handle)
        limits = _docker_limits(container)
        assert limits == {"NanoCpus": 1_000_000_000, "Memory": 512 * 2**20}


def test_a_tasks_own_requests_and_extra_limits_reach_the_container(sandbox_on, plain_server):
    server = replace(plain_server, connection_extra=REQUESTS)
    # The task's cpu request replaces the connection's; its memory request stands.
    sandbox = sandbox_on(
        server,
        cpu="1",
        memory="512Mi",
        cpu_request="100m",
        resources={"ephemeral-storage": "1Gi"},
    )

    assert sandbox.run("echo asked").stdout == "asked\n"
    if runtime() == "kubernetes":
        (resources,) = _pod_resources(sandbox.handle)
        # Kubernetes requests a limit given without a request whole, as for ephemeral-storage.
        assert resources["requests"] == {
            "cpu": "100m",
            "memory": "64Mi",
            "ephemeral-storage": "1Gi",
        }
        assert resources["limits"] == {"cpu": "1", "memory": "512Mi", "ephemeral-storage": "1Gi"}
    else:
        (container,) = containers_of(sandbox.handle)
        host = _host_config(container)
        assert {"NanoCpus": host["NanoCpus"], "Memory": host["Memory"]} == {
            "NanoCpus": 1_000_000_000,
            "Memory": 512 * 2**20,
        }
        # Neither a request nor a resource Docker has no setting for changes the container.
        assert not host.get("DeviceRequests")
        assert not host.get("StorageOpt")


@pytest.mark.not_on_kubernetes(
    reason="the server makes gpu the pod's nvidia.com/gpu, which no node of the local cluster "
    "has, so the pod would wait unscheduled rather than be refused"
)
def test_the_servers_gpu_key_is_a_docker_device_request_the_engine_must_satisfy(
    backend_on, plain_server
):
    backend = backend_on(plain_server, resources={"gpu": "1"})

    # The engine has no GPU runtime here: the request reaches it, and it refuses the container.
    with pytest.raises(SandboxTerminalError, match=r"capabilities: \[\[gpu\]\]"):
        backend.create(spec=SandboxSpec(block_network=False))


def _pod_resources(sandbox: str) -> list[dict]:
    """The resources of the sandbox's own container in its pod (the egress sidecar left out)."""
    return [
        container["resources"]
        for pod in opensandbox.pods_of(sandbox)
        for container in pod["spec"]["containers"]
        if "egress" not in container["name"]
    ]


def _docker_limits(container: str) -> dict[str, int]:
    host = _host_config(container)
    return {"NanoCpus": host["NanoCpus"], "Memory": host["Memory"]}


def _host_config(container: str) -> dict:
    shown = subprocess.run(
        ["docker", "inspect", "--format", "{{json .HostConfig}}", container],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(shown.stdout)
