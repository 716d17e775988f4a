"""
What becomes of the sandbox when Airflow 3.3's triggerer cancels the trigger, driven through the
triggerer's own code: its user-action cancel, which a task ended by a user and a trigger handed
to another triggerer both take; its shutdown; and a trigger's timeout.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from opensandbox_provider.triggers.opensandbox import OpenSandboxCommandTrigger
from tests.unit.triggers.test_opensandbox import Server, trigger

triggerer = pytest.importorskip("airflow.jobs.triggerer_job_runner")
if not hasattr(triggerer, "_USER_ACTION_CANCEL_MSG"):
    pytest.skip("Only Airflow 3.3 calls a trigger's on_kill.", allow_module_level=True)

TASK = {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": 1}


class TaskStates:
    """The task states Airflow's API answers the trigger with, and what it was asked."""

    def __init__(self, states: dict[str, Any]) -> None:
        self.states = states
        self.asked: list[dict[str, Any]] = []

    def __call__(self, **query: Any) -> dict[str, Any]:
        self.asked.append(query)
        return self.states


def cancelled(
    monkeypatch: pytest.MonkeyPatch,
    states: TaskStates,
    *,
    map_index: int = -1,
    how: str = "user-action",
    timeout_after: datetime | None = None,
) -> Server:
    """Start the trigger in a TriggerRunner, cancel it ``how`` the triggerer does, and return
    the server it ran against."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    monkeypatch.setenv("AIRFLOW_DISABLE_GREENBACK_PORTAL", "true")
    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(states))
    server = Server()
    made = trigger()
    made._lifecycle = lambda: server  # type: ignore[method-assign, assignment, return-value]
    made.task_instance = SimpleNamespace(**TASK, map_index=map_index, id="ti", context_carrier=None)

    async def waiting_forever(lifecycle: Any, connect: Any) -> Any:
        await asyncio.Event().wait()

    made._wait = waiting_forever  # type: ignore[method-assign]

    async def go() -> None:
        runner = triggerer.TriggerRunner()
        task = asyncio.create_task(runner.run_trigger(1, made, timeout_after))
        runner.triggers[1] = {"task": task, "name": "t", "events": 0, "is_watcher": False}
        await asyncio.sleep(0.05)
        if how == "user-action":
            runner.to_cancel.append(1)
            await runner.cancel_triggers()
        else:
            task.cancel()
        with suppress(asyncio.CancelledError):
            await task

    asyncio.run(go())
    return server


@pytest.fixture(autouse=True)
def plain_logger(monkeypatch):
    monkeypatch.setattr(OpenSandboxCommandTrigger, "log", logging.getLogger("trigger"))


@pytest.mark.parametrize("state", ["failed", "success", None, "up_for_retry"])
def test_a_task_ended_while_it_waits_has_its_sandbox_destroyed(monkeypatch, state) -> None:
    states = TaskStates({"r": {"t": state}})
    server = cancelled(monkeypatch, states)
    assert server.destroyed == ["sbx"]
    assert states.asked == [{"dag_id": "d", "task_ids": ["t"], "run_ids": ["r"], "map_index": -1}]


@pytest.mark.parametrize("state", ["deferred", "scheduled", "queued", "running"])
def test_a_trigger_handed_to_another_triggerer_leaves_the_sandbox_running(
    monkeypatch, state
) -> None:
    server = cancelled(monkeypatch, TaskStates({"r": {"t": state}}))
    assert server.destroyed == []
    # The trigger let go of its own connections to the server, and only those.
    assert "closed" in server.calls


def test_a_mapped_task_is_looked_up_by_its_map_index(monkeypatch) -> None:
    states = TaskStates({"r": {"t_3": "deferred", "t_4": "failed"}})
    server = cancelled(monkeypatch, states, map_index=3)
    assert server.destroyed == []
    assert states.asked[0]["map_index"] == 3


def test_a_task_state_that_cannot_be_read_counts_as_a_kill(monkeypatch) -> None:
    def unreachable(**query: Any) -> dict[str, Any]:
        raise ConnectionError("api-server down")

    server = cancelled(monkeypatch, unreachable)  # type: ignore[arg-type]
    assert server.destroyed == ["sbx"]


def test_a_triggerer_shutting_down_leaves_the_sandbox_running(monkeypatch) -> None:
    states = TaskStates({"r": {"t": "failed"}})
    server = cancelled(monkeypatch, states, how="shutdown")
    assert (server.destroyed, states.asked) == ([], [])


def test_a_trigger_past_airflows_timeout_is_not_killed_so_the_sandbox_ends_with_its_lease(
    monkeypatch,
) -> None:
    states = TaskStates({"r": {"t": "failed"}})
    past = datetime.now(UTC) - timedelta(seconds=1)
    server = cancelled(monkeypatch, states, timeout_after=past)
    assert (server.destroyed, states.asked) == ([], [])
