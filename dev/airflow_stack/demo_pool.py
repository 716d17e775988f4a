"""The operator Dag's warm pool during ``make demo``: its keeper is the demo's own process.

The demo starts the keeper before it triggers the Dags, waits until the pool holds its ready
sandbox, and afterwards stops the keeper (by its PID) and drains the pool, so that no idle
sandbox outlives the demo. A deployment runs the keeper as a service of its own (docs/pools.rst).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dev.airflow_stack.running import CONN_ID
from dev.stack.state import ServerInfo

SYSTEM_TESTS = Path(__file__).resolve().parents[2] / "system_tests"
POOL = "example_opensandbox_operator:WARM"
# Where the Dag's pool reads its store; the Airflow components inherit it from the demo
# (see use_store).
STORE_VARIABLE = "OPENSANDBOX_POOL_STORE"
# Measured: the keeper's one sandbox is ready 3-6 s after it starts (the keeper imports
# Airflow and the Dag first); the bound leaves room for a loaded two-core machine.
FILLED_TIMEOUT = 120.0
# A keeper asked to stop destroys nothing and returns within a second; one that has not
# left by then is killed, and the drain below still removes what it left.
STOP_TIMEOUT = 30.0


def _environment(server: ServerInfo, store: str, home: Path) -> dict[str, str]:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
    return inherited | {
        "AIRFLOW_HOME": str(home),
        STORE_VARIABLE: store,
        **server.airflow_connection_env(CONN_ID, use_server_proxy=True),
    }


def _pool_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "opensandbox_provider.pool", *arguments, POOL]


def _idle(environment: dict[str, str]) -> str:
    result = subprocess.run(
        _pool_command("status"),
        cwd=SYSTEM_TESTS,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.stdout.strip()


def use_store(store: str) -> None:
    """Have the Airflow components the demo starts read the pool's state from ``store``."""
    os.environ[STORE_VARIABLE] = store


@contextmanager
def kept_pool(server: ServerInfo, store: str, home: Path) -> Iterator[str]:
    """Keep the operator Dag's warm pool filled on ``server`` while the context runs; yield
    what its status says once it is filled."""
    environment = _environment(server, store, home)
    log = (home / "logs").joinpath("pool-keeper.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        keeper = subprocess.Popen(
            _pool_command("keep"),
            cwd=SYSTEM_TESTS,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + FILLED_TIMEOUT
        while not (status := _idle(environment)).endswith("1 of 1 idle."):
            if keeper.poll() is not None:
                raise RuntimeError(f"The pool's keeper exited {keeper.returncode}; see {log}.")
            if time.monotonic() > deadline:
                raise TimeoutError(f"The pool was not filled in {FILLED_TIMEOUT:.0f}s: {status}")
            time.sleep(1.0)
        yield status
    finally:
        keeper.send_signal(signal.SIGTERM)
        try:
            keeper.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            keeper.kill()
            keeper.wait()
        subprocess.run(
            _pool_command("drain"), cwd=SYSTEM_TESTS, env=environment, check=False, timeout=120
        )
