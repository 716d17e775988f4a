"""The OpenSandboxExecutor without a server: what a try's sandbox is made of (the options, a
task's executor_config over them, the egress they allow), what runs in it, how a try's end is
reported (once, and not at all once revoked). Its refusal to load on an earlier Airflow line
is in test_first_line.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

# Built on Airflow 3.3's executor interface, which the compatibility matrix's earlier lines lack.
airflow = pytest.importorskip("airflow")
if tuple(map(int, airflow.__version__.split(".")[:2])) < (3, 3):
    pytest.skip(
        f"the executor needs Airflow 3.3, this is {airflow.__version__}", allow_module_level=True
    )

from airflow.executors.workloads import ExecuteTask  # noqa: E402
from airflow.executors.workloads.base import BundleInfo  # noqa: E402
from airflow.models.taskinstancekey import TaskInstanceKey  # noqa: E402

from opensandbox_provider.executors import _settings, _workload  # noqa: E402
from opensandbox_provider.executors._settings import ExecutorConfigError, TrySettings  # noqa: E402
from opensandbox_provider.executors._try import TryOutcome  # noqa: E402

URL = "http://airflow-api.internal:8080/execution/"
SETTINGS = TrySettings(
    conn_id="opensandbox_default",
    image="registry.internal/airflow-worker:3.3.2",
    snapshot=None,
    cpu="1",
    memory="2Gi",
    lease=600.0,
    ready_timeout=120.0,
    try_timeout=86400.0,
    execution_api_server_url=URL,
    executors="LocalExecutor,opensandbox_provider.executors.OpenSandboxExecutor",
)
KEY = TaskInstanceKey("a_dag", "a_task", "manual__2026-01-01T00:00:00+00:00", 1, -1)


class _Conf:
    """An executor's conf as Airflow hands it over: ``get`` with a fallback."""

    def __init__(self, options: dict[tuple[str, str], str]) -> None:
        self.options = options

    def get(self, section: str, option: str, fallback: Any = None) -> Any:
        return self.options.get((section, option), fallback)


def test_a_tasks_executor_config_overrides_image_resources_env_and_egress() -> None:
    wanted = {
        "image": "registry.internal/heavy:1",
        "cpu": "4",
        "memory": "8Gi",
        "resources": {"ephemeral-storage": "10Gi"},
        "env": {"MODE": 3},
        "allow_egress_to": ["pypi.internal"],
        "allow_egress_to_cidrs": ["10.0.0.0/8"],
    }
    settings = SETTINGS.overridden({"opensandbox": wanted})
    assert settings.image == "registry.internal/heavy:1"
    assert (settings.cpu, settings.memory) == ("4", "8Gi")
    assert settings.resources == {"ephemeral-storage": "10Gi"}
    assert settings.env == {"MODE": "3"}
    assert settings.egress() == (("airflow-api.internal", "pypi.internal"), ("10.0.0.0/8",))
    # What a task does not override is the executor's.
    assert settings.lease == SETTINGS.lease and settings.conn_id == SETTINGS.conn_id


def test_a_task_naming_a_snapshot_starts_from_it_rather_than_the_configured_image() -> None:
    settings = SETTINGS.overridden({"opensandbox": {"snapshot": "snap-1"}})
    assert (settings.image, settings.snapshot) == (None, "snap-1")


def test_an_executor_config_without_our_key_changes_nothing() -> None:
    assert SETTINGS.overridden(None) is SETTINGS
    assert SETTINGS.overridden({"pod_override": object()}) is SETTINGS


@pytest.mark.parametrize(
    ("wanted", "said"),
    [
        ({"imagee": "x"}, "has ['imagee'], which the OpenSandboxExecutor does not know"),
        ({"cpu": 2}, 'executor_config["opensandbox"]["cpu"] is a int'),
        ("python:3.12", 'executor_config["opensandbox"] is a str'),
    ],
)
def test_an_executor_config_no_sandbox_can_be_is_refused_saying_what_to_change(
    wanted: Any, said: str
) -> None:
    with pytest.raises(ExecutorConfigError, match=r"(?s).*") as raised:
        SETTINGS.overridden({"opensandbox": wanted})
    assert said in str(raised.value)


