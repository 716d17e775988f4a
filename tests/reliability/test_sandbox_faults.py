"""The sandbox fails under a running command: its container is killed, or execd's stream stalls.

What is right: a sandbox killed from outside is gone, so the call says so, either as a
``SandboxTerminalError`` (the toolset fails the task and destroys what is left) or as a result
with ``sandbox_terminated`` after the backend destroyed it itself (the toolset provisions a new
one). A plain ``SandboxError`` would be wrong: the model would retry in a sandbox that no longer
exists. A stalled stream is abandoned, the sandbox destroyed to end it, and the result says
``timed_out`` and ``sandbox_terminated`` (SPEC.md, behaviour 7): for a silent stall from the
missing heartbeats, for one that keeps sending heartbeats from the budget-plus-grace backstop.
"""

from __future__ import annotations

import subprocess

import pytest
from airflow.providers.common.ai.sandbox import SandboxSpec, SandboxTerminalError

from tests.containers import run_frozen
from tests.markers import NEEDS_STALL_SWITCH
from tests.reliability.bounded import long_command, within
from tests.reliability.conftest import assert_key_hidden, assert_no_container, containers_of

CAP = 50 * 1024
# SPEC.md behaviour 7 allows the stream 30 s past the budget; anything far beyond that hangs.
GRACE = 30.0
SLACK = 60.0
STALL_VARIABLE = "OPENSANDBOX_TEST_STALL"  # the execd stand-in's test switch


@pytest.mark.parametrize("use_server_proxy", [False, True], ids=["direct", "through-server"])
def test_container_killed_mid_command_reports_the_sandbox_gone(
    make_backend, plain_server, sandboxes, caplog, use_server_proxy
):
    backend = make_backend(plain_server, use_server_proxy=use_server_proxy)
    handle = backend.create(spec=SandboxSpec(block_network=False))
    sandboxes.append(handle)
    container = containers_of(handle)[0]
    running = long_command(backend, handle, 77, container)

    subprocess.run(["docker", "kill", container], check=True, capture_output=True)
    result, error = running.outcome(137 + GRACE + SLACK, "run_command on a killed container")

    if error is not None:
        assert isinstance(error, SandboxTerminalError), f"{type(error).__name__}: {error}"
        assert_key_hidden(plain_server.api_key, caplog, error)
        backend.destroy(handle)  # what the toolset does when a run fails
    else:
        assert result.sandbox_terminated, (
            f"a killed sandbox came back as an ordinary result: {result}"
        )
        assert "finished" not in result.stdout
    assert_no_container(handle)
    assert_key_hidden(plain_server.api_key, caplog)


@pytest.mark.parametrize("use_server_proxy", [False, True], ids=["direct", "through-server"])
def test_frozen_sandbox_mid_command_is_abandoned_and_destroyed(
    make_backend, plain_server, sandboxes, caplog, use_server_proxy
):
    # A real stall, the same on any execd: the container is frozen while the command runs.
    backend = make_backend(plain_server, use_server_proxy=use_server_proxy)
    handle = backend.create(spec=SandboxSpec(block_network=False))
    sandboxes.append(handle)

    result = run_frozen(
        handle,
        "sleep 41",
        lambda: backend.run_command(
            handle, "sleep 41; echo done", timeout=60, max_output_bytes=CAP
        ),
    )

    assert (result.timed_out, result.sandbox_terminated) == (True, True)
    assert "done" not in result.stdout
    assert_no_container(handle)
    backend.destroy(handle)  # idempotent on a sandbox the backend already destroyed
    assert_key_hidden(plain_server.api_key, caplog)


@NEEDS_STALL_SWITCH
@pytest.mark.parametrize(
    ("stall", "budget"),
    [("silent", 60.0), ("heartbeat", 5.0)],
    ids=["silent-caught-by-missing-heartbeats", "heartbeats-caught-by-the-backstop"],
)
def test_stalled_stream_is_abandoned_and_the_sandbox_destroyed(
    make_backend, plain_server, sandboxes, caplog, stall, budget
):
    backend = make_backend(plain_server)
    handle = backend.create(spec=SandboxSpec(block_network=False, env={STALL_VARIABLE: stall}))
    sandboxes.append(handle)

    result = within(
        budget + GRACE + SLACK,
        f"run_command on a {stall} stalled stream",
        lambda: backend.run_command(
            handle, "echo started; echo done", timeout=budget, max_output_bytes=CAP
        ),
    )

    assert result.timed_out
    assert result.sandbox_terminated
    assert_no_container(handle)
    backend.destroy(handle)  # idempotent on a sandbox the backend already destroyed
    assert_key_hidden(plain_server.api_key, caplog)
