"""A task of a Dag that runs on the OpenSandboxExecutor with sandboxes of its own making:
docs/executor.rst. The parse test configures the executor, as a deployment using it does."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def on_the_executor():
    # [START executor]
    @task(executor="OpenSandboxExecutor")
    def untrusted() -> int:
        return 42

    # [END executor]
    # [START executor_config]
    @task(
        executor="OpenSandboxExecutor",
        executor_config={"opensandbox": {"memory": "8Gi", "env": {"MODE": "full"}}},
    )
    def heavy() -> str:
        import os

        return os.environ["MODE"]

    # [END executor_config]
    untrusted()
    heavy()


on_the_executor()
