"""How a task's command is stopped (SIGTERM, a grace, SIGKILL) and what becomes of its sandbox
when the task ends (on_finish_action), against the real server and execd: a command past its
command_timeout, a killed task, a task past its execution_timeout, and a kept sandbox through
a retry and the maintenance cleanup."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred
from airflow.sdk.exceptions import AirflowTaskTimeout
from airflow.sdk.execution_time.timeout import timeout
from opensandbox.sync.manager import SandboxManagerSync

from opensandbox_provider._kept import KEY as KEPT_KEY
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.maintenance._cleanup import kill_leaked_sandboxes
from opensandbox_provider.operators._finish_action import KEPT_SANDBOX_XCOM
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import OpenSandboxBackend
from opensandbox_provider.sandbox._lifecycle import Lifecycle
from tests.integration import test_operator as operator_tests
from tests.integration.conftest import CONN_ID
from tests.integration.test_operator import (
    STDOUT,
    Lines,
    destroyed,
    executing,
    rebuilt,
    run_trigger,
)
from tests.integration.test_task_identity import inside, task_instance

# test_operator.py's fixtures, by the same names: operators whose sandboxes never outlive a
# test, and the task log they write to.
operator_on = operator_tests.operator_on
lines = operator_tests.lines
task_log = operator_tests.task_log

# A command that, on SIGTERM, says so on stdout and in a file, then exits: what a command
# that flushes or commits on its way out does. The sleep runs in the background so that the
# shell, waiting for it, runs its handler at once.
TRAPS_TERM = (
    "trap 'echo handler ran; echo handler ran >/tmp/marker; exit 0' TERM; "
    "echo started; sleep 300 & wait"
)
MARKER = "/tmp/marker"


def marker_in(sandbox: str) -> bytes:
    return OpenSandboxBackend(CONN_ID).read_file(sandbox, MARKER, max_bytes=100)


@pytest.fixture
def kept(plain_server, monkeypatch) -> Iterator[list[str]]:
    """Sandboxes a test kept on purpose, destroyed when it ends."""
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    made: list[str] = []
    yield made
    hook = OpenSandboxHook(CONN_ID)
    for sandbox in made:
        hook.kill_sandbox(sandbox)


def alive(sandbox: str) -> bool:
    # Read, not renewed: a renewal would move the kept sandbox's expiry.
    listed = OpenSandboxHook(CONN_ID).list_sandboxes()
    return any(s.id == sandbox and s.state != "Terminated" for s in listed)


def wait_for(lines: Lines, text: str) -> None:
    deadline = time.monotonic() + 60
    while text not in lines.messages:
        assert time.monotonic() < deadline, f"the task log never said {text!r}"
        time.sleep(0.05)


# ---------------------------------------------------------------------------
# Stopping a command
# ---------------------------------------------------------------------------


def test_a_command_past_its_timeout_gets_sigterm_and_its_handler_runs(
    operator_on, plain_server, lines
):
    operator = operator_on(
        plain_server, command=TRAPS_TERM, command_timeout=3, termination_grace_period=20
    )
    began = time.monotonic()
    with pytest.raises(AirflowException, match=r"ran out of its 3s .* stopped by SIGTERM after"):
        operator.execute({})
    # Stopped by the handler's exit, well inside the grace.
    assert time.monotonic() - began < 3 + 20
    assert STDOUT + "handler ran" in lines.messages
    assert destroyed(operator._sandbox_id)


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(operator_on, plain_server, lines):
    operator = operator_on(
        plain_server,
        command="trap '' TERM; echo started; sleep 300",
        command_timeout=2,
        termination_grace_period=2,
    )
    with pytest.raises(AirflowException, match=r"killed after the grace of 2s"):
        operator.execute({})
    assert any("killed after the grace of 2s" in message for message in lines.messages)
    assert destroyed(operator._sandbox_id)


def test_a_deferred_command_past_its_timeout_gets_sigterm_from_the_trigger(
    operator_on, plain_server, lines
):
    operator = operator_on(
        plain_server,
        deferrable=True,
        poll_interval=0.2,
        command=TRAPS_TERM,
        command_timeout=3,
        termination_grace_period=20,
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    event = run_trigger(rebuilt(deferral.value.trigger))
    assert event["stopped"].startswith("stopped by SIGTERM after ")
    # The handler's line, logged by the trigger as it read the command's output.
    assert STDOUT + "handler ran" in lines.messages
    with pytest.raises(AirflowException, match=r"ran out of its 3s .* stopped by SIGTERM after"):
        OpenSandboxOperator.execute_complete(operator, {}, event)
    assert destroyed(operator._sandbox_id)


def test_killing_the_task_gives_the_command_its_grace_before_the_sandbox_goes(
    operator_on, plain_server, lines, monkeypatch
):
    operator = operator_on(plain_server, command=TRAPS_TERM, termination_grace_period=20)
    worker, ended = executing(operator)
    wait_for(lines, STDOUT + "started")
    # What the sandbox holds the moment it is destroyed, by on_kill or by the task's own end
    # (here on another thread, so either may come first): the handler's file.
    seen: list[bytes] = []
    first = threading.Lock()
    hook = operator._hook
    assert hook is not None

    def reading_first(destroy: Callable[..., Any]) -> Callable[..., Any]:
        def destroying(*arguments: Any) -> Any:
            with first:
                if not seen:
                    seen.append(marker_in(arguments[-1]))
            return destroy(*arguments)

        return destroying

    # on_kill kills by the sandbox's handle, through the one way every kill goes.
    monkeypatch.setattr(Lifecycle, "kill", reading_first(Lifecycle.kill))
    operator._destroy = reading_first(operator._destroy)  # type: ignore[method-assign]
    operator.on_kill()
    worker.join(60)
    assert not worker.is_alive() and ended, "the task went on as if it had not been killed"
    assert seen == [b"handler ran\n"]
    assert any("was stopped by SIGTERM after" in message for message in lines.messages)
    assert destroyed(operator._sandbox_id)


def test_execution_timeout_stops_the_command_gracefully_and_keep_pod_keeps_its_sandbox(
    operator_on, plain_server, lines, kept
):
    # As Airflow's task runner runs a task with an execution_timeout: SIGALRM interrupts it.
    operator = operator_on(
        plain_server, command=TRAPS_TERM, termination_grace_period=20, on_finish_action="keep_pod"
    )
    # The runner's timeout, its alarm rung early, once the command has started, rather than
    # after a time long enough for a sandbox to be created on a busy machine.
    main = threading.main_thread().ident
    assert main is not None

    def ring() -> None:
        wait_for(lines, STDOUT + "started")
        signal.pthread_kill(main, signal.SIGALRM)

    alarm = threading.Thread(target=ring)
    with pytest.raises(AirflowTaskTimeout), timeout(120):
        alarm.start()
        operator.execute({})
    alarm.join()
    sandbox = operator._sandbox_id
    assert sandbox is not None
    kept.append(sandbox)
    # Then the runner calls on_kill, which leaves what the task kept.
    operator.on_kill()
    assert marker_in(sandbox) == b"handler ran\n"
    assert any("was stopped by SIGTERM after" in message for message in lines.messages)


# ---------------------------------------------------------------------------
# Keeping a sandbox after the task
# ---------------------------------------------------------------------------


def metadata_of(sandbox: str) -> tuple[dict[str, str], datetime]:
    manager = SandboxManagerSync.create(OpenSandboxHook(CONN_ID).connection_config)
    try:
        info = manager.get_sandbox_info(sandbox)
        return dict(info.metadata or {}), info.expires_at
    finally:
        manager.close()


def test_a_failed_task_keeps_its_sandbox_until_its_time_through_a_retry_and_the_cleanup(
    operator_on, plain_server, lines, kept
):
    hook = OpenSandboxHook(CONN_ID)
    first = task_instance("finish_dag", "keeps", try_number=1)
    operator = operator_on(
        plain_server,
        command="echo evidence >/tmp/evidence; exit 3",
        on_finish_action="delete_succeeded_pod",
        keep_for=timedelta(minutes=10),
    )
    with inside(first) as context, pytest.raises(AirflowException, match="exited 3"):
        operator.execute(context)
    sandbox = operator._sandbox_id
    assert sandbox is not None
    kept.append(sandbox)
    # Marked, and leased to the end of keep_for, which the XCom and the task log say.
    metadata, expires_at = metadata_of(sandbox)
    until = datetime.fromtimestamp(int(metadata[KEPT_KEY]), tz=UTC)
    assert abs((until - datetime.now(UTC)) - timedelta(minutes=10)) < timedelta(minutes=1)
    assert abs(expires_at - until) < timedelta(seconds=5)
    (described,) = [value for key, value in first.pushed if key == KEPT_SANDBOX_XCOM]
    assert described["sandbox_id"] == sandbox
    assert f"OpenSandboxBackend('{CONN_ID}').run_command('{sandbox}'" in described["reach"]
    assert any(f"Kept sandbox {sandbox} until" in message for message in lines.messages)
    assert OpenSandboxBackend(CONN_ID).read_file(sandbox, "/tmp/evidence", max_bytes=99) == (
        b"evidence\n"
    )

    # The cleanup, which kills the sandboxes of a failed task, leaves it.
    assert sandbox not in kill_leaked_sandboxes(hook, lambda identity: "failed")

    # A retry runs in a sandbox of its own and leaves the kept one, whose command is over.
    retry = operator_on(
        plain_server,
        command="echo retried",
        on_finish_action="delete_succeeded_pod",
        keep_for=timedelta(minutes=10),
    )
    with inside(task_instance("finish_dag", "keeps", try_number=2)) as context:
        assert retry.execute(context)["stdout"] == "retried\n"
    assert retry._sandbox_id != sandbox and destroyed(retry._sandbox_id)
    assert alive(sandbox)

    # Once its time is up (moved to the past here), the cleanup removes it.
    manager = SandboxManagerSync.create(hook.connection_config)
    try:
        manager.patch_sandbox_metadata(sandbox, {KEPT_KEY: str(int(time.time()) - 1)})
    finally:
        manager.close()
    assert sandbox in kill_leaked_sandboxes(hook, lambda identity: "failed")


def test_a_deferred_task_that_fails_keeps_its_sandbox_too(operator_on, plain_server, kept):
    operator = operator_on(
        plain_server,
        deferrable=True,
        poll_interval=0.2,
        command="exit 4",
        on_finish_action="delete_succeeded_pod",
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})
    event = run_trigger(rebuilt(deferral.value.trigger))
    with pytest.raises(AirflowException, match="exited 4"):
        OpenSandboxOperator.execute_complete(operator, {}, event)
    sandbox = operator._sandbox_id
    assert sandbox is not None
    kept.append(sandbox)
    metadata, _ = metadata_of(sandbox)
    assert KEPT_KEY in metadata and alive(sandbox)
