"""A ready cleanup Dag: one task of :class:`OpenSandboxCleanupOperator`, narrowed by a param."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.common.compat.sdk import DAG, Param

from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.maintenance._unused_snapshots import DEFAULT_UNUSED_SNAPSHOT_AGE
from opensandbox_provider.maintenance.operator import OpenSandboxCleanupOperator

TASK_ID = "kill_leaked_sandboxes"


def cleanup_dag(
    dag_id: str = "opensandbox_cleanup",
    *,
    schedule: Any = "@hourly",
    opensandbox_conn_id: str = OpenSandboxHook.default_conn_name,
    dag_ids: Collection[str] = (),
    unused_snapshot_age: timedelta | float | None = DEFAULT_UNUSED_SNAPSHOT_AGE,
    **dag_arguments: Any,
) -> DAG:
    """
    A Dag whose one task, ``kill_leaked_sandboxes``, is an :class:`OpenSandboxCleanupOperator`;
    ``dag_ids`` is the default of its ``dag_ids`` param, which a run's conf may change, and
    ``dag_arguments`` go to the Dag as they are (see :doc:`/operator`, "Cleaning up leaked
    sandboxes").
    """
    defaults: dict[str, Any] = {
        "start_date": datetime(2026, 1, 1, tzinfo=UTC),
        "catchup": False,
        # Two cleanups at once would only ask Airflow the same questions twice.
        "max_active_runs": 1,
        "tags": ["opensandbox", "maintenance"],
    }
    with DAG(
        dag_id=dag_id,
        schedule=schedule,
        params={"dag_ids": Param(list(dag_ids), type="array", description="Only these Dags.")},
        # The param's list reaches the operator as a list, not as its text.
        render_template_as_native_obj=True,
        **(defaults | dag_arguments),
    ) as dag:
        OpenSandboxCleanupOperator(
            task_id=TASK_ID,
            opensandbox_conn_id=opensandbox_conn_id,
            dag_ids="{{ params.dag_ids }}",
            unused_snapshot_age=unused_snapshot_age,
        )
    return dag
