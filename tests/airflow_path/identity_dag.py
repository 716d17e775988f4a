"""A Dag for test_identity_dag.py: in a real task run, the operator's sandbox id reaches XCom
and a sandbox the backend creates carries the running task instance's identity."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from airflow.providers.common.ai.sandbox import SandboxSpec
from airflow.sdk import dag, task

from opensandbox_provider.operators.opensandbox import OpenSandboxOperator

DAG_ID = "opensandbox_identity_check"
PASSED = "identity check passed"
OPEN = SandboxSpec(block_network=False)

log = logging.getLogger(DAG_ID)


@dag(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
def opensandbox_identity_check():
    operator = OpenSandboxOperator(task_id="operator", spec=OPEN, command="true")

    @task
    def backend_in_a_task(ti=None) -> None:
        from opensandbox_provider._identity import TaskInstanceIdentity
        from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
        from opensandbox_provider.sandbox import OpenSandboxBackend

        pushed = ti.xcom_pull(task_ids="operator", key="sandbox_id")
        assert isinstance(pushed, str) and pushed, pushed
        backend = OpenSandboxBackend()
        sandbox = backend.create(spec=OPEN)
        try:
            found = OpenSandboxHook().list_sandboxes(
                dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id, map_index=-1
            )
            assert [s.id for s in found] == [sandbox], found
            assert found[0].identity == TaskInstanceIdentity.of(ti), found[0].identity
        finally:
            backend.destroy(sandbox)
        log.info(PASSED)

    operator >> backend_in_a_task()


opensandbox_identity_check()
