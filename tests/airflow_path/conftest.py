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
from opensandbox_provider.sandbox._snapshots import NAME_PREFIX, snapshot_name

# Dags only the tests run, parsed beside the demo's.
TEST_DAGS = sorted((Path(__file__).parent / "dags").glob("opensandbox_*.py"))
# The hash of a prepared environment's inputs, which ends its name.
_DIGEST_LENGTH = 24


@pytest.fixture(scope="module", autouse=True)
def demo_environment_deleted() -> Iterator[None]:
    """
    After each module, the prepared environment the operator system-test Dag's decorated task
    made: kept by design for its next run, but a test run must leave the servers as it found
    them, which the run-wide snapshot leak check holds it to. Its name holds the deployment
    id of whichever Airflow made it, so it is found by the hash of its inputs that ends it.
    """
    yield
    try:
        state = read_state()
    except RuntimeError:
        return  # no stack, so no Dag ran
    ending = "-" + _demo_environment_name()[-_DIGEST_LENGTH:]
    from opensandbox import SandboxManagerSync
    from opensandbox.models.sandboxes import SnapshotFilter

    for server in state.servers.values():
        manager = SandboxManagerSync.create(server.connection_config())
        try:
            page = manager.list_snapshots(SnapshotFilter(page_size=200))
            for info in page.snapshot_infos:
                name = info.name or ""
                if name.startswith(NAME_PREFIX) and name.endswith(ending):
                    manager.delete_snapshot(info.id)
        finally:
            manager.close()


def _demo_environment_name() -> str:
    """The name the operator Dag's requirements snapshot gets from its inputs, in a
    deployment named ``any``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("operator_dag", OPERATOR_DAG_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands = set_up_commands(module.REQUIREMENTS, module.PIP_ARGS)
    return snapshot_name(
        deployment="any",
        base="image:python:3.12-slim",
        commands=commands,
        env={},
        workdir=None,
    )


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
