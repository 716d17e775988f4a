"""A task instance's identity on its sandboxes, on the real server: stamped by the operator, the
decorator and the toolset, listed, renewed and killed through the hook, and what a retry and
on_kill do with it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec, SandboxTerminalError
from airflow.providers.common.ai.toolsets.sandbox import SandboxToolset
from airflow.providers.common.compat.sdk import AirflowException
from airflow.sdk import dag, task
from airflow.sdk.execution_time.context import set_current_context
from opensandbox import SandboxSync
from opensandbox.sync.manager import SandboxManagerSync
from pydantic_ai import Agent

from opensandbox_provider._identity import KEYS, TaskInstanceIdentity
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.integration.conftest import CONN_ID
from tests.scripted_model import scripted_model

OPEN = SandboxSpec(block_network=False)
RUN_ID = "manual__2026-01-01T00:00:00+00:00"
LOG = logging.getLogger("tests.task_identity")


class FakeTi(SimpleNamespace):
    """A running task instance as the operator meets it: its ids, and XCom."""

    def xcom_push(self, *, key: str, value: Any) -> None:
        self.pushed.append((key, value))
        self.on_push(key, value)


def task_instance(dag_id: str, task_id: str, try_number: int = 1, map_index: int = -1) -> FakeTi:
    return FakeTi(
        dag_id=dag_id,
        task_id=task_id,
        run_id=RUN_ID,
        map_index=map_index,
        try_number=try_number,
        pushed=[],
        on_push=lambda key, value: None,
    )


@contextmanager
def inside(ti: FakeTi) -> Iterator[dict[str, Any]]:
    """Run as Airflow's task runner does: the task's context is the current one."""
    context = {"ti": ti, "task_instance": ti}
    with set_current_context(context):  # type: ignore[arg-type]
        yield context


@pytest.fixture
def connected(plain_server, monkeypatch) -> OpenSandboxHook:
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(OpenSandboxOperator, "log", property(lambda self: LOG))
    return OpenSandboxHook(CONN_ID)


@pytest.fixture
def metadata_of(connected) -> Iterator[Callable[[str], dict[str, str]]]:
    """The metadata of a sandbox, as the SDK reads it back from the server."""
    manager = SandboxManagerSync.create(connected.connection_config)
    yield lambda sandbox: dict(manager.get_sandbox_info(sandbox).metadata or {})
    manager.close()


@pytest.fixture
def cleanup(connected) -> Iterator[list[str]]:
    """Sandbox ids to kill when the test ends, whatever happened."""
    made: list[str] = []
    yield made
    for sandbox in made:
        connected.kill_sandbox(sandbox)


def alive(hook: OpenSandboxHook, sandbox: str) -> bool:
    return any(s.id == sandbox and s.state != "Terminated" for s in hook.list_sandboxes())


def test_a_backend_inside_a_task_stamps_its_identity_and_outside_none(
    connected, metadata_of, cleanup
):
    backend = OpenSandboxBackend(CONN_ID)
    ti = task_instance("identity_dag", "toolset_task", try_number=3)
    with inside(ti):
        cleanup.append(backend.create(spec=OPEN))
    cleanup.append(backend.create(spec=OPEN))
    inner, outer = (metadata_of(sandbox) for sandbox in cleanup)
    assert TaskInstanceIdentity.read(inner) == TaskInstanceIdentity.of(ti)
    assert inner[KEYS["dag_id"]] == "identity_dag" and inner[KEYS["try_number"]] == "3"
    assert inner["created-by"] == outer["created-by"] == "airflow"
    assert not set(outer) & set(KEYS.values())


def test_the_toolset_in_a_task_creates_its_sandbox_with_the_tasks_identity(connected, metadata_of):
    backend = OpenSandboxBackend(CONN_ID)
    stamped: list[dict[str, str]] = []
    create = backend.create

    def reading_create(*, spec=None):
        sandbox = create(spec=OPEN)
        stamped.append(metadata_of(sandbox))
        return sandbox

    backend.create = reading_create  # type: ignore[method-assign]
    model = scripted_model([("run_command", {"command": "true"})], lambda returns: "done")
    ti = task_instance("identity_dag", "agent_task")
    with inside(ti):
        asyncio.run(Agent(model, toolsets=[SandboxToolset(backend)]).run("Run true."))
    assert [TaskInstanceIdentity.read(metadata) for metadata in stamped] == [
        TaskInstanceIdentity.of(ti)
    ]


def test_the_operator_pushes_its_sandbox_id_and_stamps_its_identity(connected, metadata_of):
    operator = OpenSandboxOperator(task_id="operator_task", command="true", spec=OPEN)
    seen: list[dict[str, str]] = []
    ti = task_instance("identity_dag", "operator_task", try_number=2)
    ti.on_push = lambda key, value: seen.append(metadata_of(value))
    with inside(ti) as context:
        operator.execute(context)
    assert ti.pushed == [("sandbox_id", operator._sandbox_id)]
    assert [TaskInstanceIdentity.read(metadata) for metadata in seen] == [
        TaskInstanceIdentity.of(ti)
    ]
    assert not alive(connected, operator._sandbox_id)


@task.opensandbox(spec=OPEN)
def answer() -> int:
    return 42


def test_the_decorator_stamps_its_identity(connected, metadata_of):
    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        answer()

    operator = holder().task_dict["answer"]
    seen: list[dict[str, str]] = []
    ti = task_instance("identity_dag", "answer")
    ti.on_push = lambda key, value: seen.append(metadata_of(value))
    with inside(ti) as context:
        assert operator.execute(context) == 42
    assert [TaskInstanceIdentity.read(metadata) for metadata in seen] == [
        TaskInstanceIdentity.of(ti)
    ]


def test_the_hook_lists_by_identity_renews_and_kills(connected, cleanup):
    backend = OpenSandboxBackend(CONN_ID)
    first, second = task_instance("hook_dag", "a"), task_instance("hook_dag", "b")
    mapped = task_instance("hook_dag", "a", map_index=0)
    for ti in (first, second, mapped):
        with inside(ti):
            cleanup.append(backend.create(spec=OPEN))
    backend.hand_over(cleanup[0])  # its lease is the hook's to move from here on
    listed = connected.list_sandboxes(dag_id="hook_dag", task_id="a", run_id=RUN_ID, map_index=-1)
    assert [sandbox.id for sandbox in listed] == [cleanup[0]]
    summary = listed[0]
    assert summary.identity == TaskInstanceIdentity.of(first)
    assert summary.state == "Running" and summary.image == "python:3.12-slim"
    assert summary.created_by_provider and summary.created_at <= datetime.now(UTC)
    everyone = {s.id for s in connected.list_sandboxes(dag_id="hook_dag", states=["Running"])}
    assert everyone == set(cleanup)
    assert {s.id for s in connected.list_sandboxes(dag_id="hook_dag", map_index=0)} == {cleanup[2]}

    expires = connected.renew_sandbox(cleanup[0], 7200)
    assert expires - datetime.now(UTC) > timedelta(seconds=7000)
    assert (
        connected.list_sandboxes(dag_id="hook_dag", task_id="a", map_index=-1)[0].expires_at
        == expires
    )

    assert connected.kill_sandbox(cleanup[0]) is True
    assert not alive(connected, cleanup[0])
    assert connected.kill_sandbox(cleanup[0]) is False
    for sandbox in cleanup:
        backend.destroy(sandbox)


def test_a_retry_kills_the_sandbox_an_earlier_try_left_before_its_command(connected, cleanup):
    earlier = OpenSandboxBackend(CONN_ID)
    with inside(task_instance("retry_dag", "flaky", try_number=1)):
        left = earlier.create(spec=OPEN)
    cleanup.append(left)
    earlier.hand_over(left)  # the worker of try 1 died: nothing holds it any more
    operator = OpenSandboxOperator(task_id="flaky", command="echo second try", spec=OPEN)
    killed_before: list[bool] = []
    retry = task_instance("retry_dag", "flaky", try_number=2)
    with inside(retry) as context:
        original = operator.new_backend

        def recording_backend() -> OpenSandboxBackend:
            backend = original()
            write = backend.run_command

            def run_command(*args, **kwargs):
                killed_before.append(not alive(connected, left))
                return write(*args, **kwargs)

            backend.run_command = run_command  # type: ignore[method-assign]
            return backend

        operator.new_backend = recording_backend  # type: ignore[method-assign]
        assert operator.execute(context)["stdout"] == "second try\n"
    assert killed_before == [True]


def test_on_kill_while_the_sandbox_is_created_kills_it_by_identity(connected, monkeypatch):
    # The backend waits for execd in the killed sandbox until ready_timeout; a short one keeps
    # the test short.
    operator = OpenSandboxOperator(task_id="killed", command="true", spec=OPEN, ready_timeout=10)
    created: list[str] = []
    sdk_create = SandboxSync.create

    def create_then_signal(*args, **kwargs):
        # SIGTERM arrives once the server made the sandbox, before create returned its id.
        sdk = sdk_create(*args, **kwargs)
        created.append(sdk.id)
        operator.on_kill()
        return sdk

    monkeypatch.setattr(SandboxSync, "create", create_then_signal)
    with inside(task_instance("kill_dag", "killed")) as context:
        with pytest.raises((SandboxTerminalError, AirflowException)):
            operator.execute(context)
    assert len(created) == 1
    assert not alive(connected, created[0])
