"""A Dag for test_two_deployments.py, run by two Airflow deployments at once: one run holds a
command for a while, the other fails its first try, and its retry kills what earlier tries of
the task instance left, which must be its own alone. Then each lists the run's sandboxes."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime, timedelta

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import Param, dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_two_deployments"
# Both deployments' runs start "after" this, which names the run: `airflow dags test` would name
# each after the moment it starts, and the two runs must share one run id.
RUN_AFTER = datetime(2026, 1, 2, tzinfo=UTC)
RUN_ID = f"manual__{RUN_AFTER.isoformat()}"
LISTED = "listed sandboxes:"
log = logging.getLogger(DAG_ID)


@dag(
    dag_id=DAG_ID,
    start_date=RUN_AFTER,
    schedule=None,
    params={"seconds": Param(0, type="integer"), "fail_first_try": Param(False, type="boolean")},
)
def opensandbox_two_deployments():
    command = OpenSandboxOperator(
        task_id="command",
        spec=SandboxSpec(block_network=False),
        retries=1,
        retry_delay=timedelta(0),
        command=(
            "{% if params.fail_first_try and ti.try_number == 1 %}exit 3"
            "{% else %}sleep {{ params.seconds }}; echo finished{% endif %}"
        ),
    )

    @task
    def list_the_runs_sandboxes(ti=None) -> list[str]:
        from opensandbox_provider.hooks.opensandbox import OpenSandboxHook

        found = OpenSandboxHook().list_sandboxes(
            dag_id=ti.dag_id, run_id=ti.run_id, states=["Running"]
        )
        log.info("%s %s", LISTED, sorted(s.id for s in found))
        return [s.id for s in found]

    command >> list_the_runs_sandboxes()


DAG = opensandbox_two_deployments()

if __name__ == "__main__":
    DAG.test(run_after=RUN_AFTER, logical_date=RUN_AFTER, run_conf=json.loads(sys.argv[1]))
