"""The Dag of ``make bench``'s executor case (benchmarks/executor_overhead.py) on the
deployment's default executor: a task that returns at once, mapped RUNS times. Alone in its
file, so that an Airflow without the OpenSandboxExecutor (the celery topology's) parses it."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, task

DAG_ID = "bench_executor_default"
RUNS = 30


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False)
def bench_executor_default():
    @task
    def at_once(n: int) -> int:
        return n

    at_once.expand(n=list(range(RUNS)))


bench_executor_default()
