"""The OpenSandboxExecutor in a real Airflow 3, on the stack's dns+nft server (its sandboxes'
egress denies all but the execution API, proven at the address layer): a Dag of tasks on it,
50 mapped ones among them and one on LocalExecutor beside them, succeeds and leaves no sandbox; a
running try's log is read through the api-server's log endpoint, from its sandbox; and a try
whose sandbox is killed from outside fails, saying so, in the log the endpoint serves after; a
task marked failed loses its sandbox within 10 s; and a scheduler SIGKILLed mid-try is
restarted and adopts the try, found by its identity, which ends once. A person sees the tries'
logs in the UI, in headless Chromium, while a try runs and after the run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from dev.airflow_stack import components
from dev.airflow_stack.executor_site import kept_pool, with_executor, with_warm_pool
from dev.airflow_stack.home import (
    AIRFLOW_DIR,
    PORT_SEARCH_SPAN,
    PREFERRED_PORT,
    AirflowSite,
    first_free_port,
)
from dev.airflow_stack.running import CONN_ID, RunningAirflow, running_airflow, trigger
from dev.stack.state import ServerInfo, StackState
from opensandbox_provider._identity import identity_metadata
from tests.airflow_path import executor_dag
from tests.airflow_path.browser import screenshot, signed_in_page

DAG_FILE = Path(executor_dag.__file__)
# Only keeps a hang finite: the 50 mapped tries' run took 118 s alone, and over 6 min beside
# the whole suite on two cores, each try starting a sandbox and Airflow's Task SDK in it.
RUN_TIMEOUT = 900.0
# A try's sandbox starts, then the Task SDK in it imports Airflow and reports to the API server.
RUNNING_TIMEOUT = 120.0
LOG_TIMEOUT = 60.0
# What a user marking a task failed in the UI may expect: its sandbox gone this soon after.
MARKED_FAILED_BOUND = 10.0
# The warm pool the tries draw from.
POOL_NAME = "executor-tries"
# The api-server's ports: past those the other Airflow homes of the suite search from, since
# this module runs beside them (tests/work_units.py); two searches of one span at once could
# both take its first free port before either binds it.
API_PORTS = range(PREFERRED_PORT + 2 * PORT_SEARCH_SPAN, PREFERRED_PORT + 3 * PORT_SEARCH_SPAN)


@pytest.fixture(scope="module", autouse=True)
def demo_environment_deleted() -> Iterator[None]:
    """
    Nothing, in place of the folder's clean-up of the demo's prepared environment: this
    module's Airflow runs no demo Dag, and it runs beside the folder's other modules
    (tests/work_units.py), whose Dag runs may be starting from that environment.
    """
    yield


@pytest.fixture(scope="module")
def airflow(stack: StackState, dns_nft_server: ServerInfo) -> Iterator[RunningAirflow]:
    """
    An Airflow whose api-server listens on the Docker bridge, where the sandboxes reach its
    execution API by the stack resolver's allowed name, with the executor beside LocalExecutor
    and its warm pool kept filled.
    """
    home = AIRFLOW_DIR / "executor"
    components.stop(home)  # left running by an interrupted earlier session
    shutil.rmtree(home, ignore_errors=True)
    prepared = AirflowSite.prepare(home, port=first_free_port(API_PORTS), extra_dags=[DAG_FILE])
    site = with_executor(prepared, dns_nft_server, conn_id=CONN_ID, bridge_ip=stack.bridge_ip)
    site = with_warm_pool(site, name=POOL_NAME, store=stack.redis_url, size=1)
    settings = {
        # A killed scheduler's tries are up for adoption this soon after its last heartbeat,
        # which a live one sends often enough to stay healthy on a loaded machine.
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5",
    }
    site = replace(site, settings={**site.settings, **settings})
    with running_airflow(site) as running, kept_pool(site):
        yield running


@pytest.fixture(scope="module")
def page(airflow: RunningAirflow) -> Iterator[Page]:
    with signed_in_page(airflow) as page:
        yield page


def _sandboxes_of(server: ServerInfo, dag_id: str, run_id: str) -> list[str]:
    """The running sandboxes whose identity names the run."""
    from opensandbox import SandboxManagerSync
    from opensandbox.models.sandboxes import SandboxFilter

    labels = identity_metadata({"dag_id": dag_id, "run_id": run_id})
    manager = SandboxManagerSync.create(server.connection_config())
    try:
        found = manager.list_sandbox_infos(SandboxFilter(metadata=labels, states=["Running"]))
        return [info.id for info in found.sandbox_infos]
    finally:
        manager.close()


def _most_at_once(tis: list[dict]) -> int:
    """The most of these task instances that ran at one moment, by their start and end."""
    changes = sorted(
        (datetime.fromisoformat(ti[moment]), step)
        for ti in tis
        for moment, step in (("start_date", 1), ("end_date", -1))
    )
    running = most = 0
    for _, step in changes:
        running += step
        most = max(most, running)
    return most


def _await_log_line(
    airflow: RunningAirflow, dag_id: str, run_id: str, task_id: str, line: str
) -> str:
    """The task's log through the api-server's log endpoint, once it holds ``line``."""
    deadline = time.monotonic() + LOG_TIMEOUT
    while line not in (log := json.dumps(airflow.api.task_log(dag_id, run_id, task_id))):
        assert time.monotonic() < deadline, log
        time.sleep(1)
    return log


def _waiting_try(
    airflow: RunningAirflow, server: ServerInfo, dag_id: str, run_id: str
) -> tuple[str, str]:
    """The sandbox of a waiting Dag's running try, once its log says it waits, and that log."""
    airflow.api.wait_for_task_state(dag_id, run_id, "wait", "running", timeout=RUNNING_TIMEOUT)
    live = _await_log_line(airflow, dag_id, run_id, "wait", executor_dag.WAITING_LINE)
    (sandbox,) = _sandboxes_of(server, dag_id, run_id)
    return sandbox, live


