"""The system-test Dag run by a real Airflow 3 (scheduler, LocalExecutor, api-server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.airflow_stack.home import SYSTEM_TEST_DAG
from tests.airflow_stack.running import CONN_ID, DAG_ID, PASSED_LINE, DagRunOutcome
from tests.stack.state import ServerInfo


def test_system_test_dag_run_succeeds_in_airflow(dag_run: DagRunOutcome) -> None:
    assert dag_run.state == "success", "\n".join(dag_run.story())


def test_task_log_tells_the_sandbox_lifecycle_in_order(dag_run: DagRunOutcome) -> None:
    story = dag_run.story()
    rest = "\n".join(story)
    for expected in (
        # The sandbox is created lazily, by the first tool call.
        "Tool call 1/5: write_file",
        "Created OpenSandbox sandbox",
        "from image python:3.12-slim with no network policy (egress open)",
        "execd answered its health check",
        "Tool call 2/5: run_command",
        "Tool call 3/5: read_file",
        "Tool call 4/5: run_command",
        "Tool call 5/5: list_directory",
        "Destroyed sandbox",
        "is gone from the server after the teardown",
    ):
        assert expected in rest, f"{expected!r} missing or out of order in:\n" + "\n".join(story)
        rest = rest[rest.index(expected) + len(expected) :]
    # The Dag logs this line last, and only after every check above it passed.
    assert PASSED_LINE in rest.splitlines()


def test_airflow_dags_test_runs_the_system_test_dag(
    plain_server: ServerInfo, tmp_path: Path
) -> None:
    """The other documented way to run it: in-process, no scheduler, connection from the env."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / SYSTEM_TEST_DAG.name).symlink_to(SYSTEM_TEST_DAG)
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW", "PYTEST_"))
    } | {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **plain_server.airflow_connection_env(CONN_ID, use_server_proxy=True),
    }
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run([*airflow, "db", "migrate"], env=environment, capture_output=True, check=True)
    result = subprocess.run(
        [*airflow, "dags", "test", DAG_ID],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "state=success" in output
    assert PASSED_LINE in output
