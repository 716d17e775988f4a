"""The system-test Dag under `airflow dags test`, the in-process way to run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dev.airflow_stack.home import SYSTEM_TEST_DAG
from dev.airflow_stack.running import CONN_ID, DAG_ID, PASSED_LINE
from dev.stack.state import ServerInfo


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
