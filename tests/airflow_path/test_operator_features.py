"""The operator's Airflow-facing features in one real Airflow (started once for them all):
``private_env`` masked in the task log the worker wrote, the XCom it pushed and every rendered
field, and, deferred, in the triggerer's log and the event it fired; credentials in
``pip_args`` and a requirement's URL masked in the log of a set-up that failed, and in none of
its rendered fields or XComs; an output declared as an asset starting the Dag scheduled on
that asset, reading a stored file as its input; the lineage of that run, as the OpenLineage
provider's file transport wrote it, and the metrics it sent to a StatsD listener of ours."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dev.airflow_stack import components
from dev.airflow_stack.running import RunningAirflow, trigger, wait_for_dag
from dev.stack.state import ServerInfo
from tests.airflow_path.dags import opensandbox_asset_producer as assets
from tests.airflow_path.dags import opensandbox_pip_credentials as pip_dag
from tests.airflow_path.dags import opensandbox_private_env as secret_dag
from tests.airflow_path.statsd_listener import StatsdListener

RUN_TIMEOUT = 300.0
TASK_ID = "print_the_secret"
# What the asset producer's task copies in, and so what its report ends with.
LETTERS = "a,3\n"
# The OpenLineage provider writes a task's events as the task ends, from the task's process.
LINEAGE_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def statsd() -> Iterator[StatsdListener]:
    with StatsdListener() as listener:
        yield listener


@pytest.fixture(scope="module")
def lineage_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("openlineage") / "events.jsonl"


@pytest.fixture(scope="module")
def airflow_settings(statsd: StatsdListener, lineage_file: Path) -> dict[str, str]:
    """This module's Airflow sends its metrics to our listener and writes its lineage events to
    a file, one JSON document a line, through the OpenLineage provider's own transport."""
    transport = {"type": "file", "log_file_path": str(lineage_file), "append": True}
    return {**statsd.settings(), "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)}


@pytest.fixture(scope="module")
def asset_run(airflow: RunningAirflow, plain_server: ServerInfo) -> str:
    """The id of a successful run of the asset producer, with the consumer unpaused first."""
    home = airflow.site.home.resolve()
    letters = assets.letters_path(home)
    letters.parent.mkdir(parents=True, exist_ok=True)
    letters.write_text(LETTERS)
    api = airflow.api
    wait_for_dag(api, assets.CONSUMER)
    api.unpause(assets.CONSUMER)
    run_id = trigger(airflow, plain_server, assets.PRODUCER)
    assert api.wait_for_run(assets.PRODUCER, run_id, timeout=RUN_TIMEOUT) == "success"
    return run_id


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
    airflow: RunningAirflow, asset_run: str
) -> None:
    api, run_id = airflow.api, asset_run
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
    # Its command read the stored file copied in, and wrote the report the consumer read.
    assert report.read_text() == f"letter,count\n{LETTERS}"
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


def test_the_operators_lineage_names_its_input_and_output_datasets_and_its_sandbox(
    airflow: RunningAirflow, asset_run: str, lineage_file: Path
) -> None:
    home = airflow.site.home.resolve()
    job = f"{assets.PRODUCER}.write_report"
    events = _lineage_events(lineage_file, job, "COMPLETE", run_id=asset_run)
    (complete,) = events
    # The datasets the OpenLineage provider makes of local files: namespace file, the path.
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [
        ("file", str(assets.letters_path(home)))
    ]
    assert [(d["namespace"], d["name"]) for d in complete["outputs"]] == [
        ("file", str(assets.report_path(home)))
    ]
    facet = complete["run"]["facets"]["opensandbox_sandbox"]
    sandbox = airflow.api.xcoms(assets.PRODUCER, asset_run, "write_report")["sandbox_id"]
    # OpenLineage's serializer leaves out a field that is None: no snapshot here.
    assert facet == {
        "_producer": facet["_producer"],
        "_schemaURL": facet["_schemaURL"],
        "sandboxId": sandbox,
        "image": "python:3.12-slim",
    }
    # The start, before any sandbox, named the same datasets already.
    (start,) = _lineage_events(lineage_file, job, "START", run_id=asset_run)
    assert start["inputs"] == complete["inputs"] and start["outputs"] == complete["outputs"]
    assert "opensandbox_sandbox" not in start["run"]["facets"]


def test_the_providers_metrics_reach_a_statsd_listener_from_a_real_dag_run(
    asset_run: str, statsd: StatsdListener
) -> None:
    # The producer's sandbox, created cold, timed from asking for it to its being ready (the
    # module's other runs, made cold too, may have sent theirs).
    created = statsd.wait_for("opensandbox.sandbox.create.cold", timeout=10)
    assert all(made.kind == "ms" and 0 < made.value < RUN_TIMEOUT * 1000 for made in created)
    assert statsd.received("opensandbox.warm_pool.miss") == []


def _lineage_events(path: Path, job: str, kind: str, *, run_id: str) -> list[dict[str, Any]]:
    """The events of ``kind`` the task ``job`` of the Dag run ``run_id`` wrote to ``path``,
    once there are any."""
    deadline = time.monotonic() + LINEAGE_TIMEOUT
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [
            event
            for event in map(json.loads, lines)
            if event["job"]["name"] == job
            and event["eventType"] == kind
            and _airflow_run_id(event) == run_id
        ]
        if found:
            return found
        assert time.monotonic() < deadline, f"No {kind} event of {job} was written to {path}."
        time.sleep(1.0)


def _airflow_run_id(event: dict[str, Any]) -> str | None:
    """The Airflow run an event's task ran in, from the OpenLineage provider's own facet."""
    airflow_facet = event["run"]["facets"].get("airflow", {})
    return airflow_facet.get("dagRun", {}).get("run_id")
