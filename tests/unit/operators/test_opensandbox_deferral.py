"""OpenSandboxOperator's deferral, against a backend that records what it is asked: how it
defers, and what it does with each event the trigger can fire."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowTaskTimeout, TaskDeferred

from opensandbox_provider.operators import opensandbox as operator_module
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator


class Backend:
    """Records every call; the sandbox is ``sbx``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def create(self, *, spec: Any) -> str:
        self.calls.append(("create", None))
        return "sbx"

    def write_file(self, sandbox: str, path: str, content: bytes) -> None:
        self.calls.append(("write_file", (path, content)))

    def start_command(self, sandbox: str, command: str, *, timeout: float) -> str:
        self.calls.append(("start_command", command))
        return "c"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.calls.append((name, args))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def backend(monkeypatch, default_connection) -> Backend:
    # Earlier tries' sandboxes are test_tries.py's: this server has none.
    monkeypatch.setattr(operator_module, "kill_other_tries", lambda *args, **kwargs: [])
    made = Backend()
    monkeypatch.setattr(OpenSandboxOperator, "new_backend", lambda self: made)
    return made


def operator(**arguments: Any) -> OpenSandboxOperator:
    return OpenSandboxOperator(task_id="t", command="make it", deferrable=True, **arguments)


def deferral(made: OpenSandboxOperator, context: dict[str, Any]) -> TaskDeferred:
    with pytest.raises(TaskDeferred) as deferred:
        made.execute(context)  # type: ignore[arg-type]
    return deferred.value


def test_the_command_is_started_with_its_streams_apart_and_handed_to_the_trigger(backend) -> None:
    deferred = deferral(operator(), {})
    trigger = deferred.trigger
    paths = trigger.output_paths
    assert [name for name in backend.names() if name != "hand_over"] == [
        "create",
        "write_file",
        "write_file",
        "start_command",
    ]
    # Both files exist before the command starts, so the first read finds them.
    assert [call for name, call in backend.calls if name == "write_file"] == [
        (paths["stdout"], b""),
        (paths["stderr"], b""),
    ]
    started = next(command for name, command in backend.calls if name == "start_command")
    assert started.endswith("\nmake it") and paths["stdout"] in started
    assert backend.names()[-1] == "hand_over" and "destroy" not in backend.names()
    assert (deferred.method_name, deferred.timeout, trigger.task_deadline_at) == (
        "execute_complete",
        None,
        None,
    )


def test_the_trigger_is_given_the_private_values_to_mask_and_nothing_of_env(backend) -> None:
    made = operator(env={"PLAIN": "shown-value"}, private_env={"TOKEN": "hidden-value"})
    assert deferral(made, {}).trigger.secrets == ["hidden-value"]


def test_a_deferral_carries_what_is_left_of_the_execution_timeout(backend) -> None:
    started = datetime.now(UTC) - timedelta(seconds=100)
    made = operator(execution_timeout=timedelta(seconds=500))
    ti = SimpleNamespace(
        start_date=started,
        dag_id="d",
        task_id="t",
        run_id="r",
        map_index=-1,
        try_number=1,
        xcom_push=lambda **kwargs: None,
    )
    deferred = deferral(made, {"ti": ti})
    assert deferred.timeout.total_seconds() == pytest.approx(400, abs=5)
    # The trigger ends first, so that the worker, not the scheduler, fails the task.
    assert deferred.trigger.task_deadline_at == pytest.approx(time.time() + 390, abs=5)


def test_a_deferral_without_a_start_date_counts_the_whole_execution_timeout(backend) -> None:
    deferred = deferral(operator(execution_timeout=timedelta(seconds=40)), {})
    assert deferred.timeout == timedelta(seconds=40)
    assert deferred.trigger.task_deadline_at == pytest.approx(time.time() + 30, abs=5)


def ended(**changes: Any) -> dict[str, Any]:
    event = {
        "status": "ended",
        "sandbox": "sbx",
        "exit_code": 0,
        "stdout": "out\n",
        "stderr": "err\n",
        "timed_out": False,
    }
    return event | changes


def test_an_ended_command_is_judged_with_the_sandbox_held_until_it_is_destroyed(
    backend,
) -> None:
    made = operator(outputs={"/o": "file:///tmp/nowhere"})
    copied: list[str] = []
    copy_outputs = "opensandbox_provider.operators.opensandbox.copy_outputs"
    with pytest.MonkeyPatch.context() as patch:

        def copy(*args: Any, **kwargs: Any) -> dict[str, int]:
            copied.append(backend.names()[-1])
            return {}

        patch.setattr(copy_outputs, copy)
        result = made.execute_complete({}, ended())  # type: ignore[arg-type]
    assert result == {"exit_code": 0, "stdout": "out\n"}
    assert backend.names() == ["hold", "destroy"]
    # The outputs were copied while the sandbox was held: after the hold, before the destroy.
    assert copied == ["hold"]


def test_a_failed_command_quotes_its_stderr(backend) -> None:
    with pytest.raises(AirflowException, match="exited 2.*its stderr:\nerr"):
        operator().execute_complete({}, ended(exit_code=2))  # type: ignore[arg-type]
    assert backend.names()[-1] == "destroy"


def test_a_timeout_event_fails_the_task_as_timed_out_and_destroys_the_sandbox(backend) -> None:
    event = {"status": "timeout", "sandbox": "sbx", "message": "out of execution_timeout"}
    with pytest.raises(AirflowTaskTimeout, match="out of execution_timeout"):
        operator().execute_complete({}, event)  # type: ignore[arg-type]
    assert backend.names() == ["destroy"]


def test_an_error_event_fails_the_task_and_destroys_the_sandbox(backend) -> None:
    event = {"status": "error", "sandbox": "sbx", "message": "execd lost the command"}
    with pytest.raises(AirflowException, match="execd lost the command"):
        operator().execute_complete({}, event)  # type: ignore[arg-type]
    assert backend.names() == ["destroy"]
