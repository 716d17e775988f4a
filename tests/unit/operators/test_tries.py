"""The operator's sandbox as its task instance knows it: the XCom, earlier tries, on_kill."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxExecResult, SandboxSpec
from airflow.providers.common.compat.sdk import AirflowException

from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider.hooks._sandboxes import SandboxSummary
from opensandbox_provider.operators import opensandbox as operator_module
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from tests.unit.killed_through_hooks import killed_through_hooks

RUN_ID = "manual__2026-01-01T00:00:00+00:00"
DEPLOYMENT = "production"
LOG = logging.getLogger("tests.operator_tries")


# Every call the fakes saw, in order.
Calls = list


class FakeBackend:
    def __init__(self, calls: Calls, *, during_create=None) -> None:
        self.calls = calls
        self.during_create = during_create

    def create(self, *, spec: SandboxSpec | None = None) -> str:
        if self.during_create is not None:
            self.during_create()
        self.calls.append(("create",))
        return "sb-new"

    def write_file(self, sandbox: str, path: str, content: bytes) -> None:
        self.calls.append(("write_file", sandbox, path))

    def run_command(self, sandbox: str, command: str, **_: Any) -> SandboxExecResult:
        self.calls.append(("run_command", sandbox))
        return SandboxExecResult(exit_code=0, stdout="", stderr="")

    def destroy(self, sandbox: str) -> None:
        self.calls.append(("destroy", sandbox))

    def hold(self, sandbox: str) -> None:
        """The graceful stop's backend holds the sandbox while the command runs."""

    def hand_over(self, sandbox: str) -> None:
        """And hands it back when the task ends."""


class FakeHook:
    """The hook's listing and kill, on the sandboxes of ``listed``."""

    listed: list[SandboxSummary] = []

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        # Its kills come back to it through the lifecycle client made of it.
        self.connection_config = self

    def list_sandboxes(self, **query: Any) -> list[SandboxSummary]:
        self.calls.append(("list_sandboxes", query))
        return list(self.listed)

    def kill_sandbox(self, sandbox: str) -> bool:
        self.calls.append(("kill_sandbox", sandbox))
        return True


class FakeTi(SimpleNamespace):
    def xcom_push(self, *, key: str, value: Any) -> None:
        self.calls.append(("xcom_push", key, value))


def summary(
    sandbox: str, *, try_number: int, state: str = "Running", kept_until: datetime | None = None
) -> SandboxSummary:
    identity = TaskInstanceIdentity("d", "t", RUN_ID, try_number=try_number)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return SandboxSummary(
        sandbox, state, "python:3.12-slim", now, None, identity, True, False, DEPLOYMENT, kept_until
    )


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def operator(monkeypatch, calls) -> OpenSandboxOperator:
    monkeypatch.setattr(FakeHook, "listed", [])
    monkeypatch.setattr(operator_module, "OpenSandboxHook", lambda conn_id: FakeHook(calls))
    killed_through_hooks(monkeypatch)
    monkeypatch.setattr(OpenSandboxOperator, "log", property(lambda self: LOG))
    made = OpenSandboxOperator(task_id="t", command="true", files={"a.txt": "a"})
    monkeypatch.setattr(made, "new_backend", lambda: FakeBackend(calls))
    return made


def context(calls: Calls, *, try_number: int = 1) -> dict[str, Any]:
    ti = FakeTi(dag_id="d", task_id="t", run_id=RUN_ID, map_index=-1, try_number=try_number)
    ti.calls = calls
    return {"ti": ti}


def test_the_sandbox_id_is_in_xcom_before_files_go_in_or_the_command_runs(operator, calls):
    operator.execute(context(calls))
    names = [call[0] for call in calls]
    assert ("xcom_push", "sandbox_id", "sb-new") in calls
    assert names.index("create") < names.index("xcom_push") < names.index("write_file")
    assert names.index("write_file") < names.index("run_command")


def test_a_retry_kills_what_earlier_tries_left_before_its_command(operator, calls, caplog):
    FakeHook.listed = [
        summary("sb-new", try_number=2),
        summary("sb-old", try_number=1),
        summary("sb-ended", try_number=1, state="Terminated"),
    ]
    with caplog.at_level(logging.INFO, logger=LOG.name):
        operator.execute(context(calls, try_number=2))
    listing = next(call[1] for call in calls if call[0] == "list_sandboxes")
    assert listing == {"dag_id": "d", "task_id": "t", "run_id": RUN_ID, "map_index": -1}
    kills = [call[1] for call in calls if call[0] == "kill_sandbox"]
    assert kills == ["sb-old"]
    names = [call[0] for call in calls]
    assert names.index("kill_sandbox") < names.index("write_file")
    assert "Killed sandbox sb-old, left by try 1 of this task instance" in caplog.text


def test_a_retry_leaves_a_sandbox_an_earlier_try_kept_until_its_time_is_up(operator, calls):
    now = datetime.now(UTC)
    FakeHook.listed = [
        summary("sb-kept", try_number=1, kept_until=now + timedelta(minutes=30)),
        summary("sb-lapsed", try_number=1, kept_until=now - timedelta(seconds=1)),
    ]
    operator.execute(context(calls, try_number=2))
    assert [call[1] for call in calls if call[0] == "kill_sandbox"] == ["sb-lapsed"]


def test_outside_a_task_nothing_is_pushed_or_looked_for(operator, calls):
    operator.execute({})
    assert [call[0] for call in calls] == ["create", "write_file", "run_command", "destroy"]


def test_on_kill_during_create_kills_by_identity_and_destroys_the_new_sandbox(
    monkeypatch, operator, calls
):
    FakeHook.listed = [summary("sb-new", try_number=1)]
    monkeypatch.setattr(
        operator, "new_backend", lambda: FakeBackend(calls, during_create=operator.on_kill)
    )
    with pytest.raises(AirflowException, match="killed while sandbox sb-new was being created"):
        operator.execute(context(calls))
    listing = next(call[1] for call in calls if call[0] == "list_sandboxes")
    assert listing["try_number"] == 1
    assert ("kill_sandbox", "sb-new") in calls and ("destroy", "sb-new") in calls
    names = [call[0] for call in calls]
    assert "write_file" not in names and "run_command" not in names and "xcom_push" not in names


def test_on_kill_once_the_sandbox_exists_kills_it_without_the_backend(operator, calls):
    class LockedBackend(FakeBackend):
        def destroy(self, sandbox: str) -> None:
            raise AssertionError("on_kill must not reach into the backend it interrupted.")

    operator._backend = LockedBackend(calls)
    operator._hook = FakeHook(calls)
    operator._sandbox_id = "sb-running"
    operator.on_kill()
    assert calls == [("kill_sandbox", "sb-running")]


def test_on_kill_after_the_trigger_kills_the_sandbox_of_the_event(operator, calls):
    operator._sandbox_id = "sb-deferred"  # as execute_complete sets it, with no client made
    operator.on_kill()
    assert calls == [("kill_sandbox", "sb-deferred")]


def test_on_kill_before_anything_was_created_only_marks_the_task_killed(operator, calls):
    operator.on_kill()
    assert calls == [] and operator._killed
