"""
A durable agent's sandbox across its task's tries, on the real server: an agent with common-ai's
``AirflowDurability`` runs in-process as a task runner runs it (the task's context current, the
journal in memory and kept between tries), and each try's end is told to the backend as
Airflow's listeners are told it. The same in a real Airflow is tests/airflow_path/
test_durable_agent.py; with the worker SIGKILLed, tests/topology/test_durable_lost_worker.py.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.ai.durable import AirflowDurability
from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.providers.common.ai.toolsets.sandbox import SandboxToolset
from opensandbox.sync.manager import SandboxManagerSync
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from opensandbox_provider._kept import KEY as KEPT_KEY
from opensandbox_provider._kept import PARKED_KEY
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox._try_end import TRY_ENDS
from tests.containers import containers_of, freeze, wait_until_running
from tests.integration.conftest import CONN_ID
from tests.integration.test_task_identity import inside
from tests.scripted_model import Step, tool_returns
from tests.unit.sandbox.test_parking import MemoryStorage

OPEN = SandboxSpec(block_network=False)
WRITE: Step = ("write_file", {"path": "notes.txt", "content": "first\n"})
APPEND: Step = ("run_command", {"command": "echo second >> notes.txt"})
READ: Step = ("run_command", {"command": "cat notes.txt"})
FAILS = "the try fails after two calls"
STALLS: Step = ("run_command", {"command": "sleep 41; echo done"})
FROZEN_WITH_DOCKER = "the stall is a container frozen with `docker pause`"
RETRY_DELAY = 30.0
PARK_MARGIN = 120.0
# The server's expiry and the kept mark are whole seconds apart at most, and a loaded machine
# takes a few more between a renewal and the read that checks it.
SLACK = 10.0


class Task:
    """One task instance's tries: the durable journal they share, and each try's context."""

    def __init__(self, dag_id: str) -> None:
        self.dag_id = dag_id
        self.storage = MemoryStorage()

    def attempt(self, try_number: int) -> SimpleNamespace:
        return SimpleNamespace(
            dag_id=self.dag_id,
            task_id="agent",
            run_id="manual__2026-01-01T00:00:00+00:00",
            map_index=-1,
            try_number=try_number,
            max_tries=1,
            task=SimpleNamespace(
                retry_delay=timedelta(seconds=RETRY_DELAY),
                retry_exponential_backoff=0,
                max_retry_delay=None,
            ),
        )

    def run(
        self,
        ti: SimpleNamespace,
        backend: Any,
        steps: list[Step],
        *,
        fail_after: int | None = None,
        before_call: Callable[[int], None] = lambda done: None,
    ) -> str:
        """Run the agent as try ``ti``: ``steps`` in order, failing after ``fail_after`` of
        them; what the last call returned."""

        # One function for every try, so the model's name, part of each request's
        # fingerprint, is the same on all of them.
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            returns = tool_returns(messages)
            done = len(returns)
            if done == fail_after:
                raise RuntimeError(FAILS)
            if done < len(steps):
                before_call(done)
                name, args = steps[done]
                return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{done}")])
            return ModelResponse(parts=[TextPart(str(returns[-1].content))])

        agent = Agent(
            FunctionModel(model),
            name="notes",
            toolsets=[SandboxToolset(backend, spec=OPEN)],
            capabilities=[AirflowDurability()],
        )
        with inside(ti), journal_scope(DurableJournal(self.storage)):  # type: ignore[arg-type]
            return str(asyncio.run(agent.run("Keep notes.")).output)

    def fail_first_try(self, backend: Any) -> SimpleNamespace:
        """Try 1 writes and appends to the notes, then fails; the try, still running."""
        first = self.attempt(1)
        with pytest.raises(RuntimeError, match=FAILS):
            self.run(first, backend, [WRITE, APPEND], fail_after=2)
        return first


def end(ti: SimpleNamespace, state: str) -> None:
    """The end of try ``ti``, told as Airflow's task runner tells its listeners."""
    ended = SimpleNamespace(**vars(ti), state=state)
    if state == "success":
        TRY_ENDS.on_task_instance_success(previous_state="running", task_instance=ended)
    else:
        TRY_ENDS.on_task_instance_failed(previous_state="running", task_instance=ended, error=None)


@pytest.fixture
def durable_task(plain_server, monkeypatch) -> Iterator[Task]:
    """A task of a Dag of its own; whatever sandbox its tries leave is killed after the test."""
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    task = Task(f"durable_{uuid.uuid4().hex[:8]}")
    yield task
    hook = OpenSandboxHook(CONN_ID)
    for sandbox in hook.list_sandboxes(dag_id=task.dag_id):
        hook.kill_sandbox(sandbox.id)


@pytest.fixture
def server_info(plain_server) -> Iterator[Callable[[str], Any]]:
    manager = SandboxManagerSync.create(plain_server.connection_config())
    yield manager.get_sandbox_info
    manager.close()


