"""Pools on the local cluster, made through a Kubernetes-mode server's own pools API.

A ``Pool`` is what a :class:`~opensandbox_provider.pool.ServerPool` names: the controller keeps
its pods started from a template, and the server hands one to each create that names the pool.
The tests of server pools and ``make bench RUNTIME=kubernetes`` make theirs here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from dev.kube.opensandbox import NAMESPACE, kubectl
from dev.stack.state import ServerInfo, StackState

# A pod of a pool starts in a few seconds on the local cluster (docs/kubernetes.rst); this
# leaves room for a busy two-core machine.
FILL_SECONDS = 90.0
DISABLE_IPV6 = "/proc/sys/net/ipv6/conf/all/disable_ipv6"
# Small, so that a pool's pods leave room on a two-core node for other sandboxes.
SMALL = {"cpu": "250m", "memory": "256Mi"}
# One idle pod, two at most.
ONE_IDLE = {"bufferMin": 1, "bufferMax": 1, "poolMin": 1, "poolMax": 2}


def pool_template(
    stack: StackState,
    *,
    egress_rules: dict[str, Any] | None = None,
    resources: dict[str, str] = SMALL,
) -> dict[str, Any]:
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
    init: dict[str, Any] = {
        "name": "execd-installer",
        "image": stack.images["execd"],
        "command": ["/bin/sh", "-c", installer],
        "volumeMounts": [binaries],
    }
    sandbox: dict[str, Any] = {
        "name": "sandbox",
        "image": stack.sandbox_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/opensandbox/bootstrap.sh", "tail", "-f", "/dev/null"],
        "env": [{"name": "EXECD", "value": "/opt/opensandbox/execd"}],
        "resources": {"limits": dict(resources), "requests": dict(resources)},
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


def pool_pods(name: str) -> set[str]:
    """The pods of the Pool ``name``: the controller names them after it."""
    names = kubectl("get", "pods", "-n", NAMESPACE, "-o", "name", check=False).split()
    return {n.removeprefix("pod/") for n in names if n.startswith(f"pod/{name}-")}


def idle_pods(api: httpx.Client, name: str) -> int:
    status = api.get(f"/pools/{name}").json().get("status") or {}
    return int(status.get("available", 0))


def wait_for(check, what: str, seconds: float = FILL_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"Waited {seconds:g}s for {what}.")
        time.sleep(0.5)


@contextmanager
def pool_on(
    server: ServerInfo, template: dict[str, Any], capacity: dict[str, int] = ONE_IDLE
) -> Iterator[str]:
    """A Pool of ``template``'s pods on the cluster, made through ``server``'s pools API, with
    an idle pod when the block starts; deleted with its pods when it ends. Yields its name."""
    name = f"airflow-test-{uuid.uuid4().hex[:8]}"
    with pools_api(server) as api:
        made = api.post(
            "/pools", json={"name": name, "template": template, "capacitySpec": capacity}
        )
        if made.status_code != 201:
            raise RuntimeError(f"The server refused Pool {name}: {made.status_code} {made.text}")
        try:
            wait_for(lambda: idle_pods(api, name) >= 1, f"Pool {name} to have an idle pod")
            yield name
        finally:
            api.delete(f"/pools/{name}").raise_for_status()
            wait_for(lambda: not pool_pods(name), f"the pods of Pool {name} to go")
