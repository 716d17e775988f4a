"""A worker lost mid-task: its host's processes SIGKILLed at once, the retry runs elsewhere,
and the two tries' commands never run at the same time."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.airflow_stack.celery_topology import (
    HEARTBEAT_TIMEOUT_SECONDS,
    WORKER_NAMES,
    CeleryTopology,
)
from dev.airflow_stack.running import RunningAirflow, trigger
from dev.stack.state import ServerInfo
from tests.reliability.cleanup import destroy_directly
from tests.topology.dags import opensandbox_long_retried as retried
from tests.topology.leftovers import run_leftovers

# Creating the sandbox and the first tick took a few seconds here; the bound allows a loaded
# machine.
FIRST_TICK_TIMEOUT = 180.0
# The lost try is failed a heartbeat timeout after its last heartbeat; then the retry runs
# its (short) command. Measured: the run succeeded 83 s after the kill.
RUN_TIMEOUT = HEARTBEAT_TIMEOUT_SECONDS + 600.0
CREATED = re.compile(r"Created OpenSandbox sandbox (\S+) ")


def _wait_for_first_tick(airflow: RunningAirflow, run_id: str) -> tuple[str, str]:
    """Wait until the task's command is running in its sandbox; returns the task's host and
    the sandbox's id."""
    api = airflow.api
    deadline = time.monotonic() + FIRST_TICK_TIMEOUT
    api.wait_for_task_state(
        retried.DAG_ID, run_id, retried.TASK_ID, "running", timeout=FIRST_TICK_TIMEOUT
    )
    while True:
        # Read while the task runs: the api-server fetches it from the worker, by its name.
        events = api.task_log(retried.DAG_ID, run_id, retried.TASK_ID)
        lines = [str(event.get("event")) for event in events]
        # The command's first line, as the task log marks a command's stdout.
        if "[sandbox stdout] tick 1" in lines:
            host = api.task_instances(retried.DAG_ID, run_id)[retried.TASK_ID]["hostname"]
            [sandbox] = [m[1] for line in lines if (m := CREATED.match(line))]
            return str(host), sandbox
        assert time.monotonic() < deadline, f"No tick within {FIRST_TICK_TIMEOUT:.0f}s: {events}"
        time.sleep(1.0)


@pytest.fixture
def tries_file() -> Iterator[Path]:
    """The file on the Dag's named volume where each try's command writes what it does; the
    volume is made empty for the test and removed after it."""
    docker = ["docker", "volume"]
    subprocess.run([*docker, "rm", "-f", retried.TRIES_VOLUME], check=True, capture_output=True)
    subprocess.run([*docker, "create", retried.TRIES_VOLUME], check=True, capture_output=True)
    inspect = [*docker, "inspect", "--format", "{{.Mountpoint}}", retried.TRIES_VOLUME]
    mountpoint = subprocess.run(inspect, check=True, capture_output=True, text=True).stdout
    yield Path(mountpoint.strip()) / retried.TRIES_FILE
    subprocess.run([*docker, "rm", "-f", retried.TRIES_VOLUME], check=True, capture_output=True)


def _one_at_a_time(lines: list[str]) -> None:
    """Every line of try 1 was written before try 2 started, and try 2 ran to its end: the
    lost try's command was stopped before the retry's began, and never wrote again."""
    tries = [line.split()[1] for line in lines]
    retry_starts = lines.index("try 2 start")
    assert set(tries[:retry_starts]) == {"1"}, lines
    assert set(tries[retry_starts:]) == {"2"}, lines
    assert lines[0] == "try 1 start" and "try 1 end" not in lines, lines
    assert lines[-1] == "try 2 end", lines


def test_the_retry_of_a_task_whose_worker_was_killed_succeeds_on_the_other_worker(
    celery_airflow: RunningAirflow, plain_server: ServerInfo, tries_file: Path
) -> None:
    topology = celery_airflow.topology
    assert isinstance(topology, CeleryTopology)
    run_id = trigger(celery_airflow, plain_server, retried.DAG_ID)
    lost, first_sandbox = _wait_for_first_tick(celery_airflow, run_id)
    assert lost in WORKER_NAMES, lost
    killed_at = time.monotonic()
    try:
        killed = topology.kill_worker(lost)
        print(f"\nSIGKILLed {lost}'s {len(killed)} processes while try 1 ran in {first_sandbox}")
        state = celery_airflow.api.wait_for_run(retried.DAG_ID, run_id, timeout=RUN_TIMEOUT)
        instance = celery_airflow.api.task_instances(retried.DAG_ID, run_id)[retried.TASK_ID]
        print(
            f"run {state} {time.monotonic() - killed_at:.1f}s after the kill; try "
            f"{instance['try_number']} ran on {instance['hostname']}"
        )
        assert state == "success"
        assert instance["try_number"] == 2
        [survivor] = set(WORKER_NAMES) - {lost}
        assert instance["hostname"] == survivor
        # The lost try's sandbox is gone too: the retry removed it by the task's identity.
        assert not plain_server.has_sandbox(first_sandbox)
        lines = tries_file.read_text().splitlines()
        print(f"tries file: {lines[0]!r} ... {len(lines)} lines ... {lines[-1]!r}")
        _one_at_a_time(lines)
        assert run_leftovers(retried.DAG_ID, run_id) == []
    finally:
        # Whatever the outcome, the shared stack keeps no sandbox of this test's.
        destroy_directly(plain_server, [first_sandbox])
        topology.restart_worker(celery_airflow.site, lost)
