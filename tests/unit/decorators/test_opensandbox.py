"""@task.opensandbox's script, run here by the local Python in place of the sandbox's."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from airflow.providers.common.compat.sdk import dag, task

from opensandbox_provider.decorators import opensandbox as decorator
from opensandbox_provider.operators.opensandbox import OpenSandboxOperator
from opensandbox_provider.pool import WarmPool

if TYPE_CHECKING:
    import pathlib


@task.opensandbox(image="python:3.12-slim")
def add(x: int, y: int = 1) -> dict:
    import math

    return {"sum": x + y, "pi": round(math.pi, 2)}


@task.opensandbox(image="python:3.12-slim")
def unserializable() -> object:
    return object()


@task.opensandbox(image="python:3.12-slim")
def typed(path: pathlib.PurePosixPath) -> str:
    # Imported here, as in a sandbox; the annotation above names it before it is imported.
    import pathlib

    return pathlib.PurePosixPath("/srv", path).as_posix()


@task.opensandbox(image="python:3.12-slim", python_command=sys.executable)
def interpreter() -> str:
    import sys

    return sys.executable


@task.opensandbox(image="python:3.12-slim", python_command="/opt/missing env/bin/python")
def nowhere() -> None:
    return None


def the_task(function: Any, *args: Any) -> Any:
    @dag(schedule=None, start_date=datetime(2026, 1, 1))
    def holder() -> None:
        function(*args)

    return holder().task_dict[function.function.__name__]


@pytest.fixture
def sandbox_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Runs what the decorated operator would send, with paths under ``tmp_path``."""
    for name in ("SCRIPT", "ARGUMENTS", "RESULT"):
        monkeypatch.setattr(decorator, name, str(tmp_path / name.lower()))

    def run(operator: Any, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess:
        sent: dict[str, Any] = {}
        monkeypatch.setattr(
            OpenSandboxOperator, "execute", lambda self, context: sent.update(files=self.files)
        )
        operator.execute({})
        for target, content in sent["files"].items():
            Path(target).write_text(content)
        return subprocess.run(
            ["/bin/sh", "-c", operator.command], capture_output=True, text=True, env={"PATH": path}
        )

    return run


def test_the_function_runs_with_its_arguments_and_its_result_is_json(sandbox_run) -> None:
    done = sandbox_run(the_task(add, 2))
    assert done.returncode == 0, done.stderr
    assert json.loads(Path(decorator.RESULT).read_text()) == {"sum": 3, "pi": 3.14}


def test_a_result_that_is_not_json_fails_with_a_message_saying_so(sandbox_run) -> None:
    done = sandbox_run(the_task(unserializable))
    assert done.returncode == decorator.NOT_SERIALIZABLE
    assert "return value of unserializable() cannot be serialized as JSON" in done.stderr


def test_an_image_without_python_fails_with_a_message_saying_so(sandbox_run, tmp_path) -> None:
    done = sandbox_run(the_task(add, 2), path=str(tmp_path / "empty"))
    assert done.returncode == 127
    assert "needs python3 or python on the PATH of the image python:3.12-slim" in done.stderr


def test_a_parameter_may_be_annotated_with_a_type_the_function_imports(sandbox_run) -> None:
    done = sandbox_run(the_task(typed, "job"))
    assert done.returncode == 0, done.stderr
    assert json.loads(Path(decorator.RESULT).read_text()) == "/srv/job"


def test_python_command_is_the_interpreter_that_runs_the_function(sandbox_run) -> None:
    done = sandbox_run(the_task(interpreter))
    assert done.returncode == 0, done.stderr
    assert json.loads(Path(decorator.RESULT).read_text()) == sys.executable


def test_a_python_command_the_sandbox_lacks_fails_with_a_message_saying_so(sandbox_run) -> None:
    done = sandbox_run(the_task(nowhere))
    assert done.returncode == 127
    assert "was given python_command='/opt/missing env/bin/python', and the sandbox" in done.stderr


def test_an_argument_ending_in_sh_is_never_read_as_a_script_file() -> None:
    operator = the_task(add, "report.sh")
    operator.render_template_fields({"ds": "2026-01-02"})
    assert list(operator.op_args) == ["report.sh"]


def test_the_decorator_is_not_in_the_source_sent() -> None:
    source = the_task(add, 2).get_python_source()
    assert source.startswith("def add(") and "@task" not in source


def test_the_xcom_push_airflow_3_0_reads_off_the_operator_pushes_to_the_task_instance() -> None:
    pushed: dict[str, Any] = {}

    class TaskInstance:
        def xcom_push(self, key: str, value: Any) -> None:
            pushed[key] = value

    the_task(add, 2).xcom_push({"ti": TaskInstance()}, "extra", {"sum": 3})
    assert pushed == {"extra": {"sum": 3}}


WARM = WarmPool("py", 1, "redis://localhost:6379/0")


@task.opensandbox(warm_pool=WARM)
def pooled() -> int:
    return 1


def test_the_decorator_takes_the_warm_pool_as_the_operator_does() -> None:
    assert the_task(pooled).new_backend().warm_pool is WARM