def test_an_api_server_named_by_address_is_allowed_as_that_address_alone() -> None:
    settings = TrySettings(
        **{**SETTINGS.__dict__, "execution_api_server_url": "http://10.1.2.3/e/"}
    )
    assert settings.egress() == ((), ("10.1.2.3/32",))


def test_the_executor_refuses_to_start_without_an_image_or_a_snapshot() -> None:
    conf = _Conf({("core", "execution_api_server_url"): URL})
    with pytest.raises(ExecutorConfigError, match=r"Set \[opensandbox_executor\] image"):
        _settings.configured(conf)


def test_the_sandboxes_reach_the_core_execution_api_unless_told_another_address() -> None:
    conf = _Conf(
        {
            ("opensandbox_executor", "image"): "worker:1",
            ("core", "executor"): "LocalExecutor",
        }
    )
    from airflow.executors.base_executor import get_execution_api_server_url

    assert _settings.configured(conf).execution_api_server_url == get_execution_api_server_url()
    conf.options[("opensandbox_executor", "execution_api_server_url")] = URL
    settings = _settings.configured(conf)
    assert settings.execution_api_server_url == URL
    assert (settings.image, settings.executors, settings.lease) == (
        "worker:1",
        "LocalExecutor",
        600,
    )


def _workload_of(bundle_version: str | None) -> ExecuteTask:
    from airflow.executors.workloads.task import TaskInstanceDTO

    ti = TaskInstanceDTO.model_validate(
        {
            "id": "01a2499d-6122-7f4c-bf16-26b54507a66e",
            "dag_version_id": "01a2499d-6122-7f4c-bf16-26b54507a66f",
            "task_id": KEY.task_id,
            "dag_id": KEY.dag_id,
            "run_id": KEY.run_id,
            "try_number": KEY.try_number,
            "map_index": KEY.map_index,
            "pool_slots": 1,
            "priority_weight": 1,
            "queue": "default",
        }
    )
    return ExecuteTask(
        ti=ti,
        dag_rel_path=Path("team/a_dag.py"),
        token="a-token",
        log_path="dag_id=a_dag/attempt=1.log",
        bundle_info=BundleInfo(name="dags-folder", version=bundle_version),
    )


def test_the_sandbox_runs_the_uploaded_workload_with_the_task_sdks_own_entry_point() -> None:
    command = _workload.command()
    assert "python3 -m airflow.sdk.execution_time.execute_workload --json-path" in command
    assert f">{_workload.OUTPUT_FILE} 2>&1" in command
    assert str(_workload.WORKLOAD_FILE) in command
    # The token travels in the file, never on the command line the backend logs.
    workload = _workload_of("v7")
    sent = json.loads(_workload.for_the_sandbox(workload))
    assert "a-token" not in command and sent["token"] == "a-token"
    # The uploaded Dag file is the version the scheduler resolved; the sandbox's bundle has none,
    # and keeps whatever else this Airflow's bundle info says (3.4 adds version_data).
    assert sent["bundle_info"]["name"] == "dags-folder"
    assert sent["bundle_info"] == {**workload.bundle_info.model_dump(mode="json"), "version": None}
    assert _workload.dag_file_in_sandbox(workload) == "/opt/airflow/dags/team/a_dag.py"


