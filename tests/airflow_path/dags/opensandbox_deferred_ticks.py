"""A deferred command long enough to watch it wait: ``seconds`` ticks, one a second, then
``done``. The triggerer-restart test and the UI's deferred-state test run it."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_deferred_ticks"
TASK_ID = "ticks"


def expected_stdout(seconds: int) -> str:
    """What the command prints, whole, for ``seconds`` ticks."""
    return "".join(f"tick {n}\n" for n in range(1, seconds + 1)) + "done\n"


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    params={"seconds": Param(25, type="integer", minimum=1)},
)
def opensandbox_deferred_ticks():
    OpenSandboxOperator(
        task_id=TASK_ID,
        # The local stack's plain server has no egress sidecar, so the sandbox is opened.
        spec=SandboxSpec(block_network=False),
        cpu="250m",
        memory="256Mi",
        deferrable=True,
        command="for i in $(seq 1 {{ params.seconds }}); do echo tick $i; sleep 1; done; echo done",
    )


opensandbox_deferred_ticks()
