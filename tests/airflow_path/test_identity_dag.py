"""Identity in a real task run, under `airflow dags test`: the operator's XCom and the stamp
the backend puts on a sandbox, found again by the run's real (hashed) run id."""

from __future__ import annotations

from pathlib import Path

from dev.stack.state import ServerInfo
from tests.airflow_path.dags_test import dags_test

DAG_FILE = Path(__file__).with_name("identity_dag.py")


def test_a_real_task_stamps_its_identity_and_pushes_its_sandbox_id(
    plain_server: ServerInfo, tmp_path: Path
) -> None:
    output = dags_test(DAG_FILE, "opensandbox_identity_check", plain_server, tmp_path)
    assert "identity check passed" in output
