"""The maintenance Dag under `airflow dags test`: it kills a finished task's leaked sandbox and
keeps a running task's, and another Airflow deployment's sandbox of the same task instance."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.sdk.execution_time.context import set_current_context

from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.airflow_path.dags_test import dags_test, deployment_of, prepared

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "system_tests" / "example_opensandbox_maintenance.py"
DAG_ID = "example_opensandbox_maintenance"
TASK_ID = "kill_leaked_sandboxes"
# Only this Dag's sandboxes are judged, so that nobody else's on the shared server are touched.
CONF = ("--conf", json.dumps({"dag_ids": [DAG_ID]}))


def leaked(backend: OpenSandboxBackend, run_id: str | None) -> str:
    """A sandbox left by this Dag's task in ``run_id`` (or made outside any task), unheld."""
    spec = SandboxSpec(block_network=False)
    if run_id is None:
        sandbox = backend.create(spec=spec)
    else:
        ti = SimpleNamespace(
            dag_id=DAG_ID, task_id=TASK_ID, run_id=run_id, map_index=-1, try_number=1
        )
        with set_current_context({"ti": ti}):  # type: ignore[arg-type]
            sandbox = backend.create(spec=spec)
    backend.hand_over(sandbox)
    return sandbox


def test_a_finished_tasks_sandbox_is_killed_and_a_running_tasks_kept(
    plain_server: ServerInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(2):
        dags_test(DAG_FILE, DAG_ID, plain_server, tmp_path, *CONF)
    with sqlite3.connect(tmp_path / "airflow.db") as db:
        finished, running = (row[0] for row in db.execute("SELECT run_id FROM dag_run ORDER BY id"))
        # The second run's task, as if it still ran on another worker.
        db.execute("UPDATE task_instance SET state = 'running' WHERE run_id = ?", (running,))
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    backend, hook = OpenSandboxBackend(CONN_ID), OpenSandboxHook(CONN_ID)
    # A finished task instance of another deployment, which this one's cleanup must not judge.
    monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", "another-deployment")
    made = [leaked(backend, finished)]
    # The rest as this deployment's tasks would leave them: stamped with its id.
    deployment = deployment_of(prepared(DAG_FILE, plain_server, tmp_path))
    monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", deployment)
    made = [leaked(backend, finished), leaked(backend, running), leaked(backend, None), *made]
    try:
        output = dags_test(DAG_FILE, DAG_ID, plain_server, tmp_path, *CONF)
        states = {s.id: s.state for s in hook.list_sandboxes() if s.id in made}
        monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", "another-deployment")
        states |= {s.id: s.state for s in hook.list_sandboxes() if s.id in made}
    finally:
        for sandbox in made:
            hook.kill_sandbox(sandbox)
    assert f"Killed sandbox {made[0]}: task {TASK_ID} of run {finished}" in output
    assert states.get(made[0], "Terminated") == "Terminated"
    assert states[made[1]] == "Running" and states[made[2]] == "Running"
    assert states[made[3]] == "Running" and made[3] not in output
