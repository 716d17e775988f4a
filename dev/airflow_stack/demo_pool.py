"""The operator Dag's warm pool during ``make demo``: its keeper is the demo's own process.

The demo starts the keeper (:mod:`dev.airflow_stack.pool_keeper`) before it triggers the Dags
and stops it afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dev.airflow_stack import pool_keeper
from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo

SYSTEM_TESTS = Path(__file__).resolve().parents[2] / "system_tests"
POOL = "example_opensandbox_operator:WARM"
# Where the Dag's pool reads its store; the Airflow components inherit it from the demo
# (see use_store).
STORE_VARIABLE = "OPENSANDBOX_POOL_STORE"


def _environment(server: ServerInfo, store: str, home: Path) -> dict[str, str]:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
    return inherited | {
        "AIRFLOW_HOME": str(home),
        STORE_VARIABLE: store,
        **server.airflow_connection_env(CONN_ID, use_server_proxy=True),
    }


def use_store(store: str) -> None:
    """Have the Airflow components the demo starts read the pool's state from ``store``."""
    os.environ[STORE_VARIABLE] = store


@contextmanager
def kept_pool(server: ServerInfo, store: str, home: Path) -> Iterator[str]:
    """Keep the operator Dag's warm pool filled on ``server`` while the context runs; yield
    what its status says once it is filled."""
    environment = _environment(server, store, home)
    log = home / "logs" / "pool-keeper.log"
    with pool_keeper.kept_pool(POOL, folder=SYSTEM_TESTS, environment=environment, log=log) as kept:
        yield kept.filled
