"""The connection's resource requests on a real server: what the sandbox's scheduler is asked
for, while its limits stay the backend's ``cpu`` and ``memory``.

On the Kubernetes runtime they are the pod's requests (without them the server makes the limits
the requests too); the Docker runtime has no requests, and the container keeps its limits.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

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


def _pod_resources(sandbox: str) -> list[dict]:
    """The resources of the sandbox's own container in its pod (the egress sidecar left out)."""
    return [
        container["resources"]
        for pod in opensandbox.pods_of(sandbox)
        for container in pod["spec"]["containers"]
        if "egress" not in container["name"]
    ]


def _docker_limits(container: str) -> dict[str, int]:
    shown = subprocess.run(
        ["docker", "inspect", "--format", "{{json .HostConfig}}", container],
        check=True,
        capture_output=True,
        text=True,
    )
    host = json.loads(shown.stdout)
    return {"NanoCpus": host["NanoCpus"], "Memory": host["Memory"]}
