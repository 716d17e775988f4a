"""OpenSandboxOperator as a Dag author writes it, against the real server: rendered settings,
script files, secrets kept out of sight, a structured result and outputs replaced whole."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.ai.sandbox.base import SandboxFileTooLargeError, SandboxSpec
from airflow.providers.common.compat.sdk import (
    DAG,
    AirflowException,
    ObjectStoragePath,
    TaskDeferred,
    redact,
)

from dev.stack.state import ServerInfo
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.sandbox import OpenSandboxBackend
from tests.integration.test_operator import CONN_ID, destroyed, rebuilt, run_trigger
from tests.secret_traces import giving_away, metadata_on, read_before_each_command
from tests.unit.airflow_versions import forget_masked_values, task_masker

OPEN = SandboxSpec(block_network=False)
CONTEXT: dict[str, Any] = {"ds": "2026-01-02", "ds_nodash": "20260102"}
SECRET = "s3cr3t-api-token-4f1c9a"
TASK_LOG = logging.getLogger("tests.operator_authoring.task_log")


class MaskedLines(logging.Handler):
    """Each message as the task log shows it: through Airflow's masker, as a task's log is."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(str(redact(record.getMessage())))


@pytest.fixture
def task_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[MaskedLines]:
    monkeypatch.setattr(OpenSandboxOperator, "log", property(lambda self: TASK_LOG))
    handler = MaskedLines()
    TASK_LOG.addHandler(handler)
    TASK_LOG.setLevel(logging.INFO)
    masker = task_masker()
    patterns, replacer = masker.patterns, masker.replacer
    forget_masked_values(masker)
    yield handler
    masker.patterns, masker.replacer = patterns, replacer
    TASK_LOG.removeHandler(handler)


