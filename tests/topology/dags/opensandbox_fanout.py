"""Many ``OpenSandboxOperator`` tasks at once, mapped over one list: work for several workers."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_fanout"
# The most mapped tasks a run may ask for, all of them allowed to run at once.
MAX_TASKS = 100


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    max_active_tasks=MAX_TASKS,
    params={
        "count": Param(20, type="integer", minimum=1, maximum=MAX_TASKS),
        "seconds": Param(2, type="integer", minimum=0),
    },
)
def opensandbox_fanout():
    @task
    def commands(params: dict) -> list[str]:
        # Each sandbox stays a few seconds, so that the tasks overlap and every worker gets some.
        return [f"echo task {n}; sleep {params['seconds']}" for n in range(params["count"])]

    OpenSandboxOperator.partial(
        task_id="run",
        spec=SandboxSpec(block_network=False),
        cpu="100m",
        memory="256Mi",
    ).expand(command=commands())


opensandbox_fanout()
