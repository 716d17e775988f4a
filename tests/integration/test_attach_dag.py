"""The attach system-test Dag, run by ``airflow dags test`` in a fresh Airflow home.

Provision, attach and collect run as three real task instances of one Dag run, with the
sandbox handle passed by XCom and rendered into ``attach_to`` by ``AgentOperator``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from opensandbox import SandboxManagerSync
from opensandbox.exceptions import SandboxApiException

from dev.stack.state import ServerInfo

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "system_tests" / "example_sandbox_toolset_opensandbox_attach.py"
DAG_ID = "example_sandbox_toolset_opensandbox_attach"
PASSED = "sandbox attach e2e passed"
# Three tasks, each a few seconds; far past this the run is stuck, not slow.
RUN_BOUND_SECONDS = 600
# Settings inherited from the caller would change what this Airflow does.
_INHERITED_PREFIXES = ("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_", "PYTEST_", "_AIRFLOW")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dag_test(plain_server: ServerInfo, tmp_path_factory) -> str:
    """The output of one ``airflow dags test`` run of the Dag against the plain server."""
    home = tmp_path_factory.mktemp("airflow-home")
    dags = home / "dags"
    dags.mkdir()
    shutil.copy(DAG_FILE, dags / DAG_FILE.name)
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(_INHERITED_PREFIXES)
    }
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        **plain_server.airflow_connection_env("opensandbox_default"),
    )
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run(
        [airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300
    )
    run = subprocess.run(
        [airflow, "dags", "test", DAG_ID],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_SECONDS,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    return output


def test_the_dag_run_succeeds(dag_test):
    assert re.search(r"DagRun Finished: .*state=success", dag_test), dag_test


def test_the_agent_attaches_to_the_provisioned_sandbox_and_writes_its_files(dag_test):
    provisioned = re.search(r"Provisioned sandbox (\S+) for (\S+)\.", dag_test)
    assert provisioned, dag_test
    handle, owner = provisioned.groups()
    assert owner.startswith(f"{DAG_ID}/manual__")
    assert f"Attached to sandbox {handle} on backend opensandbox as {owner}/agent" in dag_test
    for step in ("1/4: run_command", "2/4: write_file", "3/4: run_command", "4/4: list_directory"):
        assert f"Tool call {step}" in dag_test


def test_a_later_task_reads_the_files_back_and_destroys_the_sandbox(dag_test, plain_server):
    assert "held by nobody" in dag_test
    assert "Read back what the agent wrote: '# Findings" in dag_test
    assert PASSED in dag_test
    handle = re.search(r"Provisioned sandbox (\S+) for", dag_test).group(1)
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        with pytest.raises(SandboxApiException) as gone:
            manager.get_sandbox_info(handle)
    finally:
        manager.close()
    assert gone.value.status_code == 404
