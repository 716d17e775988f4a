"""Background commands: their stream, their logs and their status
(docs/execd-wire.rst, wire-background, wire-status, wire-logs)."""

import time
from datetime import timedelta

from opensandbox import SandboxSync
from opensandbox.models.execd import RunCommandOpts

from tests.conformance.commands import wait_until_finished
from tests.conformance.wire import ExecdWire


def test_background_stream_is_init_then_execution_complete_with_no_output(wire: ExecdWire):
    stream = wire.run({"command": "echo out; echo err >&2; sleep 1", "background": True})

    assert [kind for kind in stream.types if kind != "ping"] == ["init", "execution_complete"]


def test_background_output_is_read_through_logs_with_byte_cursors(
    sandbox: SandboxSync, wire: ExecdWire
):
    execution = sandbox.commands.run(
        "printf 'é1\\n'; printf 'e2\\n' >&2; printf 'x3\\n'", opts=RunCommandOpts(background=True)
    )
    wait_until_finished(sandbox, execution.id)

    whole = wire.get(f"/command/{execution.id}/logs")
    assert whole.status_code == 200
    assert whole.headers["content-type"] == "text/plain; charset=utf-8"
    assert whole.content == "é1\ne2\nx3\n".encode()
    assert whole.headers["EXECD-COMMANDS-TAIL-CURSOR"] == str(len(whole.content))

    rest = wire.get(f"/command/{execution.id}/logs", params={"cursor": 4})  # past "é1\n" (4 bytes)
    assert rest.content == b"e2\nx3\n"
    assert rest.headers["EXECD-COMMANDS-TAIL-CURSOR"] == str(len(whole.content))


def test_the_sdk_follows_background_logs_with_the_tail_cursor(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "echo first; sleep 1; echo second", opts=RunCommandOpts(background=True)
    )
    time.sleep(0.5)
    early = sandbox.commands.get_background_command_logs(execution.id)
    wait_until_finished(sandbox, execution.id)
    late = sandbox.commands.get_background_command_logs(execution.id, cursor=early.cursor)

    assert early.content == "first\n"
    assert late.content == "second\n"
    assert late.cursor == len("first\nsecond\n")


def test_background_status_exposes_exit_code_and_error(sandbox: SandboxSync):
    failed = sandbox.commands.run("exit 3", opts=RunCommandOpts(background=True))
    killed = sandbox.commands.run("kill -9 $$", opts=RunCommandOpts(background=True))

    failed_status = wait_until_finished(sandbox, failed.id)
    killed_status = wait_until_finished(sandbox, killed.id)

    assert (failed_status.exit_code, failed_status.error) == (3, "exit status 3")
    assert (killed_status.exit_code, killed_status.error) == (-1, "signal: killed")
    assert failed_status.content == "exit 3"
    assert failed_status.finished_at >= failed_status.started_at


def test_a_running_background_command_reports_running_without_exit_code(sandbox: SandboxSync):
    execution = sandbox.commands.run("sleep 30", opts=RunCommandOpts(background=True))

    status = sandbox.commands.get_command_status(execution.id)
    sandbox.commands.interrupt(execution.id)

    assert status.running is True
    assert status.exit_code is None
    assert status.finished_at is None


def test_a_background_timeout_kills_it_and_status_says_signal_killed(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "sleep 30", opts=RunCommandOpts(background=True, timeout=timedelta(seconds=1))
    )

    status = wait_until_finished(sandbox, execution.id)
    assert (status.exit_code, status.error) == (-1, "signal: killed")


def test_status_and_logs_of_an_unknown_command_are_errors(wire: ExecdWire):
    unknown = "0" * 32

    status = wire.get(f"/command/status/{unknown}")
    logs = wire.get(f"/command/{unknown}/logs")

    assert status.status_code == 404
    assert status.json() == {
        "code": "INVALID_REQUEST_BODY",
        "message": f"command not found: {unknown}",
    }
    assert logs.status_code == 400
    assert logs.json() == {
        "code": "INVALID_REQUEST_BODY",
        "message": f"command not found: {unknown}",
    }


def test_logs_of_a_foreground_command_are_refused(sandbox: SandboxSync, wire: ExecdWire):
    execution = sandbox.commands.run("true")

    logs = wire.get(f"/command/{execution.id}/logs")

    assert logs.status_code == 400
    assert logs.json()["message"] == f"command {execution.id} is not running in background"
