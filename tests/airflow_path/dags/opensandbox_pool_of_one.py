"""A deferred command and a plain task sharing a pool of one slot: the plain task can run only
in the slot the deferred one gave back. The test creates the pool before triggering."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_pool_of_one"
POOL = "opensandbox_one_slot"
DEFERRED_TASK_ID = "deferred_command"
PLAIN_TASK_ID = "same_pool"
# Long enough for the plain task to be scheduled, started and finished while it waits.
COMMAND_SECONDS = 30


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_pool_of_one():
    OpenSandboxOperator(
        task_id=DEFERRED_TASK_ID,
        pool=POOL,
        # Queued first, so it holds the slot before the plain task can have it.
        priority_weight=100,
        spec=SandboxSpec(block_network=False),
        cpu="250m",
        memory="256Mi",
        deferrable=True,
        command=f"sleep {COMMAND_SECONDS}; echo slept",
    )

    @task(task_id=PLAIN_TASK_ID, pool=POOL, priority_weight=1)
    def same_pool() -> str:
        return "ran"

    same_pool()


opensandbox_pool_of_one()
