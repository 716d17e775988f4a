"""The operator's system-test Dag under `airflow dags test`: a script, a decorated function
whose value the next task uses, and a deferred command, each in a sandbox of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev.stack.state import ServerInfo
from tests.airflow_path.dags_test import dags_test

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "system_tests" / "example_opensandbox_operator.py"


@pytest.mark.needs_snapshots
def test_airflow_dags_test_runs_the_operator_dag(plain_server: ServerInfo, tmp_path: Path) -> None:
    output = dags_test(DAG_FILE, "example_opensandbox_operator", plain_server, tmp_path)
    assert "opensandbox operator e2e passed" in output
    # The deferred command's lines were logged from the trigger, in order, while it ran.
    ticks = [output.index(f"tick {n}") for n in (1, 2, 3)]
    assert ticks == sorted(ticks)
    assert output.count("Destroyed sandbox") >= 3