@pytest.fixture(scope="module")
def run_ids(airflow: RunningAirflow, dns_nft_server: ServerInfo) -> dict[str, str]:
    """One run of each Dag but the adopted one, triggered at once: they run side by side."""
    dag_ids = (executor_dag.DAG_ID, executor_dag.KILLED_DAG_ID, executor_dag.MARKED_DAG_ID)
    return {dag_id: trigger(airflow, dns_nft_server, dag_id) for dag_id in dag_ids}


def test_each_dag_is_recorded_as_its_own_files_not_the_pools_beside_it(
    airflow: RunningAirflow, run_ids: dict[str, str]
) -> None:
    # A try parses the file its Dag is recorded in; had the Dag processor recorded a Dag as
    # executor_pool.py's (Dags made while it imports a file are that file's), the try would
    # parse that file in the sandbox, find no Dag and be rescheduled.
    for dag_id in run_ids:
        assert airflow.api.dag_file(dag_id) == DAG_FILE.name, dag_id


def test_a_running_tries_log_comes_from_its_sandbox_and_a_sandbox_killed_from_outside_fails_it(
    airflow: RunningAirflow, dns_nft_server: ServerInfo, run_ids: dict[str, str], page: Page
) -> None:
    api = airflow.api
    dag_id = executor_dag.KILLED_DAG_ID
    run_id = run_ids[dag_id]
    sandbox, live = _waiting_try(airflow, dns_nft_server, dag_id, run_id)
    from_sandbox = f"From sandbox {sandbox}, where the try runs."
    assert from_sandbox in live
    # What a person sees of the running try: its log, read from its sandbox.
    page.goto(airflow.task_url(run_id, dag_id=dag_id, task_id="wait"))
    with screenshot(page, "12-executor-running-task-log"):
        expect(page.get_by_text("Running", exact=True).first).to_be_visible()
        expect(page.get_by_text(executor_dag.WAITING_LINE).first).to_be_visible()
        # Where the lines came from is folded under the log's source details.
        page.get_by_text("Log message source details").first.click()
        expect(page.get_by_text(from_sandbox).first).to_be_visible()
    from opensandbox import SandboxManagerSync

    manager = SandboxManagerSync.create(dns_nft_server.connection_config())
    try:
        manager.kill_sandbox(sandbox)
    finally:
        manager.close()
    assert api.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT) == "failed"
    said = f"Sandbox {sandbox} ended before the Task SDK in it said how the try went"
    _await_log_line(airflow, dag_id, run_id, "wait", said)
    # Failed once: no second try, and the executor's sentence in its log once.
    assert api.task_try_number(dag_id, run_id, "wait") == 1
    assert json.dumps(api.task_log(dag_id, run_id, "wait")).count(said) == 1


def test_a_task_marked_failed_has_its_sandbox_gone_within_ten_seconds(
    airflow: RunningAirflow, dns_nft_server: ServerInfo, run_ids: dict[str, str]
) -> None:
    api = airflow.api
    dag_id = executor_dag.MARKED_DAG_ID
    run_id = run_ids[dag_id]
    sandbox, _ = _waiting_try(airflow, dns_nft_server, dag_id, run_id)
    api.set_task_state(dag_id, run_id, "wait", "failed")
    marked = time.monotonic()
    while dns_nft_server.has_sandbox(sandbox):
        assert time.monotonic() - marked < MARKED_FAILED_BOUND, "the sandbox outlived the task"
        time.sleep(0.2)
    # Its log, as far as it got, is kept.
    _await_log_line(airflow, dag_id, run_id, "wait", executor_dag.WAITING_LINE)


