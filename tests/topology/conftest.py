"""The celery topology (docs/local-stack.rst, "Celery topology"), started once per session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.airflow_stack import celery_topology
from dev.airflow_stack.home import AIRFLOW_DIR, PORT_SEARCH_SPAN, PREFERRED_PORT, first_free_port
from dev.airflow_stack.running import RunningAirflow, running_airflow
from dev.stack.state import ServerInfo, StackState
from tests.own_server import TOPOLOGY, OwnServer, running_own_server

HERE = Path(__file__).parent
# The topology's own Dags, and the deferred ones of the local topology's tests that also run
# here.
TEST_DAGS = [
    *sorted((HERE / "dags").glob("opensandbox_*.py")),
    HERE.parent / "airflow_path" / "dags" / "opensandbox_deferred_ticks.py",
    HERE.parent / "airflow_path" / "dags" / "opensandbox_deferred_timeout.py",
]
# The api-server's ports: past those tests/airflow_path's Airflow homes search from, which
# start and stop beside the topology (tests/work_units.py); two searches of one span at once
# could both take its first free port before either binds it.
API_PORTS = range(PREFERRED_PORT + PORT_SEARCH_SPAN, PREFERRED_PORT + 2 * PORT_SEARCH_SPAN)


@pytest.fixture(scope="session")
def celery_airflow(plain_server: ServerInfo) -> Iterator[RunningAirflow]:
    """Airflow on the celery topology in a fresh home, its workers and triggerers each on a
    host of their own; shared by every test of the session and stopped at its end. The hosts
    reach the stack's servers and the topology's own (``topology_server``)."""
    home = AIRFLOW_DIR / "pytest-celery"
    celery_topology.stop(home)  # left running by an interrupted earlier session
    shutil.rmtree(home, ignore_errors=True)
    site, topology = celery_topology.prepare(
        home,
        port=first_free_port(API_PORTS),
        extra_dags=TEST_DAGS,
        extra_server_ports=(TOPOLOGY.port,),
    )
    with running_airflow(site, topology) as running:
        print(f"\ncelery topology up in {running.startup_seconds:.1f}s at {site.base_url}")
        yield running


@pytest.fixture(scope="session")
def topology_server(stack: StackState) -> Iterator[OwnServer]:
    """A server only the topology's tests use, so stopping it disturbs no other test."""
    with running_own_server(TOPOLOGY, stack) as server:
        yield server
