"""
A durable agent's sandbox without a server: what common-ai's journal tells a backend while a
tool call provisions, the leases a parked sandbox gets, and what Airflow's listeners say when a
try ends. The sandbox itself, parked and adopted on the real server, is in
tests/integration/test_durable_parking.py and tests/airflow_path/test_durable_agent.py.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

# A try's end reaches the parking through the Task SDK's listener manager, which these tests
# drive; Airflow 2 (no Task SDK) calls the core's manager instead, which nothing here drives.
pytest.importorskip("airflow.sdk", reason="the tests drive Airflow 3's Task SDK")

from airflow.providers.common.ai.durable import AirflowDurability  # noqa: E402
from airflow.providers.common.ai.durable.base import build_step_key  # noqa: E402
from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope  # noqa: E402
from airflow.providers.common.ai.sandbox.base import SandboxBackend, SandboxExecResult, SandboxSpec  # noqa: E402
from airflow.providers.common.ai.toolsets.sandbox import SandboxToolset  # noqa: E402
from airflow.sdk.execution_time.context import set_current_context  # noqa: E402
from airflow.sdk.execution_time.task_runner import get_listener_manager  # noqa: E402
from pydantic_ai import Agent  # noqa: E402

from opensandbox_provider._identity import TaskInstanceIdentity  # noqa: E402
from opensandbox_provider._kept import PARKED_KEY  # noqa: E402
from opensandbox_provider.sandbox import OpenSandboxBackend, _parking  # noqa: E402
from opensandbox_provider.sandbox._lease import RENEWALS_PER_LEASE  # noqa: E402
from opensandbox_provider.sandbox._try_end import TRY_ENDS  # noqa: E402
from tests.scripted_model import scripted_model  # noqa: E402

OPEN = SandboxSpec(block_network=False)


class MemoryStorage:
    """common-ai's journal storage, in a dict."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def save_step(self, key: str, entry: dict[str, Any]) -> bool:
        self.entries[key] = entry
        return True

    def load_step(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def delete_steps(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.entries.pop(key, None)


def retry_settings(**settings: Any) -> SimpleNamespace:
    defaults = {"retry_delay": timedelta(seconds=300), "retry_exponential_backoff": 0}
    return SimpleNamespace(**{**defaults, "max_retry_delay": None, **settings})


def task_instance(try_number: int = 1, **task: Any) -> SimpleNamespace:
    return SimpleNamespace(
        dag_id="durable",
        task_id="agent",
        run_id="manual__2026-01-01T00:00:00+00:00",
        map_index=-1,
        try_number=try_number,
        max_tries=1,
        task=retry_settings(**task),
    )


@contextmanager
def inside(ti: SimpleNamespace) -> Iterator[None]:
    """Run as Airflow's task runner does: the task's context is the current one."""
    with set_current_context({"ti": ti, "task_instance": ti}):  # type: ignore[arg-type]
        yield


class RecordingBackend(SandboxBackend):
    """A backend that records the slot each creation serves, and answers every command."""

    name = "recording"

    def __init__(self) -> None:
        self.slots: list[_parking.DurableSlot | None] = []

    def create(self, *, spec: SandboxSpec | None = None) -> str:
        self.slots.append(_parking.durable_slot(spec, margin=60.0))
        return f"sandbox-{len(self.slots)}"

    def run_command(self, sandbox: str, command: str, **_: Any) -> SandboxExecResult:
        return SandboxExecResult(exit_code=0, stdout="ok", stderr="")

    def destroy(self, sandbox: str) -> None:
        pass


def run_agent(backend: SandboxBackend, storage: MemoryStorage, *, durable: bool = True) -> None:
    model = scripted_model([("run_command", {"command": "true"})], lambda returns: "done")
    agent = Agent(
        model,
        name="notes",
        toolsets=[SandboxToolset(backend, spec=OPEN)],
        capabilities=[AirflowDurability()] if durable else [],
    )
    with journal_scope(DurableJournal(storage)):
        asyncio.run(agent.run("go"))


def test_a_sandbox_provisioned_for_a_durable_tool_call_learns_its_run_and_toolset() -> None:
    # What parking stands on, from common-ai's journal: the step running the tool call is
    # visible where the toolset provisions (its own thread), named for the agent, the toolset
    # and the tool, and placed in its run.
    backend, storage = RecordingBackend(), MemoryStorage()
    with inside(task_instance(try_number=2)):
        run_agent(backend, storage)
    [slot] = backend.slots
    assert slot is not None
    assert slot.calls == "notes__airflow_toolset__sandbox-recording.call_tool"
    assert slot.attempt == TaskInstanceIdentity.of(task_instance(try_number=2))
    assert slot.run.key == "0"
    assert slot.position > 0
    # The journal's entries before it are this run's, under the keys common-ai builds.
    assert storage.load_step(build_step_key(slot.run.key, 0)) is not None
    assert slot.metadata() == {PARKED_KEY: slot.label}


def test_outside_a_durable_step_or_a_task_there_is_no_slot() -> None:
    storage = MemoryStorage()
    plain = RecordingBackend()
    with inside(task_instance()):
        run_agent(plain, storage, durable=False)
    outside = RecordingBackend()
    run_agent(outside, storage)
    assert plain.slots == [None]
    assert outside.slots == [None]


def slot(*, entries: dict[int, str] | None = None, position: int = 3, **fields: Any):
    storage = MemoryStorage()
    for at, name in (entries or {}).items():
        storage.save_step(build_step_key("0", at), {"name": name, "payload": None})
    run = SimpleNamespace(key="0", journal=SimpleNamespace(storage=storage))
    values = {
        "attempt": TaskInstanceIdentity.of(task_instance(try_number=2)),
        "calls": "notes__airflow_toolset__sandbox-opensandbox.call_tool",
        "label": "label",
        "run": run,
        "position": position,
        "park_lease": 960.0,
    }
    return _parking.DurableSlot(**{**values, **fields})


def test_a_slot_replays_calls_only_when_the_journal_holds_one_of_its_toolsets_before_it() -> None:
    ours = "notes__airflow_toolset__sandbox-opensandbox.call_tool:write_file"
    other = "notes__airflow_toolset__sandbox-opensandbox-scratch.call_tool:write_file"
    assert slot(entries={0: "notes__model_request", 1: ours}).replays_calls()
    assert not slot(entries={0: "notes__model_request", 1: other}).replays_calls()
    # At or after the step asking, an entry is not from before it.
    assert not slot(entries={3: ours, 4: ours}, position=3).replays_calls()


def test_a_sandbox_held_by_a_durable_try_outlives_a_lost_worker_until_the_retry() -> None:
    parked = slot(park_lease=1000.0)
    # The longest a lost worker leaves it unrenewed is a third of its hold lease, so what is
    # left then still covers the retry delay and the margin.
    for sandbox_timeout in (60.0, 3600.0):
        hold = parked.hold_lease(sandbox_timeout)
        assert hold >= sandbox_timeout
        assert hold * (RENEWALS_PER_LEASE - 1) / RENEWALS_PER_LEASE >= parked.park_lease


@pytest.mark.parametrize(
    ("settings", "try_number", "bound"),
    [
        ({"retry_delay": timedelta(seconds=300)}, 1, 300),
        ({"retry_delay": 45.0}, 1, 45),
        # Airflow 3's multiplier: at most twice the backed-off delay.
        ({"retry_delay": timedelta(seconds=10), "retry_exponential_backoff": 3.0}, 3, 180),
        # Airflow 2's flag doubles.
        ({"retry_delay": timedelta(seconds=10), "retry_exponential_backoff": True}, 2, 40),
        (
            {
                "retry_delay": timedelta(seconds=10),
                "retry_exponential_backoff": 2.0,
                "max_retry_delay": timedelta(seconds=60),
            },
            5,
            60,
        ),
        # Capped, as Airflow caps every delay, at [core] max_task_retry_delay.
        ({"retry_delay": timedelta(days=3)}, 1, 24 * 60 * 60),
    ],
)
def test_the_retry_delay_a_parked_sandbox_waits_for_is_airflows_longest(
    settings: dict[str, Any], try_number: int, bound: float
) -> None:
    assert _parking.retry_delay_bound(retry_settings(**settings), try_number) == bound


def test_the_gone_error_says_why_and_what_to_do() -> None:
    message = str(slot().gone(900.0))
    assert "Try 2 of task 'agent'" in message
    assert "no sandbox is parked for them any more" in message
    assert "/dagRuns/manual__2026-01-01T00:00:00+00:00/taskInstances/agent/state-store" in message
    assert "raise the backend's park_margin" in message


def end(ti: SimpleNamespace, state: str) -> None:
    """Tell the listener, as Airflow's task runner tells its listeners, that ``ti``'s try ended
    in ``state``."""
    ended = SimpleNamespace(**vars(ti), state=state)
    if state == "success":
        TRY_ENDS.on_task_instance_success(previous_state="running", task_instance=ended)
    else:
        TRY_ENDS.on_task_instance_failed(previous_state="running", task_instance=ended, error=None)


@pytest.mark.parametrize(
    ("state", "retrying"), [("success", False), ("up_for_retry", True), ("failed", False)]
)
def test_the_end_of_a_try_is_told_once_to_what_waits_for_it(state: str, retrying: bool) -> None:
    ti, other = task_instance(try_number=1), task_instance(try_number=2)
    told: list[bool] = []
    TRY_ENDS.when_over(TaskInstanceIdentity.of(ti), told.append)
    # Registered with the manager Airflow's task runner calls its listeners through, which
    # checked the hooks against Airflow's listener specs as it took them.
    assert get_listener_manager().pm.is_registered(TRY_ENDS)
    end(other, state)
    assert told == []
    end(ti, state)
    end(ti, state)
    assert told == [retrying]


def test_park_margin_is_a_positive_number_of_seconds_kept_by_a_copy() -> None:
    with pytest.raises(ValueError, match="park_margin must be a positive finite number"):
        OpenSandboxBackend(park_margin=0)
    backend = OpenSandboxBackend(park_margin=120)
    assert backend.park_margin == 120.0
    assert copy.deepcopy(backend).park_margin == 120.0
    assert OpenSandboxBackend().park_margin == _parking.PARK_MARGIN
