"""Deferred ``OpenSandboxOperator`` tasks on the celery topology: a triggerer lost, the lifecycle
server stopped across a renewal, a task marked failed by a person, a command that outlasts its
task's execution_timeout. Each ends with the task's whole output or with its sandbox gone."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from dev.airflow_stack.api import AirflowApi
from dev.airflow_stack.celery_topology import (
    TRIGGERER_HEALTH_SECONDS,
    TRIGGERER_NAMES,
    CeleryTopology,
)
from dev.airflow_stack.running import RunningAirflow, trigger
from dev.stack.state import ServerInfo
from tests.airflow_path.dags import opensandbox_deferred_ticks as ticks
from tests.airflow_path.dags import opensandbox_deferred_timeout as outlasting
from tests.own_server import OwnServer
from tests.reliability.cleanup import destroy_directly
from tests.topology.dags import opensandbox_short_lease as short_lease
from tests.topology.leftovers import run_leftovers

T = TypeVar("T")

# Creating a sandbox and deferring took a few seconds here; the bound allows a loaded machine.
DEFER_TIMEOUT = 180.0
RUN_TIMEOUT = 400.0
# Long enough that the command still runs when the other triggerer takes the trigger up:
# measured, the kill came about 15 s into the command and the take-over 25 to 30 s later.
HANDOFF_TICKS = 90
SERVER_DOWN_SECONDS = 30.0
# The command outlasts the stop and the renewals after it.
LEASE_TICKS = 90
# What the issue of a person's kill promises on Airflow 3.3: the sandbox gone this soon.
KILLED_GONE_SECONDS = 10.0


def _eventually(what: str, timeout: float, look: Callable[[], T | None]) -> T:
    """The first truthy answer of ``look``, asked every half second for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (answer := look()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        time.sleep(0.5)
    return answer


def _watched_sandbox(api: AirflowApi, dag_id: str, run_id: str, task_id: str) -> str:
    """Wait until the task is deferred and a triggerer runs its trigger; returns its sandbox,
    from the ``sandbox_id`` XCom the worker pushed as soon as the sandbox existed."""
    api.wait_for_task_state(dag_id, run_id, task_id, "deferred", timeout=DEFER_TIMEOUT)
    _eventually(
        "a triggerer taking the trigger up",
        DEFER_TIMEOUT,
        lambda: api.triggerer_host(dag_id, run_id, task_id),
    )
    return str(api.xcom(dag_id, run_id, task_id, key="sandbox_id"))


def _wait_for_line(api: AirflowApi, dag_id: str, run_id: str, task_id: str, line: str) -> None:
    """Wait until the command's ``line`` is in the task's log, as the trigger logs its stdout:
    the trigger is watching the command."""

    def logged() -> bool:
        events = api.task_log(dag_id, run_id, task_id)
        return any(event.get("event") == f"[sandbox stdout] {line}" for event in events)

    _eventually(f"the command's {line!r} through the trigger", DEFER_TIMEOUT, logged)


def test_a_killed_triggerers_trigger_is_taken_up_by_the_other_and_the_task_gets_its_output(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    topology, api = celery_airflow.topology, celery_airflow.api
    assert isinstance(topology, CeleryTopology)
    run_id = trigger(celery_airflow, plain_server, ticks.DAG_ID, conf={"seconds": HANDOFF_TICKS})
    sandbox = _watched_sandbox(api, ticks.DAG_ID, run_id, ticks.TASK_ID)
    holder = api.triggerer_host(ticks.DAG_ID, run_id, ticks.TASK_ID)
    assert holder in TRIGGERER_NAMES, holder
    [other] = set(TRIGGERER_NAMES) - {holder}
    try:
        _wait_for_line(api, ticks.DAG_ID, run_id, ticks.TASK_ID, "tick 3")
        killed_at = time.monotonic()
        killed = topology.kill_triggerer(holder)
        print(f"\nSIGKILLed {holder}'s {len(killed)} processes while it watched {sandbox}")
        # The other triggerer takes the trigger up once the lost one's heartbeat is stale.
        _eventually(
            f"{other} taking the trigger up",
            TRIGGERER_HEALTH_SECONDS + DEFER_TIMEOUT,
            lambda: api.triggerer_host(ticks.DAG_ID, run_id, ticks.TASK_ID) == other,
        )
        took_over = time.monotonic() - killed_at
        # Taken up while the command still ran: the sandbox outlived the hand-off.
        assert api.task_instances(ticks.DAG_ID, run_id)[ticks.TASK_ID]["state"] == "deferred"
        assert plain_server.has_sandbox(sandbox)
        state = api.wait_for_run(ticks.DAG_ID, run_id, timeout=RUN_TIMEOUT)
        print(
            f"{other} took the trigger up {took_over:.1f}s after the kill; run {state} "
            f"{time.monotonic() - killed_at:.1f}s after it"
        )
        assert state == "success"
        assert api.task_try_number(ticks.DAG_ID, run_id, ticks.TASK_ID) == 1
        # Every line the command printed, those while no triggerer watched it included.
        assert api.return_value(ticks.DAG_ID, run_id, ticks.TASK_ID) == {
            "exit_code": 0,
            "stdout": ticks.expected_stdout(HANDOFF_TICKS),
        }
        assert not plain_server.has_sandbox(sandbox)
        assert run_leftovers(ticks.DAG_ID, run_id) == []
    finally:
        destroy_directly(plain_server, [sandbox])
        topology.start_triggerer(celery_airflow.site, holder)


def test_a_lifecycle_server_stopped_across_a_renewal_costs_the_deferred_task_nothing(
    celery_airflow: RunningAirflow, topology_server: OwnServer
) -> None:
    api, server = celery_airflow.api, topology_server.info
    run_id = trigger(celery_airflow, server, short_lease.DAG_ID, conf={"seconds": LEASE_TICKS})
    sandbox = _watched_sandbox(api, short_lease.DAG_ID, run_id, short_lease.TASK_ID)
    try:
        _wait_for_line(api, short_lease.DAG_ID, run_id, short_lease.TASK_ID, "tick 3")
        topology_server.stop()
        stopped_at = time.monotonic()
        # A renewal comes every third of the lease; the stop outlasts one.
        assert SERVER_DOWN_SECONDS > short_lease.SANDBOX_TIMEOUT / 3
        time.sleep(SERVER_DOWN_SECONDS)
        topology_server.start()
        print(f"\nserver down for {time.monotonic() - stopped_at:.1f}s while {sandbox} ran")
        assert api.wait_for_run(short_lease.DAG_ID, run_id, timeout=RUN_TIMEOUT) == "success"
        assert api.return_value(short_lease.DAG_ID, run_id, short_lease.TASK_ID) == {
            "exit_code": 0,
            "stdout": ticks.expected_stdout(LEASE_TICKS),
        }
        assert not server.has_sandbox(sandbox)
        assert run_leftovers(short_lease.DAG_ID, run_id) == []
    finally:
        topology_server.start()
        destroy_directly(server, [sandbox])


def test_a_deferred_task_marked_failed_loses_its_sandbox_within_ten_seconds(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = celery_airflow.api
    run_id = trigger(celery_airflow, plain_server, ticks.DAG_ID, conf={"seconds": 300})
    sandbox = _watched_sandbox(api, ticks.DAG_ID, run_id, ticks.TASK_ID)
    try:
        _wait_for_line(api, ticks.DAG_ID, run_id, ticks.TASK_ID, "tick 1")
        api.set_task_state(ticks.DAG_ID, run_id, ticks.TASK_ID, "failed")
        marked_at = time.monotonic()
        # Airflow 3.3 cancels the trigger and calls its on_kill, which destroys the sandbox.
        _eventually(
            f"sandbox {sandbox} gone after the task was marked failed",
            KILLED_GONE_SECONDS,
            lambda: not plain_server.has_sandbox(sandbox),
        )
        print(
            f"\nsandbox gone {time.monotonic() - marked_at:.1f}s after the task was marked failed"
        )
        assert api.task_instances(ticks.DAG_ID, run_id)[ticks.TASK_ID]["state"] == "failed"
        assert run_leftovers(ticks.DAG_ID, run_id) == []
    finally:
        destroy_directly(plain_server, [sandbox])


def _at(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def test_a_deferred_command_outlasting_execution_timeout_fails_the_task_and_its_sandbox(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = celery_airflow.api
    run_id = trigger(celery_airflow, plain_server, outlasting.DAG_ID)
    limit = outlasting.EXECUTION_TIMEOUT.total_seconds()
    assert api.wait_for_run(outlasting.DAG_ID, run_id, timeout=RUN_TIMEOUT) == "failed"
    instance = api.task_instances(outlasting.DAG_ID, run_id)[outlasting.TASK_ID]
    assert instance["state"] == "failed"
    # The trigger ended before Airflow's own timeout, and the worker failed the task: the
    # whole try took no longer than the execution_timeout and the worker's part after it.
    took = _at(instance["end_date"]) - _at(instance["start_date"])
    assert took < limit + 30, took
    # Each event whole: a failure's exception is in its own field.
    log = api.task_log(outlasting.DAG_ID, run_id, outlasting.TASK_ID)
    events = [json.dumps(event) for event in log]
    assert any('"[sandbox stdout] started"' in e for e in events), events
    assert any("ran out of its execution_timeout" in e for e in events), events
    assert any("AirflowTaskTimeout" in e for e in events), events
    created = next(m for e in events if (m := re.search(r"Created OpenSandbox sandbox (\S+) ", e)))
    assert not plain_server.has_sandbox(created.group(1))
    assert run_leftovers(outlasting.DAG_ID, run_id) == []
