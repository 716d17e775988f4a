"""One long ``OpenSandboxOperator`` command with a retry: for losing the worker that runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_long_retried"
TASK_ID = "long"


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    params={"ticks": Param(30, type="integer", minimum=1)},
)
def opensandbox_long_retried():
    # Not deferred: the command is watched by the worker that runs the task, so losing that
    # worker loses the try.
    OpenSandboxOperator(
        task_id=TASK_ID,
        spec=SandboxSpec(block_network=False),
        cpu="100m",
        memory="256Mi",
        command="for i in $(seq {{ params.ticks }}); do echo tick $i; sleep 1; done",
        retries=1,
        retry_delay=timedelta(seconds=1),
    )


opensandbox_long_retried()
