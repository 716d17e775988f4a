"""Server pools without a server: what the backend refuses, what its create asks for, and how
the server's refusals read."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from airflow.providers.common.compat.sdk import dag, task
from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException, SandboxTimeoutException
from opensandbox.exceptions import SandboxError as SdkError

from opensandbox_provider._tags import LEASE_KEY
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.pool import ServerPool, _server_pool
from opensandbox_provider.sandbox import NamedVolume, OpenSandboxBackend
from opensandbox_provider.sandbox._source import advising

POOL = ServerPool("python-pool")


class Refused(Exception):
    """What the stand-in for the SDK's create raises, so a test sees what it was asked."""


@pytest.fixture
def asked(monkeypatch) -> list[dict]:
    """Every create the backend asks the SDK for; each is refused once it is recorded."""
    calls: list[dict] = []

    def create(image, **kwargs):
        calls.append({"image": image, **kwargs})
        raise Refused

    monkeypatch.setattr(SandboxSync, "create", staticmethod(create))
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", "http://127.0.0.1:9")
    monkeypatch.setenv("OPEN_SANDBOX_API_KEY", "key")
    return calls


@pytest.mark.parametrize("name", ["", "Python", "python_pool", "-pool", "p" * 64, None])
def test_a_server_pool_is_named_as_kubernetes_names_a_pool(name) -> None:
    with pytest.raises(ValueError, match="Kubernetes Pool's name"):
        ServerPool(name)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"snapshot": "snap-1"}, "cannot start from a snapshot"),
        ({"volumes": [NamedVolume("data", "/data")]}, "OpenSandbox mounts none"),
    ],
)
def test_a_backend_refuses_what_a_pools_pods_were_not_started_with(arguments, message) -> None:
    with pytest.raises(ValueError, match=message):
        OpenSandboxBackend(None, warm_pool=POOL, **arguments)


def test_the_create_names_the_pool_and_stamps_the_lease_and_identity(asked) -> None:
    backend = OpenSandboxBackend(None, warm_pool=POOL, sandbox_timeout=900)

    with pytest.raises(Refused):
        backend.create(spec=SandboxSpec(block_network=False))

    (call,) = asked
    assert call["extensions"] == {"poolRef": "python-pool"}
    assert call["timeout"] == timedelta(seconds=900)
    assert call["metadata"]["created-by"] == "airflow"
    assert call["metadata"][LEASE_KEY] == "900"
    assert call["metadata"]["name"].startswith("airflow-sandbox-")
    # No policy, env, resources, snapshot or volumes: the Pool's template decides them.
    assert not {"network_policy", "env", "resource", "snapshot_id", "volumes"} & set(call)


@pytest.mark.parametrize(
    "spec",
    [None, SandboxSpec(), SandboxSpec(allow_egress_to=["allowed.test"])],
    ids=["no spec", "deny all", "allowlist"],
)
def test_no_policy_is_sent_with_the_pool_for_the_pods_own_sidecar_is_proven_instead(
    asked, spec
) -> None:
    backend = OpenSandboxBackend(None, warm_pool=POOL)

    with pytest.raises(Refused):
        backend.create(spec=spec)

    (call,) = asked
    assert "network_policy" not in call


def test_a_spec_with_env_is_refused_before_the_server_is_asked(asked) -> None:
    backend = OpenSandboxBackend(None, warm_pool=POOL)

    with pytest.raises(SandboxTerminalError, match=r"spec's env \(TOKEN\)"):
        backend.create(spec=SandboxSpec(block_network=False, env={"TOKEN": "x"}))

    assert asked == []


def test_a_failed_egress_proof_of_a_pool_sandbox_says_what_the_pool_must_carry() -> None:
    unproven = SandboxTerminalError("OpenSandbox did not enforce the requested network policy.")

    with pytest.raises(SandboxTerminalError, match="OPENSANDBOX_EGRESS_RULES") as raised:
        with advising(POOL):
            raise unproven
    assert raised.value.__cause__ is unproven
    with pytest.raises(SandboxTerminalError) as created:
        with advising(None):
            raise unproven
    assert created.value is unproven


def refusal(status: int, code: str, message: str) -> SandboxApiException:
    return SandboxApiException(
        message=f"Create sandbox failed: {message}",
        status_code=status,
        error=SdkError(code=code, message=message),
    )


def test_a_docker_server_is_told_apart_from_a_missing_pool() -> None:
    docker = refusal(
        400, "SANDBOX::UNSUPPORTED_POOL_REF", "poolRef is not supported by the Docker provider."
    )
    missing = refusal(404, "KUBERNETES::POOL_NOT_FOUND", "Pool 'python-pool' not found.")

    on_docker = _server_pool.explain(docker, POOL)
    not_there = _server_pool.explain(missing, POOL)

    assert isinstance(on_docker, SandboxTerminalError)
    assert "only its Kubernetes runtime has pools" in str(on_docker)
    assert isinstance(not_there, SandboxTerminalError)
    assert "has no Pool named 'python-pool'" in str(not_there)
    assert "Pool 'python-pool' not found" in str(not_there)


def test_a_create_that_times_out_points_at_the_pools_size() -> None:
    explained = _server_pool.explain(SandboxTimeoutException("timed out"), POOL)

    assert isinstance(explained, SandboxTerminalError)
    assert "Raise the Pool's poolMax" in str(explained)


def test_a_refusal_about_something_else_is_left_as_it_is() -> None:
    error = refusal(400, "SANDBOX::INVALID", "metadata key is not a label")

    assert _server_pool.explain(error, POOL) is error


def test_the_operator_passes_a_server_pool_to_its_backend_and_survives_a_deep_copy() -> None:
    operator = OpenSandboxOperator(task_id="t", command="true", warm_pool=POOL)

    copied = copy.deepcopy(operator)

    assert copied.sandbox_arguments["warm_pool"] == POOL


def test_the_decorator_refuses_requirements_with_a_server_pool_when_parsed() -> None:
    @task.opensandbox(warm_pool=POOL, requirements=["requests"])
    def needs_requests() -> None: ...

    with pytest.raises(ValueError, match="Install them in the Pool's image"):

        @dag(schedule=None, start_date=datetime(2026, 1, 1))
        def holder() -> None:
            needs_requests()

        holder()
