"""``airflow dags test`` of one system-test Dag: in-process, no scheduler, connection from the
environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo


def airflow_environment(home: Path, server: ServerInfo) -> dict[str, str]:
    """The environment of an Airflow CLI in the home ``home``, its connection to ``server``."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW", "PYTEST_"))
    } | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **server.airflow_connection_env(CONN_ID, use_server_proxy=True),
    }


def dags_test(dag_file: Path, dag_id: str, server: ServerInfo, home: Path, *arguments: str) -> str:
    """
    Run ``dag_id`` from ``dag_file`` in the Airflow home ``home``, fresh on the first run;
    its output, once it passed. ``arguments`` go to ``airflow dags test`` after the Dag id.
    """
    dags = home / "dags"
    dags.mkdir(exist_ok=True)
    if not (dags / dag_file.name).exists():
        (dags / dag_file.name).symlink_to(dag_file)
    environment = airflow_environment(home, server)
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run([*airflow, "db", "migrate"], env=environment, capture_output=True, check=True)
    result = subprocess.run(
        [*airflow, "dags", "test", dag_id, *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "state=success" in output
    return output
