"""The attach system-test Dag, run by ``airflow dags test`` in a fresh Airflow home.

Provision, attach and collect run as three real task instances of one Dag run, with the
sandbox handle passed by XCom and rendered into ``attach_to`` by ``AgentOperator``. The
prepared-environment variant adds a task that makes a snapshot first, starts the sandbox
from it, and deletes it at the end.
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
PREPARED_DAG_ID = f"{DAG_ID}_prepared"
PASSED = "sandbox attach e2e passed"
PREPARED_PASSED = "sandbox attach prepared e2e passed"
# Three tasks, each a few seconds; far past this the run is stuck, not slow.
RUN_BOUND_SECONDS = 600
# Settings inherited from the caller would change what this Airflow does.
_INHERITED_PREFIXES = ("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_", "PYTEST_", "_AIRFLOW")

pytestmark = pytest.mark.slow


def run_dag_test(dag_id: str, server: ServerInfo, home: Path) -> str:
    """The output of one ``airflow dags test`` run of ``dag_id`` against ``server``."""
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
        **server.airflow_connection_env("opensandbox_default"),
    )
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run(
        [airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300
    )
    run = subprocess.run(
        [airflow, "dags", "test", dag_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_SECONDS,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    return output


@pytest.fixture(scope="module")
def dag_test(plain_server: ServerInfo, tmp_path_factory) -> str:
    """The output of one ``airflow dags test`` run of the Dag against the plain server."""
    return run_dag_test(DAG_ID, plain_server, tmp_path_factory.mktemp("airflow-home"))


@pytest.fixture(scope="module")
def prepared_dag_test(plain_server: ServerInfo, tmp_path_factory) -> str:
    """The same for its prepared-environment variant."""
    return run_dag_test(PREPARED_DAG_ID, plain_server, tmp_path_factory.mktemp("airflow-home"))


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


@pytest.mark.needs_snapshots
def test_the_prepared_variant_starts_the_attached_sandbox_from_a_snapshot_and_deletes_it(
    prepared_dag_test, plain_server
):
    assert re.search(r"DagRun Finished: .*state=success", prepared_dag_test), prepared_dag_test
    snapshot = re.search(r"Prepared snapshot (\S+)\.", prepared_dag_test)
    assert snapshot, prepared_dag_test
    # The agent's first command imports what only the set-up made, and then does the rest.
    assert "Tool call 1/5: run_command" in prepared_dag_test
    assert "Tool call 5/5: list_directory" in prepared_dag_test
    assert PREPARED_PASSED in prepared_dag_test
    assert f"Deleted snapshot {snapshot.group(1)}." in prepared_dag_test
    manager = SandboxManagerSync.create(plain_server.connection_config())
    try:
        with pytest.raises(SandboxApiException) as gone:
            manager.get_snapshot(snapshot.group(1))
    finally:
        manager.close()
    assert gone.value.status_code == 404
