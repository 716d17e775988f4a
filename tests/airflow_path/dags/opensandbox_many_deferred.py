"""Twenty deferred commands waiting at once, for measuring the triggerer that watches them.

Each waits until the test writes ``RELEASE`` into its sandbox, or ``seconds`` at most, so the
test ends the wait once it has measured it."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_many_deferred"
TASKS = 20
RELEASE = "/tmp/release"


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    # One slot of the Dag's own per task (16 by default), so all of them wait at once.
    max_active_tasks=TASKS,
    params={"seconds": Param(120, type="integer", minimum=1)},
)
def opensandbox_many_deferred():
    for n in range(1, TASKS + 1):
        OpenSandboxOperator(
            task_id=f"wait_{n:02d}",
            spec=SandboxSpec(block_network=False),
            cpu="100m",
            memory="256Mi",
            deferrable=True,
            command=(
                f"echo started {n}; i=0; "
                f"until [ -e {RELEASE} ] || [ $i -ge {{{{ params.seconds }}}} ]; "
                f"do sleep 1; i=$((i + 1)); done; echo done {n}"
            ),
        )


opensandbox_many_deferred()
