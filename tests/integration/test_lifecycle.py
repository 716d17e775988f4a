"""A sandbox's life on the real server: settings at create, readiness, connection, destroy.

SPEC 1 (create-time mapping), 10 (destroy), 11 (connection) and 13 (attribution).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from opensandbox import SandboxManagerSync

from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

WRONG_KEY = "not-the-servers-key-0123456789"


def info(server, handle: str):
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        return manager.get_sandbox_info(handle)
    finally:
        manager.close()


def test_the_environment_is_set_when_the_sandbox_is_created(sandbox_on, plain_server) -> None:
    spec = SandboxSpec(block_network=False, env={"GREETING": "hello there", "EMPTY": ""})
    sandbox = sandbox_on(plain_server, spec)
    assert sandbox.run('printf "%s|%s" "$GREETING" "${EMPTY-unset}"').stdout == "hello there|\n"


def test_image_limits_and_lifetime_are_the_backends_arguments(sandbox_on, plain_server) -> None:
    before = datetime.now(UTC)
    sandbox = sandbox_on(plain_server, cpu="500m", memory="512Mi", sandbox_timeout=600)
    described = info(plain_server, sandbox.handle)
    assert described.image.image == "python:3.12-slim"
    assert 590 <= (described.expires_at - before).total_seconds() <= 610
    limits = sandbox.run(
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us"
        " 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max"
    ).stdout.split()
    assert str(512 * 1024 * 1024) in limits
    assert "50000" in limits


def test_every_sandbox_carries_airflows_attribution(sandbox, plain_server) -> None:
    metadata = info(plain_server, sandbox.handle).metadata
    assert metadata["created-by"] == "airflow"
    assert re.fullmatch(r"airflow-sandbox-[0-9a-f]{12}", metadata["name"])


@pytest.mark.not_on_kubernetes(
    reason="the Kubernetes runtime appends EXECD=/opt/opensandbox/execd after the request's "
    "environment, and the pod's last EXECD wins, so the test cannot make execd fail"
)
def test_a_sandbox_that_never_becomes_ready_is_destroyed(backend_on, plain_server) -> None:
    # bootstrap.sh starts whatever EXECD names; /bin/false exits at once, so nothing answers.
    backend = backend_on(plain_server, ready_timeout=3)
    spec = SandboxSpec(block_network=False, env={"EXECD": "/bin/false"})
    with pytest.raises(SandboxTerminalError, match="did not become ready within 3s") as raised:
        backend.create(spec=spec)
    handle = re.search(r"Sandbox (\S+) did not become ready", str(raised.value)).group(1)
    assert not plain_server.has_sandbox(handle)


def test_destroy_is_idempotent(sandbox, plain_server) -> None:
    sandbox.backend.destroy(sandbox.handle)
    assert not plain_server.has_sandbox(sandbox.handle)
    sandbox.backend.destroy(sandbox.handle)


def test_a_backend_that_never_saw_the_sandbox_destroys_it_by_handle(
    sandbox, backend_on, plain_server
) -> None:
    backend_on(plain_server).destroy(sandbox.handle)
    assert not plain_server.has_sandbox(sandbox.handle)
    backend_on(plain_server).destroy(sandbox.handle)  # already gone: a 404 is done


def test_a_paused_sandbox_is_destroyed_without_waiting_for_it_to_answer(
    sandbox, backend_on, plain_server
) -> None:
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        manager.pause_sandbox(sandbox.handle)
    finally:
        manager.close()
    # A paused execd never answers, so a destroy that polled for readiness first would
    # give up after ready_timeout with the sandbox still there.
    backend_on(plain_server, ready_timeout=1).destroy(sandbox.handle)
    assert not plain_server.has_sandbox(sandbox.handle)


def test_a_wrong_api_key_is_refused_by_the_server_and_is_terminal(
    plain_server, monkeypatch, backend_on
) -> None:
    connection = json.loads(
        plain_server.airflow_connection_env("wrong_key")["AIRFLOW_CONN_WRONG_KEY"]
    )
    monkeypatch.setenv("AIRFLOW_CONN_WRONG_KEY", json.dumps({**connection, "password": WRONG_KEY}))
    from opensandbox_provider.sandbox import OpenSandboxBackend

    with pytest.raises(SandboxTerminalError, match="refused the API key") as raised:
        OpenSandboxBackend("wrong_key").create(spec=SandboxSpec(block_network=False))
    assert "HTTP 401" in str(raised.value)
    assert WRONG_KEY not in str(raised.value)


def test_the_connection_test_tells_a_wrong_key_from_a_right_one(plain_server, monkeypatch) -> None:
    for name, value in plain_server.airflow_connection_env("right_key").items():
        monkeypatch.setenv(name, value)
    connection = json.loads(plain_server.airflow_connection_env("x")["AIRFLOW_CONN_X"])
    monkeypatch.setenv("AIRFLOW_CONN_WRONG_KEY", json.dumps({**connection, "password": WRONG_KEY}))

    ok, message = OpenSandboxHook("wrong_key").test_connection()
    assert not ok
    assert message.startswith(
        f"The OpenSandbox server at http://{plain_server.domain} refused the API key (HTTP 401"
    )
    assert WRONG_KEY not in message

    ok, message = OpenSandboxHook("right_key").test_connection()
    assert ok, message
    assert plain_server.api_key not in message


def test_without_a_connection_id_the_sdks_environment_variables_are_used(
    plain_server, monkeypatch
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", plain_server.domain)
    monkeypatch.setenv("OPEN_SANDBOX_API_KEY", plain_server.api_key)
    from opensandbox_provider.sandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(None)
    handle = backend.create(spec=SandboxSpec(block_network=False))
    try:
        result = backend.run_command(
            handle, "echo through the environment", timeout=10, max_output_bytes=100
        )
        assert result.stdout == "through the environment\n"
    finally:
        backend.destroy(handle)
