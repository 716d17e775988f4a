"""Fixtures for the Airflow user's path: a running Airflow with one run of each system-test Dag."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dev.airflow_stack import components
from dev.airflow_stack.home import AIRFLOW_DIR, OPERATOR_DAG_FILE, AirflowSite
from dev.airflow_stack.running import (
    DEMO_DAGS,
    OPERATOR_DAG,
    TOOLSET_DAG,
    DagRunOutcome,
    RunningAirflow,
    run_system_tests,
    running_airflow,
)
from dev.stack.state import ServerInfo, read_state
from opensandbox_provider.decorators._requirements import set_up_commands
from opensandbox_provider.sandbox._snapshots import snapshot_name

# Dags only the tests run, parsed beside the demo's.
TEST_DAGS = sorted((Path(__file__).parent / "dags").glob("opensandbox_*.py"))


@pytest.fixture(scope="module", autouse=True)
def demo_environment_deleted() -> Iterator[None]:
    """
    After each module, the prepared environment the operator system-test Dag's decorated task
    made: kept by design for its next run, but a test run must leave the servers as it found
    them, which the run-wide snapshot leak check holds it to.
    """
    yield
    try:
        state = read_state()
    except RuntimeError:
        return  # no stack, so no Dag ran
    name = _demo_environment_name()
    from opensandbox import SandboxManagerSync
    from opensandbox.models.sandboxes import SnapshotFilter

    for server in state.servers.values():
        manager = SandboxManagerSync.create(server.connection_config())
        try:
            for info in manager.list_snapshots(SnapshotFilter(name=name)).snapshot_infos:
                manager.delete_snapshot(info.id)
        finally:
            manager.close()


def _demo_environment_name() -> str:
    """The name the operator Dag's requirements snapshot gets from its inputs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("operator_dag", OPERATOR_DAG_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands = set_up_commands(module.REQUIREMENTS, module.PIP_ARGS)
    return snapshot_name(base="image:python:3.12-slim", commands=commands, env={}, workdir=None)


@pytest.fixture(scope="module")
def airflow_settings() -> dict[str, str]:
    """Configuration a module adds to its Airflow's, as environment variables: none here."""
    return {}


@pytest.fixture(scope="module")
def airflow(plain_server: ServerInfo, airflow_settings: dict[str, str]) -> Iterator[RunningAirflow]:
    """Airflow started the way ``make demo`` starts it, in a fresh home, stopped afterwards."""
    home = AIRFLOW_DIR / "pytest"
    components.stop(home)  # left running by an interrupted earlier session
    shutil.rmtree(home, ignore_errors=True)
    site = replace(AirflowSite.prepare(home, extra_dags=TEST_DAGS), settings=airflow_settings)
    with running_airflow(site) as running:
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
