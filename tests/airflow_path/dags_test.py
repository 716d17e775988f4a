"""``airflow dags test`` of one system-test Dag: in-process, no scheduler, connection from the
environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo
from opensandbox_provider._deployment import VARIABLE

AIRFLOW = [sys.executable, "-m", "airflow"]


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


def dags_test(
    dag_file: Path,
    dag_id: str,
    server: ServerInfo,
    home: Path,
    *arguments: str,
    settings: Mapping[str, str] | None = None,
) -> str:
    """
    Run ``dag_id`` from ``dag_file`` in the Airflow home ``home``, fresh on the first run;
    its output, once it passed. ``arguments`` go to ``airflow dags test`` after the Dag id;
    ``settings`` are added to its environment.
    """
    environment = prepared(dag_file, server, home) | dict(settings or {})
    result = subprocess.run(
        [*AIRFLOW, "dags", "test", dag_id, *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return passed(result.returncode, result.stdout + result.stderr)


def prepared(dag_file: Path, server: ServerInfo, home: Path) -> dict[str, str]:
    """The environment of an Airflow in ``home`` (its database made) with ``dag_file`` in it:
    Airflow's defaults but for the Dags and the connection, none of this process's settings."""
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    if not (dags / dag_file.name).exists():
        (dags / dag_file.name).symlink_to(dag_file)
    environment = airflow_environment(home, server)
    subprocess.run([*AIRFLOW, "db", "migrate"], env=environment, capture_output=True, check=True)
    return environment


def passed(returncode: int, output: str) -> str:
    """``output`` of an ``airflow dags test`` that ended with its run a success."""
    assert returncode == 0, output[-4000:]
    assert "state=success" in output
    return output


def deployment_of(environment: dict[str, str]) -> str:
    """The deployment id the Airflow of ``environment`` stamps, once a task of it has made it."""
    result = subprocess.run(
        [*AIRFLOW, "variables", "get", VARIABLE],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]
