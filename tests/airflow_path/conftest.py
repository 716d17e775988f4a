"""Fixtures for the Airflow user's path: a running Airflow with one run of each system-test Dag."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.airflow_stack import components
from dev.airflow_stack.home import AIRFLOW_DIR, AirflowSite
from dev.airflow_stack.running import (
    DEMO_DAGS,
    OPERATOR_DAG,
    TOOLSET_DAG,
    DagRunOutcome,
    RunningAirflow,
    run_system_tests,
    running_airflow,
)
from dev.stack.state import ServerInfo

# Dags only the tests run, parsed beside the demo's.
TEST_DAGS = sorted((Path(__file__).parent / "dags").glob("opensandbox_*.py"))


@pytest.fixture(scope="module")
def airflow(plain_server: ServerInfo) -> Iterator[RunningAirflow]:
    """Airflow started the way ``make demo`` starts it, in a fresh home, stopped afterwards."""
    home = AIRFLOW_DIR / "pytest"
    components.stop(home)  # left running by an interrupted earlier session
    shutil.rmtree(home, ignore_errors=True)
    with running_airflow(AirflowSite.prepare(home, extra_dags=TEST_DAGS)) as running:
        yield running


@pytest.fixture(scope="module")
def demo_runs(airflow: RunningAirflow, plain_server: ServerInfo) -> list[DagRunOutcome]:
    """One run of each system-test Dag on the stack's plain server, triggered at once, as
    ``make demo`` triggers them."""
    return run_system_tests(airflow, plain_server, DEMO_DAGS)


@pytest.fixture(scope="module")
def dag_run(demo_runs: list[DagRunOutcome]) -> DagRunOutcome:
    """The run of the toolset's system-test Dag."""
    return demo_runs[DEMO_DAGS.index(TOOLSET_DAG)]


@pytest.fixture(scope="module")
def operator_dag_run(demo_runs: list[DagRunOutcome]) -> DagRunOutcome:
    """The run of the operator's system-test Dag."""
    return demo_runs[DEMO_DAGS.index(OPERATOR_DAG)]
