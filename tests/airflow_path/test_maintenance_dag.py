"""The cleanup Dag the package ships, under `airflow dags test`: it kills a finished task's leaked
sandbox, and keeps a running task's, a resumed deferred task's waiting for a pool slot, with the
output in it, one made outside a task, and another Airflow deployment's of the same task
instance; the kill reaches a StatsD listener of ours as a metric."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxSpec
from airflow.sdk.execution_time.context import set_current_context

from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo
from opensandbox_provider._metrics import KILLED_BY_CLEANUP
from opensandbox_provider.hooks.opensandbox import OpenSandboxHook
from opensandbox_provider.maintenance.dag import TASK_ID
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.airflow_path.dags_test import airflow_environment, dags_test, deployment_of
from tests.airflow_path.statsd_listener import Metric, StatsdListener

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "system_tests" / "example_opensandbox_maintenance.py"
DAG_ID = "example_opensandbox_maintenance"
# Run as a script in the Airflow home under test, which the test process is not.
WAITING = Path(__file__).with_name("waiting_task_instances.py")
# Only this Dag's sandboxes are judged, so that nobody else's on the shared server are touched.
CONF = ("--conf", json.dumps({"dag_ids": [DAG_ID]}))
# What the resumed task's command left in its sandbox, for the task to read once it resumes.
OUTPUT_PATH = "/tmp/report.txt"
OUTPUT = "rows: 42"


def leaked(backend: OpenSandboxBackend, run_id: str | None, command: str | None = None) -> str:
    """A sandbox left by this Dag's task in ``run_id`` (or made outside any task), unheld,
    after running ``command`` in it."""
    spec = SandboxSpec(block_network=False)
    if run_id is None:
        sandbox = backend.create(spec=spec)
    else:
        ti = SimpleNamespace(
            dag_id=DAG_ID, task_id=TASK_ID, run_id=run_id, map_index=-1, try_number=1
        )
        with set_current_context({"ti": ti}):  # type: ignore[arg-type]
            sandbox = backend.create(spec=spec)
    if command is not None:
        result = backend.run_command(sandbox, command, timeout=60, max_output_bytes=1024)
        assert result.exit_code == 0, result
    backend.hand_over(sandbox)
    return sandbox


def waiting_runs(home: Path, server: ServerInfo) -> tuple[str, str]:
    """A running and a resumed-but-waiting run of the Dag's task, made in ``home``'s database."""
    made = subprocess.run(
        [sys.executable, str(WAITING), DAG_ID, TASK_ID],
        env=airflow_environment(home, server),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-4000:]
    answer = json.loads(made.stdout.splitlines()[-1])
    assert answer["states"] == {"running": "running", "resumed": "scheduled"}
    return answer["runs"]["running"], answer["runs"]["resumed"]


def test_the_cleanup_kills_a_finished_tasks_sandbox_and_keeps_every_one_a_task_may_resume(
    plain_server: ServerInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dags_test(DAG_FILE, DAG_ID, plain_server, tmp_path, *CONF)
    with sqlite3.connect(tmp_path / "airflow.db") as db:
        (finished,) = (row[0] for row in db.execute("SELECT run_id FROM dag_run"))
    running, resumed = waiting_runs(tmp_path, plain_server)
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    backend, hook = OpenSandboxBackend(CONN_ID), OpenSandboxHook(CONN_ID)
    deployment = deployment_of(airflow_environment(tmp_path, plain_server))
    made: list[str] = []
    try:
        # A finished task instance of another deployment, which this one's cleanup must not judge.
        monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", "another-deployment")
        made.append(leaked(backend, finished))
        # The rest as this deployment's tasks would leave them: stamped with its id.
        monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", deployment)
        made.append(leaked(backend, finished))
        made.append(leaked(backend, running))
        made.append(leaked(backend, resumed, f"echo '{OUTPUT}' > {OUTPUT_PATH}"))
        made.append(leaked(backend, None))
        with StatsdListener() as statsd:
            settings = statsd.settings()
            output = dags_test(DAG_FILE, DAG_ID, plain_server, tmp_path, *CONF, settings=settings)
            # Sent while the task ran; the listener's thread may not have read it yet.
            cleanup_kills = statsd.wait_for(KILLED_BY_CLEANUP, timeout=10)
        states = {s.id: s.state for s in hook.list_sandboxes() if s.id in made}
        # Read only from a sandbox that survived, so a killed one fails the asserts below.
        kept_output = (
            backend.read_file(made[3], OUTPUT_PATH, max_bytes=1024)
            if states.get(made[3]) == "Running"
            else None
        )
        monkeypatch.setenv("AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID", "another-deployment")
        states |= {s.id: s.state for s in hook.list_sandboxes() if s.id in made}
    finally:
        for sandbox in made:
            hook.kill_sandbox(sandbox)
    assert (
        f"Killed sandbox {made[1]}: task {TASK_ID} of run {finished} of Dag {DAG_ID} is success"
        in output
    )
    assert "Killed 1 leaked sandbox(es)." in output
    # The metric a platform team watches said so too, through Airflow's StatsD client.
    assert cleanup_kills == [Metric(f"airflow.{KILLED_BY_CLEANUP}", 1.0, "c")]
    assert states.get(made[1], "Terminated") == "Terminated"
    assert [states.get(sandbox) for sandbox in made[2:]] == ["Running"] * 3
    # The resumed task finds the output its command left, once a slot frees.
    assert kept_output == f"{OUTPUT}\n".encode()
    # Another deployment's sandbox of a finished task instance is neither judged nor killed.
    assert states.get(made[0]) == "Running" and made[0] not in output
