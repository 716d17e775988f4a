"""What a command's environment and working directory are
(docs/execd-wire.rst, wire-command-request, wire-launch)."""

import pytest
from opensandbox import SandboxSync
from opensandbox.exceptions import SandboxApiException
from opensandbox.models.execd import RunCommandOpts

from tests.conformance.commands import stdout_lines


def test_request_envs_reach_the_command(sandbox: SandboxSync):
    assert stdout_lines(sandbox, 'echo "$GREETING"', envs={"GREETING": "hi there"}) == ["hi there"]


def test_sandbox_env_set_at_creation_reaches_every_command(make_sandbox):
    sandbox = make_sandbox(env={"FROM_CREATE": "yes"})

    assert stdout_lines(sandbox, 'echo "$FROM_CREATE"') == ["yes"]


def test_the_execd_envs_file_is_reread_for_every_command_and_keeps_quotes(sandbox: SandboxSync):
    sandbox.commands.set_env("PERSISTED", "kept value")
    sandbox.commands.run('echo "PLAIN=\\$HOME/x" >> "$EXECD_ENVS"')
    home = stdout_lines(sandbox, 'echo "$HOME"')[0]
    assert home.startswith("/")

    expected = ["'kept value'", f"{home}/x"]
    assert stdout_lines(sandbox, 'echo "$PERSISTED"; echo "$PLAIN"') == expected


def test_request_envs_override_the_execd_envs_file(sandbox: SandboxSync):
    sandbox.commands.run('echo "WHO=file" >> "$EXECD_ENVS"')

    assert stdout_lines(sandbox, 'echo "$WHO"', envs={"WHO": "request"}) == ["request"]


def test_cwd_runs_the_command_in_that_directory(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "pwd", working_directory="/usr/share") == ["/usr/share"]


def test_cwd_expands_variables_of_execds_environment(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "pwd", working_directory="$HOME") == ["/root"]


def test_a_missing_cwd_is_refused_with_400_before_the_command_runs(sandbox: SandboxSync):
    with pytest.raises(SandboxApiException) as refused:
        sandbox.commands.run("touch /tmp/ran", opts=RunCommandOpts(working_directory="/nowhere"))

    assert refused.value.status_code == 400
    assert "working directory does not exist: /nowhere" in str(refused.value)
    assert sandbox.files.get_file_info(["/tmp"])  # the sandbox is still answering
    with pytest.raises(SandboxApiException):
        sandbox.files.get_file_info(["/tmp/ran"])


def test_stdin_is_empty(sandbox: SandboxSync):
    assert stdout_lines(sandbox, "cat; echo end") == ["end"]


def test_commands_run_in_a_new_process_group_led_by_the_shell(sandbox: SandboxSync):
    (line,) = stdout_lines(sandbox, "echo $$ $(ps -o pgid= -p $$)")
    pid, pgid = line.split()

    assert pid == pgid
