"""Work spread over the celery topology's workers: every task succeeds wherever it runs."""

from __future__ import annotations

import time
from collections import Counter

from dev.airflow_stack.celery_topology import WORKER_NAMES
from dev.airflow_stack.running import RunningAirflow, trigger
from dev.stack import leaks
from dev.stack.state import ServerInfo
from tests.topology.dags import opensandbox_fanout as fanout

MAPPED_TASKS = 20
# Measured: see the figures this test prints; the bound only keeps a hang finite.
RUN_TIMEOUT = 900.0


def test_mapped_operator_tasks_spread_over_both_workers_and_all_succeed(
    celery_airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    before = leaks.opensandbox_resources()
    started = time.monotonic()
    run_id = trigger(celery_airflow, plain_server, fanout.DAG_ID, conf={"count": MAPPED_TASKS})
    state = celery_airflow.api.wait_for_run(fanout.DAG_ID, run_id, timeout=RUN_TIMEOUT)
    wall_seconds = time.monotonic() - started
    instances = celery_airflow.api.task_instance_list(fanout.DAG_ID, run_id)
    mapped = [instance for instance in instances if instance["task_id"] == "run"]
    shares = Counter(instance["hostname"] for instance in mapped)
    print(f"\n{len(mapped)} mapped tasks in {wall_seconds:.1f}s; each worker's share:")
    for host, count in sorted(shares.items()):
        print(f"  {host}: {count}")
    assert state == "success", [(i["map_index"], i["state"], i["hostname"]) for i in mapped]
    assert sorted(instance["map_index"] for instance in mapped) == list(range(MAPPED_TASKS))
    assert {instance["state"] for instance in mapped} == {"success"}
    # Every task ran on one of the workers, and each worker ran some.
    assert set(shares) == set(WORKER_NAMES), shares
    assert leaks.leftovers(before) == []
