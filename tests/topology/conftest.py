"""The celery topology (docs/local-stack.rst, "Celery topology"), started once per session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.airflow_stack import celery_topology
from dev.airflow_stack.home import AIRFLOW_DIR
from dev.airflow_stack.running import RunningAirflow, running_airflow
from dev.stack.state import ServerInfo

TEST_DAGS = sorted((Path(__file__).parent / "dags").glob("opensandbox_*.py"))


@pytest.fixture(scope="session")
def celery_airflow(plain_server: ServerInfo) -> Iterator[RunningAirflow]:
    """Airflow on the celery topology in a fresh home, its workers and triggerers each on a
    host of their own; shared by every test of the session and stopped at its end."""
    home = AIRFLOW_DIR / "pytest-celery"
    celery_topology.stop(home)  # left running by an interrupted earlier session
    shutil.rmtree(home, ignore_errors=True)
    site, topology = celery_topology.prepare(home, extra_dags=TEST_DAGS)
    with running_airflow(site, topology) as running:
        print(f"\ncelery topology up in {running.startup_seconds:.1f}s at {site.base_url}")
        yield running