def test_a_dag_on_the_executor_succeeds_with_mapped_tasks_and_leaves_no_sandbox(
    airflow: RunningAirflow, dns_nft_server: ServerInfo, run_ids: dict[str, str], page: Page
) -> None:
    api = airflow.api
    dag_id = executor_dag.DAG_ID
    run_id = run_ids[dag_id]
    state = api.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    assert state == "success", json.dumps(api.task_log(dag_id, run_id, "total"))
    # The Task SDK reports the try's end before its process exits; the log is copied out after.
    _await_log_line(airflow, dag_id, run_id, "total", executor_dag.PASSED)
    # What a person sees of it after the run: the log the executor kept out of the sandbox.
    page.goto(airflow.task_url(run_id, dag_id=dag_id, task_id="total"))
    with screenshot(page, "13-executor-task-log"):
        expect(page.get_by_text("Success", exact=True).first).to_be_visible()
        expect(page.get_by_text(executor_dag.PASSED).first).to_be_visible()
    tis = api.task_instance_list(dag_id, run_id)
    squares = [ti for ti in tis if ti["task_id"] == "square"]
    assert sorted(ti["map_index"] for ti in squares) == list(range(executor_dag.MAPPED))
    assert {ti["state"] for ti in squares} == {"success"}
    # Side by side, and never more at once than the executor's slots, [core] parallelism.
    slots = int(airflow.site.environment()["AIRFLOW__CORE__PARALLELISM"])
    assert 1 < _most_at_once(squares) <= slots
    # The run's first try took the pool's ready sandbox, or one of the other runs' did.
    said = components.log_file(airflow.site.home, "scheduler").read_text()
    assert f"Took from warm pool {POOL_NAME} OpenSandbox sandbox" in said
    executors = {ti["task_id"]: ti["executor"] for ti in tis}
    assert executors["beside"] == "LocalExecutor"
    assert executors["total"] == executor_dag.EXECUTOR
    deadline = time.monotonic() + LOG_TIMEOUT
    while left := _sandboxes_of(dns_nft_server, dag_id, run_id):
        assert time.monotonic() < deadline, f"Sandboxes left after the run: {left}"
        time.sleep(1)
    # Every try ended as its task instance says: once the scheduler heard of each try's end,
    # an executor's failure of its own is in no event.
    event = "Received executor event with state {} for task instance TaskInstanceKey(dag_id='{}'"
    deadline = time.monotonic() + LOG_TIMEOUT
    while True:
        said = components.log_file(airflow.site.home, "scheduler").read_text()
        heard = sum(said.count(event.format(state, dag_id)) for state in ("success", "failed"))
        if heard >= len(tis):
            break
        assert time.monotonic() < deadline, f"the scheduler heard of {heard} of {len(tis)} ends"
        time.sleep(1)
    assert event.format("failed", dag_id) not in said


def test_a_scheduler_killed_mid_try_is_restarted_and_adopts_the_try_which_ends_once(
    airflow: RunningAirflow, dns_nft_server: ServerInfo
) -> None:
    # Last in the module: it kills the scheduler the other runs need.
    api = airflow.api
    dag_id, task_id = executor_dag.ADOPTED_DAG_ID, "outlive_the_scheduler"
    run_id = trigger(airflow, dns_nft_server, dag_id)
    api.wait_for_task_state(dag_id, run_id, task_id, "running", timeout=RUNNING_TIMEOUT)
    (sandbox,) = _sandboxes_of(dns_nft_server, dag_id, run_id)
    home = airflow.site.home
    scheduler = components.pid(home, "scheduler")
    assert scheduler is not None
    os.killpg(scheduler, signal.SIGKILL)
    components.start(airflow.site, ("scheduler",))
    assert api.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT) == "success"
    _await_log_line(airflow, dag_id, run_id, task_id, executor_dag.ADOPTED_LINE)
    assert api.task_try_number(dag_id, run_id, task_id) == 1
    said = components.log_file(home, "scheduler").read_text()
    assert f"running in sandbox {sandbox}." in said, "the restarted scheduler did not adopt it"
    deadline = time.monotonic() + LOG_TIMEOUT
    while dns_nft_server.has_sandbox(sandbox):
        assert time.monotonic() < deadline, "the adopted try's sandbox was left behind"
        time.sleep(0.5)
