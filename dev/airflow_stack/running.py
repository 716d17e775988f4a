"""A running local Airflow and what it is for here: running the system-test Dags."""

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
from dev.airflow_stack.first_command import first_command_seconds
from dev.airflow_stack.home import AirflowSite
from dev.airflow_stack.topologies import LOCAL, Topology
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
# How long a succeeded run's last log may lag its state (see _logs).
LOG_SETTLE_TIMEOUT = 60.0


@dataclass(frozen=True)
class SystemTestDag:
    """A system-test Dag the demo runs, and how to tell from its task logs that it passed."""

    dag_id: str
    # The tasks whose logs tell the story, in the order they are told.
    task_ids: tuple[str, ...]
    # What the Dag's last task logs, and only after every check before it passed.
    passed_line: str
    # The tasks whose wait from asking for a sandbox to their first command the story tells.
    timed_task_ids: tuple[str, ...] = ()


TOOLSET_DAG = SystemTestDag(DAG_ID, (TASK_ID,), PASSED_LINE)
OPERATOR_DAG = SystemTestDag(
    "example_opensandbox_operator",
    ("run_script", "letter_counts", "long_command", "cold_start", "warm_start", "check"),
    "opensandbox operator e2e passed",
    timed_task_ids=("cold_start", "warm_start"),
)
# What `make demo` runs, side by side: an agent's sandbox, and sandboxes with no agent.
DEMO_DAGS = (TOOLSET_DAG, OPERATOR_DAG)
# And, where the executor is configured (either topology), whole tasks in sandboxes; the
# mapped tries' logs are left out of the story, the last task says what they found.
EXECUTOR_DAG = SystemTestDag(
    "example_opensandbox_executor", ("beside", "check"), "opensandbox executor e2e passed"
)


@dataclass
class RunningAirflow:
    site: AirflowSite
    api: AirflowApi
    password: str
    startup_seconds: float
    topology: Topology = LOCAL

    def task_url(self, run_id: str, *, dag_id: str = DAG_ID, task_id: str = TASK_ID) -> str:
        return f"{self.site.base_url}/dags/{dag_id}/runs/{run_id}/tasks/{task_id}"


@dataclass(frozen=True)
class DagRunOutcome:
    dag: SystemTestDag
    run_id: str
    state: str
    seconds: float
    # Each story task's log, as structured events.
    logs: dict[str, list[dict[str, Any]]]

    @property
    def log(self) -> list[dict[str, Any]]:
        return [event for task_id in self.dag.task_ids for event in self.logs[task_id]]

    def story(self) -> list[str]:
        """The task logs' lines about the sandboxes: created, checked, each command or tool
        call and its output, torn down.

        Errors come along, with the exception that failed the task, so a failed run says why.
        A Dag of several tasks has each line led by its task's id.
        """
        lines: list[str] = []
        for task_id in self.dag.task_ids:
            lead = f"[{task_id}] " if len(self.dag.task_ids) > 1 else ""
            lines.extend(lead + line for line in _story_lines(self.logs[task_id], self.dag))
        for task_id in self.dag.timed_task_ids:
            timed = first_command_seconds(self.logs[task_id])
            said = f"{timed[1]:.2f}s ({timed[0]})" if timed else "not in its log"
            lines.append(f"{task_id}: sandbox asked for to first command: {said}")
        return lines


def _story_lines(log: list[dict[str, Any]], dag: SystemTestDag) -> Iterator[str]:
    # The backend's loggers, the operator's and the trigger's (under Airflow's task logger,
    # named after their modules), and the Dag's own.
    loggers = ("opensandbox_provider", dag.dag_id)
    for event in log:
        text = str(event.get("event", ""))
        if event.get("level") == "error":
            details = event.get("error_detail", [])
            causes = [f"{detail['exc_type']}: {detail['exc_value']}" for detail in details]
            yield " | ".join([f"ERROR {text}", *causes])
        elif any(name in str(event.get("logger", "")) for name in loggers):
            yield text
        elif dag.passed_line in text:
            yield text


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


