"""
How a try runs inside its sandbox, an Airflow home of its own: where its files go, what its
environment says, and the command, the Task SDK's own entry point. The Dag file sits in a local
bundle named as the scheduler's, so the Task SDK finds it where the workload says; the workload
goes in as a file, so its token never appears in a command line, which the backend logs and
``ps`` shows.
"""

from __future__ import annotations

import json
import shlex
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.executors.workloads import ExecuteTask

HOME = PurePosixPath("/opt/airflow")
DAGS = HOME / "dags"
LOGS = HOME / "logs"
WORKLOAD_FILE = HOME / "workload.json"
# Written when the Task SDK's process exits: what a scheduler that adopts the try reads, since
# it never saw the command's stream.
EXIT_STATUS_FILE = HOME / "exit-status"
# The process's own output: the try's log as JSON lines (the Task SDK writes it to stdout too,
# for a container's log) and anything Python prints before logging is set up.
OUTPUT_FILE = HOME / "output.log"
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
ENTRY_POINT = "airflow.sdk.execution_time.execute_workload"


def environment(bundle_name: str, execution_api_server_url: str, executors: str) -> dict[str, str]:
    """
    What the Task SDK inside reads: where the API server is, the bundle, the log folder, and
    the scheduler's ``[core] executor``, since parsing a Dag checks each task's executor is one
    of those named there (by name alone: none of them is loaded).
    """
    bundles = [{"name": bundle_name, "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(DAGS)}}]
    return {
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": execution_api_server_url,
        "AIRFLOW__CORE__EXECUTOR": executors,
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(LOGS),
    }


def command() -> str:
    """
    The try: the Task SDK's entry point on the uploaded workload, its exit status kept. Its
    output goes to a file, not the command's stream: the stream goes with the scheduler that
    opened it, and a process writing to a pipe nobody drains any more would never end.
    """
    run = f"python3 -m {ENTRY_POINT} --json-path {shlex.quote(str(WORKLOAD_FILE))}"
    return (
        f"cd {HOME} && {run} >{OUTPUT_FILE} 2>&1; status=$?; echo $status > {EXIT_STATUS_FILE}; "
        "exit $status"
    )


def for_the_sandbox(workload: ExecuteTask) -> bytes:
    """
    The workload as the sandbox runs it: its bundle is the local copy there, which has no
    versions (the Dag file uploaded is the version the scheduler resolved).
    """
    bundle = workload.bundle_info.model_copy(update={"version": None})
    return workload.model_copy(update={"bundle_info": bundle}).model_dump_json().encode()


def dag_file_in_sandbox(workload: ExecuteTask) -> str:
    return str(DAGS / PurePosixPath(str(workload.dag_rel_path)))


def log_file_in_sandbox(log_path: str) -> str:
    return str(LOGS / log_path)
