"""Server pools on the Kubernetes servers of the local cluster: a Pool the controller keeps
started, a backend taking its sandboxes from it, and nothing of theirs left afterwards.

Runs only with ``RUNTIME=kubernetes`` (docs/kubernetes.rst, "OpenSandbox on the local cluster"):
only the Kubernetes runtime has pools.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from opensandbox.sync.manager import SandboxManagerSync

from dev.kube.opensandbox import NAMESPACE, batchsandboxes, kubectl
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
# A pod of the pool starts in a few seconds on the local cluster (docs/kubernetes.rst); this
# leaves room for a busy two-core machine.
FILL_SECONDS = 90.0
GONE_SECONDS = 60.0
DISABLE_IPV6 = "/proc/sys/net/ipv6/conf/all/disable_ipv6"
# What the egress pool's sidecars enforce, and the spec whose policy that is.
ALLOWLIST = SandboxSpec(allow_egress_to=["allowed.test"])
ALLOWLIST_RULES = {
    "defaultAction": "deny",
    "egress": [{"action": "allow", "target": "allowed.test"}],
}


def pool_template(stack: StackState, *, egress_rules: dict | None = None) -> dict:
    """
    A pod as the server builds one for a create of the stack's sandbox image: execd copied in
    by an init container and started by its bootstrap script before the entrypoint, and with
    ``egress_rules`` the egress sidecar enforcing them in ``dns+nft`` mode. A pool's pods are
    started before any create, so the template has to carry what the server would otherwise
    add.
    """
    installer = (
        "cp ./execd /opt/opensandbox/execd && cp ./bootstrap.sh /opt/opensandbox/bootstrap.sh"
        " && chmod +x /opt/opensandbox/execd /opt/opensandbox/bootstrap.sh"
    )
    binaries = {"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}
    # Small, so that the pool's pods leave room on a two-core node for the other tests'.
    resources = {"cpu": "250m", "memory": "256Mi"}
    init = {
        "name": "execd-installer",
        "image": stack.images["execd"],
        "command": ["/bin/sh", "-c", installer],
        "volumeMounts": [binaries],
    }
    sandbox = {
        "name": "sandbox",
        "image": stack.sandbox_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/opensandbox/bootstrap.sh", "tail", "-f", "/dev/null"],
        "env": [{"name": "EXECD", "value": "/opt/opensandbox/execd"}],
        "resources": {"limits": resources, "requests": resources},
        "volumeMounts": [binaries],
    }
    containers = [sandbox]
    if egress_rules is not None:
        # As the server adds the sidecar for a create with a policy, less the sandbox's own
        # id and token, which a pod started for no sandbox in particular cannot have.
        init["command"] = ["/bin/sh", "-c", f"echo 1 > {DISABLE_IPV6}; {installer}"]
        init["securityContext"] = {"privileged": True}
        sandbox["securityContext"] = {"capabilities": {"drop": ["NET_ADMIN"]}}
        containers.append(
            {
                "name": "egress",
                "image": stack.images["egress"],
                "env": [
                    {"name": "OPENSANDBOX_EGRESS_RULES", "value": json.dumps(egress_rules)},
                    {"name": "OPENSANDBOX_EGRESS_MODE", "value": "dns+nft"},
                ],
                "ports": [{"containerPort": 18080, "name": "egress-api"}],
                "readinessProbe": {
                    "httpGet": {"path": "/healthz", "port": 18080},
                    "periodSeconds": 1,
                    "failureThreshold": 30,
                },
                "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                "volumeMounts": [binaries],
            }
        )
    return {
        "metadata": {"labels": {"app": "airflow-test-server-pool"}},
        "spec": {
            "automountServiceAccountToken": False,
            "volumes": [{"name": "opensandbox-bin", "emptyDir": {}}],
            "initContainers": [init],
            "containers": containers,
        },
    }


def pools_api(server: ServerInfo) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://{server.domain}/v1",
        headers={"OPEN-SANDBOX-API-KEY": server.api_key},
        timeout=30,
    )


@contextmanager
def pool_on(server: ServerInfo, template: dict) -> Iterator[ServerPool]:
    """A Pool of one idle pod (two at most) on the cluster, made through ``server``'s own pools
    API, deleted with its pods when the block ends."""
    pool = ServerPool(f"airflow-test-{uuid.uuid4().hex[:8]}")
    capacity = {"bufferMin": 1, "bufferMax": 1, "poolMin": 1, "poolMax": 2}
    with pools_api(server) as api:
        made = api.post(
            "/pools", json={"name": pool.name, "template": template, "capacitySpec": capacity}
        )
        assert made.status_code == 201, made.text
        try:
            wait_until_available(api, pool.name)
            yield pool
        finally:
            api.delete(f"/pools/{pool.name}").raise_for_status()
            wait_for(lambda: not pool_pods(pool), f"the pods of Pool {pool.name} to go")


@pytest.fixture(scope="module")
def server_pool(stack: StackState, plain_server: ServerInfo) -> Iterator[ServerPool]:
    """A Pool whose pods have no egress sidecar."""
    with pool_on(plain_server, pool_template(stack)) as pool:
        yield pool


@pytest.fixture(scope="module")
def egress_pool(stack: StackState, dns_nft_server: ServerInfo) -> Iterator[ServerPool]:
    """A Pool whose pods' sidecars enforce ``ALLOWLIST`` at the address layer."""
    with pool_on(dns_nft_server, pool_template(stack, egress_rules=ALLOWLIST_RULES)) as pool:
        yield pool


def wait_until_available(api: httpx.Client, name: str) -> None:
    def available() -> bool:
        status = api.get(f"/pools/{name}").json().get("status") or {}
        return status.get("available", 0) >= 1

    wait_for(available, f"Pool {name} to have an idle pod")


def wait_for(check, what: str, seconds: float = FILL_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"Waited {seconds:g}s for {what}.")
        time.sleep(0.5)


def named(name: str, resources: set[str]) -> bool:
    """Whether ``resources``, as kubectl names them (``kind.group/name``), hold ``name``."""
    return any(resource.endswith(f"/{name}") for resource in resources)


def pool_pods(pool: ServerPool) -> set[str]:
    names = kubectl("get", "pods", "-n", NAMESPACE, "-o", "name", check=False).split()
    return {n.removeprefix("pod/") for n in names if n.startswith(f"pod/{pool.name}-")}


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


def test_a_pool_sandbox_whose_sidecar_enforces_the_specs_policy_is_proven_and_runs(
    egress_pool, dns_nft_server, backend_on
) -> None:
    backend = backend_on(dns_nft_server, warm_pool=egress_pool)

    handle = backend.create(spec=ALLOWLIST)
    try:
        ran = backend.run_command(handle, "hostname", timeout=30, max_output_bytes=1024)
    finally:
        backend.destroy(handle)

    assert ran.exit_code == 0 and ran.stdout.startswith(f"{egress_pool.name}-")


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