@pytest.fixture
def in_a_dag(monkeypatch, tmp_path) -> Iterator[Callable[..., OpenSandboxOperator]]:
    """An operator of a Dag whose folder is ``tmp_path / "dags"``, rendered as a task renders
    it; its sandbox never outlives the test."""
    made: list[OpenSandboxOperator] = []
    folder = tmp_path / "dags"
    folder.mkdir()

    def make(server: ServerInfo, **arguments: Any) -> OpenSandboxOperator:
        for name, value in server.airflow_connection_env(CONN_ID).items():
            monkeypatch.setenv(name, value)
        arguments.setdefault("spec", OPEN)
        with DAG("authoring", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
            operator = OpenSandboxOperator(task_id=f"task_{len(made)}", **arguments)
        dag.fileloc = str(folder / "authoring.py")
        operator.render_template_fields({**CONTEXT, "params": arguments.get("params", {})})
        made.append(operator)
        return operator

    yield make
    for operator in made:
        if operator._sandbox_id is not None:
            OpenSandboxBackend(CONN_ID).destroy(operator._sandbox_id)


def test_the_rendered_settings_script_and_paths_are_the_ones_the_sandbox_gets(
    in_a_dag, plain_server, tmp_path
) -> None:
    (tmp_path / "dags" / "report.sh").write_text(
        "pwd\n"
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
        " || cat /sys/fs/cgroup/memory.max\n"
        'echo "report for {{ ds }}" > "{{ ds }}.txt"\n'
    )
    operator = in_a_dag(
        plain_server,
        command="report.sh",
        image="{{ params.image }}",
        memory="{{ params.memory }}",
        workdir="/srv/{{ ds_nodash }}",
        outputs={"{{ ds }}.txt": f"file://{tmp_path}/out/{{{{ ds }}}}/report.txt"},
        params={"image": "python:3.12-slim", "memory": "1Gi"},
    )

    # Run in the rendered workdir, within the rendered memory limit (1 GiB).
    assert operator.execute({}) == {"exit_code": 0, "stdout": "/srv/20260102\n1073741824\n"}
    assert (tmp_path / "out" / "2026-01-02" / "report.txt").read_text() == (
        "report for 2026-01-02\n"
    )
    assert destroyed(operator._sandbox_id)


def test_a_private_env_value_reaches_the_command_and_nothing_that_is_shown(
    in_a_dag, plain_server, task_log, monkeypatch
) -> None:
    stamped = read_before_each_command(monkeypatch, plain_server)
    operator = in_a_dag(
        plain_server,
        command='echo "token: $API_TOKEN"; printf %s "$API_TOKEN" | sha256sum | cut -c1-64',
        env={"RUN": "{{ ds }}"},
        private_env={"API_TOKEN": "{{ params.token }}"},
        params={"token": SECRET},
    )
    result = operator.execute({})

    # The command saw the value itself: it printed its digest.
    assert result["stdout"].splitlines() == [
        "token: ***",
        hashlib.sha256(SECRET.encode()).hexdigest(),
    ]
    assert "[sandbox stdout] token: ***" in task_log.messages
    assert not [message for message in task_log.messages if SECRET in message]
    assert SECRET not in json.dumps(result)
    shown = json.dumps({field: getattr(operator, field) for field in operator.template_fields})
    assert SECRET not in shown
    assert stamped and [giving_away(metadata, SECRET) for metadata in stamped] == [[]]
    assert destroyed(operator._sandbox_id)


def test_a_deferred_tasks_private_env_value_is_in_no_metadata_and_masked_in_the_event(
    in_a_dag, plain_server, task_log
) -> None:
    operator = in_a_dag(
        plain_server,
        deferrable=True,
        poll_interval=0.2,
        command='echo "token: $API_TOKEN"',
        private_env={"API_TOKEN": "{{ params.token }}"},
        params={"token": SECRET},
    )
    with pytest.raises(TaskDeferred) as deferral:
        operator.execute({})

    # Handed to the trigger, the sandbox runs the command with its metadata as created.
    assert giving_away(metadata_on(plain_server, operator._sandbox_id), SECRET) == []
    event = run_trigger(rebuilt(deferral.value.trigger))
    assert SECRET not in json.dumps(event)
    result = OpenSandboxOperator.execute_complete(operator, {}, event)
    assert result == {"exit_code": 0, "stdout": "token: ***\n"}
    assert destroyed(operator._sandbox_id)


def test_the_json_the_command_wrote_to_xcom_path_is_the_tasks_result(
    in_a_dag, plain_server
) -> None:
    operator = in_a_dag(
        plain_server,
        command="""echo '{"rows": 2, "day": "{{ ds }}"}' > result.json; echo noise""",
        workdir="/srv/job",
        xcom_path="result.json",
    )
    assert operator.execute({}) == {"rows": 2, "day": "2026-01-02"}
    assert destroyed(operator._sandbox_id)


def test_a_command_that_wrote_no_result_fails_the_task_saying_so(in_a_dag, plain_server) -> None:
    operator = in_a_dag(plain_server, command="echo done", xcom_path="/srv/result.json")
    with pytest.raises(AirflowException) as failure:
        operator.execute({})
    message = str(failure.value)
    assert "result could not be read from '/srv/result.json'" in message
    assert "does not exist in the sandbox" in message
    assert destroyed(operator._sandbox_id)


def test_a_failed_copy_leaves_the_previous_output_and_no_partial(
    in_a_dag, plain_server, tmp_path
) -> None:
    previous = tmp_path / "reports" / "big.bin"
    previous.parent.mkdir()
    previous.write_bytes(b"the last good copy\n")
    operator = in_a_dag(
        plain_server,
        command="head -c 5000 /dev/zero > /srv/big",
        outputs={"/srv/big": ObjectStoragePath(f"file://{previous}")},
        max_file_bytes=1000,
    )
    with pytest.raises(SandboxFileTooLargeError, match="1000"):
        operator.execute({})
    assert previous.read_bytes() == b"the last good copy\n"
    assert [path.name for path in previous.parent.iterdir()] == ["big.bin"]
    assert destroyed(operator._sandbox_id)


def test_an_output_replaces_the_previous_copy_whole(in_a_dag, plain_server, tmp_path) -> None:
    previous = tmp_path / "reports" / "day.txt"
    previous.parent.mkdir()
    previous.write_text("yesterday, a longer line than today's\n")
    operator = in_a_dag(
        plain_server,
        command="echo today > /srv/day.txt",
        outputs={"/srv/day.txt": f"file://{previous}"},
    )
    operator.execute({})
    assert previous.read_text() == "today\n"
    assert [path.name for path in Path(previous.parent).iterdir()] == ["day.txt"]
    assert destroyed(operator._sandbox_id)
