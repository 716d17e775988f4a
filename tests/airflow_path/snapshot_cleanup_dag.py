"""A Dag for test_snapshot_cleanup.py: a task prepares a snapshot, recording its use through the
Task SDK as every task that prepares one does, then the maintenance cleanup removes this
deployment's snapshots that no task has used for a week."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import Param, dag, task

from opensandbox_provider.maintenance import OpenSandboxCleanupOperator

DAG_ID = "opensandbox_snapshot_cleanup"
CONN_ID = "opensandbox_default"


@dag(
    dag_id=DAG_ID,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    schedule=None,
    params={"set_up": Param([], type="array")},
)
def opensandbox_snapshot_cleanup():
    @task
    def prepare(params=None) -> str:
        from opensandbox_provider.sandbox import OpenSandboxBackend, prepare_snapshot

        return prepare_snapshot(OpenSandboxBackend(CONN_ID), params["set_up"])

    # Only this Dag's sandboxes are judged; snapshots are the deployment's whatever dag_ids.
    prepare() >> OpenSandboxCleanupOperator(task_id="cleanup", dag_ids=[DAG_ID])


DAG = opensandbox_snapshot_cleanup()
