"""
System test: tasks on the OpenSandboxExecutor, each try in a sandbox of its own, beside a task
on the deployment's default executor (docs/executor.rst).

Three mapped tries report the host they ran on and whether this provider can be imported
there; the task on the default executor reports its own host; the last task, on the
OpenSandboxExecutor too, checks that the three tries ran on three hosts, none of them the other
task's, in an image without this provider, and its last log line is
``opensandbox executor e2e passed``.

Needs Airflow 3 with the executor beside a default one (``[core] executor =
LocalExecutor,opensandbox_provider.executors.OpenSandboxExecutor``, or CeleryExecutor first)
and its ``[opensandbox_executor]`` options; ``make demo`` sets them for the local stack and for
the celery topology. The file
is uploaded into each try's sandbox, whose image holds Airflow's Task SDK but not this
provider: it imports nothing of ours.
"""

from __future__ import annotations

import importlib.util
import logging
import socket
from datetime import UTC, datetime

from airflow.sdk import dag, task

DAG_ID = "example_opensandbox_executor"
PASSED = "opensandbox executor e2e passed"
EXECUTOR = "OpenSandboxExecutor"
PROVIDER = "opensandbox_provider"

# Named for the Dag, not the module: Airflow imports this file under a generated module name.
log = logging.getLogger(DAG_ID)


@dag(
    dag_id=DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["opensandbox", "executor", "system_test"],
)
def example_opensandbox_executor():
    @task(executor=EXECUTOR)
    def where(n: int) -> dict:
        here = {
            "n": n,
            "host": socket.gethostname(),
            "provider_installed": importlib.util.find_spec(PROVIDER) is not None,
        }
        log.info("try %d ran on %s", n, here["host"])
        return here

    # On the deployment's default executor, the first it lists.
    @task
    def beside() -> str:
        host = socket.gethostname()
        log.info("the default executor's task ran on %s", host)
        return host

    @task(executor=EXECUTOR)
    def check(tries: list[dict], other_host: str) -> None:
        hosts = {each["host"] for each in tries}
        assert sorted(each["n"] for each in tries) == [1, 2, 3], tries
        assert len(hosts) == 3, f"the three tries shared a host: {tries}"
        assert other_host not in hosts, f"a try ran on the other task's host {other_host}"
        assert not any(each["provider_installed"] for each in tries), tries
        log.info("three tries on three sandboxes %s, beside %s", sorted(hosts), other_host)
        log.info(PASSED)

    check(where.expand(n=[1, 2, 3]), beside())


example_opensandbox_executor()
