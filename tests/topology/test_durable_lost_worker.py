"""A durable agent's worker lost mid-try: its host's processes SIGKILLed, so no teardown and no
listener runs, and the retry on the other worker goes on in the sandbox the lost try held, which
was parked from the moment it existed, where common-ai's journal says the agent was."""

from __future__ import annotations

import re
import time

import pytest

from dev.airflow_stack.celery_topology import (
    HEARTBEAT_TIMEOUT_SECONDS,
    WORKER_NAMES,
    CeleryTopology,
)
from dev.airflow_stack.running import RunningAirflow, trigger
from dev.stack.state import ServerInfo
from tests.reliability.cleanup import destroy_directly
from tests.topology.dags import opensandbox_durable_agent as durable
from tests.topology.leftovers import run_leftovers

DAG_ID = durable.LOST_WORKER_DAG_ID
# Starting the task, creating the sandbox and its two calls took seconds here; the bound
# allows a loaded machine.
HANG_TIMEOUT = 180.0
# The lost try is failed a heartbeat timeout after its last heartbeat; then the retry replays
# the two calls and makes its third.
RUN_TIMEOUT = HEARTBEAT_TIMEOUT_SECONDS + 600.0
CREATED = re.compile(r"Created OpenSandbox sandbox (\S+) ")
ADOPTED = re.compile(r"Adopted sandbox (\S+), which try 1 of this task parked")


def _lines(airflow: RunningAirflow, run_id: str) -> list[str]:
    return [str(e.get("event")) for e in airflow.api.task_log(DAG_ID, run_id, durable.TASK_ID)]


def _wait_for_the_hang(airflow: RunningAirflow, run_id: str) -> tuple[str, str]:
    """Wait until the first try made its two calls and hangs; its host and its sandbox."""
    api = airflow.api
    api.wait_for_task_state(DAG_ID, run_id, durable.TASK_ID, "running", timeout=HANG_TIMEOUT)
    deadline = time.monotonic() + HANG_TIMEOUT
    while durable.FIRST_TRY_HANGS not in (lines := _lines(airflow, run_id)):
        assert time.monotonic() < deadline, f"No hang within {HANG_TIMEOUT:.0f}s: {lines}"
        time.sleep(1.0)
    host = api.task_instances(DAG_ID, run_id)[durable.TASK_ID]["hostname"]
    [sandbox] = [m[1] for line in lines if (m := CREATED.match(line))]
    return str(host), sandbox


@pytest.mark.slow
def test_a_durable_agents_retry_after_its_worker_was_killed_goes_on_in_the_sandbox_it_held(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    topology = celery_airflow.topology
    assert isinstance(topology, CeleryTopology)
    api = celery_airflow.api
    run_id = trigger(celery_airflow, plain_server, DAG_ID)
    lost, sandbox = _wait_for_the_hang(celery_airflow, run_id)
    assert lost in WORKER_NAMES, lost
    killed_at = time.monotonic()
    try:
        killed = topology.kill_worker(lost)
        print(f"\nSIGKILLed {lost}'s {len(killed)} processes while try 1 held {sandbox}")
        state = api.wait_for_run(DAG_ID, run_id, timeout=RUN_TIMEOUT)
        instance = api.task_instances(DAG_ID, run_id)[durable.TASK_ID]
        print(
            f"run {state} {time.monotonic() - killed_at:.1f}s after the kill; try "
            f"{instance['try_number']} ran on {instance['hostname']}"
        )
        assert state == "success"
        assert instance["try_number"] == 2
        [survivor] = set(WORKER_NAMES) - {lost}
        assert instance["hostname"] == survivor
        retry = _lines(celery_airflow, run_id)
        # The retry made no sandbox: it adopted the one the lost try held, and read back both
        # lines once each, so the write and the append it replayed were not run again.
        assert ADOPTED.findall("\n".join(retry)) == [sandbox], retry
        assert not CREATED.findall("\n".join(retry)), retry
        assert f"{durable.READ_BACK} '[stdout]\\nfirst\\nsecond'" in retry, retry
        # Its success destroyed it.
        assert not plain_server.has_sandbox(sandbox)
        assert run_leftovers(DAG_ID, run_id) == []
    finally:
        # Whatever the outcome, the shared stack keeps no sandbox of this test's.
        destroy_directly(plain_server, [sandbox])
        topology.restart_worker(celery_airflow.site, lost)
