"""``python -m dev.airflow_stack demo [--once]``: what ``make demo`` runs."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from dev.airflow_stack import celery_topology, components
from dev.airflow_stack.demo_pool import kept_pool, use_store
from dev.airflow_stack.executor_site import with_executor
from dev.airflow_stack.home import AIRFLOW_DIR, EXECUTOR_DAG_FILE, AirflowSite
from dev.airflow_stack.running import (
    DEMO_DAGS,
    EXECUTOR_DAG,
    OPERATOR_DAG,
    USERNAME,
    DagRunOutcome,
    RunningAirflow,
    run_system_tests,
    running_airflow,
)
from dev.airflow_stack.topologies import LOCAL, Topology
from dev.stack.state import read_state

# The executor's own connection, beside the opensandbox_default the other Dags use.
EXECUTOR_CONN_ID = "opensandbox_executor"
# What the demo runs, side by side, unless told to run fewer.
ALL_DEMO_DAGS = (*DEMO_DAGS, EXECUTOR_DAG)


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _say(text: str = "") -> None:
    print(text, flush=True)


def _report_hosts(airflow: RunningAirflow, outcome: DagRunOutcome) -> None:
    _say(f"{outcome.dag.dag_id}: where each task ran:")
    for instance in airflow.api.task_instance_list(outcome.dag.dag_id, outcome.run_id):
        index = instance["map_index"]
        task = instance["task_id"] + (f"[{index}]" if index >= 0 else "")
        _say(f"  {task}: {instance['state']} on {instance['hostname']}")


def _report(airflow: RunningAirflow, outcome: DagRunOutcome) -> None:
    dag = outcome.dag
    _say(f"\n{dag.dag_id}: key lines of the task logs ({len(outcome.log)} lines in all):")
    for line in outcome.story():
        _say(f"  {line}")
    _say(f"Dag run {outcome.run_id}: {outcome.state} in {outcome.seconds:.1f}s")
    last_task = dag.task_ids[-1]
    _say(f"Log:   {airflow.task_url(outcome.run_id, dag_id=dag.dag_id, task_id=last_task)}")


def demo(
    *,
    dag_ids: list[str] | None = None,
    once: bool,
    port: int | None,
    home: Path,
    timeout: float,
    topology: str,
) -> int:
    # The plain server runs no egress sidecar, which is what the system-test Dag's open spec needs.
    stack = read_state()
    server = stack.servers["plain"]
    layout: Topology
    # Whole tasks in sandboxes too, on the server whose egress allows the execution API alone,
    # through a connection of the executor's own.
    executor_on = stack.servers["dns+nft"]
    if topology == "celery":
        site, layout = celery_topology.prepare(
            home,
            port=port,
            extra_dags=[EXECUTOR_DAG_FILE],
            executor_on=executor_on,
            executor_conn_id=EXECUTOR_CONN_ID,
        )
        _say("Topology: celery (PostgreSQL, Redis, two workers and two triggerers on hosts of")
        _say("their own: network namespaces on a bridge).")
        default_executor = "CeleryExecutor"
    else:
        site, layout = AirflowSite.prepare(home, port=port, extra_dags=[EXECUTOR_DAG_FILE]), LOCAL
        # The api-server then listens on the Docker bridge, where the sandboxes reach it.
        site = with_executor(site, executor_on, conn_id=EXECUTOR_CONN_ID, bridge_ip=stack.bridge_ip)
        default_executor = "LocalExecutor"
    _say(f"Executors: {default_executor}, and the OpenSandboxExecutor for the executor Dag's")
    _say(f"tries, each in a sandbox of its own on the {executor_on.name} server.")
    dags = tuple(dag for dag in ALL_DEMO_DAGS if not dag_ids or dag.dag_id in dag_ids)
    # Only on the local topology: the celery topology's workers cannot reach the stack's Redis
    # on loopback, so its pooled task creates its sandbox cold. Only the operator Dag draws.
    pooled = layout is LOCAL and bool(stack.redis_url) and OPERATOR_DAG in dags
    if pooled:
        use_store(stack.redis_url)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    _say(f"Starting Airflow in {home} on port {site.port} ...")
    try:
        with running_airflow(site, layout) as airflow:
            _say(f"Airflow is up after {airflow.startup_seconds:.1f}s.")
            reached = layout.reach(server).domain
            with ExitStack() as pool:
                if pooled:
                    _say("Filling the operator Dag's warm pool ...")
                    status = pool.enter_context(kept_pool(server, stack.redis_url, site.home))
                    _say(status)
                _say(f"Triggering the system-test Dags against OpenSandbox at {reached} ...")
                outcomes = run_system_tests(airflow, server, dags, timeout=timeout)
            for outcome in outcomes:
                _report(airflow, outcome)
                if layout is not LOCAL or outcome.dag is EXECUTOR_DAG:
                    _report_hosts(airflow, outcome)
            _say(f"\nUI:    {site.base_url}")
            _say(f"Login: {USERNAME} / {airflow.password}")
            if once:
                return 0 if all(outcome.state == "success" for outcome in outcomes) else 1
            _say("\nAirflow stays up until Ctrl-C.")
            while not components.dead(site.home, layout.components):
                time.sleep(1.0)
            dead = components.dead(site.home, layout.components)
            _say(f"Airflow's {', '.join(dead)} exited; stopping the rest.")
            return 1
    except KeyboardInterrupt:
        _say("\nStopping Airflow ...")
        return 0
    finally:
        _say("Airflow stopped.")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.airflow_stack")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "demo", help="start Airflow, run the system-test Dags, stay up until Ctrl-C"
    )
    run.add_argument(
        "--once", action="store_true", help="exit after the runs; exit status 0 when all succeeded"
    )
    run.add_argument(
        "--port", type=int, default=None, help="api-server port (default: first free from 8080)"
    )
    run.add_argument("--home", type=Path, default=AIRFLOW_DIR / "demo", help="AIRFLOW_HOME to use")
    run.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a Dag run")
    run.add_argument(
        "--topology",
        choices=("local", "celery"),
        default="local",
        help="local: every component here, LocalExecutor; celery: docs/local-stack.rst",
    )
    run.add_argument(
        "--dag",
        action="append",
        choices=[dag.dag_id for dag in ALL_DEMO_DAGS],
        help="run this system-test Dag only (repeat for several; default: all of them)",
    )
    args = parser.parse_args(argv)
    return demo(
        dag_ids=args.dag,
        once=args.once,
        port=args.port,
        home=args.home.resolve(),
        timeout=args.timeout,
        topology=args.topology,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
