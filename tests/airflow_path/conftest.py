"""Fixtures for the Airflow user's path: a running Airflow with one run of the system-test Dag."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from dev.airflow_stack import components
from dev.airflow_stack.home import AIRFLOW_DIR, AirflowSite
from dev.airflow_stack.running import (
    DagRunOutcome,
    RunningAirflow,
    run_system_test,
    running_airflow,
)
from dev.stack.state import ServerInfo


@pytest.fixture(scope="module")
def airflow(plain_server: ServerInfo) -> Iterator[RunningAirflow]:
    """Airflow started the way ``make demo`` starts it, in a fresh home, stopped afterwards."""
    home = AIRFLOW_DIR / "pytest"
    components.stop(home)  # left running by an interrupted earlier session
    shutil.rmtree(home, ignore_errors=True)
    with running_airflow(AirflowSite.prepare(home)) as running:
        yield running


@pytest.fixture(scope="module")
def dag_run(airflow: RunningAirflow, plain_server: ServerInfo) -> DagRunOutcome:
    """One run of the system-test Dag on the stack's plain server, triggered through the API."""
    return run_system_test(airflow, plain_server)
