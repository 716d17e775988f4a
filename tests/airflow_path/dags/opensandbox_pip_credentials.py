"""A decorated function whose requirements come from an index that wants credentials in its
URL, given in ``pip_args`` and in a requirement's URL: the set-up fails (the index is the
set-up sandbox's own loopback, where nothing answers), and its failure quotes the command."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, task

DAG_ID = "opensandbox_pip_credentials"
TASK_ID = "needs_a_private_index"
INDEX_PASSWORD = "index-password-51c7d2a0"
WHEEL_TOKEN = "wheel-token-80b4f6e1"


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_pip_credentials():
    @task.opensandbox(
        task_id=TASK_ID,
        requirements=[f"private-tool @ http://127.0.0.1:9/private-tool.whl?token={WHEEL_TOKEN}"],
        # Nothing listens on port 9, so pip fails at once, without retrying for minutes.
        pip_args=[
            "--index-url",
            f"http://deploy:{INDEX_PASSWORD}@127.0.0.1:9/simple",
            "--retries",
            "0",
            "--timeout",
            "2",
        ],
        retries=0,
    )
    def needs_a_private_index() -> None:
        return None

    needs_a_private_index()


opensandbox_pip_credentials()
