"""``private_env`` in a real Airflow: a secret the command prints is masked in the task log the
worker wrote and in the XCom it pushed, and appears in no rendered field."""

from __future__ import annotations

import json

from dev.airflow_stack.running import RunningAirflow, trigger
from dev.stack.state import ServerInfo
from tests.airflow_path.dags import opensandbox_private_env as secret_dag

RUN_TIMEOUT = 300.0
TASK_ID = "print_the_secret"


def test_a_secret_the_command_printed_is_masked_in_the_task_log_and_the_xcom(
    airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = airflow.api
    run_id = trigger(airflow, plain_server, secret_dag.DAG_ID)
    assert api.wait_for_run(secret_dag.DAG_ID, run_id, timeout=RUN_TIMEOUT) == "success"

    log = json.dumps(api.task_log(secret_dag.DAG_ID, run_id, TASK_ID))
    # The command saw the value: it printed it, and its length.
    assert "[sandbox stdout] token: ***" in log
    assert f"[sandbox stdout] {len(secret_dag.SECRET)}" in log
    assert secret_dag.SECRET not in log
    returned = api.return_value(secret_dag.DAG_ID, run_id, TASK_ID)
    assert returned == {"exit_code": 0, "stdout": f"token: ***\n{len(secret_dag.SECRET)}\n"}
    rendered = api.task_instances(secret_dag.DAG_ID, run_id)[TASK_ID]["rendered_fields"]
    assert "command" in rendered and secret_dag.SECRET not in json.dumps(rendered)
