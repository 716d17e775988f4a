"""Work spread over the celery topology's workers: every task succeeds wherever it runs."""

from __future__ import annotations

import time
from collections import Counter

from dev.airflow_stack.celery_topology import WORKER_NAMES
from dev.airflow_stack.running import RunningAirflow, trigger
from dev.stack.state import ServerInfo
from tests.topology.dags import opensandbox_fanout as fanout
from tests.topology.leftovers import run_leftovers

OPERATOR_TASKS = 60
AGENT_TASKS = 10
# Measured: 136 to 175 s from the trigger to the end of the run on a loaded two-core machine;
# the bound only keeps a hang finite.
RUN_TIMEOUT = 1200.0


def test_mapped_sandbox_tasks_spread_over_both_workers_and_all_succeed(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = celery_airflow.api
    started = time.monotonic()
    conf = {"operators": OPERATOR_TASKS, "agents": AGENT_TASKS}
    run_id = trigger(celery_airflow, plain_server, fanout.DAG_ID, conf=conf)
    state = api.wait_for_run(fanout.DAG_ID, run_id, timeout=RUN_TIMEOUT)
    wall_seconds = time.monotonic() - started
    mapped = {
        task_id: [
            i for i in api.task_instance_list(fanout.DAG_ID, run_id) if i["task_id"] == task_id
        ]
        for task_id in (fanout.OPERATOR_TASK_ID, fanout.AGENT_TASK_ID)
    }
    everything = [instance for instances in mapped.values() for instance in instances]
    shares = Counter(instance["hostname"] for instance in everything)
    print(
        f"\n{OPERATOR_TASKS} operator and {AGENT_TASKS} agent tasks, mapped, in "
        f"{wall_seconds:.1f}s from the trigger; each worker's share:"
    )
    for host in sorted(shares):
        kinds = Counter(i["task_id"] for i in everything if i["hostname"] == host)
        print(f"  {host}: {shares[host]} ({dict(kinds)})")
    assert state == "success", [(i["task_id"], i["map_index"], i["state"]) for i in everything]
    for task_id, count in (
        (fanout.OPERATOR_TASK_ID, OPERATOR_TASKS),
        (fanout.AGENT_TASK_ID, AGENT_TASKS),
    ):
        assert sorted(i["map_index"] for i in mapped[task_id]) == list(range(count))
    assert {instance["state"] for instance in everything} == {"success"}
    # Every task ran on one of the workers, and each worker ran some.
    assert set(shares) == set(WORKER_NAMES), shares
    assert run_leftovers(fanout.DAG_ID, run_id) == []
