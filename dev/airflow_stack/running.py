"""A running local Airflow and the one thing it is for here: running the system-test Dag."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dev.airflow_stack import components
from dev.airflow_stack.api import AirflowApi
from dev.airflow_stack.home import AirflowSite
from dev.stack.state import ServerInfo

DAG_ID = "example_sandbox_toolset_opensandbox"
TASK_ID = "run_sandbox_agent"
PASSED_LINE = "sandbox boundary e2e passed"
USERNAME = "admin"
CONN_ID = "opensandbox_default"

# Measured: all four components healthy 11-15 s after launch on a fresh SQLite database
# (11.8 s on a two-core machine); the bound leaves room for a loaded two-core machine.
STARTUP_TIMEOUT = 180.0
# The Dag appears after one dag-processor pass (refresh interval 5 s).
DAG_PARSE_TIMEOUT = 120.0
DEFAULT_RUN_TIMEOUT = 600.0

# The loggers whose lines tell the sandbox's story in the task log: the backend's and the Dag's.
_STORY_LOGGERS = ("opensandbox_provider", DAG_ID)


@dataclass
class RunningAirflow:
    site: AirflowSite
    api: AirflowApi
    password: str
    startup_seconds: float

    def task_url(self, run_id: str) -> str:
        return f"{self.site.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/{TASK_ID}"


@dataclass(frozen=True)
class DagRunOutcome:
    run_id: str
    state: str
    seconds: float
    log: list[dict[str, Any]]

    def story(self) -> list[str]:
        """The task log's lines about the sandbox: created, checked, each tool call, torn down.

        Errors come along, with the exception that failed the task, so a failed run says why.
        """
        lines = []
        for event in self.log:
            text = str(event.get("event", ""))
            if event.get("level") == "error":
                details = event.get("error_detail", [])
                causes = [f"{detail['exc_type']}: {detail['exc_value']}" for detail in details]
                lines.append(" | ".join([f"ERROR {text}", *causes]))
            elif str(event.get("logger", "")).startswith(_STORY_LOGGERS) or PASSED_LINE in text:
                lines.append(text)
        return lines


def opensandbox_connection(server: ServerInfo) -> dict[str, Any]:
    """The ``opensandbox_default`` connection to ``server``, as the REST API takes it."""
    return {
        "connection_id": CONN_ID,
        "conn_type": "opensandbox",
        "host": server.host,
        "port": server.port,
        "schema": "http",
        "password": server.api_key,
        # Stated although it is the hook's default: Airflow's edit form shows an extra field
        # only when the connection holds a value for it, and the demo shows the whole form.
        "extra": json.dumps({"request_timeout": 30, "use_server_proxy": True}),
    }


def _wait_until_healthy(site: AirflowSite, api: AirflowApi) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not api.healthy():
        dead = components.dead(site.home)
        if dead:
            tails = "\n\n".join(
                f"--- {name} ---\n{components.log_tail(site.home, name)}" for name in dead
            )
            raise RuntimeError(f"Airflow's {', '.join(dead)} exited during start-up:\n{tails}")
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Airflow was not healthy {STARTUP_TIMEOUT:.0f}s after start; the components' "
                f"output is in {site.home / 'logs'}."
            )
        time.sleep(0.5)


@contextmanager
def running_airflow(site: AirflowSite) -> Iterator[RunningAirflow]:
    """Start Airflow in ``site``, wait until all of it is healthy and log in; stop it on exit."""
    components.stop(site.home)  # whatever an interrupted earlier run left behind in this home
    started = time.monotonic()
    api = AirflowApi(site.base_url)
    try:
        components.migrate(site)
        components.start(site)
        _wait_until_healthy(site, api)
        startup_seconds = time.monotonic() - started
        password = json.loads(site.password_file.read_text())[USERNAME]
        api.log_in(USERNAME, password)
        yield RunningAirflow(site, api, password, startup_seconds)
    finally:
        api.close()
        components.stop(site.home)


def _wait_for_dag(api: AirflowApi) -> None:
    deadline = time.monotonic() + DAG_PARSE_TIMEOUT
    while not api.dag_is_known(DAG_ID):
        errors = [error for error in api.import_errors() if DAG_ID in error]
        if errors:
            raise RuntimeError(f"The system-test Dag failed to import:\n{errors[0]}")
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Dag {DAG_ID!r} was not parsed within {DAG_PARSE_TIMEOUT:.0f}s; see the "
                "dag-processor's output in the Airflow home's logs/ directory."
            )
        time.sleep(1.0)


def run_system_test(
    airflow: RunningAirflow, server: ServerInfo, *, timeout: float = DEFAULT_RUN_TIMEOUT
) -> DagRunOutcome:
    """Point ``opensandbox_default`` at ``server``, trigger the system-test Dag, await its run."""
    api = airflow.api
    api.put_connection(opensandbox_connection(server))
    _wait_for_dag(api)
    api.unpause(DAG_ID)
    run_id = f"demo__{datetime.now(UTC):%Y%m%dT%H%M%S}"
    started = time.monotonic()
    api.trigger(DAG_ID, run_id)
    state = api.wait_for_run(DAG_ID, run_id, timeout=timeout)
    return DagRunOutcome(
        run_id, state, time.monotonic() - started, api.task_log(DAG_ID, run_id, TASK_ID)
    )
