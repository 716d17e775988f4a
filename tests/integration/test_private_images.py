"""A private image on a registry of our own behind basic auth, pulled by the real server with a
docker connection's login: run with the right login, refused naming the registry without one or
with a wrong one, and the login found in no log and no label of the sandbox.

The registry (``dev/stack/registry.py``) listens on the host's loopback, which the Docker engine
trusts without TLS; every sandbox of the image is untagged on the engine before and after each
test, so each create makes the server pull it.
"""

from __future__ import annotations

import json
import logging
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError

from dev.stack import registry as registries
from dev.stack.registry import Registry
from tests.containers import containers_of

pytestmark = pytest.mark.not_on_kubernetes(
    reason="the registry listens on this host's loopback, which the local cluster's nodes do "
    "not reach; the server's Kubernetes runtime takes the login as a pod's imagePullSecret"
)

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


@pytest.fixture
def pulled_afresh(private_image: str) -> Iterator[str]:
    """The private image, absent from the engine, so that the server must pull it."""
    registries.forget(private_image)
    yield private_image
    registries.forget(private_image)


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
    for container in containers_of(sandbox.handle):
        shown = subprocess.run(
            ["docker", "inspect", "--format", "{{json .Config.Labels}}", container],
            check=True,
            capture_output=True,
            text=True,
        )
        assert PASSWORD not in shown.stdout


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
