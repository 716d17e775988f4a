"""The operator's Airflow-facing features in one real Airflow (started once for them all):
``private_env`` masked in the task log the worker wrote, the XCom it pushed and every rendered
field, and, deferred, in the triggerer's log and the event it fired; credentials in
``pip_args`` and a requirement's URL masked in the log of a set-up that failed, and in none of
its rendered fields or XComs; an output declared as an asset starting the Dag scheduled on
that asset."""

from __future__ import annotations

import json
import time

from dev.airflow_stack import components
from dev.airflow_stack.running import RunningAirflow, trigger, wait_for_dag
from dev.stack.state import ServerInfo
from tests.airflow_path.dags import opensandbox_asset_producer as assets
from tests.airflow_path.dags import opensandbox_pip_credentials as pip_dag
from tests.airflow_path.dags import opensandbox_private_env as secret_dag

RUN_TIMEOUT = 300.0
TASK_ID = "print_the_secret"


def _run(
    airflow: RunningAirflow, server: ServerInfo, dag_id: str, task_id: str, *, ends: str
) -> tuple[str, str]:
    """Run the Dag to its end, which must be ``ends``; the run's id and the task's log."""
    run_id = trigger(airflow, server, dag_id)
    assert airflow.api.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT) == ends
    return run_id, json.dumps(airflow.api.task_log(dag_id, run_id, task_id))


def test_a_secret_the_command_printed_is_masked_in_the_task_log_and_the_xcom(
    airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = airflow.api
    run_id, log = _run(airflow, plain_server, secret_dag.DAG_ID, TASK_ID, ends="success")
    # The command saw the value: it printed it, and its length.
    assert "[sandbox stdout] token: ***" in log
    assert f"[sandbox stdout] {len(secret_dag.SECRET)}" in log
    assert secret_dag.SECRET not in log
    returned = api.return_value(secret_dag.DAG_ID, run_id, TASK_ID)
    assert returned == {"exit_code": 0, "stdout": f"token: ***\n{len(secret_dag.SECRET)}\n"}
    rendered = api.task_instances(secret_dag.DAG_ID, run_id)[TASK_ID]["rendered_fields"]
    assert "command" in rendered and secret_dag.SECRET not in json.dumps(rendered)
    # Every XCom it pushed: the result and the sandbox's id.
    assert secret_dag.SECRET not in json.dumps(api.xcoms(secret_dag.DAG_ID, run_id, TASK_ID))

    # Deferred: the lines came through the triggerer, which logged the event with the tails.
    secret, deferred = secret_dag.DEFERRED_SECRET, secret_dag.DEFERRED_TASK_ID
    log = json.dumps(api.task_log(secret_dag.DAG_ID, run_id, deferred))
    assert "[sandbox stdout] token: ***" in log and "[sandbox stderr] on stderr: ***" in log
    assert secret not in log
    # The trigger's own log, which the triggerer writes beside the task's, holds the event as
    # Airflow logged it; the triggerer's process log holds its own lines.
    task_logs = airflow.site.home / "logs" / f"dag_id={secret_dag.DAG_ID}" / f"run_id={run_id}"
    trigger_logs = list((task_logs / f"task_id={deferred}").glob("*.trigger.*.log"))
    fired = "".join(path.read_text(errors="replace") for path in trigger_logs)
    assert "Trigger fired event" in fired and "'stdout': 'token: ***" in fired
    triggerer = components.log_file(airflow.site.home, "triggerer").read_text(errors="replace")
    assert secret not in fired and secret not in triggerer
    assert api.return_value(secret_dag.DAG_ID, run_id, deferred) == {
        "exit_code": 0,
        "stdout": "token: ***\n",
    }
    instance = api.task_instances(secret_dag.DAG_ID, run_id)[deferred]
    assert "command" in instance["rendered_fields"] and secret not in json.dumps(instance)
    assert secret not in json.dumps(api.xcoms(secret_dag.DAG_ID, run_id, deferred))


def test_credentials_in_pip_args_and_a_requirement_url_are_masked_when_the_set_up_fails(
    airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = airflow.api
    run_id, log = _run(airflow, plain_server, pip_dag.DAG_ID, pip_dag.TASK_ID, ends="failed")
    # The failure quotes the install command, with the index and the requirement it named.
    assert "The set-up command" in log and "http://deploy:***@127.0.0.1:9/simple" in log
    assert "private-tool.whl?token=***" in log
    assert pip_dag.INDEX_PASSWORD not in log and pip_dag.WHEEL_TOKEN not in log
    rendered = api.task_instances(pip_dag.DAG_ID, run_id)[pip_dag.TASK_ID]["rendered_fields"]
    pushed = api.xcoms(pip_dag.DAG_ID, run_id, pip_dag.TASK_ID)
    for secret in (pip_dag.INDEX_PASSWORD, pip_dag.WHEEL_TOKEN):
        assert secret not in json.dumps(rendered) and secret not in json.dumps(pushed)


def test_an_output_declared_as_an_asset_starts_the_dag_scheduled_on_it(
    airflow: RunningAirflow, plain_server: ServerInfo
) -> None:
    api = airflow.api
    wait_for_dag(api, assets.CONSUMER)
    api.unpause(assets.CONSUMER)
    run_id = trigger(airflow, plain_server, assets.PRODUCER)
    assert api.wait_for_run(assets.PRODUCER, run_id, timeout=RUN_TIMEOUT) == "success"

    consumer_run = _asset_triggered_run(airflow, timeout=RUN_TIMEOUT)
    assert api.wait_for_run(assets.CONSUMER, consumer_run, timeout=RUN_TIMEOUT) == "success"
    # Read once the run it started has started: Airflow 3.3's API cannot yet describe an event
    # whose Dag run has no start date.
    events = api.asset_events(source_dag_id=assets.PRODUCER, source_run_id=run_id)
    report = assets.report_path(airflow.site.home.resolve())
    assert [(event["uri"], event["source_task_id"]) for event in events] == [
        (f"file://{report}", "write_report")
    ]
    assert [run["run_id"] for run in events[0]["created_dagruns"]] == [consumer_run]
    assert report.read_text() == "letter,count\na,3\n"
    log = json.dumps(api.task_log(assets.CONSUMER, consumer_run, "read_report"))
    assert f"{assets.CONSUMED} a,3" in log


def _asset_triggered_run(airflow: RunningAirflow, *, timeout: float) -> str:
    """The consumer's run the asset event started, once the scheduler has made it."""
    deadline = time.monotonic() + timeout
    while True:
        runs = [
            run["dag_run_id"]
            for run in airflow.api.dag_runs(assets.CONSUMER)
            if run["run_type"] == "asset_triggered"
        ]
        if runs:
            assert len(runs) == 1, runs
            return runs[0]
        assert time.monotonic() < deadline, "No asset-triggered run of the consumer appeared."
        time.sleep(1.0)