def running(task: Task) -> list[str]:
    found = OpenSandboxHook(CONN_ID).list_sandboxes(dag_id=task.dag_id)
    return sorted(s.id for s in found if s.state == "Running")


def seconds_left(info: Any) -> float:
    return (info.expires_at - datetime.now(UTC)).total_seconds()


def test_a_failed_try_parks_its_sandbox_for_the_retry_and_the_retry_goes_on_in_it(
    durable_task: Task, backend_on, plain_server, server_info
) -> None:
    backend = backend_on(plain_server, sandbox_timeout=60, park_margin=PARK_MARGIN)
    first = durable_task.fail_first_try(backend)
    # The run is over and its toolset destroyed its sandbox, as it saw it; the try is not.
    [sandbox] = running(durable_task)
    info = server_info(sandbox)
    park_lease = RETRY_DELAY + PARK_MARGIN
    # Held, while its try runs, for a lease whose last two thirds outlast the retry delay and
    # the margin, and marked kept until the server's expiry: a SIGKILL here leaves it for the
    # retry, and the maintenance cleanup off it.
    assert seconds_left(info) > park_lease * 1.5 - SLACK
    assert info.metadata[PARKED_KEY]
    assert abs(int(info.metadata[KEPT_KEY]) - info.expires_at.timestamp()) < SLACK
    assert sandbox in backend._leases.held()

    end(first, "up_for_retry")
    info = server_info(sandbox)
    # Parked: no longer renewed, its lease the retry delay and the margin, kept until then.
    assert sandbox not in backend._leases.held()
    assert park_lease - SLACK < seconds_left(info) <= park_lease + 1
    assert int(info.metadata[KEPT_KEY]) == int(info.expires_at.timestamp())

    second = durable_task.attempt(2)
    answer = durable_task.run(second, backend, [WRITE, APPEND, READ])
    # The write and the append were replayed, not run again, and the sandbox they ran in
    # was the retry's: both lines, once each, and no other sandbox made.
    assert answer == "[stdout]\nfirst\nsecond"
    assert running(durable_task) == [sandbox]
    # A try that fails for good destroys it, as a toolset would.
    end(second, "failed")
    assert not plain_server.has_sandbox(sandbox)


def test_a_retry_that_replays_no_call_made_in_the_parked_sandbox_starts_in_a_fresh_one(
    durable_task: Task, backend_on, plain_server
) -> None:
    backend = backend_on(plain_server, park_margin=PARK_MARGIN)
    first = durable_task.fail_first_try(backend)
    end(first, "up_for_retry")
    [parked] = running(durable_task)
    # The journal deleted, as a person clearing the task after deleting its state store does:
    # the retry runs every call again, so nothing relies on what the parked sandbox holds.
    durable_task.storage.entries.clear()
    second = durable_task.attempt(2)
    answer = durable_task.run(second, backend, [WRITE, APPEND, READ])
    assert answer == "[stdout]\nfirst\nsecond"
    [fresh] = running(durable_task)
    assert fresh != parked and not plain_server.has_sandbox(parked)
    # A try that succeeds destroys it.
    end(second, "success")
    assert not plain_server.has_sandbox(fresh)


@pytest.mark.not_on_kubernetes(reason=FROZEN_WITH_DOCKER)
def test_a_sandbox_the_backend_ends_under_a_retrys_command_is_replaced_not_looked_for(
    durable_task: Task, backend_on, plain_server
) -> None:
    backend = backend_on(plain_server, park_margin=PARK_MARGIN)
    first = durable_task.fail_first_try(backend)
    end(first, "up_for_retry")
    [parked] = running(durable_task)

    def freeze_under_the_stalling_command(done: int) -> None:
        # The retry adopted the sandbox and read from it; its next command's stream stalls in a
        # frozen container, so the backend destroys the sandbox to end it.
        if done == 3:
            threading.Thread(target=freeze_once_running, args=(parked,), daemon=True).start()

    second = durable_task.attempt(2)
    answer = durable_task.run(
        second,
        backend,
        [WRITE, APPEND, READ, STALLS, ("run_command", {"command": "echo fresh"})],
        before_call=freeze_under_the_stalling_command,
    )
    # The toolset was told its sandbox was replaced, and its next call made a new one for this
    # try rather than fail looking for one parked by an earlier try.
    assert answer == "[stdout]\nfresh"
    assert not plain_server.has_sandbox(parked)
    [fresh] = running(durable_task)
    end(second, "success")
    assert not plain_server.has_sandbox(fresh)


def freeze_once_running(sandbox: str) -> None:
    containers = containers_of(sandbox)
    wait_until_running(containers[0], STALLS[1]["command"].split(";")[0])
    for container in containers:
        freeze(container)
