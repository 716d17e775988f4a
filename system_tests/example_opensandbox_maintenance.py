"""
Example and system test: kill the sandboxes this provider made whose task instance no longer
runs.

A sandbox is destroyed by the task that made it, and one nothing renews ends with its lease;
what this catches is a sandbox whose task ended without destroying it and whose lease is long
(a worker killed outright while the sandbox was made with a ``sandbox_timeout`` of hours, a
sandbox renewed by hand). Each sandbox carries the identity of the task instance that created
it; the task asks Airflow, through the task SDK, whether that task instance is still running
or deferred, and kills the sandbox when it is neither.

Left alone: sandboxes made outside a task (they carry no identity), sandboxes provisioned for
other tasks to attach to (they outlive their creator by design, and wait one lease at a time),
and sandboxes other than this provider's. The ``dag_ids`` param narrows it to the sandboxes of
those Dags. Every sandbox it kills is logged, and the task returns their ids.

Needs Airflow 3 (the task SDK's task instance lookup) and an ``opensandbox_default`` connection
(type ``opensandbox``). Run it with ``airflow dags test example_opensandbox_maintenance``, or
give it a schedule (docs/operator.rst, "Cleaning up leaked sandboxes").
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from airflow.sdk import Param, dag, task

DAG_ID = "example_opensandbox_maintenance"
# The states in which a task instance may still be using its sandbox: a foreground command
# runs while the task is running, a deferred one while the triggerer watches it.
ALIVE = ["running", "deferred"]

log = logging.getLogger(DAG_ID)


@dag(
    dag_id=DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    params={"dag_ids": Param([], type="array", description="Only these Dags' sandboxes.")},
    tags=["opensandbox", "maintenance", "system_test"],
)
def example_opensandbox_maintenance():
    @task
    def kill_leaked_sandboxes(params=None, ti=None) -> list[str]:
        from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

        hook = OpenSandboxHook()
        only = set(params["dag_ids"])
        killed = []
        for sandbox in hook.list_sandboxes():
            identity = sandbox.identity
            if sandbox.state == "Terminated" or identity is None or sandbox.provisioned:
                continue
            if only and identity.dag_id not in only:
                continue
            running = ti.get_ti_count(
                dag_id=identity.dag_id,
                task_ids=[identity.task_id],
                run_ids=[identity.run_id],
                map_index=identity.map_index,
                states=ALIVE,
            )
            if running:
                continue
            if hook.kill_sandbox(sandbox.id):
                log.info(
                    "Killed sandbox %s: task %s of run %s of Dag %s is no longer running.",
                    sandbox.id,
                    identity.task_id,
                    identity.run_id,
                    identity.dag_id,
                )
                killed.append(sandbox.id)
        log.info("Killed %d leaked sandbox(es).", len(killed))
        return killed

    kill_leaked_sandboxes()


example_opensandbox_maintenance()
