"""Case (h): what the OpenSandboxExecutor adds to a task, beside LocalExecutor and the celery
topology's workers: from queued to running and from queued to success, for a task that returns
at once, median and p95 of RUNS tries each.

One local Airflow (the executor beside LocalExecutor, on the stack's dns+nft server) runs three
Dags one after another (benchmarks/executor_dags/): on LocalExecutor; on the executor from a
warm pool its keeper keeps (POOL_SIZE sandboxes, the executor's slots, ``[core] parallelism``);
and on the executor cold, tries whose sandboxes the pool cannot give. The celery topology (as
root) runs the first Dag on its workers, and, where the local cluster is up, a local Airflow on
KubernetesExecutor runs it in pods (benchmarks/kubernetes_executor.py). A try's queued, start and
end times are Airflow's own, read through its API.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks import kubernetes_executor
from benchmarks.executor_dags import overhead_default, overhead_sandbox
from benchmarks.warm_pool import summary
from dev.airflow_stack import celery_topology, components
from dev.airflow_stack.executor_site import kept_pool, with_executor, with_warm_pool
from dev.airflow_stack.home import AIRFLOW_DIR, AirflowSite
from dev.airflow_stack.running import RunningAirflow, running_airflow, trigger
from dev.stack.state import ServerInfo, StackState

RUNS = overhead_default.RUNS
# The executor's slots in a local Airflow ([core] parallelism there): each batch of tries can
# find the pool full.
POOL_SIZE = 4
RUN_TIMEOUT = 900.0
HOME = AIRFLOW_DIR / "bench-executor"
CELERY_HOME = AIRFLOW_DIR / "bench-executor-celery"
KUBERNETES_HOME = AIRFLOW_DIR / "bench-executor-kubernetes"
EXECUTOR_CONN_ID = "opensandbox_executor"
TOOK_FROM_POOL = "Took from warm pool"
# An executor's result that holds this key says why it was not run (benchmarks/rows.py shows no
# row for it, and its goal says why); one that holds "error" failed.
UNAVAILABLE = "unavailable"
DAG_FILES = [Path(overhead_default.__file__), Path(overhead_sandbox.__file__)]


def measure(state: StackState) -> dict[str, Any]:
    """The raw results of case (h), by executor: ``warm``, ``cold``, ``local``, ``celery``,
    ``kubernetes``."""
    server = state.servers["dns+nft"]
    assert overhead_sandbox.RUNS == RUNS, "the bench's Dag files map different numbers of tries"
    results: dict[str, Any] = {}
    with _local_airflow(state, server) as (airflow, refill):
        results["local"] = _overhead(airflow, server, overhead_default.DAG_ID)
        refill()
        drawn_before = _drawn_from_pool(airflow)
        results["warm"] = _overhead(airflow, server, overhead_sandbox.WARM_DAG_ID)
        results["warm"]["from_pool"] = _drawn_from_pool(airflow) - drawn_before
        results["cold"] = _overhead(airflow, server, overhead_sandbox.COLD_DAG_ID)
    results["celery"] = _on_celery(state)
    results["kubernetes"] = _on_kubernetes(state)
    return results


@contextmanager
def _local_airflow(state: StackState, server: ServerInfo) -> Iterator[tuple[RunningAirflow, Any]]:
    components.stop(HOME)  # left running by an interrupted earlier run
    shutil.rmtree(HOME, ignore_errors=True)
    site = AirflowSite.prepare(HOME, extra_dags=DAG_FILES)
    site = with_executor(site, server, conn_id=EXECUTOR_CONN_ID, bridge_ip=state.bridge_ip)
    site = with_warm_pool(site, name="bench-executor", store=state.redis_url, size=POOL_SIZE)
    with running_airflow(site) as airflow, kept_pool(site) as refill:
        yield airflow, refill


def _on_celery(state: StackState) -> dict[str, Any]:
    if os.geteuid() != 0:
        return {"error": "the celery topology's hosts are network namespaces: run as root"}
    celery_topology.stop(CELERY_HOME)
    shutil.rmtree(CELERY_HOME, ignore_errors=True)
    site, topology = celery_topology.prepare(CELERY_HOME, extra_dags=DAG_FILES[:1])
    with running_airflow(site, topology) as airflow:
        return _overhead(airflow, state.servers["plain"], overhead_default.DAG_ID)


def _on_kubernetes(state: StackState) -> dict[str, Any]:
    if why := kubernetes_executor.unavailable():
        return {UNAVAILABLE: why}
    components.stop(KUBERNETES_HOME)
    shutil.rmtree(KUBERNETES_HOME, ignore_errors=True)
    site = AirflowSite.prepare(KUBERNETES_HOME, extra_dags=DAG_FILES[:1])
    site = kubernetes_executor.with_kubernetes_executor(site)
    with running_airflow(site) as airflow:
        result = _overhead(airflow, state.servers["plain"], overhead_default.DAG_ID)
        # The executor deletes each finished try's pod once it hears of its end.
        if left := kubernetes_executor.wait_for_no_pods():
            result["error"] = f"KubernetesExecutor left {len(left)} pods: {', '.join(left)}"
    kubernetes_executor.delete_pods()
    return result


def _overhead(airflow: RunningAirflow, server: ServerInfo, dag_id: str) -> dict[str, Any]:
    """One run of ``dag_id``: each try's seconds from queued to running and to success."""
    run_id = trigger(airflow, server, dag_id)
    ended = airflow.api.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    if ended != "success":
        return {"error": f"run {run_id} of {dag_id} ended {ended}"}
    tries = airflow.api.task_instance_list(dag_id, run_id)
    if len(tries) != RUNS:
        return {"error": f"run {run_id} of {dag_id} had {len(tries)} tries, not {RUNS}"}

    def after_queued(moment: str) -> list[float]:
        return [_seconds_between(ti["queued_when"], ti[moment]) for ti in tries]

    return {
        "queued_to_running": summary(after_queued("start_date")),
        "queued_to_success": summary(after_queued("end_date")),
    }


def _seconds_between(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def _drawn_from_pool(airflow: RunningAirflow) -> int:
    """How many tries so far took their sandbox from the warm pool, as the scheduler logged."""
    said = components.log_file(airflow.site.home, "scheduler").read_text(errors="replace")
    return said.count(TOOK_FROM_POOL)
