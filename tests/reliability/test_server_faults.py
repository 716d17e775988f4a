"""The lifecycle server fails: killed mid-command and restarted, re-keyed, or answering 5xx.

What is right: a server that cannot be reached, or that refuses the credentials, is a
``SandboxTerminalError`` (the contract's own examples), and so is any failed create. A command
whose stream does not pass through the server (direct mode) is not disturbed by the server
going away; one whose stream does is cut, and that is terminal too. A transient 502/503 on an
idempotent call is retried, as the SDK's transport does, so it costs nothing. A 5xx that
persists is a ``SandboxError``: a server error says nothing about the sandbox or the
credentials, and the same call may work once the server recovers (the toolset turns it into a
retry for the model, and never lets a failed destroy fail the task). Every message is free of
the API key, and every sandbox is gone at the end.
"""

from __future__ import annotations

import secrets

import pytest
from airflow.providers.common.ai.sandbox import SandboxError, SandboxTerminalError

from dev.stack.state import ServerInfo
from tests.containers import assert_no_container, containers_of
from tests.reliability.bounded import long_command, within
from tests.reliability.cleanup import destroy_directly
from tests.reliability.conftest import OPEN, assert_key_hidden

CAP = 50 * 1024
DEADLINE = 120.0
DIRECT = {"use_server_proxy": False}
THROUGH_SERVER = {"use_server_proxy": True}


@pytest.fixture
def own_sandboxes(own_server):
    made: list[str] = []
    yield made
    own_server.start()  # a test may have left it down or re-keyed
    destroy_directly(own_server.info, made)


def test_server_killed_mid_command_does_not_disturb_a_direct_stream(
    make_backend, own_server, own_sandboxes, caplog
):
    backend = make_backend(own_server.info, **DIRECT)
    handle = backend.create(spec=OPEN)
    own_sandboxes.append(handle)
    running = long_command(backend, handle, 3, containers_of(handle)[0])

    own_server.kill()
    result = running.result(DEADLINE, "run_command while the server was killed")
    assert result.exit_code == 0
    assert result.stdout == "finished\n"

    with pytest.raises(SandboxTerminalError) as down:
        within(DEADLINE, "destroy with the server down", lambda: backend.destroy(handle))
    own_server.start()
    within(DEADLINE, "destroy after the restart", lambda: backend.destroy(handle))
    assert_no_container(handle)
    assert_key_hidden(own_server.api_key, caplog, down.value)


def test_server_killed_mid_command_through_the_server_is_terminal(
    make_backend, own_server, own_sandboxes, caplog
):
    backend = make_backend(own_server.info, **THROUGH_SERVER)
    handle = backend.create(spec=OPEN)
    own_sandboxes.append(handle)
    running = long_command(backend, handle, 5, containers_of(handle)[0])

    own_server.kill()
    with pytest.raises(SandboxTerminalError) as lost:
        running.result(DEADLINE, "run_command whose stream went through a killed server")

    own_server.start()
    within(DEADLINE, "destroy after the restart", lambda: backend.destroy(handle))
    assert_no_container(handle)
    assert_key_hidden(own_server.api_key, caplog, lost.value)


def test_api_key_rotated_mid_run_is_terminal_and_named_nowhere(
    make_backend, own_server, own_sandboxes, caplog
):
    old_key = own_server.api_key
    backend = make_backend(own_server.info, **DIRECT)
    handle = backend.create(spec=OPEN)
    own_sandboxes.append(handle)
    assert (
        backend.run_command(handle, "echo before", timeout=30, max_output_bytes=CAP).exit_code == 0
    )

    own_server.rotate_key(secrets.token_urlsafe(24))
    errors = []
    # execd itself takes no key in direct mode, so a command may still run; if the backend asks
    # the server anything first, the refusal must be terminal.
    try:
        after = within(
            DEADLINE,
            "a command after the rotation",
            lambda: backend.run_command(handle, "echo after", timeout=30, max_output_bytes=CAP),
        )
        assert after.stdout == "after\n"
    except SandboxTerminalError as error:
        errors.append(error)
    with pytest.raises(SandboxTerminalError) as destroy_refused:
        within(DEADLINE, "destroy with a stale key", lambda: backend.destroy(handle))
    with pytest.raises(SandboxTerminalError) as create_refused:
        within(DEADLINE, "create with a stale key", lambda: backend.create(spec=OPEN))

    for key in (old_key, own_server.api_key):
        assert_key_hidden(key, caplog, destroy_refused.value, create_refused.value, *errors)
    destroy_directly(own_server.info, [handle])
    assert_no_container(handle)


