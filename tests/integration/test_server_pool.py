"""Server pools on the Kubernetes servers of the local cluster: a Pool the controller keeps
started, a backend taking its sandboxes from it, and nothing of theirs left afterwards.

Runs only with ``RUNTIME=kubernetes`` (docs/kubernetes.rst, "OpenSandbox on the local cluster"):
only the Kubernetes runtime has pools.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from opensandbox.sync.manager import SandboxManagerSync

from dev.kube import pools
from dev.kube.opensandbox import batchsandboxes
from dev.kube.pools import FILL_SECONDS
from dev.stack.state import ServerInfo, StackState, runtime
from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider._tags import LEASE_KEY
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.pool import ServerPool
from tests.integration.conftest import CONN_ID
from tests.integration.test_task_identity import inside, task_instance

pytestmark = pytest.mark.skipif(
    runtime() != "kubernetes", reason="only OpenSandbox's Kubernetes runtime has server pools"
)

OPEN = SandboxSpec(block_network=False)
GONE_SECONDS = 60.0
# What the egress pool's sidecars enforce, and the spec whose policy that is.
ALLOWLIST = SandboxSpec(allow_egress_to=["allowed.test"])
ALLOWLIST_RULES = {
    "defaultAction": "deny",
    "egress": [{"action": "allow", "target": "allowed.test"}],
}


@pytest.fixture(scope="module")
def server_pool(stack: StackState, plain_server: ServerInfo) -> Iterator[ServerPool]:
    """A Pool whose pods have no egress sidecar."""
    with pools.pool_on(plain_server, pools.pool_template(stack)) as name:
        yield ServerPool(name)


@pytest.fixture(scope="module")
def egress_pool(stack: StackState, dns_nft_server: ServerInfo) -> Iterator[ServerPool]:
    """A Pool whose pods' sidecars enforce ``ALLOWLIST`` at the address layer."""
    template = pools.pool_template(stack, egress_rules=ALLOWLIST_RULES)
    with pools.pool_on(dns_nft_server, template) as name:
        yield ServerPool(name)


def wait_for(check, what: str, seconds: float = FILL_SECONDS) -> None:
    try:
        pools.wait_for(check, what, seconds)
    except TimeoutError as waited:
        pytest.fail(str(waited))


def named(name: str, resources: set[str]) -> bool:
    """Whether ``resources``, as kubectl names them (``kind.group/name``), hold ``name``."""
    return any(resource.endswith(f"/{name}") for resource in resources)


def pool_pods(pool: ServerPool) -> set[str]:
    return pools.pool_pods(pool.name)


@pytest.fixture
def manager(plain_server: ServerInfo, monkeypatch: pytest.MonkeyPatch):
    """The SDK's lifecycle client on the ``plain`` server, to read sandboxes back."""
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    manager = SandboxManagerSync.create(OpenSandboxHook(CONN_ID).connection_config)
    yield manager
    manager.close()


def seconds_left(manager: SandboxManagerSync, sandbox: str) -> float:
    expires_at = manager.get_sandbox_info(sandbox).expires_at
    return (expires_at - datetime.now(UTC)).total_seconds()


def test_a_sandbox_from_a_server_pool_runs_in_a_pool_pod_and_is_gone_after(
    server_pool, plain_server, backend_on, manager
) -> None:
    backend = backend_on(plain_server, warm_pool=server_pool, sandbox_timeout=600)
    ti = task_instance("server_pool_dag", "pooled_task", try_number=2)
    with inside(ti):
        handle = backend.create(spec=OPEN)
    try:
        ran = backend.run_command(handle, "hostname", timeout=30, max_output_bytes=1024)
        metadata = dict(manager.get_sandbox_info(handle).metadata or {})
        leased = seconds_left(manager, handle)
        # A renewal, as the backend's lease holder makes, reaches the pooled BatchSandbox.
        manager.renew_sandbox(handle, timedelta(seconds=1800))
        renewed = seconds_left(manager, handle)
    finally:
        backend.destroy(handle)

    pod = ran.stdout.strip()
    assert ran.exit_code == 0
    # The controller names a pool's pods after the pool: the command ran in one of them.
    assert pod.startswith(f"{server_pool.name}-")
    assert TaskInstanceIdentity.read(metadata) == TaskInstanceIdentity.of(ti)
    assert metadata["created-by"] == "airflow" and metadata[LEASE_KEY] == "600"
    assert 540 < leased <= 600 and 1740 < renewed <= 1800
    # Destroyed, the sandbox takes its pod with it: no later task gets what this one left.
    wait_for(lambda: pod not in pool_pods(server_pool), f"pod {pod} to go", GONE_SECONDS)
    wait_for(lambda: not named(handle, batchsandboxes()), f"sandbox {handle} to go", GONE_SECONDS)


def test_a_pool_sandbox_whose_sidecar_takes_no_token_is_refused_as_its_guest_could_widen_it(
    egress_pool, dns_nft_server, backend_on
) -> None:
    # The sidecar enforces the spec's policy, but a Pool's pods carry no egress token, so code in
    # the sandbox could rewrite it.
    backend = backend_on(dns_nft_server, warm_pool=egress_pool)
    before = batchsandboxes()

    with pytest.raises(SandboxTerminalError, match="cannot serve a spec that denies egress"):
        backend.create(spec=ALLOWLIST)

    wait_for(lambda: batchsandboxes() <= before, "the refused sandbox to go", GONE_SECONDS)


@pytest.mark.parametrize(
    ("pool", "server"), [("egress_pool", "dns_nft_server"), ("server_pool", "plain_server")]
)
def test_a_pool_sandbox_not_proven_to_enforce_the_specs_policy_is_destroyed(
    pool, server, backend_on, request
) -> None:
    # Deny-all, where the egress pool's sidecars allow allowed.test and the plain pool's pods have
    # no sidecar at all.
    backend = backend_on(request.getfixturevalue(server), warm_pool=request.getfixturevalue(pool))
    before = batchsandboxes()

    with pytest.raises(SandboxTerminalError, match="OPENSANDBOX_EGRESS_RULES"):
        backend.create(spec=SandboxSpec())

    wait_for(lambda: batchsandboxes() <= before, "the unproven sandbox to go", GONE_SECONDS)


def test_a_pool_the_cluster_does_not_have_fails_the_task_with_its_name(
    plain_server, backend_on
) -> None:
    backend = backend_on(plain_server, warm_pool=ServerPool("airflow-test-no-such-pool"))

    with pytest.raises(SandboxTerminalError, match="no Pool named 'airflow-test-no-such-pool'"):
        backend.create(spec=OPEN)
