"""How a foreground command's end is reported (docs/execd-wire.rst, wire-exit, wire-timeout)."""

from datetime import timedelta

from opensandbox import SandboxSync
from opensandbox.models.execd import RunCommandOpts


def test_exit_zero_ends_with_execution_complete_and_no_error(sandbox: SandboxSync):
    execution = sandbox.commands.run("true")

    assert execution.exit_code == 0
    assert execution.error is None
    assert execution.complete is not None


def test_exit_status_is_the_error_evalue_and_traceback(sandbox: SandboxSync):
    execution = sandbox.commands.run("echo before; exit 3")

    assert execution.exit_code == 3
    assert execution.complete is None
    assert execution.error.name == "CommandExecError"
    assert execution.error.value == "3"
    assert execution.error.traceback == ["exit status 3"]
    assert [message.text for message in execution.logs.stdout] == ["before"]


def test_a_signal_is_reported_as_minus_one_and_signal_killed(sandbox: SandboxSync):
    execution = sandbox.commands.run("kill -9 $$")

    assert execution.exit_code == -1
    assert execution.error.value == "-1"
    assert execution.error.traceback == ["signal: killed"]


def test_a_signal_other_than_kill_is_named_as_go_names_it(sandbox: SandboxSync):
    execution = sandbox.commands.run("kill -TERM $$")

    assert execution.exit_code == -1
    assert execution.error.traceback == ["signal: terminated"]


def test_a_timeout_is_reported_as_minus_one_and_signal_killed(sandbox: SandboxSync):
    execution = sandbox.commands.run(
        "echo started; sleep 30", opts=RunCommandOpts(timeout=timedelta(seconds=1))
    )

    assert execution.exit_code == -1
    assert execution.error.value == "-1"
    assert execution.error.traceback == ["signal: killed"]
    assert [message.text for message in execution.logs.stdout] == ["started"]
