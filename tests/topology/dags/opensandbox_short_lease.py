"""A deferred command on a one-minute lease: stopping the lifecycle server for longer than a
renewal's interval must not cost the task its sandbox."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_short_lease"
TASK_ID = "ticks"
# The trigger renews every third of it, so a 30 s stop spans at least one renewal.
SANDBOX_TIMEOUT = 60.0


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    params={"seconds": Param(90, type="integer", minimum=1)},
)
def opensandbox_short_lease():
    OpenSandboxOperator(
        task_id=TASK_ID,
        # The topology's own server has no egress sidecar, so the sandbox is opened.
        spec=SandboxSpec(block_network=False),
        cpu="250m",
        memory="256Mi",
        deferrable=True,
        sandbox_timeout=SANDBOX_TIMEOUT,
        retries=0,
        # What the deferred-ticks Dag runs, so that its expected_stdout says what this prints.
        command="for i in $(seq 1 {{ params.seconds }}); do echo tick $i; sleep 1; done; echo done",
    )


opensandbox_short_lease()
