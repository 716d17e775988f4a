"""A secret in ``private_env`` that the command prints: the task's XCom shows it masked, and
the next task checks what it was given."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_private_env"
SECRET = "private-env-value-7d41c0e2b9"
CHECKED = "opensandbox private_env check passed"


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_private_env():
    printed = OpenSandboxOperator(
        task_id="print_the_secret",
        spec=SandboxSpec(block_network=False),
        private_env={"API_TOKEN": SECRET},
        # The command sees the value itself: it prints its length, which is not secret.
        command='echo "token: $API_TOKEN"; printf %s "$API_TOKEN" | wc -c',
    )

    @task
    def check(result: dict) -> None:
        assert result["stdout"] == f"token: ***\n{len(SECRET)}\n", result
        print(CHECKED)

    check(printed.output)


opensandbox_private_env()