def _wait_until_healthy(site: AirflowSite, api: AirflowApi, topology: Topology) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not api.healthy():
        dead = components.dead(site.home, topology.components)
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
def running_airflow(site: AirflowSite, topology: Topology = LOCAL) -> Iterator[RunningAirflow]:
    """Start Airflow in ``site`` as ``topology`` lays it out, wait until all of it is healthy
    and log in; stop it on exit."""
    topology.stop(site.home)  # whatever an interrupted earlier run left behind in this home
    started = time.monotonic()
    api = AirflowApi(site.base_url)
    try:
        topology.start(site)
        _wait_until_healthy(site, api, topology)
        startup_seconds = time.monotonic() - started
        password = json.loads(site.password_file.read_text())[USERNAME]
        api.log_in(USERNAME, password)
        yield RunningAirflow(site, api, password, startup_seconds, topology)
    finally:
        api.close()
        topology.stop(site.home)


def wait_for_dag(api: AirflowApi, dag_id: str) -> None:
    deadline = time.monotonic() + DAG_PARSE_TIMEOUT
    while not api.dag_is_known(dag_id):
        errors = [error for error in api.import_errors() if dag_id in error]
        if errors:
            raise RuntimeError(f"Dag {dag_id!r} failed to import:\n{errors[0]}")
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Dag {dag_id!r} was not parsed within {DAG_PARSE_TIMEOUT:.0f}s; see the "
                "dag-processor's output in the Airflow home's logs/ directory."
            )
        time.sleep(1.0)


def trigger(
    airflow: RunningAirflow, server: ServerInfo, dag_id: str, *, conf: dict[str, Any] | None = None
) -> str:
    """Point ``opensandbox_default`` at ``server``, wait for ``dag_id`` and trigger it."""
    api = airflow.api
    api.put_connection(opensandbox_connection(airflow.topology.reach(server)))
    wait_for_dag(api, dag_id)
    api.unpause(dag_id)
    # The Dag's id in the run's id: two Dags triggered in the same second stay apart in logs.
    run_id = f"demo__{datetime.now(UTC):%Y%m%dT%H%M%S}__{dag_id}"
    api.trigger(dag_id, run_id, conf=conf)
    return run_id


def run_system_tests(
    airflow: RunningAirflow,
    server: ServerInfo,
    dags: tuple[SystemTestDag, ...] = DEMO_DAGS,
    *,
    timeout: float = DEFAULT_RUN_TIMEOUT,
) -> list[DagRunOutcome]:
    """Trigger every one of ``dags`` at once against ``server``, await each run, read its logs."""
    started = time.monotonic()
    run_ids = [trigger(airflow, server, dag.dag_id) for dag in dags]
    outcomes = []
    for dag, run_id in zip(dags, run_ids, strict=True):
        state = airflow.api.wait_for_run(dag.dag_id, run_id, timeout=timeout)
        logs = _logs(airflow, dag, run_id, waited_for_passed=state == "success")
        outcomes.append(DagRunOutcome(dag, run_id, state, time.monotonic() - started, logs))
    return outcomes


def _logs(
    airflow: RunningAirflow, dag: SystemTestDag, run_id: str, *, waited_for_passed: bool
) -> dict[str, list[dict[str, Any]]]:
    """The story tasks' logs; of a run that succeeded, once its last task's log holds the
    passed line. A try on the OpenSandboxExecutor reports its end before its log is copied out
    of its sandbox, so its log may lag the run's state by a moment."""
    deadline = time.monotonic() + LOG_SETTLE_TIMEOUT
    while True:
        logs = {
            task_id: airflow.api.task_log(dag.dag_id, run_id, task_id) for task_id in dag.task_ids
        }
        last = logs[dag.task_ids[-1]]
        said = any(dag.passed_line in str(event.get("event", "")) for event in last)
        if said or not waited_for_passed or time.monotonic() > deadline:
            return logs
        time.sleep(1.0)


def run_system_test(
    airflow: RunningAirflow,
    server: ServerInfo,
    dag: SystemTestDag = TOOLSET_DAG,
    *,
    timeout: float = DEFAULT_RUN_TIMEOUT,
) -> DagRunOutcome:
    """Trigger one system-test Dag against ``server`` and await its run."""
    return run_system_tests(airflow, server, (dag,), timeout=timeout)[0]
