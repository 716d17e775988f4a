"""The maintenance cleanup removes prepared snapshots by their recorded use, under
``airflow dags test`` in an Airflow of its own: the records are real Airflow Variables, one
written by a task through the Task SDK, and the snapshots are on the real server."""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dev.stack.state import ServerInfo
from opensandbox_provider.sandbox import OpenSandboxBackend, delete_snapshot, prepare_snapshot
from opensandbox_provider.sandbox._snapshot_use import key
from opensandbox_provider.sandbox._snapshots import find_snapshot, snapshot_name
from tests.airflow_path.dags_test import AIRFLOW, dags_test, prepared
from tests.airflow_path.snapshot_cleanup_dag import CONN_ID, DAG_ID

DAG_FILE = Path(__file__).with_name("snapshot_cleanup_dag.py")
DEPLOYMENT_OPTION = "AIRFLOW__OPENSANDBOX__DEPLOYMENT_ID"
WEEK_AND_A_DAY_AGO = (datetime.now(UTC) - timedelta(days=8)).isoformat()


def variables(environment: dict[str, str], folder: Path) -> dict[str, str]:
    """Every Variable of the Airflow of ``environment``, by key: its value alone."""
    exported = folder / "exported.json"
    subprocess.run(
        [*AIRFLOW, "variables", "export", str(exported)],
        env=environment,
        capture_output=True,
        check=True,
    )
    # One with a description is exported as its value and description.
    return {
        name: entry["value"] if isinstance(entry, dict) else entry
        for name, entry in json.loads(exported.read_text()).items()
    }


def set_variables(environment: dict[str, str], folder: Path, values: dict[str, str]) -> None:
    """Set ``values`` in the Airflow of ``environment``, with one command for them all."""
    imported = folder / "imported.json"
    imported.write_text(json.dumps(values))
    subprocess.run(
        [*AIRFLOW, "variables", "import", str(imported)],
        env=environment,
        capture_output=True,
        check=True,
    )


@pytest.mark.needs_snapshots
def test_the_cleanup_removes_this_deployments_unused_snapshot_and_keeps_a_used_one_and_anothers(
    plain_server: ServerInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = uuid.uuid4().hex
    # Another deployment's id begins with this one's: only the names tell them apart.
    ours, theirs = f"snapshots-{token[:8]}", f"snapshots-{token[:8]}-other"
    environment = prepared(DAG_FILE, plain_server, tmp_path) | {DEPLOYMENT_OPTION: ours}
    for name, value in plain_server.airflow_connection_env(CONN_ID).items():
        monkeypatch.setenv(name, value)
    backend = OpenSandboxBackend(CONN_ID)
    used_set_up = [f"echo {token} used > /opt/marker"]
    made: list[str] = []
    try:
        monkeypatch.setenv(DEPLOYMENT_OPTION, ours)
        made.append(prepare_snapshot(backend, [f"echo {token} unused > /opt/marker"]))
        monkeypatch.setenv(DEPLOYMENT_OPTION, theirs)
        made.append(prepare_snapshot(backend, [f"echo {token} theirs > /opt/marker"]))
        unused, others = made
        # Both last used over a week ago; this process has no metadata database to say so.
        set_variables(
            environment,
            tmp_path,
            {key(unused): WEEK_AND_A_DAY_AGO, key(others): WEEK_AND_A_DAY_AGO},
        )

        output = dags_test(
            DAG_FILE,
            DAG_ID,
            plain_server,
            tmp_path,
            "--conf",
            json.dumps({"set_up": used_set_up}),
            settings={DEPLOYMENT_OPTION: ours},
        )
        used = find_snapshot(
            backend._lifecycle,
            snapshot_name(
                deployment=ours,
                base=f"image:{backend.image}",
                commands=used_set_up,
                env={},
                workdir=None,
            ),
        )
        if used is not None:
            made.append(used)
        present = {snapshot: on_the_server(backend, snapshot) for snapshot in made}
        stored = variables(environment, tmp_path)
        records = {snapshot: stored.get(key(snapshot)) for snapshot in made}
    finally:
        for snapshot in made:
            delete_snapshot(backend, snapshot)

    assert used is not None, output[-4000:]
    assert f"Removed snapshot {unused}" in output
    assert "Removed 1 unused snapshot(s)." in output
    assert present == {unused: False, others: True, used: True}
    # The removed one's record went with it; the task recorded its use of the one it prepared.
    assert records[unused] is None
    assert records[others] == WEEK_AND_A_DAY_AGO
    recorded = records[used]
    assert recorded is not None
    assert datetime.now(UTC) - datetime.fromisoformat(recorded) < timedelta(minutes=10)


def on_the_server(backend: OpenSandboxBackend, snapshot: str) -> bool:
    from opensandbox.models.sandboxes import SnapshotFilter

    with backend._lifecycle.call("list snapshots") as api:
        page = api.list_snapshots(SnapshotFilter(page_size=200))
    return any(info.id == snapshot for info in page.snapshot_infos)
