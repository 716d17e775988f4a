"""The Dags of ``make bench``'s executor case (benchmarks/executor_overhead.py) on the
OpenSandboxExecutor: a task that returns at once, mapped RUNS times, from the warm pool, and
cold: its ``executor_config`` adds a variable, so its sandboxes are not the pool's and are
created. Uploaded into each try's sandbox, whose image lacks this provider: it imports nothing
of ours, nor the other bench Dag's file."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, task

WARM_DAG_ID = "bench_executor_warm"
COLD_DAG_ID = "bench_executor_cold"
# As overhead_default.RUNS: this file imports nothing beside it.
RUNS = 30
EXECUTOR = "OpenSandboxExecutor"


def overhead_dag(dag_id: str, **task_arguments: object) -> None:
    @dag(dag_id, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False)
    def bench_executor():
        @task(executor=EXECUTOR, **task_arguments)
        def at_once(n: int) -> int:
            return n

        at_once.expand(n=list(range(RUNS)))

    bench_executor()


overhead_dag(WARM_DAG_ID)
overhead_dag(COLD_DAG_ID, executor_config={"opensandbox": {"env": {"BENCH_COLD": "1"}}})