def _behind(proxy, server: ServerInfo) -> ServerInfo:
    return ServerInfo(server.name, "127.0.0.1", proxy.port, server.api_key, server.egress_mode)


def test_create_answered_with_503_is_terminal_and_creates_nothing(
    make_backend, plain_server, fault_proxy, caplog
):
    fault_proxy.fail("POST", r"^/v1/sandboxes$", 503)
    backend = make_backend(_behind(fault_proxy, plain_server), **DIRECT)

    with pytest.raises(SandboxTerminalError) as refused:
        within(DEADLINE, "create against a 503", lambda: backend.create(spec=OPEN))

    assert not [r for r in fault_proxy.relayed if r[0] == "POST" and r[1] == "/v1/sandboxes"]
    assert_key_hidden(plain_server.api_key, caplog, refused.value)


def test_transient_5xx_on_destroy_and_endpoints_is_retried(
    make_backend, plain_server, fault_proxy, sandboxes, caplog
):
    server = _behind(fault_proxy, plain_server)
    handle = make_backend(server, **DIRECT).create(spec=OPEN)
    sandboxes.append(handle)
    # A fresh backend knows nothing of the sandbox, so it resolves its endpoint first.
    fresh = make_backend(server, conn_id="reliability_fresh", **DIRECT)
    endpoints = fault_proxy.fail("GET", rf"^/v1/sandboxes/{handle}/endpoints/", 502, times=1)
    deletes = fault_proxy.fail("DELETE", rf"^/v1/sandboxes/{handle}$", 503, times=2)

    ran = within(
        DEADLINE,
        "a command after a 502",
        lambda: fresh.run_command(handle, "echo through", timeout=30, max_output_bytes=CAP),
    )
    within(DEADLINE, "destroy after two 503s", lambda: fresh.destroy(handle))

    assert ran.stdout == "through\n"
    assert endpoints.injected == 1
    assert deletes.injected == 2
    assert_no_container(handle)
    assert_key_hidden(plain_server.api_key, caplog)


def test_persistent_5xx_on_destroy_is_an_error_until_the_server_recovers(
    make_backend, plain_server, fault_proxy, sandboxes, caplog
):
    backend = make_backend(_behind(fault_proxy, plain_server), **DIRECT)
    handle = backend.create(spec=OPEN)
    sandboxes.append(handle)
    fault_proxy.fail("DELETE", rf"^/v1/sandboxes/{handle}$", 500)

    with pytest.raises(SandboxError) as failed:
        within(DEADLINE, "destroy against a 500", lambda: backend.destroy(handle))
    fault_proxy.clear()
    within(DEADLINE, "destroy once the server recovers", lambda: backend.destroy(handle))

    assert_no_container(handle)
    assert_key_hidden(plain_server.api_key, caplog, failed.value)


def test_5xx_on_a_command_through_the_server_is_an_error_not_a_crash(
    make_backend, plain_server, fault_proxy, sandboxes, caplog
):
    backend = make_backend(_behind(fault_proxy, plain_server), **THROUGH_SERVER)
    handle = backend.create(spec=OPEN)
    sandboxes.append(handle)
    fault_proxy.fail("POST", rf"^/v1/sandboxes/{handle}/proxy/44772/command$", 502)

    with pytest.raises(SandboxError) as failed:
        within(
            DEADLINE,
            "a command against a 502",
            lambda: backend.run_command(handle, "echo never", timeout=30, max_output_bytes=CAP),
        )
    fault_proxy.clear()
    again = within(
        DEADLINE,
        "a command once the proxy recovers",
        lambda: backend.run_command(handle, "echo again", timeout=30, max_output_bytes=CAP),
    )

    assert again.stdout == "again\n"
    backend.destroy(handle)
    assert_no_container(handle)
    assert_key_hidden(plain_server.api_key, caplog, failed.value)
