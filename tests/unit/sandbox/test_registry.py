"""A private image's registry login, read from a docker connection and sent with the create."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxTerminalError
from opensandbox.exceptions import SandboxApiException
from opensandbox.exceptions.sandbox import SandboxError as SdkError

from opensandbox_provider.pool import WarmPool
from opensandbox_provider.pool._definition import CreationArguments
from opensandbox_provider.sandbox import OpenSandboxBackend, _registry
from tests.unit.create_arguments import sent_by_create

PASSWORD = "s3cret-registry-password"


@pytest.fixture
def docker_connection(monkeypatch: pytest.MonkeyPatch):
    def define(conn_id: str = "registry", **fields: Any) -> str:
        fields = {"conn_type": "docker", "login": "puller", "password": PASSWORD, **fields}
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
        return conn_id

    return define


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("python:3.12-slim", "docker.io"),
        ("library/python", "docker.io"),
        ("acme/tool:1", "docker.io"),
        ("index.docker.io/acme/tool", "docker.io"),
        ("registry.example.com/team/tool:2", "registry.example.com"),
        ("127.0.0.1:5000/tool", "127.0.0.1:5000"),
        ("localhost/tool@sha256:00", "localhost"),
    ],
)
def test_an_images_registry_is_read_as_docker_reads_a_reference(image: str, registry: str) -> None:
    assert _registry.registry_of(image) == registry


@pytest.mark.parametrize(
    "host", ["registry.example.com:5000", "https://registry.example.com:5000/"]
)
def test_a_docker_connections_host_names_the_registry_in_any_form_docker_takes(
    docker_connection, host: str
) -> None:
    login = _registry.read_login(docker_connection(host=host))

    assert (login.registry, login.username) == ("registry.example.com:5000", "puller")
    assert PASSWORD not in repr(login)


def test_the_create_sends_the_login_with_the_image_and_nowhere_else(
    docker_connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn_id = docker_connection(host="registry.example.com:5000")
    backend = OpenSandboxBackend(
        image="registry.example.com:5000/team/tool:1", registry_conn_id=conn_id
    )

    sent = sent_by_create(monkeypatch, backend, metadata={"name": "x"})

    image = sent["image"]
    assert image.image == "registry.example.com:5000/team/tool:1"
    assert (image.auth.username, image.auth.password) == ("puller", PASSWORD)
    assert PASSWORD not in json.dumps(sent["metadata"])


def test_a_snapshot_pulls_nothing_and_sends_no_login(
    docker_connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = OpenSandboxBackend(snapshot="snap-1", registry_conn_id=docker_connection(host="r.io"))

    sent = sent_by_create(monkeypatch, backend)

    assert sent["image"] is None
    assert sent["snapshot_id"] == "snap-1"


def test_a_login_is_never_sent_to_another_registry(docker_connection) -> None:
    conn_id = docker_connection(host="registry.example.com")

    with pytest.raises(SandboxTerminalError) as raised:
        _registry.image_spec("python:3.12-slim", conn_id)

    message = str(raised.value)
    assert "login for registry registry.example.com" in message
    assert "pulled from docker.io" in message
    assert PASSWORD not in message


@pytest.mark.parametrize("missing", ["host", "login", "password"])
def test_a_connection_without_a_registry_or_a_login_is_refused_saying_what_to_set(
    docker_connection, missing: str
) -> None:
    fields = {"host": "r.io", "login": "puller", "password": PASSWORD}
    conn_id = docker_connection(**{**fields, missing: ""})

    with pytest.raises(SandboxTerminalError, match="set its host to the registry"):
        _registry.image_spec("r.io/tool", conn_id)


def test_a_connection_that_does_not_exist_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxTerminalError, match="'no_such_registry', which does not exist"):
        _registry.image_spec("r.io/tool", "no_such_registry")


def pull_refusal(detail: str) -> SandboxApiException:
    message = f"Failed to pull image r.io/tool: {detail}"
    return SandboxApiException(
        message=f"Create sandbox failed: {message}",
        status_code=500,
        error=SdkError(code="DOCKER::SANDBOX_IMAGE_PULL_FAILED", message=message),
    )


def test_a_pull_refused_with_a_login_names_the_registry_and_the_connection() -> None:
    explained = _registry.explain_refusal(
        pull_refusal("unauthorized: authentication required"), "r.io/tool", "registry"
    )

    assert isinstance(explained, SandboxTerminalError)
    message = str(explained)
    assert "could not pull image r.io/tool" in message
    assert "pulled from r.io with the login of connection 'registry'" in message
    assert "unauthorized" in message


def test_a_pull_refused_without_a_login_says_to_give_one() -> None:
    explained = _registry.explain_refusal(pull_refusal("no basic auth credentials"), "r.io/t", None)

    assert "without a login" in str(explained)
    assert "registry_conn_id" in str(explained)


def test_a_refusal_that_is_not_a_pull_is_left_to_the_others() -> None:
    other = SandboxApiException(
        message="bad", status_code=400, error=SdkError(code="SANDBOX::INVALID", message="bad")
    )

    assert _registry.explain_refusal(other, "r.io/tool", "registry") is None
    assert _registry.explain_refusal(pull_refusal("x"), None, "registry") is None


def test_a_pools_definition_holds_the_connections_id_and_not_its_login(docker_connection) -> None:
    conn_id = docker_connection(host="r.io")
    pool = WarmPool(
        name="private", size=1, store="redis://h:1/0", image="r.io/tool", registry_conn_id=conn_id
    )
    public = WarmPool(name="private", size=1, store="redis://h:1/0", image="r.io/tool")

    assert pool.creation.canonical()["registry_conn_id"] == conn_id
    assert PASSWORD not in json.dumps(pool.creation.canonical())
    assert pool.creation.fingerprint() != public.creation.fingerprint()
    backend = OpenSandboxBackend(image="r.io/tool", registry_conn_id=conn_id)
    assert CreationArguments.of_template(backend.creation_template(pool.spec)) == pool.creation


def test_a_pools_keeper_pulls_with_the_login_and_its_resources(
    docker_connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta
    from types import SimpleNamespace

    from opensandbox import SandboxSync

    from opensandbox_provider.pool._keeper import Keeper

    pool = WarmPool(
        name="private",
        size=1,
        store="redis://h:1/0",
        image="r.io/tool",
        registry_conn_id=docker_connection(host="r.io"),
        resources={"nvidia.com/gpu": "1"},
        cpu_request="250m",
    )
    sent: dict[str, Any] = {}

    def create(image: Any, *, resource_requests: Any = None, **arguments: Any) -> None:
        sent.update(arguments, image=image, resource_requests=resource_requests)

    monkeypatch.setattr(SandboxSync, "create", create)
    context = SimpleNamespace(
        idle_timeout=timedelta(seconds=900),
        ready_timeout=timedelta(seconds=30),
        connection_config=None,
    )

    Keeper(pool)._create(context)  # type: ignore[arg-type]

    assert (sent["image"].image, sent["image"].auth.password) == ("r.io/tool", PASSWORD)
    assert sent["resource"] == {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    assert sent["resource_requests"] == {"cpu": "250m"}
    assert PASSWORD not in json.dumps(sent["metadata"])
