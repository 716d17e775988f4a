"""A Dag run cancelled while its agent's command runs: the sandbox must not outlive the task.

What an experienced Airflow user expects: cancelling a run (marking it or the task failed, or
clearing it) stops the task, and nothing it started keeps running or costing money. Airflow's
supervisor does this by sending the task process SIGTERM and, 5 seconds later, SIGKILL
(``ActivitySubprocess.kill(SIGTERM, force=True)``). On SIGTERM the Task SDK calls the operator's
``on_kill``; ``AgentOperator`` cancels its agent run there, the run unwinds, and the
``SandboxToolset`` destroys its sandbox on the way out. So the sandbox has to be gone within that
5-second window, without waiting for the server-side lifetime (an hour by default) to reclaim it.

The task runs under ``airflow tasks test``, which executes it in-process through the same task
runner (and the same SIGTERM handler) a worker uses; the test plays the supervisor's part.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.containers import assert_no_container
from tests.reliability.cleanup import destroy_directly

REPO = Path(__file__).resolve().parents[2]
DAGS = Path(__file__).resolve().parent / "dags"
# The supervisor's escalation delay between SIGTERM and SIGKILL.
KILL_ESCALATION_SECONDS = 5.0
START_SECONDS = 180.0


def _sandbox_running(token: str) -> tuple[str, str] | None:
    """(sandbox id, container) of the sandbox whose env carries ``token``, once its command runs."""
    ids = subprocess.run(
        ["docker", "ps", "-q", "--filter", "label=opensandbox.io/id"],
        capture_output=True,
        text=True,
    ).stdout.split()
    if not ids:
        return None
    inspected = json.loads(
        subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True).stdout or "[]"
    )
    for container in inspected:
        if f"RELIABILITY_TOKEN={token}" in (container["Config"]["Env"] or []):
            top = subprocess.run(
                ["docker", "top", container["Id"]], capture_output=True, text=True
            ).stdout
            if "sleep 300" in top:
                return container["Config"]["Labels"]["opensandbox.io/id"], container["Id"]
    return None


@pytest.mark.slow
def test_cancelled_dag_run_destroys_the_sandbox_before_the_kill(tmp_path, plain_server, stack):
    token = f"cancel-{secrets.token_hex(6)}"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": str(REPO),
        "RELIABILITY_TOKEN": token,
        "RELIABILITY_IMAGE": stack.sandbox_image,
        "OPENSANDBOX_DISABLE_METRICS": "1",
        **plain_server.airflow_connection_env("opensandbox_reliability", use_server_proxy=False),
    }
    airflow = [sys.executable, "-m", "airflow"]
    subprocess.run([*airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    log_path = tmp_path / "task.log"
    with log_path.open("wb") as log:
        task = subprocess.Popen(
            [*airflow, "tasks", "test", "cancel_mid_command", "agent"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    sandbox = None
    try:
        deadline = time.monotonic() + START_SECONDS
        while (found := _sandbox_running(token)) is None:
            if task.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text()[-3000:]
                pytest.fail(f"the agent never got to its long command; {log_path} ends:\n{tail}")
            time.sleep(0.5)
        sandbox, _ = found

        task.send_signal(signal.SIGTERM)
        try:
            task.wait(KILL_ESCALATION_SECONDS)
        except subprocess.TimeoutExpired:
            task.kill()
            task.wait()

        assert_no_container(sandbox)
        log_text = log_path.read_text(errors="replace")
        assert "cancelling in-flight agent run" in log_text
        assert plain_server.api_key not in log_text
    finally:
        if task.poll() is None:
            task.kill()
            task.wait()
        if sandbox is not None:
            destroy_directly(plain_server, [sandbox])
