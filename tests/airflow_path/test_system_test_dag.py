"""The system-test Dag under `airflow dags test`, the in-process way to run it."""

from __future__ import annotations

from pathlib import Path

from dev.airflow_stack.home import SYSTEM_TEST_DAG
from dev.airflow_stack.running import DAG_ID, PASSED_LINE
from dev.stack.state import ServerInfo
from tests.airflow_path.dags_test import dags_test


def test_airflow_dags_test_runs_the_system_test_dag(
    plain_server: ServerInfo, tmp_path: Path
) -> None:
    """The other documented way to run it: in-process, no scheduler, connection from the env."""
    assert PASSED_LINE in dags_test(SYSTEM_TEST_DAG, DAG_ID, plain_server, tmp_path)
