"""Commands in a real sandbox: output, deadlines, signals, stalls and reconnecting (SPEC 3-8)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from opensandbox import SandboxSync

from opensandbox_provider.execd import _execd
from opensandbox_provider.sandbox.backend import OpenSandboxBackend
from tests.containers import run_frozen
from tests.markers import NEEDS_STALL_SWITCH

# The execd stand-in's test switch: set in a sandbox's environment at creation, it makes the
# command stream stall (see the header of dev/stack/execd/__main__.py).
STALL = "OPENSANDBOX_TEST_STALL"


def test_blank_lines_survive_the_event_stream(sandbox) -> None:
    result = sandbox.run("printf 'A\\n\\nB\\nC\\n'")
    assert result.stdout == "A\n\nB\nC\n"
    assert (result.exit_code, result.timed_out, result.stdout_truncated) == (0, False, False)


def test_an_unterminated_last_line_comes_back_terminated(sandbox) -> None:
    # execd sends the last line of 'A\n\nB\nC' exactly as that of 'A\n\nB\nC\n'
    # (docs/execd-wire.rst, wire-lines), so the backend restores the common case; the toolset splits
    # on lines, so the model cannot tell.
    assert sandbox.run("printf 'A\\n\\nB\\nC'").stdout == "A\n\nB\nC\n"


def test_stdout_and_stderr_come_back_apart_with_the_exit_code(sandbox) -> None:
    result = sandbox.run("echo out; echo err >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.timed_out


def test_each_stream_is_bounded_to_its_tail_while_it_streams(sandbox) -> None:
    result = sandbox.run("seq 1 20000; seq 1 3 >&2", max_output_bytes=1000)
    assert result.stdout_truncated and not result.stderr_truncated
    assert result.stdout.endswith("19999\n20000\n")
    assert len(result.stdout.encode()) == 1000
    assert result.stderr == "1\n2\n3\n"


def test_a_fractional_output_budget_still_bounds_the_output(sandbox) -> None:
    # Read as a whole number of bytes it must round up: rounded down to 0 it would bound nothing.
    result = sandbox.run("seq 1 20000", max_output_bytes=0.5)
    assert result.stdout_truncated
    assert len(result.stdout.encode()) == 1


def test_a_line_far_longer_than_the_budget_is_bounded_too(sandbox) -> None:
    # 16 MiB with no newline arrives as a single event (docs/execd-wire.rst, wire-lines).
    result = sandbox.run("head -c 16777216 /dev/zero | tr '\\0' a; echo END", max_output_bytes=100)
    assert result.stdout == "a" * 96 + "END\n"
    assert result.stdout_truncated and result.exit_code == 0


def test_a_deadline_is_enforced_by_execd_and_the_sandbox_survives_it(sandbox) -> None:
    sandbox.run("echo kept > /srv/before-the-deadline")
    result = sandbox.run("sleep 60", timeout=5)
    assert (result.timed_out, result.exit_code, result.sandbox_terminated) == (True, -1, False)
    assert result.stderr == "signal: killed\n"
    assert result.applied_timeout is None
    assert sandbox.run("cat /srv/before-the-deadline").stdout == "kept\n"


def test_a_signal_is_not_a_timeout(sandbox) -> None:
    result = sandbox.run("sh -c 'kill -9 $$'", timeout=30)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, False, False)
    assert "signal: killed" in result.stderr


def test_a_held_sandbox_is_renewed_so_a_command_gets_its_whole_budget(sandbox_on, plain_server):
    sandbox = sandbox_on(plain_server, sandbox_timeout=60)
    assert sandbox.run("true", timeout=3600).applied_timeout is None


def test_a_command_in_a_sandbox_nobody_here_holds_is_fitted_to_its_lifetime(
    sandbox_on, backend_on, plain_server
) -> None:
    # Another backend reaches the sandbox by handle without holding it, so the sandbox may
    # end when its current lifetime does; the command gets what is left and is told so.
    sandbox = sandbox_on(plain_server, sandbox_timeout=60)
    other = backend_on(plain_server, sandbox_timeout=60)
    result = other.run_command(sandbox.handle, "true", timeout=3600, max_output_bytes=10)
    assert result.exit_code == 0
    assert result.applied_timeout is not None and result.applied_timeout <= 60


@pytest.mark.slow
def test_a_long_quiet_command_is_kept_alive_by_execds_heartbeat(sandbox) -> None:
    # Longer than the stall window with no output at all: only heartbeats arrive meanwhile.
    result = sandbox.run("sleep 14; echo woke", timeout=60)
    assert (result.stdout, result.exit_code) == ("woke\n", 0)
    assert not result.timed_out and not result.sandbox_terminated


@pytest.mark.slow
@NEEDS_STALL_SWITCH
def test_a_silent_stream_whose_execd_still_answers_returns_the_real_exit_code(
    sandbox_on, plain_server
) -> None:
    # The stream goes silent after its first event, and execd answers no ping while it is
    # open; the command still runs to its end, and execd's status says how it ended.
    sandbox = sandbox_on(plain_server, SandboxSpec(block_network=False, env={STALL: "silent"}))
    result = sandbox.run("echo never seen; exit 3", timeout=300)
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (3, False, False)
    assert "never seen" not in result.stdout  # the stream carried no output after its init
    assert "sent nothing for 10s" in result.stderr
    assert "output written after the break may be missing" in result.stderr
    assert plain_server.has_sandbox(sandbox.handle)
    assert sandbox.run("echo still here", timeout=30).exit_code == 0


@pytest.mark.slow
def test_a_frozen_sandbox_is_noticed_by_its_silence_and_destroyed(sandbox_on, plain_server) -> None:
    # A real stall that any execd shows alike: the container is frozen mid-command.
    sandbox = sandbox_on(plain_server)
    result = run_frozen(sandbox.handle, "sleep 31", lambda: sandbox.run("sleep 31; echo late"))
    assert (result.timed_out, result.sandbox_terminated, result.exit_code) == (True, True, -1)
    assert "sent nothing for 10s" in result.stderr
    assert "late" not in result.stdout
    assert not plain_server.has_sandbox(sandbox.handle)


@pytest.mark.slow
@NEEDS_STALL_SWITCH
def test_a_stream_of_heartbeats_that_never_ends_is_abandoned_past_its_budget(
    sandbox_on, plain_server
) -> None:
    sandbox = sandbox_on(plain_server, SandboxSpec(block_network=False, env={STALL: "heartbeat"}))
    started = time.monotonic()
    result = sandbox.run("sleep 1", timeout=2)
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.sandbox_terminated) == (True, True)
    grace = _execd.MAX_STREAM_PAST_DEADLINE
    assert f"still open {grace:g}s past its 2s budget" in result.stderr
    assert elapsed < 2 + grace + 2, f"returned after {elapsed:.1f}s"
    assert not plain_server.has_sandbox(sandbox.handle)


@NEEDS_STALL_SWITCH
def test_a_stream_dead_after_its_first_frame_returns_soon_after_its_deadline(
    sandbox_on, plain_server
) -> None:
    # Past the deadline execd has killed the command, so a silent stream is dead: it is not
    # pinged (the stand-in's silent stall holds the ping), and the status says how it ended.
    sandbox = sandbox_on(plain_server, SandboxSpec(block_network=False, env={STALL: "silent"}))
    started = time.monotonic()
    result = sandbox.run("sleep 30", timeout=2)
    elapsed = time.monotonic() - started
    print(f"\n2 s deadline, stream dead after its first frame: returned after {elapsed:.2f}s")
    assert elapsed < 12, f"returned after {elapsed:.1f}s"
    assert (result.exit_code, result.timed_out, result.sandbox_terminated) == (-1, True, False)
    assert "deadline had passed" in result.stderr
    assert plain_server.has_sandbox(sandbox.handle)


def test_reconnecting_is_not_charged_to_the_command(sandbox, backend_on, plain_server, monkeypatch):
    # Reconnecting is made slower than the command's whole budget. A signal that ends the
    # command at once would read as a timeout if the clock had started before reconnecting.
    connect = SandboxSync.connect

    def slow_connect(*args, **kwargs):
        time.sleep(3)
        return connect(*args, **kwargs)

    monkeypatch.setattr(SandboxSync, "connect", slow_connect)
    fresh = backend_on(plain_server)
    result = fresh.run_command(
        sandbox.handle, "sh -c 'kill -9 $$'", timeout=2, max_output_bytes=100
    )
    assert (result.exit_code, result.timed_out) == (-1, False)


def test_another_backend_instance_reaches_the_sandbox_by_its_handle(
    sandbox, backend_on, plain_server
):
    sandbox.run("echo from the creator > /srv/shared")
    other = backend_on(plain_server)
    result = other.run_command(sandbox.handle, "cat /srv/shared", timeout=10, max_output_bytes=100)
    assert result.stdout == "from the creator\n"


def test_the_direct_route_to_execd_works_as_well_as_the_proxy(sandbox_on, plain_server) -> None:
    sandbox = sandbox_on(plain_server, use_server_proxy=False)
    assert sandbox.backend._connection_config().use_server_proxy is False
    assert sandbox.run("printf 'x\\n\\ny\\n'").stdout == "x\n\ny\n"


def test_the_task_log_tells_the_story_of_the_sandbox(backend_on, plain_server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="opensandbox_provider")
    backend: OpenSandboxBackend = backend_on(plain_server)
    handle = backend.create(spec=SandboxSpec(block_network=False))
    try:
        backend.run_command(handle, "python3 -c 'print(6 * 7)'", timeout=30, max_output_bytes=100)
    finally:
        backend.destroy(handle)
    story = [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("opensandbox_provider")
    ]
    assert story[0].startswith(f"Created OpenSandbox sandbox {handle} from image python:3.12-slim")
    assert "no network policy (egress open)" in story[0]
    assert story[1].startswith(f"Sandbox {handle} is ready: execd answered its health check after")
    assert story[2].startswith(f"Sandbox {handle}: \"python3 -c 'print(6 * 7)'\" exited 0 in")
    assert story[2].endswith("s (stdout 3 bytes; stderr 0 bytes).")
    assert story[3] == f"Destroyed sandbox {handle}."


def test_a_lifetime_shorter_than_the_server_accepts_is_refused_at_parse_time() -> None:
    with pytest.raises(ValueError, match="at least 60"):
        OpenSandboxBackend(sandbox_timeout=timedelta(seconds=30).total_seconds())
