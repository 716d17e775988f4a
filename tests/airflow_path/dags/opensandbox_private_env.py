"""A secret in ``private_env`` that the command prints, in the foreground and deferred to the
triggerer: each task's XCom shows it masked, and the next task checks what it was given."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_private_env"
SECRET = "private-env-value-7d41c0e2b9"
DEFERRED_SECRET = "deferred-private-value-3e9a51"
DEFERRED_TASK_ID = "print_the_secret_deferred"
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

    # The triggerer logs each line, and Airflow logs and stores the event with the tails.
    deferred = OpenSandboxOperator(
        task_id=DEFERRED_TASK_ID,
        deferrable=True,
        spec=SandboxSpec(block_network=False),
        private_env={"API_TOKEN": DEFERRED_SECRET},
        command='echo "token: $API_TOKEN"; echo "on stderr: $API_TOKEN" >&2',
    )

    @task
    def check(result: dict, deferred_result: dict) -> None:
        assert result["stdout"] == f"token: ***\n{len(SECRET)}\n", result
        assert deferred_result["stdout"] == "token: ***\n", deferred_result
        print(CHECKED)

    check(printed.output, deferred.output)


opensandbox_private_env()
