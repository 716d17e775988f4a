"""The failures a Kubernetes user meets, each named in the task's error with what to do, on
the local cluster: an image that cannot be pulled, a pod no node can hold, a server pool at its
poolMax. A command the out-of-memory killer ends is tests/integration/test_operator.py's, on
either runtime.

Runs only with ``RUNTIME=kubernetes``: on Docker the same causes refuse the create itself with
the engine's words (tests/integration/test_private_images.py, test_resource_requests.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from dev.kube import pools
from dev.kube.opensandbox import batchsandboxes
from dev.stack.state import runtime
from opensandbox_provider.pool import ServerPool

pytestmark = pytest.mark.skipif(
    runtime() != "kubernetes",
    reason="these are the Kubernetes runtime's failures; on Docker the same causes refuse the "
    "create with the engine's words",
)

OPEN = SandboxSpec(block_network=False)
# Nothing listens on the discard port of this host's loopback, where the node pulls from.
MISSING_IMAGE = "127.0.0.1:9/absent/sandbox:1"
# Long enough for the kubelet's first failed pull and its back-off to be recorded.
PULL_WAIT = 45.0
# One pod, started ahead, and no room for a second.
FULL = {"bufferMin": 1, "bufferMax": 1, "poolMin": 1, "poolMax": 1}


def test_an_image_the_cluster_cannot_pull_is_named_from_the_pods_events(backend_on, plain_server):
    before = batchsandboxes()
    backend = backend_on(plain_server, image=MISSING_IMAGE, ready_timeout=PULL_WAIT)

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=OPEN)

    message = str(raised.value)
    assert f"did not become ready within {PULL_WAIT:g}s" in message
    assert f"could not pull image {MISSING_IMAGE}" in message
    assert "pulled from 127.0.0.1:9 without a login" in message
    assert "The cluster's event:" in message
    pools.wait_for(lambda: batchsandboxes() <= before, "the sandbox's BatchSandbox to go")


def test_a_pod_no_node_can_hold_is_refused_saying_what_to_lower(backend_on, plain_server):
    before = batchsandboxes()
    # More than the two-core node has, asked for as a request too, so the scheduler can
    # place the pod nowhere.
    server = replace(
        plain_server, connection_extra={**plain_server.connection_extra, "cpu_request": "64"}
    )
    backend = backend_on(server, cpu="64")

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=OPEN)

    message = str(raised.value)
    assert "is unschedulable" in message and "Insufficient cpu" in message
    assert "Lower its cpu or memory" in message
    pools.wait_for(lambda: batchsandboxes() <= before, "the sandbox's BatchSandbox to go")


def test_a_server_pool_at_its_pool_max_fails_the_create_saying_so(backend_on, plain_server, stack):
    with pools.pool_on(plain_server, pools.pool_template(stack), FULL) as name:
        pool = ServerPool(name)
        backend = backend_on(plain_server, warm_pool=pool)
        held = backend.create(spec=OPEN)
        try:
            with pytest.raises(SandboxTerminalError) as raised:
                backend.create(spec=OPEN)
        finally:
            backend.destroy(held)
    message = str(raised.value)
    assert f"Pool {name!r}" in message and "poolMax" in message
