"""The failures a Kubernetes user meets, each named in the task's error with what to do, on
the local cluster: an image that cannot be pulled, a pod that never gets an address (no node
can hold it), a server pool at its poolMax. A command the out-of-memory killer ends is
tests/integration/test_operator.py's, on either runtime.

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
# One pod, started ahead, and no room for a second.
FULL = {"bufferMin": 1, "bufferMax": 1, "poolMin": 1, "poolMax": 1}


def test_an_image_the_cluster_cannot_pull_is_named_with_where_it_was_pulled_from(
    backend_on, plain_server
):
    before = batchsandboxes()
    backend = backend_on(plain_server, image=MISSING_IMAGE)

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=OPEN)

    # The server fails the create once the kubelet reports the pull failed, and says why.
    message = str(raised.value)
    assert "ErrImagePull" in message
    assert f"could not pull image {MISSING_IMAGE}" in message
    assert "pulled from 127.0.0.1:9 without a login" in message
    pools.wait_for(lambda: batchsandboxes() <= before, "the sandbox's BatchSandbox to go")


def test_a_pod_that_never_gets_an_address_is_named_with_what_to_do(backend_on, plain_server):
    before = batchsandboxes()
    # More than the two-core node has, asked for as a request too, so that no node can take
    # the pod: it stays Pending, and the server gives up at its own create timeout (60 s).
    extra = {**plain_server.connection_extra, "cpu_request": "64"}
    backend = backend_on(replace(plain_server, connection_extra=extra), cpu="64")

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=OPEN)

    # The create waited for the server's answer rather than ending in a bare request timeout.
    message = str(raised.value)
    assert "POD_READY_TIMEOUT" in message and "Last state: Pending" in message
    assert "got no address before the server's own create timeout" in message
    assert "short of room" in message and "sandbox_create_timeout_seconds" in message
    pools.wait_for(lambda: batchsandboxes() <= before, "the sandbox's BatchSandbox to go")


def test_a_server_pool_at_its_pool_max_fails_the_create_saying_so(backend_on, plain_server, stack):
    with pools.pool_on(plain_server, pools.pool_template(stack), FULL) as name:
        pool = ServerPool(name)
        backend = backend_on(plain_server, warm_pool=pool)
        held = backend.create(spec=OPEN)
        holding = batchsandboxes()
        try:
            with pytest.raises(SandboxTerminalError) as raised:
                backend.create(spec=OPEN)
            # The server deletes the sandbox it could not bind; the Pool's controller must
            # still run to release it, or its finalizer keeps it forever.
            pools.wait_for(lambda: batchsandboxes() <= holding, "the unbound sandbox to go")
        finally:
            backend.destroy(held)
    message = str(raised.value)
    assert f"bound no pod of Pool {name!r} in time" in message and "poolMax" in message
