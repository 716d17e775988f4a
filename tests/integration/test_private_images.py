"""A private image on a registry of our own behind basic auth, pulled by the real server with a
docker connection's login: run with the right login, refused naming the registry without one or
with a wrong one, and the login found in no log and no label of the sandbox.

The registry (``dev/stack/registry.py``) listens on the host's loopback, which the Docker engine
trusts without TLS; every sandbox of the image is untagged on the engine before and after each
test, so each create makes the server pull it. With ``RUNTIME=kubernetes`` the node is this
host: the local cluster's containerd pulls from the same loopback registry (containerd too
speaks plain HTTP to a loopback registry), the server hands it the login as the pod's
imagePullSecret, and the image is removed from that containerd instead.
"""

from __future__ import annotations

import json
import logging
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from dev.kube import opensandbox as kube
from dev.kube.runtime import ctr
from dev.stack import registry as registries
from dev.stack.registry import Registry
from dev.stack.state import runtime
from tests.containers import containers_of

USERNAME = "puller"
PASSWORD = f"pw-{uuid.uuid4().hex}"
CONN_ID = "private_registry"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    directory = tmp_path_factory.mktemp("registry")
    with registries.private(directory, username=USERNAME, password=PASSWORD) as started:
        yield started


@pytest.fixture(scope="module")
def private_image(registry: Registry, stack) -> str:
    return registry.push(stack.sandbox_image, f"private/sandbox:{uuid.uuid4().hex[:8]}")


def forget(image: str) -> None:
    """Removes ``image`` from the runtime's store, so that the next sandbox of it pulls it."""
    if runtime() == "kubernetes":
        ctr("images", "rm", image, check=False)
    else:
        registries.forget(image)


@pytest.fixture
def pulled_afresh(private_image: str) -> Iterator[str]:
    """The private image, absent from the engine, so that the server must pull it."""
    forget(private_image)
    yield private_image
    forget(private_image)


def shown_to_anyone(sandbox: str) -> str:
    """What anyone listing the sandbox's containers sees: their labels on Docker; the whole
    pod and BatchSandbox on Kubernetes (the login lives only in the pull secret they name)."""
    if runtime() == "kubernetes":
        pods = json.dumps(kube.pods_of(sandbox))
        resource = kube.kubectl("get", "batchsandboxes", "-n", kube.NAMESPACE, "-o", "json")
        return pods + resource
    shown = [
        subprocess.run(
            ["docker", "inspect", "--format", "{{json .Config.Labels}}", container],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for container in containers_of(sandbox)
    ]
    assert shown, f"sandbox {sandbox} has no container to inspect"
    return "\n".join(shown)


def docker_connection(monkeypatch: pytest.MonkeyPatch, registry: Registry, password: str) -> str:
    fields = {"conn_type": "docker", "host": registry.address, "login": USERNAME}
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({**fields, "password": password})
    )
    return CONN_ID


def test_a_private_image_runs_with_the_docker_connections_login(
    sandbox_on, plain_server, registry, pulled_afresh, monkeypatch, caplog
):
    conn_id = docker_connection(monkeypatch, registry, PASSWORD)
    caplog.set_level(logging.DEBUG)

    sandbox = sandbox_on(plain_server, image=pulled_afresh, registry_conn_id=conn_id)

    assert sandbox.run("echo pulled").stdout == "pulled\n"
    assert PASSWORD not in caplog.text
    assert PASSWORD not in shown_to_anyone(sandbox.handle)


@pytest.mark.parametrize("password", ["wrong-password", None], ids=["wrong login", "no login"])
def test_a_private_image_without_its_login_is_refused_naming_the_registry(
    backend_on, plain_server, registry, pulled_afresh, monkeypatch, password
):
    conn_id = None if password is None else docker_connection(monkeypatch, registry, password)
    backend = backend_on(plain_server, image=pulled_afresh, registry_conn_id=conn_id)

    with pytest.raises(SandboxTerminalError) as raised:
        backend.create(spec=SandboxSpec(block_network=False))

    message = str(raised.value)
    assert f"could not pull image {pulled_afresh}" in message
    assert f"pulled from {registry.address}" in message
    if password is None:
        assert "without a login" in message and "registry_conn_id" in message
    else:
        assert f"login of connection {CONN_ID!r}" in message
