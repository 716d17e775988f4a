"""A deferred command that outlasts its task's ``execution_timeout``: the deferral test sees
the task fail as timed out with its sandbox destroyed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_deferred_timeout"
TASK_ID = "outlasting"
# Long enough to create the sandbox and defer on a loaded machine, short for a test.
EXECUTION_TIMEOUT = timedelta(seconds=60)


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_deferred_timeout():
    OpenSandboxOperator(
        task_id=TASK_ID,
        # The local stack's plain server has no egress sidecar, so the sandbox is opened.
        spec=SandboxSpec(block_network=False),
        cpu="250m",
        memory="256Mi",
        deferrable=True,
        command="echo started; sleep 600",
        execution_timeout=EXECUTION_TIMEOUT,
        retries=0,
    )


opensandbox_deferred_timeout()