def test_the_sandboxes_airflow_names_the_bundle_the_api_and_the_schedulers_executors() -> None:
    env = _workload.environment("dags-folder", URL, SETTINGS.executors)
    (bundle,) = json.loads(env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"])
    assert bundle == {
        "name": "dags-folder",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": "/opt/airflow/dags"},
    }
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == URL
    assert env["AIRFLOW__CORE__EXECUTOR"] == SETTINGS.executors
    assert env["AIRFLOW__LOGGING__BASE_LOG_FOLDER"] == "/opt/airflow/logs"


@pytest.fixture
def executor() -> Any:
    from opensandbox_provider.executors import OpenSandboxExecutor

    return OpenSandboxExecutor(parallelism=2)


def test_a_tries_end_is_reported_once_as_its_sandbox_process_ended(executor: Any) -> None:
    executor.running.add(KEY)
    executor._outcomes.put(TryOutcome(KEY, succeeded=False, info="Sandbox s ended before"))
    executor.sync()
    executor.sync()
    assert executor.get_event_buffer() == {KEY: ("failed", "Sandbox s ended before")}
    assert KEY not in executor.running


def test_a_revoked_tries_end_is_not_reported(executor: Any) -> None:
    executor.running.add(KEY)
    executor.revoke_task(ti=_Revoked())
    executor._outcomes.put(TryOutcome(KEY, succeeded=False, info="revoked"))
    executor.sync()
    assert executor.get_event_buffer() == {}
    assert executor.slots_available == 2


class _Revoked:
    key = KEY


def test_a_try_airflow_ended_elsewhere_is_ended_after_the_grace_and_a_running_one_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opensandbox_provider.executors import _watch

    running = TaskInstanceKey("a_dag", "running", "r", 1, -1)
    marked = TaskInstanceKey("a_dag", "marked", "r", 1, -1)
    cleared = TaskInstanceKey("a_dag", "cleared", "r", 1, -1)
    tries = {running: "id-running", marked: "id-marked", cleared: "id-cleared"}
    states = {
        "id-running": ("running", 1),
        "id-marked": ("failed", 1),
        # Cleared and queued again: a new try, so this one is over.
        "id-cleared": ("queued", 2),
    }
    monkeypatch.setattr(_watch, "current_states", lambda ids: states)
    clock = [100.0]
    monkeypatch.setattr(_watch.time, "monotonic", lambda: clock[0])
    watch = _watch.EndedElsewhere()
    # Seen ended now; a try that ended itself exits within the grace, so nothing yet.
    assert watch.to_end(tries) == {}
    clock[0] += _watch.GRACE_SECONDS
    assert watch.to_end(tries) == {marked: "failed", cleared: "cleared"}
    # A task instance back in a running state starts the grace again.
    states["id-marked"] = ("running", 1)
    assert watch.to_end(tries) == {cleared: "cleared"}


def test_a_succeeded_tries_process_gets_airflows_success_overtime_before_its_sandbox_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opensandbox_provider.executors import _watch

    succeeded = TaskInstanceKey("a_dag", "succeeded", "r", 1, -1)
    monkeypatch.setattr(_watch, "current_states", lambda ids: {"id": ("success", 1)})
    clock = [100.0]
    monkeypatch.setattr(_watch.time, "monotonic", lambda: clock[0])
    monkeypatch.setenv("AIRFLOW__CORE__TASK_SUCCESS_OVERTIME", "7")
    watch = _watch.EndedElsewhere()
    assert watch.to_end({succeeded: "id"}) == {}
    # Past the grace of a task marked failed, the Task SDK's own overtime still runs.
    clock[0] += _watch.GRACE_SECONDS
    assert watch.to_end({succeeded: "id"}) == {}
    clock[0] += 7 + _watch.SUCCESS_OVERTIME_MARGIN - _watch.GRACE_SECONDS
    assert watch.to_end({succeeded: "id"}) == {succeeded: "success"}


class _EndedTry:
    """Stands in for a try's SandboxTry: records how the executor ended it."""

    key, sandbox = KEY, "s"

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.calls: list[tuple[str, bool]] = []

    def end(self, because: str, *, succeeded: bool = False) -> None:
        self.calls.append((because, succeeded))
        self.ended.set()


@pytest.mark.parametrize(("state", "succeeded"), [("success", True), ("failed", False)])
def test_a_try_the_executor_ends_reports_its_task_instances_state(
    executor: Any, state: str, succeeded: bool
) -> None:
    # A try whose process ran on past the overtime after it succeeded is a success, not a
    # failure of the executor's making; one marked failed is failed.
    ended = _EndedTry()
    with executor._lock:
        executor._tries[KEY] = ended
        executor._ti_ids[KEY] = "id"
    executor._end_tries({KEY: state})
    assert ended.ended.wait(10)
    ((because, said_succeeded),) = ended.calls
    assert said_succeeded is succeeded
    assert "sandbox s" in because and "the executor destroyed the sandbox" in because


@pytest.mark.parametrize(
    ("reference", "said"),
    [
        ("no_such_module_here:POOL", "no_such_module_here cannot be imported"),
        ("json:dumps", "names no WarmPool"),
        ("json", "names no WarmPool"),
    ],
)
def test_a_warm_pool_option_naming_no_pool_is_refused_saying_where_to_put_it(
    reference: str, said: str
) -> None:
    with pytest.raises(ExecutorConfigError) as raised:
        _settings.warm_pool(reference)
    assert said in str(raised.value)
    assert _settings.warm_pool(None) is None
