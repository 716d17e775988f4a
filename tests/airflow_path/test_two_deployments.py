"""Two Airflow deployments on one OpenSandbox server, each at its defaults (its own home and
metadata database, one connection definition for both), run the same Dag with the same run id:
one deployment's retry leaves the other's running sandbox alone, and neither lists the other's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from dev.stack.state import ServerInfo
from opensandbox_provider._deployment import KEY as DEPLOYMENT_KEY
from opensandbox_provider._identity import identity_metadata
from tests.airflow_path.dags_test import deployment_of, passed, prepared
from tests.airflow_path.two_deployments_dag import DAG_ID, LISTED, RUN_ID

DAG_FILE = Path(__file__).with_name("two_deployments_dag.py")
# Long enough for the other deployment's whole run, its retry included, to fall inside it.
HOLD_SECONDS = 45
APPEAR_SECONDS = 90


def _run(environment: dict[str, str], conf: dict[str, object]) -> subprocess.Popen[str]:
    # The Dag file runs its Dag itself, as `airflow dags test` does, under the run id both share.
    argv = [sys.executable, str(DAG_FILE), json.dumps(conf)]
    return subprocess.Popen(
        argv, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _running_sandbox(server: ServerInfo) -> tuple[str, str]:
    """The id and deployment stamp of the first deployment's sandbox, once it runs."""
    from opensandbox import SandboxManagerSync
    from opensandbox.models.sandboxes import SandboxFilter

    labels = identity_metadata({"dag_id": DAG_ID, "run_id": RUN_ID})
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        deadline = time.monotonic() + APPEAR_SECONDS
        while time.monotonic() < deadline:
            found = manager.list_sandbox_infos(SandboxFilter(metadata=labels, states=["Running"]))
            for info in found.sandbox_infos:
                return info.id, (info.metadata or {})[DEPLOYMENT_KEY]
            time.sleep(0.5)
    finally:
        manager.close()
    raise AssertionError(f"No sandbox of {DAG_ID} ran within {APPEAR_SECONDS} s.")


def test_one_deployments_retry_neither_kills_nor_lists_the_other_deployments_sandbox(
    plain_server: ServerInfo, tmp_path: Path
) -> None:
    holding_home, retrying_home = prepared_pair(plain_server, tmp_path)
    holding = _run(holding_home, {"seconds": HOLD_SECONDS})
    try:
        held, holding_deployment = _running_sandbox(plain_server)
        retrying = _run(retrying_home, {"fail_first_try": True})
        retried_output, _ = retrying.communicate(timeout=300)
        passed(retrying.returncode, retried_output)
        assert plain_server.has_sandbox(held), "the retry killed the other deployment's sandbox"
        held_output, _ = holding.communicate(timeout=300)
    finally:
        if holding.poll() is None:
            holding.kill()
            holding.wait()
    passed(holding.returncode, held_output)
    assert "finished" in held_output and "ended while the command ran" not in held_output
    # The retry ran, and killed nothing of the other deployment's.
    assert "try_number=2" in retried_output and RUN_ID in retried_output
    assert held not in retried_output
    retrying_deployment = deployment_of(retrying_home)
    assert deployment_of(holding_home) == holding_deployment != retrying_deployment
    # Each run listed the run's running sandboxes: the retrying one while the other's ran.
    assert f"{LISTED} []" in retried_output


def prepared_pair(server: ServerInfo, tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Two Airflow homes at their defaults, each with a database of its own."""
    return (
        prepared(DAG_FILE, server, tmp_path / "holding"),
        prepared(DAG_FILE, server, tmp_path / "retrying"),
    )
