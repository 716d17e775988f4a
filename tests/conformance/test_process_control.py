"""Timeouts, interrupts and disconnects: what happens to the command's processes
(docs/execd-wire.rst, wire-interrupt, wire-timeout, wire-disconnect)."""

import threading
import time
from datetime import timedelta

import pytest
from opensandbox import SandboxSync
from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.execd_sync import ExecutionHandlersSync

from tests.conformance.commands import (
    FINISH_BOUND_S,
    is_alive,
    stdout_lines,
    wait_until_finished,
)
from tests.conformance.wire import ExecdWire

# A bound so a broken stand-in fails the disconnect test instead of hanging it (no speed goal).
MARKER_BOUND_S = 30


def group_members(sandbox: SandboxSync, pgid: str) -> list[str]:
    """The processes still in a process group, as `ps` in the sandbox sees them."""
    return stdout_lines(sandbox, f"ps -e -o pid=,pgid=,stat= | awk '$2 == {pgid}'")


def test_timeout_kills_the_whole_process_group(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "sleep 300 & echo $! > /tmp/child; echo $$ > /tmp/leader; wait",
        opts=RunCommandOpts(timeout=timedelta(seconds=1)),
    )

    assert execution.error.traceback == ["signal: killed"]
    leader = sandbox.files.read_file("/tmp/leader").strip()
    child = sandbox.files.read_file("/tmp/child").strip()
    assert group_members(sandbox, leader) == []
    assert not is_alive(sandbox, child)


def test_timeout_sends_sigkill_with_no_sigterm_grace(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done",
        opts=RunCommandOpts(timeout=timedelta(seconds=1)),
    )

    assert [message.text for message in execution.logs.stdout] == ["ready"]
    assert execution.error.traceback == ["signal: killed"]


def test_interrupt_ends_a_foreground_command_with_signal_terminated(sandbox: SandboxSync):
    started = threading.Event()
    command_ids: list[str] = []

    def on_init(init) -> None:
        command_ids.append(init.id)
        started.set()

    def interrupt_once_started() -> None:
        if started.wait(FINISH_BOUND_S):
            sandbox.commands.interrupt(command_ids[0])

    interrupter = threading.Thread(target=interrupt_once_started)
    interrupter.start()
    execution = sandbox.commands.run("sleep 300", handlers=ExecutionHandlersSync(on_init=on_init))
    interrupter.join()

    assert execution.exit_code == -1
    assert execution.error.traceback == ["signal: terminated"]


def test_interrupt_lets_a_command_that_traps_term_exit_with_its_own_status(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "trap 'echo got-term; exit 7' TERM; while :; do sleep 0.1; done",
        opts=RunCommandOpts(background=True),
    )
    time.sleep(0.5)  # let the shell install its trap

    sandbox.commands.interrupt(execution.id)

    status = wait_until_finished(sandbox, execution.id)
    assert status.exit_code == 7
    assert status.error == "exit status 7"
    assert "got-term" in sandbox.commands.get_background_command_logs(execution.id).content


def test_interrupt_escalates_to_sigkill_and_answers_after_the_group_is_gone(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "trap '' TERM; echo $$ > /tmp/leader; sleep 300 & sleep 300",
        opts=RunCommandOpts(background=True),
    )
    time.sleep(0.5)
    leader = sandbox.files.read_file("/tmp/leader").strip()

    sandbox.commands.interrupt(execution.id)

    assert group_members(sandbox, leader) == []
    status = wait_until_finished(sandbox, execution.id)
    assert status.exit_code == -1
    assert status.error == "signal: killed"


def test_interrupting_a_finished_command_is_a_500(sandbox: SandboxSync, wire: ExecdWire):
    execution = sandbox.commands.run("true")

    response = wire.client.delete("/command", params={"id": execution.id})

    assert response.status_code == 500
    assert response.json() == {
        "code": "RUNTIME_ERROR",
        "message": "error interruptting code context. "
        f"command session {execution.id} is not running",
    }


def test_a_client_disconnect_does_not_kill_the_command(sandbox: SandboxSync, wire: ExecdWire):
    body = {"command": "sleep 2; echo finished > /tmp/marker"}
    with wire.open_command(body) as (_response, frames):
        assert next(iter(frames)).type == "init"
    # The connection is closed here, long before the command ends.

    deadline = time.monotonic() + MARKER_BOUND_S
    while time.monotonic() < deadline:
        if stdout_lines(sandbox, "cat /tmp/marker 2>/dev/null || true") == ["finished"]:
            return
        time.sleep(0.5)
    pytest.fail("The command did not finish after its client disconnected.")


def test_a_foreground_command_leaves_its_background_children_running(sandbox: SandboxSync):
    execution = sandbox.commands.run("sleep 300 & echo $!")
    (child,) = [message.text for message in execution.logs.stdout]

    assert execution.exit_code == 0
    assert is_alive(sandbox, child)


def test_a_background_command_takes_what_it_left_in_its_group_when_it_exits(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "sleep 300 & echo $! > /tmp/child", opts=RunCommandOpts(background=True)
    )
    wait_until_finished(sandbox, execution.id)
    child = sandbox.files.read_file("/tmp/child").strip()

    deadline = time.monotonic() + FINISH_BOUND_S
    while is_alive(sandbox, child):
        assert time.monotonic() < deadline, f"The background command's child {child} survived."
        time.sleep(0.2)
