"""Dags for test_executor.py: tasks on the OpenSandboxExecutor, mapped ones among them, beside
one on LocalExecutor; a task that waits, for its log to be read and its sandbox killed or the
task marked failed; and one that outlives the scheduler that started it.

The file is uploaded into each try's sandbox, whose image holds Airflow and the Task SDK but not
this provider: it imports nothing of ours."""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import UTC, datetime

from airflow.sdk import dag, task

DAG_ID = "opensandbox_executor"
# Two Dags that wait, so that both runs start at once with run ids of their own.
KILLED_DAG_ID = "opensandbox_executor_killed"
MARKED_DAG_ID = "opensandbox_executor_marked"
EXECUTOR = "OpenSandboxExecutor"
# How many mapped tries run, each in a sandbox of its own.
MAPPED = 50
PASSED = "executor check passed"
WAITING_LINE = "waiting in the sandbox for the test"
# Long enough for the test to read the log while it runs and kill the sandbox under it.
WAIT_SECONDS = 300
ADOPTED_DAG_ID = "opensandbox_executor_adopted"
ADOPTED_LINE = "the try outlived its first scheduler"
# Long enough for a scheduler to be killed, restarted and to adopt the try while it runs.
ADOPTED_SECONDS = 30

log = logging.getLogger(DAG_ID)


@dag(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    default_args={"executor": EXECUTOR},
)
def opensandbox_executor():
    @task
    def numbers() -> list[int]:
        return list(range(1, MAPPED + 1))

    @task(executor_config={"opensandbox": {"env": {"SQUARE_NOTE": "from executor_config"}}})
    def square(n: int) -> int:
        log.info("square(%d) on %s: %s", n, socket.gethostname(), os.environ["SQUARE_NOTE"])
        return n * n

    @task
    def total(values: list[int]) -> int:
        assert sorted(values) == [n * n for n in range(1, MAPPED + 1)], values
        # The sandbox's egress allows the execution API's host alone: another name of the
        # stack's resolver is not even looked up.
        try:
            socket.getaddrinfo("other.test", 80)
        except OSError as e:
            log.info("other.test is not reachable from the sandbox: %s", e)
        else:
            raise AssertionError("The sandbox resolved other.test, which its egress denies.")
        log.info(PASSED)
        return sum(values)

    @task(executor="LocalExecutor")
    def beside(value: int) -> str:
        return f"{value} on LocalExecutor"

    beside(total(square.expand(n=numbers())))


def waiting_dag(dag_id: str) -> None:
    """A Dag whose one task logs a line and waits, to be killed or marked failed meanwhile."""

    @dag(
        dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        default_args={"executor": EXECUTOR, "retries": 0},
    )
    def waiting():
        @task
        def wait() -> None:
            log.info(WAITING_LINE)
            time.sleep(WAIT_SECONDS)

        wait()

    waiting()


@dag(
    ADOPTED_DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    default_args={"executor": EXECUTOR, "retries": 0},
)
def opensandbox_executor_adopted():
    @task
    def outlive_the_scheduler() -> None:
        log.info(WAITING_LINE)
        time.sleep(ADOPTED_SECONDS)
        log.info(ADOPTED_LINE)

    outlive_the_scheduler()


opensandbox_executor()
waiting_dag(KILLED_DAG_ID)
waiting_dag(MARKED_DAG_ID)
opensandbox_executor_adopted()
