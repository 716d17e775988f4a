"""The cleanup of leaked sandboxes: which task instance states keep a sandbox, which sandboxes
a run judges, and how the task reads states from the Task SDK."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException
from airflow.utils.state import TaskInstanceState

from opensandbox_provider._identity import TaskInstanceIdentity
from opensandbox_provider.hooks._sandboxes import SandboxSummary
from opensandbox_provider.maintenance import OpenSandboxCleanupOperator, cleanup_dag
from opensandbox_provider.maintenance._cleanup import kill_leaked_sandboxes
from opensandbox_provider.maintenance._states import ALIVE, ENDED, may_come_back
from opensandbox_provider.maintenance.operator import _task_states
from tests.unit.killed_through_hooks import killed_through_hooks

RUN_ID = "manual__2026-01-01T00:00:00+00:00"


@pytest.fixture(autouse=True)
def kills(monkeypatch: pytest.MonkeyPatch) -> None:
    killed_through_hooks(monkeypatch)


def test_every_airflow_task_instance_state_is_decided_one_way() -> None:
    # A state Airflow adds fails this until someone decides it; until then it keeps sandboxes.
    states = {state.value for state in TaskInstanceState}
    assert states <= ALIVE | ENDED, states - (ALIVE | ENDED)
    assert not ALIVE & ENDED


@pytest.mark.parametrize("state", sorted(ALIVE))
def test_a_task_instance_that_may_resume_keeps_its_sandbox(state: str) -> None:
    assert may_come_back(state)


def test_a_resumed_deferred_task_waiting_for_a_slot_keeps_its_sandbox() -> None:
    # A trigger's event sets the task to scheduled; a free slot then queues it.
    assert may_come_back(TaskInstanceState.SCHEDULED.value)
    assert may_come_back(TaskInstanceState.QUEUED.value)


@pytest.mark.parametrize("state", [*sorted(ENDED), None])
def test_a_task_instance_no_try_will_resume_loses_its_sandbox(state: str | None) -> None:
    assert not may_come_back(state)


def test_a_state_airflow_may_add_later_keeps_the_sandbox() -> None:
    assert may_come_back("waiting_for_a_state_not_yet_invented")


def summary(
    sandbox_id: str,
    run_id: str | None,
    *,
    state: str = "Running",
    provisioned: bool = False,
    map_index: int = -1,
    kept_until: datetime | None = None,
) -> SandboxSummary:
    identity = (
        None
        if run_id is None
        else TaskInstanceIdentity("reports", "load", run_id, map_index=map_index, try_number=1)
    )
    return SandboxSummary(
        id=sandbox_id,
        state=state,
        image="python:3.12-slim",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        expires_at=None,
        identity=identity,
        created_by_provider=True,
        provisioned=provisioned,
        deployment="this-deployment",
        kept_until=kept_until,
    )


class FakeHook:
    """The hook's listing and kill, over ``listed``; every call recorded."""

    def __init__(self, listed: list[SandboxSummary]) -> None:
        self.listed = listed
        self.listings: list[dict[str, Any]] = []
        self.killed: list[str] = []
        # Its kills come back to it through the lifecycle client made of it.
        self.connection_config = self

    def list_sandboxes(self, **query: Any) -> list[SandboxSummary]:
        self.listings.append(query)
        return list(self.listed)

    def kill_sandbox(self, sandbox_id: str) -> bool:
        self.killed.append(sandbox_id)
        return True


def test_only_the_sandboxes_of_task_instances_that_will_not_resume_are_killed() -> None:
    states = {"done": "success", "retrying": "up_for_retry", "resumed": "scheduled"}
    hook = FakeHook(
        [
            summary("sb-done", "done"),
            summary("sb-done-2", "done"),
            summary("sb-retrying", "retrying"),
            summary("sb-resumed", "resumed"),
            summary("sb-gone", "gone"),
            summary("sb-outside", None),
            summary("sb-provisioned", "done", provisioned=True),
            summary("sb-ended", "done", state="Terminated"),
        ]
    )
    asked: list[str] = []

    def state_of(identity: TaskInstanceIdentity) -> str | None:
        asked.append(identity.run_id)
        return states.get(identity.run_id)

    killed = kill_leaked_sandboxes(hook, state_of)  # type: ignore[arg-type]
    assert killed == hook.killed == ["sb-done", "sb-done-2", "sb-retrying", "sb-gone"]
    # One question per task instance, however many sandboxes its tries left.
    assert asked == ["done", "retrying", "resumed", "gone"]
    assert hook.listings == [{}]


def test_dag_ids_list_only_those_dags_sandboxes() -> None:
    hook = FakeHook([])
    kill_leaked_sandboxes(hook, lambda identity: None, dag_ids={"b", "a"})  # type: ignore[arg-type]
    assert hook.listings == [{"dag_id": "a"}, {"dag_id": "b"}]


def test_the_task_sdks_answer_is_read_for_unmapped_and_mapped_task_instances() -> None:
    questions: list[dict[str, Any]] = []

    def get_task_states(**question: Any) -> dict[str, dict[str, Any]]:
        questions.append(question)
        return {RUN_ID: {"load": TaskInstanceState.DEFERRED, "load_3": "queued"}}

    state_of = _task_states(SimpleNamespace(get_task_states=get_task_states))
    assert state_of(TaskInstanceIdentity("reports", "load", RUN_ID)) == "deferred"
    assert state_of(TaskInstanceIdentity("reports", "load", RUN_ID, map_index=3)) == "queued"
    assert state_of(TaskInstanceIdentity("reports", "load", "another run")) is None
    assert questions[1] == {
        "dag_id": "reports",
        "task_ids": ["load"],
        "run_ids": [RUN_ID],
        "map_index": 3,
    }


def test_on_airflow_2_the_cleanup_fails_saying_it_needs_airflow_3() -> None:
    # Airflow 2's task instance has no Task SDK lookup.
    with pytest.raises(AirflowException, match="run it on Airflow 3"):
        _task_states(SimpleNamespace(dag_id="maintenance"))


def test_the_cleanup_dag_has_one_task_narrowed_by_its_param() -> None:
    dag = cleanup_dag("cleanup", dag_ids=["reports"])
    (task,) = dag.tasks
    assert isinstance(task, OpenSandboxCleanupOperator)
    assert task.task_id == "kill_leaked_sandboxes"
    assert dag.params["dag_ids"] == ["reports"]
    assert dag.render_template_as_native_obj


def test_dag_ids_rendered_as_text_fail_the_task_saying_what_to_set() -> None:
    task = OpenSandboxCleanupOperator(task_id="cleanup", dag_ids="['reports']")
    with pytest.raises(AirflowException, match="render_template_as_native_obj=True"):
        task.execute({"ti": SimpleNamespace(get_task_states=None)})  # type: ignore[arg-type]


def test_a_kept_sandbox_is_left_until_its_time_is_up_then_killed() -> None:
    now = datetime.now(UTC)
    hook = FakeHook(
        [
            summary("sb-kept", "failed", kept_until=now + timedelta(minutes=30)),
            summary("sb-lapsed", "failed", kept_until=now - timedelta(seconds=1)),
        ]
    )
    assert kill_leaked_sandboxes(hook, lambda identity: "failed") == ["sb-lapsed"]
